#include "scheduler/preemption.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/log.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

// A candidate and where its pods are.
struct Candidate {
  VictimUnit unit;
  std::vector<std::pair<NodeId, Resources>> placed;  // per pod: node and requests
  bool pdb = false;                                   // a PodDisruptionBudget would refuse
};

int compareCost(const std::vector<const VictimUnit*>& a, const std::vector<const VictimUnit*>& b) {
  auto priorities = [](const std::vector<const VictimUnit*>& s) {
    std::vector<int32_t> p;
    p.reserve(s.size());
    for (const VictimUnit* u : s) p.push_back(u->priority);
    std::sort(p.begin(), p.end(), std::greater<>());
    return p;
  };
  std::vector<int32_t> pa = priorities(a), pb = priorities(b);
  for (size_t i = 0; i < pa.size() && i < pb.size(); ++i) {
    if (pa[i] != pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  if (pa.size() != pb.size()) return pa.size() < pb.size() ? -1 : 1;
  auto sum = [](const std::vector<const VictimUnit*>& s, double VictimUnit::*field) {
    double total = 0;
    for (const VictimUnit* u : s) total += u->*field;
    return total;
  };
  for (double VictimUnit::*field :
       {&VictimUnit::gpu_seconds, &VictimUnit::cpu_seconds, &VictimUnit::running_seconds}) {
    double x = sum(a, field), y = sum(b, field);
    if (x != y) return x < y ? -1 : 1;
  }
  auto keys = [](const std::vector<const VictimUnit*>& s) {
    std::vector<GangKey> k;
    for (const VictimUnit* u : s) k.push_back(u->key);
    std::sort(k.begin(), k.end());
    return k;
  };
  std::vector<GangKey> ka = keys(a), kb = keys(b);
  if (ka != kb) return ka < kb ? -1 : 1;
  return 0;
}

Resources clampedFreeOf(const NodeInfo& n) {
  Resources f;
  for (int i = 0; i < kMaxResources; ++i) f.v[i] = std::max<int64_t>(0, n.freeOf(i));
  return f;
}

// Suspends and resumes candidates' pods on the cache; everything is resumed on destruction.
class Simulation {
 public:
  Simulation(ClusterCache& cache, const std::vector<Candidate>& candidates)
      : cache_(cache), candidates_(candidates), suspended_(candidates.size(), false) {}
  ~Simulation() {
    for (size_t i = 0; i < suspended_.size(); ++i) set(i, false);
  }
  void set(size_t i, bool suspend) {
    if (suspended_[i] == suspend) return;
    suspended_[i] = suspend;
    for (const std::string& pod : candidates_[i].unit.pods) {
      absl::Status s = suspend ? cache_.suspend(pod) : cache_.resume(pod);
      if (!s.ok()) MUSTER_LOG_ERROR("Preemption simulation", "error", s.ToString());
    }
  }
  // Exactly the candidates in `chosen` suspended.
  void only(const std::vector<size_t>& chosen) {
    std::vector<bool> want(suspended_.size(), false);
    for (size_t i : chosen) want[i] = true;
    for (size_t i = 0; i < want.size(); ++i) set(i, want[i]);
  }

 private:
  ClusterCache& cache_;
  const std::vector<Candidate>& candidates_;
  std::vector<bool> suspended_;
};

// A place where the gang must fit: a domain (positions [begin, end) of the topology order), a node,
// or the whole cluster.
struct Scope {
  uint32_t begin = 0;
  uint32_t end = 0;
  Resources free;                        // summed free of its nodes
  std::vector<size_t> candidates;        // indices into the candidate list, cheapest first
  std::vector<Resources> freed;          // per candidate (same order): its requests in the scope
  std::vector<const VictimUnit*> estimate;  // the cheapest prefix that passes the sum check
  bool feasible_by_sum = false;
};

class Chooser {
 public:
  Chooser(const GangRequest& request, const PreemptionRequest& preemption, ClusterCache& cache,
          const PlacementOptions& options)
      : request_(request), preemption_(preemption), cache_(cache), options_(options) {
    for (const PodInfoPtr& m : request.members) need_ += m->requests;
  }

  PreemptionResult run() {
    std::vector<VictimUnit> units = preemptionCandidates(request_, preemption_, cache_);
    if (units.empty()) return NoPreemption{};  // nothing to say: no candidate at all
    // Index pods by node for relevance.
    absl::flat_hash_map<std::string_view, size_t> unit_of_pod;
    all_.reserve(units.size());
    for (VictimUnit& u : units) {
      Candidate c;
      c.unit = std::move(u);
      c.pdb = preemption_.pdb_refuses && preemption_.pdb_refuses(c.unit);
      all_.push_back(std::move(c));
    }
    for (size_t i = 0; i < all_.size(); ++i)
      for (const std::string& pod : all_[i].unit.pods) unit_of_pod.emplace(pod, i);
    cache_.forEachPlacedPodEntry([&](std::string_view key, const PlacedPod&, NodeId node,
                                     const Resources& requests, bool) {
      if (auto it = unit_of_pod.find(key); it != unit_of_pod.end())
        all_[it->second].placed.emplace_back(node, requests);
    });
    // First without the units a PodDisruptionBudget protects; then, only to say so, with them.
    if (auto plan = search(false)) return *std::move(plan);
    bool any_pdb = std::any_of(all_.begin(), all_.end(), [](const Candidate& c) { return c.pdb; });
    if (any_pdb) {
      if (auto plan = search(true)) {
        std::vector<std::string> names;
        for (const VictimUnit& v : plan->victims) names.push_back(v.key.toString());
        return none(absl::StrCat("only preempting gangs a PodDisruptionBudget protects (",
                                 absl::StrJoin(names, ", "),
                                 ") would make room; waiting until their budget allows it"),
                    true);
      }
    }
    return none("preempting every lower-priority gang it may would still not make room", false);
  }

 private:
  NoPreemption none(std::string why, bool pdb) const {
    return NoPreemption{absl::StrCat("preemption: ", why), pdb};
  }

  // The scopes of one phase: `level` -1 is the whole cluster, levels_ (levelCount()-1) the host.
  std::vector<Scope> scopesAt(int level, bool with_pdb) const {
    const Topology& topo = cache_.topology();
    const int configured = static_cast<int>(cache_.levels().size());
    std::vector<Scope> scopes;
    absl::flat_hash_map<uint32_t, size_t> by_key;  // domain index or position → scope
    auto scopeOf = [&](NodeId node) -> std::optional<uint32_t> {
      if (!cache_.findNode(cache_.node(node).name)) return std::nullopt;
      if (level < 0) return 0;
      if (level >= configured) return topo.position[node];
      const Domain& d = topo.levels[level][topo.domain[node][level]];
      if (d.value.empty()) return std::nullopt;  // nodes without the label: no domain
      return static_cast<uint32_t>(topo.domain[node][level]);
    };
    for (size_t i = 0; i < all_.size(); ++i) {
      const Candidate& c = all_[i];
      if (c.pdb && !with_pdb) continue;
      for (const auto& [node, requests] : c.placed) {
        std::optional<uint32_t> key = scopeOf(node);
        if (!key) continue;
        auto [it, inserted] = by_key.emplace(*key, scopes.size());
        if (inserted) {
          Scope s;
          if (level < 0) {
            s.begin = 0;
            s.end = static_cast<uint32_t>(topo.order.size());
            for (NodeId id : topo.order) s.free += clampedFreeOf(cache_.node(id));
          } else if (level >= configured) {
            s.begin = *key;
            s.end = *key + 1;
            s.free = clampedFreeOf(cache_.node(node));
          } else {
            const Domain& d = topo.levels[level][*key];
            s.begin = d.begin;
            s.end = d.end;
            s.free = d.free;
          }
          scopes.push_back(std::move(s));
        }
        Scope& s = scopes[it->second];
        auto pos = std::find(s.candidates.begin(), s.candidates.end(), i);
        if (pos == s.candidates.end()) {
          s.candidates.push_back(i);
          s.freed.push_back(requests);
        } else {
          s.freed[pos - s.candidates.begin()] += requests;
        }
      }
    }
    for (Scope& s : scopes) {
      // Cheapest first (freed follows).
      std::vector<size_t> order(s.candidates.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return compareCost({&all_[s.candidates[a]].unit}, {&all_[s.candidates[b]].unit}) < 0;
      });
      std::vector<size_t> candidates;
      std::vector<Resources> freed;
      for (size_t o : order) {
        candidates.push_back(s.candidates[o]);
        freed.push_back(s.freed[o]);
      }
      s.candidates = std::move(candidates);
      s.freed = std::move(freed);
      Resources room = s.free;
      for (size_t j = 0; j < s.candidates.size(); ++j) {
        s.estimate.push_back(&all_[s.candidates[j]].unit);
        room += s.freed[j];
        if (fitsIn(need_, room)) {
          s.feasible_by_sum = true;
          break;
        }
      }
    }
    std::erase_if(scopes, [](const Scope& s) { return !s.feasible_by_sum; });
    std::sort(scopes.begin(), scopes.end(), [](const Scope& a, const Scope& b) {
      int c = compareCost(a.estimate, b.estimate);
      return c != 0 ? c < 0 : a.begin < b.begin;
    });
    return scopes;
  }

  std::optional<PreemptionPlan> search(bool with_pdb) {
    const int host = static_cast<int>(cache_.levels().size());  // the host level's index
    std::vector<std::pair<int, int>> phases;  // (scope level, required level for the simulation)
    const int total = static_cast<int>(request_.members.size() + request_.bound.size());
    if (request_.required_level >= 0) {
      phases.emplace_back(request_.required_level, request_.required_level);
    } else if (request_.preferred_level >= 0) {
      phases.emplace_back(request_.preferred_level, request_.preferred_level);
      phases.emplace_back(-1, -1);
    } else if (total == 1) {
      phases.emplace_back(host, -1);
    } else {
      phases.emplace_back(-1, -1);
    }
    for (auto [level, required] : phases) {
      GangRequest sim = request_;
      sim.required_level = required;
      std::vector<Scope> scopes = scopesAt(level, with_pdb);
      for (const Scope& scope : scopes) {
        if (best_ && compareCost({&all_[scope.candidates.front()].unit}, bestUnits()) >= 0)
          continue;  // even its cheapest candidate alone costs more than the best so far
        if (best_ && calls_ >= preemption_.limits.place_calls) break;
        searchScope(sim, scope);
      }
      if (best_) break;
    }
    if (!best_) return std::nullopt;
    PreemptionPlan plan;
    plan.placement = best_placement_;
    for (size_t i : best_->chosen) plan.victims.push_back(all_[i].unit);
    std::sort(plan.victims.begin(), plan.victims.end(),
              [](const VictimUnit& a, const VictimUnit& b) { return compareCost({&a}, {&b}) < 0; });
    plan.place_calls = calls_;
    best_.reset();
    return plan;
  }

  struct Found {
    std::vector<size_t> chosen;
  };

  std::vector<const VictimUnit*> unitsOf(const std::vector<size_t>& chosen) const {
    std::vector<const VictimUnit*> out;
    for (size_t i : chosen) out.push_back(&all_[i].unit);
    return out;
  }
  std::vector<const VictimUnit*> bestUnits() const { return unitsOf(best_->chosen); }

  // place() with exactly `chosen` suspended.
  std::optional<GangPlacement> fits(Simulation& sim, const GangRequest& request,
                                    const std::vector<size_t>& chosen) {
    ++calls_;
    sim.only(chosen);
    PlacementResult r = place(request, cache_, options_);
    if (auto* p = std::get_if<GangPlacement>(&r)) return std::move(*p);
    return std::nullopt;
  }

  bool sumFits(const Scope& scope, const std::vector<size_t>& local) const {
    Resources room = scope.free;
    for (size_t j : local) room += scope.freed[j];
    return fitsIn(need_, room);
  }

  void offer(std::vector<size_t> chosen, GangPlacement placement) {
    if (best_ && compareCost(unitsOf(chosen), bestUnits()) >= 0) return;
    best_ = Found{std::move(chosen)};
    best_placement_ = std::move(placement);
  }

  void searchScope(const GangRequest& request, const Scope& scope) {
    Simulation sim(cache_, all_);
    const size_t k = scope.candidates.size();
    auto global = [&](const std::vector<size_t>& local) {
      std::vector<size_t> out;
      for (size_t j : local) out.push_back(scope.candidates[j]);
      return out;
    };
    std::vector<size_t> everything(k);
    std::iota(everything.begin(), everything.end(), 0);
    // Not even all of them: nothing here will do.
    if (!fits(sim, request, global(everything))) return;
    if (k <= static_cast<size_t>(preemption_.limits.exact_units)) {
      // Every subset, cheapest first; the first that fits is this scope's optimum.
      std::vector<uint32_t> masks;
      for (uint32_t m = 1; m < (1u << k); ++m) {
        std::vector<size_t> local;
        for (size_t j = 0; j < k; ++j)
          if (m & (1u << j)) local.push_back(j);
        if (sumFits(scope, local)) masks.push_back(m);
      }
      std::vector<std::vector<const VictimUnit*>> costs(1u << k);
      for (uint32_t m : masks) {
        for (size_t j = 0; j < k; ++j)
          if (m & (1u << j)) costs[m].push_back(&all_[scope.candidates[j]].unit);
      }
      std::sort(masks.begin(), masks.end(),
                [&](uint32_t a, uint32_t b) { return compareCost(costs[a], costs[b]) < 0; });
      for (uint32_t m : masks) {
        if (best_ && compareCost(costs[m], bestUnits()) >= 0) return;
        if (best_ && calls_ >= preemption_.limits.place_calls) return;
        std::vector<size_t> local;
        for (size_t j = 0; j < k; ++j)
          if (m & (1u << j)) local.push_back(j);
        if (auto placed = fits(sim, request, global(local))) {
          offer(global(local), *std::move(placed));
          return;
        }
      }
      return;
    }
    // Greedy: the shortest cheapest-first prefix that fits (galloping, then bisecting; fitting is
    // monotone in the prefix), then every victim it does not need dropped, dearest first.
    size_t lo = 0;  // the longest prefix known not to fit
    size_t hi = k;  // the shortest known to fit
    size_t len = 1;
    while (len < k && !sumFits(scope, prefix(len))) ++len;
    std::optional<GangPlacement> at_hi;
    for (size_t step = 1; len < k; step *= 2) {
      if (auto p = fits(sim, request, global(prefix(len)))) {
        hi = len;
        at_hi = std::move(p);
        break;
      }
      lo = len;
      len = std::min(k, len + step);
    }
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      if (auto p = fits(sim, request, global(prefix(mid)))) {
        hi = mid;
        at_hi = std::move(p);
      } else {
        lo = mid;
      }
    }
    std::vector<size_t> chosen = prefix(hi);
    if (!at_hi) at_hi = fits(sim, request, global(chosen));
    if (!at_hi) return;  // not monotone after all (inter-pod terms): give up on this scope
    // Victims with no pod on a node the placement uses are not needed: that placement stays
    // valid without them.
    auto used = [&](const GangPlacement& p) {
      absl::flat_hash_map<std::string_view, bool> nodes;
      for (const Assignment& a : p.assignments) nodes.emplace(a.node, true);
      return nodes;
    };
    {
      auto nodes = used(*at_hi);
      std::vector<size_t> kept;
      for (size_t j : chosen) {
        bool needed = false;
        for (const std::string& n : all_[scope.candidates[j]].unit.nodes) needed |= nodes.contains(n);
        if (needed) kept.push_back(j);
      }
      if (kept.size() != chosen.size()) {
        if (auto p = fits(sim, request, global(kept))) {
          chosen = std::move(kept);
          at_hi = std::move(p);
        }
      }
    }
    for (size_t r = chosen.size(); r-- > 0;) {
      if (calls_ >= preemption_.limits.place_calls + static_cast<int>(k)) break;
      std::vector<size_t> without = chosen;
      without.erase(without.begin() + static_cast<ptrdiff_t>(r));
      if (without.empty() || !sumFits(scope, without)) continue;
      if (auto p = fits(sim, request, global(without))) {
        chosen = std::move(without);
        at_hi = std::move(p);
      }
    }
    offer(global(chosen), *std::move(at_hi));
  }

  static std::vector<size_t> prefix(size_t n) {
    std::vector<size_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }

  const GangRequest& request_;
  const PreemptionRequest& preemption_;
  ClusterCache& cache_;
  const PlacementOptions& options_;
  Resources need_;
  std::vector<Candidate> all_;
  std::optional<Found> best_;
  GangPlacement best_placement_;
  int calls_ = 0;
};

}  // namespace

