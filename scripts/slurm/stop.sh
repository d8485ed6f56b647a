#!/usr/bin/env bash
# Stop what scripts/slurm/start.sh started: cancel every job, stop slurmd, slurmctld and munged
# (by their pid files) and remove the state and slurm.conf it wrote. Packages stay installed.
set -uo pipefail

# The three paths are start.sh's; the variables exist so tests/scripts/test_slurm_stop.py can
# run this script against scratch paths, never against the machine's SLURM.
CONF=${LENGEN_SLURM_CONF:-/etc/slurm/slurm.conf}
MARK="# written by lengen scripts/slurm/start.sh"
STATE=${LENGEN_SLURM_STATE:-/var/spool/lengen-slurm}
MUNGE_PID=${LENGEN_MUNGE_PID:-/run/munge/munged.pid}

if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
  echo "slurm: $CONF was not written by start.sh; nothing stopped" >&2
  exit 1
fi
# no slurm.conf and no state: start.sh's SLURM is not here (it said "slurm: stopped": SL03)
if [ ! -e "$CONF" ] && [ ! -e "$STATE" ]; then
  echo "slurm: nothing to stop (no $CONF, no $STATE: start.sh's SLURM is not running here)"
  exit 0
fi

scancel --full --quiet --user=root 2>/dev/null || true   # jobs first: their steps end with slurmd

stop_pidfile() {  # stop_pidfile <file>: SIGTERM the daemon named there, wait up to 10 s
  local pid
  [ -f "$1" ] && pid=$(cat "$1") || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  kill -KILL "$pid" 2>/dev/null || true
}

stop_pidfile "$STATE/slurmd.pid"
stop_pidfile "$STATE/slurmctld.pid"
stop_pidfile "$MUNGE_PID"
rm -rf "$STATE"
rm -f "$CONF"
echo "slurm: stopped"
