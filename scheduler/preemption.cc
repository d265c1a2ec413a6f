#include "scheduler/preemption.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/log.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

// A candidate: its cost figures (unit.pods and unit.nodes are filled only for the chosen) and
// its pods as the cache's per-gang index holds them (stable while the chooser runs: suspend()
// does not change the index).
struct Candidate {
  VictimUnit unit;
  const std::vector<UnitMember>* members = nullptr;
  bool pdb = false;  // a PodDisruptionBudget would refuse
};

// The units that may be victims, without their pods' names (see preemptionCandidates).
std::vector<Candidate> collect(const GangRequest& request, const PreemptionRequest& preemption,
                               const ClusterCache& cache) {
  const std::optional<ResourceId> gpu = findResource(vocab::kGpuResource);
  const std::optional<ResourceId> amd = findResource(vocab::kAmdGpuResource);
  std::vector<Candidate> out;
  cache.forEachUnit([&](const GangKey& key, const std::vector<UnitMember>& members) {
    if (key == request.key || members.empty()) return;
    int32_t priority = std::numeric_limits<int32_t>::min();
    absl::Time newest = absl::InfinitePast();
    for (const UnitMember& m : members) {
      if (m.busy) return;
      priority = std::max(priority, m.priority);
      newest = std::max(newest, m.started);
    }
    if (priority >= preemption.protected_priority) return;
    if (preemption.eligible ? !preemption.eligible(key, members, priority)
                            : priority >= preemption.priority)
      return;
    if (preemption.cooling_down && preemption.cooling_down(key)) return;
    const int64_t min_runtime =
        preemption.min_runtime_seconds ? preemption.min_runtime_seconds(priority) : 0;
    if (min_runtime > 0 &&
        (newest == absl::InfinitePast() || preemption.now - newest < absl::Seconds(min_runtime)))
      return;
    for (const UnitMember& m : members)
      for (const auto& [pod, node] : request.bound)
        if (m.pod == pod) return;  // the preemptor's own bound members
    Candidate c;
    c.unit.key = key;
    c.unit.priority = priority;
    c.members = &members;
    int64_t cpu_milli_seconds = 0;
    for (const UnitMember& m : members) {
      const int64_t running =
          m.started == absl::InfinitePast()
              ? 0
              : std::max<int64_t>(0, absl::ToInt64Seconds(preemption.now - m.started));
      const int64_t gpus = (gpu ? (*m.requests)[*gpu] : 0) + (amd ? (*m.requests)[*amd] : 0);
      c.unit.gpu_seconds = saturatingAdd(c.unit.gpu_seconds, saturatingMul(gpus, running));
      cpu_milli_seconds = saturatingAdd(cpu_milli_seconds, saturatingMul((*m.requests)[kCpu], running));
      c.unit.running_seconds = saturatingAdd(c.unit.running_seconds, running);
    }
    c.unit.cpu_seconds = cpu_milli_seconds / 1000;
    c.pdb = preemption.pdb_refuses && preemption.pdb_refuses(key, members);
    out.push_back(std::move(c));
  });
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.unit.key < b.unit.key; });
  return out;
}

// The placed pods already on their way out for another's benefit, whose room the preemptor may
// count on: every pod of a lower-priority unit Muster has marked preempted (finishPreemptions
// evicts the rest of it), and lower-priority pods being deleted. Nothing is gained by choosing
// them again, and counting them as present would make a decision taken after a restart, midway
// through the evictions, choose victims beyond those already going.
std::vector<std::string> draining(const GangRequest& request, const PreemptionRequest& preemption,
                                  const ClusterCache& cache) {
  std::vector<std::string> out;
  cache.forEachUnit([&](const GangKey& key, const std::vector<UnitMember>& members) {
    if (key == request.key) return;
    int32_t priority = std::numeric_limits<int32_t>::min();
    bool marked = false, terminating = false;
    for (const UnitMember& m : members) {
      priority = std::max(priority, m.priority);
      marked |= m.preempted;
      terminating |= m.terminating;
    }
    if (!marked && !terminating) return;  // (before eligible: a tenancy hook is not free)
    if (preemption.eligible ? !preemption.eligible(key, members, priority)
                            : priority >= preemption.priority)
      return;
    for (const UnitMember& m : members)
      if (marked || m.terminating) out.push_back(m.pod);
  });
  return out;
}

