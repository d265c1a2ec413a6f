# Shared by slurm_steps_test.sh and slurm_steps_ssh_test.sh (sourced): a work dir with the
# muster-slurm stand-in ($tool) installed as muster-slurm, srun and scontrol, and helpers that
# run one batch job the way the batch pod runs it. The caller sets $tool and $rsh (the
# MUSTER_SLURM_RSH value) before sourcing.
work=$(mktemp -d /tmp/muster-slurm-steps.XXXXXX)
bg=()
launch_prefix=()  # a command batch-step runs under (e.g. a UTS namespace with the pod's hostname)
cleanup() {
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/bin"
cp "$tool" "$work/bin/muster-slurm"
ln -s muster-slurm "$work/bin/srun"
ln -s muster-slurm "$work/bin/scontrol"

test_start=$(date +%s)

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/job*/work/slurm-*.out "$work"/job*/container.*; do
    [ -s "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
  done >&2
  exit 1
}

# prepare ID SCRIPT: the job's directories, script and submission environment.
prepare() {
  local dir="$work/job$1"
  mkdir -p "$dir/batch" "$dir/state" "$dir/work" "$dir/rsh"
  printf '%s' "$2" > "$dir/batch/script"
  printf 'HOME=/root\0PATH=/usr/local/bin:/usr/bin:/bin\0USER=tester\0FAKE_RSH_STATE=%s\0' \
    "$dir/rsh" > "$dir/batch/environment"
}

# start ID [VAR=VALUE...]: batch-step of job ID in the background ($! is it), with the batch
# pod's environment; later VAR=VALUE arguments override the defaults.
start() {
  local id=$1
  shift
  local dir="$work/job$id"
  env -i PATH=/usr/bin:/bin HOME=/root \
    SLURM_JOB_ID="$id" SLURM_JOBID="$id" SLURM_JOB_NAME=steps SLURM_JOB_NODELIST='n[1-3]' \
    SLURM_NODELIST='n[1-3]' SLURM_JOB_NUM_NODES=3 SLURM_NNODES=3 SLURM_NTASKS=6 SLURM_NPROCS=6 \
    SLURM_TASKS_PER_NODE='2(x3)' SLURM_JOB_CPUS_PER_NODE='2(x3)' SLURM_CPUS_ON_NODE=2 \
    SLURMD_NODENAME=n1 HOSTNAME=n1 SLURM_NODEID=0 SLURM_PROCID=0 SLURM_LOCALID=0 \
    SLURM_SUBMIT_DIR="$dir/work" SLURM_RESTART_COUNT=0 ENVIRONMENT=BATCH \
    MUSTER_SLURM_RSH="$rsh" MUSTER_SLURM_BIN="$work/bin/muster-slurm" \
    MUSTER_SLURM_STATE_DIR="$dir/state" MUSTER_SLURM_BATCH_DIR="$dir/batch" \
    MUSTER_SLURM_WORKDIR="$dir/work" MUSTER_SLURM_USER=tester MUSTER_SLURM_JOB_NAME=steps \
    MUSTER_TERMINATION_LOG="$dir/termination-log" FAKE_RSH_STATE="$dir/rsh" \
    "$@" "${launch_prefix[@]}" "$work/bin/muster-slurm" batch-step \
    > "$dir/container.out" 2> "$dir/container.err" &
}

# finish ID PID: waits (bounded) for batch-step and records its exit code.
finish() {
  local rc=0
  timeout 120 tail --pid="$2" -f /dev/null || fail "job $1 did not finish in 120 s"
  wait "$2" || rc=$?
  echo "$rc" > "$work/job$1/rc"
}

run() {
  local id=$1
  shift
  start "$id" "$@"
  local pid=$!
  bg+=("$pid")
  finish "$id" "$pid"
}

out() { cat "$work/job$1/work/slurm-$1.out"; }
expect_line() { out "$1" | grep -qxF -- "$2" || fail "job $1: no line '$2'"; }
expect_rc() { [ "$(cat "$work/job$1/rc")" = "$2" ] || fail "job $1 exited with $(cat "$work/job$1/rc"), expected $2"; }
# The termination log's first line: the batch script's ExitCode.
expect_log() { [ "$(head -n 1 "$work/job$1/termination-log")" = "$2" ] || fail "job $1 termination log '$(cat "$work/job$1/termination-log")', expected '$2' first"; }
# The steps the termination log records (step_record.h), one per line without their times:
# "<id> <state> <exit code> <nodes> <tasks> <cpus> <node list> <name>"; each start and end must
# lie between the test's start and now, start <= end.
expect_steps() {
  local log="$work/job$1/termination-log" now
  now=$(date +%s)
  local got
  got=$(awk -F'\t' '$1 == "step" { print $2, $3, $4, $7, $8, $9, $10, $11 }' "$log")
  [ "$got" = "$2" ] || fail "job $1: the termination log records steps
$got
expected
$2"
  awk -F'\t' -v t0="$test_start" -v now="$now" \
    '$1 == "step" && !($5 >= t0 && $5 <= $6 && $6 <= now) { bad = 1 } END { exit bad }' "$log" ||
    fail "job $1: step times out of order: $(cat "$log")"
}
# Waits until every pid in FILE is gone (or fails).
expect_gone() {
  local file=$1 deadline=$((SECONDS + 10))
  [ -s "$file" ] || fail "no pid file $file"
  for p in $(cat "$file"); do
    while kill -0 "$p" 2>/dev/null; do
      [ $SECONDS -lt $deadline ] || fail "task process $p outlived its step"
      sleep 0.1
    done
  done
}
wait_lines() {  # FILE N: until FILE has N lines
  local deadline=$((SECONDS + 30))
  until [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1 never reached $2 lines"
    sleep 0.1
  done
}

