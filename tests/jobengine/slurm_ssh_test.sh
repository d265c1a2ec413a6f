#!/usr/bin/env bash
# A Slurm batch job for real: what sbatch and the slurm runtime generate for a 3-node job
# (slurm_materialize), run with real OpenSSH, the real muster-slurm (batch-step, srun,
# step-tasks, scontrol) and real Open MPI, outside Kubernetes.
#
# Each pod is a network namespace with its own address on a bridge, its own host name (UTS
# namespace, = its Slurm node name) and, in a private mount namespace, an /etc/hosts that maps the
# node names as the headless Service and the pods' DNS search path do. Its volumes are
# directories: the SSH Secret's files (mode 0400, group-readable by the pod's fsGroup), the
# ConfigMap's (0555), the batch Secret (0444) and an empty "emptyDir". Each pod first runs its
# generated tools init container, `muster-slurm-steps-static install-tools /muster/bin`
# (MUSTER_SLURM_STEPS stands for the image's binary; it copies itself and the muster-slurm beside
# it into the pod).
# The generated paths are rewritten to those directories, nothing else. Nodes 1 and 2 run their
# generated main (sshd.sh); the batch pod runs its wait-for-peers init container, then its main,
# `muster-slurm-steps batch-step`, as an unprivileged user (uid 4242). The batch script's output
# file lands in the shared directory.
#
# Usage: slurm_ssh_test.sh MUSTER_SLURM_STEPS MATERIALIZE
#        slurm_ssh_test.sh MUSTER_SLURM_STEPS MATERIALIZE SCRIPT [PARTITION]
# The first form runs its own 3-node script and checks each of its steps. The second runs SCRIPT
# unchanged (e.g. a public sbatch script), submitted from the shared directory, which holds a
# hello_mpi.c and its binary hello_mpi; the only partition is PARTITION (default "batch"). It
# prints every file the job left in the shared directory (or the batch pod's log when the output
# path's directory does not exist) and passes when the batch script exits 0, as COMPLETED.
set -euo pipefail
bin=$(realpath "$1")
materialize=$(realpath "$2")
user_script=${3:+$(realpath "$3")}
partition=${4:-batch}
n=0
[ "$(id -u)" = 0 ] || { echo "slurm_ssh_test: must run as root (it creates network namespaces)" >&2; exit 1; }
for tool in ssh mpirun mpicc ip unshare setpriv; do
  command -v "$tool" >/dev/null || { echo "slurm_ssh_test: $tool missing (tests/install-deps.sh)" >&2; exit 1; }
done
[ -x /usr/sbin/sshd ] || { echo "slurm_ssh_test: /usr/sbin/sshd missing (openssh-server)" >&2; exit 1; }

