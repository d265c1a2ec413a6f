#!/usr/bin/env bash
# Real batch scripts through batch-step, srun and step-tasks, with real processes, outside
# Kubernetes: a 3-node job n[1-3] whose "nodes" all live on this machine. srun reaches n2 and n3
# through slurm/steps/fake_rsh.sh, a test-only stand-in for ssh (it scrubs the environment like sshd
# and can play a node that is down), and runs n1's share locally, as on the batch pod. Each job
# gets the environment the job engine gives the batch pod (SLURM_*, MUSTER_SLURM_*), a batch dir
# (script, NUL-separated submission environment) and its own work and state dirs.
#
# Checked: scontrol's hostlists; srun's task fan-out (SLURM_PROCID 0..5 once each, 2 per node,
# local ids, step ids counting from 0), -w, environment sent over the channel, -l labels, exit
# codes (highest code, 128+signal), SIGTERM to srun and to batch-step killing every task (by
# pid), a node that is down (batch-step waits for it; srun fails cleanly when it goes away),
# slurm-<id>.out in the work dir, the termination log, and Open MPI 4.1's mpirun launching its
# orteds through this srun (when mpicc/mpirun are installed).
#
# Usage: slurm_steps_test.sh MUSTER_SLURM_BINARY FAKE_RSH
set -euo pipefail
tool=$(realpath "$1")
rsh=$(realpath "$2")
# shellcheck source=slurm/steps/steps_lib.sh
. "$(dirname "$0")/slurm/steps/steps_lib.sh"

echo "=== fan-out, placement, environment, labels, exit codes"
prepare 101 '#!/bin/sh
echo "hostnames: $(scontrol show hostnames $SLURM_JOB_NODELIST | tr "\n" " ")"
echo "bare hostnames: $(scontrol show hostnames | tr "\n" " ")"
echo "hostlist: $(scontrol show hostlist n1,n2,n3,n7)"
echo "nodes: $(srun printenv SLURMD_NODENAME | sort | tr "\n" " ")"
srun -n 6 sh -c "echo rank \$SLURM_PROCID local \$SLURM_LOCALID node \$SLURMD_NODENAME step \$SLURM_STEP_ID" > ranks.txt
echo "only: $(srun -N1 -n1 -w n2 printenv SLURMD_NODENAME)"
export FROM_SCRIPT="value with spaces; \$dollar and \"quotes\""
echo "sent: $(srun -N1 -n1 -w n3 printenv FROM_SCRIPT)"
srun -l -n 12 echo hi > labels.txt
srun -n 3 sh -c "exit \$SLURM_PROCID" 2> failing.err
echo "failing step rc=$?"
srun -n 2 -w n3 -N1 sh -c "kill -9 \$\$" 2> killed.err
echo "killed step rc=$?"
srun -n 3 -o "task-%t-of-%j.out" sh -c "echo I am \$SLURM_PROCID; echo err \$SLURM_PROCID >&2"
echo "cwd: $(pwd)"
exit 3
'
run 101
expect_rc 101 3
expect_log 101 "3:0"
# Every srun is a step of the job's accounting (sacct's <id>.<step> lines), in order.
expect_steps 101 "0 COMPLETED 0:0 3 6 6 n[1-3] printenv
1 COMPLETED 0:0 3 6 6 n[1-3] sh
2 COMPLETED 0:0 1 1 1 n2 printenv
3 COMPLETED 0:0 1 1 1 n3 printenv
4 COMPLETED 0:0 3 12 12 n[1-3] echo
5 FAILED 2:0 3 3 3 n[1-3] sh
6 FAILED 0:9 1 2 2 n3 sh
7 COMPLETED 0:0 3 3 3 n[1-3] sh"
expect_line 101 "hostnames: n1 n2 n3 "
expect_line 101 "bare hostnames: n1 n2 n3 "
expect_line 101 "hostlist: n[1-3,7]"
expect_line 101 "nodes: n1 n1 n2 n2 n3 n3 "
expect_line 101 "only: n2"
expect_line 101 'sent: value with spaces; $dollar and "quotes"'
expect_line 101 "failing step rc=2"
expect_line 101 "killed step rc=137"
expect_line 101 "cwd: $work/job101/work"
ranks="$work/job101/work/ranks.txt"
[ "$(wc -l < "$ranks")" = 6 ] || fail "srun -n 6 printed $(wc -l < "$ranks") lines"
for r in 0 1 2 3 4 5; do
  [ "$(grep -c "^rank $r local " "$ranks")" = 1 ] || fail "rank $r is not there exactly once"
