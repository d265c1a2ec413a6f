#include "scheduler/placement.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/log.h"
#include "proto/vocabulary.h"
#include "scheduler/filter.h"
#include "scheduler/fragmentation.h"
#include "scheduler/interpod.h"
#include "scheduler/placement/diagnosis.h"
#include "scheduler/placement/domains.h"
#include "scheduler/placement/feasibility.h"
#include "scheduler/placement/gang_groups.h"
#include "scheduler/placement/gang_shape.h"
#include "scheduler/placement/reservation.h"
#include "scheduler/placement/scoring.h"
#include "scheduler/placement/single_pod.h"
#include "scheduler/placement/spread_fill.h"
#include "scheduler/spread.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

using placement::DeviceResources;
using placement::DriverVolumes;
using placement::GangGroup;
using placement::GroupShape;
using placement::NodeRefusals;
using placement::NodeFeasibility;
using placement::SparseRequest;
using placement::Units;
using placement::VolumesAdded;
using placement::BoundScope;
using placement::Child;
using placement::alignScore;
using placement::bestNodeForSinglePod;
using placement::capacityOn;
using placement::gangNodeCost;
using placement::kFragmentationCandidates;
using placement::newVolumes;
using placement::preference;
using placement::prepareGang;
using placement::PreparedGang;
using placement::refusalsOf;
using placement::reservedNodes;
using placement::shapeOf;
using placement::sortChildren;
using placement::spreadInto;
using placement::sumFits;
using placement::tightestFor;



// A group of the gang (placement/gang_groups.h) and its per-node capacity columns, which the
// fill cuts and restores.
struct Group : GangGroup {
  std::vector<int32_t>* cap = nullptr;  // by position
  std::vector<int64_t>* pre = nullptr;  // prefix sums of cap, size N + 1
};

// Scratch buffers reused across calls on a thread: no allocation per node in the hot path.
struct Scratch {
  std::vector<std::vector<int32_t>> caps;
  std::vector<std::vector<int64_t>> pres;
};
thread_local Scratch tls_scratch;


class Placer {
 public:
  Placer(const GangRequest& request, const ClusterCache& cache, const PlacementOptions& options,
         const GangInterPod& inter)
      : request_(request),
        inter_(inter),
        cache_(cache),
        options_(options),
        topo_(cache.topology()),
        levels_(static_cast<int>(cache.levels().size())),
        n_(static_cast<uint32_t>(topo_.order.size())),
        devices_(DeviceResources::find()),
        align_required_(request.gpu_nic_affinity == GpuNicAffinity::kRequired),
        feasible_(cache, request, devices_),
        units_(cache) {}

  PlacementResult run();
  std::vector<std::string> reservation();

 private:
  // How many of the group's pods unit (level, idx) can take, by its capacity columns.
  int64_t capsum(const Group& g, int level, uint32_t idx) const {
    if (units_.isHost(level)) return (*g.cap)[idx];
    return (*g.pre)[units_.end(level, idx)] - (*g.pre)[units_.begin(level, idx)];
  }


  void buildGroups();
  int32_t nodeCap(const Group& g, NodeId id, const Resources* extra,
                  const std::vector<HostPort>* extra_ports) const {
    return feasible_.capacity(g, id, extra, extra_ports);
  }
  void computeCaps(Group& g);
  void computeCapsIn(Group& g, int level, uint32_t idx);
  void computePrefix(Group& g);
  bool unitFits(int level, uint32_t idx) const;
  bool fill(int level, uint32_t idx);
  bool fillInOrder(int level, uint32_t idx, const std::vector<size_t>& order);
  bool distribute(int level, uint32_t idx, int64_t need, Group& g,
                  std::vector<std::pair<uint32_t, int64_t>>* out);
  // Inside a gang's domain (placement/scoring.h): among nodes that take the same number of its
  // pods, the one where `take` of them cost others least first, when fragmentation applies.
  void leastFragmentingFirst(std::vector<Child>& children, size_t i, int64_t take, const Group& g) const {
    if (gangFragmentationApplies(g)) placement::leastFragmentingFirst(children, i, take, g, cache_);
  }
  bool gangFragmentationApplies(const Group& g) const {
    return placement::gangFragmentationApplies(g, groups_.size(), cache_, options_);
  }
  // A group with together_level: all of it into the tightest domain of that level in the unit.
  bool distributeTogether(int level, uint32_t idx, Group& g,
                          std::vector<std::pair<uint32_t, int64_t>>* out);
  // Before group `gi` is placed in a fill: its caps in the unit lose the nodes its terms toward
  // the members of `before` forbid (recorded in cuts_ for restoreCaps).
  void applyGangTerms(int level, uint32_t idx, size_t gi, const std::vector<size_t>& before);
  void restoreCaps();
  std::optional<std::pair<int, uint32_t>> search();
  AlignedCapacity alignedOn(const Group& g, const NodeInfo& n, const Resources* extra) const {
    return feasible_.alignedOn(g, n, extra);
  }
  // What the groups `before` add at `pos`, per driver (shared claims recorded in `shared_keys`).
  absl::flat_hash_map<std::string, int64_t> volumesAddedAt(uint32_t pos, const std::vector<size_t>& before,
                                                           absl::flat_hash_set<std::string>* shared_keys) const;
  // After a fill: no node gets more volumes of a driver than its limit from the groups together.
  bool volumeLimitsHold() const;
  // distribute() into the nodes [b, e) of order, by alignment tiers (the file comment of
  // placement.h, point 6).
  bool distributeAligned(uint32_t b, uint32_t e, int64_t need, Group& g,
                         std::vector<std::pair<uint32_t, int64_t>>* out);
  // A gang_spread group into the unit: per domain of its spread key as planGangSpread says, then
  // per node the tightest / most room rule, counting the members of `before` (groups already
  // placed in this fill). Returns how many of its pods fit (all: `out` filled); `out` null only
  // asks.
  int64_t distributeSpread(int level, uint32_t idx, const Group& g, const std::vector<size_t>& before,
                           std::vector<std::pair<uint32_t, int64_t>>* out) const;
  GangPlacement makePlacement(int level, uint32_t idx) const;
  Unschedulable diagnose(std::string headline_extra) const;
  std::string needs() const;

