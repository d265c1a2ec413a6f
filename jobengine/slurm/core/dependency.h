#pragma once

// Job dependencies: sbatch -d/--dependency and their evaluation (slurmctld job_scheduler.c
// _parse_dependency_str and _test_job_dependency_common; sbatch.1 --dependency).
//
// Syntax:
//   type:job_id[:job_id...] entries, where type is after, afterany, afterok, afternotok,
//   aftercorr, afterburstbuffer or expand (any case); "singleton"; or an old-style bare job id
//   list "123,456" (= afterany). A job id is "123", "123_4" (one array task), "123_*" (every
//   task) or "123_[1-3,5]" (expanded to 123_1:123_2:...); after an id, "+minutes" delays an
//   "after" dependency (and carries on to the following ids of the same entry, as in Slurm), and
//   a "(state)" suffix, the form scontrol prints, is accepted ("(failed)" keeps it failed).
//   Entries are joined by ',' (all must hold) or '?' (any one suffices); mixing them is an
//   error, as is a job id of 0, a delay that is not positive, or trailing text. "" and "0" mean
//   no dependency. Errors: InvalidArgument "Job dependency problem" (ESLURM_DEPENDENCY; sbatch
//   prints "Batch job submission failed: Job dependency problem").
//   Quirk kept: a bare id list must come after the typed entries ("afterok:1,2" is fine,
//   "2,afterok:1" is an error), because Slurm looks for the next ':' in the whole rest.
//
// Evaluation (evaluateDependency), per entry:
//   after       fulfilled once the job is no longer pending (and, with +N, has run N minutes);
//   afterany    fulfilled once the job has finished, whatever its state;
//   afterok     fulfilled when it finished COMPLETED; failed when it finished otherwise;
//   afternotok  fulfilled when it finished in any state but COMPLETED (or is in SPECIAL_EXIT);
//               failed when it COMPLETED;
//   aftercorr   afterok on the array task with this job's own task id (or, when that task does
//               not exist, on the whole array);
//   singleton   fulfilled when no other job of the same user and name runs or is ahead in the
//               queue (the caller answers that);
//   a job that no longer exists lifts the dependency ("job is gone, dependency lifted").
//   "Finished" means a state after SUSPENDED that is not still COMPLETING (IS_JOB_COMPLETED).
//   All-of (','): any failed entry -> kNeverSatisfied, else any unfulfilled -> kWaiting, else
//   kSatisfied. Any-of ('?'): any fulfilled -> kSatisfied, else any unfulfilled -> kWaiting,
//   else kNeverSatisfied. What to do with a never-satisfied job (cancel it with
//   --kill-on-invalid-dep=yes, or leave it pending with reason DependencyNeverSatisfied) is the
//   runtime's decision.
//   Muster does not support afterburstbuffer and expand (isSupported), and refuses them at
//   submission; they are parsed so that the message can say so.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/core/job_state.h"

namespace muster::jobengine::slurm {

// The most entries a dependency may have, counted after array expressions are expanded
// ("12_[0-1000]" is 1001 entries): one whole array of Slurm's default MaxArraySize (1001) named
// task by task, and room besides. A longer list is "Job dependency problem" before anything is
// expanded past it: 4 KiB of "1_[0-1000]," expanded to 371,371 entries, which the job engine
// evaluated on its one strand twice per reconcile (issue 43). Name a whole array by its job id.
inline constexpr size_t kMaxDependencyItems = 1024;
// The most characters of a formatted dependency written into status (status.slurm.dependency,
// the job's message, Events): the first entries, then "...(+N more)".
inline constexpr size_t kDependencyStatusMax = 1024;

enum class DependencyType {
  kAfter,
  kAfterAny,
  kAfterOk,
  kAfterNotOk,
  kAfterCorr,
  kAfterBurstBuffer,
  kExpand,
  kSingleton,
};

// "after", "afterany", ... as Slurm prints them.
std::string_view dependencyTypeName(DependencyType type);
// False for afterburstbuffer and expand.
bool isSupported(DependencyType type);

struct Dependency {
  DependencyType type = DependencyType::kAfterAny;
  uint32_t job_id = 0;                    // 0 for singleton
  std::optional<uint32_t> array_task_id;  // "123_4"
  bool all_array_tasks = false;           // "123_*"
  int64_t delay_seconds = 0;              // "after:123+5" -> 300
  bool initially_failed = false;          // "(failed)" given

  bool operator==(const Dependency&) const = default;
};

struct DependencySpec {
  enum class Combine { kAll, kAny };
  Combine combine = Combine::kAll;
  std::vector<Dependency> items;  // empty: no dependency

  bool operator==(const DependencySpec&) const = default;
};

absl::StatusOr<DependencySpec> parseDependency(std::string_view text,
                                               uint32_t max_array_size = kDefaultMaxArraySize);

// Per entry, as Slurm tracks it.
enum class DependencyState { kUnfulfilled, kFulfilled, kFailed };

// The entries as squeue's %E and scontrol show job print them: only the entries not yet
// fulfilled, each with its state: "afterok:12(unfulfilled),after:13+5(failed)",
// "singleton(unfulfilled)"; joined by '?' for an any-of dependency. `states` is parallel to
// spec.items (all kUnfulfilled when empty). At most `max_length` characters: the entries that
// fit, then "...(+N more)" (kDependencyStatusMax for what goes into status).
std::string formatDependency(const DependencySpec& spec,
                             const std::vector<DependencyState>& states = {},
                             size_t max_length = std::string::npos);

// What the runtime knows about a job a dependency refers to.
struct DependencyTargetState {
  JobState state = JobState::kPending;
  bool configuring = false;  // counts as pending
  bool completing = false;   // finished but not yet completed
  bool special_exit = false;
  std::optional<absl::Time> start_time;
};

// A whole array as Slurm tests one (test_job_array_pending/_completed/_complete): pending while
// any task is, finished when all are, COMPLETED only when all are; the earliest start time.
DependencyTargetState summarizeArray(const std::vector<DependencyTargetState>& tasks);

struct DependencyContext {
  // The job (or array task, or whole array for "_*" and for plain ids of arrays) an entry names;
  // nullopt when the job is unknown (purged). The callback sees the entry's job id and task.
  std::function<std::optional<DependencyTargetState>(uint32_t job_id,
                                                     std::optional<uint32_t> array_task_id,
                                                     bool all_array_tasks)>
      lookup;
  // True while another job of this job's user with the same name is running, suspended, or
  // pending with a lower job id. Unset: singleton is always fulfilled.
  std::function<bool()> singleton_blocked;
  absl::Time now;
  // This job's own array task id, for aftercorr.
  std::optional<uint32_t> own_array_task_id;
};

enum class DependencyResult { kSatisfied, kWaiting, kNeverSatisfied };

DependencyState evaluateDependencyItem(const Dependency& item, const DependencyContext& context);

// The states of every entry (parallel to spec.items) and the verdict.
struct DependencyEvaluation {
  DependencyResult result = DependencyResult::kSatisfied;
  std::vector<DependencyState> states;
};
DependencyEvaluation evaluateDependency(const DependencySpec& spec,
                                        const DependencyContext& context);

}  // namespace muster::jobengine::slurm
