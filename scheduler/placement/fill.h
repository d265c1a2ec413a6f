#pragma once

// The fill (placement stage 4, the PodGroup cycle's tentative Reserve): the gang's groups with
// their per-node capacity columns, and putting every member of the gang into one unit. Inside the
// unit the groups go in the prepared order (gang_groups.h); each goes down the unit's tree by the
// tightest / most room rule (scoring.h), by GPU↔NIC alignment tiers on the nodes of a leaf
// domain, all into one domain of a level (members that must share one), or spread
// (spread_fill.h); what a group took is held tentatively (resources, host ports, volumes) and the
// later groups' columns are recomputed where it took room, and cut where the members' terms
// toward each other forbid; all of it is undone after the fill, so the columns are those of the
// cache again.
//
// Inputs: the prepared gang, the request, the cache, the options, the per-node feasibility and
// the units. Output: whether the gang fits into a unit, and then the pods per position of each
// group (out()). The capacity columns live in thread-local scratch (no allocation per node per
// call); one GangFill at a time per thread.

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "scheduler/placement/domains.h"
#include "scheduler/placement/feasibility.h"
#include "scheduler/placement/gang_groups.h"
#include "scheduler/placement/scoring.h"

namespace muster::scheduler::placement {

// A group of the gang and its capacity columns, which the fill cuts and restores.
struct FillGroup : GangGroup {
  std::vector<int32_t>* cap = nullptr;  // pods of the group each position can take now
  std::vector<int64_t>* pre = nullptr;  // prefix sums of cap, size N + 1
};

// Pods per position of one group.
using GroupOut = std::vector<std::pair<uint32_t, int64_t>>;

class GangFill {
 public:
  GangFill(PreparedGang gang, const GangRequest& request, const ClusterCache& cache,
           const PlacementOptions& options, const NodeFeasibility& feasible, const Units& units);

  const std::vector<FillGroup>& groups() const { return groups_; }
  ResourceId dominant() const { return dominant_; }
  int64_t totalCount() const { return total_count_; }
  bool gangTerms() const { return gang_terms_; }
  const std::string& unsupported() const { return unsupported_; }

  // The capacity columns of group `gi` (computeAllCaps: of every group) from the cache.
  void computeCaps(size_t gi);
  void computeAllCaps();
  // How many of the group's pods unit (level, idx) can take, by its capacity columns.
  int64_t capsum(const FillGroup& g, int level, uint32_t idx) const {
    if (units_.isHost(level)) return (*g.cap)[idx];
    return (*g.pre)[units_.end(level, idx)] - (*g.pre)[units_.begin(level, idx)];
  }
  // Every group has room for its members in the unit (and, on one node, all of them together).
  bool unitFits(int level, uint32_t idx) const;
  // The whole gang into the unit; true: out() says where. The columns are restored either way.
  bool fill(int level, uint32_t idx);
  // Per group, the pods per position of the last fill (or of place()).
  const std::vector<GroupOut>& out() const { return fill_out_; }
  // The lone pod of a gang of one, placed by single_pod.h at `pos`.
  void place(uint32_t pos) { fill_out_.assign(1, {{pos, 1}}); }
  // How many of a spreading group's pods the whole cluster can take (for the verdict).
  int64_t spreadFit(const FillGroup& g) const { return distributeSpread(-1, 0, g, {}, nullptr); }
  bool gangFragmentationApplies(const FillGroup& g) const {
    return placement::gangFragmentationApplies(g, groups_.size(), cache_, options_);
  }

 private:
  int32_t nodeCap(const FillGroup& g, NodeId id, const Resources* extra,
                  const std::vector<HostPort>* extra_ports) const {
    return feasible_.capacity(g, id, extra, extra_ports);
  }
  AlignedCapacity alignedOn(const FillGroup& g, const NodeInfo& n, const Resources* extra) const {
    return feasible_.alignedOn(g, n, extra);
  }
  void computeCapsOf(FillGroup& g);
  void computeCapsIn(FillGroup& g, int level, uint32_t idx);
  void computePrefix(FillGroup& g);
  bool fillInOrder(int level, uint32_t idx, const std::vector<size_t>& order);
  bool distribute(int level, uint32_t idx, int64_t need, FillGroup& g, GroupOut* out);
  // Inside a gang's domain (scoring.h): among nodes that take the same number of its pods, the
  // one where `take` of them cost others least first, when fragmentation applies.
  void leastFragmentingFirst(std::vector<Child>& children, size_t i, int64_t take,
                             const FillGroup& g) const {
    if (gangFragmentationApplies(g)) placement::leastFragmentingFirst(children, i, take, g, cache_);
  }
  // A group with together_level: all of it into the tightest domain of that level in the unit.
  bool distributeTogether(int level, uint32_t idx, FillGroup& g, GroupOut* out);
  // Before group `gi` is placed in a fill: its caps in the unit lose the nodes its terms toward
  // the members of `before` forbid (recorded in cuts_ for restoreCaps).
  void applyGangTerms(int level, uint32_t idx, size_t gi, const std::vector<size_t>& before);
  void restoreCaps();
  // What the groups `before` add at `pos`, per driver (shared claims recorded in `shared_keys`).
  absl::flat_hash_map<std::string, int64_t> volumesAddedAt(uint32_t pos, const std::vector<size_t>& before,
                                                           absl::flat_hash_set<std::string>* shared_keys) const;
  // After a fill: no node gets more volumes of a driver than its limit from the groups together.
  bool volumeLimitsHold() const;
  // distribute() into the nodes [b, e) of order, by alignment tiers (the file comment of
  // placement.h, point 6).
  bool distributeAligned(uint32_t b, uint32_t e, int64_t need, FillGroup& g, GroupOut* out);
  // A gang_spread group into the unit (spread_fill.h), counting the members of `before` (groups
  // already placed in this fill). Returns how many of its pods fit (all: `out` filled); `out`
  // null only asks.
  int64_t distributeSpread(int level, uint32_t idx, const FillGroup& g, const std::vector<size_t>& before,
                           GroupOut* out) const;

  const GangRequest& request_;
  const ClusterCache& cache_;
  const PlacementOptions& options_;
  const Topology& topo_;
  const int levels_;
  const uint32_t n_;
  const NodeFeasibility& feasible_;
  const Units& units_;
  std::vector<FillGroup> groups_;
  const ResourceId dominant_;
  const int64_t total_count_;
  const std::vector<size_t> fill_order_;  // the groups in the order a fill places them
  const std::vector<size_t> alt_order_;   // another order to try when that fails (empty: none)
  const bool gang_terms_;                 // some group has needs, excludes or together_level
  const std::string unsupported_;         // no order satisfies the members' terms
  // Tentative state of a fill (heterogeneous gangs only).
  absl::flat_hash_map<uint32_t, Resources> extra_;
  absl::flat_hash_map<uint32_t, std::vector<HostPort>> extra_ports_;
  std::vector<GroupOut> fill_out_;  // per group
  // Caps applyGangTerms cut: group, position, the cap before.
  std::vector<std::tuple<size_t, uint32_t, int32_t>> cuts_;
};

}  // namespace muster::scheduler::placement
