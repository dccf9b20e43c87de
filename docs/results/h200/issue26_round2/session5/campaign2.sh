#!/usr/bin/env bash
# Issue 26 session 5, second machine (the first was taken back during call 2): resume the JAX table (fold on) from
# call 1's published copy, then PyTorch's table from session 4's, until poll.sh interrupts it.
set -u
out=/tmp/camp; rm -rf "$out"; mkdir -p "$out"
echo $$ > "$out/campaign.pid"
cd "$(dirname "$0")/.."
step() { echo "$(date -u +%H:%M:%S) $*" >> "$out/steps.log"; }
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & local pid=$!; echo $pid > "$out/current.pid"; ln -sf "$log" "$out/current.log"; wait $pid; }
resume() { python3 -m orchestrator scenario resume "$1" --device "${DEVICE:-cuda}" --runtime local; }
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.csv" 2>&1
step start
S=docs/results/h200/issue26_round2
cp -r "${JAX_PUBLISHED:-$S/session5/call1_jax_table/20261203T061258Z-037bb7}" "$out/jax_table"
bg "$out/jax_table.log" resume "$out/jax_table"
step "jax table resume rc $?"
cp -r "${PUBLISHED:-$S/session4/imagenet_resnet50_inference/20261202T184803Z-42be8f}" "$out/inf_pytorch"
bg "$out/inf_pytorch.log" resume "$out/inf_pytorch"
step "inference pytorch resume rc $?"
echo 0 > "$out/finished"
