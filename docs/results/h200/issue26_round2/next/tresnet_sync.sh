#!/usr/bin/env bash
# tresnet_sync.sh CAMP_TGZ [STATE]: bring a TResNet campaign call's camp.tgz into the tree (run it here, not on the
# device): every artifact under camp/tresnet/artifacts has its shared weights re-made from the seed
# (benchmarks/restore_init.py), is validated and is published into STATE (default
# docs/results/h200/issue26_round2/tresnet) at the same place, replacing the copy an earlier call left; the table,
# its JSON and the campaign's logs are copied beside. The next tresnet_campaign.sh seeds its OUT_DIR from STATE.
# Exit 1 (nothing replaced) when an artifact does not validate.
set -euo pipefail
tgz=$1; state=${2:-docs/results/h200/issue26_round2/tresnet}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar xzf "$tgz" -C "$work"
found=$(find "$work/camp/tresnet/artifacts" -name manifest.json 2>/dev/null | sort || true)
[ -n "$found" ] || { echo "tresnet_sync: no artifact in $tgz"; exit 1; }
for manifest in $found; do  # validate every one before replacing any
  artifact=$(dirname "$manifest")
  python3 benchmarks/restore_init.py "$artifact" > /dev/null
  python3 -m orchestrator results validate "$artifact" > /dev/null || { echo "tresnet_sync: $artifact does not validate"; exit 1; }
done
for manifest in $found; do
  artifact=$(dirname "$manifest"); rel=${artifact#"$work/camp/tresnet/"}
  rm -rf "${state:?}/$rel"; mkdir -p "$state/$(dirname "$rel")"
  python3 -m orchestrator results publish "$artifact" --out "$state/$(dirname "$rel")" > /dev/null
  echo "tresnet_sync: $state/$rel"
done
for file in tresnet_table.md tresnet_table.json campaign.log; do
  [ -f "$work/camp/tresnet/$file" ] && cp "$work/camp/tresnet/$file" "$state/"
done
for file in steps.log tresnet.log gpu.csv versions.txt; do
  [ -f "$work/camp/$file" ] && cat "$work/camp/$file" >> "$state/calls_$file"
done
exit 0
