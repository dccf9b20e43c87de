#!/usr/bin/env bash
# jax224_profile.sh (session 10, about 5 min of device time): is JAX's 224x224 step GPU-bound? Session 10's profile of
# train224's JAX run (steps_per_dispatch 5) counted 0.2 calls per step of the stem convolution and 80% GPU idle at a
# 38 ms step: CUPTI seems to record the kernels of the 5-step call's loop body once per call. This runs the same
# scenario at steps_per_dispatch 1 (bench's own figure at one step per call), then profiles that spec at 1 (every
# step a call of its own: every kernel traced) and at 5 (the benchmarked call): if the counts at 5 are a fifth of
# those at 1, the 5-step profile's per-step figures are a fifth of the truth and the step is as GPU-bound as at 1.
source "$(dirname "$0")/campaign_lib.sh"
device=${DEVICE:-cuda}; smoke=(); [ "${SMOKE:-0}" = 1 ] && smoke=(--smoke)
step "jax224_profile start"
bg "$out/jax224_k1.log" python3 -m orchestrator scenario run scenarios/imagenet_resnet50.yaml --engines jax \
  --precisions bf16 --devices 1 --repeats 1 --set engines.jax.options.steps_per_dispatch=1 --device "$device" \
  --runtime local "${smoke[@]}" --label "issue 26 jax 224 one step per call" --out "$out/jax224_k1"
step "jax224_k1 rc $?"
spec=$(ls -d "$out"/jax224_k1/*/*/runs/jax-bf16-optimized-b*-d1-r1 2>/dev/null | head -n 1)/spec.json
for k in 1 5; do
  bg "$out/profile_jax224_k$k.log" python3 benchmarks/probes/step_profile.py "$spec" --steps 10 --option "steps_per_dispatch=$k"
  step "profile jax224 k=$k rc $?"; grep '^{' "$out/profile_jax224_k$k.log" >> "$out/step_profiles.jsonl"
done
finish
