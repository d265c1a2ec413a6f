#!/usr/bin/env bash
# End-to-end on real nodes: a real control plane with two real kubelets (containerd, runc, CNI
# bridge, CoreDNS; tests/cluster/real_nodes.sh) and no simulated node, muster-scheduler (scheduler
# and job engine) scheduling ParallelJobs whose containers really run Open MPI over SSH.
#
#   real_nodes_test.sh up DIR BUILD_DIR        the cluster (with BUILD_DIR's device plugin and image)
#                                              and BUILD_DIR's muster-scheduler (ctest fixture)
#   real_nodes_test.sh CASE DIR                one case (below), against that cluster
#   real_nodes_test.sh down DIR                down.sh, then checks that nothing is left behind:
#                                              no process, mount, link, cgroup, netns or iptables rule
# Cases:
#   seed        the seed guide's mpi-sample-job, verbatim: Succeeded with no restart, six ranks'
#               "Hello from MPI process N rank in 6 processes" in kubectl logs of the launcher
#   fail        a launcher whose main exits 3, maxRestarts 1: Failed after one restart, the exit
#               code in the Event, the last attempt's launcher log readable with kubectl logs
#   kill        a worker's sshd SIGKILLed on its node while the launcher waits on it: the whole job
#               restarts (restarts 1) and the next attempt Succeeds
#   nonroot     the seed's job as uid 1000 (runAsUser, fsGroup), mpirun without --allow-run-as-root
#   spread      a 2-pod gang whose members each need 1.5 of a real node's 2 CPUs: bound whole, one
#               member on each real node, both containers run
#   devices     the device plugin's fake GPUs and NICs (Lassen's export) through the kubelet: node
#               allocatable 4 + 4; the seed's GPU/RDMA job, its placeholder program replaced by
#               printing the settings, gets from the kubelet 2 GPUs and 1 NIC per pod, and
#               muster-rdma-conf (Muster's image) writes NCCL_IB_HCA for exactly that NIC; the
#               agent's pod-resources reading of the real kubelet leaves out what the pods hold
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cluster/lib.sh"

cmd=${1:?usage: real_nodes_test.sh up DIR SCHEDULER_BIN | CASE DIR | down DIR}
DIR=${2:?cluster directory}
fail() { echo "FAIL: $*" >&2; exit 1; }

snapshot_host() { # what the machine has outside DIR, to compare after down
  {
    echo "# links"; ip -o link show | awk -F': ' '$2 !~ /^veth/ { sub(/@.*/, "", $2); print $2 }' | sort
    echo "# netns"; ip netns list 2>/dev/null | awk '{ print $1 }' | sort
    echo "# iptables"; { iptables-save 2>/dev/null || true; } | awk '!/^#/ { gsub(/\[[0-9]+:[0-9]+\]/, ""); print }' | sort
    echo "# /var/lib/kubelet"; ls -a /var/lib/kubelet 2>/dev/null || true
  } || true
}

if [ "$cmd" = up ]; then
  build=$(cd "${3:?build directory}" && pwd)
  sched=$build/scheduler/muster-scheduler
  bash "$root/tests/cluster/down.sh" --dir "$DIR" >/dev/null 2>&1 || true
  mkdir -p "$(dirname "$DIR")"
  snapshot_host > "$DIR.host-before"
  bash "$root/tests/cluster/up.sh" --dir "$DIR" --nodes 0 --real-nodes 2 --muster-build "$build" >/dev/null
  echo "$build" > "$DIR/muster-build"
  . "$DIR/env"
  kubectl apply -f "$root/manifests/crds/" >/dev/null
  cat > "$DIR/muster.yaml" <<'YAML'
topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]
metricsBindAddress: 127.0.0.1:0
leaderElection:
  enabled: false
YAML
  : > "$DIR/logs/muster-scheduler.log"
  setsid "$sched" --kubeconfig "$DIR/kubeconfig" --config "$DIR/muster.yaml" -v 2 \
    --rdma-conf-image muster.local/muster:dev \
    >> "$DIR/logs/muster-scheduler.log" 2>&1 < /dev/null &
  echo $! > "$DIR/pids/muster-scheduler.pid"
  for _ in $(seq 1 300); do
    grep -q "Caches synced" "$DIR/logs/muster-scheduler.log" && exit 0
    kill -0 "$(cat "$DIR/pids/muster-scheduler.pid")" 2>/dev/null || { tail -20 "$DIR/logs/muster-scheduler.log"; fail "muster-scheduler exited"; }
    sleep 0.1
  done
  fail "muster-scheduler did not sync its caches in 30 s"