// Fills in the unit's pods and nodes (sorted).
void describeMembers(const ClusterCache& cache, const std::vector<UnitMember>& members,
                     VictimUnit* unit) {
  unit->pods.clear();
  unit->nodes.clear();
  for (const UnitMember& m : members) {
    unit->pods.push_back(m.pod);
    unit->nodes.push_back(cache.node(m.node).name);
  }
  std::sort(unit->pods.begin(), unit->pods.end());
  std::sort(unit->nodes.begin(), unit->nodes.end());
  unit->nodes.erase(std::unique(unit->nodes.begin(), unit->nodes.end()), unit->nodes.end());
}

// The cost of a set of victims, for comparison (see choosePreemption): its priorities from the
// highest down, the work lost, the running time, the keys.
struct Cost {
  std::vector<int32_t> priorities;  // descending
  int64_t gpu = 0, cpu = 0, run = 0;
  std::vector<const GangKey*> keys;  // sorted

  explicit Cost(const std::vector<const VictimUnit*>& units) {
    priorities.reserve(units.size());
    keys.reserve(units.size());
    for (const VictimUnit* u : units) {
      priorities.push_back(u->priority);
      gpu += u->gpu_seconds;
      cpu += u->cpu_seconds;
      run += u->running_seconds;
      keys.push_back(&u->key);
    }
    std::sort(priorities.begin(), priorities.end(), std::greater<>());
    std::sort(keys.begin(), keys.end(), [](const GangKey* a, const GangKey* b) { return *a < *b; });
  }
};

