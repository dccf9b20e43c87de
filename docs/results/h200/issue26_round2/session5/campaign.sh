#!/usr/bin/env bash
# Issue 26, session 5's H200 campaign (stop 34's measurements were lost with its machine before they were copied,
# so this re-measures them first). Copy to .devcarry/ and start it with setsid (next/README.md); poll.sh follows it,
# tars its small files into $OUT/camp.tgz after every call, and interrupts it at the end.
# CPU rehearsal knobs: DEVICE=cpu SMOKE=1 PRECISION=fp32 BIG=4 PUBLISHED=<a CPU smoke artifact> FOLD_SIZE=32 FOLD_PRECISIONS=fp32.
# 1. the fold's logits against float32 HIGHEST on the GPU (benchmarks/probes/jax_fold_check.py), bf16 and tf32;
# 2. JAX bf16 batch 1 and 256, fold_batchnorm off, 5 repeats (this session's baseline on this machine);
# 3. JAX's whole NVIDIA table (tf32, bf16, batch 1..256, 5 repeats) with fold_batchnorm on;
# 4. PyTorch's NVIDIA table: resume session 4's artifact until poll.sh interrupts it.
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
echo $$ > "$out/campaign.pid"
cd "$(dirname "$0")/.."
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
# one command at a time, in the background so poll.sh can Ctrl-C it and its children; its log is current.log
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
inf() { python3 -m orchestrator scenario run scenarios/imagenet_resnet50_inference.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} "$@"; }
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
step start
P=${PRECISION:-bf16}
bg "$out/fold_check.jsonl" python3 benchmarks/probes/jax_fold_check.py --size "${FOLD_SIZE:-224}" --batch 64 --precisions "${FOLD_PRECISIONS:-bf16,tf32}"
step "fold check rc $?"
bg "$out/fold_off.log" inf --engines jax --precisions $P --set "matrix.batch_sizes=[1,${BIG:-256}]" --repeats 5 \
  --set "engines.jax.options.fold_batchnorm=false" --out "$out/fold_off" --label "jax-fold-off-b1-b256"
step "jax fold off b1,b256 x5 rc $?"
bg "$out/jax_table.log" inf --engines jax --set "engines.jax.options.fold_batchnorm=true" --out "$out/jax_table" \
  --repeats 5 --label "jax-fold-on-table"
step "jax table fold on rc $?"
grep -hE "^jax .* (ok|failed|invalid|timeout) " "$out"/fold_off.log "$out"/jax_table.log | tail -n 200 >> "$out/jax_runs.log"
published=${PUBLISHED:-docs/results/h200/issue26_round2/session4/imagenet_resnet50_inference/20261202T184803Z-42be8f}
cp -r "$published" "$out/inf_pytorch"  # a published copy resumes: the runs it makes re-make the shared weights
bg "$out/inf_pytorch.log" python3 -m orchestrator scenario resume "$out/inf_pytorch" --device "${DEVICE:-cuda}" --runtime local
step "inference pytorch resume rc $?"
echo 0 > "$out/finished"
