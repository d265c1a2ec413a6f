#include "topology/model/affinity.h"

#include <algorithm>
#include <set>

namespace muster::topology {
namespace {

bool isFreeGpu(const FreeDevices* free, int32_t index) {
  return free == nullptr ||
         std::find(free->gpus.begin(), free->gpus.end(), index) != free->gpus.end();
}

bool isFreeNic(const FreeDevices* free, const std::string& name) {
  return free == nullptr ||
         std::find(free->rdma_nics.begin(), free->rdma_nics.end(), name) != free->rdma_nics.end();
}

}  // namespace

std::string_view alignmentName(Alignment alignment) {
  if (alignment == Alignment::kNotApplicable) return "NotApplicable";
  if (alignment == Alignment::kInsufficient) return "Insufficient";
  return groupKindName(static_cast<GroupKind>(alignment));
}

DeviceLocality::DeviceLocality(const Topology& topology) {
  for (const Gpu& g : topology.gpus) gpus_.push_back(g.index);
  for (const RdmaNic& n : topology.rdma_nics) nics_.push_back(n.name);
  std::set<int32_t> known_gpus(gpus_.begin(), gpus_.end());
  std::set<std::string> known_nics(nics_.begin(), nics_.end());
  for (const LocalityGroup& lg : topology.groups) {
    Group g;
    for (int32_t i : lg.gpus) {
      if (known_gpus.contains(i)) g.gpus.push_back(i);
    }
    for (const std::string& n : lg.rdma_nics) {
      if (known_nics.contains(n)) g.rdma_nics.push_back(n);
    }
    levels_[static_cast<int>(lg.kind)].push_back(std::move(g));
  }
}

int32_t DeviceLocality::freeGpus(const FreeDevices* free) const {
  int32_t n = 0;
  for (int32_t g : gpus_) n += isFreeGpu(free, g) ? 1 : 0;
  return n;
}

int32_t DeviceLocality::freeNics(const FreeDevices* free) const {
  int32_t n = 0;
  for (const std::string& name : nics_) n += isFreeNic(free, name) ? 1 : 0;
  return n;
}

std::vector<DeviceLocality::Group> DeviceLocality::pairableGroups(GroupKind level,
                                                                  const FreeDevices* free) const {
  std::vector<Group> out;
  for (const Group& g : levels_[static_cast<int>(level)]) {
    Group f;
    for (int32_t i : g.gpus) {
      if (isFreeGpu(free, i)) f.gpus.push_back(i);
    }
    for (const std::string& n : g.rdma_nics) {
      if (isFreeNic(free, n)) f.rdma_nics.push_back(n);
    }
    if (!f.gpus.empty() && !f.rdma_nics.empty()) out.push_back(std::move(f));
  }
  return out;
}

// Choose a set S of pairable groups with |S| <= min(g, r), sum of GPUs >= g and sum of NICs >= r,
// as small as possible (then each group gives at least one GPU and one NIC). DP over groups:
// best[c][a] = most NICs (capped at r) reachable with c groups whose GPUs (capped at g) sum to a.
std::optional<DeviceSelection> DeviceLocality::selectAt(GroupKind level,
                                                        const DeviceRequest& request,
                                                        const FreeDevices* free) const {
  const int32_t g = request.gpus, r = request.rdma_nics;
  if (g <= 0 || r <= 0) return std::nullopt;
  std::vector<Group> groups = pairableGroups(level, free);
  const int32_t n = static_cast<int32_t>(groups.size());
  const int32_t k = std::min({g, r, n});
  if (k == 0) return std::nullopt;
  // best[i][c][a] over the first i groups; -1 = unreachable. Sizes are tiny (n, k, g ≤ a few 10s).
  std::vector<std::vector<std::vector<int32_t>>> best(
      n + 1, std::vector<std::vector<int32_t>>(k + 1, std::vector<int32_t>(g + 1, -1)));
  best[0][0][0] = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t gi = static_cast<int32_t>(groups[i].gpus.size());
    const int32_t ni = static_cast<int32_t>(groups[i].rdma_nics.size());
    for (int32_t c = 0; c <= k; ++c) {
      for (int32_t a = 0; a <= g; ++a) {
        const int32_t cur = best[i][c][a];
        if (cur < 0) continue;
        best[i + 1][c][a] = std::max(best[i + 1][c][a], cur);
        if (c < k) {
          const int32_t a2 = std::min(g, a + gi);
          const int32_t v2 = std::min(r, cur + ni);
          best[i + 1][c + 1][a2] = std::max(best[i + 1][c + 1][a2], v2);
        }
      }
    }
  }
  int32_t chosen_c = -1;
  for (int32_t c = 1; c <= k; ++c) {
    if (best[n][c][g] >= r) {
      chosen_c = c;
      break;
    }
  }
  if (chosen_c < 0) return std::nullopt;
  // Walk back to find which groups were taken.
  std::vector<int32_t> taken;
  int32_t c = chosen_c, a = g, v = best[n][chosen_c][g];
  for (int32_t i = n; i > 0; --i) {
    if (best[i - 1][c][a] >= v) continue;  // reachable without group i-1
    const int32_t gi = static_cast<int32_t>(groups[i - 1].gpus.size());
    const int32_t ni = static_cast<int32_t>(groups[i - 1].rdma_nics.size());
    // Find a predecessor state (c-1, a0) with min(g, a0+gi) == a and min(r, v0+ni) >= v.
    bool found = false;
    for (int32_t a0 = 0; a0 <= g && !found; ++a0) {
      const int32_t v0 = best[i - 1][c - 1][a0];
      if (v0 < 0 || std::min(g, a0 + gi) != a || std::min(r, v0 + ni) < v) continue;
      taken.push_back(i - 1);
      c -= 1;
      a = a0;
      v = v0;
      found = true;
    }
    if (!found) return std::nullopt;  // cannot happen: the DP reached (c, a, v) somehow
  }
  std::reverse(taken.begin(), taken.end());
  // One GPU and one NIC from each taken group, then fill up in group order.
  DeviceSelection sel;
  std::vector<size_t> gpu_used(taken.size(), 0), nic_used(taken.size(), 0);
  for (size_t t = 0; t < taken.size(); ++t) {
    sel.gpus.push_back(groups[taken[t]].gpus[0]);
    sel.rdma_nics.push_back(groups[taken[t]].rdma_nics[0]);
    gpu_used[t] = nic_used[t] = 1;
  }
  for (size_t t = 0; t < taken.size() && static_cast<int32_t>(sel.gpus.size()) < g; ++t) {
    const auto& list = groups[taken[t]].gpus;
    while (gpu_used[t] < list.size() && static_cast<int32_t>(sel.gpus.size()) < g) {
      sel.gpus.push_back(list[gpu_used[t]++]);
    }
  }
  for (size_t t = 0; t < taken.size() && static_cast<int32_t>(sel.rdma_nics.size()) < r; ++t) {
    const auto& list = groups[taken[t]].rdma_nics;
    while (nic_used[t] < list.size() && static_cast<int32_t>(sel.rdma_nics.size()) < r) {
      sel.rdma_nics.push_back(list[nic_used[t]++]);
    }
  }
  std::sort(sel.gpus.begin(), sel.gpus.end());
  std::sort(sel.rdma_nics.begin(), sel.rdma_nics.end());
  sel.alignment = alignmentOf(level);
  return sel;
}

