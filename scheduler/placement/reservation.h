#pragma once

// A reservation for a gang that waits (placement's planReservation): within the lowest unit
// (honouring the required level) whose nodes, once empty of other pods, could hold the whole gang,
// the unit with the most room now; inside it the nodes with the most room now, until they could
// hold the gang. Time-aware reservations and backfill start from here.
//
// Inputs: the gang's main group (its shape and its current per-position capacity with prefix
// sums, from the fill's capacity columns), how many pods the gang has, its required level, the
// units, the cache and the per-node feasibility. Output: node names; empty when no unit could
// ever hold the gang.

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/cache.h"
#include "scheduler/placement/domains.h"
#include "scheduler/placement/feasibility.h"
#include "scheduler/placement/gang_shape.h"

namespace muster::scheduler::placement {

std::vector<std::string> reservedNodes(const GroupShape& main, const std::vector<int32_t>& cap,
                                       const std::vector<int64_t>& pre, int64_t total_count,
                                       int required_level, const Units& units,
                                       const ClusterCache& cache, const NodeFeasibility& feasible);

}  // namespace muster::scheduler::placement