  const GangRequest& request_;
  const GangInterPod& inter_;
  const ClusterCache& cache_;
  const PlacementOptions& options_;
  const Topology& topo_;
  const int levels_;
  const uint32_t n_;
  const DeviceResources devices_;
  const bool align_required_;
  const NodeFeasibility feasible_;  // per-node feasibility (placement/feasibility.h)
  const Units units_;               // the topology's units (placement/domains.h)
  std::vector<Group> groups_;
  ResourceId dominant_ = kCpu;
  int64_t total_count_ = 0;
  BoundScope bound_;  // where the bound members are (placement/domains.h)
  // Tentative state of a fill (heterogeneous gangs only).
  absl::flat_hash_map<uint32_t, Resources> extra_;
  absl::flat_hash_map<uint32_t, std::vector<HostPort>> extra_ports_;
  std::vector<std::vector<std::pair<uint32_t, int64_t>>> fill_out_;  // per group
  std::vector<size_t> fill_order_;  // the groups in the order a fill places them
  std::vector<size_t> alt_order_;   // another order to try when that fails (empty: none)
  // Caps applyGangTerms cut: group, position, the cap before.
  std::vector<std::tuple<size_t, uint32_t, int32_t>> cuts_;
  bool gang_terms_ = false;  // some group has needs, excludes or together_level
  std::string unsupported_;  // relateGroups found no order
};

absl::flat_hash_map<std::string, int64_t> Placer::volumesAddedAt(
    uint32_t pos, const std::vector<size_t>& before,
    absl::flat_hash_set<std::string>* shared_keys) const {
  absl::flat_hash_map<std::string, int64_t> adding;
  const NodeInfo& n = units_.node(pos);
  for (size_t gi : before) {
    if (!groups_[gi].csi) continue;
    for (const auto& [p, k] : fill_out_[gi]) {
      if (p != pos) continue;
      for (const DriverVolumes& d : newVolumes(*groups_[gi].rep, n, shared_keys))
        adding[d.driver] += d.shared + d.own * k;
    }
  }
  return adding;
}

bool Placer::volumeLimitsHold() const {
  // Each group's cap saw the groups before it (fill); this checks the sum once more, per node
  // that members of two groups with CSI volumes share.
  absl::flat_hash_map<uint32_t, int> groups_on;
  std::vector<size_t> all;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (!groups_[gi].csi) continue;
    all.push_back(gi);
    for (const auto& [pos, k] : fill_out_[gi]) ++groups_on[pos];
  }
  for (const auto& [pos, count] : groups_on) {
    const NodeInfo& n = units_.node(pos);
    if (count < 2 || !n.volume_limits) continue;
    absl::flat_hash_set<std::string> shared_keys;
    for (const auto& [driver, more] : volumesAddedAt(pos, all, &shared_keys))
      if (cache_.attachedVolumes(n, driver) + more > n.volume_limits->at(driver)) return false;
  }
  return true;
}

void Placer::buildGroups() {
  PreparedGang gang = prepareGang(request_, inter_, cache_, options_, devices_, align_required_);
  groups_.clear();
  groups_.reserve(gang.groups.size());
  for (GangGroup& g : gang.groups) {
    Group group;
    static_cast<GangGroup&>(group) = std::move(g);
    groups_.push_back(std::move(group));
  }
  fill_order_ = std::move(gang.fill_order);
  alt_order_ = std::move(gang.alt_order);
  gang_terms_ = gang.gang_terms;
  unsupported_ = std::move(gang.unsupported);
  total_count_ = gang.total_count;
  dominant_ = gang.dominant;
  Scratch& s = tls_scratch;
  if (s.caps.size() < groups_.size()) {
    s.caps.resize(groups_.size());
    s.pres.resize(groups_.size());
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    s.caps[g].resize(n_);
    s.pres[g].resize(n_ + 1);
    groups_[g].cap = &s.caps[g];
    groups_[g].pre = &s.pres[g];
  }
}

void Placer::computeCapsIn(Group& g, int level, uint32_t idx) {
  // level is a configured level here; prune the domain when its summed free cannot hold one pod.
  const Domain& d = topo_.levels[level][idx];
  std::vector<int32_t>& cap = *g.cap;
  const int64_t gpus = g.rep->requests[cache_.gpuResource()];
  if (!sumFits(g.req, d.free) ||
      (options_.gpu_index && gpus > 0 && (d.gpu_mask & Domain::atLeast(gpus)) == 0)) {
    std::fill(cap.begin() + d.begin, cap.begin() + d.end, 0);
    return;
  }
  if (level + 1 == levels_) {
    // A node without the GPUs of one pod takes none (what nodeCap says too, at a fraction of
    // its cost: Topology::free_gpus lies side by side, and most nodes of a busy cluster fail
    // here). Off with the index, so that the exhaustive search the bench compares with does not
    // take this path.
    const bool quick = options_.gpu_index && gpus > 0;
    for (uint32_t p = d.begin; p < d.end; ++p)
      cap[p] = quick && topo_.free_gpus[p] < gpus ? 0 : nodeCap(g, topo_.order[p], nullptr, nullptr);
    return;
  }
  for (uint32_t c = d.child_begin; c < d.child_end; ++c) computeCapsIn(g, level + 1, c);
}