fi

if [ "$cmd" = down ]; then
  bash "$root/tests/cluster/down.sh" --dir "$DIR"
  left=""
  pgrep -f "$DIR/" >/dev/null && left="$left processes: $(pgrep -af "$DIR/" | head -5)"
  grep -q " $DIR/" /proc/self/mounts && left="$left mounts: $(grep " $DIR/" /proc/self/mounts | head -3)"
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    ls -d "$h"muster-real-* >/dev/null 2>&1 && left="$left cgroups: $(ls -d "$h"muster-real-*)"
  done
  if [ -f "$DIR.host-before" ]; then
    d=$(diff <(cat "$DIR.host-before") <(snapshot_host) || true)
    [ -z "$d" ] || left="$left; links, netns or iptables rules differ from before up:
$d"
    rm -f "$DIR.host-before"
  fi
  ip -o link show | grep -q "master muster-br" && left="$left veth links on muster-br*"
  [ -z "$left" ] || fail "left behind after down.sh:$left"
  echo "down.sh left no process, mount, cgroup, link, netns or iptables rule behind"
  exit 0
fi

. "$DIR/env"
ns=rn-$cmd-$$
kubectl create namespace "$ns" >/dev/null
trap 'kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT

phase() { kubectl -n "$ns" get paralleljob "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
jobfield() { kubectl -n "$ns" get paralleljob "$1" -o jsonpath="$2" 2>/dev/null; }
# wait_phase JOB PHASE SECONDS: until the job reaches PHASE; fails at once on another final phase.
wait_phase() {
  local job=$1 want=$2 end=$(( $(date +%s) + $3 )) p
  while :; do
    p=$(phase "$job")
    [ "$p" = "$want" ] && return 0
    case "$p" in Succeeded|Failed) [ "$p" = "$want" ] || { dump "$job"; fail "$job is $p, expected $want"; } ;; esac
    [ "$(date +%s)" -lt "$end" ] || { dump "$job"; fail "$job not $want after $3 s (phase '$p')"; }
    sleep 0.5
  done
}
dump() {
  kubectl -n "$ns" get paralleljob "$1" -o yaml | sed -n '/^status:/,$p' >&2 || true
  kubectl -n "$ns" get pods -o wide >&2 || true
  kubectl -n "$ns" get events --sort-by=.lastTimestamp 2>/dev/null | tail -20 >&2 || true
  local p
  for p in $(kubectl -n "$ns" get pods -o name 2>/dev/null); do
    echo "--- logs of $p" >&2; kubectl -n "$ns" logs "$p" --all-containers 2>&1 | tail -20 >&2 || true
  done
}
# The seed's job (tests/manifests/testdata), renamed, with extra lines after "spec:" of the job
# (JOB_SPEC) and of the launcher's pod (LAUNCHER_SPEC), after "- name: main" (MAIN_SPEC), and the
# mpirun line replaced by MPIRUN's lines.
seed_job() { # seed_job NAME
  python3 - "$root/tests/manifests/testdata/seed-1-mpi-sample-job.yaml" "$1" <<'PY'
import os, sys
text = open(sys.argv[1]).read().replace("name: mpi-sample-job", "name: " + sys.argv[2], 1)
out = []
for line in text.split("\n"):
    indent = line[:len(line) - len(line.lstrip())]
    if line.strip() == "mpirun --allow-run-as-root ./hello_mpi" and os.environ.get("MPIRUN"):
        out += [indent + l for l in os.environ["MPIRUN"].split("\n")]
        continue
    out.append(line)
    if line == "spec:" and os.environ.get("JOB_SPEC"):
        out += ["  " + l for l in os.environ["JOB_SPEC"].split("\n")]
    if line == "    spec:" and os.environ.get("LAUNCHER_SPEC"):
        out += ["      " + l for l in os.environ["LAUNCHER_SPEC"].split("\n")]
    if line.startswith("      - name: main") and os.environ.get("MAIN_SPEC"):
        out += ["        " + l for l in os.environ["MAIN_SPEC"].split("\n")]
print("\n".join(out))
PY
}
on_real_nodes() { # every pod of the namespace sits on a real node
  local n
  for n in $(kubectl -n "$ns" get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}'); do
    case "$n" in real-*) ;; *) fail "a pod is on $n, not a real node" ;; esac
  done
}
six_ranks() { # six_ranks LOGFILE
  local r
  for r in 0 1 2 3 4 5; do
    [ "$(grep -c "^Hello from MPI process $r rank in 6 processes$" "$1")" = 1 ] || { cat "$1" >&2; fail "rank $r did not say hello exactly once"; }
  done
  [ "$(grep -c '^Hello from MPI process' "$1")" = 6 ] || { cat "$1" >&2; fail "not exactly six hellos"; }
}

