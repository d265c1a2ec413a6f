#!/usr/bin/env bash
# Muster's main command on the embedded default: a real local control plane (etcd +
# kube-apiserver + kwok) with simulated 8-GPU nodes in a block/spine/rack topology and two real
# nodes (kubelet + containerd + runc, tests/cluster/real_nodes.sh), muster-scheduler running against
# it (scheduler + ParallelJob job engine), a 12-pod gang of full-node pods shown placed on the
# simulated nodes (which nodes, which racks), and the seed guide's mpi-sample-job run for real on
# the real nodes: mpicc and mpirun in its pods, the ranks' output read back with kubectl logs, then
# the seed's own troubleshooting commands, then the seed's GPU/RDMA example on the real nodes' fake
# devices (this build's device plugin; muster-rdma-conf from this build's image). It checks its own
# outcome (the gang bound whole, the six ranks' "Hello from MPI process" lines, the jobs Succeeded)
# and exits non-zero when one fails, so CI runs it as a test (.ci/run). Leaves the cluster and
# muster-scheduler running, writes DIR/env (KUBECONFIG, and PATH with kubectl and Muster's installed
# commands: musterctl, sbatch, squeue, ...) for the README's tour, and prints how to stop them.
#
#   tests/demo.sh [--nodes N] [--real-nodes R]
#     N: simulated nodes (default 32: 1 block, 1 spine, 4 racks of 8)
#     R: real nodes, 0..3 (default 2 as root, else 0). With 0, kwok simulates the seed's job too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
nodes=32
# Real nodes need root (containerd, runc, network links, cgroups); without it kwok simulates all.
real_nodes=2
if [ "$(id -u)" != 0 ]; then
  real_nodes=0
  echo "demo.sh: not root, so no real nodes: kwok simulates the seed's job too (run as root for real pods)" >&2
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --real-nodes) real_nodes=$2; shift 2 ;;
    *) echo "usage: tests/demo.sh [--nodes N] [--real-nodes R]" >&2; exit 2 ;;
  esac
done

bash tests/install-deps.sh
bash tests/cluster/build.sh >/dev/null
build="${MUSTER_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# muster_installed: every program `cmake --install` installs (CMakeLists.txt, one list), which the
# image (tests/cluster/muster_image.sh) and the tour's commands below need.
cmake --build "$build" -j "$(nproc)" --target muster_installed

. tests/cluster/versions.sh
dir="$MUSTER_CACHE/demo-cluster"
bash tests/cluster/down.sh --dir "$dir" >/dev/null 2>&1 || true
real_args=()
# Real nodes get this build's image (muster-rdma-conf) and its device plugin (fake GPUs and NICs).
[ "$real_nodes" -gt 0 ] && real_args=(--real-nodes "$real_nodes" --muster-build "$build")
kubeconfig=$(bash tests/cluster/up.sh --dir "$dir" --nodes "$nodes" "${real_args[@]}" | tail -n1)

kubectl=("$MUSTER_BIN_DIR/kubectl" --kubeconfig "$kubeconfig")
fail() { echo "demo.sh: FAIL: $*" >&2; exit 1; }
# Muster's commands as a user gets them (cmake --install: muster-slurm's sbatch, squeue, ... links).
cmake --install "$build" --prefix "$dir/muster" >/dev/null
cat >> "$dir/env" <<ENV
# Muster's installed commands (tests/demo.sh) and the Slurm partitions of the demo's muster-scheduler
export PATH="$dir/muster/bin:\$PATH"
export MUSTER_SLURM_CONFIG=file:$dir/muster.yaml
export MUSTER_NAMESPACE=default
ENV
"${kubectl[@]}" apply -f manifests/crds/ >/dev/null

cat > "$dir/muster.yaml" <<YAML
topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]
metricsBindAddress: 127.0.0.1:10259
leaderElection:
  enabled: false
