#!/usr/bin/env bash
# Session J on the H200 (issue 26, round two, second session):
# 1. scope: PyTorch bf16 b256 inference with Inductor freezing (default now) and without; JAX bf16 b1 (setup times
#    after the on-device normalisation; a spec for the probe);
# 2. the JAX batch-1 probe; 3. overhead (3 alternating pairs after a warm-up run, JAX and PyTorch bf16);
# 4. NVIDIA's inference table, 5 repeats, repeats outermost (interrupted by poll_h.sh when the budget ends).
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
cd "$(dirname "$0")/.."
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
inf() { python3 -m orchestrator scenario run scenarios/imagenet_resnet50_inference.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} "$@"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
step start
inf --engines pytorch --precisions bf16 --set "matrix.batch_sizes=[${BIG:-256}]" --repeats 1 --out "$out/scope" --label freezing-on > "$out/scope_freeze_on.log" 2>&1
step "scope pytorch b256 freezing on rc $?"
inf --engines pytorch --precisions bf16 --set "matrix.batch_sizes=[${BIG:-256}]" --repeats 1 --out "$out/scope" --label freezing-off \
  --set engines.pytorch.options.freezing=false > "$out/scope_freeze_off.log" 2>&1
step "scope pytorch b256 freezing off rc $?"
inf --engines jax --precisions bf16 --set 'matrix.batch_sizes=[1]' --repeats 1 --out "$out/scope" --label jax-b1 > "$out/scope_jax_b1.log" 2>&1
step "scope jax b1 rc $?"
grep -hE "^(pytorch|jax) .* (ok|failed|invalid|timeout) " "$out"/scope_*.log >> "$out/steps.log"
# freezing stays the default only when it ran and was not slower
extra=$(python3 - "$out/scope/imagenet_resnet50_inference" <<'PY'
import json, sys
from pathlib import Path
got = {}
for art in Path(sys.argv[1]).iterdir():
    label = (art / "label.json")
    if not label.is_file():
        continue
    name = json.loads(label.read_text())["label"]
    run = json.loads(next(art.glob("runs/*/run.json")).read_text())
    got[name] = run["throughput"] if run["status"] == "ok" else None
on, off = got.get("freezing-on"), got.get("freezing-off")
print("" if on and (not off or on >= 0.995 * off) else "--set engines.pytorch.options.freezing=false")
PY
)
step "matrix extra: [$extra]"
spec=$(ls "$out"/scope/imagenet_resnet50_inference/*/runs/jax-bf16-optimized-b1-d1-r1/spec.json 2>/dev/null | head -1)
if [ -n "$spec" ]; then
  PYTHONPATH=$PYTHONPATH:images/jax timeout 240 python3 benchmarks/probes/jax_infer_probe.py "$spec" --calls ${PROBE_CALLS:-500} --warmup ${PROBE_WARMUP:-50} > "$out/jax_infer_probe.jsonl" 2> "$out/jax_infer_probe.log"
  step "jax probe rc $?"
fi
for engine in jax pytorch; do
  timeout 420 python3 benchmarks/overhead.py scenarios/cifar_resnet50.yaml $engine bf16 --device "${DEVICE:-cuda}" ${SMOKE:+--smoke} --pairs ${PAIRS:-3} --warmup 1 \
    --json-out "$out/overhead_${engine}_bf16.json" > /dev/null 2> "$out/overhead_$engine.log"
  step "overhead $engine rc $?"
  grep pair "$out/overhead_$engine.log" >> "$out/steps.log"
done
inf --engines pytorch,jax --precisions ${PRECISIONS:-tf32,bf16} --repeats ${REPEATS:-5} --out "$out/inf" $extra > "$out/inf.log" 2>&1 &
echo $! > "$out/inf.pid"
wait $!
step "inference rc $?"
for art in "$out"/inf/imagenet_resnet50_inference/*/; do
  python3 benchmarks/inference_table.py "$art" --goals > "$out/inference_table.md" 2>&1
done
echo 0 > "$out/finished"
