#include "scheduler/placement/scoring.h"

#include <algorithm>

#include "scheduler/filter.h"
#include "scheduler/fragmentation.h"

namespace muster::scheduler::placement {

int64_t preference(const GroupShape& g, const NodeInfo& n) {
  if (!g.prefers) return 0;
  // Node affinity weights sum to far less than 2^22; the others are clamped to ±2^19.
  constexpr int64_t kLimit = (int64_t{1} << 19) - 1;
  int64_t node = g.rep->has_preferred_affinity ? preferredAffinityScore(*g.rep, n) : 0;
  int64_t pods = g.pod_score ? std::clamp(g.pod_score->score(n), -kLimit, kLimit) : 0;
  int64_t spread = g.spread_score ? std::clamp(g.spread_score->score(n), -kLimit, kLimit) : 0;
  return node * (int64_t{1} << 40) + pods * (int64_t{1} << 20) + spread;
}

int alignScore(const AlignedCapacity& c, int64_t count) {
  const int64_t sum = std::min<int64_t>(count, c.pix) + std::min<int64_t>(count, c.pcie) +
                      std::min<int64_t>(count, c.numa);
  return static_cast<int>(std::min<int64_t>(sum, INT32_MAX));
}

void sortChildren(std::vector<Child>& children) {
  std::sort(children.begin(), children.end(), [](const Child& x, const Child& y) {
    if (x.cap != y.cap) return x.cap > y.cap;
    if (x.affinity != y.affinity) return x.affinity > y.affinity;
    if (x.aligned != y.aligned) return x.aligned > y.aligned;
    if (x.free_dom != y.free_dom) return x.free_dom < y.free_dom;
    return x.idx < y.idx;
  });
}

std::vector<Child>::const_iterator tightestFor(const std::vector<Child>& children, size_t start,
                                               int64_t need) {
  auto first = children.begin() + static_cast<ptrdiff_t>(start);
  auto fits_end = std::partition_point(first, children.end(),
                                       [&](const Child& c) { return c.cap >= need; });
  if (fits_end == first) return children.end();
  int64_t tightest = (fits_end - 1)->cap;
  return std::partition_point(first, fits_end, [&](const Child& c) { return c.cap > tightest; });
}

bool gangFragmentationApplies(const GroupShape& g, size_t groups, const ClusterCache& cache,
                              const PlacementOptions& options) {
  if (groups != 1 || g.rep->gpu_milli > 0 || options.single_pod_strategy == SinglePodStrategy::kSpread)
    return false;
  return !cache.workloadProfile().empty() || cache.anyModelDemand();
}

std::pair<int64_t, int64_t> gangNodeCost(const GroupShape& g, const NodeInfo& n, int64_t take,
                                         const ClusterCache& cache) {
  const ResourceId gpu = cache.gpuResource();
  if (n.allocatable[gpu] <= 0) return {0, 0};
  const bool scarce = g.rep->gpu_models.empty() && g.rep->requests[gpu] > 0 && cache.anyModelDemand();
  const int64_t scarcity = scarce ? cache.modelScarcity(n) : 0;
  if (cache.workloadProfile().empty()) return {scarcity, 0};
  return {scarcity, fragmentationDelta(n, gpu, cache.rdmaResource(), g.rep->requests.times(take), 0, -1,
                                       cache.workloadProfile().classes())};
}

void leastFragmentingFirst(std::vector<Child>& children, size_t i, int64_t take,
                           const GroupShape& g, const ClusterCache& cache) {
  const Child& first = children[i];
  size_t end = i + 1;
  while (end < children.size() && end - i < kFragmentationCandidates && children[end].cap == first.cap &&
         children[end].affinity == first.affinity && children[end].aligned == first.aligned)
    ++end;
  if (end == i + 1) return;
  const Topology& topo = cache.topology();
  size_t best = i;
  std::pair<int64_t, int64_t> best_cost;
  for (size_t k = i; k < end; ++k) {
    const NodeInfo& n = cache.node(topo.order[children[k].idx]);
    const std::pair<int64_t, int64_t> cost = gangNodeCost(g, n, take, cache);
    if (k == i || cost < best_cost) {
      best = k;
      best_cost = cost;
    }
  }
  // Moved to the front, the others keep their order behind it.
  std::rotate(children.begin() + static_cast<ptrdiff_t>(i), children.begin() + static_cast<ptrdiff_t>(best),
              children.begin() + static_cast<ptrdiff_t>(best) + 1);
}

}  // namespace muster::scheduler::placement
