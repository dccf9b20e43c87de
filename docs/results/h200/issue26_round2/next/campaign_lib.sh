# campaign_lib.sh: what every campaign script of this folder starts with (sourced, not run). The campaign's small
# files go to /tmp/camp (poll.sh tars them); bench runs from a copy of the tree in /tmp/tree, since every device
# call re-sends the working tree and a run that starts while that copy is written can miss a module.
# Sourced again by a part of chain.sh (the setup made once, CAMPAIGN_LIB_DONE set) it only gives the functions;
# finish writes the "finished" that poll.sh waits for, except in a part of a chain (CAMPAIGN_CHAIN=1).
# Gives step MESSAGE (a dated line of steps.log), bg LOG COMMAND... (the command in the background, its pid and
# log where poll.sh finds them, waited for) and profile NAME ENGINE PRECISION (step_profile.py of a group's repeat 1,
# one JSON line in step_profiles.jsonl), and records the GPUs and the framework versions.
set -u
out=/tmp/camp
if [ -z "${CAMPAIGN_LIB_DONE:-}" ]; then
  rm -rf "$out"; mkdir -p "$out"
  echo $$ > "$out/campaign.pid"
  src="$(cd "$(dirname "$0")/.." && pwd)"
  rm -rf /tmp/tree && cp -r "$src" /tmp/tree && cd /tmp/tree
  export PYTHONPATH="/tmp/site:/tmp/tree:/tmp/tree/images/common"
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
  python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
  CAMPAIGN_LIB_DONE=1
fi
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
finish() { [ "${CAMPAIGN_CHAIN:-0}" = 1 ] || echo 0 > "$out/finished"; }  # chain.sh writes it after its last part
profile() {  # profile NAME ENGINE PRECISION: step_profile.py of repeat 1 of that group in $out/NAME (a CUDA GPU only)
  local spec
  spec=$(ls -d "$out/$1"/*/*/runs/"$2-$3"-optimized-b*-d1-r1 2>/dev/null | head -n 1)/spec.json
  if [ -f "$spec" ] && [ "${DEVICE:-cuda}" = cuda ]; then
    bg "$out/profile_$1_$2_$3.log" python3 benchmarks/probes/step_profile.py "$spec" --steps 10
    step "profile $1 $2 $3 rc $?"; grep '^{"engine"' "$out/profile_$1_$2_$3.log" >> "$out/step_profiles.jsonl"
  else
    step "profile $1 $2 $3: no run $spec on a CUDA device"
  fi
}
