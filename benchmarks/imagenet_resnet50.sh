#!/usr/bin/env bash
# The ImageNet-geometry training row: ResNet-50 v1.5, 224x224, batch 256, tf32 and bf16, 1 device.
# Usage: [DEVICES=N] benchmarks/imagenet_resnet50.sh [OUT_DIR] [ENGINES] [PRECISIONS]
set -euo pipefail
out=${1:-results}
engines=${2:-$(python3 -m orchestrator env --json | python3 -c 'import json,sys; print(",".join(e["engine"] for e in json.load(sys.stdin)["engines"] if e["usable"]))')}
precisions=${3:-tf32,bf16}
python3 -m orchestrator scenario run scenarios/imagenet_resnet50.yaml --device cuda --runtime local \
  --engines "$engines" --precisions "$precisions" --devices "${DEVICES:-1}" --out "$out"