case "$cmd" in
seed)
  kubectl -n "$ns" apply -f "$root/tests/manifests/testdata/seed-1-mpi-sample-job.yaml" >/dev/null
  wait_phase mpi-sample-job Succeeded 300
  on_real_nodes
  [ "$(jobfield mpi-sample-job '{.status.restarts}')" = 0 ] || fail "restarted: $(jobfield mpi-sample-job '{.status.message}')"
  group=$(jobfield mpi-sample-job '{.status.jobGroupName}')
  kubectl -n "$ns" logs "$group-0" -c main > "$DIR/seed.log"
  six_ranks "$DIR/seed.log"
  grep -q "^muster: copied .*/hello_mpi to $group-1\." "$DIR/seed.log" || fail "no copy of hello_mpi to worker 1 reported"
  echo "seed: Succeeded, 6 of 6 ranks said hello (kubectl logs $group-0)"
  ;;
fail)
  MPIRUN='echo "attempt of $(hostname) failing on purpose"; exit 3' JOB_SPEC=$'failurePolicy:\n  maxRestarts: 1' \
    seed_job failing | kubectl -n "$ns" apply -f - >/dev/null
  wait_phase failing Failed 300
  on_real_nodes
  [ "$(jobfield failing '{.status.restarts}')" = 1 ] || fail "restarts $(jobfield failing '{.status.restarts}'), expected 1"
  kubectl -n "$ns" get events --field-selector involvedObject.name=failing -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' > "$DIR/fail.events"
  grep -q "^Restarting: .*exit code 3" "$DIR/fail.events" || { cat "$DIR/fail.events" >&2; fail "no Restarting Event naming exit code 3"; }
  grep -q "^MaxRestartsExceeded: .*exit code 3" "$DIR/fail.events" || { cat "$DIR/fail.events" >&2; fail "no MaxRestartsExceeded Event naming exit code 3"; }
  group=$(jobfield failing '{.status.jobGroupName}')
  [ "$group" = failing-1 ] || fail "last attempt $group, expected failing-1"
  kubectl -n "$ns" logs "$group-0" -c main | grep -q "^attempt of failing-1-0 failing on purpose$" ||
    fail "the failed launcher's log is not readable with kubectl logs"
  echo "fail: Failed after 1 restart, exit code 3 in the Events, the last launcher's log kept"
  ;;
