#!/usr/bin/env bash
# Muster's resource.Quantity parser side by side with k8s.io/apimachinery's (the version go.mod
# pins): builds main.go from the Go module proxy once into the cache (outside the repo, as
# tests/cluster/build.sh does for the control plane), has it print apimachinery's answers for the
# hand-picked edge cases and COUNT inputs generated from SEED, and has compare.py feed the same
# inputs to Muster's driver and fail on any difference known_disagreements.txt does not allow.
#
# run.sh --driver BIN [--out DIR] [--seed N] [--count N]
#     BIN: build/tests/proto/muster_quantity_conformance. DIR (default: a temporary directory,
#     removed afterwards) keeps go.jsonl and disagreements.txt. SEED 1 and COUNT 6000 by default.
#
# Needs go (it fetches the toolchain GOTOOLCHAIN pins, go1.27.3 by default) and python3. Exits 1 on
# a disagreement, 2 on a usage or setup error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
. "$root/tests/cluster/versions.sh"  # MUSTER_CACHE

usage() { sed -n '/^# run.sh --driver/,/^#     BIN/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
driver="" out="" seed=1 count=6000
while [ $# -gt 0 ]; do
  case "$1" in
    --driver) [ $# -ge 2 ] || usage; driver=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --count) [ $# -ge 2 ] || usage; count=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument: $1" >&2; usage ;;
  esac
done
[ -n "$driver" ] || usage
[ -x "$driver" ] || { echo "run.sh: no driver at $driver" >&2; exit 2; }
command -v go >/dev/null || { echo "run.sh: go is required (to build the apimachinery side)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run.sh: python3 is required" >&2; exit 2; }
start=$(date +%s)

# The Go side, built once per source and toolchain. -mod=readonly: go.sum must already be complete,
# so a run never rewrites the checkout.
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off
key=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" <(echo "$GOTOOLCHAIN") | sha256sum | cut -c1-16)
cache="$MUSTER_CACHE/quantity-conformance"
bin="$cache/$key/quantity-conformance"
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/build.lock"
  flock 9  # a second run waits, then finds the binary
  if [ ! -x "$bin" ]; then
    echo "run.sh: building the apimachinery side into $bin" >&2
    mkdir -p "$cache/$key"
    (cd "$here" && go build -trimpath -o "$bin.partial" .)
    mv -f "$bin.partial" "$bin"
  fi
  exec 9>&-
fi

if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/muster-quantity-conformance.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
"$bin" -seed "$seed" -count "$count" >"$out/go.jsonl"
rc=0
python3 "$here/compare.py" --go "$out/go.jsonl" --driver "$driver" \
  --known "$here/known_disagreements.txt" --out "$out" || rc=$?
echo "run.sh: seed $seed, $count generated inputs, $(( $(date +%s) - start ))s" >&2
exit $rc
