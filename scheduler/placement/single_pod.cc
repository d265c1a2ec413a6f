#include "scheduler/placement/single_pod.h"

#include <algorithm>
#include <bit>

#include "scheduler/fragmentation.h"
#include "scheduler/placement/scoring.h"

namespace muster::scheduler::placement {
namespace {

// The single pod's ranking of the nodes it fits: consider() each, best() the winner so far,
// done() once no later node can beat it.
class SinglePodRanking {
 public:
  struct Best {
    uint32_t p;
    int64_t aff = 0;
    int align = 0;
    int64_t frag = 0, scarcity = 0, left = 0;
    int64_t gpus_left = 0;  // for a pod asking for no GPU: the node's free GPU thousandths
    int32_t index = -1;     // a fraction's GPU
  };

  SinglePodRanking(const GroupShape& g, ResourceId dominant, const ClusterCache& cache,
                   const PlacementOptions& options, const NodeFeasibility& feasible)
      : g_(g),
        cache_(cache),
        feasible_(feasible),
        dominant_(dominant),
        spread_(options.single_pod_strategy == SinglePodStrategy::kSpread),
        want_(g.rep->requests[dominant]),
        r_(g.rep->requests),
        gpu_(cache.gpuResource()),
        rdma_(cache.rdmaResource()),
        milli_(g.rep->gpu_milli) {
    // Packing keeps fragmentation low (scheduler/fragmentation.h): over the shapes of the GPU pods
    // the cluster runs, the pod goes where it raises the node's fragmentation least (GPUs left
    // without the CPU or memory their pods need, GPUs split or nodes broken up that bigger pods
    // need), then by the rules below.
    if (!spread_ && !cache_.workloadProfile().empty()) classes_ = &cache_.workloadProfile().classes();
    // What the shapes ask at most: a node left with that much CPU, memory, NICs and whole GPUs
    // fits every shape it fitted, and a pod that takes no part of a GPU changes nothing there
    // (unless fractions are among the shapes: how many of them fit depends on every core).
    int64_t weights = 0;
    if (classes_) {
      for (const WorkloadProfile::Class& c : *classes_) {
        most_cpu_ = std::max(most_cpu_, c.shape.cpu);
        most_memory_ = std::max(most_memory_, c.shape.memory);
        most_rdma_ = std::max(most_rdma_, c.shape.rdma);
        most_gpus_ = std::max(most_gpus_, c.shape.gpus);
        fractions_ = fractions_ || c.shape.milli > 0;
        weights += c.weight;
      }
    }
    // The least any node's fragmentation can change: every thousandth the pod takes was unusable.
    frag_floor_ =
        classes_ ? -saturatingMul(saturatingAdd(saturatingMul(r_[gpu_], 1000), milli_), weights) : 0;
    // A pod that accepts any GPU model leaves the models that pods restricted to them hold most of
    // to those pods (ClusterCache::modelScarcity), before fragmentation.
    scarce_ = !spread_ && g.rep->gpu_models.empty() && (r_[gpu_] > 0 || milli_ > 0) &&
              cache_.anyModelDemand();
  }

  bool fragmentation() const { return classes_ != nullptr; }
  bool scarce() const { return scarce_; }
  bool spread() const { return spread_; }
  int64_t want() const { return want_; }
  const std::optional<Best>& best() const { return best_; }

  void consider(uint32_t p) {
    const NodeInfo& n = cache_.node(cache_.topology().order[p]);
    Best c{p};
    c.aff = preference(g_, n);
    c.align = g_.align ? alignScore(feasible_.alignedOn(g_, n, nullptr), 1) : 0;
    c.scarcity = scarce_ ? cache_.modelScarcity(n) : 0;
    if (milli_ == 0) {
      c.frag = fragDelta(n, -1);
      c.left = n.freeOf(dominant_) - want_;
      // A pod asking for no GPU takes CPU and memory where the fewest free GPUs need them.
      if (classes_ && r_[gpu_] == 0) c.gpus_left = freeThousandths(n, gpu_);
    } else {
      // A fraction: each shared GPU with room, and a GPU of its own; the one it fragments least,
      // then the one it leaves least room on (a GPU of its own leaves more than any shared one:
      // the free thousandths of the node's whole GPUs after it).
      bool first = true;
      auto option = [&](int32_t index, int64_t left) {
        const int64_t frag = fragDelta(n, index);
        if (first || frag < c.frag || (frag == c.frag && left < c.left)) {
          c.frag = frag;
          c.left = left;
          c.index = index;
          first = false;
        }
      };
      for (const NodeInfo::GpuShare& share : n.gpu_shares)
        if (share.used + milli_ <= 1000) option(share.index, 1000 - share.used - milli_);
      if (n.freeOf(gpu_) > 0) option(chooseGpu(n, 1000), saturatingMul(n.freeOf(gpu_), 1000) - milli_);
    }
    if (!best_ || better(c, *best_)) best_ = c;
  }

