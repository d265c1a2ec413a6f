#!/usr/bin/env bash
# Decode baseline: captures a 5,000-pod list from a real kube-apiserver (pods bound to kwok nodes
# and Running, so their status is what a scheduler really receives) and measures how fast Muster's
# proto/ decodes it, and the peak memory of doing so.
#
#   bench/decode.sh [--pods N] [--repeat R]      output: JSON on stdout, in bench/results/ too
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
pods=5000
repeat=20
while [ $# -gt 0 ]; do
  case "$1" in
    --pods) pods=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "usage: bench/decode.sh [--pods N] [--repeat R]" >&2; exit 2 ;;
  esac
done
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
bash tests/install-deps.sh
bash tests/cluster/build.sh >/dev/null
build="${MUSTER_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target muster_decode_bench >&2

work=$(mktemp -d)
dir="$work/cluster"
trap 'bash tests/cluster/down.sh --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
kubeconfig=$(bash tests/cluster/up.sh --dir "$dir" --nodes 50 | tail -n1)
. "$dir/env"
kubectl=("$MUSTER_BIN_DIR/kubectl" --kubeconfig "$kubeconfig")

python3 - "$pods" > "$work/pods.json" <<'PY'
import json, sys
n = int(sys.argv[1])
items = []
for i in range(n):
    items.append({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bench-%05d" % i, "namespace": "default",
                     "labels": {"app": "decode-bench", "scheduling.x-k8s.io/pod-group": "g%03d" % (i // 8)},
                     "annotations": {"gang-scheduling.preferred.jp/gang-name": "g%03d" % (i // 8),
                                     "gang-scheduling.preferred.jp/gang-size": "8"}},
        "spec": {"nodeName": "node-%05d" % (i % 50), "schedulerName": "muster-scheduler",
                 "containers": [{"name": "main", "image": "registry.example/train:1",
                                 "command": ["torchrun", "--nproc-per-node=1", "train.py"],
                                 "env": [{"name": "RANK", "value": str(i)}],
                                 "ports": [{"containerPort": 29500}],
                                 "resources": {"requests": {"cpu": "4", "memory": "32Gi"},
                                               "limits": {"nvidia.com/gpu": "1", "preferred.jp/rdma": "1"}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "muster.dev/block", "operator": "Exists"}]}]}}}}})
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
PY
echo "decode.sh: creating $pods pods" >&2
"${kubectl[@]}" create -f "$work/pods.json" >/dev/null
deadline=$((SECONDS + 600))
while :; do
  running=$("${kubectl[@]}" get pods -l app=decode-bench --field-selector=status.phase=Running -o name | wc -l)
  [ "$running" -ge "$pods" ] && break
  [ $SECONDS -lt $deadline ] || { echo "decode.sh: only $running/$pods pods Running after 600s" >&2; exit 1; }
  sleep 2
done
"${kubectl[@]}" get --raw "/api/v1/namespaces/default/pods?labelSelector=app%3Ddecode-bench" > "$work/podlist.json"
echo "decode.sh: captured $(du -h "$work/podlist.json" | cut -f1) pod list" >&2
mkdir -p bench/results
"$build/bench/muster_decode_bench" "$work/podlist.json" --repeat "$repeat" | tee bench/results/decode.json
