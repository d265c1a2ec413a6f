#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd, etcdctl
# and kwok from the Go module proxy into $MUSTER_BIN_DIR (outside the repo), once per version set,
# and helm ($MUSTER_HELM_VERSION) into the same directory.
# Idempotent: a complete cache is a no-op. Prints the bin directory on stdout.
#
# build.sh --node also builds what a real node runs (up.sh --real-nodes) into $MUSTER_NODE_BIN_DIR:
# kubelet (the same Kubernetes module), containerd, ctr and containerd-shim-runc-v2, and CoreDNS.
# It then prints that directory as a second line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
NODE=0
case "${1:-}" in
  --node) NODE=1 ;;
  "") ;;
  *) echo "usage: build.sh [--node]" >&2; exit 2 ;;
esac
node_bins=(kubelet containerd ctr containerd-shim-runc-v2 coredns)
node_complete() {
  [ "$NODE" = 1 ] || return 0
  local b
  for b in "${node_bins[@]}"; do [ -x "$MUSTER_NODE_BIN_DIR/$b" ] || return 1; done
}
print_dirs() {
  echo "$MUSTER_BIN_DIR"
  if [ "$NODE" = 1 ]; then echo "$MUSTER_NODE_BIN_DIR"; fi
}
bins=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd etcdctl kwok)
control_plane_complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$MUSTER_BIN_DIR/$b" ] || return 1; done
}
# helm is not part of the directory's name, so a changed pin is noticed by asking the binary.
helm_complete() {
  [ -x "$MUSTER_BIN_DIR/helm" ] &&
    [ "$("$MUSTER_BIN_DIR/helm" version --template '{{.Version}}' 2>/dev/null)" = "$MUSTER_HELM_VERSION" ]
}
# kwok v0.8.0 deletes a pod it finished by name alone (grace 0, no UID precondition): a DELETE
# still queued for a pod that is gone removes a new pod created under the same name, as the
# sig-scheduling specs do (delete, then recreate "without-label"). The kwok we run is built from
# the module with a UID precondition on those deletes, as the kubelet has had since 2016
# (kubernetes/kubernetes#25224); the marker file records that patch.
kwok_patch="uid-precondition-1"
kwok_complete() {
  [ -x "$MUSTER_BIN_DIR/kwok" ] && [ "$(cat "$MUSTER_BIN_DIR/kwok.patch" 2>/dev/null)" = "$kwok_patch" ]
}
if control_plane_complete && kwok_complete && helm_complete && node_complete; then print_dirs; exit 0; fi

# One build at a time per cache: two concurrent builds share $work and $stage and wreck each other
# (one's rm -rf pulls the directory from under the other's go get). A second caller waits for the
# first, then finds the cache complete.
mkdir -p "$MUSTER_CACHE"
exec 9>"$MUSTER_CACHE/build.lock"
if ! flock -n 9; then
  echo "build.sh: another build of the control plane is running; waiting for it" >&2
  flock 9
fi
if control_plane_complete && kwok_complete && helm_complete && node_complete; then print_dirs; exit 0; fi

