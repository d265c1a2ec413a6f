#pragma once

// The environment of a batch script and of srun's tasks (src/common/env.c
// env_array_for_batch_job, setup_env and env_array_for_step; sbatch.1 and srun.1 "OUTPUT
// ENVIRONMENT VARIABLES"), and --export (src/sbatch/sbatch.c, env.c env_merge_filter).
//
// Precedence, lowest first, as Slurm builds a job's environment:
//   1. the submission environment filtered by --export (applyExport);
//   2. the variables sbatch itself sets from its options (SLURM_NTASKS_PER_NODE, ...) and the
//      controller's (batchEnvironment) overwrite those of the same name;
//   3. for a task, the step's and task's variables (stepTaskEnvironment) overwrite the batch
//      step's (srun's tasks start from srun's own environment, i.e. the batch script's).
//
// The GPU variables follow Slurm's gres/gpu plugin: SLURM_GPUS_ON_NODE and SLURM_JOB_GPUS /
// SLURM_STEP_GPUS list the GPUs of the node, CUDA_VISIBLE_DEVICES the ones a process may use.
// Muster gives the indices as seen inside the container. With --gpus-per-task=g, the task with
// local id L gets entries [L*g, L*g+g) of the node's list (wrapping around if the node has fewer
// GPUs than its tasks ask for); otherwise every task sees all of the step's GPUs on the node.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "jobengine/slurm/core/options.h"

