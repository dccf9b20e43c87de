#!/usr/bin/env bash
# The CIFAR-geometry table: ResNet-50 v1.5, 32x32, batch 128, 2 epochs, fp32/tf32/bf16, 3 repeats.
# Usage: benchmarks/cifar_resnet50.sh [OUT_DIR] [ENGINES]   (default engines: those usable here)
set -euo pipefail
out=${1:-results}
engines=${2:-$(python3 -m orchestrator env --json | python3 -c 'import json,sys; print(",".join(e["engine"] for e in json.load(sys.stdin)["engines"] if e["usable"]))')}
python3 -m orchestrator scenario run scenarios/cifar_resnet50.yaml --device cuda --runtime local \
  --engines "$engines" --set 'matrix.precisions=[fp32,tf32,bf16]' --repeats 3 --out "$out"
