#pragma once

// Why a gang was not placed, node by node (part of placement's verdict): for each node, the first
// rule of per-node feasibility (feasibility.h) that refuses one pod of the gang's main group, in
// kube-scheduler's words ("3 Insufficient nvidia.com/gpu"), and how many nodes are cordoned, not
// ready or reserved for other gangs. The verdict's headline (what the gang needs, what the
// largest domain holds, the members' terms) is the Placer's, which knows the fill.
//
// Inputs: the main group's shape, the cache, the per-node feasibility and the gang's required
// level. Output: NodeRefusals.

#include "scheduler/cache.h"
#include "scheduler/filter.h"
#include "scheduler/placement/feasibility.h"
#include "scheduler/placement/gang_shape.h"

namespace muster::scheduler::placement {

struct NodeRefusals {
  FilterDiagnosis diag;  // per-node reasons, and how many nodes could take a pod
  int cordoned = 0;
  int not_ready = 0;
  int blocked = 0;  // reserved for other gangs
};

NodeRefusals refusalsOf(const GroupShape& main, const ClusterCache& cache,
                        const NodeFeasibility& feasible, int required_level);

}  // namespace muster::scheduler::placement