done
for n in n1 n2 n3; do
  [ "$(grep -c " node $n step 1$" "$ranks")" = 2 ] || fail "node $n did not run 2 ranks of step 1"
done
grep -qx "rank 3 local 1 node n2 step 1" "$ranks" || fail "rank 3 is not local 1 on n2"
for r in 0 1 2; do
  f="$work/job101/work/task-$r-of-101.out"
  [ "$(cat "$f" 2>/dev/null)" = "I am $r
err $r" ] || fail "srun -o task-%t: $f holds '$(cat "$f" 2>/dev/null)'"
done
labels="$work/job101/work/labels.txt"
[ "$(wc -l < "$labels")" = 12 ] || fail "srun -l -n 12 printed $(wc -l < "$labels") lines"
for r in $(seq 0 11); do
  grep -qx "$(printf '%2d: hi' "$r")" "$labels" || fail "no label line for task $r"
done
grep -qx "srun: error: n2: task 1: Exited with exit code 1" "$work/job101/work/failing.err" || fail "no exit report for task 1"
grep -qx "srun: error: n3: task 2: Exited with exit code 2" "$work/job101/work/failing.err" || fail "no exit report for task 2"
[ "$(wc -l < "$work/job101/work/failing.err")" = 2 ] || fail "task 0 exited 0 and must not be reported"
# Ends that arrive together are reported on one line, as slurmstepd groups them.
killed="$work/job101/work/killed.err"
grep -qx "srun: error: n3: tasks 0-1: Killed" "$killed" ||
  { grep -qx "srun: error: n3: task 0: Killed" "$killed" && grep -qx "srun: error: n3: task 1: Killed" "$killed"; } ||
  fail "no signal report for tasks 0 and 1: $(cat "$killed")"
# n2 and n3 were reached through the remote shell, n1 never (it is srun's own node).
calls="$work/job101/rsh/calls"
grep -q "^n2 $work/bin/muster-slurm step-tasks$" "$calls" || fail "n2 not reached through the remote shell"
grep -q "^n3 $work/bin/muster-slurm step-tasks$" "$calls" || fail "n3 not reached through the remote shell"
grep -q "^n1 " "$calls" && fail "the local node went through the remote shell"
grep -qx "muster: every node accepts SSH" "$work/job101/container.err" || fail "no SSH wait"

echo "=== SIGTERM to srun ends every task"
prepare 102 '#!/bin/sh
srun -n 6 sh -c "echo \$\$ >> pids; exec sleep 300" &
srun_pid=$!
while [ "$(cat pids 2>/dev/null | wc -l)" -lt 6 ]; do sleep 0.1; done
kill -TERM $srun_pid
wait $srun_pid
echo "srun rc=$?"
'
run 102
expect_rc 102 0
expect_line 102 "srun rc=143"
out 102 | grep -qx "srun: forcing job termination" || fail "srun did not say it terminates the step"
expect_gone "$work/job102/work/pids"
# srun ended the step on SIGTERM: the step was cancelled.
expect_steps 102 "0 CANCELLED 0:15 3 6 6 n[1-3] sh"

echo "=== one Ctrl-C prints the task states, a second within a second ends the step"
prepare 108 '#!/bin/sh
srun -n 3 sh -c "echo \$\$ >> pids; exec sleep 300" 2> srun.err &
srun_pid=$!
while [ "$(cat pids 2>/dev/null | wc -l)" -lt 3 ]; do sleep 0.1; done
kill -INT $srun_pid
sleep 1.5
alive=0
for p in $(cat pids); do kill -0 $p 2>/dev/null && alive=$((alive + 1)); done
echo "alive after one interrupt: $alive"
kill -INT $srun_pid
sleep 0.2
kill -INT $srun_pid
wait $srun_pid
echo "srun rc=$?"
'
run 108
expect_line 108 "alive after one interrupt: 3"
expect_line 108 "srun rc=130"
err108="$work/job108/work/srun.err"
grep -qx "srun: interrupt (one more within 1 sec to abort)" "$err108" || fail "no interrupt notice"
grep -qx "srun: StepId=108.0 tasks 0-2: running" "$err108" || fail "no task states after one Ctrl-C"
grep -qx "srun: sending Ctrl-C to StepId=108.0" "$err108" || fail "the second Ctrl-C was not forwarded"
expect_gone "$work/job108/work/pids"

echo "=== SIGTERM to batch-step (pod deletion) reaches the script, srun and every task"
prepare 103 '#!/bin/sh
srun -n 6 sh -c "echo \$\$ >> pids; exec sleep 300"
echo "not reached"
'
start 103
pid=$!
bg+=("$pid")
wait_lines "$work/job103/work/pids" 6
kill -TERM "$pid"
finish 103 "$pid"
expect_rc 103 143
expect_log 103 "0:15"
expect_steps 103 "0 CANCELLED 0:15 3 6 6 n[1-3] sh"
out 103 | grep -q "not reached" && fail "the script went on after SIGTERM"
expect_gone "$work/job103/work/pids"

echo "=== scancel --signal: requests in the signal file reach the srun steps, then the batch shell"
# The kubelet writes the batch pod's muster.dev/slurm-signal annotation into this file; the
# request there before the script starts (a SIGTERM to everything) belongs to an earlier run.
prepare 111 '#!/bin/bash
trap "echo batch shell got USR1; touch got-usr1" USR1
srun -n 3 sh -c "trap \"echo task \\\$SLURM_PROCID got USR2; exit 0\" USR2; echo \$\$ >> pids; while :; do sleep 0.1; done" > tasks.txt &
srun_pid=$!
wait $srun_pid
echo "srun rc=$?"
touch steps-done
while [ ! -f got-usr1 ]; do sleep 0.1; done
echo "done"
'
printf '1:15:full' > "$work/job111/signal"
start 111 MUSTER_SLURM_SIGNAL_FILE="$work/job111/signal"
pid=$!
bg+=("$pid")
wait_lines "$work/job111/work/pids" 3
printf '2:12:steps' > "$work/job111/signal.new" && mv "$work/job111/signal.new" "$work/job111/signal"
wait_lines "$work/job111/work/steps-done" 0
printf '3:10:batch' > "$work/job111/signal.new" && mv "$work/job111/signal.new" "$work/job111/signal"
finish 111 "$pid"
expect_rc 111 0
expect_line 111 "srun rc=0"
expect_line 111 "batch shell got USR1"
expect_line 111 "done"
[ "$(sort "$work/job111/work/tasks.txt")" = "task 0 got USR2
task 1 got USR2
task 2 got USR2" ] || fail "the steps' tasks: $(cat "$work/job111/work/tasks.txt")"
grep -q "scancel --signal: User defined signal 2 (signal 12) to 1 running srun step(s)" "$work/job111/container.err" ||
  fail "batch-step did not say it signalled the step: $(cat "$work/job111/container.err")"
# Two requests took at least two of batch-step's checks of the file; none delivered the old one.
grep -q "Terminated (signal 15)" "$work/job111/container.err" && fail "the old request was delivered"

echo "=== batch-step waits until every node accepts SSH"
prepare 104 '#!/bin/sh
echo "started"
srun -N3 -n3 printenv SLURMD_NODENAME | sort | tr "\n" " "
'
touch "$work/job104/rsh/down-n3"
start 104
pid=$!
bg+=("$pid")
# A progress line after 15 s, and no script yet.
deadline=$((SECONDS + 30))
until grep -qx "muster: waiting for n3 to accept SSH: ssh: connect to host n3 port 2222: Connection refused" \
    "$work/job104/container.err"; do
  [ $SECONDS -lt $deadline ] || fail "no progress line for n3"
  sleep 0.2
done
[ -e "$work/job104/work/slurm-104.out" ] && out 104 | grep -q started && fail "the script ran before n3 accepted SSH"
rm "$work/job104/rsh/down-n3"
finish 104 "$pid"
expect_rc 104 0
expect_line 104 "n1 n2 n3 "
grep -qx "muster: n3 accepts SSH" "$work/job104/container.err" || fail "n3 never accepted SSH"

echo "=== a node that never accepts SSH fails the job"
prepare 105 '#!/bin/sh
echo "must not run"
'
touch "$work/job105/rsh/down-n2"
run 105 MUSTER_SLURM_SSH_WAIT_SECONDS=2
expect_rc 105 1
expect_log 105 "1:0"
grep -q "muster: error: n2 did not accept SSH in 2 s: ssh: connect to host n2 port 2222" \
  "$work/job105/container.err" || fail "no timeout message"
out 105 | grep -q "must not run" && fail "the script ran"

echo "=== a node lost at srun time is reported and ends the rest of the step"
prepare 106 '#!/bin/sh
touch "$FAKE_RSH_STATE/down-n3"
start=$(date +%s)
srun -n 6 sh -c "echo \$\$ >> pids; exec sleep 300"
echo "srun rc=$?"
echo "took $(( $(date +%s) - start ))"
'
run 106
# The tasks srun had to end were killed by SIGTERM: a signal decides the exit code, as in Slurm.
expect_line 106 "srun rc=143"
expect_line 106 "srun: error: n3: ssh: connect to host n3 port 2222: Connection refused"
took=$(out 106 | sed -n 's/^took //p')
[ "$took" -lt 20 ] || fail "the step took $took s to end after losing n3"
# The tasks may have been ended before they wrote their pids.
[ ! -e "$work/job106/work/pids" ] || expect_gone "$work/job106/work/pids"

if command -v mpicc >/dev/null && command -v mpirun >/dev/null && command -v unshare >/dev/null \
   && [ "$(id -u)" = 0 ]; then
  echo "=== Open MPI's mpirun inside the batch script, orteds through srun"
  cat > "$work/hello_mpi.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char *argv[]) {
  MPI_Init(&argc, &argv);
  int rank, size, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char *node = getenv("SLURMD_NODENAME");
  printf("Hello from MPI process %d rank in %d processes on %s sum %d\n", rank, size,
         node ? node : "?", sum);
  MPI_Finalize();
  return 0;
}
C
  mpicc -o "$work/hello_mpi" "$work/hello_mpi.c"
  # No hostfile: mpirun takes its slots from SLURM_TASKS_PER_NODE and starts orted on n2, n3
  # with `srun ... orted`. All "nodes" share this host, so the shared-memory BTL (which trusts
  # node names) is left out.
  prepare 107 "#!/bin/sh
mpirun --allow-run-as-root --mca btl self,tcp --mca plm_base_verbose 5 $work/hello_mpi
"
  # The batch pod's hostname is its node name: n1, the node mpirun itself runs ranks on.
  launch_prefix=(unshare --uts -- sh -c 'hostname n1 && exec "$@"' _)
  run 107
  launch_prefix=()
  expect_rc 107 0
  ranks=$(out 107 | grep -c "^Hello from MPI process .* rank in 6 processes on .* sum 15$" || true)
  [ "$ranks" = 6 ] || fail "$ranks of 6 MPI ranks reported in"
  for n in n1 n2 n3; do
    [ "$(out 107 | grep -c "^Hello from MPI process .* on $n sum 15$")" = 2 ] || fail "node $n did not run 2 ranks"
  done
  out 107 | grep -q "srun --ntasks-per-node=1 --kill-on-bad-exit .*--nodes=2 --nodelist=n2,n3 --ntasks=2 orted" \
    || fail "mpirun did not launch its orteds on n2,n3 through srun"
else
  echo "=== (Open MPI or unshare not available, or not root: mpirun check skipped)"
fi

echo PASS
