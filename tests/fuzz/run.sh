#!/usr/bin/env bash
# Builds Muster's libFuzzer targets (clang-16, ASan + UBSan) and runs each for SECONDS, starting
# from a copy of its seed corpus (tests/fuzz/corpus/<target>, never written). Fails when a target
# crashes, leaks, times out, runs out of memory or breaks an invariant, and when clang-16 or its
# fuzzer runtime is missing (tests/install-deps.sh installs them): it never skips.
#
#   tests/fuzz/run.sh [options] [SECONDS]      SECONDS per target, default 20
#     --ci               the CI form: each target runs its fixed number of inputs (CI_RUNS in
#                        CMakeLists.txt, about 20 s each on a CI machine) from seed 1 with address
#                        randomisation and corpus reloading off, so a commit is checked on (nearly)
#                        the same inputs each time; new findings come from runs of SECONDS (a new
#                        random seed each time)
#     --seed N           libFuzzer's -seed (default: a random one per run)
#     --build-dir DIR    the clang build directory (default: <repo>/build-fuzz)
#     --work-dir DIR     where corpora, logs and artifacts go (default: a new temporary directory)
#     --jobs N           targets run at once (default 1)
#     --only a,b         only these targets (names as in fuzz_targets.txt: pod, hostlist, ...)
#     --corpus-from DIR  also start from DIR/<target>/corpus (the grown corpus of a former run's
#                        work dir, which keeps them), for long runs in several sittings
#
# Environment: FUZZ_BUILD_JOBS (build parallelism, default 2), FUZZ_RSS_LIMIT_MB (default 2048),
# FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_NICE (default 19).
# Prints one row per target: seconds, CPU seconds, executions, executions per second, coverage
# (libFuzzer's cov: edges and ft: features at the end), corpus size and the result.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir="$root/build-fuzz"
work_dir=""
jobs=1
only=""
corpus_from=""
seconds=20
ci=0
seed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --work-dir) work_dir=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --corpus-from) corpus_from=$2; shift 2 ;;
    --ci) ci=1; shift ;;
    --seed) seed=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) seconds=$1; shift ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "run.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
[ "$ci" = 1 ] && seed=${seed:-1}
if [ -n "$seed" ] && { [[ "$seed" == *[!0-9]* ]] || [ "$seed" -eq 0 ]; }; then
  echo "run.sh: --seed must be a positive whole number, got '$seed'" >&2; exit 2
fi
# The CI form turns address randomisation off: absl's hash tables seed themselves from addresses,
# and their iteration order decides which paths a run covers.
no_aslr=()
if [ "$ci" = 1 ]; then
  setarch "$(uname -m)" -R true 2>/dev/null || {
    echo "run.sh: FAIL: --ci needs setarch -R (util-linux) to turn address randomisation off" >&2
    exit 1
  }
  no_aslr=(setarch "$(uname -m)" -R)
fi
nice_level=${FUZZ_NICE:-19}
build_jobs=${FUZZ_BUILD_JOBS:-2}
rss_limit=${FUZZ_RSS_LIMIT_MB:-2048}
input_timeout=${FUZZ_TIMEOUT:-10}

