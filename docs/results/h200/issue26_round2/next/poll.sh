#!/usr/bin/env bash
# poll.sh SECONDS [interrupt]: follow the campaign for SECONDS (or until it finishes); with 'interrupt', stop the
# campaign script and Ctrl-C the bench command it is running, and its children (bench seals the artifact; session 4's
# poll_h.sh signalled only the subshell of a shell function, so bench ran on); then tar the campaign's small files
# (no datasets, no weights) into $OUT/camp.tgz.
limit=${1:-540}; mode=${2:-}
camp=/tmp/camp; end=$((SECONDS + limit))
while [ $SECONDS -lt $end ] && [ ! -f $camp/finished ]; do sleep 3; done
if [ "$mode" = interrupt ] && [ ! -f $camp/finished ]; then
  [ -f $camp/campaign.pid ] && kill -TERM "$(cat $camp/campaign.pid)" 2>/dev/null
  pid=$(cat $camp/current.pid 2>/dev/null)
  if [ -n "$pid" ]; then
    pkill -INT -P "$pid" 2>/dev/null; kill -INT "$pid" 2>/dev/null
    for _ in $(seq 90); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && echo "bench $pid still running after 90 s" >> $camp/steps.log
  fi
  echo "$(date -u +%H:%M:%S) interrupted by poll.sh" >> $camp/steps.log
fi
cat $camp/steps.log 2>/dev/null
tail -n 4 $camp/current.log 2>/dev/null
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/camp.tgz" -C /tmp --exclude='*.safetensors' --exclude='*.npy' --exclude='*.pt' --exclude='*.bin' camp
  ls -la "$OUT/camp.tgz"
fi
