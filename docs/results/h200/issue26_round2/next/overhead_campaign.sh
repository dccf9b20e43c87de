#!/usr/bin/env bash
# Issue 26's overhead goal at 5 pairs per engine (written in session 7): benchmarks/overhead.py on the CIFAR scenario,
# bf16, one uncounted warm-up run, then PAIRS (default 5) pairs of bench against the engine run directly, PyTorch then
# JAX (ENGINES); about 9 min of H200 time (session 4's runs: ~30 s PyTorch, ~20 s JAX). Writes
# /tmp/camp/overhead_<engine>_bf16.json and .log. Copy to .devcarry/ and start it as campaign.sh, alone or as a part
# of chain.sh; OVERHEAD_TIMEOUT_S (default 600) bounds each engine, as sessions 2-4 did. DEVICE=cpu SMOKE=1 PAIRS=1
# rehearses it on a CPU.
source "$(dirname "$0")/campaign_lib.sh"  # /tmp/camp, a copy of the tree in /tmp/tree, step, bg, finish
smoke=(); [ "${SMOKE:-0}" = 1 ] && smoke=(--smoke)
step "overhead start"
for engine in ${ENGINES:-pytorch jax}; do
  bg "$out/overhead_${engine}.log" timeout "${OVERHEAD_TIMEOUT_S:-600}" python3 benchmarks/overhead.py scenarios/cifar_resnet50.yaml "$engine" bf16 \
    --pairs "${PAIRS:-5}" --device "${DEVICE:-cuda}" "${smoke[@]}" --json-out "$out/overhead_${engine}_bf16.json"
  step "overhead $engine rc $?"
done
finish
