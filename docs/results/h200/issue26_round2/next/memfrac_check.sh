#!/usr/bin/env bash
# memfrac_check.sh (session 17): a GPU check of JAX's memory_fraction (0.95 since session 15, never yet run on a GPU)
# on any GPU model, a part for chain.sh before a longer campaign: TResNet-M inference at batch 256, JAX, 1 repeat,
# into $out/memfrac (not the table's artifacts: it runs on whatever GPU came). It prints what the result reports:
# work.optimizations.memory_fraction (applied, its limit) and measurements.memory_limit_bytes, and the run's status.
# DEVICE=cpu SMOKE=1 rehearses it (memory_fraction is then not applied: JAX's CPU allocator has no such share).
source "$(dirname "$0")/campaign_lib.sh"  # /tmp/camp, a copy of the tree in /tmp/tree, step, bg
step "memfrac check on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
CELLS=tresnet_m-infer-b256 bg "$out/memfrac.log" bash benchmarks/tresnet_table.sh "$out/memfrac" jax 1
step "memfrac tresnet_table.sh rc $?"
python3 - "$out/memfrac" >> "$out/steps.log" 2>&1 <<'PY'
import json, pathlib, sys
for result in sorted(pathlib.Path(sys.argv[1]).glob("artifacts/*/*/*/*/runs/*/result.json")):
    doc = json.loads(result.read_text())
    opts = doc.get("work", {}).get("optimizations", {})
    print("memfrac", result.parent.name, doc.get("status"), json.dumps(opts.get("memory_fraction")),
          "memory_limit_bytes", doc.get("measurements", {}).get("memory_limit_bytes"))
PY
finish
