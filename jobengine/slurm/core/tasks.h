#pragma once

// Task layout: how many tasks each node runs and which ranks they are (src/common/
// slurm_step_layout.c, block distribution, SelectTypeParameters without CR_PACK_NODES), the task
// count of a batch job (slurmctld get_tasks_per_node), srun's choice of -n and -N
// (src/srun/opt.c _opt_verify), and the compressed form of per-node counts
// (uint32_compressed_to_str: "2(x3),1").
//
// Block distribution, as Slurm does it: each node offers max(1, cpus / cpus_per_task) task slots
// (capped, for a step, by ntasks_per_node * cpus_per_task, which is Slurm's own formula); tasks
// are dealt to the nodes in rounds, one per node per round, while a node has a free slot; once no
// node has one left, every node takes one more per round (oversubscription). The counts are then
// filled with consecutive ranks, node by node: 5 tasks on 2 equal nodes -> 3,2, ranks 0-2 on the
// first node and 3-4 on the second.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jobengine/slurm/core/options.h"

namespace muster::jobengine::slurm {

struct TaskLayoutRequest {
  int ntasks = 0;
  std::vector<int> cpus_per_node;  // CPUs the job (or step) has on each node, in node order
  int cpus_per_task = 1;
  std::optional<int> ntasks_per_node;  // srun's plane_size cap; leave unset for a batch job
};

// Tasks per node with Slurm's block distribution. Zero or negative ntasks gives zeros; an empty
// node list gives an empty result.
std::vector<int> blockTaskCounts(const TaskLayoutRequest& request);

// The same on `nodes` nodes of `cpus_per_node` CPUs each.
std::vector<int> blockTaskCounts(int nodes, int ntasks, int cpus_per_node, int cpus_per_task = 1,
                                 std::optional<int> ntasks_per_node = std::nullopt);

// The number of tasks of a batch job (what SLURM_NTASKS and SLURM_TASKS_PER_NODE describe):
// -n when given, else --ntasks-per-node times the node count, else one task per cpus_per_task
// CPUs of the allocation.
int batchTaskCount(std::optional<int> ntasks, std::optional<int> ntasks_per_node,
                   const std::vector<int>& cpus_per_node, int cpus_per_task);

// Counts with runs compressed: {2, 2, 2, 1} -> "2(x3),1" (SLURM_TASKS_PER_NODE,
// SLURM_JOB_CPUS_PER_NODE). Empty for an empty list.
std::string formatTasksPerNode(const std::vector<int>& counts);

// Where each rank runs for a block layout: index = SLURM_PROCID.
struct TaskPlacement {
  int node_index = 0;  // SLURM_NODEID within the step
  int local_id = 0;    // SLURM_LOCALID
  bool operator==(const TaskPlacement&) const = default;
};
std::vector<TaskPlacement> taskPlacements(const std::vector<int>& tasks_per_node);

// The ranks on each node (SLURM_GTIDS): {{0,1,2},{3,4}} for {3,2}.
std::vector<std::vector<int>> taskIdsByNode(const std::vector<int>& tasks_per_node);

// srun's step size inside an allocation of `allocation_nodes` nodes, from options already merged
// with the environment (mergeSrunOptions):
//   - -N (or the number of distinct hosts of -w) with neither -n nor --ntasks-per-node: one task
//     per node;
//   - -N and -n: at most -n nodes; fewer tasks than nodes lowers the node count, with Slurm's
//     warning "can't run N processes on M nodes, setting nnodes to N";
//   - --ntasks-per-node without -n: nodes * ntasks-per-node tasks;
//   - neither: one task; without -N a step spreads over as many allocated nodes as it has tasks.
// Error when more nodes are asked than allocated.
struct StepShape {
  int nodes = 0;
  int ntasks = 0;
  std::vector<std::string> warnings;  // "srun: warning: ..." lines
};
absl::StatusOr<StepShape> resolveStepShape(const SrunOptions& options, int allocation_nodes,
                                           std::string_view prog = "srun");

}  // namespace muster::jobengine::slurm