kill)
  # The launcher of attempt 0 sleeps; a worker of attempt 0 is killed on its node. Attempt 1 runs
  # the seed's mpirun.
  MPIRUN=$'case "$(hostname)" in victim-0-0) echo waiting; sleep 600 ;; esac\nmpirun --allow-run-as-root ./hello_mpi' \
    seed_job victim | kubectl -n "$ns" apply -f - >/dev/null
  wait_phase victim Running 300
  on_real_nodes
  end=$(( $(date +%s) + 120 ))
  until kubectl -n "$ns" logs victim-0-0 -c main 2>/dev/null | grep -q waiting; do
    [ "$(date +%s)" -lt "$end" ] || { dump victim; fail "the launcher never started its main"; }
    sleep 0.5
  done
  cid=$(kubectl -n "$ns" get pod victim-0-1 -o jsonpath='{.status.containerStatuses[?(@.name=="main")].containerID}')
  cid=${cid#containerd://}
  [ -n "$cid" ] || fail "no container id for victim-0-1's main"
  # The container's cgroup in whichever hierarchy lists its processes (cgroup v1 or v2).
  procs=""
  for d in $(find /sys/fs/cgroup/ -maxdepth 7 -type d -name "$cid" 2>/dev/null || true); do
    if grep -q . "$d/cgroup.procs" 2>/dev/null; then procs=$d; break; fi  # pseudo-files have size 0
  done
  [ -n "$procs" ] || fail "cannot find the cgroup of container $cid"
  echo "killing victim-0-1's main (container $cid, pids $(tr '\n' ' ' < "$procs/cgroup.procs")) with SIGKILL"
  xargs -r kill -KILL < "$procs/cgroup.procs"
  wait_phase victim Succeeded 300
  [ "$(jobfield victim '{.status.restarts}')" = 1 ] || fail "restarts $(jobfield victim '{.status.restarts}'), expected 1"
  kubectl -n "$ns" get events --field-selector involvedObject.name=victim -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' > "$DIR/kill.events"
  grep -q "^Restarting: .*victim-0-1" "$DIR/kill.events" || { cat "$DIR/kill.events" >&2; fail "no Restarting Event naming victim-0-1"; }
  kubectl -n "$ns" logs victim-1-0 -c main > "$DIR/kill.log"
  six_ranks "$DIR/kill.log"
  echo "kill: the killed worker restarted the whole job; attempt 1 Succeeded with 6 ranks"
  ;;
nonroot)
  MPIRUN=$'echo "uid $(id -u)"\nmpirun sh -c \'echo "rank on $(hostname) runs as uid $(id -u)"\'\nmpirun ./hello_mpi' \
  LAUNCHER_SPEC=$'securityContext:\n  runAsUser: 1000\n  runAsGroup: 1000\n  fsGroup: 1000' MAIN_SPEC='workingDir: /tmp' \
    seed_job nonroot | kubectl -n "$ns" apply -f - >/dev/null
  wait_phase nonroot Succeeded 300
  on_real_nodes
  kubectl -n "$ns" logs nonroot-0-0 -c main > "$DIR/nonroot.log"
  grep -q "^uid 1000$" "$DIR/nonroot.log" || { cat "$DIR/nonroot.log" >&2; fail "the launcher did not run as uid 1000"; }
  six_ranks "$DIR/nonroot.log"
  # Every process mpirun started, on the launcher and through each worker's sshd, ran as 1000.
  for p in nonroot-0-0 nonroot-0-1 nonroot-0-2; do
    [ "$(grep -c "^rank on $p runs as uid 1000$" "$DIR/nonroot.log")" = 2 ] ||
      { cat "$DIR/nonroot.log" >&2; fail "$p did not run its 2 processes as uid 1000"; }
  done
  [ "$(grep -c '^rank on ' "$DIR/nonroot.log")" = 6 ] || { cat "$DIR/nonroot.log" >&2; fail "not 6 processes"; }
  echo "nonroot: Succeeded as uid 1000 with 6 ranks"
  ;;
spread)
  for i in 0 1; do
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: spread-$i
  annotations:
    gang-scheduling.preferred.jp/gang-name: spread
    gang-scheduling.preferred.jp/gang-size: "2"
spec:
  schedulerName: muster-scheduler
  restartPolicy: Never
  containers:
  - name: main
    image: ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo member \$(hostname) ran on a real node"]
    resources:
      requests: {cpu: 1500m, memory: 64Mi}
      limits: {cpu: 1500m, memory: 64Mi}
---
EOF
  done | kubectl -n "$ns" apply -f - >/dev/null
  end=$(( $(date +%s) + 180 ))
  while :; do
    s=$(kubectl -n "$ns" get pods -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Succeeded$' || true)
    [ "$s" = 2 ] && break
    [ "$(date +%s)" -lt "$end" ] || { kubectl -n "$ns" get pods -o wide >&2; kubectl -n "$ns" get events >&2; fail "the gang's pods did not both succeed"; }
    sleep 0.5
  done
  nodes=$(kubectl -n "$ns" get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' ')
  [ "$nodes" = "real-0 real-1 " ] || fail "the members are on $nodes, expected one on each of real-0 and real-1"
  for i in 0 1; do
    kubectl -n "$ns" logs "spread-$i" | grep -q "^member spread-$i ran on a real node$" || fail "spread-$i's log is missing"
  done
  echo "spread: the gang's members ran on real-0 and real-1, one each"
  ;;
devices)
  for n in real-0 real-1; do
    for r in 'nvidia\.com/gpu' 'preferred\.jp/rdma'; do
      v=$(kubectl get node "$n" -o jsonpath="{.status.allocatable.$r}")
      [ "$v" = 4 ] || fail "$n has allocatable $r '$v', expected the device plugin's 4"
    done
  done
  python3 - "$root/tests/manifests/testdata/seed-3-gpu-rdma.yaml" > "$DIR/gpu-job.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