  // Packing without affinity: a node the pod fills exactly, making nothing unusable, cannot be
  // beaten by a later one (unless alignment matters and this node is not aligned behind a PCIe
  // switch).
  bool done() const {
    return !spread_ && !g_.prefers && best_ && best_->left == 0 && (!g_.align || best_->align == 2) &&
           best_->frag <= frag_floor_ && best_->scarcity == 0 && best_->gpus_left == 0;
  }

 private:
  bool better(const Best& c, const Best& best) const {
    if (c.aff != best.aff) return c.aff > best.aff;
    if (c.align != best.align) return c.align > best.align;
    if (c.scarcity != best.scarcity) return c.scarcity < best.scarcity;
    if (c.frag != best.frag) return c.frag < best.frag;
    if (c.gpus_left != best.gpus_left) return c.gpus_left < best.gpus_left;
    return spread_ ? c.left > best.left : c.left < best.left;
  }

  int64_t fragDelta(const NodeInfo& n, int32_t index) const {
    if (!classes_ || n.allocatable[gpu_] <= 0) return 0;
    if (milli_ == 0 && !fractions_ && saturatingSub(n.freeOf(kCpu), r_[kCpu]) >= most_cpu_ &&
        saturatingSub(n.freeOf(kMemory), r_[kMemory]) >= most_memory_ &&
        saturatingSub(n.freeOf(rdma_), r_[rdma_]) >= most_rdma_ &&
        saturatingSub(n.freeOf(gpu_), r_[gpu_]) >= most_gpus_)
      return 0;
    return fragmentationDelta(n, gpu_, rdma_, r_, milli_, index, *classes_);
  }

