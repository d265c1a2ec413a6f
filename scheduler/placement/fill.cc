#include "scheduler/placement/fill.h"

#include <algorithm>

#include "scheduler/placement/spread_fill.h"

namespace muster::scheduler::placement {
namespace {

// Scratch buffers reused across calls on a thread: no allocation per node in the hot path.
struct Scratch {
  std::vector<std::vector<int32_t>> caps;
  std::vector<std::vector<int64_t>> pres;
};
thread_local Scratch tls_scratch;

}  // namespace

GangFill::GangFill(PreparedGang gang, const GangRequest& request, const ClusterCache& cache,
                   const PlacementOptions& options, const NodeFeasibility& feasible, const Units& units)
    : request_(request),
      cache_(cache),
      options_(options),
      topo_(cache.topology()),
      levels_(static_cast<int>(cache.levels().size())),
      n_(static_cast<uint32_t>(topo_.order.size())),
      feasible_(feasible),
      units_(units),
      dominant_(gang.dominant),
      total_count_(gang.total_count),
      fill_order_(std::move(gang.fill_order)),
      alt_order_(std::move(gang.alt_order)),
      gang_terms_(gang.gang_terms),
      unsupported_(std::move(gang.unsupported)) {
  groups_.reserve(gang.groups.size());
  for (GangGroup& g : gang.groups) {
    FillGroup group;
    static_cast<GangGroup&>(group) = std::move(g);
    groups_.push_back(std::move(group));
  }
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

void GangFill::computeCaps(size_t gi) {
  computeCapsOf(groups_[gi]);
  computePrefix(groups_[gi]);
}

void GangFill::computeAllCaps() {
  for (FillGroup& g : groups_) {
    computeCapsOf(g);
    computePrefix(g);
  }
}

absl::flat_hash_map<std::string, int64_t> GangFill::volumesAddedAt(
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

bool GangFill::volumeLimitsHold() const {
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

void GangFill::computeCapsIn(FillGroup& g, int level, uint32_t idx) {
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

void GangFill::computeCapsOf(FillGroup& g) {
  if (levels_ == 0) {
    std::vector<int32_t>& cap = *g.cap;
    for (uint32_t p = 0; p < n_; ++p) cap[p] = nodeCap(g, topo_.order[p], nullptr, nullptr);
    return;
  }
  for (uint32_t d = 0; d < topo_.levels[0].size(); ++d) computeCapsIn(g, 0, d);
}

void GangFill::computePrefix(FillGroup& g) {
  std::vector<int64_t>& pre = *g.pre;
  const std::vector<int32_t>& cap = *g.cap;
  pre[0] = 0;
  for (uint32_t p = 0; p < n_; ++p) pre[p + 1] = pre[p] + cap[p];
}

bool GangFill::unitFits(int level, uint32_t idx) const {
  for (const FillGroup& g : groups_) {
    if (capsum(g, level, idx) < g.count) return false;
  }
  if (groups_.size() > 1 && units_.isHost(level)) {
    // Everything on one node: the summed requests must fit together.
    Resources total;
    for (const FillGroup& g : groups_) total += g.rep->requests.times(g.count);
    if (!fitsIn(total, units_.node(idx).free())) return false;
  }
  return true;
}

bool GangFill::distribute(int level, uint32_t idx, int64_t need, FillGroup& g,
                        GroupOut* out) {
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

bool GangFill::distributeAligned(uint32_t b, uint32_t e, int64_t need, FillGroup& g,
                               GroupOut* out) {
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

void GangFill::restoreCaps() {
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
    FillGroup& g = groups_[gi];
    if (extra_.empty() && !cut_groups.contains(gi)) continue;
    for (const auto& [pos, res] : extra_) (*g.cap)[pos] = nodeCap(g, topo_.order[pos], nullptr, nullptr);
    computePrefix(g);
  }
  extra_.clear();
  extra_ports_.clear();
}

void GangFill::applyGangTerms(int level, uint32_t idx, size_t gi, const std::vector<size_t>& before) {
  FillGroup& g = groups_[gi];
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
    const FillGroup& dep = groups_[y];
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

bool GangFill::distributeTogether(int level, uint32_t idx, FillGroup& g,
                                GroupOut* out) {
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

bool GangFill::fill(int level, uint32_t idx) {
  return fillInOrder(level, idx, fill_order_) ||
         (!alt_order_.empty() && fillInOrder(level, idx, alt_order_));
}

bool GangFill::fillInOrder(int level, uint32_t idx, const std::vector<size_t>& order) {
  fill_out_.assign(groups_.size(), {});
  // Groups in order: those whose members others' affinity needs or spread counts first.
  for (size_t step = 0; step < order.size(); ++step) {
    const size_t gi = order[step];
    FillGroup& g = groups_[gi];
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
      FillGroup& later = groups_[order[later_step]];
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

int64_t GangFill::distributeSpread(int level, uint32_t idx, const FillGroup& g,
                                 const std::vector<size_t>& before,
                                 GroupOut* out) const {
  const std::vector<GangSpread>& gang = g.gang_constraints;
  const GangSpread& primary = gang.front();
  // With two, the second is the host's: it caps and floors each node (below).
  const GangSpread* host = gang.size() > 1 ? &gang.back() : nullptr;
  // Members of the groups placed before that the constraints count, by position.
  absl::flat_hash_map<uint32_t, int64_t> counted_primary, counted_host;
  for (size_t gj : before) {
    const FillGroup& other = groups_[gj];
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

}  // namespace muster::scheduler::placement
