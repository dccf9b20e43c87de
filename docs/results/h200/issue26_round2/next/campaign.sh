#!/usr/bin/env bash
# The next H200 campaign of issue 26 (written in session 4, not yet run). Copy to .devcarry/ and start it with
# setsid as the earlier sessions did (README beside). Knobs for a CPU rehearsal: DEVICE=cpu SMOKE=1 PRECISION=fp32.
# 1. JAX's fold_batchnorm measured: bf16 batch 256 and batch 1, with and without (4 runs, about 1 min);
# 2. PyTorch's NVIDIA table: resume session 4's artifact (5 of 90 runs done) until poll.sh interrupts it.
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
echo $$ > "$out/campaign.pid"
cd "$(dirname "$0")/.."
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
# one bench command at a time, in the background so poll.sh can Ctrl-C it (it signals the command's children
# too: a shell function runs in a subshell whose child is bench); its log is current.log
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
inf() { python3 -m orchestrator scenario run scenarios/imagenet_resnet50_inference.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} "$@"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
step start
P=${PRECISION:-bf16}
for fold in true false; do
  for batch in ${BIG:-256} 1; do
    bg "$out/fold_${fold}_b$batch.log" inf --engines jax --precisions $P --set "matrix.batch_sizes=[$batch]" --repeats 1 \
      --set "engines.jax.options.fold_batchnorm=$fold" --out "$out/fold" --label "jax-fold-$fold-b$batch"
    step "jax fold_batchnorm=$fold b$batch rc $?"
  done
done
grep -hE "^jax .* (ok|failed|invalid|timeout) " "$out"/fold_*.log >> "$out/steps.log"
published=${PUBLISHED:-docs/results/h200/issue26_round2/session4/imagenet_resnet50_inference/20261202T184803Z-42be8f}
cp -r "$published" "$out/inf_pytorch"  # a published copy resumes: the runs it makes re-make the shared weights
bg "$out/inf_pytorch.log" python3 -m orchestrator scenario resume "$out/inf_pytorch" --device "${DEVICE:-cuda}" --runtime local
step "inference pytorch resume rc $?"
echo 0 > "$out/finished"