namespace muster::jobengine::slurm {

using Environment = std::map<std::string, std::string>;

struct ArrayEnvironment {
  uint32_t array_job_id = 0;  // SLURM_ARRAY_JOB_ID
  uint32_t task_id = 0;       // SLURM_ARRAY_TASK_ID
  uint32_t task_count = 0;    // SLURM_ARRAY_TASK_COUNT
  uint32_t task_min = 0;      // SLURM_ARRAY_TASK_MIN
  uint32_t task_max = 0;      // SLURM_ARRAY_TASK_MAX
  uint32_t task_step = 1;     // SLURM_ARRAY_TASK_STEP
};

struct JobEnvironmentInput {
  uint32_t job_id = 0;
  std::string job_name;
  std::vector<std::string> node_names;  // the job's nodes, in order (node index = position)
  std::vector<int> cpus_per_node;       // CPUs allocated on each node
  std::vector<int> tasks_per_node;      // the job's layout (tasks.h)
  std::optional<int> ntasks;            // -n, when given
  std::optional<int> ntasks_per_node;   // --ntasks-per-node, when given
  std::optional<int> cpus_per_task;     // -c, when given
  std::optional<GpuRequest> gpus, gpus_per_node, gpus_per_task;  // as requested
  std::vector<std::vector<int>> gpus_on_node;  // per node: the GPU indices the job has there
  std::optional<int64_t> mem_per_node_mb, mem_per_cpu_mb;
  std::string partition;
  std::string submit_dir;
  std::string submit_host;
  int restart_count = 0;
  std::string cluster_name;
  std::optional<ArrayEnvironment> array;
  std::optional<std::string> account, qos;
  std::optional<std::string> dependency;  // as given, for SLURM_JOB_DEPENDENCY
  std::optional<ExportSpec> export_env;   // for SLURM_EXPORT_ENV when not ALL
  std::optional<std::string> user;        // SLURM_JOB_USER
  std::optional<uint32_t> uid, gid;       // SLURM_JOB_UID, SLURM_JOB_GID
  std::optional<absl::Time> start_time, end_time;  // SLURM_JOB_START_TIME, SLURM_JOB_END_TIME
};

// The variables Slurm gives the batch script running on node `node_index` (0 for the batch
// step; other indices give what a job-level process on that node would see):
//   SLURM_CLUSTER_NAME, SLURM_JOB_ID, SLURM_JOBID, SLURM_JOB_NAME, SLURM_JOB_NUM_NODES,
//   SLURM_NNODES, SLURM_JOB_NODELIST, SLURM_NODELIST (compressHostlist of node_names, in their
//   order), SLURM_JOB_PARTITION, SLURM_JOB_CPUS_PER_NODE ("8(x2)"), SLURM_TASKS_PER_NODE,
//   SLURM_NTASKS and SLURM_NPROCS (when -n or --ntasks-per-node was given, as env.c derives
//   them), SLURM_NTASKS_PER_NODE and SLURM_CPUS_PER_TASK (only when given), SLURM_CPUS_ON_NODE,
//   SLURM_NODEID, SLURMD_NODENAME, HOSTNAME, SLURM_PROCID and SLURM_LOCALID (0: the script is
//   task 0 of the batch step), SLURM_SUBMIT_DIR, SLURM_SUBMIT_HOST, SLURM_RESTART_COUNT (always,
//   also 0, as setup_env does for batch jobs), ENVIRONMENT=BATCH, SLURM_GPUS,
//   SLURM_GPUS_PER_NODE, SLURM_GPUS_PER_TASK (as requested), SLURM_GPUS_ON_NODE, SLURM_JOB_GPUS
//   and CUDA_VISIBLE_DEVICES (when the node has GPUs), SLURM_ARRAY_* (arrays),
//   SLURM_JOB_ACCOUNT, SLURM_JOB_QOS, SLURM_MEM_PER_NODE / SLURM_MEM_PER_CPU,
//   SLURM_JOB_DEPENDENCY, SLURM_EXPORT_ENV, SLURM_JOB_USER, SLURM_JOB_UID, SLURM_JOB_GID,
//   SLURM_JOB_START_TIME, SLURM_JOB_END_TIME (each when known).
Environment batchEnvironment(const JobEnvironmentInput& job, int node_index = 0);

struct StepEnvironmentInput {
  uint32_t step_id = 0;
  std::vector<int> node_indices;    // the job's nodes the step runs on, in step order
  std::vector<int> tasks_per_node;  // per step node (tasks.h)
  std::optional<int> cpus_per_task;
  std::optional<GpuRequest> gpus_per_task;
  bool preserve_env = false;  // srun -E: keep SLURM_NNODES, SLURM_NTASKS, SLURM_TASKS_PER_NODE
};

// The variables of task `procid` of a step (overlay them on the batch environment):
//   SLURM_STEP_ID, SLURM_STEPID, SLURM_STEP_NODELIST, SLURM_STEP_NUM_NODES,
//   SLURM_STEP_NUM_TASKS, SLURM_STEP_TASKS_PER_NODE, SLURM_NNODES, SLURM_NTASKS, SLURM_NPROCS,
//   SLURM_TASKS_PER_NODE (the step's; kept as they were with preserve_env), SLURM_PROCID,
//   SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NODEID, SLURM_STEP_PROCID, SLURM_STEP_LOCALID,
//   SLURM_GTIDS (the ranks on the task's node), SLURMD_NODENAME, SLURM_CPUS_ON_NODE,
//   SLURM_CPUS_PER_TASK, SLURM_GPUS_PER_TASK (when given), SLURM_STEP_GPUS and
//   CUDA_VISIBLE_DEVICES (see above). procid outside the step gives an empty map.
Environment stepTaskEnvironment(const JobEnvironmentInput& job, const StepEnvironmentInput& step,
                                int procid);

// The job's environment from the submission environment (sbatch.c, env_merge_filter):
//   no --export (nullopt): everything except SLURM_JWT;
//   ALL: everything;
//   NONE, NIL: only variables whose names start with "SLURM" (or SPANK's
//     "_SLURM_SPANK_OPTION_"); NONE also sets SLURM_GET_USER_ENV=1 (Slurm then loads the user's
//     login environment on the node, which Muster does not);
//   a list: its entries in order, each overwriting: ALL adds the whole environment, NAME copies
//     that variable if set, NAME=value sets it; then the SLURM* variables; and
//     SLURM_GET_USER_ENV=1. So in "ALL,EDITOR=vi" the explicit value wins (Slurm's code; the man
//     page says the caller's value would).
Environment applyExport(const std::optional<ExportSpec>& spec, const Environment& submit_env);

// "a100:2" / "2": a GpuRequest as the option spelled it.
std::string formatGpuRequest(const GpuRequest& gpus);

}  // namespace muster::jobengine::slurm