void Placer::computeCaps(Group& g) {
  if (levels_ == 0) {
    std::vector<int32_t>& cap = *g.cap;
    for (uint32_t p = 0; p < n_; ++p) cap[p] = nodeCap(g, topo_.order[p], nullptr, nullptr);
    return;
  }
  for (uint32_t d = 0; d < topo_.levels[0].size(); ++d) computeCapsIn(g, 0, d);
}

void Placer::computePrefix(Group& g) {
  std::vector<int64_t>& pre = *g.pre;
  const std::vector<int32_t>& cap = *g.cap;
  pre[0] = 0;
  for (uint32_t p = 0; p < n_; ++p) pre[p + 1] = pre[p] + cap[p];
}

bool Placer::unitFits(int level, uint32_t idx) const {
  for (const Group& g : groups_) {
    if (capsum(g, level, idx) < g.count) return false;
  }
  if (groups_.size() > 1 && units_.isHost(level)) {
    // Everything on one node: the summed requests must fit together.
    Resources total;
    for (const Group& g : groups_) total += g.rep->requests.times(g.count);
    if (!fitsIn(total, units_.node(idx).free())) return false;
  }
  return true;
}

bool Placer::distribute(int level, uint32_t idx, int64_t need, Group& g,
                        std::vector<std::pair<uint32_t, int64_t>>* out) {
  if (need <= 0) return true;
  if (units_.isHost(level)) {
    if ((*g.cap)[idx] < need) return false;
    out->emplace_back(idx, need);
    return true;
  }
  const int cl = level + 1;
  uint32_t b, e;
  if (units_.isHost(cl)) {
    b = units_.begin(level, idx);
    e = units_.end(level, idx);
    if (g.align) return distributeAligned(b, e, need, g, out);
  } else if (level < 0) {
    b = 0;
    e = static_cast<uint32_t>(topo_.levels[0].size());
  } else {
    b = topo_.levels[level][idx].child_begin;
    e = topo_.levels[level][idx].child_end;
  }
  std::vector<Child> children;
  children.reserve(e - b);
  const bool affinity = units_.isHost(cl) && g.prefers;
  for (uint32_t c = b; c < e; ++c) {
    int64_t cap = capsum(g, cl, c);
    if (cap <= 0) continue;
    int64_t aff = affinity ? preference(g, units_.node(c)) : 0;
    children.push_back(Child{cap, aff, units_.freeDom(cl, c, dominant_), c});
  }
  sortChildren(children);
  size_t start = 0;
  while (need > 0) {
    if (start == children.size()) return false;
    if (auto pick = tightestFor(children, start, need); pick != children.end()) {
      const size_t at = static_cast<size_t>(pick - children.begin());
      if (units_.isHost(cl)) leastFragmentingFirst(children, at, need, g);
      return distribute(cl, children[at].idx, need, g, out);
    }
    if (units_.isHost(cl)) leastFragmentingFirst(children, start, children[start].cap, g);
    const Child& c = children[start++];
    if (!distribute(cl, c.idx, c.cap, g, out)) return false;
    need -= c.cap;
  }
  return true;
}

bool Placer::distributeAligned(uint32_t b, uint32_t e, int64_t need, Group& g,
                               std::vector<std::pair<uint32_t, int64_t>>* out) {
  struct Candidate {
    uint32_t pos;
    int64_t cap;
    AlignedCapacity aligned;
    int64_t affinity;
    int64_t free_dom;
  };
  std::vector<Candidate> nodes;
  for (uint32_t p = b; p < e; ++p) {
    int64_t cap = (*g.cap)[p];
    if (cap <= 0) continue;
    auto ex = extra_.find(p);
    const NodeInfo& n = units_.node(p);
    nodes.push_back(Candidate{p, cap, alignedOn(g, n, ex == extra_.end() ? nullptr : &ex->second),
                              preference(g, n),
                              units_.freeDom(levels_, p, dominant_)});
  }
  // Two plans, each with the tightest / fullest rule: `tiered` takes room aligned behind one
  // deepest switch first (tier 0), then under one root port (1), then on one NUMA node (2), then
  // any (3); `packed` takes any room, alignment only breaking ties. Tiered wins unless it needs
  // more nodes: fewer nodes is the stronger locality (NVLink inside, fewer NIC hops) and keeps
  // whole nodes free for others.
  auto plan = [&](bool tiered, std::vector<int64_t>* taken) {
    taken->assign(nodes.size(), 0);
    int64_t left = need;
    std::vector<Child> children;
    for (int tier = tiered ? 0 : 3; tier < 4 && left > 0; ++tier) {
      children.clear();
      for (uint32_t i = 0; i < nodes.size(); ++i) {
        const Candidate& c = nodes[i];
        int64_t limit = tier == 0   ? std::min<int64_t>(c.cap, c.aligned.pix)
                        : tier == 1 ? std::min<int64_t>(c.cap, c.aligned.pcie)
                        : tier == 2 ? std::min<int64_t>(c.cap, c.aligned.numa)
                                    : c.cap;
        int64_t room = limit - (*taken)[i];
        if (room <= 0) continue;
        int64_t aligned = tiered ? 0
                                 : std::min<int64_t>(room, c.aligned.pix) +
                                       std::min<int64_t>(room, c.aligned.pcie) +
                                       std::min<int64_t>(room, c.aligned.numa);
        children.push_back(Child{room, c.affinity, c.free_dom, i, aligned});
      }
      sortChildren(children);
      for (size_t start = 0; left > 0 && start < children.size();) {
        if (auto pick = tightestFor(children, start, left); pick != children.end()) {
          (*taken)[pick->idx] += left;
          left = 0;
          break;
        }
        const Child& c = children[start++];
        (*taken)[c.idx] += c.cap;
        left -= c.cap;
      }
    }
    return left == 0;
  };
  std::vector<int64_t> tiered, packed;
  if (!plan(true, &tiered)) return false;  // both plans fit exactly when the room suffices
  plan(false, &packed);
  auto used = [](const std::vector<int64_t>& t) {
    return std::count_if(t.begin(), t.end(), [](int64_t k) { return k > 0; });
  };
  const std::vector<int64_t>& taken = used(tiered) <= used(packed) ? tiered : packed;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (taken[i] > 0) out->emplace_back(nodes[i].pos, taken[i]);
  }
  return true;
}

