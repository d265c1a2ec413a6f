#!/usr/bin/env bash
# Muster's sanitizer suites, each from a build directory of its own (CMakeLists.txt):
#
#   asan   build-asan/ (GCC, MUSTER_SANITIZE=address: ASan + UBSan, -fno-sanitize-recover,
#          assertions on): every target, then the unit tests (ctest -L unit) and the end-to-end
#          suites (ctest -L e2e) against the real control plane, the muster-scheduler they start
#          included. GCC, the product's compiler: clang 16 may touch a coroutine's frame after it
#          suspends (llvm-project #56301, #72006), which made its ASan muster-scheduler report
#          heap-buffer-overflows inside Boost.Asio's use_awaitable now and then.
#   fuzz   build-fuzz/ (clang-16, MUSTER_FUZZ=ON): every libFuzzer target of tests/fuzz in its
#          reproducible CI form (tests/fuzz/run.sh --ci: a fixed number of inputs from seed 1,
#          about 20 s each); MUSTER_FUZZ_SECONDS=N runs N s each from a random seed instead
#   tsan   build-tsan/ (clang-16, MUSTER_SANITIZE=thread): the concurrency-heavy suites - the proto
#          tests (client pool, retries, rate limiter, streaming, reflector, informer, event
#          recorder) and the scheduler's (loop, queue, binder, rollback), and the proto end-to-end
#          tests (informers, watches and leader election against the real API server)
#   ci     the CI form (tests/run.sh without arguments): the ASan build runs every test of the
#          ctest suite, not only the unit and end-to-end ones, so CI builds with GCC once: the
#          unit, end-to-end, integration and chart tests, then the chaos tests alone. Since .ci/run
#          also runs the demo (its own build), the fuzz targets and the TSan suites (two clang
#          builds) are the long form's (tests/run.sh --long: asan, fuzz, tsan), so that a cold CI
#          machine stays within 80 of CI's 90 minutes. The benchmarks are not built here either.
#
#   tests/sanitize.sh [asan] [fuzz] [tsan] [ci]      default: asan, fuzz, tsan, in that order
#
# Environment: MUSTER_ASAN_BUILD_DIR, MUSTER_FUZZ_BUILD_DIR, MUSTER_TSAN_BUILD_DIR (default
# <repo>/build-asan, build-fuzz, build-tsan), MUSTER_FUZZ_SECONDS (unset), MUSTER_FUZZ_JOBS (2). Needs
# tests/install-deps.sh and the control plane (tests/cluster/build.sh), as tests/run.sh has done
# before it calls this. A missing clang-16 is a failure, never a skip. Any sanitizer report fails
# the test it happens in: ASan and UBSan stop the process, TSan makes it exit with status 66.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
asan_dir="${MUSTER_ASAN_BUILD_DIR:-$root/build-asan}"
fuzz_dir="${MUSTER_FUZZ_BUILD_DIR:-$root/build-fuzz}"
tsan_dir="${MUSTER_TSAN_BUILD_DIR:-$root/build-tsan}"
fuzz_seconds="${MUSTER_FUZZ_SECONDS:-}"
fuzz_jobs="${MUSTER_FUZZ_JOBS:-2}"
jobs=$(nproc)

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(asan fuzz tsan)
for s in "${suites[@]}"; do
  case "$s" in asan|fuzz|tsan|ci) ;; *) echo "sanitize.sh: unknown suite '$s' (asan, fuzz, tsan, ci)" >&2; exit 2 ;; esac
done
for tool in gcc g++ clang-16 clang++-16 cmake ninja; do
  command -v "$tool" >/dev/null || { echo "sanitize.sh: FAIL: $tool is missing (tests/install-deps.sh)" >&2; exit 1; }
done

# Reports with stacks, symbolized; the first error ends the process with a failure.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1}"
export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-16 || command -v llvm-symbolizer || true)}"
export TSAN_SYMBOLIZER_PATH="$ASAN_SYMBOLIZER_PATH"

