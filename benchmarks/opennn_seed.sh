#!/usr/bin/env bash
# The seed's claim checked on this GPU: build OpenNN's CUDA variant (library + bench's driver,
# one command), probe OpenNN alone (where its first steps spend their time), then the seed
# protocol (scenarios/opennn_seed.yaml) with OpenNN and every other usable engine.
#
# Usage: benchmarks/opennn_seed.sh VENDOR_DIR [DEPS] [OUT_DIR] [STAGE]
#   VENDOR_DIR  the pinned archives of images/opennn/sources.txt (offline)
#   DEPS        zlib/libjpeg .deb files (or an unpacked root) when the machine has no apt (default .devcarry/debs)
#   STAGE       build | probe | seed | all (default all)
# Environment: SOURCE (synthetic|prepared, default synthetic), ARCH (default 90), JOBS (default nproc).
set -euo pipefail
vendor=${1:?usage: benchmarks/opennn_seed.sh VENDOR_DIR [DEPS] [OUT_DIR] [STAGE]}
deps=${2:-.devcarry/debs}
out=${3:-results}
stage=${4:-all}
source_kind=${SOURCE:-synthetic}
bench() { python3 -m orchestrator "$@"; }

if [[ $stage == build || $stage == all ]]; then
  started=$SECONDS
  deps_args=(); [ -e "$deps" ] && deps_args=(--deps-prefix "$deps")
  bench env create opennn --cuda --vendor "$vendor" "${deps_args[@]}" --cuda-arch "${ARCH:-90}" --jobs "${JOBS:-$(nproc)}"
  echo "OpenNN CUDA build: $((SECONDS - started)) s"
fi
if [[ $stage == probe || $stage == all ]]; then
  # OpenNN alone, 1 epoch of 10,240 samples (80 steps: 32 warmup + windows of 40 and 8), both
  # precisions: the events file (runs/*/opennn/events.txt) time-stamps setup, OpenNN's CUDA warmup
  # and every block; a stall shows as a long opennn_cuda_warmup_s or first block.
  for autotune in default on; do
    extra=(); [[ $autotune == on ]] && extra=(--set engines.opennn.options.conv_autotune=true --set engines.opennn.options.conv_workspace_cap=uncapped)
    timeout 1500 python3 -m orchestrator scenario run scenarios/opennn_seed.yaml --device cuda --runtime local --engines opennn \
      --set workload.dataset.source=synthetic --set workload.dataset.samples=10240 --set workload.epochs=1 \
      --set matrix.repeats=1 --set measurement.timeout_s=1200 "${extra[@]}" --out "$out/opennn-probe-autotune-$autotune" || true
  done
fi
if [[ $stage == seed || $stage == all ]]; then
  engines=$(bench env --json | python3 -c 'import json,sys; print(",".join(e["engine"] for e in json.load(sys.stdin)["engines"] if e["usable"]))')
  bench scenario run scenarios/opennn_seed.yaml --device cuda --runtime local --engines "$engines" \
    --set "workload.dataset.source=$source_kind" --out "$out"
fi
