#include "scheduler/placement.h"

#include <algorithm>
#include <map>
#include <optional>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/log.h"
#include "proto/vocabulary.h"
#include "scheduler/filter.h"
#include "scheduler/interpod.h"
#include "scheduler/placement/diagnosis.h"
#include "scheduler/placement/domains.h"
#include "scheduler/placement/feasibility.h"
#include "scheduler/placement/fill.h"
#include "scheduler/placement/gang_groups.h"
#include "scheduler/placement/gang_shape.h"
#include "scheduler/placement/reservation.h"
#include "scheduler/placement/scoring.h"
#include "scheduler/placement/single_pod.h"
#include "scheduler/spread.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

using placement::alignScore;
using placement::bestNodeForSinglePod;
using placement::BoundScope;
using placement::DeviceResources;
using placement::FillGroup;
using placement::GangFill;
using placement::gangNodeCost;
using placement::kFragmentationCandidates;
using placement::NodeFeasibility;
using placement::NodeRefusals;
using placement::preference;
using placement::prepareGang;
using placement::refusalsOf;
using placement::reservedNodes;
using placement::Units;

// One gang's placement: prepares its groups and fill (placement/gang_groups.h, fill.h), walks the
// units from the host level up for the lowest level with a unit that holds the whole gang, the
// tightest by the ranking of placement/scoring.h, and returns the GangPlacement or the verdict.
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
  void buildGroups();
  std::optional<std::pair<int, uint32_t>> search();
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
  std::optional<GangFill> fill_;    // the groups and the fill (placement/fill.h), by buildGroups
  BoundScope bound_;                // where the bound members are (placement/domains.h)
};

void Placer::buildGroups() {
  fill_.emplace(prepareGang(request_, inter_, cache_, options_, devices_, align_required_), request_,
                cache_, options_, feasible_, units_);
}

std::optional<std::pair<int, uint32_t>> Placer::search() {
  const int ceiling = request_.required_level >= 0 ? request_.required_level : -1;
  const bool single = fill_->totalCount() == 1;
  const bool spread = single && options_.single_pod_strategy == SinglePodStrategy::kSpread;
  const FillGroup& main = fill_->groups()[0];
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
      if (!bound_.allows(level, idx) || !fill_->unitFits(level, idx)) return;
      int64_t aff = units_.isHost(level) ? preference(main, units_.node(idx)) : 0;
      int align = units_.isHost(level) && main.align
                      ? alignScore(feasible_.alignedOn(main, units_.node(idx), nullptr), main.count)
                      : 0;
      candidates.push_back(
          Candidate{aff, align, fill_->capsum(main, level, idx) - main.count, units_.freeDom(level, idx, fill_->dominant()), idx});
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
    if (fill_->groups().size() == 1 && !main.gang_spread && main.together_level < 0) {
      // Homogeneous: a unit whose capacity suffices always fills.
      Candidate best = *std::min_element(candidates.begin(), candidates.end(), better);
      if (units_.isHost(level) && !single && fill_->gangFragmentationApplies(main)) {
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
      if (fill_->fill(level, best.idx)) return std::make_pair(level, best.idx);
      continue;
    }
    std::sort(candidates.begin(), candidates.end(), better);
    for (const Candidate& c : candidates) {
      if (fill_->fill(level, c.idx)) return std::make_pair(level, c.idx);
    }
  }
  return std::nullopt;
}

GangPlacement Placer::makePlacement(int level, uint32_t idx) const {
  GangPlacement out;
  out.key = request_.key;
  out.level = level;
  out.assignments.resize(request_.members.size());
  for (size_t gi = 0; gi < fill_->groups().size(); ++gi) {
    const FillGroup& g = fill_->groups()[gi];
    size_t next = 0;
    for (const auto& [pos, k] : fill_->out()[gi]) {
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
    for (const auto& per_group : fill_->out()) {
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
  for (size_t gi = 0; gi < fill_->groups().size(); ++gi) {
    const FillGroup& g = fill_->groups()[gi];
    if (!g.align) continue;
    out.gpu_nic_pods += static_cast<int>(g.count);
    for (const auto& [pos, k] : fill_->out()[gi]) {
      AlignedCapacity a = feasible_.alignedOn(g, units_.node(pos), nullptr);
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
  for (const FillGroup& g : fill_->groups()) {
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
  return absl::StrCat(fill_->totalCount(), " pods (", absl::StrJoin(parts, " + "), ")");
}

Unschedulable Placer::diagnose(std::string headline_extra) const {
  if (!options_.diagnose) return Unschedulable{};
  Unschedulable u;
  const FillGroup& main = fill_->groups()[0];
  const NodeRefusals refusals = refusalsOf(main, cache_, feasible_, request_.required_level);
  const FilterDiagnosis& diag = refusals.diag;
  const int cordoned = refusals.cordoned, not_ready = refusals.not_ready, blocked = refusals.blocked;
  std::vector<std::string> parts;
  const bool single = request_.key.single_pod && fill_->totalCount() == 1;
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
        int64_t c = fill_->capsum(main, level, d);
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
      parts.push_back(absl::StrCat("the cluster can hold ", fill_->capsum(main, -1, 0)));
    }
    for (const FillGroup& g : fill_->groups()) {
      if (!g.gang_spread) continue;
      const GangSpread& c = g.gang_constraints.front();
      const int64_t fit = fill_->spreadFit(g);
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
    if (fill_->gangTerms() && n_ > 0 && fill_->unitFits(-1, 0)) {
      for (const FillGroup& g : fill_->groups()) {
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
      for (size_t y = 0; y < fill_->groups().size(); ++y) {
        for (const auto& [x, key] : fill_->groups()[y].excludes) {
          if (x < y) continue;
          parts.push_back(absl::StrCat(std::string(kReasonPodAntiAffinity), ": members like ",
                                       fill_->groups()[y].rep->key, " and ", fill_->groups()[x].rep->key,
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
  if (!fill_->unsupported().empty()) {
    Unschedulable u;
    u.message = absl::StrCat("gang ", request_.key.toString(), ": ", fill_->unsupported());
    return u;
  }
  std::string bound_problem;
  bound_ = BoundScope::resolve(request_, cache_, &bound_problem);
  if (!bound_problem.empty()) {
    fill_->computeAllCaps();
    Unschedulable u = diagnose(bound_problem);
    u.evict_bound_members = true;
    return u;
  }
  if (fill_->totalCount() == 1 && !bound_.any()) {
    if (auto best = bestNodeForSinglePod(fill_->groups()[0], fill_->dominant(), cache_, options_, feasible_)) {
      fill_->place(best->first);
      GangPlacement placement = makePlacement(levels_, best->first);
      placement.assignments[0].gpu_index = best->second;
      return placement;
    }
    fill_->computeCaps(0);
    return diagnose("");
  }
  fill_->computeAllCaps();
  std::optional<std::pair<int, uint32_t>> found = search();
  if (!found) {
    Unschedulable u = diagnose("");
    u.evict_bound_members = bound_.any();
    return u;
  }
  GangPlacement placement = makePlacement(found->first, found->second);
  MUSTER_LOG_INFO(4, "Gang placement found", "gang", request_.key.toString(), "pods",
                  fill_->totalCount(), "domain", placement.describe());
  return placement;
}

std::vector<std::string> Placer::reservation() {
  if (request_.members.empty() || n_ == 0) return {};
  buildGroups();
  fill_->computeCaps(0);
  const FillGroup& main = fill_->groups()[0];
  return reservedNodes(main, *main.cap, *main.pre, fill_->totalCount(), request_.required_level, units_,
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