  const GroupShape& g_;
  const ClusterCache& cache_;
  const NodeFeasibility& feasible_;
  const ResourceId dominant_;
  const bool spread_;
  const int64_t want_;
  const Resources& r_;
  const ResourceId gpu_, rdma_;
  const int32_t milli_;  // a pod asking for a fraction of a GPU (thousandths) gets a node and a GPU
  const std::vector<WorkloadProfile::Class>* classes_ = nullptr;
  int64_t most_cpu_ = 0, most_memory_ = 0, most_rdma_ = 0, most_gpus_ = 0;
  bool fractions_ = false;
  int64_t frag_floor_ = 0;
  bool scarce_ = false;
  std::optional<Best> best_;
};

}  // namespace

std::optional<std::pair<uint32_t, int32_t>> bestNodeForSinglePod(const GroupShape& g,
                                                                 ResourceId dominant,
                                                                 const ClusterCache& cache,
                                                                 const PlacementOptions& options,
                                                                 const NodeFeasibility& feasible) {
  SinglePodRanking rank(g, dominant, cache, options, feasible);
  const Topology& topo = cache.topology();
  const int levels = static_cast<int>(cache.levels().size());
  const uint32_t n = static_cast<uint32_t>(topo.order.size());
  const int64_t want = rank.want();
  auto result = [&]() -> std::optional<std::pair<uint32_t, int32_t>> {
    if (!rank.best()) return std::nullopt;
    return std::pair(rank.best()->p, rank.best()->index);
  };
  auto visitRange = [&](uint32_t b, uint32_t e) {
    for (uint32_t p = b; p < e && !rank.done(); ++p)
      if (feasible.fitsOne(g, topo.order[p])) rank.consider(p);
  };
  const ResourceId gpu = cache.gpuResource();
  // By the domains' GPU index: whether any node has `want` GPUs free, and (packing, when only the
  // leftover orders nodes) the fewest a fitting node can have left.
  const bool indexed = options.gpu_index && dominant == gpu && want > 0;
  // A pod asking for whole GPUs, packing with fragmentation in play and nothing else to weigh
  // (no preference, alignment or scarce model): the kFragmentationCandidates fitting nodes with
  // the fewest free GPUs (what packing alone would rank first; ties by order) are weighed, so a
  // decision costs the same at any size. (Scarcity ranks nodes across the whole cluster, so with
  // it in play every node is weighed.)
  if (rank.fragmentation() && !rank.scarce() && !g.prefers && !g.align && dominant == gpu && want > 0) {
    for (uint32_t p : fewestFreeGpus(g, want, cache, options, feasible)) rank.consider(p);
    return result();
  }
  // (With scarcity in play, once the best node so far is of a model no pod requires, only the
  // leftover can beat it.)
  const bool leftover_only = indexed && !rank.spread() && !g.prefers && !g.align && !rank.fragmentation();
  const uint64_t enough = Domain::atLeast(want);
  if (levels == 0) {
    visitRange(0, n);
    return result();
  }
  // Depth-first over domains, pruning those whose summed free cannot hold the pod.
  std::vector<std::pair<int, uint32_t>> stack;
  for (uint32_t d = static_cast<uint32_t>(topo.levels[0].size()); d-- > 0;) stack.emplace_back(0, d);
  while (!stack.empty() && !rank.done()) {
    auto [level, idx] = stack.back();
    stack.pop_back();
    const Domain& d = topo.levels[level][idx];
    if (!sumFits(g.req, d.free)) continue;
    if (indexed) {
      const uint64_t fitting = d.gpu_mask & enough;
      if (fitting == 0) continue;
      // Ties go to the node found first, so only a strictly smaller leftover is worth a visit.
      const auto& best = rank.best();
      if (leftover_only && best && best->scarcity == 0 && std::countr_zero(fitting) - want >= best->left)
        continue;
    }
    if (level + 1 == levels) {
      visitRange(d.begin, d.end);
      continue;
    }
    for (uint32_t c = d.child_end; c-- > d.child_begin;) stack.emplace_back(level + 1, c);
  }
  return result();
}

std::vector<uint32_t> fewestFreeGpus(const GroupShape& g, int64_t want, const ClusterCache& cache,
                                     const PlacementOptions& options, const NodeFeasibility& feasible) {
  const Topology& topo = cache.topology();
  const int levels = static_cast<int>(cache.levels().size());
  const uint32_t n = static_cast<uint32_t>(topo.order.size());
  // Positions ordered by (free GPUs, capped at the index's last bucket; position), the first
  // kFragmentationCandidates that fit: by the index, bucket by bucket, or by visiting every node.
  auto bucket = [&](uint32_t p) { return std::min<int64_t>(topo.free_gpus[p], kGpuBuckets - 1); };
  auto fits = [&](uint32_t p) { return feasible.fitsOne(g, topo.order[p]); };
  std::vector<uint32_t> out;
  if (!options.gpu_index || levels == 0) {
    std::vector<std::pair<int64_t, uint32_t>> all;
    for (uint32_t p = 0; p < n; ++p)
      if (topo.free_gpus[p] >= want && fits(p)) all.emplace_back(bucket(p), p);
    const size_t keep = std::min(all.size(), kFragmentationCandidates);
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end());
    for (size_t i = 0; i < keep; ++i) out.push_back(all[i].second);
    return out;
  }
  std::vector<std::pair<int, uint32_t>> stack;
  for (int64_t b = std::min<int64_t>(want, kGpuBuckets - 1);
       b < kGpuBuckets && out.size() < kFragmentationCandidates; ++b) {
    const uint64_t bit = uint64_t{1} << b;
    stack.clear();
    for (uint32_t d = static_cast<uint32_t>(topo.levels[0].size()); d-- > 0;) stack.emplace_back(0, d);
    while (!stack.empty() && out.size() < kFragmentationCandidates) {
      auto [level, idx] = stack.back();
      stack.pop_back();
      const Domain& d = topo.levels[level][idx];
      if ((d.gpu_mask & bit) == 0 || !sumFits(g.req, d.free)) continue;
      if (level + 1 == levels) {
        for (uint32_t p = d.begin; p < d.end && out.size() < kFragmentationCandidates; ++p)
          if (bucket(p) == b && topo.free_gpus[p] >= want && fits(p)) out.push_back(p);
        continue;
      }
      for (uint32_t c = d.child_end; c-- > d.child_begin;) stack.emplace_back(level + 1, c);
    }
  }
  return out;
}

}  // namespace muster::scheduler::placement