int compare(const Cost& a, const Cost& b, bool keys_too = true) {
  const auto& pa = a.priorities;
  const auto& pb = b.priorities;
  for (size_t i = 0; i < pa.size() && i < pb.size(); ++i) {
    if (pa[i] != pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  if (pa.size() != pb.size()) return pa.size() < pb.size() ? -1 : 1;
  for (auto [x, y] : {std::pair{a.gpu, b.gpu}, std::pair{a.cpu, b.cpu}, std::pair{a.run, b.run}}) {
    if (x != y) return x < y ? -1 : 1;
  }
  if (!keys_too) return 0;
  for (size_t i = 0; i < a.keys.size() && i < b.keys.size(); ++i) {
    if (*a.keys[i] != *b.keys[i]) return *a.keys[i] < *b.keys[i] ? -1 : 1;
  }
  return 0;
}

int compareCost(const std::vector<const VictimUnit*>& a, const std::vector<const VictimUnit*>& b,
                bool keys_too = true) {
  return compare(Cost(a), Cost(b), keys_too);
}

// One unit against another, as compare() of the two singletons.
bool unitCheaper(const VictimUnit& a, const VictimUnit& b) {
  return std::tie(a.priority, a.gpu_seconds, a.cpu_seconds, a.running_seconds, a.key) <
         std::tie(b.priority, b.gpu_seconds, b.cpu_seconds, b.running_seconds, b.key);
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
    for (const UnitMember& m : *candidates_[i].members) {
      absl::Status s = suspend ? cache_.suspend(m.pod) : cache_.resume(m.pod);
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
  bool confined = true;  // the gang must land inside (see scopesAt)
  mutable int64_t base_capacity = -1;  // members that fit in it (or anywhere) now; -1: not yet
  Resources free;                        // summed free of its nodes
  std::vector<size_t> candidates;        // indices into the candidate list, cheapest first
  std::vector<Resources> freed;          // per candidate (same order): its requests in the scope
  std::vector<const VictimUnit*> estimate;  // the cheapest prefix that passes the sum check
  bool feasible_by_sum = false;
  // A lower bound on the cost of any set that fits here: the candidates without which even all
  // the others fail the sum check, plus (when none of them has it) one unit of the highest
  // priority the cheapest prefix needs - no set of lower priorities passes the sum check.
  std::vector<size_t> necessary;  // indices into all_
  std::unique_ptr<Cost> lower_bound;    // of bound()
  std::unique_ptr<Cost> estimate_cost;  // of estimate
  std::unique_ptr<VictimUnit> floor_unit = std::make_unique<VictimUnit>();  // priority only
  bool with_floor = false;
  std::vector<const VictimUnit*> bound(const std::vector<Candidate>& all) const {
    std::vector<const VictimUnit*> out;
    for (size_t i : necessary) out.push_back(&all[i].unit);
    if (with_floor) out.push_back(floor_unit.get());
    return out;
  }
};

class Chooser {
 public:
  Chooser(const GangRequest& request, const PreemptionRequest& preemption, ClusterCache& cache,
          const PlacementOptions& options)
      : request_(request), preemption_(preemption), cache_(cache), options_(options) {
    options_.diagnose = false;
    for (const PodInfoPtr& m : request.members) need_ += m->requests;
    homogeneous_ = !request.members.empty() && request.bound.empty();
    for (const PodInfoPtr& m : request.members)
      homogeneous_ &= m->requests == request.members.front()->requests;
    if (homogeneous_) per_pod_ = request.members.front()->requests;
    count_ = static_cast<int64_t>(request.members.size());
  }

  ~Chooser() {
    for (const std::string& pod : drained_) {
      absl::Status s = cache_.resume(pod);
      if (!s.ok()) MUSTER_LOG_ERROR("Preemption simulation", "error", s.ToString());
    }
  }

  PreemptionResult run() {
    // What earlier preemptions are freeing counts as free throughout; when that is enough, the
    // plan has no victims and the gang waits for it.
    for (std::string& pod : draining(request_, preemption_, cache_)) {
      absl::Status s = cache_.suspend(pod);
      if (s.ok()) drained_.push_back(std::move(pod));
      else MUSTER_LOG_ERROR("Preemption simulation", "error", s.ToString());
    }
    if (!drained_.empty()) {
      ++calls_;
      PlacementResult r = place(request_, cache_, options_);
      if (auto* p = std::get_if<GangPlacement>(&r)) {
        PreemptionPlan plan;
        plan.placement = std::move(*p);
        plan.place_calls = calls_;
        return plan;
      }
    }
    all_ = collect(request_, preemption_, cache_);
    if (all_.empty()) return NoPreemption{};  // nothing to say: no candidate at all
    if (homogeneous_) (void)freeBefore(0);  // now, while nothing is suspended
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
    return none(preemption_.eligible || preemption_.allowed
                    ? "no set of gangs it may take (within the queues' quotas and fair shares) "
                      "makes room"
                    : "preempting every lower-priority gang it may would still not make room",
                false);
  }

 private:
  NoPreemption none(std::string why, bool pdb) const {
    return NoPreemption{absl::StrCat("preemption: ", why), pdb};
  }

  // The scopes of one phase: `level` -1 is the whole cluster, levels_ (levelCount()-1) the host.
  // `confined`: the gang must land inside the scope (a required level's domain, a single pod's
  // node); otherwise it may also use room outside, which the sum checks then count.
  std::vector<Scope> scopesAt(int level, bool with_pdb, bool confined) const {
    const Topology& topo = cache_.topology();
    const int configured = static_cast<int>(cache_.levels().size());
    std::vector<Scope> scopes;
    // Domain index or position → index into scopes + 1 (0: none yet).
    std::vector<uint32_t> by_key(level < 0 ? 1
                                 : level >= configured ? topo.order.size()
                                                       : topo.levels[level].size(),
                                 0);
    auto scopeOf = [&](NodeId node) -> std::optional<uint32_t> {
      if (!cache_.node(node).present) return std::nullopt;
      if (level < 0) return 0;
      if (level >= configured) return topo.position[node];
      const Domain& d = topo.levels[level][topo.domain[node][level]];
      if (d.value.empty()) return std::nullopt;  // nodes without the label: no domain
      return static_cast<uint32_t>(topo.domain[node][level]);
    };
    for (size_t i = 0; i < all_.size(); ++i) {
      const Candidate& c = all_[i];
      if (c.pdb && !with_pdb) continue;
      for (const UnitMember& m : *c.members) {
        const NodeId node = m.node;
        const Resources& requests = *m.requests;
        std::optional<uint32_t> key = scopeOf(node);
        if (!key) continue;
        uint32_t& slot = by_key[*key];
        if (slot == 0) {
          slot = static_cast<uint32_t>(scopes.size()) + 1;
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
        Scope& s = scopes[slot - 1];
        // A candidate's members come one after another.
        if (s.candidates.empty() || s.candidates.back() != i) {
          s.candidates.push_back(i);
          s.freed.push_back(requests);
        } else {
          s.freed.back() += requests;
        }
      }
    }
    for (Scope& s : scopes) s.confined = confined || level < 0;
    if (!confined && level >= 0) {
      Resources everywhere;
      for (NodeId id : topo.order) everywhere += clampedFreeOf(cache_.node(id));
      for (Scope& s : scopes) s.free = everywhere;
    }
    for (Scope& s : scopes) {
      // Cheapest first (freed follows).
      std::vector<size_t> order(s.candidates.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return unitCheaper(all_[s.candidates[a]].unit, all_[s.candidates[b]].unit);
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
      if (!s.feasible_by_sum) continue;
      Resources all_room = s.free;
      for (const Resources& f : s.freed) all_room += f;
      int32_t top = std::numeric_limits<int32_t>::min();
      for (size_t j = 0; j < s.candidates.size(); ++j) {
        Resources without = all_room;
        without -= s.freed[j];
        if (!fitsIn(need_, without)) {
          s.necessary.push_back(s.candidates[j]);
          top = std::max(top, all_[s.candidates[j]].unit.priority);
        }
      }
      s.floor_unit->priority = s.estimate.back()->priority;
      s.with_floor = top < s.floor_unit->priority;
    }
    std::erase_if(scopes, [](const Scope& s) { return !s.feasible_by_sum; });
    for (Scope& s : scopes) {
      s.lower_bound = std::make_unique<Cost>(s.bound(all_));
      s.estimate_cost = std::make_unique<Cost>(s.estimate);
    }
    std::sort(scopes.begin(), scopes.end(), [](const Scope& a, const Scope& b) {
      int c = compare(*a.lower_bound, *b.lower_bound, false);
      if (c == 0) c = compare(*a.estimate_cost, *b.estimate_cost);
      return c != 0 ? c < 0 : a.begin < b.begin;
    });
    return scopes;
  }

  // The lowest configured level with a domain whose nodes' allocatable could hold the gang;
  // -1 when none (or no levels).
  int lowestHoldingLevel() const {
    const Topology& topo = cache_.topology();
    for (int level = static_cast<int>(topo.levels.size()) - 1; level >= 0; --level) {
      for (const Domain& d : topo.levels[level]) {
        if (d.value.empty()) continue;
        Resources allocatable;
        for (uint32_t p = d.begin; p < d.end; ++p) allocatable += cache_.node(topo.order[p]).allocatable;
        if (fitsIn(need_, allocatable)) return level;
      }
    }
    return -1;
  }

  std::optional<PreemptionPlan> search(bool with_pdb) {
    const int host = static_cast<int>(cache_.levels().size());  // the host level's index
    struct Phase {
      int level;           // scopes: -1 the cluster, host the nodes, else that level's domains
      int required;        // the required level of the simulation
      bool only_if_needed;  // skipped after a phase found a set, unless its search is exhaustive
    };
    std::vector<Phase> phases;
    const int total = static_cast<int>(request_.members.size() + request_.bound.size());
    if (request_.required_level >= 0) {
      phases.push_back({request_.required_level, request_.required_level, false});
    } else if (request_.preferred_level >= 0) {
      phases.push_back({request_.preferred_level, request_.preferred_level, false});
      phases.push_back({-1, -1, false});
    } else if (total == 1) {
      phases.push_back({host, -1, false});
    } else {
      // Victims in one domain of the lowest level that could hold the gang first (the search stays
      // local, and the gang spans as little as it would without preemption); the whole cluster
      // when that finds nothing, or when it is small enough to search exhaustively.
      if (int level = lowestHoldingLevel(); level >= 0) phases.push_back({level, -1, false});
      phases.push_back({-1, -1, true});
    }
    for (const Phase& phase : phases) {
      GangRequest sim = request_;
      sim.required_level = phase.required;
      const bool confined = phase.required >= 0 || total == 1;
      if (best_ && phase.only_if_needed &&
          all_.size() > static_cast<size_t>(preemption_.limits.exact_units))
        break;
      std::vector<Scope> scopes = scopesAt(phase.level, with_pdb, confined);
      if (best_ && phase.only_if_needed &&
          (scopes.size() != 1 ||
           scopes[0].candidates.size() > static_cast<size_t>(preemption_.limits.exact_units)))
        break;
      for (const Scope& scope : scopes) {
        // Scopes come cheapest bound first: once one cannot beat the best, none after it can.
        if (best_ && compare(*scope.lower_bound, *best_cost_, false) > 0) break;
        if (best_ && calls_ >= preemption_.limits.place_calls) break;
        // Every subset while few have been enumerated so far (always on small clusters).
        const size_t subsets = size_t{1} << std::min<size_t>(scope.candidates.size(), 20);
        const bool exhaustive = subsets_ + subsets <= static_cast<size_t>(preemption_.limits.subsets);
        if (exhaustive) subsets_ += subsets;
        searchScope(sim, scope, exhaustive);
      }
      if (best_ && !phase.only_if_needed && phase.level >= 0 && request_.preferred_level >= 0) break;
    }
    if (!best_) return std::nullopt;
    PreemptionPlan plan;
    plan.placement = best_placement_;
    for (size_t i : best_->chosen) {
      plan.victims.push_back(all_[i].unit);
      describeMembers(cache_, *all_[i].members, &plan.victims.back());
    }
    std::sort(plan.victims.begin(), plan.victims.end(),
              [](const VictimUnit& a, const VictimUnit& b) { return unitCheaper(a, b); });
    plan.place_calls = calls_;
    best_.reset();
    best_cost_.reset();
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

  // place() with exactly `chosen` suspended; nullopt without a simulation when `allowed` refuses
  // the set (`check_allowed` false: whether the room would suffice at all).
  std::optional<GangPlacement> fits(Simulation& sim, const GangRequest& request,
                                    const std::vector<size_t>& chosen, bool check_allowed = true) {
    if (check_allowed && preemption_.allowed) {
      std::vector<const std::vector<UnitMember>*> units;
      units.reserve(chosen.size());
      for (size_t i : chosen) units.push_back(all_[i].members);
      if (!preemption_.allowed(units)) return std::nullopt;
    }
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

  // For a gang whose pods all ask the same: how many of them fit, node by node, once the scope's
  // candidates `local` are gone - a necessary condition for place() (which also filters), at the
  // cost of a few additions. Incremental: add() a candidate at a time.
  class Capacity {
   public:
    Capacity(const Chooser& c, const Scope& scope) : c_(c), scope_(scope), total_(base()) {}
    void add(size_t j) {
      const Topology& topo = c_.cache_.topology();
      for (const UnitMember& m : *c_.all_[scope_.candidates[j]].members) {
        if (!c_.cache_.node(m.node).present) continue;
        const uint32_t pos = topo.position[m.node];
        if (!scope_.confined || (pos >= scope_.begin && pos < scope_.end)) {
          Resources& f = freedOn(m.node);
          total_ -= capOf(m.node, f);
          f += *m.requests;
          total_ += capOf(m.node, f);
        }
      }
    }
    bool enough() const { return total_ >= c_.count_; }

   private:
    // Against the cluster as it is (not as a running simulation leaves it).
    int64_t capOf(NodeId id, const Resources& freed) const {
      Resources free = c_.freeBefore(id);
      free += freed;
      return capacityFor(c_.per_pod_, free, c_.count_);
    }
    int64_t base() {
      if (scope_.base_capacity >= 0) return scope_.base_capacity;
      const Topology& topo = c_.cache_.topology();
      int64_t total = 0;
      const uint32_t b = scope_.confined ? scope_.begin : 0;
      const uint32_t e = scope_.confined ? scope_.end : static_cast<uint32_t>(topo.order.size());
      for (uint32_t p = b; p < e; ++p) total += capOf(topo.order[p], Resources{});
      scope_.base_capacity = total;
      return total;
    }
    const Chooser& c_;
    const Scope& scope_;
    // What is freed per node: scanned while few nodes are touched, indexed beyond.
    Resources& freedOn(NodeId node) {
      if (index_.empty()) {
        for (auto& [n, f] : freed_)
          if (n == node) return f;
        freed_.emplace_back(node, Resources{});
        if (freed_.size() > 32)
          for (size_t i = 0; i < freed_.size(); ++i) index_.emplace(freed_[i].first, i);
        return freed_.back().second;
      }
      auto [it, inserted] = index_.emplace(node, freed_.size());
      if (inserted) freed_.emplace_back(node, Resources{});
      return freed_[it->second].second;
    }
    std::vector<std::pair<NodeId, Resources>> freed_;
    absl::flat_hash_map<NodeId, size_t> index_;
    int64_t total_;
  };

  // Whether `local` could let the gang fit, without a simulation: the sums, and for a gang of
  // equal pods the node-by-node capacity.
  // A node's free resources before any simulation (taken by run(), before the first).
  const Resources& freeBefore(NodeId id) const {
    if (free_before_.empty()) {
      free_before_.resize(cache_.slotCount());
      for (NodeId n = 0; n < cache_.slotCount(); ++n) free_before_[n] = clampedFreeOf(cache_.node(n));
    }
    return free_before_[id];
  }

  bool mayFit(const Scope& scope, const std::vector<size_t>& local) const {
    if (!sumFits(scope, local)) return false;
    if (!homogeneous_) return true;
    Capacity capacity(*this, scope);
    for (size_t j : local) capacity.add(j);
    return capacity.enough();
  }

  void offer(std::vector<size_t> chosen, GangPlacement placement) {
    Cost cost(unitsOf(chosen));
    if (best_ && compare(cost, *best_cost_) >= 0) return;
    best_ = Found{std::move(chosen)};
    best_cost_ = std::make_unique<Cost>(std::move(cost));
    best_placement_ = std::move(placement);
  }

  // `exhaustive`: every subset may be tried (few candidates, few scopes).
  void searchScope(const GangRequest& request, const Scope& scope, bool exhaustive) {
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
    auto all_fit = [&] {
      return mayFit(scope, everything) &&
             fits(sim, request, global(everything), /*check_allowed=*/false).has_value();
    };
    if (exhaustive && k <= static_cast<size_t>(preemption_.limits.exact_units)) {
      // Every subset, cheapest first; the first that fits is this scope's optimum.
      std::vector<uint32_t> masks;
      for (uint32_t m = 1; m < (1u << k); ++m) {
        std::vector<size_t> local;
        for (size_t j = 0; j < k; ++j)
          if (m & (1u << j)) local.push_back(j);
        if (mayFit(scope, local)) masks.push_back(m);
      }
      std::vector<std::unique_ptr<Cost>> costs(1u << k);
      for (uint32_t m : masks) {
        std::vector<const VictimUnit*> units;
        for (size_t j = 0; j < k; ++j)
          if (m & (1u << j)) units.push_back(&all_[scope.candidates[j]].unit);
        costs[m] = std::make_unique<Cost>(units);
      }
      std::sort(masks.begin(), masks.end(),
                [&](uint32_t a, uint32_t b) { return compare(*costs[a], *costs[b]) < 0; });
      if (masks.empty() || (best_ && compare(*costs[masks.front()], *best_cost_) >= 0)) return;
      if (!all_fit()) return;
      for (uint32_t m : masks) {
        if (best_ && compare(*costs[m], *best_cost_) >= 0) return;
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
    if (!all_fit()) return;
    // Greedy: the shortest cheapest-first prefix that fits (galloping, then bisecting; fitting is
    // monotone in the prefix), then every victim it does not need dropped, dearest first.
    size_t lo = 0;  // the longest prefix known not to fit
    size_t hi = k;  // the shortest known to fit
    size_t len = 1;
    {
      Resources room = scope.free;
      std::optional<Capacity> capacity;
      if (homogeneous_) capacity.emplace(*this, scope);
      for (len = 1; len < k; ++len) {
        room += scope.freed[len - 1];
        if (capacity) capacity->add(len - 1);
        if (fitsIn(need_, room) && (!capacity || capacity->enough())) break;
      }
    }
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
      absl::flat_hash_set<NodeId> nodes;
      for (const Assignment& a : p.assignments)
        if (std::optional<NodeId> id = cache_.findNode(a.node)) nodes.insert(*id);
      return nodes;
    };
    {
      auto nodes = used(*at_hi);
      std::vector<size_t> kept;
      for (size_t j : chosen) {
        bool needed = false;
        for (const UnitMember& m : *all_[scope.candidates[j]].members) needed |= nodes.contains(m.node);
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
      if (without.empty() || !mayFit(scope, without)) continue;
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
  PlacementOptions options_;  // a copy, without diagnosis
  Resources need_;
  bool homogeneous_ = false;  // every member asks the same (per_pod_), none bound
  mutable std::vector<Resources> free_before_;  // by NodeId
  Resources per_pod_;
  int64_t count_ = 0;
  std::vector<Candidate> all_;
  std::vector<std::string> drained_;  // suspended for the chooser's life (draining())
  std::optional<Found> best_;
  std::unique_ptr<Cost> best_cost_;
  GangPlacement best_placement_;
  int calls_ = 0;
  size_t subsets_ = 0;  // enumerated by exhaustive scope searches
};

}  // namespace

bool mayPreempt(const proto::Pod& pod) { return pod.spec.preemption_policy != "Never"; }

bool cheaper(const std::vector<const VictimUnit*>& a, const std::vector<const VictimUnit*>& b) {
  return compareCost(a, b) < 0;
}

std::vector<VictimUnit> preemptionCandidates(const GangRequest& request,
                                             const PreemptionRequest& preemption,
                                             const ClusterCache& cache) {
  std::vector<VictimUnit> out;
  for (Candidate& c : collect(request, preemption, cache)) {
    describeMembers(cache, *c.members, &c.unit);
    out.push_back(std::move(c.unit));
  }
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
  const int pods = victimPods();
  return absl::StrCat(pods, pods == 1 ? " pod" : " pods", " of ", victims.size(),
                      victims.size() == 1 ? " gang" : " gangs", " on ", joinSome(victimNodes()));
}

PreemptionResult choosePreemption(const GangRequest& request, const PreemptionRequest& preemption,
                                  ClusterCache& cache, const PlacementOptions& options) {
  Chooser chooser(request, preemption, cache, options);
  return chooser.run();
}

}  // namespace muster::scheduler
