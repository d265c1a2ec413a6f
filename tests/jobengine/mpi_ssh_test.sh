#!/usr/bin/env bash
# Real Open MPI over real OpenSSH with exactly what the job engine generates, outside Kubernetes.
#
# Each "pod" of a 3-pod mpi-sample-job is a network namespace with its own address on a bridge,
# its own hostname (UTS namespace) and, in a private mount namespace, an /etc/hosts that maps the
# pods' FQDNs as the headless Service would. Its volumes are directories: the Secret's files (mode
# 0444, as the volume gives them), the ConfigMap's (0555) and an empty "emptyDir". The generated
# paths (/etc/muster/ssh, /etc/muster/mpi, /muster) are rewritten to those directories, nothing
# else. Workers run their generated main (sshd.sh); the launcher runs its generated init container
# (wait-workers.sh), which must not finish before every worker accepts SSH, and then the seed's
# own command, `mpirun --allow-run-as-root ./hello_mpi`, with the launcher env the engine sets.
# Every one of the 6 ranks (3 pods x slots=2) must report in, 2 per pod.
#
# Run twice: as root, and as an unprivileged user (uid 4242, added to a bind-mounted passwd).
# Usage: mpi_ssh_test.sh MATERIALIZE_BINARY
set -euo pipefail
materialize=$1
n=3
[ "$(id -u)" = 0 ] || { echo "mpi_ssh_test: must run as root (it creates network namespaces)" >&2; exit 1; }
for tool in ssh mpirun mpicc ip unshare setpriv; do
  command -v "$tool" >/dev/null || { echo "mpi_ssh_test: $tool missing (tests/install-deps.sh)" >&2; exit 1; }
done
[ -x /usr/sbin/sshd ] || { echo "mpi_ssh_test: /usr/sbin/sshd missing (openssh-server)" >&2; exit 1; }

work=$(mktemp -d /tmp/muster-mpi-ssh.XXXXXX)
chmod 755 "$work"
tag="mj$$"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for i in $(seq 0 $((n - 1))); do ip netns del "${tag}p$i" 2>/dev/null || true; done
  ip netns del "${tag}sw" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/pod*/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done >&2; exit 1; }

"$materialize" "$work/gen" "$n"
mapfile -t hosts < "$work/gen/hosts"
mapfile -t pods < "$work/gen/pods"
[ "${#hosts[@]}" = "$n" ] || fail "materialize wrote ${#hosts[@]} hosts"
# The hostfile is what mpirun reads: n lines, launcher first, slots=2.
[ "$(wc -l < "$work/gen/config/hostfile")" = "$n" ] || fail "hostfile has wrong line count"
[ "$(head -n 1 "$work/gen/config/hostfile")" = "${hosts[0]} slots=2" ] || fail "hostfile does not start with the launcher"

cat > "$work/hello_mpi.c" <<'C'
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
mpicc -o "$work/hello_mpi" "$work/hello_mpi.c"

# The network: one bridge, one namespace per pod.
ip netns add "${tag}sw"
ip -n "${tag}sw" link add br0 type bridge
ip -n "${tag}sw" link set br0 up
{ echo "127.0.0.1 localhost"; } > "$work/hosts"
for i in $(seq 0 $((n - 1))); do
  ip netns add "${tag}p$i"
  ip link add "v$i" netns "${tag}p$i" type veth peer name "s$i" netns "${tag}sw"
  ip -n "${tag}sw" link set "s$i" master br0
  ip -n "${tag}sw" link set "s$i" up
  ip -n "${tag}p$i" addr add "10.77.0.$((i + 2))/24" dev "v$i"
  ip -n "${tag}p$i" link set "v$i" up
  ip -n "${tag}p$i" link set lo up
  echo "10.77.0.$((i + 2)) ${hosts[$i]} ${pods[$i]}" >> "$work/hosts"
done
cp /etc/passwd "$work/passwd"; echo "mpiuser:x:4242:4242:muster test:/nonexistent:/bin/sh" >> "$work/passwd"
cp /etc/group "$work/group"; echo "mpiuser:x:4242:" >> "$work/group"
chmod 644 "$work/hosts" "$work/passwd" "$work/group"

