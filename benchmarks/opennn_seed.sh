#!/usr/bin/env bash
# The seed report's claim checked on this GPU, three ways (README "OpenNN"): build OpenNN's CUDA
# variant (library + bench's driver, one command), prove PyTorch captures every optimizer and
# precision in its whole-step CUDA graph, run the fair protocol (scenarios/opennn_seed.yaml: every
# engine's fastest correct path) and the report's own (scenarios/opennn_seed_as_published.yaml), then
# write the claims table (claimed | as published | fair) and publishable copies of both artifacts.
#
# Usage: benchmarks/opennn_seed.sh VENDOR_DIR [DEPS] [OUT_DIR] [STAGES]
#   VENDOR_DIR  the pinned archives of images/opennn/sources.txt (offline)
#   DEPS        zlib/libjpeg .deb files (or an unpacked root) when the machine has no apt (default .devcarry/debs)
#   OUT_DIR     where artifacts, published copies and the report go (default results/opennn_seed)
#   STAGES      comma-separated: build,graphs,fair,published,report,autotune (default build,graphs,fair,published,report)
# Environment: SOURCE (synthetic|prepared, default synthetic), ARCH (default 90), JOBS (default nproc),
#   REPEATS (default the scenarios' 3), DEVICE (default cuda), SMOKE=1 (the scenarios' --smoke: a CPU rehearsal).
set -euo pipefail
vendor=${1:?usage: benchmarks/opennn_seed.sh VENDOR_DIR [DEPS] [OUT_DIR] [STAGES]}
deps=${2:-.devcarry/debs}
out=${3:-results/opennn_seed}
stages=",${4:-build,graphs,fair,published,report},"
device=${DEVICE:-cuda}
bench() { python3 -m orchestrator "$@"; }
has() { [[ $stages == *",$1,"* ]]; }
common=(--device "$device" --runtime local --set "workload.dataset.source=${SOURCE:-synthetic}")
[[ -n ${REPEATS:-} ]] && common+=(--repeats "$REPEATS")
[[ ${SMOKE:-0} == 1 ]] && common+=(--smoke)
mkdir -p "$out"
log() { echo "[opennn_seed $(date -u +%H:%M:%S)] $*" | tee -a "$out/campaign.log"; }
usable() {  # the usable engines among $1 (comma-separated)
  bench env --json | python3 -c 'import json,sys; want=sys.argv[1].split(","); ok={e["engine"] for e in json.load(sys.stdin)["engines"] if e["usable"]}; print(",".join(e for e in want if e in ok))' "$1"
}
newest() { ls -1d "$1"/*/ 2>/dev/null | sort | tail -n 1 | sed 's:/$::'; }
run_scenario() {  # scenario file, engines wanted, artifact root
  local engines
  engines=$(usable "$2")
  log "$1 with $engines (not usable here: $(comm -23 <(tr , '\n' <<<"$2" | sort) <(tr , '\n' <<<"$engines" | sort) | paste -sd, -))"
  bench scenario run "$1" "${common[@]}" --engines "$engines" --out "$3" || log "$1: exit $? (the artifact keeps every run made)"
  local artifact
  artifact=$(newest "$3/$(basename "$1" .yaml)")
  bench results show "$artifact" >> "$out/campaign.log" 2>&1 || true
  bench results publish "$artifact" --out "$out/published/$(basename "$1" .yaml)" || true
}

if has build; then
  started=$SECONDS
  deps_args=(); [ -e "$deps" ] && deps_args=(--deps-prefix "$deps")
  cuda_args=(); [[ $device == cuda ]] && cuda_args=(--cuda --cuda-arch "${ARCH:-90}")
  bench env create opennn "${cuda_args[@]}" --vendor "$vendor" "${deps_args[@]}" --jobs "${JOBS:-$(nproc)}"
  log "OpenNN build: $((SECONDS - started)) s"
fi
if has graphs; then  # every parity optimizer x precision captured in PyTorch's whole-step CUDA graph
  # eager forward (compile off): the capture of optimizer and loss scaling is what is proved; the fair run compiles too
  graph_args=(--option compile=false); [[ $device == cpu ]] && graph_args+=(--batch 8 --steps 2)
  python3 benchmarks/pytorch_graph_matrix.py --device "$device" "${graph_args[@]}" 2>&1 | tee "$out/pytorch-graph-matrix.txt" \
    || log "graph matrix: exit $?"
fi
if has fair; then
  run_scenario scenarios/opennn_seed.yaml opennn,pytorch,jax,tensorflow "$out/artifacts"
fi
if has published; then
  run_scenario scenarios/opennn_seed_as_published.yaml opennn,pytorch,tensorflow "$out/artifacts"
fi
if has report; then
  fair=$(newest "$out/artifacts/opennn_seed") published=$(newest "$out/artifacts/opennn_seed_as_published")
  bench results report "$fair" --as-published "$published" --out "$out/report" && log "report: $out/report/report.md"
fi
if has autotune; then  # OpenNN's benchmark driver's cuDNN setting, bounded: where does its first step's time go?
  timeout 400 python3 -m orchestrator scenario run scenarios/opennn_seed_as_published.yaml "${common[@]}" --engines opennn \
    --set workload.dataset.samples=10240 --set workload.epochs=1 --set matrix.repeats=1 --set 'matrix.precisions=[bf16]' \
    --set measurement.timeout_s=240 --set engines.opennn.options.conv_autotune=true \
    --set engines.opennn.options.conv_workspace_cap=uncapped --out "$out/artifacts-autotune" || log "autotune probe: exit $?"
  probe=$(newest "$out/artifacts-autotune/opennn_seed_as_published")
  [ -n "$probe" ] && bench results publish "$probe" --out "$out/published/autotune" || true
fi
log "done"
