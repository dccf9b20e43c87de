# campaign_lib.sh: what every campaign script of this folder starts with (sourced, not run). The campaign's small
# files go to /tmp/camp (poll.sh tars them); bench runs from a copy of the tree in /tmp/tree, since every device
# call re-sends the working tree and a run that starts while that copy is written can miss a module.
# Gives step MESSAGE (a dated line of steps.log) and bg LOG COMMAND... (the command in the background, its pid and
# log where poll.sh finds them, waited for), and records the GPUs and the framework versions.
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
echo $$ > "$out/campaign.pid"
src="$(cd "$(dirname "$0")/.." && pwd)"
rm -rf /tmp/tree && cp -r "$src" /tmp/tree && cd /tmp/tree
export PYTHONPATH="/tmp/site:/tmp/tree:/tmp/tree/images/common"
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" > "$out/versions.txt" 2>&1
