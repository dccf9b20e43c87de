#!/usr/bin/env bash
# The TResNet paper's table on the H200 over several sessions (issue 26; written in session 6, run since session 11).
# Copy to .devcarry/ and start it with setsid as campaign.sh (README beside); poll.sh follows it and tars /tmp/camp.
# It runs benchmarks/tresnet_table.sh from a copy of the tree in /tmp/tree, its OUT_DIR /tmp/camp/tresnet seeded with
# the artifacts an earlier session brought back (STATE, default docs/results/h200/issue26_round2/tresnet: published
# copies, shared weights omitted; tresnet_sync.sh puts them there), so a fresh machine continues where the last
# one stopped: complete cells skipped, incomplete ones resumed, a search cut short too (from its finished probes).
# BUDGET_S (default 1500: a session's device time less a machine's start) stops tresnet_table.sh in time; poll.sh's
# interrupt is only the fallback. ENGINES (default pytorch,jax), REPEATS (default 5), CELLS, DEVICE, SMOKE pass on.
# EXPECT_GPU (default "NVIDIA H200"; empty: any) stops it at once on another GPU model: the table is one machine's,
# and its seeded artifacts would not resume there (bench refuses another model), while new cells would start there.
source "$(dirname "$0")/campaign_lib.sh"  # /tmp/camp, a copy of the tree in /tmp/tree, step, bg
expect=${EXPECT_GPU-NVIDIA H200}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
if [[ ${DEVICE:-cuda} != cpu && -n $expect && $gpu != "$expect" ]]; then
  step "stop: this machine's GPU is '${gpu:-none}', the table's is '$expect' (EXPECT_GPU)"; finish; exit 2
fi
state=${STATE:-docs/results/h200/issue26_round2/tresnet}
mkdir -p "$out/tresnet"
[ -d "$state/artifacts" ] && cp -r "$state/artifacts" "$out/tresnet/"
step "start: $(find "$out/tresnet" -name manifest.json 2>/dev/null | wc -l) artifact(s) from $state"
BUDGET_S=${BUDGET_S:-1500} bg "$out/tresnet.log" bash benchmarks/tresnet_table.sh "$out/tresnet" "${ENGINES:-pytorch,jax}" "${REPEATS:-5}"
step "tresnet_table.sh rc $?"
finish