work=$(mktemp -d /tmp/muster-slurm-ssh.XXXXXX)
chmod 755 "$work"
tag="sj$$"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # sshd runs as the pods' user: end every process of it (its sessions included).
  pkill -u 4242 2>/dev/null || true
  wait 2>/dev/null || true
  for i in $(seq 0 $((n - 1))); do ip netns del "${tag}p$i" 2>/dev/null || true; done
  ip netns del "${tag}sw" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/pod*/*.log "$work"/shared/*; do [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }; done >&2
  exit 1
}

mkdir -p "$work/shared"
script="$work/shared/job.sh"
if [ -n "$user_script" ]; then
  script="$work/shared/$(basename "$user_script")"
  cp "$user_script" "$script"
fi
cat > "$work/shared/job.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH --job-name=netns-check
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=2
echo "nodes: $(scontrol show hostnames $SLURM_JOB_NODELIST | tr '\n' ' ')"
first=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
srun hostname | sort > hostnames.txt
echo "first node ip: $(srun -N1 -n1 -w "$first" hostname --ip-address)"
srun -n 6 sh -c 'echo "rank $SLURM_PROCID on $(hostname)"' > ranks.txt
srun -n 2 -N 1 sh -c 'exit 7'
echo "failing step rc=$?"
mpirun ./hello_mpi > mpi.txt
echo "mpirun rc=$?"
SCRIPT
cat > "$work/shared/hello_mpi.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char *argv[]) {
  MPI_Init(&argc, &argv);
  int rank, size;
  char host[256];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gethostname(host, sizeof host);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("Hello from MPI process %d rank in %d processes on %s sum %d\n", rank, size, host, sum);
  MPI_Finalize();
  return 0;
}
C
mpicc -o "$work/shared/hello_mpi" "$work/shared/hello_mpi.c"
chown -R 4242:4242 "$work/shared"

"$materialize" "$work/gen" "$script" "$work/shared" "$partition"
mapfile -t pods < "$work/gen/pods"
n=${#pods[@]}
[ -n "$user_script" ] || [ "$n" = 3 ] || fail "materialize wrote $n pods"

# The network: one bridge, one namespace per pod; the names resolve to the pods.
ip netns add "${tag}sw"
ip -n "${tag}sw" link add br0 type bridge
ip -n "${tag}sw" link set br0 up
{ echo "127.0.0.1 localhost"; } > "$work/hosts"
for i in $(seq 0 $((n - 1))); do
  ip netns add "${tag}p$i"
  ip link add "v$i" netns "${tag}p$i" type veth peer name "s$i" netns "${tag}sw"
  ip -n "${tag}sw" link set "s$i" master br0
  ip -n "${tag}sw" link set "s$i" up
  ip -n "${tag}p$i" addr add "10.78.0.$((i + 2))/24" dev "v$i"
  ip -n "${tag}p$i" link set "v$i" up
  ip -n "${tag}p$i" link set lo up
  echo "10.78.0.$((i + 2)) ${pods[$i]}" >> "$work/hosts"
done
cp /etc/passwd "$work/passwd"; echo "slurmuser:x:4242:4242:muster test:/tmp:/bin/sh" >> "$work/passwd"
cp /etc/group "$work/group"; echo "slurmuser:x:4242:" >> "$work/group"
chmod 644 "$work/hosts" "$work/passwd" "$work/group"

# podrun INDEX COMMAND...: COMMAND in pod INDEX's namespaces, as uid 4242, with the pod's paths.
podrun() {
  local i=$1
  shift
  local dir="$work/pod$i"
  ip netns exec "${tag}p$i" unshare --mount --uts -- env \
    POD_HOSTNAME="${pods[$i]}" W="$work" \
    MUSTER_DIR="$dir/run" MUSTER_SECRET_DIR="$dir/secret" MUSTER_CONFIG_DIR="$dir/config" \
    MUSTER_TERMINATION_LOG="$dir/termination-log" \
    bash -c 'hostname "$POD_HOSTNAME"
             mount --bind "$W/hosts" /etc/hosts
             mount --bind "$W/passwd" /etc/passwd
             mount --bind "$W/group" /etc/group
             export HOME=/nonexistent
             exec setpriv --reuid=4242 --regid=4242 --clear-groups -- "$@"' _ "$@"
}
# The pod's paths in a generated string (the batch mount first: it is under /etc/muster/).
rewrite() {
  local dir="$work/pod$1"
  sed -e "s#/etc/muster/slurm/batch#$dir/batch#g" -e "s#/etc/muster/mpi#$dir/config#g" \
      -e "s#/etc/muster/ssh#$dir/secret#g" -e "s#/usr/local/bin/muster-slurm-steps-static#$bin#g" \
      -e "s#/muster/#$dir/run/#g"
}

for i in $(seq 0 $((n - 1))); do
  mkdir -p "$work/pod$i/run"
  cp -a "$work/gen/secret" "$work/gen/config" "$work/gen/batch" "$work/pod$i/"
  # The SSH Secret is mounted 0400; a non-root pod reads it through its fsGroup (4242 here), for
  # which the kubelet makes the files group-owned and group-readable.
  chgrp -R 4242 "$work/pod$i/secret"
  chmod -R g+r "$work/pod$i/secret"
  touch "$work/pod$i/termination-log"
  chown 4242:4242 "$work/pod$i/run" "$work/pod$i/termination-log"
  # The tools init container: the pod's commands into its emptyDir.
  podrun "$i" sh -c "exec $(rewrite "$i" < "$work/gen/pod$i.tools")" > "$work/pod$i/tools.log" 2>&1 ||
    fail "pod $i's tools init container failed: $(cat "$work/pod$i/tools.log")"
  [ -x "$work/pod$i/run/bin/srun" ] && [ -x "$work/pod$i/run/bin/muster-slurm-steps" ] ||
    fail "pod $i's tools init container installed no srun: $(ls -l "$work/pod$i/run/bin")"
done
for i in $(seq 1 $((n - 1))); do
  env_lines=$(rewrite "$i" < "$work/gen/pod$i.env")
  cmd=$(rewrite "$i" < "$work/gen/pod$i.command")
  podrun "$i" sh -c "$env_lines
    exec $cmd" > "$work/pod$i/sshd.log" 2>&1 &
  pids+=($!)
done
init=true
[ "$n" = 1 ] || init=$(rewrite 0 < "$work/gen/batch.init")
env_lines=$(rewrite 0 < "$work/gen/pod0.env")
cmd=$(rewrite 0 < "$work/gen/pod0.command")
podrun 0 sh -c "$env_lines
  $init || exit 10
  exec $cmd" > "$work/pod0/batch.log" 2>&1 &
batch=$!
pids+=($batch)
rc=0
timeout 180 tail --pid="$batch" -f /dev/null || fail "the batch job did not finish in 180 s"
wait "$batch" || rc=$?
if [ -n "$user_script" ]; then
  echo "=== $(basename "$user_script") (partition $partition), $n nodes: batch-step exited $rc," \
       "termination log $(cat "$work/pod0/termination-log")"
  for f in "$work"/shared/*; do
    case "$(basename "$f")" in job.sh|hello_mpi|hello_mpi.c|"$(basename "$script")") continue ;; esac
    [ -f "$f" ] && { echo "--- $(basename "$f")"; cat "$f"; }
  done
  echo "--- the batch pod's log"
  cat "$work/pod0/batch.log"
  [ "$rc" = 0 ] || fail "batch-step exited with $rc"
  echo PASS
  exit 0
fi
out="$work/shared/slurm-101.out"
[ -f "$out" ] || fail "no slurm-101.out in the shared directory"
cat "$out"
[ "$rc" = 0 ] || fail "batch-step exited with $rc"
[ "$(head -n 1 "$work/pod0/termination-log")" = "0:0" ] || fail "termination log: $(cat "$work/pod0/termination-log")"
# The steps srun ran, over real ssh, for sacct (step_record.h): id, state, exit code, nodes,
# tasks, cpus, node list, name.
steps=$(awk -F'\t' '$1 == "step" { print $2, $3, $4, $7, $8, $9, $10, $11 }' "$work/pod0/termination-log")
expected_steps="0 COMPLETED 0:0 3 6 6 ${pods[0]%-0}-[0-2] hostname
1 COMPLETED 0:0 1 1 1 ${pods[0]} hostname
2 COMPLETED 0:0 3 6 6 ${pods[0]%-0}-[0-2] sh
3 FAILED 7:0 1 2 2 ${pods[0]} sh"
[ "$(head -n 4 <<<"$steps")" = "$expected_steps" ] || fail "steps in the termination log:
$steps
expected first
$expected_steps"
grep -qx "nodes: ${pods[0]} ${pods[1]} ${pods[2]} " "$out" || fail "scontrol show hostnames"
# Bare srun: the whole allocation, 2 tasks per node.
expected=$(printf '%s\n' "${pods[0]}" "${pods[0]}" "${pods[1]}" "${pods[1]}" "${pods[2]}" "${pods[2]}" | sort)
[ "$(cat "$work/shared/hostnames.txt")" = "$expected" ] || fail "srun hostname: $(cat "$work/shared/hostnames.txt")"
grep -qx "first node ip: 10.78.0.2" "$out" || fail "srun -w <first node> hostname --ip-address"
ranks="$work/shared/ranks.txt"
[ "$(wc -l < "$ranks")" = 6 ] || fail "srun -n 6 printed $(wc -l < "$ranks") lines"
for r in 0 1 2 3 4 5; do
  [ "$(grep -c "^rank $r on " "$ranks")" = 1 ] || fail "SLURM_PROCID $r is not there exactly once"
done
for p in "${pods[@]}"; do
  [ "$(grep -c " on $p$" "$ranks")" = 2 ] || fail "node $p ran $(grep -c " on $p$" "$ranks") of the 6 tasks, expected 2"
done
grep -qx "failing step rc=7" "$out" || fail "the failing step's exit code"
grep -qx "mpirun rc=0" "$out" || fail "mpirun failed"
mpi="$work/shared/mpi.txt"
[ "$(grep -c "^Hello from MPI process .* rank in 6 processes on .* sum 15$" "$mpi")" = 6 ] || fail "mpirun: $(cat "$mpi")"
for p in "${pods[@]}"; do
  [ "$(grep -c " on $p sum" "$mpi")" = 2 ] || fail "mpirun ran $(grep -c " on $p sum" "$mpi") ranks on $p, expected 2"
done
echo PASS
