#!/usr/bin/env bash
# Muster's main command on the embedded default: a real local control plane (etcd +
# kube-apiserver + kwok) with simulated 8-GPU nodes in a block/spine/rack topology, looked at
# through Muster's own API client. Leaves the cluster running and prints how to use and stop it.
#
#   tests/demo.sh [--nodes N]        (default 32 nodes: 1 block, 1 spine, 4 racks of 8)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
nodes=32
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    *) echo "usage: tests/demo.sh [--nodes N]" >&2; exit 2 ;;
  esac
done

bash tests/install-deps.sh
bash tests/cluster/build.sh >/dev/null
build="${MUSTER_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target musterctl

. tests/cluster/versions.sh
dir="$MUSTER_CACHE/demo-cluster"
bash tests/cluster/down.sh --dir "$dir" >/dev/null 2>&1 || true
kubeconfig=$(bash tests/cluster/up.sh --dir "$dir" --nodes "$nodes" | tail -n1)

echo
echo "== The cluster's nodes, through Muster's client (proto/: HTTPS, list+watch, informer cache)"
"$build/proto/musterctl" --kubeconfig "$kubeconfig" nodes
echo
echo "The cluster keeps running. Try:"
echo "  export KUBECONFIG=$kubeconfig PATH=$MUSTER_BIN_DIR:\$PATH"
echo "  kubectl get nodes -L muster.dev/rack,muster.dev/spine"
echo "Stop it with:"
echo "  bash tests/cluster/down.sh --dir $dir"
