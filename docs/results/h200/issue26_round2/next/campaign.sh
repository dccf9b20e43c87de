#!/usr/bin/env bash
# The next H200 campaign of issue 26 (written in session 5). Copy to .devcarry/ and start it with setsid (README beside).
# It runs bench from a copy of the tree in /tmp/tree: every device call re-sends the working tree, and a run that
# starts while that copy is written can miss a module (session 5 lost one JAX run so).
# PyTorch's NVIDIA table: resume its published copy (session 8's, complete: 90 of 90, so a resume finds nothing to
# run; kept for a table that has to be resumed again, PUBLISHED=<artifact>) until poll.sh interrupts it
# (JAX_PUBLISHED=<artifact> resumes a JAX artifact first, as session 6 completed JAX's table).
source "$(dirname "$0")/campaign_lib.sh"  # /tmp/camp, a copy of the tree in /tmp/tree, step, bg
resume() { python3 -m orchestrator scenario resume "$1" --device "${DEVICE:-cuda}" --runtime local; }
step start
S=docs/results/h200/issue26_round2/session8
if [ -n "${JAX_PUBLISHED:-}" ]; then  # JAX's table is complete since session 6; a rehearsal may still resume one
  cp -r "$JAX_PUBLISHED" "$out/jax_table"
  bg "$out/jax_table.log" resume "$out/jax_table"
  step "jax table resume rc $?"
fi
cp -r "${PUBLISHED:-$S/pytorch_table/20261202T184803Z-42be8f}" "$out/inf_pytorch"
bg "$out/inf_pytorch.log" resume "$out/inf_pytorch"
step "inference pytorch resume rc $?"
finish
