#!/usr/bin/env bash
# Muster's test command: installs what it needs (Debian packages, the pinned control plane built
# from the Go module proxy and cached under ~/.cache/muster), builds Muster, and runs every test
# through ctest (unit, end-to-end, integration, chart, chaos), then the sanitizer suites
# (tests/sanitize.sh: ASan + UBSan unit and end-to-end, the fuzz targets bounded, TSan).
# Extra arguments go to ctest (e.g. -L unit, -R quantity) and leave the sanitizer suites out;
# MUSTER_SANITIZERS=0 leaves them out too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

bash tests/install-deps.sh
bin_dir=$(bash tests/cluster/build.sh)
bin_dir=$(echo "$bin_dir" | tail -n1)
echo "run.sh: end-to-end tests run against a real control plane: $("$bin_dir/kube-apiserver" --version)," \
     "$("$bin_dir/etcd" --version | head -n1), kwok $("$bin_dir/kwok" --version 2>&1 | head -n1)" >&2

build="${MUSTER_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMUSTER_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
start=$(date +%s)
(cd "$build" && ctest --output-on-failure --no-tests=error "$@")
echo "run.sh: ctest took $(( $(date +%s) - start )) s" >&2
if [ $# -eq 0 ] && [ "${MUSTER_SANITIZERS:-1}" != 0 ]; then
  bash "$root/tests/sanitize.sh"
fi
