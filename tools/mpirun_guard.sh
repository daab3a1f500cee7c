#!/usr/bin/env bash
# Runs a launcher (mpirun and its arguments) in a process group of its own and makes sure it ends
# once rank 0 is gone: when rank 0 (the process among the launcher's descendants whose environment
# says OMPI_COMM_WORLD_RANK=0) has exited or is a zombie and the launcher is still running after
# GRACE seconds, the launcher, its process group and every process below it are killed, and the
# guard waits until they are gone. So a group whose ranks die at start-up (a crash, a bad flag)
# cannot leave mpirun waiting on the others or on zombies, in CI or in a pod.
# Signals to the guard (TERM, INT) go to rank 0, which stops the group the orderly way, as
# tools/lws_launch.sh does. Exits with the launcher's status, or 137 when it had to be killed.
# Usage: tools/mpirun_guard.sh [--grace SECONDS] LAUNCHER [ARGS...]   (MPIRUN_GUARD_GRACE_S, default 30)
set -uo pipefail
grace=${MPIRUN_GUARD_GRACE_S:-30}
if [ "${1:-}" = --grace ]; then grace=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: mpirun_guard.sh [--grace SECONDS] LAUNCHER [ARGS...]" >&2; exit 2; }

setsid "$@" &
launcher=$!

descendants() {  # pids below $1
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}
# The rank of each live (not zombie) descendant that has one, as "pid rank" lines.
ranks() {
  local pid rank
  for pid in $(descendants "$launcher"); do
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && continue
    rank=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$rank" ] && echo "$pid $rank"
  done
}
rank0_pid() { ranks | awk '$2 == 0 {print $1; exit}'; }
alive() {  # a process that exists and is not a zombie
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
forward() {
  local r
  r=$(rank0_pid)
  if [ -n "$r" ]; then kill -TERM "$r" 2>/dev/null; else kill -TERM "$launcher" 2>/dev/null; fi
}
trap forward TERM INT

# Rank 0 is gone once the ranks have started (some live descendant has a rank) and none is rank 0,
# or once every rank is gone.
started=0
gone_at=""
while kill -0 "$launcher" 2>/dev/null && alive "$launcher"; do
  live=$(ranks)
  [ -n "$live" ] && started=1
  if [ -z "$gone_at" ] && ((started)) && ! awk '$2 == 0 {found = 1} END {exit !found}' <<<"$live"; then
    gone_at=$SECONDS
  fi
  if [ -n "$gone_at" ] && ((SECONDS - gone_at >= grace)); then
    echo "mpirun_guard: rank 0 ended ${grace}s ago and the launcher is still running: killing it and its ranks" >&2
    # The ranks may sit in process groups of their own: each descendant, then the launcher's group.
    doomed=$(descendants "$launcher")
    for pid in $doomed; do kill -KILL "$pid" 2>/dev/null; done
    kill -KILL -- "-$launcher" 2>/dev/null
    wait "$launcher" 2>/dev/null
    # A killed process lingers until the kernel has torn it down (longer on a busy host): the
    # guard returns only once none of them runs any more, so nothing outlives it.
    for ((tries = 0; tries < 100; ++tries)); do
      left=0
      for pid in $doomed; do alive "$pid" && left=1; done
      ((left)) || break
      sleep 0.1
    done
    exit 137
  fi
  sleep 1
done
wait "$launcher"
