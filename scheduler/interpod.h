#pragma once

// Inter-pod affinity and anti-affinity with kube-scheduler's InterPodAffinity semantics: the
// filter for required terms (below) and the score for preferred ones (InterPodScore). The filter's
// semantics (pkg/scheduler/framework/plugins/interpodaffinity, 1.36), in its order and
// words:
//
//   1. the pod's required podAffinity: the node must carry every term's topologyKey, and for each
//      term a pod matching ALL the terms must run in the node's domain of that key → "node(s)
//      didn't match pod affinity rules" (unresolvable). The first pod of a group that has affinity
//      to itself passes when no pod anywhere matches all its terms and it matches them itself.
//   2. the pod's required podAntiAffinity: no pod matching a term in the node's domain of its
//      key (a node without the key passes) → "node(s) didn't match pod anti-affinity rules".
//   3. symmetry: no pod already placed whose required anti-affinity term matches this pod in the
//      node's domain of that term's key → "node(s) didn't satisfy existing pods anti-affinity
//      rules".
//
// A term selects pods by labelSelector (absent: none; {}: all) in its namespaces: those listed,
// plus those whose labels its namespaceSelector matches ({}: all), or, when both are empty, the
// namespace of the pod that has the term. matchLabelKeys / mismatchLabelKeys need nothing here:
// the API server merges them into labelSelector when the pod is created (GA since 1.33).
//
// "Placed" pods are what the cluster cache accounts: bound and assumed pods, not terminal ones, so
// the members of a gang already bound count as placed for the rest of it.
//
// Inside a gang (analyzeGang, and the placement's groups): the members are decided together, so
// their terms against each other are turned into what the placement understands:
//   - anti-affinity among alike members on kubernetes.io/hostname → at most one such member per
//     node, on another key → at most one per domain of that key (placed like a spread,
//     placement/spread_fill.h; nodes without the key take any number);
//   - affinity of every member to every member on a topology level (or the host) → the gang's
//     required level;
//   - between members of different shapes (a launcher and its workers): the placement places
//     the members an affinity term needs before the members that have it, and then only in
//     domains holding one of them (or a placed pod the terms select), and keeps members whose
//     anti-affinity (either side's) excludes each other in different domains — the order a
//     one-pod-at-a-time scheduler would have to find;
//   - self-affinity that only the members of one shape satisfy, with no placed pod to match:
//     those members share one domain of the key.
// Combinations left are refused with a message rather than placed wrongly
// (GangInterPod::unsupported, placement/gang_groups.h).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/filter.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

inline constexpr std::string_view kReasonPodAffinity = "node(s) didn't match pod affinity rules";
inline constexpr std::string_view kReasonPodAntiAffinity =
    "node(s) didn't match pod anti-affinity rules";
inline constexpr std::string_view kReasonExistingAntiAffinity =
    "node(s) didn't satisfy existing pods anti-affinity rules";

// The labels of a namespace (nullptr when unknown), for namespaceSelector.
using NamespaceLabels = std::function<const proto::Labels*(std::string_view name)>;

// Whether `term`, written in a pod of namespace `owner_namespace`, selects a pod in `pod_namespace`
// with `labels`.
bool termSelects(const proto::PodAffinityTerm& term, std::string_view owner_namespace,
                 std::string_view pod_namespace, const proto::Labels& labels,
                 const NamespaceLabels& namespace_labels = {});

// The pod has required podAffinity or podAntiAffinity terms.
bool hasRequiredInterPodTerms(const proto::Pod& pod);
// Its inter-pod terms (required and preferred) as text: equal for two pods of one namespace whose
// terms select alike (a part of PodInfo::constraint_signature). Members of a gang placed as one
// group are ranked by their first member's InterPodScore.
std::string interPodSignature(const proto::Pod& pod);

// The InterPodAffinity filter for one pending pod, prepared once against the cache (as
// kube-scheduler's PreFilter) and then asked per node.
class InterPodFilter {
 public:
  using Pair = std::pair<std::string, std::string>;  // topology key, value

  // Nothing to check (no terms, and no placed pod's anti-affinity selects the pod): nullopt.
  static std::optional<InterPodFilter> prepare(const proto::Pod& pod, const ClusterCache& cache,
                                               const NamespaceLabels& namespace_labels = {});
  Status check(const NodeInfo& node) const;

