#!/usr/bin/env bash
# Builds Kubernetes' own end-to-end test binary, e2e.test, from k8s.io/kubernetes/test/e2e at the
# pinned version (tests/cluster/versions.sh), through the Go module proxy, into
# $MUSTER_CACHE/bin/e2e-<version>/e2e.test (outside the repo). Idempotent: a built binary is
# reused. Prints its path on stdout; progress goes to stderr. About 8-15 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cluster/versions.sh"
KV=$MUSTER_K8S_VERSION
out="$MUSTER_CACHE/bin/e2e-$KV"
if [ -x "$out/e2e.test" ]; then echo "$out/e2e.test"; exit 0; fi

command -v go >/dev/null || { echo "build-e2e.sh: go is required" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GONOSUMDB="${GONOSUMDB:-k8s.io,sigs.k8s.io,go.etcd.io}"
mkdir -p "$MUSTER_CACHE"
exec 9>"$MUSTER_CACHE/build-e2e.lock"
flock 9
if [ -x "$out/e2e.test" ]; then echo "$out/e2e.test"; exit 0; fi

start=$(date +%s)
d="$MUSTER_CACHE/build/e2e-$KV"
rm -rf "$d"; mkdir -p "$d"; cd "$d"
# The same throwaway module as tests/cluster/build.sh: every staging module pinned to its tag.
go mod init local/e2ebuild >/dev/null 2>&1
SV=v0.${KV#v1.}
gomod=$(go mod download -json "k8s.io/kubernetes@$KV" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*|\1|p' "$gomod"); do
  go mod edit "-replace=$m=$m@$SV"
done
grep -E '^godebug ' "$gomod" | while read -r _ kv; do go mod edit "-godebug=$kv"; done || true
# -t: the test package's own imports (ginkgo, gomega, the e2e framework) too.
go get -t "k8s.io/kubernetes/test/e2e@$KV" >&2
minor=$(echo "$KV" | cut -d. -f2)
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF="$LDF -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
echo "build-e2e.sh: building e2e.test $KV" >&2
mkdir -p "$out.partial"
go test -c -trimpath -ldflags "$LDF" -o "$out.partial/e2e.test" k8s.io/kubernetes/test/e2e
rm -rf "$out"; mv "$out.partial" "$out"
cd /; rm -rf "$d"
echo "build-e2e.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$out/e2e.test"
