#pragma once

// Per-pod feasibility against one node, with kube-scheduler's default filters, in its order and
// with its reason strings (so the aggregated message reads like kube-scheduler's):
//
//   NodeUnschedulable  spec.unschedulable, unless the pod tolerates
//                      node.kubernetes.io/unschedulable:NoSchedule   → "node(s) were unschedulable"
//   NodeName           spec.nodeName, when set, must be the node   → "node(s) didn't match the
//                                                                      requested node name"
//   TaintToleration    every NoSchedule/NoExecute taint tolerated  → "node(s) had untolerated
//                      A node whose Ready condition is not True      taint {key: value}"
//                      counts as tainted node.kubernetes.io/not-ready:NoSchedule (what the node
//                      lifecycle controller adds; we do not wait for it)
//   NodeAffinity       nodeSelector and required node affinity     → "node(s) didn't match Pod's
//                      (matchExpressions and matchFields)             node affinity/selector"
//   NodePorts          no host port conflict                       → "node(s) didn't have free
//                                                                      ports for the requested pod
//                                                                      ports"
//   NodeResourcesFit   every requested resource and the pod count  → "Too many pods",
//                      (and node exclusivity, resources.h)           "Insufficient nvidia.com/gpu"
//
// The first failing filter decides; NodeResourcesFit reports every insufficient resource.
// InterPodAffinity needs the placed pods and is in scheduler/interpod.h; placement applies it
// after these.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

// A scheduling verdict. The code decides retry behaviour, as in the scheduler framework:
// Unschedulable may change when other pods go away; UnschedulableAndUnresolvable needs the node
// or the pod to change; Error is an internal failure.
struct Status {
  enum class Code { kSuccess, kUnschedulable, kUnschedulableAndUnresolvable, kError };

  Code code = Code::kSuccess;
  std::vector<std::string> reasons;

  bool ok() const { return code == Code::kSuccess; }
  static Status success() { return {}; }
  static Status unschedulable(std::string reason) {
    return Status{Code::kUnschedulable, {std::move(reason)}};
  }
  static Status unresolvable(std::string reason) {
    return Status{Code::kUnschedulableAndUnresolvable, {std::move(reason)}};
  }
  static Status error(std::string reason) { return Status{Code::kError, {std::move(reason)}}; }
};

inline constexpr std::string_view kTaintUnschedulable = "node.kubernetes.io/unschedulable";
inline constexpr std::string_view kTaintNotReady = "node.kubernetes.io/not-ready";

inline constexpr std::string_view kReasonUnschedulable = "node(s) were unschedulable";
inline constexpr std::string_view kReasonNodeName = "node(s) didn't match the requested node name";
inline constexpr std::string_view kReasonNodeAffinity =
    "node(s) didn't match Pod's node affinity/selector";
inline constexpr std::string_view kReasonNodePorts =
    "node(s) didn't have free ports for the requested pod ports";
inline constexpr std::string_view kReasonTooManyPods = "Too many pods";
// kube-scheduler's VolumeBinding words for a bound volume the node cannot reach.
inline constexpr std::string_view kReasonVolumeNodeAffinity =
    "node(s) had volume node affinity conflict";
// kube-scheduler's VolumeBinding words for a claim no volume on the node can serve (none matches
// and its class cannot provision one there).
inline constexpr std::string_view kReasonVolumeBindConflict =
    "node(s) didn't find available persistent volumes to bind";
// kube-scheduler's VolumeRestrictions words for a ReadWriteOncePod claim another pod uses.
inline constexpr std::string_view kReasonReadWriteOncePod =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already "
    "in-use by another pod";
// kube-scheduler's NodeVolumeLimits words: the node's CSINode allows no more of a driver's volumes.
inline constexpr std::string_view kReasonVolumeLimits = "node(s) exceed max volume count";
// The node share (resources.h): a pod asking for a node to itself, and the others.
inline constexpr std::string_view kReasonNotEmptyForExclusive =
    "node(s) had other pods (the pod asks for a node to itself: muster.dev/exclusive)";
inline constexpr std::string_view kReasonHeldExclusively =
    "node(s) were held by a pod that asked for its node to itself (muster.dev/exclusive)";

// The individual filters (Success or the filter's verdict).
Status filterNodeUnschedulable(const PodInfo& pod, const NodeInfo& node);
Status filterNodeName(const PodInfo& pod, const NodeInfo& node);
Status filterTaintToleration(const PodInfo& pod, const NodeInfo& node);
Status filterNodeAffinity(const PodInfo& pod, const NodeInfo& node);
Status filterNodePorts(const PodInfo& pod, const NodeInfo& node);
// The PersistentVolumes of the pod's bound claims: each must exist and its node affinity match;
// each claim waiting for its first consumer must find a volume or be provisionable there.
Status filterVolumeBinding(const PodInfo& pod, const NodeInfo& node);
// Against the node's free resources minus `extra` (what a tentative placement has added).
Status filterNodeResourcesFit(const PodInfo& pod, const NodeInfo& node,
                              const Resources& extra = Resources{});

// Every filter but NodeResourcesFit and NodePorts: whether the pod could ever run on the node.
Status filterStatic(const PodInfo& pod, const NodeInfo& node);
// All filters, in kube-scheduler's order.
Status filterNode(const PodInfo& pod, const NodeInfo& node);

// The NodeAffinity score: the summed weights of the preferred terms the node matches.
int64_t preferredAffinityScore(const PodInfo& pod, const NodeInfo& node);

// Counts of per-node reasons, turned into kube-scheduler's message:
// "0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 8 node(s) were unschedulable."
class FilterDiagnosis {
 public:
  void add(const Status& status);
  void addAvailable() { ++total_; ++available_; }
  int total() const { return total_; }
  int available() const { return available_; }
  const std::map<std::string, int>& reasons() const { return reasons_; }
  // "<available>/<total> nodes are available: <count> <reason>, ... ." Reasons sorted by text as
  // kube-scheduler sorts them; without reasons just "<available>/<total> nodes are available.".
  std::string message() const;

 private:
  int total_ = 0;
  int available_ = 0;
  std::map<std::string, int> reasons_;
};

// Features a pod uses that Muster does not implement, one phrase each ("dynamic resource
// allocation (spec.resourceClaims)"). Such a pod must not be scheduled as if the constraint were
// absent; the caller reports it in an Event and leaves the pod pending.
std::vector<std::string> unsupported(const proto::Pod& pod);

// Why a pod's PersistentVolumeClaims keep it from being placed now, in kube-scheduler's words
// ("pod has unbound immediate PersistentVolumeClaims"), or "" when each claim is bound or waits
// for its first consumer.
using ClaimCheck = std::function<std::string(const proto::Pod& pod)>;

// Whether the class of a claim waiting for its first consumer can provision its volume for the
// node: a provisioner, allowedTopologies matching the node, and the claim's selected node if any.
bool canProvisionOn(const VolumeConstraint& v, const proto::Labels& node_labels,
                    std::string_view node_name);

// For a claim waiting for its first consumer, on a node: the volume to bind it to - the first
// candidate the node reaches that is not in `taken` - or "" when none does and the class can
// provision one there; nullopt when neither.
std::optional<std::string> volumeFor(const VolumeConstraint& v, const proto::Labels& node_labels,
                                     std::string_view node_name,
                                     const std::set<std::string, std::less<>>& taken = {});

}  // namespace muster::scheduler
