#pragma once

// Fair share of queue-based tenancy: how much of each resource each queue of a QueueTree should
// hold now, given the cluster's capacity, what each queue wants and what it used recently; and
// the ordering key built on it (dominantShare). Pure arithmetic, recomputed every scheduling
// cycle; nothing here changes any state.
//
// Each resource is divided on its own, top down. The root holds the capacity; every parent
// divides the amount A it holds (its own fair share) among its participants:
//   - its children, each wanting its subtree's demand capped at its limit ("cap"), with its
//     effective quota and over-quota weight for the resource;
//   - the parent's own direct work, if the parent itself has demand: a pseudo-child named like
//     the parent, with quota 0, no limit of its own (the parent's limit already bounds A) and
//     weight 1. Its result is ownShare().
// in two steps:
//   1. Quota: each participant gets min(cap, effective quota). If these sum above A (quotas
//      over-committed, or a cluster smaller than its quotas), they are scaled down
//      proportionally to sum to A, and step 2 has nothing to hand out.
//   2. Over quota: what is left is water-filled among participants still below their cap, in
//      proportion to their effective weight, none above its cap. What nobody wants stays
//      unassigned (demand-aware): the shares of a parent's participants sum to min(A, sum of
//      their caps).
// Effective weight = over-quota weight × usage correction (when FairShareOptions::use_usage).
// The correction is Slurm's classic fair-share factor among the active participants (those with
// cap > 0): with S = the participant's weight / the active participants' total weight, and U =
// its decayed usage / their total decayed usage (U = S when that total is 0),
//   correction = 2^(-U/S) / 2^(-1) = 2^(1 - U/S), at least min_correction.
// A participant that used exactly its share keeps its weight, one that used nothing doubles it,
// one that used twice its share halves it (with little history, less: usage_horizon_seconds). Only active participants count so that queues with
// nothing to run do not change how the others are compared.
//
// Amounts are computed in double, then rounded down; the units that rounding leaves (so that the
// participants sum exactly to min(A, sum of caps)) go one by one to the participants with the
// largest fractional remainder (compared to 1e-9), ties to the smaller name. Results are exact
// integers and deterministic.
//
// Cost: O(resources × queues × log(children)) per call; each parent sorts its participants once.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "scheduler/tenancy/queue_tree.h"

namespace muster::scheduler::tenancy {

// Decayed usage per queue (indexed like QueueTree), per resource name: milli-units × seconds,
// decayed with a half-life (see accrue). May be shorter than the tree.
using DecayedUsage = std::vector<absl::flat_hash_map<std::string, double>>;

struct FairShareOptions {
  // Whether recent usage corrects the over-quota weights (off: pure weighted water-filling).
  bool use_usage = true;
  // The smallest usage correction, so that no queue's weight drops to zero.
  double min_correction = 1.0 / 64;
  // How much history the correction needs to act in full, as seconds of holding everything: a
  // parent dividing A whose participants' decayed usage sums to less than A × usage_horizon
  // moves U only that fraction of the way from S (U_eff = S + c·(U − S), c = sum ÷ (A ×
  // horizon), at most 1), so a few seconds of history cannot swing a division meant to follow
  // a week of it. The decayed usage of a resource held whole for ever is A × half-life ÷ ln 2:
  // that is the horizon to pass. 0: the correction always acts in full.
  double usage_horizon_seconds = 0;
};

struct FairShareInput {
  // The cluster's capacity per resource: what the root divides. Resources not named here have
  // no capacity (every share is 0).
  Amounts capacity;
  // Each queue's own demand (allocated + pending of the gangs submitted to that queue itself,
  // not its descendants'). Subtree demands are computed from it.
  Usage demand;
  // Each queue's own decayed usage; subtree totals are computed from it.
  DecayedUsage usage;
};

// The fair shares of one computation (see the top comment). Indexes are the tree's.
class FairShare {
 public:
  // Divides input.capacity over `tree`.
  static FairShare compute(const QueueTree& tree, const FairShareInput& input,
                           const FairShareOptions& options = {});

  // The resources that have shares: the capacity's and the demanded ones, in name order.
  const std::vector<std::string>& resources() const { return resources_; }
  // The queue's (subtree's) fair share of `resource`, milli-units; the root's is the capacity.
  int64_t share(size_t queue, std::string_view resource) const;
  // The part of share() for the queue's own gangs (all of it for a leaf; the pseudo-child's
  // share for a parent; 0 for a parent without own demand).
  int64_t ownShare(size_t queue, std::string_view resource) const;
  // The queue's subtree demand (own demand plus its descendants'), as computed from the input.
  int64_t demand(size_t queue, std::string_view resource) const;

  // The ordering key: the largest, over the resources of `allocated`, of allocated / share (0
  // where allocated is 0; +infinity where allocated > 0 and the share is 0). `allocated` is the
  // queue's subtree total. A queue further below its fair share (smaller key) goes first.
  double dominantShare(size_t queue, const Amounts& allocated) const;
  // The same against ownShare(), for ordering a parent's own gangs among its children.
  double ownDominantShare(size_t queue, const Amounts& own_allocated) const;

 private:
  int resourceIndex(std::string_view resource) const;  // -1: none

  std::vector<std::string> resources_;
  absl::flat_hash_map<std::string, int> resource_index_;
  // [resource][queue]
  std::vector<std::vector<int64_t>> share_;
  std::vector<std::vector<int64_t>> own_share_;
  std::vector<std::vector<int64_t>> demand_;
};

// The usage correction of one participant (see the top comment): 2^(1 - usage_fraction /
// weight_fraction), at least min_correction. weight_fraction must be > 0.
double usageCorrection(double weight_fraction, double usage_fraction, double min_correction);

// usage × 2^(-elapsed / half_life); usage unchanged when half_life <= 0 (no decay) or
// elapsed <= 0.
double decay(double usage, absl::Duration elapsed, absl::Duration half_life);

// Advances every queue's decayed usage by `elapsed`: decays what it had, then adds what it holds
// now (`allocated`, the queue's own allocation) × the elapsed seconds. Grows `usage` to cover
// `allocated`.
void accrue(DecayedUsage* usage, const Usage& allocated, absl::Duration elapsed,
            absl::Duration half_life);

}  // namespace muster::scheduler::tenancy
