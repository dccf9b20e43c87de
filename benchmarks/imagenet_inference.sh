#!/usr/bin/env bash
# NVIDIA's ResNet-50 inference table: 224x224, batch 1..256, tf32 and bf16, 5 repeats, every batch
# synchronised; then the table beside the reference's V100 rows, with the inference goals checked.
# Usage: [DEVICE=cpu SMOKE=1] benchmarks/imagenet_inference.sh [OUT_DIR] [ENGINES] [PRECISIONS] [REPEATS]
# (default engines: those usable here; an interrupted matrix is completed by `bench scenario resume ART`,
# then `python3 benchmarks/inference_table.py ART --goals` prints the table)
set -euo pipefail
out=${1:-results}
engines=${2:-$(python3 -m orchestrator env --json | python3 -c 'import json,sys; print(",".join(e["engine"] for e in json.load(sys.stdin)["engines"] if e["usable"]))')}
precisions=${3:-tf32,bf16}
repeats=${4:-5}
summary=$(python3 -m orchestrator scenario run scenarios/imagenet_resnet50_inference.yaml --device "${DEVICE:-cuda}" --runtime local ${SMOKE:+--smoke} \
  --engines "$engines" --precisions "$precisions" --repeats "$repeats" --out "$out" --json) || status=$?
artifact=$(printf '%s' "$summary" | python3 -c 'import json,sys; print(json.load(sys.stdin)["artifact"])')
python3 "$(dirname "$0")/inference_table.py" "$artifact" --goals || true
echo "artifact: $artifact"
exit "${status:-0}"
