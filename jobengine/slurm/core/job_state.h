#pragma once

// Slurm's job states (slurm.h enum job_states and the JOB_* state flags) with the names squeue
// prints: %T (job_state_string) and %t (job_state_string_compact).

#include <optional>
#include <string_view>

namespace muster::jobengine::slurm {

// The base states, in Slurm's order: every state after kSuspended is a finished job.
enum class JobState {
  kPending,
  kRunning,
  kSuspended,
  kCompleted,  // exited 0 (JOB_COMPLETE)
  kCancelled,
  kFailed,
  kTimeout,
  kNodeFail,
  kPreempted,
  kBootFail,
  kDeadline,
  kOutOfMemory,
};

// The flags that change the printed state, in the order Slurm lets them win.
struct JobStateFlags {
  bool completing = false;   // CG: finished, epilog or cleanup still running
  bool configuring = false;  // CF: nodes being readied
  bool requeued = false;     // RQ
  bool special_exit = false; // SE: requeued in a special exit state
};

// "PENDING", "RUNNING", ..., "OUT_OF_MEMORY"; a flag's name when one is set ("COMPLETING").
std::string_view jobStateName(JobState state, const JobStateFlags& flags = {});
// "PD", "R", "S", "CD", "CA", "F", "TO", "NF", "PR", "BF", "DL", "OOM"; "CG", "CF", "RQ", "SE".
std::string_view jobStateCompact(JobState state, const JobStateFlags& flags = {});
// A state as squeue -t takes it: a name or compact code, any case ("pd", "Running").
std::optional<JobState> parseJobState(std::string_view text);

// IS_JOB_FINISHED: the job ended (any state after kSuspended).
bool isFinished(JobState state);

}  // namespace muster::jobengine::slurm
