#!/usr/bin/env bash
# Install Slurm and MUNGE from Debian and start a one-node cluster on this host (run as root).
#
#   .ci/slurm-setup.sh            install (if needed), configure, start, wait until the node is idle
#
# The cluster: munged, slurmctld and slurmd on this host, one partition 'debug' (the default)
# holding this node, ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, no accounting
# (bench follows jobs with squeue/scontrol, never sacct). Job slots: SelectType=select/cons_tres
# with CR_Core hands each job the cores it asks for (bench's jobs: one task, one CPU), so the node
# runs as many jobs at once as it has CPUs; a host with a single CPU is declared with 2
# (SlurmdParameters=config_overrides) so that two jobs can always run at once (bench's tests of a
# matrix in flight need it). After (re)configuring, two jobs are submitted to check they run together.
# Safe to run again: a running cluster whose node is idle and whose slurm.conf is unchanged is left
# as it is; a changed slurm.conf is written and both daemons restarted (do that on an idle cluster:
# the controller's saved state keeps the queue, but a job running meanwhile may be lost).
#
# Environment: SLURM_PARTITION (default debug), SLURM_SETUP_TIMEOUT (seconds to wait, default 120).
set -euo pipefail

PARTITION="${SLURM_PARTITION:-debug}"
WAIT_S="${SLURM_SETUP_TIMEOUT:-120}"
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm

log() { echo "slurm-setup: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root"; exit 1
fi

node_state() { sinfo -h -N -o '%t' 2>/dev/null | head -n1 | tr -d '*~#!%$@^-'; }

# 1. Packages (waits for another apt/dpkg to finish instead of failing on its lock).
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  log "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends slurm-wlm munge
fi

# 2. MUNGE: a key, its run folder, the daemon (as the munge user).
install -d -o munge -g munge -m 0700 /etc/munge
install -d -o munge -g munge -m 0711 /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating /etc/munge/munge.key"
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --keyfile=/etc/munge/munge.key --force
  else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
    sleep 0.2
  done
fi
munge -n | unmunge >/dev/null || { log "munged does not answer"; exit 1; }

# 3. slurm.conf for this host (CPUs and memory as slurmd detects them).
HOST="$(hostname -s)"
NODE_LINE="$(slurmd -C | head -n1)"          # NodeName=<host> CPUs=.. Boards=.. ... RealMemory=..
OVERRIDES=""
if [ "$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")" -lt 2 ] 2>/dev/null; then
  # a single CPU: declare two cores, so that two one-CPU jobs fit at once (slurmd takes the config over what it detects)
  NODE_LINE="NodeName=${HOST} CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 $(grep -o 'RealMemory=[0-9]*' <<<"$NODE_LINE")"
  OVERRIDES="SlurmdParameters=config_overrides"
fi
install -d -m 0755 "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd
NEW_CONF="$(mktemp)"
trap 'rm -f "$NEW_CONF"' EXIT
cat > "$NEW_CONF" <<EOF
# Written by bench's .ci/slurm-setup.sh: a one-node cluster on ${HOST}.
ClusterName=bench
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
${OVERRIDES}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=60
KillWait=10
MinJobAge=300
${NODE_LINE} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=${PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# Unchanged and up: nothing to do. Changed: written, and the daemons restarted to read it.
RESTART=0
if [ -f "$CONF_DIR/slurm.conf" ] && cmp -s "$NEW_CONF" "$CONF_DIR/slurm.conf"; then
  if command -v sinfo >/dev/null 2>&1 && [ "$(node_state)" = "idle" ]; then
    log "cluster already up: $(sinfo -h -o '%P %a %D %t %c' | tr '\n' ' ')(CPUs = job slots)"
    exit 0
  fi
else
  [ -f "$CONF_DIR/slurm.conf" ] && { log "slurm.conf changed: writing it and restarting the daemons"; RESTART=1; }
  install -m 0644 "$NEW_CONF" "$CONF_DIR/slurm.conf"
fi
# Debian's packages read /etc/slurm; some tools look for /etc/slurm-llnl.
[ -e /etc/slurm-llnl ] || ln -s "$CONF_DIR" /etc/slurm-llnl

# 4. Daemons (no systemd here: start them directly; they daemonize).
stop_pidfile() {  # the daemon of this pid file, stopped and waited for
  local pid
  pid="$(cat "$1" 2>/dev/null || true)"
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}
if [ "$RESTART" = 1 ]; then
  stop_pidfile /run/slurmd.pid
  stop_pidfile /run/slurmctld.pid
fi
if ! scontrol ping 2>/dev/null | grep -q 'is UP'; then
  log "starting slurmctld"
  pkill_pidfile() { [ -s "$1" ] && kill "$(cat "$1")" 2>/dev/null || true; }
  pkill_pidfile /run/slurmctld.pid
  /usr/sbin/slurmctld -i
fi
if ! { [ -s /run/slurmd.pid ] && kill -0 "$(cat /run/slurmd.pid)" 2>/dev/null; }; then
  log "starting slurmd"
  /usr/sbin/slurmd
fi

# 5. Wait until the node is idle.
deadline=$(( $(date +%s) + WAIT_S ))
while :; do
  state="$(node_state || true)"
  if [ "$state" = "idle" ]; then break; fi
  if [ "$state" = "down" ] || [ "$state" = "drain" ]; then
    scontrol update nodename="$HOST" state=resume 2>/dev/null || true
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "the node did not become idle within ${WAIT_S}s (state: ${state:-unknown})"
    tail -n 20 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 || true
    exit 1
  fi
  sleep 1
done
log "cluster up: $(sinfo -h -o '%P %a %D %t %c' | tr '\n' ' ')(CPUs = job slots)"

# 6. Two jobs at once (bench's tests of a matrix in flight rely on it).
jobs=()
for _ in 1 2; do jobs+=("$(sbatch --parsable --ntasks=1 --output=/dev/null --job-name=slurm-setup-check --wrap='sleep 30')"); done
deadline=$(( $(date +%s) + 30 ))
running=0
while [ "$(date +%s)" -lt "$deadline" ]; do
  running="$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" -t RUNNING -o %i | wc -l)"
  [ "$running" -ge 2 ] && break
  sleep 0.5
done
scancel "${jobs[@]}" 2>/dev/null || true
if [ "$running" -lt 2 ]; then
  log "two jobs did not run at once (running: $running); check the node's CPUs and SelectTypeParameters"
  exit 1
fi
log "two jobs ran at once"
