#!/usr/bin/env bash
# tools/mpirun_guard.sh ends a launcher whose rank 0 is gone: rank 0 exits at once while rank 1
# ignores SIGTERM and would sleep for 300 s, which mpirun waits for; under the guard the launcher
# and rank 1 are gone within the grace period (and a group that ends normally keeps its status).
# Usage: mpirun_guard_test.sh SOURCE_DIR   (exit 77 without mpirun)
set -uo pipefail
src=${1:?source directory}
mpirun=$(command -v mpirun) || { echo "SKIPPED: no mpirun (this build has no MPI)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
marker=guard-test-$$
start=$SECONDS
timeout 100 "$src/tools/mpirun_guard.sh" --grace 3 "$mpirun" --oversubscribe -np 2 bash -c \
  "if [ \"\$OMPI_COMM_WORLD_RANK\" = 0 ]; then exit 0; else trap '' TERM; exec -a $marker sleep 300; fi"
status=$?
took=$((SECONDS - start))
if pgrep -f "$marker" >/dev/null; then
  pkill -9 -f "$marker"
  echo "FAIL: rank 1 outlived the guard"
  exit 1
fi
if [ "$status" = 124 ] || ((took > 60)); then
  echo "FAIL: the launcher ran on for ${took}s after rank 0 had gone (status $status)"
  exit 1
fi
[ "$status" = 137 ] || { echo "FAIL: status $status, expected 137 (killed by the guard)"; exit 1; }
"$src/tools/mpirun_guard.sh" --grace 3 "$mpirun" --oversubscribe -np 2 bash -c 'exit 0' ||
  { echo "FAIL: a group that ended normally did not exit 0"; exit 1; }
"$src/tools/mpirun_guard.sh" --grace 3 "$mpirun" --oversubscribe -np 2 bash -c 'exit 5' >/dev/null 2>&1
[ $? != 0 ] || { echo "FAIL: a failed group's status was lost"; exit 1; }
echo "ok: the launcher ended ${took}s after rank 0 left, rank 1 with it"
