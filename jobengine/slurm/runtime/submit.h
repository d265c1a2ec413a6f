#pragma once

// What `sbatch` submits, from resolved options (options.h) and a partition (cluster_config.h):
// the ParallelJob (runtime slurm) and the Secret with the batch script and the submission
// environment. Pure: no I/O; sbatch_cli.cc talks to the API server.
//
// How a Slurm request becomes pods (one pod per Slurm node):
//   -N n                   numPods n (the gang size); -N a-b takes a
//   -n t / --ntasks-per-node k   tasks laid out per node as Slurm's block distribution (tasks.h);
//                          without either, one task per node
//   -c c                   cpu request per pod = c × the tasks on the busiest node
//   --mem / --mem-per-cpu / --mem-per-gpu   memory request per pod (MiB); without one, the
//                          partition's defaultMemPerCpu × cpus, or no memory request
//   --gpus-per-node g, --gres=gpu[:type]:g  nvidia.com/gpu g per pod; --gpus-per-task g: g ×
//                          tasks per node; --gpus G: ceil(G / n) per pod; a GPU type selects
//                          nodes labelled muster.dev/gpu.model=<type> (the topology agent's)
//   -t                     time limit (else the partition's default); over the partition's
//                          maximum is refused
//   -w / -x                nodes (Kubernetes node names) the job may / may not use
//   -C f                   node labels: "a&b" or "a,b" all of, "a|b" any of; a feature `key=value`
//                          needs that label value, a bare `key` needs the label to exist
//   --exclusive            annotation muster.dev/exclusive: the scheduler gives each pod a node
//                          to itself
//   --requeue/--no-requeue failurePolicy.maxRestarts 3 / 0 (a lost node requeues the job)
//   -H, --begin            the job is created held / not before that time
//   -o -e -i -D --export   recorded; the batch step applies them
//   --array=spec           one ParallelJob per task ("0-15%4", "1,3,5-9:2"), each with its own
//                          job id: the array's job id A is the first task's, the task at
//                          position k (in ascending task id order) gets A+k; spec.slurm.array
//                          says which task it is, label muster.dev/slurm-array-job-id=A marks
//                          them all; the "%P" throttle is kept by the job engine
//   -d                     spec.slurm.dependency, checked here (jobengine/slurm/core/dependency.h)
//
// Refusals say what Slurm says (sbatch: error: Batch job submission failed: ...), and nothing is
// created for them.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/core/options.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "proto/objects.h"
#include "proto/pod_template.h"

namespace muster::jobengine::slurm {

// A node of the partition, as far as a request needs it to be checked against (allocatable).
struct NodeShape {
  std::string name;
  int64_t cpu_millis = 0;
  int64_t memory_mb = 0;
  int64_t gpus = 0;
  std::map<std::string, std::string> labels;
};

struct SubmitContext {
  std::string ns;           // the namespace the job goes to
  std::string user;         // the submitting Kubernetes user
  std::string submit_host;  // this machine's host name
  std::string submit_dir;   // the working directory of sbatch
  std::map<std::string, std::string> environment;  // sbatch's own environment
  std::string script;                              // the batch script's text
  std::string script_path;                         // as given ("" for stdin or --wrap)
  std::vector<std::string> script_args;
  absl::Time now;
  // The partition's nodes; nullopt when they could not be listed (the checks against them are
  // then skipped).
  std::optional<std::vector<NodeShape>> nodes;
  // Whether Slurm job `id` exists in the namespace (for -d); unset: not checked.
  std::function<bool(int64_t id)> job_exists;
};

struct Submission {
  proto::ParallelJob job;
  proto::Secret batch;  // its owner reference is added once the job exists
  std::vector<std::string> notes;  // for stderr: options accepted but not honoured
};

// The name of the ParallelJob and Secret of job `id`.
std::string jobObjectName(int64_t job_id);
std::string batchSecretName(int64_t job_id);

// How many consecutive job ids the request takes: the tasks of its --array, else 1.
int64_t jobIdsNeeded(const BatchOptions& options);

// Checks the request and builds what to submit, from job id `first_job_id` on: one Submission,
// or one per array task (in ascending task id order, job ids first_job_id, first_job_id+1, ...).
absl::StatusOr<std::vector<Submission>> buildSubmissions(const BatchOptions& options,
                                                         const SlurmConfig& config,
                                                         const SubmitContext& context,
                                                         int64_t first_job_id);
// The first of buildSubmissions (the job, or an array's first task).
absl::StatusOr<Submission> buildSubmission(const BatchOptions& options, const SlurmConfig& config,
                                           const SubmitContext& context, int64_t job_id);
// The checks alone (what buildSubmission refuses), for before a job id is taken.
absl::Status checkSubmission(const BatchOptions& options, const SlurmConfig& config,
                             const SubmitContext& context);

// How sbatch creates what it submits (sbatch_cli.cc talks to the API server; tests use fakes).
struct SubmitSteps {
  // Takes `count` consecutive job ids from the counter: the first.
  std::function<absl::StatusOr<int64_t>(int64_t count)> allocate_ids;
  // Creates the job and then its Secret. AlreadyExists (absl's code) when either name was taken
  // by an object sbatch did not create, with whatever this call created removed again.
  std::function<absl::Status(Submission&)> create;
  // Deletes job `name` (its Secret goes with it: the job owns it).
  std::function<void(const std::string& name)> remove;
};
// How many times sbatch takes fresh job ids when a name it would use is taken.
inline constexpr int kSubmitTries = 5;
// Builds and creates the request's jobs (every task of an array, or none: on an error those
// created are removed again). slurm-<id> and slurm-<id>-batch are predictable names that anyone
// who may create objects in the namespace could take first (issue 43): when one is taken,
// sbatch takes fresh ids and tries again, up to `tries` times, then gives up with an error that
// says so. Returns what was created, in order (the first job's id is the one sbatch prints).
absl::StatusOr<std::vector<Submission>> submitAll(const BatchOptions& options,
                                                  const SlurmConfig& config,
                                                  const SubmitContext& context,
                                                  const SubmitSteps& steps,
                                                  int tries = kSubmitTries);

// NUL-separated KEY=VALUE entries, as /proc/<pid>/environ.
std::string encodeEnvironment(const std::map<std::string, std::string>& env);

}  // namespace muster::jobengine::slurm
