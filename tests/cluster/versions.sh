# Pinned versions of the real control plane used by Muster's tests, benchmarks and local cluster.
# The single place these are set. Kubernetes 1.36: the newest minor with in-tree gang scheduling
# (GenericWorkload/GangScheduling, alpha) that the Go module proxy serves at a patch release we
# have verified; etcd 3.6 because kube-apiserver >= 1.35 needs etcd >= 3.5.13 for watch progress
# requests (Debian's 3.4 fails); kwok's newest release tag.
MUSTER_K8S_VERSION="${MUSTER_K8S_VERSION:-v1.36.3}"
MUSTER_ETCD_VERSION="${MUSTER_ETCD_VERSION:-v3.6.16}"
MUSTER_KWOK_VERSION="${MUSTER_KWOK_VERSION:-v0.8.0}"
# Helm, for the chart in manifests/charts/muster (helm lint / helm template in the tests). Helm 3's
# newest release: the chart is apiVersion v2, which Helm 3 and 4 both read. Built into
# $MUSTER_BIN_DIR/helm next to kubectl; build.sh rebuilds it when `helm version` differs from this.
MUSTER_HELM_VERSION="${MUSTER_HELM_VERSION:-v3.22.0}"
# Kueue, whose CRDs (from its Go module, sigs.k8s.io/kueue) tests/manifests/crds_test.sh installs
# beside Muster's: its LocalQueue answers to the short names "queue" and "queues".
MUSTER_KUEUE_VERSION="${MUSTER_KUEUE_VERSION:-v0.17.0}"
MUSTER_CACHE="${MUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster}"
MUSTER_BIN_DIR="$MUSTER_CACHE/bin/k8s-$MUSTER_K8S_VERSION-etcd-$MUSTER_ETCD_VERSION-kwok-$MUSTER_KWOK_VERSION"
# Real nodes (up.sh --real-nodes N): the pinned kubelet (same Kubernetes module as the control plane),
# containerd 2.x (Kubernetes 1.36 needs containerd >= 2.0; Debian 12 has 1.6), and CoreDNS for the
# Service names the ParallelJob hostfile uses. Built by `build.sh --node` into MUSTER_NODE_BIN_DIR.
# runc and the CNI plugins are Debian's (tests/install-deps.sh --real-nodes).
MUSTER_CONTAINERD_VERSION="${MUSTER_CONTAINERD_VERSION:-v2.4.2}"
MUSTER_COREDNS_VERSION="${MUSTER_COREDNS_VERSION:-v1.14.7}"
MUSTER_NODE_BIN_DIR="$MUSTER_CACHE/bin/node-k8s-$MUSTER_K8S_VERSION-containerd-$MUSTER_CONTAINERD_VERSION-coredns-$MUSTER_COREDNS_VERSION"