void Placer::restoreCaps() {
  if (extra_.empty() && cuts_.empty()) return;
  absl::flat_hash_set<size_t> cut_groups;
  // The cut positions first: those also in extra_ are recomputed below.
  for (auto it = cuts_.rbegin(); it != cuts_.rend(); ++it) {
    const auto& [gi, pos, cap] = *it;
    (*groups_[gi].cap)[pos] = cap;
    cut_groups.insert(gi);
  }
  cuts_.clear();
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    if (extra_.empty() && !cut_groups.contains(gi)) continue;
    for (const auto& [pos, res] : extra_) (*g.cap)[pos] = nodeCap(g, topo_.order[pos], nullptr, nullptr);
    computePrefix(g);
  }
  extra_.clear();
  extra_ports_.clear();
}

void Placer::applyGangTerms(int level, uint32_t idx, size_t gi, const std::vector<size_t>& before) {
  Group& g = groups_[gi];
  if (g.needs.empty() && g.excludes.empty() && g.needed_by.empty()) return;
  auto placed = [&](size_t x) { return std::find(before.begin(), before.end(), x) != before.end(); };
  std::vector<int32_t>& cap = *g.cap;
  const uint32_t b = units_.begin(level, idx), e = units_.end(level, idx);
  auto cut = [&](uint32_t p) {
    cuts_.emplace_back(gi, p, cap[p]);
    cap[p] = 0;
  };
  // A lone member that others need nearby (a launcher its workers' affinity selects): only in a
  // domain where they would have room, counting the domains placed pods already give them.
  for (size_t y : g.count == 1 ? g.needed_by : std::vector<size_t>{}) {
    const Group& dep = groups_[y];
    const std::vector<std::string>& keys = dep.inter->affinityKeys();
    if (placed(y) || std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return k != keys[0]; }))
      continue;
    const absl::flat_hash_set<InterPodFilter::Pair> none;
    int64_t met_room = 0;
    absl::flat_hash_map<std::string_view, int64_t> room;
    for (uint32_t p = b; p < e; ++p) {
      const NodeInfo& n = units_.node(p);
      if (dep.inter->affinityMet(n, none)) met_room += (*dep.cap)[p];
      else if (auto it = n.labels().find(keys[0]); it != n.labels().end()) room[it->second] += (*dep.cap)[p];
    }
    for (uint32_t p = b; p < e; ++p) {
      if (cap[p] == 0) continue;
      auto it = units_.node(p).labels().find(keys[0]);
      auto r = it == units_.node(p).labels().end() ? room.end() : room.find(it->second);
      if (met_room + (r == room.end() ? 0 : r->second) < dep.count) cut(p);
    }
  }
  // The domains the members placed before give its affinity, and those it must avoid.
  absl::flat_hash_set<InterPodFilter::Pair> met, avoid;
  for (size_t x : g.needs) {
    if (!placed(x)) continue;
    for (const auto& [pos, k] : fill_out_[x]) {
      const NodeInfo& n = units_.node(pos);
      for (const std::string& key : g.inter->affinityKeys())
        if (auto it = n.labels().find(key); it != n.labels().end()) met.emplace(key, it->second);
    }
  }
  for (const auto& [x, key] : g.excludes) {
    if (!placed(x)) continue;
    for (const auto& [pos, k] : fill_out_[x]) {
      const NodeInfo& n = units_.node(pos);
      if (auto it = n.labels().find(key); it != n.labels().end()) avoid.emplace(key, it->second);
    }
  }
  if (!g.needs.empty() || !avoid.empty()) {
    for (uint32_t p = b; p < e; ++p) {
      if (cap[p] == 0) continue;
      const NodeInfo& n = units_.node(p);
      bool ok = g.needs.empty() || g.inter->affinityMet(n, met);
      for (auto a = avoid.begin(); ok && a != avoid.end(); ++a) {
        auto it = n.labels().find(a->first);
        ok = it == n.labels().end() || it->second != a->second;
      }
      if (!ok) cut(p);
    }
  }
  computePrefix(g);
}

bool Placer::distributeTogether(int level, uint32_t idx, Group& g,
                                std::vector<std::pair<uint32_t, int64_t>>* out) {
  const int t = g.together_level;
  if (t <= level) return distribute(level, idx, g.count, g, out);  // the unit is in one domain
  // The tightest domain of level t in the unit that holds them all, the first among equals.
  const uint32_t b = units_.begin(level, idx), e = units_.end(level, idx);
  int64_t best_cap = -1;
  uint32_t best = 0;
  auto consider = [&](uint32_t d, int64_t c) {
    if (c >= g.count && (best_cap < 0 || c < best_cap)) {
      best_cap = c;
      best = d;
    }
  };
  if (units_.isHost(t)) {
    for (uint32_t p = b; p < e; ++p) consider(p, (*g.cap)[p]);
  } else {
    const auto& domains = topo_.levels[t];
    for (uint32_t d = 0; d < domains.size(); ++d) {
      if (domains[d].value.empty() || domains[d].begin < b || domains[d].end > e) continue;
      consider(d, capsum(g, t, d));
    }
  }
  return best_cap >= 0 && distribute(t, best, g.count, g, out);
}

