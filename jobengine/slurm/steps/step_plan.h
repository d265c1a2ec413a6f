#pragma once

// What an srun step runs where (pure; srun.cc executes it): the allocation as the batch
// environment describes it, the step's nodes and task layout, and the step protocol request for
// each node, with every task's environment.
//
// Node choice (Slurm's step_mgr, for the single-partition, one-job-per-pod world of Muster):
//   - -x removes nodes from the candidates; -w names nodes that must be in the step. A -w node
//     outside the allocation (or also excluded) is Slurm's "Unable to create step for job <id>:
//     Requested node configuration is not available".
//   - The node count and task count come from resolveStepShape (tasks.h) over the candidates,
//     with the options merged from SLURM_* (so SLURM_JOB_NUM_NODES is -N, SLURM_NTASKS is -n:
//     a bare `srun cmd` in `sbatch -N3 -n6` runs 6 tasks on the 3 nodes; in `sbatch -N3` alone it
//     runs one task per node, as Slurm's srun does when no task count is known).
//   - The step takes the -w nodes, then the first other candidates in allocation order, up to the
//     node count; its nodes are in allocation order (SLURM_NODEID follows it).
//   - Tasks are laid out with Slurm's block distribution (blockTaskCounts) over the CPUs the job
//     has on those nodes (SLURM_JOB_CPUS_PER_NODE), -c and --ntasks-per-node.
//
// Environment of each task: srun's own environment filtered by --export (applyExport; the
// default is all of it, and SLURM_EXPORT_ENV set by `sbatch --export` applies, as in Slurm),
// overlaid with stepTaskEnvironment (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_*,
// SLURMD_NODENAME, CUDA_VISIBLE_DEVICES, ...). The common part travels once per node, the
// per-task part as each task's overrides.
//
// GPUs: srun sees only its own node's GPUs (SLURM_JOB_GPUS, else SLURM_STEP_GPUS or
// CUDA_VISIBLE_DEVICES of the batch environment); every node of a Muster job comes from the same
// pod template, so the same indices are assumed on every node.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jobengine/slurm/core/env.h"
#include "jobengine/slurm/core/options.h"
#include "jobengine/slurm/steps/step_protocol.h"

namespace muster::jobengine::slurm {

// The allocation srun runs in, from the batch environment.
struct Allocation {
  uint32_t job_id = 0;
  std::vector<std::string> nodes;   // SLURM_JOB_NODELIST, expanded, in order
  std::vector<int> cpus_per_node;   // SLURM_JOB_CPUS_PER_NODE (or derived, see below)
  std::vector<int> tasks_per_node;  // SLURM_TASKS_PER_NODE, when set
  std::vector<int> gpus;            // this node's GPU indices (assumed on every node)
};

// Reads SLURM_JOB_ID (SLURM_JOBID), SLURM_JOB_NODELIST (SLURM_NODELIST), SLURM_JOB_CPUS_PER_NODE,
// SLURM_TASKS_PER_NODE, SLURM_CPUS_PER_TASK and the GPU list. Without CPU counts each node is
// given its SLURM_TASKS_PER_NODE count times -c (or 1) CPUs. Errors name the variable.
absl::StatusOr<Allocation> allocationFromEnvironment(const Environment& env,
                                                     std::string_view prog = "srun");

// "2(x3),1" -> {2, 2, 2, 1}: the inverse of formatTasksPerNode (SLURM_TASKS_PER_NODE,
// SLURM_JOB_CPUS_PER_NODE). At most kMaxHostlistSize entries.
absl::StatusOr<std::vector<int>> parseCountList(std::string_view text);

struct StepPlan {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  std::vector<int> node_indices;    // job node indices of the step's nodes, in step order
  std::vector<std::string> nodes;   // their names
  std::vector<int> tasks_per_node;  // per step node
  int ntasks = 0;
  std::vector<StepRequest> requests;  // one per step node, in step order
  std::vector<std::string> warnings;  // "srun: warning: ..." lines
};

struct StepPlanInput {
  SrunOptions options;      // merged (mergeSrunOptions)
  Allocation allocation;
  uint32_t step_id = 0;
  Environment environment;  // srun's own
  std::string cwd;          // srun's working directory (-D overrides it)
  uint32_t kill_wait_ms = 2000;
};

absl::StatusOr<StepPlan> planStep(const StepPlanInput& input, std::string_view prog = "srun");

// A task's full environment as step-tasks will give it: the request's common entries overlaid
// with the task's own (for tests and diagnostics).
Environment taskEnvironment(const StepRequest& request, const StepTaskSpec& task);

}  // namespace muster::jobengine::slurm
