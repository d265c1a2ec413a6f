#include "scheduler/placement/reservation.h"

#include <algorithm>

#include "scheduler/filter.h"

namespace muster::scheduler::placement {
namespace {

// How many of the group's pods each position could take once its node is empty of other pods.
std::vector<int32_t> eventualCapacity(const GroupShape& main, const Units& units,
                                      const ClusterCache& cache, const NodeFeasibility& feasible) {
  const Topology& topo = cache.topology();
  std::vector<int32_t> eventual(units.nodes());
  for (uint32_t p = 0; p < units.nodes(); ++p) {
    NodeId id = topo.order[p];
    NodeInfo empty = cache.node(id);
    empty.requested = Resources{};
    empty.used_ports.clear();
    int32_t c = 0;
    if (!feasible.blocked(id) && filterStatic(*main.rep, empty).ok() &&
        !feasible.lacksRequiredLabel(id)) {
      c = static_cast<int32_t>(capacityOn(main.req, empty, nullptr));
      if (main.has_ports && c > 1) c = 1;
      if (c > 0 && main.align && feasible.alignRequired()) {
        c = std::min(c, empty.devices ? empty.devices->alignedCapacity(main.dev, 0, 0).numa : 0);
      }
    }
    eventual[p] = c;
  }
  return eventual;
}

}  // namespace

std::vector<std::string> reservedNodes(const GroupShape& main, const std::vector<int32_t>& cap,
                                       const std::vector<int64_t>& pre, int64_t total_count,
                                       int required_level, const Units& units,
                                       const ClusterCache& cache, const NodeFeasibility& feasible) {
  std::vector<std::string> out;
  const Topology& topo = cache.topology();
  const uint32_t n = units.nodes();
  // Current capacity (cap, pre), and capacity once each node is empty of other pods ("eventual").
  const std::vector<int32_t> eventual = eventualCapacity(main, units, cache, feasible);
  std::vector<int64_t> eventual_pre(n + 1, 0);
  for (uint32_t p = 0; p < n; ++p) eventual_pre[p + 1] = eventual_pre[p] + eventual[p];
  const int ceiling = required_level >= 0 ? required_level : -1;
  for (int level = units.levels(); level >= ceiling; --level) {
    int64_t best_now = -1;
    uint32_t best = 0;
    auto consider = [&](uint32_t idx) {
      uint32_t b = units.begin(level, idx), e = units.end(level, idx);
      if (eventual_pre[e] - eventual_pre[b] < total_count) return;
      int64_t now = pre[e] - pre[b];
      if (now > best_now) {
        best_now = now;
        best = idx;
      }
    };
    if (level < 0) {
      consider(0);
    } else if (units.isHost(level)) {
      for (uint32_t p = 0; p < n; ++p) consider(p);
    } else {
      for (uint32_t d = 0; d < topo.levels[level].size(); ++d) {
        if (!topo.levels[level][d].value.empty()) consider(d);
      }
    }
    if (best_now < 0) continue;
    std::vector<uint32_t> positions;
    for (uint32_t p = units.begin(level, best); p < units.end(level, best); ++p) {
      if (eventual[p] > 0) positions.push_back(p);
    }
    std::sort(positions.begin(), positions.end(), [&](uint32_t a, uint32_t b) {
      if (cap[a] != cap[b]) return cap[a] > cap[b];
      if (eventual[a] != eventual[b]) return eventual[a] > eventual[b];
      return a < b;
    });
    int64_t room = 0;
    for (uint32_t p : positions) {
      if (room >= total_count) break;
      out.push_back(units.node(p).name);
      room += eventual[p];
    }
    return out;
  }
  return out;
}

}  // namespace muster::scheduler::placement
