#!/usr/bin/env bash
# Starts one pod of a LeaderWorkerSet group of latentserve ranks (deploy/k8s/overlays/multinode).
# The leader pod (LWS_WORKER_INDEX 0) runs mpirun over the group's pods, RANKS_PER_POD ranks on
# each (one per GPU): its own address and the workers' come from LWS_LEADER_ADDRESS
# (<set>-<group>.<set>.<namespace>; worker i is <set>-<group>-<i>.<set>.<namespace>) and
# LWS_GROUP_SIZE. A worker pod runs sshd, through which mpirun starts its ranks. Rank 0 is the
# server; a SIGTERM to the leader pod goes to it, so it drains and then stops the workers, and the
# pod ends with mpirun's status (non-zero when the group broke: the group is then recreated).
#   RANKS_PER_POD  ranks (GPUs) per pod (default 8)
#   SSH_PORT       the workers' sshd port (default 2222)
#   SSH_DIR        holds id_ed25519 and authorized_keys, from a Secret (default /etc/latentserve-ssh)
#   MPI_KILL_TIMEOUT_S  seconds Open MPI waits before it signals the ranks of a broken group (default
#                  90; above --rank_timeout_s plus the drain, so that rank 0 answers every request first)
#   LWS_LAUNCH_DRY_RUN=1  print the hostfile and the mpirun command instead of running them
#   MPI_GUARD_GRACE_S     how long mpirun may outlive rank 0 before it and the ranks are killed (default 60)
set -euo pipefail

ranks_per_pod=${RANKS_PER_POD:-8}
ssh_port=${SSH_PORT:-2222}
ssh_dir=${SSH_DIR:-/etc/latentserve-ssh}
kill_timeout=${MPI_KILL_TIMEOUT_S:-90}
index=${LWS_WORKER_INDEX:?LWS_WORKER_INDEX is unset: run this in a LeaderWorkerSet pod}
size=${LWS_GROUP_SIZE:?LWS_GROUP_SIZE is unset: run this in a LeaderWorkerSet pod}
leader=${LWS_LEADER_ADDRESS:?LWS_LEADER_ADDRESS is unset: run this in a LeaderWorkerSet pod}
dry_run=${LWS_LAUNCH_DRY_RUN:-0}
work=${TMPDIR:-/tmp}/latentserve-lws
mkdir -p "$work"

if [ "$index" != 0 ]; then
  # A worker: sshd in the foreground as this (non-root) user, with a host key made now.
  [ -f "$work/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
  exec /usr/sbin/sshd -D -e -p "$ssh_port" -h "$work/host_key" -o PidFile="$work/sshd.pid" \
    -o AuthorizedKeysFile="$ssh_dir/authorized_keys" -o StrictModes=no -o UsePAM=no -o PasswordAuthentication=no
fi

# The leader: the hostfile of the group's pods, the leader first (it runs rank 0).
name=${leader%%.*}
domain=${leader#*.}
hostfile=$work/hostfile
echo "$leader slots=$ranks_per_pod" >"$hostfile"
for ((i = 1; i < size; i++)); do echo "$name-$i.$domain slots=$ranks_per_pod" >>"$hostfile"; done
# ssh refuses a key that others can read; the Secret's copy is group-readable.
key=$work/id_ed25519
[ "$dry_run" = 1 ] || install -m 600 "$ssh_dir/id_ed25519" "$key"
ssh_opts="-p $ssh_port -i $key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

# The server's settings (LATENTSERVE_*) and NCCL's travel to every rank.
exports=()
while IFS='=' read -r var _; do
  case "$var" in LATENTSERVE_* | NCCL_*) exports+=(-x "$var") ;; esac
done < <(env)
cmd=(mpirun --hostfile "$hostfile" -np $((size * ranks_per_pod)) --map-by "ppr:$ranks_per_pod:node" --bind-to none
  --mca plm_rsh_args "$ssh_opts" --mca odls_base_sigkill_timeout "$kill_timeout" "${exports[@]}"
  /usr/local/bin/latentserve)
if [ "$dry_run" = 1 ]; then
  cat "$hostfile"
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi

# Wait for every worker's sshd (they start with the leader; a group that never assembles fails).
for ((i = 1; i < size; i++)); do
  host="$name-$i.$domain"
  for ((try = 0; ; try++)); do
    # shellcheck disable=SC2086
    if ssh $ssh_opts "$host" true 2>/dev/null; then break; fi
    if ((try >= 300)); then
      echo "latentserve-lws: worker $host never answered on ssh port $ssh_port" >&2
      exit 1
    fi
    sleep 2
  done
done

# mpirun under the guard (tools/mpirun_guard.sh): once rank 0 is gone the launcher ends within
# MPI_GUARD_GRACE_S, so a group whose ranks die at start-up does not leave the pod running.
guard=${MPIRUN_GUARD:-/usr/local/bin/latentserve-mpirun-guard}
[ -x "$guard" ] || guard=$(dirname "$0")/mpirun_guard.sh
"$guard" --grace "${MPI_GUARD_GRACE_S:-60}" "${cmd[@]}" &
guard_pid=$!
# SIGTERM (the pod stopping) goes to rank 0 through the guard: rank 0 drains and then stops the
# workers; mpirun itself would treat it as an abort.
forward_term() { kill -TERM "$guard_pid" 2>/dev/null; }
trap forward_term TERM INT
status=0
wait "$guard_pid" || status=$?
while kill -0 "$guard_pid" 2>/dev/null; do  # woken by the trap: wait for the end
  wait "$guard_pid" || status=$?
done
exit "$status"