bool Placer::fill(int level, uint32_t idx) {
  return fillInOrder(level, idx, fill_order_) ||
         (!alt_order_.empty() && fillInOrder(level, idx, alt_order_));
}

bool Placer::fillInOrder(int level, uint32_t idx, const std::vector<size_t>& order) {
  fill_out_.assign(groups_.size(), {});
  // Groups in order: those whose members others' affinity needs or spread counts first.
  for (size_t step = 0; step < order.size(); ++step) {
    const size_t gi = order[step];
    Group& g = groups_[gi];
    if (gang_terms_) applyGangTerms(level, idx, gi, {order.begin(), order.begin() + step});
    const bool ok =
        g.gang_spread
            ? distributeSpread(level, idx, g, {order.begin(), order.begin() + step}, &fill_out_[gi]) ==
                  g.count
        : g.together_level >= 0 ? distributeTogether(level, idx, g, &fill_out_[gi])
                                : distribute(level, idx, g.count, g, &fill_out_[gi]);
    if (!ok) {
      restoreCaps();
      return false;
    }
    if (step + 1 == order.size()) {
      if (!volumeLimitsHold()) {
        restoreCaps();
        return false;
      }
      break;
    }
    // Reserve on scratch state: later groups see what this group took.
    for (const auto& [pos, k] : fill_out_[gi]) {
      extra_[pos] += g.rep->requests.times(k);
      auto& ports = extra_ports_[pos];
      for (int64_t i = 0; i < k; ++i) {
        ports.insert(ports.end(), g.rep->host_ports.begin(), g.rep->host_ports.end());
      }
    }
    std::vector<size_t> placed;  // the groups placed so far, only when a later group needs them
    for (size_t later_step = step + 1; later_step < order.size(); ++later_step) {
      Group& later = groups_[order[later_step]];
      for (const auto& [pos, res] : extra_) {
        if ((*later.cap)[pos] == 0) continue;
        auto ports = extra_ports_.find(pos);
        int32_t cap = nodeCap(later, topo_.order[pos], &res,
                              ports == extra_ports_.end() ? nullptr : &ports->second);
        const NodeInfo& n = units_.node(pos);
        if (later.csi && cap > 0 && n.volume_limits) {
          if (placed.empty()) placed.assign(order.begin(), order.begin() + static_cast<ptrdiff_t>(step) + 1);
          VolumesAdded added;
          added.by_driver = volumesAddedAt(pos, placed, &added.shared_keys);
          cap = static_cast<int32_t>(std::min<int64_t>(cap, feasible_.volumeLimitRoom(*later.rep, n, &added)));
        }
        (*later.cap)[pos] = cap;
      }
      computePrefix(later);
    }
  }
  restoreCaps();
  return true;
}

int64_t Placer::distributeSpread(int level, uint32_t idx, const Group& g,
                                 const std::vector<size_t>& before,
                                 std::vector<std::pair<uint32_t, int64_t>>* out) const {
  const std::vector<GangSpread>& gang = g.gang_constraints;
  const GangSpread& primary = gang.front();
  // With two, the second is the host's: it caps and floors each node (below).
  const GangSpread* host = gang.size() > 1 ? &gang.back() : nullptr;
  // Members of the groups placed before that the constraints count, by position.
  absl::flat_hash_map<uint32_t, int64_t> counted_primary, counted_host;
  for (size_t gj : before) {
    const Group& other = groups_[gj];
    size_t next = 0;
    for (const auto& [pos, k] : fill_out_[gj]) {
      for (int64_t i = 0; i < k && next < other.members.size(); ++i, ++next) {
        const proto::Pod& pod = request_.members[other.members[next]]->pod();
        if (primary.selects(pod)) ++counted_primary[pos];
        if (host && host->selects(pod)) ++counted_host[pos];
      }
    }
  }
  return spreadInto(g, gang, g.count, *g.cap, counted_primary, counted_host,
                    units_.begin(level, idx), units_.end(level, idx), units_, dominant_, out);
}

