#!/usr/bin/env bash
# Session L on the H200 (issue 26, third session). Knobs for a CPU rehearsal: DEVICE=cpu SMOKE=1 BIG, PAIRS, PRECISIONS, REPEATS.
# 1. scope after "hold only what the steps read" and eval_shape init: JAX bf16 b1 (packed), b1 without telemetry,
#    b256; PyTorch bf16 b1 (setup parts); 2. NVIDIA's table for JAX, 5 repeats (repeats outermost);
# 3. overhead: PyTorch 2 pairs + 1 pair without telemetry, JAX 2 pairs; 4. NVIDIA's table for PyTorch, 5 repeats
#    (interrupted by poll_h.sh when the budget ends; resumable).
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
echo $$ > "$out/campaign.pid"
cd "$(dirname "$0")/.."
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
# one bench command at a time, in the background so poll_h.sh can Ctrl-C it; its log is current.log too
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
inf() { python3 -m orchestrator scenario run scenarios/imagenet_resnet50_inference.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} "$@"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
step start
P=${PRECISION1:-bf16}
bg "$out/scope_jax_b1.log" inf --engines jax --precisions $P --set 'matrix.batch_sizes=[1]' --repeats 1 --out "$out/scope" --label jax-b1
step "scope jax b1 rc $?"
BENCH_TELEMETRY_INTERVAL_S=0 bg "$out/scope_jax_b1_notelemetry.log" inf --engines jax --precisions $P --set 'matrix.batch_sizes=[1]' --repeats 1 --out "$out/scope" --label jax-b1-no-telemetry
step "scope jax b1 no telemetry rc $?"
bg "$out/scope_jax_big.log" inf --engines jax --precisions $P --set "matrix.batch_sizes=[${BIG:-256}]" --repeats 1 --out "$out/scope" --label jax-big
step "scope jax big rc $?"
bg "$out/scope_pytorch_b1.log" inf --engines pytorch --precisions $P --set 'matrix.batch_sizes=[1]' --repeats 1 --out "$out/scope" --label pytorch-b1
step "scope pytorch b1 rc $?"
grep -hE "^(pytorch|jax) .* (ok|failed|invalid|timeout) " "$out"/scope_*.log >> "$out/steps.log"
grep -rh "prepare:\|setup done" "$out/scope" --include=engine.log >> "$out/steps.log"
# the kernel time of the 32x32 training step (issue 26's "measured cause"): bench's own spec, profiled
cifar_samples=$([ -n "${SMOKE:-}" ] || echo "--set workload.dataset.samples=12800")
for engine in jax pytorch; do
  bg "$out/cifar_$engine.log" python3 -m orchestrator scenario run scenarios/cifar_resnet50.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} \
    --engines $engine --precisions $P --set workload.epochs=1 $cifar_samples --repeats 1 --out "$out/cifar" --label profile-$engine
  step "cifar $engine rc $?"
  spec=$(ls "$out"/cifar/cifar_resnet50/*/runs/$engine-*/spec.json 2>/dev/null | head -1)
  [ -n "$spec" ] && PYTHONPATH=${PYTHONPATH:-}:$PWD/images/common:images/$engine:benchmarks/probes bg "$out/profile_$engine.log" timeout 200 python3 benchmarks/probes/step_profile.py "$spec" --steps ${PROFILE_STEPS:-50}
  step "profile $engine rc $?"
  grep -h '^{' "$out/profile_$engine.log" >> "$out/step_profiles.jsonl"
done
bg "$out/inf_jax.log" inf --engines jax --precisions ${PRECISIONS:-tf32,bf16} --repeats ${REPEATS:-5} --out "$out/inf_jax" --label jax-held-prefix
step "inference jax rc $?"
for engine in pytorch jax; do
  bg "$out/overhead_$engine.log" timeout 420 python3 benchmarks/overhead.py scenarios/cifar_resnet50.yaml $engine bf16 --device "${DEVICE:-cuda}" ${SMOKE:+--smoke} --pairs ${PAIRS:-2} --warmup 1 \
    --json-out "$out/overhead_${engine}_bf16.json"
  step "overhead $engine rc $?"
  grep pair "$out/overhead_$engine.log" >> "$out/steps.log"
done
bg "$out/overhead_pytorch_notelemetry.log" timeout 300 python3 benchmarks/overhead.py scenarios/cifar_resnet50.yaml pytorch bf16 --device "${DEVICE:-cuda}" ${SMOKE:+--smoke} --pairs 1 --warmup 0 \
  --telemetry-off --json-out "$out/overhead_pytorch_bf16_telemetry_off.json"
step "overhead pytorch telemetry off rc $?"
bg "$out/inf_pytorch.log" inf --engines pytorch --precisions ${PRECISIONS:-tf32,bf16} --repeats ${REPEATS:-5} --out "$out/inf_pytorch" --label pytorch-held-prefix
step "inference pytorch rc $?"
echo 0 > "$out/finished"
