#include "jobengine/slurm/core/job_state.h"

#include <array>

#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

struct Names {
  JobState state;
  std::string_view name;
  std::string_view compact;
};

constexpr std::array<Names, 12> kNames = {{
    {JobState::kPending, "PENDING", "PD"},
    {JobState::kRunning, "RUNNING", "R"},
    {JobState::kSuspended, "SUSPENDED", "S"},
    {JobState::kCompleted, "COMPLETED", "CD"},
    {JobState::kCancelled, "CANCELLED", "CA"},
    {JobState::kFailed, "FAILED", "F"},
    {JobState::kTimeout, "TIMEOUT", "TO"},
    {JobState::kNodeFail, "NODE_FAIL", "NF"},
    {JobState::kPreempted, "PREEMPTED", "PR"},
    {JobState::kBootFail, "BOOT_FAIL", "BF"},
    {JobState::kDeadline, "DEADLINE", "DL"},
    {JobState::kOutOfMemory, "OUT_OF_MEMORY", "OOM"},
}};

}  // namespace

std::string_view jobStateName(JobState state, const JobStateFlags& flags) {
  if (flags.completing) return "COMPLETING";
  if (flags.configuring) return "CONFIGURING";
  if (flags.requeued) return "REQUEUED";
  if (flags.special_exit) return "SPECIAL_EXIT";
  return kNames[static_cast<size_t>(state)].name;
}

std::string_view jobStateCompact(JobState state, const JobStateFlags& flags) {
  if (flags.completing) return "CG";
  if (flags.configuring) return "CF";
  if (flags.requeued) return "RQ";
  if (flags.special_exit) return "SE";
  return kNames[static_cast<size_t>(state)].compact;
}

std::optional<JobState> parseJobState(std::string_view text) {
  for (const Names& n : kNames) {
    if (equalsIgnoreCase(text, n.name) || equalsIgnoreCase(text, n.compact)) return n.state;
  }
  return std::nullopt;
}

bool isFinished(JobState state) {
  return static_cast<int>(state) > static_cast<int>(JobState::kSuspended);
}

}  // namespace muster::jobengine::slurm
