#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd, etcdctl
# and kwok from the Go module proxy into $MUSTER_BIN_DIR (outside the repo), once per version set.
# Idempotent: a complete cache is a no-op. Prints the bin directory on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
bins=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd etcdctl kwok)
complete=1
for b in "${bins[@]}"; do [ -x "$MUSTER_BIN_DIR/$b" ] || complete=0; done
if [ $complete = 1 ]; then echo "$MUSTER_BIN_DIR"; exit 0; fi

# One build at a time per cache: two concurrent builds share $work and $stage and wreck each other
# (one's rm -rf pulls the directory from under the other's go get). A second caller waits for the
# first, then finds the cache complete.
mkdir -p "$MUSTER_CACHE"
exec 9>"$MUSTER_CACHE/build.lock"
if ! flock -n 9; then
  echo "build.sh: another build of the control plane is running; waiting for it" >&2
  flock 9
fi
complete=1
for b in "${bins[@]}"; do [ -x "$MUSTER_BIN_DIR/$b" ] || complete=0; done
if [ $complete = 1 ]; then echo "$MUSTER_BIN_DIR"; exit 0; fi

command -v go >/dev/null || { echo "build.sh: go is required" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GONOSUMDB="${GONOSUMDB:-k8s.io,sigs.k8s.io,go.etcd.io}"
work="$MUSTER_CACHE/build"
stage="$MUSTER_BIN_DIR.partial"
mkdir -p "$work" "$stage"
start=$(date +%s)
log() { echo "build.sh: $*" >&2; }

# Kubernetes: a throwaway module that pins every staging module to its published tag.
build_k8s() {
  local KV=$MUSTER_K8S_VERSION SV=v0.${MUSTER_K8S_VERSION#v1.} d="$work/k8s-$MUSTER_K8S_VERSION"
  local need=0
  for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do [ -x "$stage/$c" ] || need=1; done
  [ $need = 1 ] || return 0
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init local/k8sbuild >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KV" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  local m
  for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*|\1|p' "$gomod"); do
    go mod edit "-replace=$m=$m@$SV"
  done
  grep -E '^godebug ' "$gomod" | while read -r _ kv; do go mod edit "-godebug=$kv"; done || true
  # Ask for the command packages, not just the module, so go.sum covers everything they import.
  go get k8s.io/kubernetes/cmd/kube-apiserver@$KV k8s.io/kubernetes/cmd/kube-scheduler@$KV \
         k8s.io/kubernetes/cmd/kube-controller-manager@$KV k8s.io/kubernetes/cmd/kubectl@$KV >&2
  local minor; minor=$(echo "$KV" | cut -d. -f2)
  local LDF="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDF="$LDF -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    [ -x "$stage/$c" ] && continue
    log "building $c $KV"
    go build -trimpath -ldflags "$LDF" -o "$stage/$c" k8s.io/kubernetes/cmd/$c
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

build_etcd
build_kwok
build_k8s
for b in "${bins[@]}"; do [ -x "$stage/$b" ] || { log "missing $b after build"; exit 1; }; done
rm -rf "$MUSTER_BIN_DIR"; mv "$stage" "$MUSTER_BIN_DIR"
log "built control plane in $(( $(date +%s) - start ))s into $MUSTER_BIN_DIR"
echo "$MUSTER_BIN_DIR"
