#include "scheduler/placement/gang_groups.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler::placement {
namespace {

// A weight to order groups: the biggest members are placed first.
std::tuple<int64_t, int64_t, int64_t> sizeKey(const Resources& r) {
  int64_t vendor = 0;
  for (int i = kFirstNamed; i < resourceCount(); ++i) vendor += r.v[i];
  return {vendor, r[kCpu], r[kMemory]};
}

// The inter-pod relations between the groups (needs, excludes, together_level) and the order of a
// fill; a combination it cannot order is left in gang.unsupported.
void relateGroups(PreparedGang& gang, const GangInterPod& inter, const ClusterCache& cache,
                  const PlacementOptions& options, const DeviceResources& devices) {
  std::vector<GangGroup>& groups = gang.groups;
  const size_t k = groups.size();
  const NamespaceLabels& ns = options.namespace_labels;
  // Fractions of GPUs are packed onto a node's GPUs one pod at a time (ClusterCache::assume): a
  // node's room for them is exact for one shape, not for a mix of fractions and whole GPUs.
  const auto usesGpus = [&](const GangGroup& g) {
    return g.rep->gpu_milli > 0 || devices.gpusIn(g.rep->requests) > 0;
  };
  if (k > 1 && std::any_of(groups.begin(), groups.end(), [](const GangGroup& g) { return g.rep->gpu_milli > 0; }) &&
      std::count_if(groups.begin(), groups.end(), usesGpus) > 1) {
    gang.unsupported = absl::StrCat("its members ask for GPUs in more than one way, some for a fraction of "
                                "one (", vocab::kGpuFractionAnnotation, "); Muster places a gang's "
                                "GPU fractions when they are all alike and its other members ask for "
                                "no GPU");
    return;
  }
  for (size_t y = 0; y < k; ++y) {
    GangGroup& g = groups[y];
    const proto::Pod& pod = g.rep->pod();
    for (size_t x = y + 1; x < k; ++x) {
      for (std::string& key : exclusionKeys(pod, groups[x].rep->pod(), ns)) {
        groups[x].excludes.emplace_back(y, key);
        g.excludes.emplace_back(x, std::move(key));
      }
    }
    const size_t first = static_cast<size_t>(g.members.front());
    if (!g.inter || g.inter->affinityKeys().empty() || inter.whole_gang_affinity.size() <= first ||
        inter.whole_gang_affinity[first])
      continue;
    for (size_t x = 0; x < k; ++x)
      if (x != y && matchesAllAffinity(pod, groups[x].rep->pod(), ns)) g.needs.push_back(x);
    if (!g.needs.empty()) {
      g.inter->deferAffinity();
      for (size_t x : g.needs) groups[x].needed_by.push_back(y);
      continue;
    }
    if (g.count < 2 || !g.inter->firstOfGroup()) continue;
    // Its members match their own terms and nothing else does: the first goes anywhere, the
    // others to its domains.
    const std::vector<std::string>& keys = g.inter->affinityKeys();
    const std::string& key = keys.front();
    if (std::any_of(keys.begin(), keys.end(), [&](const std::string& k2) { return k2 != key; })) {
      gang.unsupported = absl::StrCat("pod ", g.rep->key, " has required affinity to the members of its gang "
                                  "like it on more than one key; Muster supports it on one");
      return;
    }
    g.together_level = levelOfKey(cache.levels(), key);
    if (g.together_level < 0) {
      gang.unsupported = absl::StrCat("pod ", g.rep->key, " has required affinity to the members of its gang "
                                  "like it on ", key, ", which is not one of the scheduler's topology "
                                  "levels or ", vocab::kHostnameLabel);
      return;
    }
    if (g.gang_spread) {
      gang.unsupported = absl::StrCat("pod ", g.rep->key, " has required affinity to the members of its gang "
                                  "like it and spreads them too; Muster supports one or the other");
      return;
    }
  }
  // The order: a group after those its affinity needs, and after those its gang spread counts
  // unless they count it too; among the ready ones, groups that do not spread first, then by
  // size (index).
  std::vector<std::vector<size_t>> after(k);  // after[y]: groups placed before y
  std::vector<bool> mutual_spread(k, false);   // spreads counting a group that counts it
  for (size_t y = 0; y < k; ++y) {
    const GangGroup& g = groups[y];
    after[y] = g.needs;
    if (!g.gang_spread) continue;
    for (size_t x = 0; x < k; ++x) {
      if (x == y) continue;
      const proto::Pod& other = groups[x].rep->pod();
      const bool counts = std::any_of(g.gang_constraints.begin(), g.gang_constraints.end(),
                                      [&](const GangSpread& c) { return c.selects(other); });
      if (!counts) continue;
      const GangGroup& o = groups[x];
      const bool mutual = o.gang_spread && std::any_of(o.gang_constraints.begin(), o.gang_constraints.end(),
                                                       [&](const GangSpread& c) { return c.selects(g.rep->pod()); });
      if (!mutual) after[y].push_back(x);
      else mutual_spread[y] = true;
    }
  }
  gang.fill_order.clear();
  std::vector<bool> done(k, false);
  while (gang.fill_order.size() < k) {
    size_t pick = k;
    for (size_t y = 0; y < k; ++y) {
      if (done[y] || !std::all_of(after[y].begin(), after[y].end(), [&](size_t x) { return done[x]; }))
        continue;
      if (pick == k || (groups[pick].gang_spread && !groups[y].gang_spread)) pick = y;
    }
    if (pick == k) {
      std::vector<std::string> names;
      for (size_t y = 0; y < k; ++y)
        if (!done[y]) names.push_back(groups[y].rep->key);
      gang.unsupported = absl::StrCat(
          "the required affinity or topology spread of pods ", absl::StrJoin(names, ", "),
          " needs each other's members placed first; no order of the gang's members satisfies them");
      return;
    }
    done[pick] = true;
    gang.fill_order.push_back(pick);
  }
  // Spreading groups that count each other go in either order; when one fails the other is
  // tried (the first placed does not see the room the second needs).
  std::vector<size_t> slots;
  for (size_t i = 0; i < k; ++i)
    if (groups[gang.fill_order[i]].gang_spread && mutual_spread[gang.fill_order[i]]) slots.push_back(i);
  if (slots.size() >= 2) {
    std::vector<size_t> alt = gang.fill_order;
    for (size_t a = 0, b = slots.size() - 1; a < b; ++a, --b) std::swap(alt[slots[a]], alt[slots[b]]);
    std::vector<bool> seen(k, false);
    bool valid = true;
    for (size_t y : alt) {
      valid &= std::all_of(after[y].begin(), after[y].end(), [&](size_t x) { return seen[x]; });
      seen[y] = true;
    }
    if (valid) gang.alt_order = std::move(alt);
  }
  for (const GangGroup& g : groups) gang.gang_terms |= !g.needs.empty() || !g.excludes.empty() || g.together_level >= 0;
}

}  // namespace

