#!/usr/bin/env bash
# Session M on the H200 (issue 26, fourth session). Knobs for a CPU rehearsal: DEVICE=cpu SMOKE=1, PAIRS, PRECISIONS, REPEATS.
# After: the split hashed beside the setup; JAX's batch starts placed before timing.
# 1. CIFAR 32x32 JAX tf32+bf16, the whole scenario (2 epochs), 1 repeat; 2. JAX step profile with command buffers
# off (every kernel visible to CUPTI) and on; 3. overhead pairs; 4. NVIDIA's table for JAX, 5 repeats;
# 5. NVIDIA's table for PyTorch, 5 repeats (interrupted by poll_h.sh when the budget ends; resumable).
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
echo $$ > "$out/campaign.pid"
cd "$(dirname "$0")/.."
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
inf() { python3 -m orchestrator scenario run scenarios/imagenet_resnet50_inference.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} "$@"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
step start
PRECS=${PRECISIONS:-tf32,bf16}
bg "$out/cifar_jax.log" python3 -m orchestrator scenario run scenarios/cifar_resnet50.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} \
  --engines jax --precisions $PRECS --repeats 1 --out "$out/cifar" --label jax-starts-placed
step "cifar jax rc $?"
grep -hE "^jax .* (ok|failed|invalid|timeout) " "$out/cifar_jax.log" >> "$out/steps.log"
spec=$(ls "$out"/cifar/cifar_resnet50/*/runs/jax-*bf16*/spec.json "$out"/cifar/cifar_resnet50/*/runs/jax-*/spec.json 2>/dev/null | head -1)
if [ -n "$spec" ]; then
  rm -rf "$out/nocb_run"; cp -r "$(dirname "$spec")" "$out/nocb_run"  # a copy: the sealed artifact keeps its files
  python3 - "$spec" "$out/nocb_run/spec_nocb.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); doc.setdefault("engine_options", {})["command_buffers"] = False
json.dump(doc, open(sys.argv[2], "w"))
PY
  PYTHONPATH=${PYTHONPATH:-}:$PWD/images/common:images/jax:benchmarks/probes bg "$out/profile_jax_nocb.log" timeout 240 python3 benchmarks/probes/step_profile.py "$out/nocb_run/spec_nocb.json" --steps ${PROFILE_STEPS:-50}
  step "profile jax no command buffers rc $?"
  PYTHONPATH=${PYTHONPATH:-}:$PWD/images/common:images/jax:benchmarks/probes bg "$out/profile_jax.log" timeout 240 python3 benchmarks/probes/step_profile.py "$spec" --steps ${PROFILE_STEPS:-50}
  step "profile jax rc $?"
  grep -h '^{' "$out"/profile_jax*.log >> "$out/step_profiles.jsonl"
fi
for engine in pytorch jax; do
  bg "$out/overhead_$engine.log" timeout 420 python3 benchmarks/overhead.py scenarios/cifar_resnet50.yaml $engine bf16 --device "${DEVICE:-cuda}" ${SMOKE:+--smoke} --pairs ${PAIRS:-2} --warmup 1 \
    --json-out "$out/overhead_${engine}_bf16.json"
  step "overhead $engine rc $?"
  grep pair "$out/overhead_$engine.log" >> "$out/steps.log"
done
bg "$out/inf_jax.log" inf --engines jax --precisions $PRECS --repeats ${REPEATS:-5} --out "$out/inf_jax" --label jax-starts-placed
step "inference jax rc $?"
bg "$out/inf_pytorch.log" inf --engines pytorch --precisions $PRECS --repeats ${REPEATS:-5} --out "$out/inf_pytorch" --label pytorch-hash-overlapped
step "inference pytorch rc $?"
echo 0 > "$out/finished"
