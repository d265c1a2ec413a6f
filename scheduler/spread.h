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
// Defaults (podTopologySpread in the config, kube-scheduler's PodTopologySpreadArgs): a pod
// without constraints gets the System ones (ScheduleAnyway: maxSkew 3 per host, 5 per
// topology.kubernetes.io/zone; a node without the key is not ranked lower) or the configured
// list, counting what defaultSelector gives; none when nothing selects the pod. They are taken
// when the pod is queued (scheduler's queue), from the Services and controllers known then.
//
// Inside a gang (gangSpread): a DoNotSchedule constraint whose selector counts other members of
// the gang must hold once all of them are placed, as it would after kube-scheduler placed them one
// by one in a good order: with c(d) the matching pods in domain d after the gang and m the smallest
// c over the eligible domains (0 while there are fewer than minDomains), every domain that receives
// a member ends with c(d) <= m + maxSkew. planGangSpread picks the lowest m the members can reach
// (raising it means putting members in every eligible domain below it), so 12 members over 3 empty
// zones with maxSkew 1 go 4, 4, 4, and 4 members over 2 nodes with hostname maxSkew 1 go 2, 2.
// Supported: such constraints count the pod itself, at most one on the host and one on another
// key (the host's then caps and floors each node for the level its minimum is raised to), and
// members that count each other are alike (one placement group); members they count that do not spread themselves (a
// launcher) are placed first and counted. Other combinations are refused with a message.
// ScheduleAnyway constraints among members rank nodes by the placed pods only.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/filter.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

inline constexpr std::string_view kReasonSpread =
    "node(s) didn't match pod topology spread constraints";
inline constexpr std::string_view kReasonSpreadLabel =
    "node(s) didn't match pod topology spread constraints (missing required label)";

// A DoNotSchedule constraint that counts the gang's own members (see the file comment).
struct GangSpread {
  std::string key;
  int32_t max_skew = 1;
  // Eligible domains are at least minDomains: members can raise the minimum. Otherwise it is 0.
  bool can_raise = true;
  int64_t min = 0;
  absl::flat_hash_map<std::string, int64_t> counts;  // eligible domain value → matching placed pods
  std::vector<int64_t> sorted;                        // the values of counts, ascending
  proto::LabelSelector selector;
  std::string namespace_;
  // Required anti-affinity among a group's own members on `key` (interpod.h): one member per
  // domain (maxSkew 1 over domains all at 0, minimum never raised), counting no other pod.
  bool anti_affinity = false;
  bool selects(const proto::Pod& pod) const {
    return !anti_affinity && pod.meta.namespace_ == namespace_ && selector.matches(pod.meta.labels);
  }
};

class SpreadFilter {
 public:
  // nullopt when the pod has no DoNotSchedule constraint. `gang_mask`: bit i set when constraint
  // i of the pod counts other members of its gang (gangSpread): the node must still carry its key,
  // the skew is the gang's (gang()).
  static std::optional<SpreadFilter> prepare(const PodInfo& pod, const ClusterCache& cache,
                                             uint32_t gang_mask = 0);
  Status check(const NodeInfo& node) const;
  // The constraints that count the gang's members: one on a key other than the host first, if
  // any, then one on kubernetes.io/hostname, if any.
  const std::vector<GangSpread>& gang() const { return gang_; }

 private:
  struct Constraint {
    std::string key;
    int32_t max_skew = 1;
    int32_t min_domains = 1;
    int self = 0;  // 1 when its selector matches the pod itself
    bool gang = false;  // the skew is checked over the gang (gang_), only the key here
    absl::flat_hash_map<std::string, int64_t> counts;  // eligible domain value → matching pods
    int64_t min = 0;
  };
  std::vector<Constraint> constraints_;
  std::vector<GangSpread> gang_;
};

// One domain of a GangSpread's key inside the unit a gang is being placed in.
struct DomainRoom {
  std::string value;
  int64_t placed = 0;  // members of the gang already put here (other groups) that it counts
  int64_t room = 0;    // how many of the spreading members its nodes in the unit can take
  int64_t floor = 0;   // how many it must take at least (another constraint's minimum)
  int64_t take = 0;    // out: how many go here
};

// How many of `need` spreading members go to each of `domains` (the unit's domains; the eligible
// domains outside the unit take none) so that the constraint holds once they are placed: the
// lowest reachable minimum, members first where the minimum needs them, then the domains with the
// most room. Returns `need` with `take` filled; otherwise the most members any minimum allows,
// and `take` is left at 0.
int64_t planGangSpread(const GangSpread& c, std::vector<DomainRoom>& domains, int64_t need);

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
    bool required = true;  // a node without the key scores lowest (not for System defaults)
    absl::flat_hash_map<std::string, int64_t> counts;
  };
  std::vector<Constraint> constraints_;
};

// The constraint, as a selector, with the pod's matchLabelKeys values merged in; nullopt when it
// selects no pod.
std::optional<proto::LabelSelector> spreadSelector(const proto::TopologySpreadConstraint& c,
                                                   const proto::Labels& pod_labels);

// Per member, a mask of its DoNotSchedule constraints that count other members of the gang (bit i:
// constraint i). `same_group(i, j)`: the two members are placed as one group. Non-empty: a
// combination Muster does not place (file comment), what to tell.
std::string gangSpread(const std::vector<PodInfoPtr>& members,
                       const std::function<bool(size_t, size_t)>& same_group,
                       std::vector<uint32_t>* masks);

// kube-scheduler's DefaultSelector: the selectors of the Services selecting the pod (of its
// namespace), with its controller's (`rc`: a ReplicationController's; `workload`: a ReplicaSet's or
// StatefulSet's) merged in. nullopt when that selects nothing.
std::optional<proto::LabelSelector> defaultSelector(
    const proto::Pod& pod, const std::vector<std::shared_ptr<const proto::Service>>& services,
    const std::map<std::string, std::string>* rc, const proto::LabelSelector* workload);

// The default constraints for a pod (config.defaultSpread()) counting `selector`; System ones
// are marked system_default.
std::vector<proto::TopologySpreadConstraint> defaultSpreadConstraints(
    const SchedulerConfig& config, const proto::LabelSelector& selector);

// The pod's constraints as text, and which select the pod itself (part of the constraint
// signature: members placed as one group must spread alike).
std::string spreadSignature(const proto::Pod& pod);

}  // namespace muster::scheduler
