#!/usr/bin/env bash
# Real Open MPI over real OpenSSH with exactly what the job engine generates, outside Kubernetes.
#
# Each "pod" of a 3-pod mpi-sample-job is a network namespace with its own address on a bridge,
# its own hostname (UTS namespace) and, in a private mount namespace, an /etc/hosts that maps the
# pods' FQDNs as the headless Service would. Its volumes are directories: the Secret's files (mode
# 0400, as the volume gives them; for the unprivileged run group-owned and group-readable, as the
# kubelet makes them for the pod's fsGroup), the ConfigMap's (0555) and an empty "emptyDir". The generated
# paths (/etc/muster/ssh, /etc/muster/mpi, /muster) are rewritten to those directories, nothing
# else. Workers run their generated main (sshd.sh); the launcher runs its generated init container
# (wait-workers.sh), which must not finish before every worker accepts SSH, and then the seed's
# own command, `mpirun --allow-run-as-root ./hello_mpi`, with the launcher env the engine sets.
# Every one of the 6 ranks (3 pods x slots=2) must report in, 2 per pod.
#
# Run twice: as root, and as an unprivileged user (uid 4242, added to a bind-mounted passwd). An
# unprivileged pod without fsGroup cannot read the keys, and is told so.
#
# Every "pod" runs in a session and process group of its own (setsid), so that killing the group
# ends everything it started (sshd with its per-connection children, mpirun); at exit no process
# of the test is left (checked with pgrep, the test fails otherwise).
# Usage: mpi_ssh_test.sh MATERIALIZE_BINARY
set -euo pipefail
materialize=$1
n=3
[ "$(id -u)" = 0 ] || { echo "mpi_ssh_test: must run as root (it creates network namespaces)" >&2; exit 1; }
for tool in ssh mpirun mpicc ip unshare setpriv setsid pgrep; do
  command -v "$tool" >/dev/null || { echo "mpi_ssh_test: $tool missing (tests/install-deps.sh)" >&2; exit 1; }
done
[ -x /usr/sbin/sshd ] || { echo "mpi_ssh_test: /usr/sbin/sshd missing (openssh-server)" >&2; exit 1; }

work=$(mktemp -d /tmp/muster-mpi-ssh.XXXXXX)
chmod 755 "$work"
tag="mj$$"
pids=()  # each the leader of a process group holding one "pod"
# What this test started and is still running: every process whose command line names $work.
leftovers() { pgrep -a -f -- "$work/" | grep -v "^$$ " || true; }
# Ends each pod's whole process group (not only its first process: sshd forks a child per
# connection, and a shell wrapper would leave the exec'd sshd behind).
stop_pods() {
  local p
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    local deadline=$((SECONDS + 10))
    while kill -0 -- "-$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  pids=()
}
cleanup() {
  local rc=$?
  stop_pods
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then
    echo "FAIL: processes of this test are still running:" >&2
    echo "$left" >&2
    pkill -KILL -f -- "$work/" 2>/dev/null || true
    rc=1
  fi
  for i in $(seq 0 $((n - 1))); do ip netns del "${tag}p$i" 2>/dev/null || true; done
  ip netns del "${tag}sw" 2>/dev/null || true
  rm -rf "$work"
  exit $rc
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

# podrun INDEX UID COMMAND...: COMMAND in pod INDEX's namespaces, as UID, with the pod's paths,
# in a new session (its pid is its process group's id; run it in the background with &).
podrun() {
  local i=$1 uid=$2
  shift 2
  local dir="$work/pod$i"
  exec setsid ip netns exec "${tag}p$i" unshare --mount --uts -- env \
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

# prepare_pods UID [FSGROUP]: fresh volumes for every pod; with FSGROUP, the Secret's files are
# group-owned by it and group-readable, as the kubelet makes them for the pod's fsGroup.
prepare_pods() {
  local uid=$1 fsgroup=${2:-}
  for i in $(seq 0 $((n - 1))); do
    rm -rf "$work/pod$i"
    mkdir -p "$work/pod$i/run"
    cp -a "$work/gen/secret" "$work/gen/config" "$work/pod$i/"
    if [ -n "$fsgroup" ]; then chgrp -R "$fsgroup" "$work/pod$i/secret"; chmod -R g+r "$work/pod$i/secret"; fi
    chown "$uid:$uid" "$work/pod$i/run"
  done
}

run_job() {
  local uid=$1
  echo "=== as uid $uid"
  stop_pods
  [ -z "$(leftovers)" ] || fail "processes of the previous run are still running: $(leftovers)"
  if [ "$uid" = 0 ]; then prepare_pods 0; else prepare_pods "$uid" "$uid"; fi
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

# The Secret as mounted (0400, root's) and an unprivileged pod without fsGroup: setup.sh says why.
[ "$(stat -c %a "$work/gen/secret/id_ed25519")" = 400 ] || fail "the Secret's files are not 0400"
prepare_pods 4242
podrun 1 4242 sh "$work/pod1/config/setup.sh" > "$work/pod1/setup.log" 2>&1 &
setup_pid=$!
pids+=($setup_pid)
rc=0; wait "$setup_pid" || rc=$?
[ "$rc" != 0 ] || fail "an unprivileged pod without fsGroup read the 0400 keys"
grep -q "cannot read the SSH keys in .* as uid 4242: the Secret is mounted 0400 (root only); a non-root container needs the pod's spec.securityContext.fsGroup" "$work/pod1/setup.log" ||
  fail "no clear message without fsGroup: $(cat "$work/pod1/setup.log")"
echo "=== uid 4242 without fsGroup: refused with a clear message"

run_job 0
run_job 4242
stop_pods
[ -z "$(leftovers)" ] || fail "processes left after the runs: $(leftovers)"
echo PASS
