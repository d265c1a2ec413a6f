#pragma once

// `muster-slurm batch-step`: the main process of a Slurm job's batch pod (node 0), what
// slurmstepd's batch step does in Slurm. It reads the job the engine prepared
// ($MUSTER_SLURM_BATCH_DIR/{script,environment,args}) and:
//
//   1. builds the script's environment (scriptEnvironment below);
//   2. changes to $MUSTER_SLURM_WORKDIR; if that fails it writes slurmstepd's "couldn't chdir to
//      `X': <reason>: going to /tmp instead" to the job's stderr and runs in /tmp;
//   3. opens the job's output: the -o/-e/-i patterns of MUSTER_SLURM_STDOUT, MUSTER_SLURM_STDERR,
//      MUSTER_SLURM_STDIN expanded with expandFilenamePattern (%j %x %u %N %A %a %%, ...;
//      relative to the work dir; -o defaults to slurm-%j.out, or slurm-%A_%a.out for an array
//      element; -e to -o's file; -i to /dev/null). Files are truncated (Slurm's default
//      --open-mode) unless MUSTER_SLURM_OPEN_MODE=append. A file that cannot be opened (its
//      directory does not exist, say) is replaced by this container's stdout/stderr with a
//      one-line notice, so `kubectl logs` shows the output;
//   4. waits until every other node of the job accepts `<MUSTER_SLURM_RSH> <node> true` (as the
//      Open MPI runtime's wait-workers.sh does), so srun works on the script's first line:
//      checks run concurrently, a failed one is retried every second, a progress line per
//      waiting node goes to the container's stderr every 15 s, and after
//      MUSTER_SLURM_SSH_WAIT_SECONDS (default 600) the job fails with exit code 1;
//   5. copies the script to $MUSTER_SLURM_STATE_DIR/slurm_script (mode 0700) and executes it
//      directly (its #! line chooses the interpreter) with the arguments from `args`, in its own
//      process group, as a child subreaper;
//   6. forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the script's process
//      group (the kubelet sends SIGTERM on deletion and at activeDeadlineSeconds), and delivers
//      scancel --signal requests as they appear in $MUSTER_SLURM_SIGNAL_FILE (checked every
//      second; signal_request.h says to whom);
//   7. when the script ends, ends what it left behind (SIGTERM to its process group, SIGKILL
//      after 3 s to everything left, adopted orphans included), writes Slurm's ExitCode
//      "<code>:<signal>" to $MUSTER_TERMINATION_LOG (default /dev/termination-log) and returns
//      the script's exit code (128 + signal when it was killed).
//
// Tools on PATH: the directory of $MUSTER_SLURM_BIN goes first on the script's PATH when it
// holds `srun` and `scontrol` (the installer's symlinks); otherwise batch-step makes symlinks
// srun, scontrol, sbatch, squeue, scancel, sinfo, sacct -> $MUSTER_SLURM_BIN in
// $MUSTER_SLURM_STATE_DIR/bin and puts that directory first.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobengine/slurm/core/env.h"

namespace muster::jobengine::slurm {

int batchStepMain(const std::map<std::string, std::string>& env);

// --- pieces batchStepMain is made of (tested on their own) ---

// NUL-separated entries (/proc/<pid>/environ, the batch dir's `environment` and `args`). A
// trailing NUL ends the last entry; an empty file has none.
std::vector<std::string> splitNulEntries(std::string_view data);

// The batch script's environment (Slurm's precedence, env.h):
//   the submission environment (after --export) ...
//   ... overwritten by what the engine gave this pod as batchEnvironment: every SLURM* variable
//       of `own` (SLURM_*, SLURMD_NODENAME), ENVIRONMENT, HOSTNAME and CUDA_VISIBLE_DEVICES;
//   ... plus MUSTER_SLURM_RSH, MUSTER_SLURM_BIN and MUSTER_SLURM_STATE_DIR (srun needs them);
//   PATH = tools_dir, then the submission PATH, then the entries of this container's PATH the
//       submission PATH lacks (an image's own tool directories keep working).
// With --export=NONE (SLURM_GET_USER_ENV=1 in the submission environment) Slurm would load the
// user's login environment on the node; Muster takes this container's environment (without its
// MUSTER_* settings) as that base instead.
Environment scriptEnvironment(const Environment& submission, const Environment& own,
                              const std::string& tools_dir);

struct BatchPaths {
  std::string stdout_path, stderr_path, stdin_path;
};
// The expanded -o/-e/-i of the batch step from the pod's MUSTER_SLURM_* and SLURM_* variables.
BatchPaths batchPaths(const Environment& own, const std::string& work_dir);

// Slurm's ExitCode of a wait status: "0:0", "1:0", "0:9".
std::string exitCodeText(int wait_status);
// The process exit code for a wait status: the code, or 128 + the signal.
int exitCodeOf(int wait_status);

}  // namespace muster::jobengine::slurm