# The tour's Slurm jobs (README): one partition over the simulated nodes, each job in one rack.
slurm:
  clusterName: demo
  jobIds: {namespace: default, name: muster-slurm-job-ids}
  partitions:
  - name: gpu
    nodeSelector: {type: kwok}
    topologyRequired: muster.dev/rack
    maxTime: "1-00:00:00"
    template:
      spec:
        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
        containers: [{name: main, image: busybox}]
YAML
log="$dir/logs/muster-scheduler.log"
# The log exists before the first grep looks (the background process opens it only when it runs).
: > "$log"
sched_args=()
[ "$real_nodes" -gt 0 ] && sched_args=(--rdma-conf-image muster.local/muster:dev)
"$build/scheduler/muster-scheduler" --kubeconfig "$kubeconfig" --config "$dir/muster.yaml" -v 2 "${sched_args[@]}" \
  >"$log" 2>&1 &
echo $! > "$dir/pids/muster-scheduler.pid"
for _ in $(seq 1 100); do
  grep -q "Caches synced" "$log" && break
  kill -0 "$(cat "$dir/pids/muster-scheduler.pid")" 2>/dev/null || { tail "$log"; exit 1; }
  sleep 0.1
done

echo
echo "== A gang of 12 pods x 8 nvidia.com/gpu (PFN's gang annotations), schedulerName: muster-scheduler"
python3 - > "$dir/demo-gang.json" <<'PY'
import json
pods = [{"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "train-%02d" % i, "namespace": "default",
                      "annotations": {"gang-scheduling.preferred.jp/gang-name": "train",
                                      "gang-scheduling.preferred.jp/gang-size": "12"}},
         "spec": {"schedulerName": "muster-scheduler",
                  # With real nodes, kwok's nodes carry its taint: these pods are simulated.
                  "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                                   "effect": "NoSchedule"}],
                  "containers": [{"name": "main", "image": "busybox",
                                  "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
        for i in range(12)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
PY
"${kubectl[@]}" create -f "$dir/demo-gang.json" >/dev/null
bound_train() {
  "${kubectl[@]}" get pods -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' |
    awk '$1 ~ /^train-/ && $2 != ""' | wc -l
}
for _ in $(seq 1 300); do
  [ "$(bound_train)" -ge 12 ] && break
  sleep 0.1
done
[ "$(bound_train)" = 12 ] || fail "the gang train was not bound whole: $(bound_train) of 12 pods bound"
"$build/proto/musterctl" --kubeconfig "$kubeconfig" pods -n default
echo
grep -E '"Gang (placed|bound)"' "$log" | tail -n 1 | sed 's/^.*] /muster-scheduler: /'
echo
echo "== Nodes: GPUs in use per node and rack"
"$build/proto/musterctl" --kubeconfig "$kubeconfig" nodes | awk 'NR==1 || $3 != "0/8"'
echo
echo "== The seed guide's ParallelJob, applied verbatim (tests/manifests/testdata/seed-1-mpi-sample-job.yaml)"
"${kubectl[@]}" apply -f tests/manifests/testdata/seed-1-mpi-sample-job.yaml
phase() { "${kubectl[@]}" get paralleljobs mpi-sample-job -o jsonpath='{.status.phase}'; }
for _ in $(seq 1 300); do [ "$(phase)" = Running ] && break; sleep 0.2; done
echo "\$ kubectl get paralleljobs mpi-sample-job"
"${kubectl[@]}" get paralleljobs mpi-sample-job
jobset_name=$("${kubectl[@]}" get paralleljobs mpi-sample-job -o jsonpath={".status.jobGroupName"})
echo "\$ jobset_name=\$(kubectl get paralleljobs mpi-sample-job -o jsonpath={\".status.jobGroupName\"})   # $jobset_name"
echo "\$ kubectl get jobs,pods -l jobset.sigs.k8s.io/jobset-name=\${jobset_name} -o wide"
"${kubectl[@]}" get jobs,pods -l "jobset.sigs.k8s.io/jobset-name=${jobset_name}" -o wide
echo "\$ kubectl get pod -l jobset.sigs.k8s.io/jobset-name=\${jobset_name},jobset.sigs.k8s.io/job-global-index=0 -o name   # rank 0, the launcher"
"${kubectl[@]}" get pod -l "jobset.sigs.k8s.io/jobset-name=${jobset_name},jobset.sigs.k8s.io/job-global-index=0" -o name
echo "The hostfile the launcher's mpirun reads:"
"${kubectl[@]}" get configmap "${jobset_name}-mpi" -o jsonpath='{.data.hostfile}'
echo
if [ "$real_nodes" -gt 0 ]; then
  echo "The pods run on real nodes (kubelet + containerd): mpicc and mpirun run in them."
  for _ in $(seq 1 600); do case "$(phase)" in Succeeded|Failed) break ;; esac; sleep 0.2; done
  echo "\$ kubectl logs \${jobset_name}-0   # rank 0's pod, the launcher"
  "${kubectl[@]}" logs "${jobset_name}-0" -c main | tee "$dir/mpi-sample-job.log"
  hellos=$(grep -c "Hello from MPI process" "$dir/mpi-sample-job.log" || true)
  [ "$hellos" = 6 ] || fail "mpi-sample-job's launcher log has $hellos \"Hello from MPI process\" lines, not 6"
else
  echo "kwok simulates the containers; tell it the launcher's main exits 0 (a real cluster runs mpirun):"
  "${kubectl[@]}" annotate pod "${jobset_name}-0" muster.dev/sim-succeed-after=1s >/dev/null
  for _ in $(seq 1 300); do [ "$(phase)" = Succeeded ] && break; sleep 0.2; done
fi
"${kubectl[@]}" get paralleljobs mpi-sample-job
[ "$(phase)" = Succeeded ] || fail "mpi-sample-job did not succeed: phase $(phase)"
if [ "$real_nodes" -gt 0 ]; then
  echo
  echo "== The seed guide's GPU/RDMA ParallelJob (tests/manifests/testdata/seed-3-gpu-rdma.yaml) on the real nodes,"
  echo "   its placeholder program replaced by printing what the pod got and the settings it sourced."
  echo "   The GPUs and NICs are fake (muster-topology device-plugin --fake, from LLNL Lassen's hwloc export),"
  echo "   handed out by the kubelet; muster-rdma-conf (Muster's image) wrote the NCCL/UCX files:"
  sed 's/mpirun --allow-run-as-root something-using-gpu-rdma/env | grep -E "^(NVIDIA_VISIBLE_DEVICES|MUSTER_RDMA_DEVICES|NCCL_|UCX_)" | sort/' \
    tests/manifests/testdata/seed-3-gpu-rdma.yaml | "${kubectl[@]}" apply -f -
  gpu_phase() { "${kubectl[@]}" get paralleljobs sample-job -o jsonpath='{.status.phase}'; }
  for _ in $(seq 1 600); do case "$(gpu_phase)" in Succeeded|Failed) break ;; esac; sleep 0.2; done
  gpu_group=$("${kubectl[@]}" get paralleljobs sample-job -o jsonpath='{.status.jobGroupName}')
  echo "\$ kubectl logs ${gpu_group}-0"
  "${kubectl[@]}" logs "${gpu_group}-0" -c main
  "${kubectl[@]}" get paralleljobs sample-job
  [ "$(gpu_phase)" = Succeeded ] || fail "sample-job did not succeed: phase $(gpu_phase)"
fi
echo
echo "demo.sh: passed: the gang bound whole, the seed's jobs Succeeded"
echo "The cluster and muster-scheduler keep running (metrics: http://127.0.0.1:10259/metrics)."
echo "The README's tour goes on from here; its first line sets KUBECONFIG and PATH (kubectl, musterctl,"
echo "sbatch, squeue, ...):"
echo "  . $dir/env"
echo "  kubectl get pods -o wide; kubectl get events --field-selector reason=Scheduled"
echo "Stop the cluster and muster-scheduler with:"
echo "  bash tests/cluster/down.sh --dir $dir"