bool mayPreempt(const proto::Pod& pod) { return pod.spec.preemption_policy != "Never"; }

bool cheaper(const std::vector<const VictimUnit*>& a, const std::vector<const VictimUnit*>& b) {
  return compareCost(a, b) < 0;
}

std::vector<VictimUnit> preemptionCandidates(const GangRequest& request,
                                             const PreemptionRequest& preemption,
                                             const ClusterCache& cache) {
  struct Acc {
    VictimUnit unit;
    absl::Time newest = absl::InfinitePast();
    bool excluded = false;
  };
  absl::flat_hash_map<GangKey, Acc> units;
  const std::optional<ResourceId> gpu = findResource(vocab::kGpuResource);
  const std::optional<ResourceId> amd = findResource(vocab::kAmdGpuResource);
  std::vector<std::string> own;
  for (const auto& [pod, node] : request.bound) own.push_back(pod);
  cache.forEachPlacedPodEntry([&](std::string_view key, const PlacedPod& placed, NodeId node,
                                  const Resources& requests, bool assumed) {
    Acc& a = units[placed.unit];
    if (a.unit.pods.empty()) {
      a.unit.key = placed.unit;
      a.unit.priority = placed.priority;
    }
    a.unit.priority = std::max(a.unit.priority, placed.priority);
    a.unit.pods.emplace_back(key);
    a.unit.nodes.push_back(cache.node(node).name);
    a.newest = std::max(a.newest, placed.started);
    if (assumed || placed.terminating || placed.preempted) a.excluded = true;
    const double running =
        placed.started == absl::InfinitePast()
            ? 0
            : std::max(0.0, absl::ToDoubleSeconds(preemption.now - placed.started));
    const int64_t gpus = (gpu ? requests[*gpu] : 0) + (amd ? requests[*amd] : 0);
    a.unit.gpu_seconds += static_cast<double>(gpus) * running;
    a.unit.cpu_seconds += static_cast<double>(requests[kCpu]) / 1000.0 * running;
    a.unit.running_seconds += running;
  });
  std::vector<VictimUnit> out;
  for (auto& [key, a] : units) {
    if (a.excluded || key == request.key) continue;
    if (a.unit.priority >= preemption.priority) continue;
    if (a.unit.priority >= preemption.protected_priority) continue;
    if (preemption.cooling_down && preemption.cooling_down(key)) continue;
    const int64_t min_runtime =
        preemption.min_runtime_seconds ? preemption.min_runtime_seconds(a.unit.priority) : 0;
    if (min_runtime > 0 &&
        (a.newest == absl::InfinitePast() || preemption.now - a.newest < absl::Seconds(min_runtime)))
      continue;
    bool ours = false;
    for (const std::string& p : a.unit.pods) ours |= std::find(own.begin(), own.end(), p) != own.end();
    if (ours) continue;
    std::sort(a.unit.pods.begin(), a.unit.pods.end());
    std::sort(a.unit.nodes.begin(), a.unit.nodes.end());
    a.unit.nodes.erase(std::unique(a.unit.nodes.begin(), a.unit.nodes.end()), a.unit.nodes.end());
    out.push_back(std::move(a.unit));
  }
  std::sort(out.begin(), out.end(),
            [](const VictimUnit& a, const VictimUnit& b) { return a.key < b.key; });
  return out;
}

int PreemptionPlan::victimPods() const {
  int n = 0;
  for (const VictimUnit& v : victims) n += static_cast<int>(v.pods.size());
  return n;
}

std::vector<std::string> PreemptionPlan::victimNodes() const {
  std::vector<std::string> nodes;
  for (const VictimUnit& v : victims) nodes.insert(nodes.end(), v.nodes.begin(), v.nodes.end());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

std::string PreemptionPlan::describe() const {
  std::vector<std::string> nodes = victimNodes();
  constexpr size_t kShown = 8;
  std::string shown = absl::StrJoin(nodes.begin(), nodes.begin() + std::min(nodes.size(), kShown), ", ");
  if (nodes.size() > kShown) absl::StrAppend(&shown, " and ", nodes.size() - kShown, " more");
  const int pods = victimPods();
  return absl::StrCat(pods, pods == 1 ? " pod" : " pods", " of ", victims.size(),
                      victims.size() == 1 ? " gang" : " gangs", " on ", shown);
}

PreemptionResult choosePreemption(const GangRequest& request, const PreemptionRequest& preemption,
                                  ClusterCache& cache, const PlacementOptions& options) {
  Chooser chooser(request, preemption, cache, options);
  return chooser.run();
}

}  // namespace muster::scheduler