# --- the toolchain: missing is a failure, never a skip --------------------------------------------
missing=()
command -v clang-16 >/dev/null || missing+=("clang-16 (package clang-16)")
command -v clang++-16 >/dev/null || missing+=("clang++-16 (package clang-16)")
if command -v clang-16 >/dev/null; then
  rt=$(clang-16 -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a
  [ -f "$rt" ] || missing+=("$rt (package libclang-rt-16-dev)")
fi
command -v cmake >/dev/null || missing+=("cmake")
if [ ${#missing[@]} -gt 0 ]; then
  echo "run.sh: FAIL: cannot build the fuzz targets, missing: ${missing[*]}" >&2
  echo "run.sh: install them with tests/install-deps.sh (clang-16 libclang-rt-16-dev libfuzzer-16-dev)" >&2
  exit 1
fi

# --- build -----------------------------------------------------------------------------------------
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  command -v ninja >/dev/null && generator=(-G Ninja)
  echo "run.sh: configuring $build_dir (clang-16, -DMUSTER_FUZZ=ON)" >&2
  mkdir -p "$build_dir"
  CC=clang-16 CXX=clang++-16 cmake -S "$root" -B "$build_dir" "${generator[@]}" \
    -DMUSTER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build_dir/configure.log" 2>&1 || {
    cat "$build_dir/configure.log" >&2
    echo "run.sh: FAIL: configuring the fuzz build failed" >&2
    exit 1
  }
fi
grep -q '^MUSTER_FUZZ:BOOL=ON' "$build_dir/CMakeCache.txt" || {
  echo "run.sh: FAIL: $build_dir is not a MUSTER_FUZZ=ON build directory" >&2
  exit 1
}
build_start=$(date +%s)
if ! nice -n "$nice_level" cmake --build "$build_dir" -j "$build_jobs" --target muster_fuzz_all \
    >"$build_dir/fuzz-build.log" 2>&1; then
  tail -n 60 "$build_dir/fuzz-build.log" >&2
  echo "run.sh: FAIL: building the fuzz targets failed (log: $build_dir/fuzz-build.log)" >&2
  exit 1
fi
echo "run.sh: built in $(( $(date +%s) - build_start )) s" >&2
list="$build_dir/fuzz_targets.txt"
[ -s "$list" ] || { echo "run.sh: FAIL: $list lists no targets" >&2; exit 1; }

# --- run -------------------------------------------------------------------------------------------
[ -n "$work_dir" ] || work_dir=$(mktemp -d "${TMPDIR:-/tmp}/muster-fuzz.XXXXXX")
mkdir -p "$work_dir"
corpus_root="$root/tests/fuzz/corpus"

# run_target NAME BINARY MAX_LEN CI_RUNS [FLAGS...]: one libFuzzer run; writes
# $work_dir/NAME/{log,result,times}.
run_target() {
  local name=$1 bin=$2 max_len=$3 ci_runs=$4
  shift 4
  local bound=(-max_total_time="$seconds")
  # -reload=0: libFuzzer re-reads the corpus directory every second by default, which makes what a
  # run explores depend on timing.
  [ "$ci" = 1 ] && bound=(-runs="$ci_runs" -reload=0)
  [ -n "$seed" ] && bound+=(-seed="$seed")
  local dir="$work_dir/$name"
  rm -rf "$dir/artifacts" "$dir/result"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  [ -d "$corpus_root/$name" ] && cp -r "$corpus_root/$name/." "$dir/corpus/"
  [ -n "$corpus_from" ] && [ -d "$corpus_from/$name/corpus" ] && cp -r "$corpus_from/$name/corpus/." "$dir/corpus/"
  chmod -R u+w "$dir/corpus"
  local rc=0
  local TIMEFORMAT='%U %S'
  local started
  started=$(date +%s)
  { time (cd "$dir" && nice -n "$nice_level" "${no_aslr[@]}" "$bin" "${bound[@]}" -max_len="$max_len" \
      -rss_limit_mb="$rss_limit" -malloc_limit_mb="$rss_limit" -timeout="$input_timeout" \
      -print_final_stats=1 -detect_leaks=1 -artifact_prefix="$dir/artifacts/" "$@" \
      "$dir/corpus" >"$dir/log" 2>&1) ; } 2>"$dir/times" || rc=$?
  echo $(( $(date +%s) - started )) >"$dir/wall"
  local artifacts
  artifacts=$(find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | wc -l)
  if [ "$rc" -ne 0 ] || [ "$artifacts" -gt 0 ]; then
    echo "FAIL" >"$dir/result"
  else
    echo "ok" >"$dir/result"
  fi
}

targets=()
while read -r name bin max_len ci_runs flags; do
  [ -n "$name" ] || continue
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  targets+=("$name|$bin|$max_len|$ci_runs|$flags")
done <"$list"
[ ${#targets[@]} -gt 0 ] || { echo "run.sh: FAIL: no target matches --only $only" >&2; exit 1; }

if [ "$ci" = 1 ]; then
  echo "run.sh: ${#targets[@]} targets, CI form (fixed inputs per target, seed $seed), $jobs at a time; work dir $work_dir" >&2
else
  echo "run.sh: ${#targets[@]} targets, $seconds s each${seed:+, seed $seed}, $jobs at a time; work dir $work_dir" >&2
fi
run_start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  IFS='|' read -r name bin max_len ci_runs flags <<<"$t"
  # shellcheck disable=SC2086
  run_target "$name" "$bin" "$max_len" "$ci_runs" $flags &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
run_wall=$(( $(date +%s) - run_start ))

# --- report ----------------------------------------------------------------------------------------
# libFuzzer's last status line ("#123 DONE cov: 456 ft: 789 corp: 12/3Kb ...") and final stats.
stat() { grep -o "^stat::$2: *[0-9]*" "$1" | tail -n1 | grep -o '[0-9]*$' || echo "-"; }
last_field() { grep -o "$2: [0-9]*" "$1" | tail -n1 | grep -o '[0-9]*$' || echo "-"; }
failed=()
printf '%-16s %6s %8s %12s %9s %7s %7s %7s %6s  %s\n' target secs cpu_s execs execs/s cov ft corpus rss_mb result
total_execs=0
for t in "${targets[@]}"; do
  IFS='|' read -r name _ _ _ _ <<<"$t"
  dir="$work_dir/$name"
  log="$dir/log"
  result=$(cat "$dir/result" 2>/dev/null || echo FAIL)
  execs=$(stat "$log" number_of_executed_units)
  rate=$(stat "$log" average_exec_per_sec)
  rss=$(stat "$log" peak_rss_mb)
  cov=$(last_field "$log" cov)
  ft=$(last_field "$log" ft)
  corp=$(grep -o 'corp: [0-9]*' "$log" | tail -n1 | grep -o '[0-9]*$' || echo "-")
  cpu=$(awk '{printf "%.0f", $1 + $2}' "$dir/times" 2>/dev/null || echo "-")
  wall=$(cat "$dir/wall" 2>/dev/null || echo "-")
  [ "$execs" != "-" ] && total_execs=$((total_execs + execs))
  printf '%-16s %6s %8s %12s %9s %7s %7s %7s %6s  %s\n' "$name" "$wall" "$cpu" "$execs" "$rate" \
    "$cov" "$ft" "$corp" "$rss" "$result"
  if [ "$result" != ok ]; then
    failed+=("$name")
  fi
done
echo "run.sh: ${#targets[@]} targets in ${run_wall} s of wall clock, $total_execs executions in all" >&2
if [ ${#failed[@]} -gt 0 ]; then
  for name in "${failed[@]}"; do
    echo "==== $name: $work_dir/$name/log (last lines); artifacts in $work_dir/$name/artifacts" >&2
    grep -E 'ERROR|invariant violated|SUMMARY|Test unit written|==[0-9]+==' "$work_dir/$name/log" | head -n 20 >&2 || true
    tail -n 15 "$work_dir/$name/log" >&2
  done
  echo "run.sh: FAIL: ${failed[*]}" >&2
  exit 1
fi
echo "run.sh: all targets ok; corpora and logs in $work_dir" >&2