  // Members of the pod's gang placed before it will satisfy its affinity: check() then asks only
  // that the node carries the terms' keys, and affinityMet() decides once they are placed.
  void deferAffinity() { defer_affinity_ = true; }
  // For every affinity key, the node's domain holds a placed pod matching all the terms, or is
  // one of `more` (the domains of members placed before it).
  bool affinityMet(const NodeInfo& node, const absl::flat_hash_set<Pair>& more) const;
  // No placed pod matches all the affinity terms and the pod matches them itself.
  bool firstOfGroup() const { return first_of_group_; }
  const std::vector<std::string>& affinityKeys() const { return affinity_keys_; }

 private:
  std::vector<std::string> affinity_keys_;
  absl::flat_hash_set<Pair> affinity_pairs_;  // domains holding a pod that matches all terms
  bool first_of_group_ = false;               // the self-affinity exception applies
  bool defer_affinity_ = false;
  std::vector<std::string> anti_keys_;
  absl::flat_hash_set<Pair> anti_pairs_;      // domains holding a pod one of its terms selects
  absl::flat_hash_set<Pair> existing_anti_;   // domains placed pods' anti-affinity forbids
};

// kube-scheduler's InterPodAffinity score for one pending pod (its preferred terms, and the
// placed pods' terms that select it: preferred ones by weight, required affinity with weight 1,
// anti-affinity negative), summed per topology domain: a node's score is the sum over its labels.
// Placement ranks nodes by it right after preferred node affinity, as a raw sum (kube-scheduler
// normalises it to 0-100 and adds other scores; the order among nodes is the same).
class InterPodScore {
 public:
  // nullopt: no term in play, every node scores 0.
  static std::optional<InterPodScore> prepare(const proto::Pod& pod, const ClusterCache& cache,
                                              const NamespaceLabels& namespace_labels = {});
  int64_t score(const NodeInfo& node) const;

 private:
  absl::flat_hash_map<std::pair<std::string, std::string>, int64_t> pairs_;
};

// What the members' terms ask of each other (members in GangRequest order).
struct GangInterPod {
  // Non-empty: a combination Muster does not place yet; the gang stays pending with this message.
  std::string unsupported;
  // Affinity of every member to every member: the level they must share (a SchedulerConfig-like
  // index into `levels` + the host at levels.size()); -1 when none.
  int required_level = -1;
  // Per member: it may share a node with no other member its anti-affinity selects (they are all
  // members of its own placement group, see `group_key`).
  std::vector<bool> one_per_node;
  // Per member: the key (other than the host's) of the domains it may share with no other member
  // its anti-affinity selects (all of its own placement group); "" when none.
  std::vector<std::string> one_per_domain;
  // Per member: what, besides its constraint signature, must be equal for two members to be
  // placed as one group: which terms (the members' own and the placed pods' anti-affinity) select
  // it. Empty strings when no inter-pod term is in play.
  std::vector<std::string> group_key;
  // Per member: every one of its required affinity terms selects every other member (the
  // required level above stands for them); false when it has none.
  std::vector<bool> whole_gang_affinity;
  // Per member: its DoNotSchedule spread constraints that count other members (bit i: constraint
  // i; scheduler/spread.h gangSpread). Empty or 0: none.
  std::vector<uint32_t> gang_spread;
};

// The level index of a topology key: one of `levels`, levels.size() for the host, else -1.
int levelOfKey(const std::vector<std::string>& levels, const std::string& key);

// Whether `other` matches every required affinity term of `owner` (false when it has none).
bool matchesAllAffinity(const proto::Pod& owner, const proto::Pod& other,
                        const NamespaceLabels& namespace_labels = {});
// The topology keys of the domains `a` and `b` may not share: those of a's required anti-affinity
// terms that select b, and of b's that select a.
std::vector<std::string> exclusionKeys(const proto::Pod& a, const proto::Pod& b,
                                       const NamespaceLabels& namespace_labels = {});

// `levels`: the configured topology level keys (the host level is kubernetes.io/hostname).
GangInterPod analyzeGang(const std::vector<PodInfoPtr>& members, const ClusterCache& cache,
                         const std::vector<std::string>& levels,
                         const NamespaceLabels& namespace_labels = {});

}  // namespace muster::scheduler
