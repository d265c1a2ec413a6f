#pragma once

// The node for a gang of one pod (placement's search, for the commonest gang): the best node by
// preferred affinity, then GPU↔NIC alignment, then GPU model scarcity and fragmentation (when
// packing with a workload known), then the free amount of the dominant resource left after
// placement (least for pack, most for spread), then topology order. It visits domains depth
// first and skips those whose summed free cannot hold the pod (and, with the free-GPU index,
// those where no node could); a pod asking for whole GPUs with fragmentation in play weighs only
// the kFragmentationCandidates fitting nodes with the fewest free GPUs, so a decision costs the
// same at any size.
//
// Inputs: the pod's group shape, the gang's dominant resource, the cache, the options and the
// per-node feasibility (feasibility.h). Output: the node's position in topology order and, for a
// fraction of a GPU, the GPU there (else -1); nullopt when no node takes it.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "scheduler/placement/feasibility.h"
#include "scheduler/placement/gang_shape.h"

namespace muster::scheduler::placement {

std::optional<std::pair<uint32_t, int32_t>> bestNodeForSinglePod(const GroupShape& g,
                                                                 ResourceId dominant,
                                                                 const ClusterCache& cache,
                                                                 const PlacementOptions& options,
                                                                 const NodeFeasibility& feasible);

// The fitting nodes (positions) a pod asking for `want` whole GPUs weighs by fragmentation: the
// first kFragmentationCandidates by (free GPUs, capped at the index's last bucket; position).
std::vector<uint32_t> fewestFreeGpus(const GroupShape& g, int64_t want, const ClusterCache& cache,
                                     const PlacementOptions& options, const NodeFeasibility& feasible);

}  // namespace muster::scheduler::placement
