#pragma once

// A Slurm job as the operator-side commands see it (squeue, scancel, scontrol show job): what a
// ParallelJob of runtime slurm and its status say, in Slurm's terms. Pure: no I/O.
//
//   squeue   renderSqueue: Slurm's default, -l, -o and -O layouts, filtered and sorted as squeue
//            ("P,t,-p": partition, the compact state as text, then job id for equal priorities)
//   scontrol renderShowJob: `scontrol show job` in Slurm's Key=Value layout
//
// Deviations: UID and GID print the user name (Kubernetes users have no numeric id); Priority
// prints 0 and fields Muster does not track (licenses, reservations, sockets, ...) print N/A.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/core/job_state.h"
#include "proto/objects.h"

namespace muster::jobengine::slurm {

struct JobView {
  int64_t job_id = 0;
  // A task of a job array: the array's job id and the task's id, and the array's throttle.
  std::optional<int64_t> array_job_id, array_task_id;
  std::optional<int32_t> array_max_running;
  // squeue's one line for several pending tasks of an array (collapseArrays): their ids as
  // squeue prints them in brackets ("2-5,7%2"); empty for one job or task.
  std::string array_tasks;
  std::string object_name;  // the ParallelJob
  std::string name, partition, user, account, qos, comment, command, work_dir, submit_host;
  std::string stdout_path, stderr_path, stdin_path;  // expanded, as scontrol prints them
  JobState state = JobState::kPending;
  // squeue's REASON: why a pending job waits (or DependencyNeverSatisfied, why one was
  // cancelled), "None" otherwise
  std::string reason;
  std::string message;  // Muster's own words (status.message)
  std::string dependency;  // the -d entries not met yet, with their states; "" when none
  std::vector<std::string> nodes;  // the job's nodes once it started (pod host names)
  std::vector<std::string> required_nodes, excluded_nodes;  // -w, -x
  int32_t num_nodes = 0;
  int32_t num_tasks = 0;
  int32_t num_cpus = 0;
  int32_t cpus_per_task = 1;
  int32_t batch_cpus = 0;  // CPUs of the first node (the batch step's)
  std::optional<int32_t> gpus_per_node;
  std::string gpu_type;
  std::optional<int64_t> mem_per_node_mb;
  std::optional<int64_t> time_limit;  // seconds; nullopt: UNLIMITED
  absl::Time submit_time = absl::InfinitePast();
  absl::Time start_time = absl::InfinitePast();  // InfinitePast: not started
  absl::Time end_time = absl::InfinitePast();    // InfinitePast: not ended
  int32_t restarts = 0;  // Slurm's restart_cnt: status.restarts + status.preemptions
  bool requeue = true;
  bool hold = false;
  bool cancel_requested = false;  // scancel asked, the job engine has not ended it yet
  int64_t signal_seq = 0;         // the last scancel --signal request (spec.slurm.signal.seq)
  bool requeue_asked = false;     // scontrol requeue asked, the job engine has not done it yet
  std::string exit_code = "0:0";
  // The srun steps of the run that ended (sacct's "<id>.<step>" lines); none while it runs.
  struct Step {
    uint32_t id = 0;
    std::string name, state, exit_code, node_list;
    absl::Time start_time = absl::InfinitePast(), end_time = absl::InfinitePast();
    int32_t nodes = 0, tasks = 0, cpus = 0;
  };
  std::vector<Step> steps;
};

// nullopt when the ParallelJob is not a Slurm job (no spec.slurm).
std::optional<JobView> viewOf(const proto::ParallelJob& job);

// The job id as squeue's %i, scontrol and sacct print it: "123", an array task "120_3", the
// pending tasks of an array on one line "120_[3-5%2]".
std::string jobIdText(const JobView& job);

// Whether a job id word (array.h's JobIdSpec, without a step) names this job: "123" names job
// 123 and, when 123 is an array's job id, every task of the array (as Slurm's commands take
// it); "123_4" the array's task 4; "123_*" every task.
bool jobIdMatches(const JobView& job, const JobIdSpec& id);
bool jobIdMatchesAny(const JobView& job, const std::vector<JobIdSpec>& ids);

// squeue's view of arrays: the pending tasks of an array that wait for the same reason and
// follow each other in `jobs` become one line (array_tasks set, job_id the array's), as
// slurmctld keeps the tasks it has not started in one record. squeue -r shows each task.
std::vector<JobView> collapseArrays(std::vector<JobView> jobs);

// Seconds the job has run by `now` (0 before it started).
int64_t runSeconds(const JobView& job, absl::Time now);

// squeue's options (squeue.1).
struct SqueueOptions {
  bool help = false, usage = false, version = false;
  bool noheader = false;
  bool long_format = false;
  bool me = false;
  bool all_states = false;
  std::optional<std::string> format;       // -o (or SQUEUE_FORMAT)
  std::optional<std::string> long_format_spec;  // -O (or SQUEUE_FORMAT2)
  std::vector<std::string> users, names, partitions, accounts, qos;
  bool array_tasks = false;  // -r: one line per array task
  bool json = false;         // --json
  std::vector<JobIdSpec> job_ids;
  std::set<JobState> states;  // empty: the default (not finished)
};

// Parses squeue's command line (with SQUEUE_FORMAT/SQUEUE_FORMAT2 from `env` when -o/-O are not
// given). InvalidArgument with Slurm's wording for an unknown option or a bad value, and for the
// options Muster does not have (--json, -i, --start, -s, ...), said as such.
absl::StatusOr<SqueueOptions> parseSqueueArgs(const std::vector<std::string>& args,
                                              const std::map<std::string, std::string>& env);

// What `squeue --help` (and --usage) print: every option parseSqueueArgs takes, those it refuses
// too. Also what an operand gets, after its error line, as in Slurm.
std::string_view squeueUsage();

// Whether a job passes squeue's filters; `me` is the caller's user name (for --me).
bool squeueSelects(const SqueueOptions& options, const JobView& job, const std::string& me);

// The whole output of squeue for these jobs (header unless -h), each line ending in '\n'. Every
// value is printed terminalSafe (squeue_format.h renderSqueueLine).
std::string renderSqueue(const SqueueOptions& options, std::vector<JobView> jobs,
                         const std::string& me, absl::Time now);

// squeue --json: Slurm's data_parser layout (v0.0.41: {"jobs": [...], "meta": ..., "errors": [],
// "warnings": []}; numbers that may be unset as {"set", "infinite", "number"}, times in Unix
// seconds, time_limit in minutes, job_state a list), for the fields JobView has; one record per
// array task. Compact, one line. Strings are JSON-escaped (control characters as \u00XX).
std::string renderSqueueJson(const SqueueOptions& options, std::vector<JobView> jobs,
                             const std::string& me, absl::Time now, const std::string& cluster);

// The job with every text field made terminalSafe (util.h): what the text renderers print,
// since a job's name, comment, paths, reason and message are other users' text.
JobView terminalSafeView(const JobView& job);
// `scontrol show job`: one block per job, blocks separated by an empty line, as Slurm prints.
// Every value is printed terminalSafe (a control character in a job's name prints as '?').
std::string renderShowJob(const JobView& job, absl::Time now);

// Why `scontrol requeue` cannot put the job back to PENDING (Slurm's words, with Muster's reason),
// nullopt when it can: a running or ended batch job that allows requeue (not --no-requeue) and
// was not cancelled (a cancelled job stays cancelled in Muster: submit it again). One whose
// requeue is asked and not yet done says so.
std::optional<std::string> requeueRefusal(const JobView& job);

// scontrol update JobId=<ids> TimeLimit=[+|-]<time> (scontrol.1; the words after "update").
// Other job fields are refused, naming the ones Muster has.
struct JobUpdate {
  std::vector<JobIdSpec> ids;
  enum class Adjust { kSet, kAdd, kSubtract } adjust = Adjust::kSet;
  std::optional<int64_t> time_limit;  // seconds; nullopt with kSet: UNLIMITED
};
absl::StatusOr<JobUpdate> parseJobUpdate(const std::vector<std::string>& args);

// The time limit the update gives `job`, or why not, in Slurm's words with Muster's reason:
// anyone may lower a limit; raising one is for operators (who may exceed the partition's
// MaxTime), as slurmctld allows it only to operators and admins, and only while the job has
// no pods yet (a pod's activeDeadlineSeconds, the engine's backstop, can only be lowered).
// An ended job cannot be updated.
absl::StatusOr<std::optional<int64_t>> updatedTimeLimit(const JobView& job, const JobUpdate& update,
                                                        bool is_operator);

}  // namespace muster::jobengine::slurm
