#pragma once

// Candidate domains (a placement stage): the units of the topology a gang can be placed in, and
// the scope its already bound members leave it. A unit is (level, idx): level -1 is the whole
// cluster, 0..levels()-1 a configured level's domain (idx into Topology::levels[level]), levels()
// the host (idx is a position in Topology::order, which lists every domain's nodes side by side:
// a unit is the positions [begin, end)).
//
// Inputs: the cache's topology (and, for the scope, the gang's bound members and required
// level). Outputs: positions, domain indexes, and whether a unit is allowed. Nothing here changes.

#include <array>
#include <cstdint>
#include <string>

#include "scheduler/cache.h"
#include "scheduler/placement.h"

namespace muster::scheduler::placement {

class Units {
 public:
  explicit Units(const ClusterCache& cache)
      : cache_(cache),
        topo_(cache.topology()),
        levels_(static_cast<int>(cache.levels().size())),
        n_(static_cast<uint32_t>(topo_.order.size())) {}

  int levels() const { return levels_; }  // the configured levels; levels() itself is the host
  uint32_t nodes() const { return n_; }
  bool isHost(int level) const { return level == levels_; }
  uint32_t begin(int level, uint32_t idx) const {
    if (level < 0) return 0;
    if (isHost(level)) return idx;
    return topo_.levels[level][idx].begin;
  }
  uint32_t end(int level, uint32_t idx) const {
    if (level < 0) return n_;
    if (isHost(level)) return idx + 1;
    return topo_.levels[level][idx].end;
  }
  // The free units of `dominant` in the unit (0 for the whole cluster).
  int64_t freeDom(int level, uint32_t idx, ResourceId dominant) const {
    if (level < 0) return 0;
    if (isHost(level)) return std::max<int64_t>(0, node(idx).freeOf(dominant));
    return topo_.levels[level][idx].free[dominant];
  }
  const NodeInfo& node(uint32_t pos) const { return cache_.node(topo_.order[pos]); }

 private:
  const ClusterCache& cache_;
  const Topology& topo_;
  const int levels_;
  const uint32_t n_;
};

// Where a gang's bound (or assumed) members are: per level the one domain they all share, if any.
// A gang with bound members is placed only in a unit that holds them all.
class BoundScope {
 public:
  // The scope of request.bound. `problem` says why no unit can hold them (a bound member's node
  // is gone; they are not within one domain of the required level), else it is left empty; the
  // scope is returned either way, as far as it was resolved.
  static BoundScope resolve(const GangRequest& request, const ClusterCache& cache,
                            std::string* problem);

  bool any() const { return any_; }
  // Whether unit (level, idx) holds every bound member (always, without any; the whole cluster
  // always does).
  bool allows(int level, uint32_t idx) const {
    if (!any_ || level < 0) return true;
    return domain_[level] >= 0 && static_cast<uint32_t>(domain_[level]) == idx;
  }
  // The one domain (or, at the host level, node position) of `level` holding them all; -1: none.
  int32_t domain(int level) const { return domain_[level]; }

 private:
  bool any_ = false;
  std::array<int32_t, kMaxTopologyLevels + 1> domain_{};
};

}  // namespace muster::scheduler::placement
