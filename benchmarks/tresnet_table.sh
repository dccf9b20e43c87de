#!/usr/bin/env bash
# The TResNet paper's table on this GPU (README "TResNet-M against ResNet-50"): TResNet-M and
# ResNet-50 v1.5, bf16, 224x224, training and inference, each at 90% of its own maximal batch (one
# search per arch, mode and engine) and at a common batch of 256, REPEATS repeats; then
# benchmarks/tresnet_table.py prints the table beside the paper's V100 figures.
#
# Usage: [DEVICE=cpu SMOKE=1] [BUDGET_S=S] [CELLS=a,b] benchmarks/tresnet_table.sh [OUT_DIR] [ENGINES] [REPEATS]
#   OUT_DIR  default results/tresnet_table: artifacts/<cell>/<engine>/ (a searched cell: one artifact per
#            engine) or artifacts/<cell>/<engines>/ (common batch: one artifact), published/<cell>/
#            (copies for docs/results/, `bench results publish`), tresnet_table.md/.json, campaign.log
#   ENGINES  default: the usable ones among the scenario's (pytorch, jax, tensorflow)
#   REPEATS  default 5
#   CELLS    a subset of the 8 cells <arch>-<mode>-<max|b256> (default all, in the order below)
#   BUDGET_S stop (SIGTERM to bench: the run in flight is recorded interrupted, the artifact sealed)
#            once this many seconds have passed, exit 75; the same command again continues: a
#            complete cell is skipped, an incomplete one resumed (`bench scenario resume`), a search
#            cut short too: it takes over the probes its earlier sittings finished (probes.json), so a
#            search may span calls; one cut MAX_CUTS times (default 6) is left for a larger BUDGET_S.
#            SETUP_STALL_S: measurement.setup_stall_s of the searched cells (default the scenario's, 900 s):
#            a probe whose setup (JAX compiles its step there) stalls that long fails the search at once.
#            MIN_LEFT_S (default 60): nothing is started with less left; SEARCH_LEFT_S (default 480): a
#            search is started with less left only as a call's first work.
#   EXTRA_SETS  space-separated --set assignments for every new artifact (a resumed one keeps its own scenario),
#            e.g. EXTRA_SETS=engines.jax.options.memory_fraction=0.9
# Exit: 0 every cell complete; 1 a bench call failed (the table flags its runs); 75 budget spent.
#
# GPU time on one H200, PyTorch + JAX, 5 repeats (README; from the H200 artifacts' per-run wall times:
# a run on a new batch size, compile included, ~90 s PyTorch / 50 s JAX training, 55 / 40 s inference;
# a repeat on warm compile caches ~35 / 25 s training, 30 / 25 s inference; plus the timed steps):
#   8 searches of ~6 probes: ~47 min; runs, 8 cells x 2 engines x 5 repeats: ~57 min; about 1 h 45 min
#   in all (PyTorch ~61 min, JAX ~43 min), TResNet-M's compile taken as ResNet-50's (not measured yet).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/tresnet_table}
repeats=${3:-5}
device=${DEVICE:-cuda}
budget=${BUDGET_S:-0}
all_cells=tresnet_m-train-max,resnet50_v1.5-train-max,tresnet_m-train-b256,resnet50_v1.5-train-b256,tresnet_m-infer-max,resnet50_v1.5-infer-max,tresnet_m-infer-b256,resnet50_v1.5-infer-b256
cells=${CELLS:-$all_cells}
bench() { python3 -m orchestrator "$@"; }
mkdir -p "$out/artifacts" "$out/published"
log() { echo "[tresnet_table $(date -u +%H:%M:%S)] $*" | tee -a "$out/campaign.log" >&2; }
if [[ -z ${2:-} ]]; then
  engines=$(bench env --json | python3 -c 'import json,sys; ok={e["engine"] for e in json.load(sys.stdin)["engines"] if e["usable"]}; print(",".join(e for e in ("pytorch","jax","tensorflow") if e in ok))')
