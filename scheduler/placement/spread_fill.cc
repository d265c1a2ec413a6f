#include "scheduler/placement/spread_fill.h"

#include <algorithm>
#include <string_view>

#include "scheduler/placement/scoring.h"

namespace muster::scheduler::placement {

int64_t spreadInto(const GroupShape& g, const std::vector<GangSpread>& gang, int64_t count,
                   const std::vector<int32_t>& capacity,
                   const absl::flat_hash_map<uint32_t, int64_t>& counted_primary,
                   const absl::flat_hash_map<uint32_t, int64_t>& counted_host, uint32_t begin,
                   uint32_t end, const Units& units, ResourceId dominant,
                   std::vector<std::pair<uint32_t, int64_t>>* out) {
  const GangSpread& primary = gang.front();
  const GangSpread* host = gang.size() > 1 ? &gang.back() : nullptr;
  auto countedAt = [](const absl::flat_hash_map<uint32_t, int64_t>& m, uint32_t pos) {
    auto it = m.find(pos);
    return it == m.end() ? int64_t{0} : it->second;
  };
  struct Slot {
    uint32_t pos;
    size_t domain;
    int64_t cap;
    int64_t host_have;  // -1: not an eligible domain of the host's constraint
  };
  std::vector<Slot> slots;
  std::vector<DomainRoom> domains;
  absl::flat_hash_map<std::string_view, size_t> index;
  // Members that exclude each other on a key: a node without it takes any number (kube-scheduler's
  // anti-affinity passes there), after the keyed domains have taken one each.
  const bool loose_ok = primary.anti_affinity && host == nullptr;
  std::vector<Child> loose;
  int64_t loose_room = 0;
  for (uint32_t p = begin; p < end; ++p) {
    const NodeInfo& n = units.node(p);
    auto label = n.labels().find(primary.key);
    if (label == n.labels().end()) {
      if (loose_ok && capacity[p] > 0) {
        loose.push_back(Child{capacity[p], preference(g, n), units.freeDom(units.levels(), p, dominant), p});
        loose_room += capacity[p];
      }
      continue;
    }
    auto [it, added] = index.try_emplace(label->second, domains.size());
    if (added) domains.push_back(DomainRoom{label->second, 0, 0, 0, 0});
    domains[it->second].placed += countedAt(counted_primary, p);
    int64_t host_have = -1;
    if (host) {
      auto h = n.labels().find(host->key);
      auto here = h == n.labels().end() ? host->counts.end() : host->counts.find(h->second);
      if (here != host->counts.end()) host_have = here->second + countedAt(counted_host, p);
    }
    slots.push_back(Slot{p, it->second, capacity[p], host_have});
  }
  // The host's minimum: raising it puts members on every eligible node below it, so every such
  // node must be in the unit with room. One pass per level tried, from today's.
  std::vector<int64_t> caps(slots.size()), floors(slots.size());
  int64_t best = 0;
  int64_t host_placed = 0;  // counted members of the groups before, which can raise it too
  for (const auto& [pos, k] : counted_host) host_placed += k;
  const int64_t host_last =
      host && host->can_raise ? host->min + count + host_placed : (host ? host->min : 0);
  for (int64_t mh = host ? host->min : 0; mh <= host_last; ++mh) {
    for (DomainRoom& d : domains) d.room = d.floor = d.take = 0;
    int64_t outside_below = 0;
    if (host) {
      outside_below = std::lower_bound(host->sorted.begin(), host->sorted.end(), mh) -
                      host->sorted.begin();
    }
    bool feasible = true;
    for (size_t i = 0; i < slots.size() && feasible; ++i) {
      const Slot& s = slots[i];
      int64_t cap = std::max<int64_t>(0, s.cap);
      int64_t floor = 0;
      if (host && s.host_have >= 0) {
        const int64_t own = s.host_have - countedAt(counted_host, s.pos);
        if (own < mh) --outside_below;
        cap = std::min(cap, std::max<int64_t>(0, mh + host->max_skew - s.host_have));
        floor = std::max<int64_t>(0, mh - s.host_have);
        feasible = floor <= cap;
      } else if (host) {
        cap = 0;  // not eligible for the host's constraint: no member may go there
      }
      caps[i] = cap;
      floors[i] = floor;
      domains[s.domain].room += cap;
      domains[s.domain].floor += floor;
    }
    if (!feasible || outside_below > 0) break;
    int64_t placed = planGangSpread(primary, domains, count);
    int64_t rest = 0;  // to the loose nodes
    if (placed < count && loose_room > 0) {
      rest = std::min(loose_room, count - placed);
      if (placed > 0) planGangSpread(primary, domains, placed);  // fills `take` for them
      placed += rest;
    }
    best = std::max(best, placed);
    if (placed < count) continue;
    if (!out) return placed;
    // Per domain: each node its floor, then the rest by the tightest / most room rule.
    std::vector<std::vector<Child>> nodes(domains.size());
    std::vector<int64_t> left(domains.size());
    for (size_t i = 0; i < domains.size(); ++i) left[i] = domains[i].take - domains[i].floor;
    absl::flat_hash_map<uint32_t, int64_t> taken;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (floors[i] > 0) taken[slots[i].pos] += floors[i];
      const int64_t room = caps[i] - floors[i];
      if (room <= 0) continue;
      const NodeInfo& n = units.node(slots[i].pos);
      nodes[slots[i].domain].push_back(Child{room, preference(g, n),
                                             units.freeDom(units.levels(), slots[i].pos, dominant),
                                             slots[i].pos});
    }
    for (size_t i = 0; i < domains.size(); ++i) {
      std::vector<Child>& children = nodes[i];
      sortChildren(children);
      int64_t need = left[i];
      for (size_t start = 0; need > 0 && start < children.size();) {
        if (auto pick = tightestFor(children, start, need); pick != children.end()) {
          taken[pick->idx] += need;
          need = 0;
          break;
        }
        const Child& c = children[start++];
        taken[c.idx] += c.cap;
        need -= c.cap;
      }
    }
    if (rest > 0) {
      sortChildren(loose);
      for (size_t start = 0; rest > 0 && start < loose.size();) {
        if (auto pick = tightestFor(loose, start, rest); pick != loose.end()) {
          taken[pick->idx] += rest;
          break;
        }
        taken[loose[start].idx] += loose[start].cap;
        rest -= loose[start++].cap;
      }
    }
    std::vector<std::pair<uint32_t, int64_t>> sorted(taken.begin(), taken.end());
    std::sort(sorted.begin(), sorted.end());
    out->insert(out->end(), sorted.begin(), sorted.end());
    return placed;
  }
  return best;
}

}  // namespace muster::scheduler::placement
