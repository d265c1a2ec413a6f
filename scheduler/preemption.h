#pragma once

// Preemption: which whole gangs of lower priority to evict so that a gang that does not fit does.
//
// choosePreemption() is pure in effect: it simulates on the cache (ClusterCache::suspend/resume,
// restored before it returns) and returns a decision as a value; the scheduler carries it out.
//
// Rules (issue #12; scheduler/README.md "Preemption"):
// - Victims are units: every placed pod of a gang (gangKeyOf: its PodGroup, gang annotations, a
//   ParallelJob attempt or Slurm job) goes together, a lone pod is its own unit. A unit may be a
//   victim only when all its pods are bound (none assumed), none is terminating or already marked
//   preempted, its highest priority is strictly below the preemptor's and below
//   preemption.protectedPriority, its newest pod has run its band's minRuntime, it was not
//   preempted within victimCooldownSeconds, and it is not the preemptor itself.
// - The chosen set is the cheapest whose removal lets place() put the whole gang: cost compares
//   the victims' priorities from the highest down (fewer units of lower priorities win), then
//   the work lost (GPU-seconds, then CPU-seconds of running time), then the total running time
//   (the newest go first), then the keys. Only a simulation decides that a set fits.
// - The search is per scope, a place where the victims are: each domain of the required level (a
//   node for the host level); for a preferred level first each of its domains (so the gang lands
//   in one), then the whole cluster; a single pod without a level, each node; any other gang,
//   each domain of the lowest level that could hold it, then the whole cluster (only when that
//   found nothing, or it is small enough to search every subset). A unit is a candidate in a scope
//   when one of its pods is there.
// - Scopes are visited by a lower bound on what any set there costs (the candidates without which
//   even all the others cannot make room by the sums, and the highest priority the cheapest
//   prefix needs) and the search ends at the first scope whose bound exceeds the best set found.
// - Inside a scope of at most PreemptionLimits::exact_units candidates (while the subsets
//   enumerated stay within PreemptionLimits::subsets) every subset is considered cheapest first,
//   and the first that fits is the scope's optimum. Larger scopes add candidates cheapest first
//   until the gang fits, drop those with no pod where the placement went, then every other one it
//   does not need (dearest first): no victim the placement does not need.
// - Before a simulation, necessary conditions rule sets out: the summed free resources, and for a
//   gang of equal pods how many fit node by node. Simulations are bounded by
//   PreemptionLimits::place_calls once a set was found.
// - Room already being freed for someone (every pod of a lower-priority unit marked preempted,
//   lower-priority pods being deleted) counts as free in every simulation and costs nothing: a
//   decision taken while earlier evictions are under way (after a restart of the scheduler, say)
//   adds no victims beyond them. When that room alone is enough the plan has no victims, and the
//   gang waits for it.
// - PodDisruptionBudgets: units that one would refuse to let go are left out; when only they
//   would make room the result says so (NoPreemption::pdb_blocked).

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/cache.h"
#include "scheduler/gang.h"
#include "scheduler/placement.h"

namespace muster::scheduler {

// A candidate victim: one gang's placed pods.
struct VictimUnit {
  GangKey key;
  int32_t priority = 0;             // the highest of its pods
  std::vector<std::string> pods;    // "namespace/name", sorted
  std::vector<std::string> nodes;   // where they run, sorted, distinct
  int64_t gpu_seconds = 0;          // Σ GPUs × running time (s): the work lost
  int64_t cpu_seconds = 0;          // Σ cpu cores × running time (millicore-seconds / 1000)
  int64_t running_seconds = 0;      // Σ running time
};

struct PreemptionLimits {
  int exact_units = 10;      // scopes with at most this many candidates are searched exhaustively
  int subsets = 2048;        // ... while the subsets enumerated so far stay within this
  int place_calls = 64;      // simulations per decision, at most (one is always allowed per scope
                             // that is the first to fit)
};

struct PreemptionRequest {
  int32_t priority = 0;  // the preemptor's
  absl::Time now;
  int64_t protected_priority = 1000000000;
  std::function<int64_t(int64_t priority)> min_runtime_seconds;  // null: 0
  std::function<bool(const GangKey&)> cooling_down;               // null: none
  // Whether a PodDisruptionBudget would refuse evicting the gang's pods; null: never.
  std::function<bool(const GangKey&, const std::vector<UnitMember>&)> pdb_refuses;
  // Tenancy (scheduler/tenancy/tenancy.h). `eligible(unit, members, priority)`, when set, decides
  // which units may be victims in place of the priority rule (protectedPriority, minRuntime,
  // the cooldown and busy units still apply): reclaim takes equal or higher priorities from
  // queues above their fair share. Room being freed (draining) counts for the units it accepts.
  std::function<bool(const GangKey&, const std::vector<UnitMember>&, int32_t priority)> eligible;
  // `allowed(units)`, when set, must accept a set of victims (each unit's members) before it is
  // simulated: a queue's quota and fair share bound what may be taken from it as a whole.
  std::function<bool(const std::vector<const std::vector<UnitMember>*>&)> allowed;
  PreemptionLimits limits;
};

struct PreemptionPlan {
  GangPlacement placement;           // where the gang fits once the victims are gone
  std::vector<VictimUnit> victims;   // cheapest first; none: what is already going is enough
  int place_calls = 0;               // simulations it took
  int victimPods() const;
  std::vector<std::string> victimNodes() const;  // sorted, distinct
  // "3 pods of 2 gangs on n1, n2".
  std::string describe() const;
};

struct NoPreemption {
  std::string message;       // for the preemptor's condition and Event; "" when no pod at all
                             // may be preempted for it
  bool pdb_blocked = false;  // only units a PodDisruptionBudget protects would make room
};

using PreemptionResult = std::variant<PreemptionPlan, NoPreemption>;

// Whether the pod may preempt others: spec.preemptionPolicy is not Never.
bool mayPreempt(const proto::Pod& pod);

// The victims that would let `request` (which place() found unschedulable) fit. `cache` is left
// exactly as it was.
PreemptionResult choosePreemption(const GangRequest& request, const PreemptionRequest& preemption,
                                  ClusterCache& cache, const PlacementOptions& options = {});

// The total order on victim sets choosePreemption minimises (exposed for tests): true when `a`
// costs less than `b`.
bool cheaper(const std::vector<const VictimUnit*>& a, const std::vector<const VictimUnit*>& b);

// The units choosePreemption would consider (exposed for tests and the benchmark).
std::vector<VictimUnit> preemptionCandidates(const GangRequest& request,
                                             const PreemptionRequest& preemption,
                                             const ClusterCache& cache);

}  // namespace muster::scheduler