else
  engines=$2
fi

cell_sets() {  # the --set overrides of one cell: arch, mode, choice (GPU sizes; the smoke block sizes a CPU rehearsal)
  local arch=$1 mode=$2 choice=$3 extra
  echo "workload.model.arch=$arch"
  for extra in ${EXTRA_SETS:-}; do echo "$extra"; done  # a new artifact's own --set (a resumed one keeps its scenario)
  [[ $mode == infer ]] && echo "workload.mode=infer" && echo "measurement.window_steps=1"  # every batch synchronised
  if [[ $choice == b256 ]]; then
    echo "workload.batch.max_search={}"
    echo "workload.batch.size=${COMMON_BATCH:-$([[ ${SMOKE:-0} == 1 ]] && echo 8 || echo 256)}"
  elif [[ -n ${SETUP_STALL_S:-} ]]; then  # a searched cell: a probe's setup (JAX compiles there) bounded tighter
    echo "measurement.setup_stall_s=$SETUP_STALL_S"
  fi
  [[ ${SMOKE:-0} == 1 ]] && return
  if [[ $mode == train ]]; then  # 8192 samples (4.9 GB as float32 on the device) cover the limit
    echo "workload.dataset.samples=8192"
    if [[ $choice == max ]]; then  # 2048, 4096, then bisect to 128: ~6 probes; ~36 steps of ~2.7k, 10 warmup
      printf '%s\n' workload.batch.max_search.start=2048 workload.batch.max_search.limit=8192 \
        workload.batch.max_search.granularity=128 workload.epochs=12 workload.warmup_steps=10
    else  # 4 epochs of 32 steps, 10 warmup
      printf '%s\n' workload.epochs=4 workload.warmup_steps=10
    fi
  else  # inference: 32768 samples (19.7 GB on the device) cover the limit
    echo "workload.dataset.samples=32768"
    if [[ $choice == max ]]; then  # 8192, 16384, 32768, bisect to 1024: ~6 probes; ~20 steps of ~15k, 5 warmup
      printf '%s\n' workload.batch.max_search.start=8192 workload.batch.max_search.limit=32768 \
        workload.batch.max_search.granularity=1024 workload.epochs=10 workload.warmup_steps=5
    else  # one pass: 128 steps, 20 warmup
      printf '%s\n' workload.epochs=1 workload.warmup_steps=20
    fi
  fi
}

newest() { { ls -1d "$1"/*/*/ 2>/dev/null || true; } | sort | tail -n 1 | sed 's:/$::'; }
complete() { python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["complete"] else 1)' "$1/manifest.json" 2>/dev/null; }
left() { echo $((budget - SECONDS)); }
limited() {  # run the command "$@" within what is left of the budget (none: no limit); 124/137: the budget ran out
  if (( budget == 0 )); then "$@"; return; fi
  timeout -s TERM -k 30 "$(left)" "$@"  # bench seals and exits within seconds of a SIGTERM
}

searched() { compgen -G "$1/maxbatch/*/search.json" >/dev/null; }
probes_made() { python3 -c 'import json,sys; print(sum(len(json.load(open(p))["probes"]) for p in sys.argv[1:]))' \
  $(compgen -G "$1/maxbatch/*/probes.json" || true); }

