#pragma once

// Pod topology spread constraints with kube-scheduler's PodTopologySpread semantics
// (pkg/scheduler/framework/plugins/podtopologyspread, 1.36) and words:
//
// whenUnsatisfiable: DoNotSchedule (a filter). A node must carry every such constraint's
// topologyKey ("node(s) didn't match pod topology spread constraints (missing required label)",
// unresolvable); then for each constraint: the pods in the node's domain that its selector
// matches + 1 if it matches the pod itself − the smallest such count over the eligible domains
// (0 while there are fewer than minDomains of them) must be at most maxSkew ("node(s) didn't
// match pod topology spread constraints").
//   - Counted: placed pods of the pod's namespace, not terminating, that the selector (with the
//     pod's values of matchLabelKeys merged in) matches. An empty selector counts none.
//   - Eligible domains: those of nodes that carry every DoNotSchedule key and pass the
//     constraint's node inclusion policies: nodeAffinityPolicy Honor (default: the pod's
//     nodeSelector and required node affinity) / Ignore, nodeTaintsPolicy Ignore (default) /
//     Honor (NoSchedule and NoExecute taints tolerated). A domain with no matching pod counts 0.
//
// ScheduleAnyway (a score): fewer matching pods in the node's domains is better, each constraint
// weighted by log(number of its domains + 2) as kube-scheduler does; a node missing a key scores
// lowest. Placement ranks by it after preferred node affinity and inter-pod preferences.
//
// Not applied: the cluster default constraints kube-scheduler derives from Services and
// ReplicaSets when a pod has none (they are ScheduleAnyway, a preference only).
//
// Inside a gang: a DoNotSchedule constraint whose selector matches another member of the gang
// would have to hold after all members are placed; Muster refuses such gangs with a message
// (spreadAmongMembers) rather than placing them wrongly. ScheduleAnyway constraints among members
// rank nodes by the placed pods only.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/filter.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

inline constexpr std::string_view kReasonSpread =
    "node(s) didn't match pod topology spread constraints";
inline constexpr std::string_view kReasonSpreadLabel =
    "node(s) didn't match pod topology spread constraints (missing required label)";

class SpreadFilter {
 public:
  // nullopt when the pod has no DoNotSchedule constraint.
  static std::optional<SpreadFilter> prepare(const PodInfo& pod, const ClusterCache& cache);
  Status check(const NodeInfo& node) const;

 private:
  struct Constraint {
    std::string key;
    int32_t max_skew = 1;
    int32_t min_domains = 1;
    int self = 0;  // 1 when its selector matches the pod itself
    absl::flat_hash_map<std::string, int64_t> counts;  // eligible domain value → matching pods
    int64_t min = 0;
  };
  std::vector<Constraint> constraints_;
};

class SpreadScore {
 public:
  // nullopt when the pod has no ScheduleAnyway constraint.
  static std::optional<SpreadScore> prepare(const PodInfo& pod, const ClusterCache& cache);
  // Higher is better (fewer matching pods): minus the weighted counts, in thousandths.
  int64_t score(const NodeInfo& node) const;

 private:
  struct Constraint {
    std::string key;
    double weight = 1;
    absl::flat_hash_map<std::string, int64_t> counts;
  };
  std::vector<Constraint> constraints_;
};

// The constraint, as a selector, with the pod's matchLabelKeys values merged in; nullopt when it
// selects no pod.
std::optional<proto::LabelSelector> spreadSelector(const proto::TopologySpreadConstraint& c,
                                                   const proto::Labels& pod_labels);

// Non-empty when a member's DoNotSchedule constraint matches another member: what to tell.
std::string spreadAmongMembers(const std::vector<PodInfoPtr>& members);

// The pod's constraints as text, and which select the pod itself (part of the constraint
// signature: members placed as one group must spread alike).
std::string spreadSignature(const proto::Pod& pod);

}  // namespace muster::scheduler