# podrun INDEX UID COMMAND...: COMMAND in pod INDEX's namespaces, as UID, with the pod's paths.
podrun() {
  local i=$1 uid=$2
  shift 2
  local dir="$work/pod$i"
  ip netns exec "${tag}p$i" unshare --mount --uts -- env \
    POD_HOSTNAME="${pods[$i]}" W="$work" UID_="$uid" \
    MUSTER_DIR="$dir/run" MUSTER_SECRET_DIR="$dir/secret" MUSTER_CONFIG_DIR="$dir/config" \
    bash -c 'hostname "$POD_HOSTNAME"
             mount --bind "$W/hosts" /etc/hosts
             mount --bind "$W/passwd" /etc/passwd
             mount --bind "$W/group" /etc/group
             export HOME=/nonexistent
             exec setpriv --reuid="$UID_" --regid="$UID_" --clear-groups -- "$@"' _ "$@"
}
# The pod's paths in a generated string.
rewrite() {
  local dir="$work/pod$1"
  sed -e "s#/etc/muster/mpi#$dir/config#g" -e "s#/etc/muster/ssh#$dir/secret#g" -e "s#/muster/#$dir/run/#g"
}

run_job() {
  local uid=$1
  echo "=== as uid $uid"
  for f in "${pids[@]}"; do kill "$f" 2>/dev/null || true; done
  pids=()
  for i in $(seq 0 $((n - 1))); do
    rm -rf "$work/pod$i"
    mkdir -p "$work/pod$i/run"
    cp -a "$work/gen/secret" "$work/gen/config" "$work/pod$i/"
    chown "$uid:$uid" "$work/pod$i/run"
  done
  local worker_cmd
  # Worker 1 first; the launcher's init container must still be waiting for worker 2.
  worker_cmd=$(rewrite 1 < "$work/gen/worker.command")
  podrun 1 "$uid" sh -c "exec $worker_cmd" > "$work/pod1/sshd.log" 2>&1 &
  pids+=($!)
  local init launcher_env
  init=$(rewrite 0 < "$work/gen/launcher.init")
  launcher_env=$(rewrite 0 < "$work/gen/launcher.env")
  podrun 0 "$uid" sh -c "$launcher_env
    $init || exit 10
    cd $work && mpirun --allow-run-as-root ./hello_mpi" > "$work/pod0/launcher.log" 2>&1 &
  local launcher=$!
  pids+=($launcher)
  local deadline=$((SECONDS + 60))
  until grep -q "${hosts[1]} accepts SSH" "$work/pod0/launcher.log"; do
    [ $SECONDS -lt $deadline ] || fail "the launcher never reached worker 1"
    kill -0 "$launcher" 2>/dev/null || fail "the launcher exited early"
    sleep 0.2
  done
  grep -q "every worker accepts SSH" "$work/pod0/launcher.log" && fail "the launcher stopped waiting before worker 2 was up"
  grep -q "Hello from" "$work/pod0/launcher.log" && fail "mpirun started before worker 2 was up"
  worker_cmd=$(rewrite 2 < "$work/gen/worker.command")
  podrun 2 "$uid" sh -c "exec $worker_cmd" > "$work/pod2/sshd.log" 2>&1 &
  pids+=($!)
  local rc=0
  timeout 120 tail --pid="$launcher" -f /dev/null || fail "the launcher did not finish in 120 s"
  wait "$launcher" || rc=$?
  cat "$work/pod0/launcher.log"
  [ "$rc" = 0 ] || fail "launcher exited with $rc"
  grep -q "every worker accepts SSH" "$work/pod0/launcher.log" || fail "no wait message"
  local ranks
  ranks=$(grep -c "^Hello from MPI process .* rank in 6 processes on .* sum 15$" "$work/pod0/launcher.log" || true)
  [ "$ranks" = 6 ] || fail "$ranks of 6 ranks reported in"
  for r in 0 1 2 3 4 5; do
    grep -q "^Hello from MPI process $r rank in 6 processes" "$work/pod0/launcher.log" || fail "rank $r missing"
  done
  for i in $(seq 0 $((n - 1))); do
    local on
    on=$(grep -c " on ${pods[$i]} sum" "$work/pod0/launcher.log" || true)
    [ "$on" = 2 ] || fail "pod ${pods[$i]} ran $on ranks, expected 2"
  done
  echo "=== uid $uid: 6 of 6 ranks on 3 pods"
}

run_job 0
run_job 4242
echo PASS
