#!/usr/bin/env bash
# Muster's test command: installs what it needs (Debian packages, the pinned control plane built
# from the Go module proxy and cached under ~/.cache/muster), builds Muster, and runs the tests.
#
#   tests/run.sh              the CI form (.ci/run): one GCC build with ASan + UBSan runs every test
#                             of the ctest suite (unit, end-to-end, integration, chart, chaos)
#                             (tests/sanitize.sh ci); fuzzing and TSan are the long form's
#   tests/run.sh --long       the long form: the build as shipped (build/, RelWithDebInfo, -Werror)
#                             runs every test, the benchmarks' regression guard included, then the
#                             sanitizer suites each from its own build (tests/sanitize.sh asan fuzz
#                             tsan; MUSTER_FUZZ_SECONDS=N fuzzes N s per target)
#   tests/run.sh CTEST_ARGS   build/ as shipped, then ctest with those arguments (e.g. -L unit,
#                             -R quantity); MUSTER_SANITIZERS=0 with no arguments runs all of it
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

mode=ctest
if [ "${1:-}" = --long ]; then
  mode=long
  shift
elif [ $# -eq 0 ] && [ "${MUSTER_SANITIZERS:-1}" != 0 ]; then
  mode=ci
fi

bash tests/install-deps.sh
bin_dir=$(bash tests/cluster/build.sh)
bin_dir=$(echo "$bin_dir" | tail -n1)
echo "run.sh: end-to-end tests run against a real control plane: $("$bin_dir/kube-apiserver" --version)," \
     "$("$bin_dir/etcd" --version | head -n1), kwok $("$bin_dir/kwok" --version 2>&1 | head -n1)" >&2

if [ "$mode" = ci ]; then
  exec bash "$root/tests/sanitize.sh" ci
fi

build="${MUSTER_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMUSTER_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
start=$(date +%s)
(cd "$build" && ctest --output-on-failure --no-tests=error "$@")
echo "run.sh: ctest took $(( $(date +%s) - start )) s" >&2
if [ "$mode" = long ]; then
  bash "$root/tests/sanitize.sh" asan fuzz tsan
fi