std::optional<std::pair<int, uint32_t>> Placer::search() {
  const int ceiling = request_.required_level >= 0 ? request_.required_level : -1;
  const bool single = total_count_ == 1;
  const bool spread = single && options_.single_pod_strategy == SinglePodStrategy::kSpread;
  const Group& main = groups_[0];
  for (int level = levels_; level >= ceiling; --level) {
    struct Candidate {
      int64_t affinity;
      int align;  // the whole gang on this node: alignScore of its main group
      int64_t leftover;
      int64_t free_dom;
      uint32_t idx;
    };
    std::vector<Candidate> candidates;
    auto consider = [&](uint32_t idx) {
      if (!bound_.allows(level, idx) || !unitFits(level, idx)) return;
      int64_t aff = units_.isHost(level) ? preference(main, units_.node(idx)) : 0;
      int align = units_.isHost(level) && main.align
                      ? alignScore(alignedOn(main, units_.node(idx), nullptr), main.count)
                      : 0;
      candidates.push_back(
          Candidate{aff, align, capsum(main, level, idx) - main.count, units_.freeDom(level, idx, dominant_), idx});
    };
    if (level < 0) {
      consider(0);
    } else if (units_.isHost(level)) {
      if (bound_.any()) {
        if (bound_.domain(level) >= 0) consider(static_cast<uint32_t>(bound_.domain(level)));
      } else {
        for (uint32_t p = 0; p < n_; ++p) {
          if ((*main.cap)[p] >= main.count) consider(p);
        }
      }
    } else {
      const auto& domains = topo_.levels[level];
      for (uint32_t d = 0; d < domains.size(); ++d) {
        if (domains[d].value.empty()) continue;  // nodes without the label: not one domain
        consider(d);
      }
    }
    if (candidates.empty()) continue;
    auto better = [&](const Candidate& x, const Candidate& y) {
      if (x.affinity != y.affinity) return x.affinity > y.affinity;
      if (x.align != y.align) return x.align > y.align;
      if (x.leftover != y.leftover) return spread ? x.leftover > y.leftover : x.leftover < y.leftover;
      if (x.free_dom != y.free_dom) return spread ? x.free_dom > y.free_dom : x.free_dom < y.free_dom;
      return x.idx < y.idx;
    };
    if (groups_.size() == 1 && !main.gang_spread && main.together_level < 0) {
      // Homogeneous: a unit whose capacity suffices always fills.
      Candidate best = *std::min_element(candidates.begin(), candidates.end(), better);
      if (units_.isHost(level) && !single && gangFragmentationApplies(main)) {
        // The whole gang fits on one node: among the nodes it would leave as full (the same
        // preference and alignment), the one where it costs others least (gangNodeCost); the
        // fullest first among equals.
        std::vector<Candidate> equal;
        for (const Candidate& c : candidates)
          if (c.affinity == best.affinity && c.align == best.align && c.leftover == best.leftover)
            equal.push_back(c);
        const size_t keep = std::min(equal.size(), kFragmentationCandidates);
        std::partial_sort(equal.begin(), equal.begin() + static_cast<ptrdiff_t>(keep), equal.end(), better);
        std::pair<int64_t, int64_t> best_cost;
        for (size_t k = 0; k < keep; ++k) {
          const std::pair<int64_t, int64_t> cost =
              gangNodeCost(main, units_.node(equal[k].idx), main.count, cache_);
          if (k == 0 || cost < best_cost) {
            best = equal[k];
            best_cost = cost;
          }
        }
      }
      if (fill(level, best.idx)) return std::make_pair(level, best.idx);
      continue;
    }
    std::sort(candidates.begin(), candidates.end(), better);
    for (const Candidate& c : candidates) {
      if (fill(level, c.idx)) return std::make_pair(level, c.idx);
    }
  }
  return std::nullopt;
}

GangPlacement Placer::makePlacement(int level, uint32_t idx) const {
  GangPlacement out;
  out.key = request_.key;
  out.level = level;
  out.assignments.resize(request_.members.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    size_t next = 0;
    for (const auto& [pos, k] : fill_out_[gi]) {
      const std::string& node = units_.node(pos).name;
      for (int64_t i = 0; i < k && next < g.members.size(); ++i, ++next) {
        int m = g.members[next];
        out.assignments[m] = Assignment{request_.members[m]->key, node};
      }
    }
  }
  if (level >= 0 && !units_.isHost(level)) {
    out.level_key = cache_.levels()[level];
    out.domain = topo_.levels[level][idx].value;
  } else if (level >= 0) {
    out.level_key = std::string(kHostnameLevel);
    out.domain = units_.node(idx).name;
  } else {
    std::vector<int32_t> used;
    for (const auto& per_group : fill_out_) {
      for (const auto& [pos, k] : per_group) {
        used.push_back(levels_ > 0 ? topo_.domain[topo_.order[pos]][0] : static_cast<int32_t>(pos));
      }
    }
    std::sort(used.begin(), used.end());
    out.domains_spanned = static_cast<int>(std::unique(used.begin(), used.end()) - used.begin());
    out.level_key = levels_ > 0 ? cache_.levels()[0] : std::string(kHostnameLevel);
  }
  const int preferred = request_.preferred_level;
  out.fell_back = preferred >= 0 && (level < 0 || level < preferred);
  // Alignment as the nodes stand before this gang: per node, the first pods get the best devices.
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    if (!g.align) continue;
    out.gpu_nic_pods += static_cast<int>(g.count);
    for (const auto& [pos, k] : fill_out_[gi]) {
      AlignedCapacity a = alignedOn(g, units_.node(pos), nullptr);
      int64_t pcie = std::min<int64_t>(k, a.pcie);
      out.gpu_nic_pcie += static_cast<int>(pcie);
      out.gpu_nic_pix += static_cast<int>(std::min<int64_t>(k, a.pix));
      out.gpu_nic_numa += static_cast<int>(std::min<int64_t>(k, a.numa) - pcie);
    }
  }
  return out;
}

std::string Placer::needs() const {
  // Groups differing only in constraints (each member's own claim, say) read as one shape.
  std::vector<std::pair<std::string, int>> shapes;
  for (const Group& g : groups_) {
    std::string shape = formatResources(g.rep->requests);
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == shape; });
    if (it == shapes.end()) shapes.emplace_back(std::move(shape), g.count);
    else it->second += g.count;
  }
  if (shapes.size() == 1) {
    return absl::StrCat(shapes[0].second, shapes[0].second == 1 ? " pod" : " pods", " × ",
                        shapes[0].first);
  }
  std::vector<std::string> parts;
  for (const auto& [shape, count] : shapes) parts.push_back(absl::StrCat(count, " × ", shape));
  return absl::StrCat(total_count_, " pods (", absl::StrJoin(parts, " + "), ")");
}

