#!/usr/bin/env bash
# A one-node SLURM on this machine, for tests/test_slurm.py and for trying the cluster path by
# hand: installs Debian's slurm-wlm (22.05) and munge where missing, writes a slurm.conf for this
# node (its real CPUs and memory, one partition "cpu"), starts munged, slurmctld and slurmd, and
# waits until the node takes jobs. Needs root (CI is root on Debian 12). Stop with stop.sh.
# Already running: a slurm.conf of ours that differs from what this script writes now is
# rewritten and applied (scontrol reconfigure), the running jobs left alone.
#
#   scripts/slurm/start.sh && sbatch --wrap hostname && scripts/slurm/stop.sh
#
# Exit status: 0 running (already or now), 1 could not start (the reason on one line).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by lengen scripts/slurm/start.sh"
STATE=/var/spool/lengen-slurm   # slurmctld/slurmd state and logs: removed by stop.sh
NODE=$(hostname -s)

fail() { echo "slurm: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (to install packages and run slurmd); allowed: run as root"

# slurm.conf for this node, on stdout: the node as slurmd sees it (CPUs, sockets, cores,
# memory), less the UpTime field; sets HARDWARE
write_conf() {
  HARDWARE=$(slurmd -C | head -1 | sed -e "s/^NodeName=[^ ]* //" -e "s/ UpTime=.*//")
  cat <<EOF
$MARK
ClusterName=lengen
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# a requeued job waits cred_expire seconds before it starts again (default 120)
AuthInfo=cred_expire=5
# no cgroups in containers: plain process tracking, no task binding (issue #32)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
# start requeued and waiting jobs within seconds (defaults: a pass every 30-60 s)
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
# SIGTERM, then SIGKILL this many seconds later (preemption, scancel, the time limit)
KillWait=15
JobRequeue=1
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$NODE NodeAddr=127.0.0.1 $HARDWARE State=UNKNOWN
# up to 4 jobs share a CPU (no gang scheduling: they run at once): the tests' jobs mostly wait
# (for a checkpoint, a signal, a requeued job's start), so tests/test_slurm.py's sweeps run
# side by side instead of queueing for the node's CPUs
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
}

if sinfo -h -o %T 2>/dev/null | grep -q -E '^(idle|mixed|allocated)'; then
  if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF" && [ "$(write_conf)" != "$(cat "$CONF")" ]; then
    write_conf >"$CONF.new" && mv "$CONF.new" "$CONF"
    scontrol reconfigure || fail "scontrol reconfigure refused the new $CONF (see $STATE/slurmctld.log)"
    echo "slurm: already running; $CONF updated and applied (scontrol reconfigure)"
  else
    echo "slurm: already running ($(sinfo -h -o '%P %D node(s) %T' | head -1))"
  fi
  exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || fail "slurm is not installed and there is no apt-get; allowed: Debian/Ubuntu, or install slurm-wlm and munge yourself"
  echo "slurm: installing slurmctld slurmd slurm-client munge (apt)"
  export DEBIAN_FRONTEND=noninteractive
  # --no-install-recommends: the metapackage's recommends pull ~20 plugin packages we never use
  { apt-get update -q && apt-get install -y -q --no-install-recommends \
      slurmctld slurmd slurm-client munge; } >/tmp/lengen-slurm-apt.log 2>&1 \
    || fail "apt-get install failed (log: /tmp/lengen-slurm-apt.log)"
fi

if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
  fail "$CONF exists and was not written by this script; allowed: a machine without its own SLURM"
fi

# munge: the key is made by the package; munged must not run as root
[ -s /etc/munge/munge.key ] || { mungekey --create --force >/dev/null 2>&1 || \
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 status=none; }
chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged || fail "munged did not start (see /var/log/munge/munged.log)"
fi

mkdir -p "$STATE/ctld" "$STATE/d" /etc/slurm
write_conf >"$CONF"

slurmctld || fail "slurmctld did not start (see $STATE/slurmctld.log)"
slurmd || fail "slurmd did not start (see $STATE/slurmd.log)"

for _ in $(seq 60); do
  state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
  case "$state" in
    idle*|mixed*|allocated*) echo "slurm: running (partition cpu, node $NODE: $HARDWARE)"; exit 0 ;;
    down*|drain*) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
fail "the node did not become idle within 60 s (state: ${state:-none}; logs in $STATE)"
