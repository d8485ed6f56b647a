#!/usr/bin/env bash
# Stop what scripts/slurm/start.sh started: cancel every job, stop slurmd, slurmctld and munged
# (by their pid files) and remove the state and slurm.conf it wrote. Packages stay installed.
set -uo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by lengen scripts/slurm/start.sh"
STATE=/var/spool/lengen-slurm

if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
  echo "slurm: $CONF was not written by start.sh; nothing stopped" >&2
  exit 1
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
stop_pidfile /run/munge/munged.pid
rm -rf "$STATE"
rm -f "$CONF"
echo "slurm: stopped"