Unschedulable Placer::diagnose(std::string headline_extra) const {
  if (!options_.diagnose) return Unschedulable{};
  Unschedulable u;
  const Group& main = groups_[0];
  const NodeRefusals refusals = refusalsOf(main, cache_, feasible_, request_.required_level);
  const FilterDiagnosis& diag = refusals.diag;
  const int cordoned = refusals.cordoned, not_ready = refusals.not_ready, blocked = refusals.blocked;
  std::vector<std::string> parts;
  const bool single = request_.key.single_pod && total_count_ == 1;
  if (!single) {
    parts.push_back(absl::StrCat("gang ", request_.key.toString(), " needs ", needs()));
    if (!headline_extra.empty()) parts.push_back(std::move(headline_extra));
    int level = request_.required_level >= 0 ? request_.required_level : request_.preferred_level;
    if (level >= 0 && !units_.isHost(level)) {
      int64_t best = -1;
      uint32_t best_idx = 0;
      const auto& domains = topo_.levels[level];
      for (uint32_t d = 0; d < domains.size(); ++d) {
        if (domains[d].value.empty() || !bound_.allows(level, d)) continue;
        int64_t c = capsum(main, level, d);
        if (c > best) {
          best = c;
          best_idx = d;
        }
      }
      const std::string& key = cache_.levels()[level];
      if (best >= 0) {
        parts.push_back(absl::StrCat("the largest ", key, " domain (", key, "=",
                                     domains[best_idx].value, ") can hold ", best));
      } else {
        parts.push_back(absl::StrCat("no ", key, " domain is available"));
      }
    } else if (level >= 0) {
      int64_t best = 0;
      for (uint32_t p = 0; p < n_; ++p) best = std::max<int64_t>(best, (*main.cap)[p]);
      parts.push_back(absl::StrCat("the largest node can hold ", best));
    } else if (n_ > 0) {
      parts.push_back(absl::StrCat("the cluster can hold ", capsum(main, -1, 0)));
    }
    for (const Group& g : groups_) {
      if (!g.gang_spread) continue;
      const GangSpread& c = g.gang_constraints.front();
      const int64_t fit = distributeSpread(-1, 0, g, {}, nullptr);
      if (fit >= g.count) continue;
      if (c.anti_affinity) {
        parts.push_back(absl::StrCat(std::string(kReasonPodAntiAffinity), ": one member per ", c.key,
                                     ", the nodes can take ", fit, " of the ", g.count,
                                     " members that exclude each other"));
      } else {
        parts.push_back(absl::StrCat(std::string(kReasonSpread), ": spread over ", c.key,
                                     " with maxSkew ", c.max_skew, ", the nodes can take ", fit,
                                     " of the ", g.count, " members that count each other"));
      }
    }
    // Every group has room somewhere, so the members' terms toward each other stopped it.
    if (gang_terms_ && n_ > 0 && unitFits(-1, 0)) {
      for (const Group& g : groups_) {
        const std::string like = absl::StrCat("the ", g.count, g.count == 1 ? " member like " : " members like ",
                                              g.rep->key);
        if (!g.needs.empty()) {
          parts.push_back(absl::StrCat(std::string(kReasonPodAffinity), ": ", like, " need room in a ",
                                       absl::StrJoin(g.inter->affinityKeys(), "/"),
                                       " domain holding members their affinity selects"));
        }
        if (g.together_level >= 0) {
          parts.push_back(absl::StrCat(std::string(kReasonPodAffinity), ": ", like, " share one ",
                                       g.inter->affinityKeys().front(), " domain, and none has room for all"));
        }
      }
      for (size_t y = 0; y < groups_.size(); ++y) {
        for (const auto& [x, key] : groups_[y].excludes) {
          if (x < y) continue;
          parts.push_back(absl::StrCat(std::string(kReasonPodAntiAffinity), ": members like ",
                                       groups_[y].rep->key, " and ", groups_[x].rep->key,
                                       " may not share a ", key, " domain"));
        }
      }
    }
    if (cordoned > 0) parts.push_back(absl::StrCat(cordoned, cordoned == 1 ? " node is" : " nodes are", " cordoned"));
    if (not_ready > 0) parts.push_back(absl::StrCat(not_ready, not_ready == 1 ? " node is" : " nodes are", " not ready"));
    if (blocked > 0) {
      parts.push_back(absl::StrCat(blocked, blocked == 1 ? " node is" : " nodes are",
                                   " reserved for other gangs"));
    }
  }
  parts.push_back(diag.message());
  u.message = absl::StrJoin(parts, "; ");
  u.reasons = diag.reasons();
  u.available_nodes = diag.available();
  u.total_nodes = diag.total();
  return u;
}

PlacementResult Placer::run() {
  const int64_t existing =
      static_cast<int64_t>(request_.members.size() + request_.bound.size());
  if (existing < request_.min_member)
    return waitingForMembers(request_.key, existing, request_.min_member);
  if (request_.members.empty()) {
    GangPlacement done;
    done.key = request_.key;
    return done;
  }
  buildGroups();
  if (!unsupported_.empty()) {
    Unschedulable u;
    u.message = absl::StrCat("gang ", request_.key.toString(), ": ", unsupported_);
    return u;
  }
  std::string bound_problem;
  bound_ = BoundScope::resolve(request_, cache_, &bound_problem);
  if (!bound_problem.empty()) {
    for (Group& g : groups_) {
      computeCaps(g);
      computePrefix(g);
    }
    Unschedulable u = diagnose(bound_problem);
    u.evict_bound_members = true;
    return u;
  }
  if (total_count_ == 1 && !bound_.any()) {
    if (auto best = bestNodeForSinglePod(groups_[0], dominant_, cache_, options_, feasible_)) {
      fill_out_.assign(1, {{best->first, 1}});
      GangPlacement placement = makePlacement(levels_, best->first);
      placement.assignments[0].gpu_index = best->second;
      return placement;
    }
    computeCaps(groups_[0]);
    computePrefix(groups_[0]);
    return diagnose("");
  }
  for (Group& g : groups_) {
    computeCaps(g);
    computePrefix(g);
  }
  std::optional<std::pair<int, uint32_t>> found = search();
  if (!found) {
    Unschedulable u = diagnose("");
    u.evict_bound_members = bound_.any();
    return u;
  }
  GangPlacement placement = makePlacement(found->first, found->second);
  MUSTER_LOG_INFO(4, "Gang placement found", "gang", request_.key.toString(), "pods",
                  total_count_, "domain", placement.describe());
  return placement;
}

