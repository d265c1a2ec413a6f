#include "jobengine/slurm/core/tasks.h"

#include <algorithm>
#include <climits>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {

std::vector<int> blockTaskCounts(const TaskLayoutRequest& request) {
  const size_t n = request.cpus_per_node.size();
  std::vector<int> tasks(n, 0);
  if (n == 0 || request.ntasks <= 0) return tasks;
  const int cpt = request.cpus_per_task > 0 ? request.cpus_per_task : 1;
  std::vector<int64_t> slots(n);
  for (size_t i = 0; i < n; ++i) {
    slots[i] = std::max<int64_t>(1, request.cpus_per_node[i] / cpt);
    if (request.ntasks_per_node && *request.ntasks_per_node > 0) {
      // _init_task_layout: plane_size conveys ntasks_per_node and caps the slots at
      // plane_size * cpus_per_task.
      slots[i] = std::min<int64_t>(slots[i], int64_t{*request.ntasks_per_node} * cpt);
    }
  }
  // _task_layout_block without pack_nodes: a fake cyclic deal decides the counts.
  int placed = 0;
  bool oversubscribe = false;
  for (int64_t round = 0; placed < request.ntasks; ++round) {
    bool space_remaining = false;
    for (size_t i = 0; i < n && placed < request.ntasks; ++i) {
      if (round < slots[i] || oversubscribe) {
        ++tasks[i];
        ++placed;
        if (round + 1 < slots[i]) space_remaining = true;
      }
    }
    if (!space_remaining) oversubscribe = true;
  }
  return tasks;
}

std::vector<int> blockTaskCounts(int nodes, int ntasks, int cpus_per_node, int cpus_per_task,
                                 std::optional<int> ntasks_per_node) {
  TaskLayoutRequest r;
  r.ntasks = ntasks;
  r.cpus_per_node.assign(static_cast<size_t>(std::max(nodes, 0)), cpus_per_node);
  r.cpus_per_task = cpus_per_task;
  r.ntasks_per_node = ntasks_per_node;
  return blockTaskCounts(r);
}

int batchTaskCount(std::optional<int> ntasks, std::optional<int> ntasks_per_node,
                   const std::vector<int>& cpus_per_node, int cpus_per_task) {
  if (ntasks && *ntasks > 0) return *ntasks;
  if (ntasks_per_node && *ntasks_per_node > 0) {
    return *ntasks_per_node * static_cast<int>(cpus_per_node.size());
  }
  const int cpt = cpus_per_task > 0 ? cpus_per_task : 1;
  int total = 0;
  for (int cpus : cpus_per_node) total += cpus / cpt;
  return total;
}

std::string formatTasksPerNode(const std::vector<int>& counts) {
  std::string out;
  size_t i = 0;
  while (i < counts.size()) {
    size_t j = i;
    while (j < counts.size() && counts[j] == counts[i]) ++j;
    if (!out.empty()) out += ',';
    if (j - i > 1) {
      absl::StrAppend(&out, counts[i], "(x", j - i, ")");
    } else {
      absl::StrAppend(&out, counts[i]);
    }
    i = j;
  }
  return out;
}

std::vector<TaskPlacement> taskPlacements(const std::vector<int>& tasks_per_node) {
  std::vector<TaskPlacement> out;
  for (size_t node = 0; node < tasks_per_node.size(); ++node) {
    for (int local = 0; local < tasks_per_node[node]; ++local) {
      out.push_back(TaskPlacement{static_cast<int>(node), local});
    }
  }
  return out;
}

std::vector<std::vector<int>> taskIdsByNode(const std::vector<int>& tasks_per_node) {
  std::vector<std::vector<int>> out(tasks_per_node.size());
  int rank = 0;
  for (size_t node = 0; node < tasks_per_node.size(); ++node) {
    for (int local = 0; local < tasks_per_node[node]; ++local) out[node].push_back(rank++);
  }
  return out;
}

absl::StatusOr<StepShape> resolveStepShape(const SrunOptions& options, int allocation_nodes,
                                           std::string_view prog) {
  StepShape shape;
  bool nodes_set = options.nodes_min.has_value();
  int min_nodes = options.nodes_min.value_or(1);
  int max_nodes = options.nodes_max.value_or(0);
  if (!nodes_set && options.nodelist) {
    absl::StatusOr<std::vector<std::string>> hosts = expandHostlist(*options.nodelist);
    if (!hosts.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(av(prog), ": error: ", hosts.status().message()));
    }
    std::set<std::string> unique(hosts->begin(), hosts->end());
    min_nodes = static_cast<int>(unique.size());
    nodes_set = true;
  }
  std::optional<int> ntasks = options.ntasks;
  if (nodes_set && (min_nodes == max_nodes || max_nodes == 0) && !options.ntasks_per_node &&
      !ntasks) {
    ntasks = min_nodes;  // one task per node
  } else if (nodes_set && ntasks) {
    if (*ntasks < max_nodes) max_nodes = *ntasks;
    if (*ntasks < min_nodes) {
      shape.warnings.push_back(absl::StrFormat(
          "%s: warning: can't run %d processes on %d nodes, setting nnodes to %d", av(prog),
          *ntasks, min_nodes, *ntasks));
      min_nodes = *ntasks;
    }
  }
  if (options.ntasks_per_node && !ntasks) ntasks = min_nodes * *options.ntasks_per_node;
  shape.ntasks = ntasks.value_or(1);
  shape.nodes = nodes_set ? min_nodes : std::min(allocation_nodes, shape.ntasks);
  if (shape.nodes > allocation_nodes || shape.nodes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        av(prog), ": error: Unable to create step for job: Requested node configuration is not "
                  "available"));
  }
  return shape;
}

}  // namespace muster::jobengine::slurm