placeholder = "mpirun --allow-run-as-root something-using-gpu-rdma"
assert placeholder in text
# The guide's placeholder program, replaced by what the pod got and the settings it sourced.
text = text.replace(placeholder, 'env | grep -E "^(NVIDIA_VISIBLE_DEVICES|MUSTER_RDMA_DEVICES|NCCL_|UCX_)" | sort')
print(text)
PY
  kubectl -n "$ns" apply -f "$DIR/gpu-job.yaml" >/dev/null
  wait_phase sample-job Succeeded 300
  on_real_nodes
  kubectl -n "$ns" logs sample-job-0-0 -c main > "$DIR/gpu.log"
  gpus=$(sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p' "$DIR/gpu.log")
  nic=$(sed -n 's/^MUSTER_RDMA_DEVICES=//p' "$DIR/gpu.log")
  [ "$(echo "$gpus" | tr ',' '\n' | grep -c '^GPU-')" = 2 ] || { cat "$DIR/gpu.log" >&2; fail "the launcher did not get 2 GPUs from the kubelet: '$gpus'"; }
  case "$nic" in mlx5_[0-3]) ;; *) cat "$DIR/gpu.log" >&2; fail "the launcher did not get one NIC from the kubelet: '$nic'" ;; esac
  grep -qx "NCCL_IB_HCA=$nic:1" "$DIR/gpu.log" || { cat "$DIR/gpu.log" >&2; fail "NCCL_IB_HCA is not the NIC the pod got ($nic)"; }
  grep -q "^UCX_NET_DEVICES=$nic:1" "$DIR/gpu.log" || { cat "$DIR/gpu.log" >&2; fail "UCX_NET_DEVICES is not the NIC the pod got ($nic)"; }
  # The init container's log, through the API server and the kubelet (asked again for a while:
  # one CI run got no such line once, with the settings it wrote already seen above).
  end=$(($(date +%s) + 30))
  until kubectl -n "$ns" logs sample-job-0-0 -c muster-rdma-conf > "$DIR/rdma-conf.log" 2>&1 &&
    grep -q "wrote /muster/rdma/" "$DIR/rdma-conf.log"; do
    [ "$(date +%s)" -lt "$end" ] || { cat "$DIR/rdma-conf.log" >&2; fail "muster-rdma-conf (Muster's image) did not write the NCCL/UCX files"; }
    sleep 1
  done
  echo "devices: the kubelet gave the launcher $gpus and $nic; rdma-conf wrote NCCL_IB_HCA=$nic:1"

  # The agent's reading of the real kubelet's pod-resources API: a pod holding 2 GPUs and a NIC.
  kubectl -n "$ns" apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: holder}
spec:
  schedulerName: muster-scheduler
  nodeSelector: {kubernetes.io/hostname: real-0}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES $MUSTER_RDMA_DEVICES; exec sleep 600"]
    resources:
      limits: {nvidia.com/gpu: "2", preferred.jp/rdma: "1"}
YAML
  end=$(( $(date +%s) + 120 ))
  until held=$(kubectl -n "$ns" logs holder 2>/dev/null) && [ -n "$held" ]; do
    [ "$(date +%s)" -lt "$end" ] || { kubectl -n "$ns" describe pod holder >&2; fail "the holder pod did not start"; }
    sleep 0.5
  done
  build=$(cat "$DIR/muster-build")
  "$build/topology/muster-topology" show --json --hwloc-xml "$root/tests/topology/testdata/hwloc/coral-lassen.xml" \
    --pod-resources-socket "$DIR/real/0/kubelet/pod-resources/kubelet.sock" > "$DIR/show.json" 2> "$DIR/show.err" ||
    { cat "$DIR/show.err" >&2; fail "muster-topology show against the kubelet failed"; }
  python3 - "$DIR/show.json" "$held" <<'PY' || fail "the free devices read from the real kubelet are wrong"
import json, sys
spec = json.load(open(sys.argv[1]))["spec"]
gpus, nic = sys.argv[2].split()
held = {g["index"] for g in spec["gpus"] if g["uuid"] in gpus.split(",")}
assert len(held) == 2, (gpus, held)
want_gpus = sorted({g["index"] for g in spec["gpus"]} - held)
want_nics = sorted({n["name"] for n in spec["rdmaNics"]} - {nic})
free = spec.get("allocatable")
assert free is not None, "no allocatable in %s" % sorted(spec)
print("free GPUs", free.get("freeGpus"), "want", want_gpus, "; free NICs", free.get("freeRdmaNics"), "want", want_nics)
assert sorted(free.get("freeGpus", [])) == want_gpus
assert sorted(free.get("freeRdmaNics", [])) == want_nics
PY
  echo "devices: muster-topology read the real kubelet's pod-resources: the held GPUs and NIC are not free"
  ;;
*) fail "unknown case $cmd" ;;
esac