std::vector<std::string> Placer::reservation() {
  if (request_.members.empty() || n_ == 0) return {};
  buildGroups();
  Group& main = groups_[0];
  computeCaps(main);
  computePrefix(main);
  return reservedNodes(main, *main.cap, *main.pre, total_count_, request_.required_level, units_,
                       cache_, feasible_);
}

}  // namespace

std::string GangPlacement::describe() const {
  if (assignments.empty()) return "nothing to place";
  if (level < 0) {
    return absl::StrCat(domains_spanned, " ", level_key,
                        level_key == kHostnameLevel ? " nodes" : " domains");
  }
  if (level_key == kHostnameLevel) return absl::StrCat("node ", domain);
  return absl::StrCat(level_key, "=", domain);
}

Unschedulable waitingForMembers(const GangKey& key, int64_t existing, int64_t min_member) {
  Unschedulable u;
  u.waiting_for_members = true;
  u.message = absl::StrCat("gang ", key.toString(), " is waiting for members: ", existing, " of ",
                           min_member, " exist");
  return u;
}

namespace {

// Two members of one gang using one ReadWriteOncePod claim can never both run: what to tell.
std::string sharedReadWriteOncePod(const std::vector<PodInfoPtr>& members) {
  absl::flat_hash_map<std::string, const PodInfo*> users;
  for (const PodInfoPtr& m : members) {
    for (const VolumeConstraint& v : m->volumes) {
      if (!v.read_write_once_pod) continue;
      auto [it, fresh] = users.try_emplace(absl::StrCat(m->pod().meta.namespace_, "/", v.claim), m.get());
      if (!fresh) {
        return absl::StrCat("pods ", it->second->key, " and ", m->key, " both use PersistentVolumeClaim ",
                            it->first, ", whose access mode is ReadWriteOncePod; ",
                            av(kReasonReadWriteOncePod));
      }
    }
  }
  return "";
}

// The members' inter-pod terms against each other (scheduler/interpod.h), applied to the request:
// affinity among all members on a level tightens its required level. `run` gets the request to
// place; an unsupported combination is an Unschedulable without running it.
template <class Run>
auto withInterPod(const GangRequest& request, const ClusterCache& cache,
                  const PlacementOptions& options, Run run)
    -> decltype(run(request, GangInterPod{})) {
  GangInterPod inter =
      analyzeGang(request.members, cache, cache.levels(), options.namespace_labels);
  if (inter.unsupported.empty()) {
    auto same_group = [&](size_t i, size_t j) {
      return request.members[i]->constraint_signature == request.members[j]->constraint_signature &&
             inter.group_key[i] == inter.group_key[j];
    };
    inter.unsupported = gangSpread(request.members, same_group, &inter.gang_spread);
  }
  for (size_t i = 0; i < request.members.size() && inter.unsupported.empty(); ++i) {
    // One member per domain of a key and a spread over another key other than the host's: two
    // keys to distribute over, which the placement does not do.
    if (inter.one_per_domain[i].empty() || i >= inter.gang_spread.size()) continue;
    const auto& constraints = request.members[i]->pod().spec.topology_spread_constraints;
    for (size_t c = 0; c < constraints.size() && c < 32; ++c) {
      if ((inter.gang_spread[i] >> c & 1) == 0) continue;
      if (constraints[c].topology_key == vocab::kHostnameLabel) continue;
      inter.unsupported = absl::StrCat(
          "pod ", request.members[i]->key, " has required anti-affinity to other members of its gang on ",
          inter.one_per_domain[i], " and a DoNotSchedule topology spread constraint counting them on ",
          constraints[c].topology_key, "; Muster distributes a gang's members over one key (and ",
          vocab::kHostnameLabel, ")");
    }
  }
  if (inter.unsupported.empty()) inter.unsupported = sharedReadWriteOncePod(request.members);
  if (!inter.unsupported.empty()) {
    Unschedulable u;
    u.message = absl::StrCat("gang ", request.key.toString(), ": ", inter.unsupported);
    if constexpr (std::is_same_v<decltype(run(request, inter)), PlacementResult>) {
      return u;
    } else {
      return {};
    }
  }
  if (inter.required_level > request.required_level) {
    GangRequest tightened = request;
    tightened.required_level = inter.required_level;
    if (tightened.preferred_level >= 0 && tightened.preferred_level < tightened.required_level)
      tightened.preferred_level = -1;
    return run(tightened, inter);
  }
  return run(request, inter);
}

}  // namespace

PlacementResult place(const GangRequest& request, const ClusterCache& cache,
                      const PlacementOptions& options) {
  return withInterPod(request, cache, options, [&](const GangRequest& r, const GangInterPod& inter) {
    Placer placer(r, cache, options, inter);
    return placer.run();
  });
}

std::vector<std::string> planReservation(const GangRequest& request, const ClusterCache& cache,
                                         const PlacementOptions& options) {
  return withInterPod(request, cache, options, [&](const GangRequest& r, const GangInterPod& inter) {
    Placer placer(r, cache, options, inter);
    return placer.reservation();
  });
}

}  // namespace muster::scheduler