unit() {  # one artifact: cell, its engines, its artifact root; 124/137: the budget ran out
  local cell=$1 with=$2 root=$3 arch mode choice artifact sets precision
  IFS=- read -r arch mode choice <<<"$cell"
  artifact=$(newest "$root")
  if [[ -n $artifact ]] && complete "$artifact"; then log "$cell $with: complete ($artifact)"; return 0; fi
  # An artifact cut during its search is resumed too: the search takes over the probes that fitted or ran out of
  # memory (maxbatch/*/probes.json, sealed at the cut) and resume moves aside the runs the cut recorded at the
  # scenario's placeholder batch (workload.batch.size), so they are never run at it.
  if [[ -n $artifact ]]; then
    if [[ $choice == max ]] && ! searched "$artifact"; then
      local cuts; cuts=$(compgen -G "$artifact/attempts/maxbatch-*/*/" | wc -l)
      if (( cuts >= ${MAX_CUTS:-6} )); then  # no probe finishes within a call: do not spend more on it
        log "$cell $with: its search was cut $cuts times; give this cell a larger BUDGET_S (CELLS=$cell)"; return 1
      fi
      log "$cell $with: resuming the search of $artifact ($(probes_made "$artifact") probe(s) made, cut $((cuts + 1)) time(s))"
    else
      log "$cell $with: resuming $artifact"
    fi
    limited python3 -m orchestrator scenario resume "$artifact" --runtime local --device "$device" >> "$out/campaign.log"
    return
  fi
  sets=(); while read -r line; do sets+=(--set "$line"); done < <(cell_sets "$arch" "$mode" "$choice")
  precision=(); [[ ${SMOKE:-0} == 1 ]] || precision=(--precisions bf16)  # the smoke block runs fp32 (a CPU without bf16 units)
  log "$cell $with: bench scenario run scenarios/tresnet_m.yaml ${sets[*]} (repeats: $repeats)"
  limited python3 -m orchestrator scenario run scenarios/tresnet_m.yaml --device "$device" --runtime local ${SMOKE:+--smoke} \
    --engines "$with" "${precision[@]}" --repeats "$repeats" "${sets[@]}" --label "tresnet_table $arch $mode $choice" \
    --out "$root" >> "$out/campaign.log"  # its tables to the log, progress on stderr
}

status=0 spent=0 worked=0
for cell in ${cells//,/ }; do
  [[ ,$all_cells, == *",$cell,"* ]] || { log "unknown cell $cell (known: $all_cells)"; exit 2; }
  # a searched cell: one artifact per engine (each search alone; their batches differ, so no cross-engine
  # comparison is lost); a common-batch cell: one artifact, every engine (cross-engine parity checked)
  if [[ $cell == *-max ]]; then units=${engines//,/ }; else units=$engines; fi
  for with in $units; do
    if (( budget > 0 && $(left) < ${MIN_LEFT_S:-60} )); then spent=1; break 2; fi  # too little left to start one
    root="$out/artifacts/$cell/${with//,/+}"
    artifact=$(newest "$root")
    if [[ $cell == *-max ]] && ! { [[ -n $artifact ]] && { complete "$artifact" || searched "$artifact"; }; } \
       && (( budget > 0 && worked && $(left) < ${SEARCH_LEFT_S:-480} )); then
      spent=1; log "$cell $with: a search needs a call of its own (${SEARCH_LEFT_S:-480} s); the same command continues"; break 2
    fi
    [[ -n $artifact ]] && complete "$artifact" || worked=1
    unit "$cell" "$with" "$root" || rc=$?
    if [[ ${rc:-0} == 124 || ${rc:-0} == 137 ]]; then spent=1; log "$cell $with: budget spent (${SECONDS} s); the same command continues"; break 2; fi
    [[ ${rc:-0} == 0 ]] || { status=1; log "$cell $with: exit $rc (the artifact keeps every run made)"; }
    unset rc
    artifact=$(newest "$root")
    if [[ -n $artifact ]] && complete "$artifact" && [[ ! -d $out/published/$cell/$(basename "$artifact") ]]; then
      bench results publish "$artifact" --out "$out/published/$cell" >/dev/null || log "$cell: publish of $artifact failed"
    fi
  done
done
if find "$out/artifacts" -name summary.json | grep -q .; then
  python3 "$here/tresnet_table.py" "$out/artifacts" | tee "$out/tresnet_table.md"
  python3 "$here/tresnet_table.py" "$out/artifacts" --json > "$out/tresnet_table.json"
fi
log "${SECONDS} s; artifacts under $out/artifacts, table $out/tresnet_table.md"
if (( spent )); then log "campaign incomplete: budget spent; run the same command again"; exit 75; fi
exit "$status"
