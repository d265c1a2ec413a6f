#pragma once

// How candidate nodes and domains rank (placement stage 3, kube-scheduler's Score): for a group
// (gang_shape.h), what it prefers of a node (preferred node affinity, inter-pod preferences,
// ScheduleAnyway spread), how well its pods' GPUs and NICs align there, and what placing pods of
// it costs other workloads (GPU model scarcity, fragmentation: scheduler/fragmentation.h). The
// fill ranks the children of a domain with these (Child, sortChildren, tightestFor); a
// reservation's or a tenancy's ranking would come in here.
//
// Inputs: a group's shape, nodes of the cache (as positions in topology order where the fill
// works with positions) and the placement options. Outputs: numbers and orders; nothing here
// keeps state.

#include <cstdint>
#include <utility>
#include <vector>

#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "scheduler/placement/gang_shape.h"

namespace muster::scheduler::placement {

// How many nodes of equal rank placement weighs by fragmentation: for a single pod asking for
// whole GPUs (single_pod.h), and among the nodes of a gang's domain that take as many of its
// pods. On the Alibaba trace (bench/README.md) 32 placed as well as weighing every node.
inline constexpr size_t kFragmentationCandidates = 32;

// What a group prefers of a node: preferred node affinity first, then the inter-pod score, then
// the ScheduleAnyway spread score, as one number ordered that way (0 when it prefers nothing).
int64_t preference(const GroupShape& g, const NodeInfo& n);

// How well `count` pods can be aligned on a node: each pod scores 3 behind one deepest PCIe switch
// (PIX), 2 under one root port (PXB), 1 on one NUMA node, 0 otherwise; the sum. For one pod:
// 3, 2, 1 or 0.
int alignScore(const AlignedCapacity& c, int64_t count);

// A node or domain the fill may put pods of a group into: its room for them (`cap`), then what
// ranks it.
struct Child {
  int64_t cap;
  int64_t affinity;  // preference()
  int64_t free_dom;  // free units of the gang's dominant resource
  uint32_t idx;      // position (a node) or domain index
  int64_t aligned = 0;  // how many of its `cap` pods could be aligned (a tie-break; 0: unknown)
};

// Most room first, then preferred affinity, then alignment, then the fullest (least free), then
// order.
void sortChildren(std::vector<Child>& children);

// Among sorted children[start..], the tightest that takes all of `need`: the smallest capacity
// >= need, the most preferred among equals; end() when none can.
std::vector<Child>::const_iterator tightestFor(const std::vector<Child>& children, size_t start,
                                               int64_t need);

// Whether scarcity and fragmentation order the nodes of a gang's domain that take as many of its
// members: a gang of one group (`groups` == 1) of whole-GPU (or CPU-only) pods, packing, with a
// workload known or a GPU model in demand. (With other groups in the fill, what they take on a
// node is not in the cache yet.)
bool gangFragmentationApplies(const GroupShape& g, size_t groups, const ClusterCache& cache,
                              const PlacementOptions& options);

// What `take` pods of the group on `n` cost others, least first: the node's GPU model scarcity
// (when the group accepts any model and some pods require one), then how much they raise the
// node's fragmentation.
std::pair<int64_t, int64_t> gangNodeCost(const GroupShape& g, const NodeInfo& n, int64_t take,
                                         const ClusterCache& cache);

// Among nodes (children are positions) that take as many of the group's pods (children[i] and
// those after it with the same cap, preference and alignment, at most kFragmentationCandidates of
// them): the one where `take` pods cost others least (gangNodeCost) moves to position i; ties keep
// the order (the fullest first). For a gang gangFragmentationApplies to.
void leastFragmentingFirst(std::vector<Child>& children, size_t i, int64_t take,
                           const GroupShape& g, const ClusterCache& cache);

}  // namespace muster::scheduler::placement
