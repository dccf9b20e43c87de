#!/usr/bin/env bash
# chain.sh PART...: several campaign scripts of this folder on one machine, one after another (written in session 7;
# a machine's start costs 2-3 min of a session's 30): e.g. `bash .devcarry/chain.sh campaign overhead_campaign
# train_campaign`. Each part is sourced in this one shell, so poll.sh's interrupt (SIGTERM to campaign.pid, this
# shell, and Ctrl-C to the bench command in flight) stops the whole chain, not only one part; the setup
# (campaign_lib.sh: /tmp/camp emptied, the tree copied to /tmp/tree) is made once, and "finished" is written after
# the last part. Parts share /tmp/camp, each under its own names, and their lines go to one steps.log.
source "$(dirname "$0")/campaign_lib.sh"  # /tmp/camp, a copy of the tree in /tmp/tree (the cwd now), step, bg
CAMPAIGN_CHAIN=1
here=$(dirname "$0")  # this script's folder (relative: the copied tree's); $0 stays this script's in a sourced part
for part in "$@"; do
  part=${part%.sh}
  [ -f "$here/$part.sh" ] || { step "chain: no part $part.sh in $here"; continue; }
  step "chain: $part"
  # shellcheck disable=SC1090
  source "$here/$part.sh"
done
CAMPAIGN_CHAIN=0
finish