PreparedGang prepareGang(const GangRequest& request, const GangInterPod& inter,
                         const ClusterCache& cache, const PlacementOptions& options,
                         const DeviceResources& devices, bool align_required) {
  PreparedGang gang;
  std::vector<GangGroup>& groups = gang.groups;
  const auto& members = request.members;
  for (int i = 0; i < static_cast<int>(members.size()); ++i) {
    const PodInfo& p = *members[i];
    GangGroup* found = nullptr;
    for (GangGroup& g : groups) {
      if (g.rep->constraint_signature == p.constraint_signature &&
          inter.group_key[g.members.front()] == inter.group_key[i]) {
        found = &g;
        break;
      }
    }
    if (!found) {
      GangGroup g;
      static_cast<GroupShape&>(g) =
          shapeOf(p, cache, options, devices, inter.one_per_node[i], align_required);
      groups.push_back(std::move(g));
      found = &groups.back();
    }
    found->members.push_back(i);
    ++found->count;
  }
  for (GangGroup& g : groups) {
    const size_t first = static_cast<size_t>(g.members.front());
    const uint32_t mask = first < inter.gang_spread.size() ? inter.gang_spread[first] : 0;
    if (mask != 0) {
      g.spread = SpreadFilter::prepare(*g.rep, cache, mask);
      if (g.spread) g.gang_constraints = g.spread->gang();
    }
    if (first < inter.one_per_domain.size() && !inter.one_per_domain[first].empty()) {
      GangSpread a;
      a.key = inter.one_per_domain[first];
      a.max_skew = 1;
      a.can_raise = false;
      a.anti_affinity = true;
      for (NodeId id : cache.topology().order) {
        const NodeInfo& n = cache.node(id);
        if (auto it = n.labels().find(a.key); it != n.labels().end()) a.counts.try_emplace(it->second, 0);
      }
      for (size_t k = 0; k < a.counts.size(); ++k) a.sorted.push_back(0);
      g.gang_constraints.insert(g.gang_constraints.begin(), std::move(a));
    }
    g.gang_spread = !g.gang_constraints.empty();
  }
  std::stable_sort(groups.begin(), groups.end(), [](const GangGroup& a, const GangGroup& b) {
    return sizeKey(a.rep->requests) > sizeKey(b.rep->requests);
  });
  relateGroups(gang, inter, cache, options, devices);
  gang.total_count = static_cast<int64_t>(members.size());
  if (!groups.empty()) gang.dominant = dominantResource(groups[0].rep->requests);
  return gang;
}

}  // namespace muster::scheduler::placement