bool DeviceLocality::alignedAt(GroupKind level, const DeviceRequest& request,
                               const FreeDevices* free) const {
  return selectAt(level, request, free).has_value();
}

bool DeviceLocality::fitsInOneGroup(GroupKind level, const DeviceRequest& request,
                                    const FreeDevices* free) const {
  for (const Group& g : levels_[static_cast<int>(level)]) {
    int32_t ng = 0, nn = 0;
    for (int32_t i : g.gpus) ng += isFreeGpu(free, i) ? 1 : 0;
    for (const std::string& n : g.rdma_nics) nn += isFreeNic(free, n) ? 1 : 0;
    if (ng >= request.gpus && nn >= request.rdma_nics) return true;
  }
  return false;
}

Alignment DeviceLocality::bestAlignment(const DeviceRequest& request,
                                        const FreeDevices* free) const {
  if (freeGpus(free) < request.gpus || freeNics(free) < request.rdma_nics) {
    return Alignment::kInsufficient;
  }
  if (request.gpus <= 0 || request.rdma_nics <= 0) return Alignment::kNotApplicable;
  for (int k = 0; k < static_cast<int>(GroupKind::kNode); ++k) {
    if (alignedAt(static_cast<GroupKind>(k), request, free)) return static_cast<Alignment>(k);
  }
  return Alignment::kNode;
}

std::optional<DeviceSelection> DeviceLocality::select(const DeviceRequest& request,
                                                      const FreeDevices* free) const {
  const Alignment best = bestAlignment(request, free);
  if (best == Alignment::kInsufficient) return std::nullopt;
  if (best < Alignment::kNode) return selectAt(static_cast<GroupKind>(best), request, free);
  DeviceSelection sel;
  sel.alignment = best;
  for (int32_t g : gpus_) {
    if (static_cast<int32_t>(sel.gpus.size()) < request.gpus && isFreeGpu(free, g)) {
      sel.gpus.push_back(g);
    }
  }
  for (const std::string& n : nics_) {
    if (static_cast<int32_t>(sel.rdma_nics.size()) < request.rdma_nics && isFreeNic(free, n)) {
      sel.rdma_nics.push_back(n);
    }
  }
  return sel;
}

int32_t DeviceLocality::pairedGpus(GroupKind level) const {
  int32_t n = 0;
  for (const Group& g : levels_[static_cast<int>(level)]) {
    if (!g.rdma_nics.empty()) n += static_cast<int32_t>(g.gpus.size());
  }
  return n;
}

}  // namespace muster::topology
