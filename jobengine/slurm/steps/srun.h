#pragma once

// srun inside a Muster batch job: a step is a set of `muster-slurm step-tasks` processes, one per
// node of the step, reached over SSH (step_tasks.h, step_protocol.h). Muster runs no slurmctld
// or slurmd, so srun only works inside an allocation (SLURM_JOB_ID set).
//
//   1. Options: srunOptionsFromEnvironment + parseSrunArgs + mergeSrunOptions (options.h). The
//      options Open MPI's and PRRTE's Slurm launchers pass (--ntasks-per-node=1
//      --kill-on-bad-exit --cpu_bind=none --nodes=N --nodelist=... --ntasks=N, --mpi=none,
//      --external-launcher) are accepted; the ones Muster ignores are reported by options.h's
//      warning lines.
//   2. The step: planStep (step_plan.h) over the allocation of the batch environment; the step
//      id comes from a counter file in $MUSTER_SLURM_STATE_DIR (flock; the first step is 0).
//   3. Launch, per step node: the node srun runs on (SLURMD_NODENAME) gets a local child
//      `$MUSTER_SLURM_BIN step-tasks` (fork + exec, the same protocol over pipes: one code path
//      for every node); every other node `<MUSTER_SLURM_RSH words...> <node>
//      $MUSTER_SLURM_BIN step-tasks`. The remote command line is that fixed string; argv, the
//      environment and the working directory travel over ssh's stdin as data. Each child is in
//      its own process group, so a Ctrl-C on the terminal reaches srun only.
//   4. Output: each task's lines are written to srun's stdout/stderr as they arrive, whole (a
//      frame is written with one write, frames never mix two tasks' partial lines). -l prefixes
//      every line with Slurm's label "%*d: " (width = digits of ntasks-1; an unterminated last
//      line gets a newline, as write_labelled_message does). -o/-e: "none", a task number, or a
//      file pattern (one file, or one per task with %t/%n/%N), written by srun on its own node.
//   5. Signals (srun.1 "SIGNALS AND ESCAPE SEQUENCES", src/srun/signals.c): the first SIGINT
//      prints the task states ("interrupt (one more within 1 sec to abort)"); a second within a
//      second sends SIGINT to every task and then terminates the step. -X/--disable-status
//      forwards each SIGINT at once; --quit-on-interrupt terminates on the first. SIGTERM,
//      SIGHUP and SIGQUIT: "forcing job termination" (SIGCONT + SIGTERM to every task, SIGKILL
//      after the kill wait); a second one (or a third Ctrl-C) sends SIGKILL and, 5 s later, cuts
//      off the nodes that still do not answer. SIGUSR1 and SIGUSR2 are forwarded as they are;
//      SIGCONT is not (srun only logs it).
//   6. Exit code (srun.1 "RETURN VALUE", launch.c _task_finish): the highest exit code of all
//      tasks, unless a task was killed by a signal: then 128 + the highest such signal.
//      Non-zero exits and signals are reported as "srun: error: <node>: task <id>: Exited with
//      exit code N" / "...: Killed", tasks of a node that ended alike at once on one line
//      ("tasks 0-3"). Tasks killed because srun ended the step on a signal are not reported.
//      -W/--wait: once the first task ended, the rest get that many seconds. A node that cannot be reached (the remote shell ends
//      before step-tasks says hello) is "srun: error: <node>: <ssh's last error line>", its
//      tasks count as exit code 1, and the rest of the step is terminated (Slurm aborts a step
//      whose launch failed on a node). With --kill-on-bad-exit a task ending badly terminates
//      the step.
//   7. Accounting: a start line when the step is launched and an end line (state, "code:signal")
//      when it ended go to $MUSTER_SLURM_STATE_DIR/job-<id>.steps (step_record.h); batch-step
//      hands them to the job engine with its exit code, for sacct's "<id>.<step>" lines.
//
// Not supported: stdin (tasks read /dev/null; -i other than "none" warns), --multi-prog, --pty,
// steps outside an allocation.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jobengine/slurm/steps/step_protocol.h"

namespace muster::jobengine::slurm {

// argv without argv[0]; env is srun's environment (what the tasks inherit).
int srunMain(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

// --- pieces srunMain is made of (tested on their own) ---

// Slurm's label width: the digits of ntasks - 1 (at least 1).
int labelWidth(int ntasks);
// "%*d: ".
std::string labelPrefix(uint32_t procid, int width);
// What srun prints for one output frame: with a label every line is prefixed and an
// unterminated last piece gets a newline; without one the data is unchanged.
std::string formatTaskOutput(std::string_view data, bool label, uint32_t procid, int width);

// srun's exit code for these task ends.
int stepExitCode(const std::vector<TaskExit>& exits);
// The "srun: error: <node>: task 3: Exited with exit code 2" line for tasks of one node that
// ended alike ("tasks 0-3: Killed"); empty for a clean exit.
std::string taskEndMessage(std::string_view node, const std::vector<uint32_t>& procids,
                           const TaskExit& exit);

// The next step id of the job, from `<state_dir>/job-<id>.next-step` under flock (0 first).
absl::StatusOr<uint32_t> allocateStepId(const std::string& state_dir, uint32_t job_id);

// Appends one line of the step's accounting record (step_record.h) to `path` (O_APPEND, one
// write); false, with a warning on stderr, when it cannot.
bool appendStepRecord(const std::string& path, const std::string& line);

// "0-3,5": the procids as Slurm's bitmap format prints them.
std::string formatTaskIds(std::vector<uint32_t> ids);

// MUSTER_SLURM_RSH as argv words (split at blanks); empty when unset or blank.
std::vector<std::string> remoteShellWords(const std::map<std::string, std::string>& env);

}  // namespace muster::jobengine::slurm
