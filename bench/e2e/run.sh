#!/usr/bin/env bash
# The one command for the end-to-end scheduler benchmark, from a clean clone: system packages, the
# pinned control plane (built from the Go module proxy once, cached), muster-scheduler and the
# trivial binder, then bench/e2e/bench.py with every argument passed through.
#
#   bench/e2e/run.sh --quick                      # 500 nodes, 1 rep: a few minutes
#   bench/e2e/run.sh                              # 500, 1,000, 2,000 nodes, 2 reps
#   bench/e2e/run.sh --nodes 500,1000 --reps 2 --out bench/results/e2e-full
#
# Output: results.json, summary.md and plot.svg in --out (default bench/results/e2e-<time>).
# MUSTER_BUILD_DIR (default build/) is where Muster is built.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
bash tests/install-deps.sh >&2
bash tests/cluster/build.sh >/dev/null
build="${MUSTER_BUILD_DIR:-$root/build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
fi
cmake --build "$build" -j "$(nproc)" --target muster-scheduler muster-trivial-binder >&2
exec python3 "$root/bench/e2e/bench.py" --build-dir "$build" "$@"