command -v go >/dev/null || { echo "build.sh: go is required" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GONOSUMDB="${GONOSUMDB:-k8s.io,sigs.k8s.io,go.etcd.io}"
work="$MUSTER_CACHE/build"
stage="$MUSTER_BIN_DIR.partial"
mkdir -p "$work"
start=$(date +%s)
log() { echo "build.sh: $*" >&2; }

# Kubernetes: a throwaway module that pins every staging module to its published tag.
# k8s_module DIR: makes DIR that module (from scratch) and sets K8S_LDFLAGS (the version stamps).
k8s_module() {
  local KV=$MUSTER_K8S_VERSION SV=v0.${MUSTER_K8S_VERSION#v1.} d=$1
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init local/k8sbuild >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KV" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  local m
  for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*|\1|p' "$gomod"); do
    go mod edit "-replace=$m=$m@$SV"
  done
  grep -E '^godebug ' "$gomod" | while read -r _ kv; do go mod edit "-godebug=$kv"; done || true
  local minor; minor=$(echo "$KV" | cut -d. -f2)
  local p
  K8S_LDFLAGS="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_LDFLAGS="$K8S_LDFLAGS -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
}

build_k8s() {
  local KV=$MUSTER_K8S_VERSION
  local need=0
  for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do [ -x "$stage/$c" ] || need=1; done
  [ $need = 1 ] || return 0
  k8s_module "$work/k8s-$MUSTER_K8S_VERSION"
  # Ask for the command packages, not just the module, so go.sum covers everything they import.
  go get k8s.io/kubernetes/cmd/kube-apiserver@$KV k8s.io/kubernetes/cmd/kube-scheduler@$KV \
         k8s.io/kubernetes/cmd/kube-controller-manager@$KV k8s.io/kubernetes/cmd/kubectl@$KV >&2
  for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    [ -x "$stage/$c" ] && continue
    log "building $c $KV"
    go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$stage/$c" k8s.io/kubernetes/cmd/$c
  done
}

build_etcd() {
  [ -x "$stage/etcd" ] && [ -x "$stage/etcdctl" ] && return 0
  local d="$work/etcd-$MUSTER_ETCD_VERSION"
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init local/etcdbuild >/dev/null 2>&1
  go get go.etcd.io/etcd/server/v3@$MUSTER_ETCD_VERSION go.etcd.io/etcd/etcdctl/v3@$MUSTER_ETCD_VERSION >&2
  log "building etcd $MUSTER_ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3
  go build -trimpath -ldflags "-s -w" -o "$stage/etcdctl" go.etcd.io/etcd/etcdctl/v3
}

build_kwok() {
  [ -x "$stage/kwok" ] && return 0
  log "building kwok $MUSTER_KWOK_VERSION"
  GOBIN="$stage" go install -trimpath -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok@$MUSTER_KWOK_VERSION
}

# kwok with its deletes preconditioned on the UID (kwok_patch above), into $MUSTER_BIN_DIR.
build_patched_kwok() {
  local d="$work/kwok-$MUSTER_KWOK_VERSION" src
  src=$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@$MUSTER_KWOK_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || { log "cannot download the kwok module"; exit 1; }
  rm -rf "$d"; cp -r "$src" "$d"; chmod -R u+w "$d"
  local pods="$d/pkg/kwok/controllers/pod_controller.go" stages="$d/pkg/kwok/controllers/stage_controller.go"
  sed -i 's|err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)|opt := deleteOpt; opt.Preconditions = metav1.NewUIDPreconditions(string(pod.UID)); err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opt)|' "$pods"
  sed -i 's|err := cli.Delete(ctx, resource.GetName(), deleteOpt)|opt := deleteOpt; opt.Preconditions = metav1.NewUIDPreconditions(string(resource.GetUID())); err := cli.Delete(ctx, resource.GetName(), opt)|' "$stages"
  grep -q NewUIDPreconditions "$pods" && grep -q NewUIDPreconditions "$stages" ||
    { log "kwok $MUSTER_KWOK_VERSION: the delete calls to patch were not found"; exit 1; }
  log "building kwok $MUSTER_KWOK_VERSION (deletes with a UID precondition)"
  mkdir -p "$MUSTER_BIN_DIR"
  (cd "$d" && go build -trimpath -ldflags "-s -w" -o "$MUSTER_BIN_DIR/kwok.new" ./cmd/kwok)
  mv -f "$MUSTER_BIN_DIR/kwok.new" "$MUSTER_BIN_DIR/kwok"
  echo "$kwok_patch" > "$MUSTER_BIN_DIR/kwok.patch"
  rm -rf "$d"
}

# helm, with the version stamps its Makefile sets (`helm version`, and the Kubernetes version that
# `helm lint`/`helm template` assume without a cluster: that of the client-go it is built with).
build_helm() {
  local HV=$MUSTER_HELM_VERSION d="$work/helm-$MUSTER_HELM_VERSION"
  local major=${HV#v}; major=${major%%.*}
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init local/helmbuild >/dev/null 2>&1
  go get "helm.sh/helm/v$major/cmd/helm@$HV" >&2
  local cg; cg=$(go list -m -f '{{.Version}}' k8s.io/client-go)  # v0.MINOR.PATCH
  local kminor; kminor=$(echo "$cg" | cut -d. -f2)
  local p="helm.sh/helm/v$major"
  local LDF="-s -w -X $p/internal/version.version=$HV -X $p/internal/version.gitTreeState=clean"
  LDF="$LDF -X $p/pkg/lint/rules.k8sVersionMajor=1 -X $p/pkg/lint/rules.k8sVersionMinor=$kminor"
  LDF="$LDF -X $p/pkg/chartutil.k8sVersionMajor=1 -X $p/pkg/chartutil.k8sVersionMinor=$kminor"
  log "building helm $HV"
  go build -trimpath -ldflags "$LDF" -o "$d/helm" "helm.sh/helm/v$major/cmd/helm"
  mkdir -p "$MUSTER_BIN_DIR"
  mv -f "$d/helm" "$MUSTER_BIN_DIR/helm"
  rm -rf "$d"
}

if ! control_plane_complete; then
  mkdir -p "$stage"
  build_etcd
  build_kwok
  build_k8s
  for b in "${bins[@]}"; do [ -x "$stage/$b" ] || { log "missing $b after build"; exit 1; }; done
  rm -rf "$MUSTER_BIN_DIR"; mv "$stage" "$MUSTER_BIN_DIR"
  log "built control plane in $(( $(date +%s) - start ))s into $MUSTER_BIN_DIR"
fi
kwok_complete || build_patched_kwok
# What a real node runs. containerd without the snapshotters that need cgo or kernel features the
# local nodes do not use (overlayfs is the one they use).
build_node() {
  local nstage="$MUSTER_NODE_BIN_DIR.partial" KV=$MUSTER_K8S_VERSION CV=$MUSTER_CONTAINERD_VERSION
  mkdir -p "$nstage"
  if [ ! -x "$nstage/kubelet" ]; then
    k8s_module "$work/kubelet-$KV"
    go get "k8s.io/kubernetes/cmd/kubelet@$KV" >&2
    log "building kubelet $KV"
    go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$nstage/kubelet" k8s.io/kubernetes/cmd/kubelet
    rm -rf "$work/kubelet-$KV"
  fi
  if [ ! -x "$nstage/containerd" ] || [ ! -x "$nstage/ctr" ] || [ ! -x "$nstage/containerd-shim-runc-v2" ]; then
    local d="$work/containerd-$CV" c
    rm -rf "$d"; mkdir -p "$d"; cd "$d"
    go mod init local/containerdbuild >/dev/null 2>&1
    go get "github.com/containerd/containerd/v2/cmd/containerd@$CV" "github.com/containerd/containerd/v2/cmd/ctr@$CV" \
           "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CV" >&2
    for c in containerd ctr containerd-shim-runc-v2; do
      log "building $c $CV"
      go build -trimpath -tags "no_btrfs no_devmapper no_zfs no_aufs" \
        -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CV" \
        -o "$nstage/$c" "github.com/containerd/containerd/v2/cmd/$c"
    done
    rm -rf "$d"
  fi
  if [ ! -x "$nstage/coredns" ]; then
    local d="$work/coredns-$MUSTER_COREDNS_VERSION"
    rm -rf "$d"; mkdir -p "$d"; cd "$d"
    go mod init local/corednsbuild >/dev/null 2>&1
    go get "github.com/coredns/coredns@$MUSTER_COREDNS_VERSION" >&2
    log "building coredns $MUSTER_COREDNS_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$nstage/coredns" github.com/coredns/coredns
    rm -rf "$d"
  fi
  rm -rf "$MUSTER_NODE_BIN_DIR"; mv "$nstage" "$MUSTER_NODE_BIN_DIR"
}

if ! node_complete; then
  start=$(date +%s)
  build_node
  node_complete || { log "missing node binaries in $MUSTER_NODE_BIN_DIR after build"; exit 1; }
  log "built kubelet, containerd and coredns in $(( $(date +%s) - start ))s into $MUSTER_NODE_BIN_DIR"
fi
if ! helm_complete; then
  start=$(date +%s)
  build_helm
  helm_complete || { log "helm at $MUSTER_BIN_DIR/helm does not report $MUSTER_HELM_VERSION"; exit 1; }
  log "built helm $MUSTER_HELM_VERSION in $(( $(date +%s) - start ))s into $MUSTER_BIN_DIR"
fi
print_dirs