# configure DIR LABEL CC CXX MARKER CMAKE_ARGS...: a build directory, configured once; one
# configured otherwise (its CMakeCache.txt lacks the line MARKER) is refused, not reused.
configure() {
  local dir=$1 label=$2 cc=$3 cxx=$4 marker=$5
  shift 5
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    echo "sanitize.sh: configuring $dir ($label)" >&2
    mkdir -p "$dir"
    CC=$cc CXX=$cxx cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "$@" >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log" >&2; exit 1; }
  fi
  grep -q "^$marker\$" "$dir/CMakeCache.txt" || {
    echo "sanitize.sh: FAIL: $dir is not a $label build directory ($marker); remove it" >&2
    exit 1
  }
}

# timed NAME COMMAND...: runs it, prints how long it took.
timed() {
  local name=$1 start
  shift
  start=$(date +%s)
  "$@"
  echo "sanitize.sh: $name took $(( $(date +%s) - start )) s" >&2
}

configure_asan() {
  configure "$asan_dir" "ASan + UBSan" gcc g++ "MUSTER_SANITIZE:STRING=address" -DMUSTER_SANITIZE=address
}
configure_fuzz() {
  configure "$fuzz_dir" "libFuzzer" clang-16 clang++-16 "MUSTER_FUZZ:BOOL=ON" -DMUSTER_FUZZ=ON
}
configure_tsan() {
  configure "$tsan_dir" "TSan" clang-16 clang++-16 "MUSTER_SANITIZE:STRING=thread" -DMUSTER_SANITIZE=thread
}
# What the TSan suite builds and runs.
tsan_targets=(muster_proto_tests muster_scheduler_tests muster_proto_e2e_tests)
tsan_tests='^(proto:|scheduler:|e2e proto:|e2e: cluster)'
run_fuzz() {
  if [ -n "$fuzz_seconds" ]; then
    timed "fuzz" bash "$root/tests/fuzz/run.sh" --build-dir "$fuzz_dir" --jobs "$fuzz_jobs" "$fuzz_seconds"
  else
    timed "fuzz" bash "$root/tests/fuzz/run.sh" --ci --build-dir "$fuzz_dir" --jobs "$fuzz_jobs"
  fi
}
run_tsan_tests() {
  (cd "$tsan_dir" && timed "tsan tests" ctest --output-on-failure --no-tests=error -R "$tsan_tests" -E 'apimachinery')
}

for s in "${suites[@]}"; do
  case "$s" in
    asan)
      configure_asan
      timed "asan build" cmake --build "$asan_dir" -j "$jobs"
      (cd "$asan_dir" && timed "asan unit tests" ctest --output-on-failure --no-tests=error -L unit -j "$jobs")
      (cd "$asan_dir" && timed "asan end-to-end tests" ctest --output-on-failure --no-tests=error -L e2e)
      ;;
    fuzz)
      configure_fuzz
      run_fuzz
      ;;
    tsan)
      configure_tsan
      timed "tsan build" cmake --build "$tsan_dir" -j "$jobs" --target "${tsan_targets[@]}"
      run_tsan_tests
      ;;
    ci)
      # CI's form since the demo joined .ci/run (issue 42): the ASan build runs every ctest suite;
      # the fuzz targets and the TSan suites (two more builds, with clang) are the long form's
      # (tests/run.sh --long), so a cold CI machine stays under 80 of its 90 minutes.
      configure_asan
      timed "asan build" cmake --build "$asan_dir" -j "$jobs"
      (cd "$asan_dir" && timed "asan unit tests" ctest --output-on-failure --no-tests=error -L unit -j "$jobs")
      (cd "$asan_dir" && timed "asan end-to-end, integration and chart tests" \
        ctest --output-on-failure --no-tests=error -LE '^(unit|chaos)$')
      # ASan's quarantine keeps freed memory out of reuse (256 MB by default), which the hostile
      # corpus's flat-memory check reads as growth (19 MiB over 3 rounds, bound 10): off for these.
      (cd "$asan_dir" && ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=0" \
        timed "asan chaos tests" ctest --output-on-failure --no-tests=error -L chaos)
      ;;
  esac
done
echo "sanitize.sh: ${suites[*]}: passed" >&2
