#pragma once

// Job arrays: sbatch --array and the job ids scancel/squeue/scontrol take.
//
// --array (slurmctld _valid_array_inx / slurm_parse_array_tok, _create_job_array):
//   comma-separated entries "N", "N-M" and "N-M:S" (step S), each optionally in brackets;
//   "%P" after any entry limits the tasks running at once to P (the first '%' of the whole
//   value counts; "%0" means no limit). Examples from sbatch.1: "0-15", "0,6,16-32",
//   "0-15:4", "0-15%4". Indices must lie in [0, MaxArraySize - 1]; Slurm's default MaxArraySize
//   is 1001 (slurm.conf.5), so the largest default index is 1000. A step must be positive and
//   below MaxArraySize. The task ids come back sorted and without duplicates.
//   SLURM_ARRAY_TASK_STEP is the number after the first ':' of the whole value (1 without one),
//   as slurmctld computes it.
//   Deviation: numbers must be plain digits (strtol would also take blanks and a '+').
//
// Job ids (scancel's _xlate_job_step_ids): "123", "123_4", "123_*" (every task),
// "123_[1-3,5]" (which must end its word), "123.0" or "123_4.1" (a step), several separated by
// commas; "Invalid job id <word>" otherwise. Heterogeneous components ("123+1") are not
// supported by Muster.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muster::jobengine::slurm {

// slurm.conf's MaxArraySize default.
inline constexpr uint32_t kDefaultMaxArraySize = 1001;

struct ArraySpec {
  std::vector<uint32_t> task_ids;       // sorted, unique, never empty
  std::optional<uint32_t> max_running;  // the "%P" throttle, when P > 0
  uint32_t step = 1;                    // SLURM_ARRAY_TASK_STEP

  uint32_t minTaskId() const { return task_ids.front(); }  // SLURM_ARRAY_TASK_MIN
  uint32_t maxTaskId() const { return task_ids.back(); }   // SLURM_ARRAY_TASK_MAX
  uint32_t taskCount() const { return static_cast<uint32_t>(task_ids.size()); }
};

// InvalidArgument "Invalid job array specification" (Slurm's ESLURM_INVALID_ARRAY text; sbatch
// prints it as "Batch job submission failed: Invalid job array specification").
absl::StatusOr<ArraySpec> parseArraySpec(std::string_view spec,
                                         uint32_t max_array_size = kDefaultMaxArraySize);

// Compressed task ids as squeue prints a pending array's remaining tasks ("0-3,5,7-9"; a step is
// written out: {1,3,5} -> "1,3,5").
std::string formatArrayTaskIds(const std::vector<uint32_t>& task_ids);

struct JobIdSpec {
  uint32_t job_id = 0;
  std::optional<uint32_t> array_task_id;  // "123_4"
  bool all_array_tasks = false;           // "123_*"
  std::optional<uint32_t> step_id;        // "123.0"; nullopt = the job (its batch step)

  bool operator==(const JobIdSpec&) const = default;
};

// One command-line word of job ids; "123_[1-3]" gives one entry per task.
absl::StatusOr<std::vector<JobIdSpec>> parseJobIdList(std::string_view word);

}  // namespace muster::jobengine::slurm
