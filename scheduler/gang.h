#pragma once

// Which gang a pod belongs to, and what the gang asks for (DESIGN.md §4):
//
// 1. Kubernetes' own PodGroup (1.36, feature gate GenericWorkload): spec.schedulingGroup.podGroupName
//    names a scheduling.k8s.io/v1alpha2 PodGroup in the pod's namespace. schedulingPolicy.gang
//    gives minMember (minCount); schedulingPolicy.basic places each pod on its own (a gang of one);
//    schedulingConstraints.topology[].key, when it is a configured level, is the required level
//    (the deepest, if several). No schedule timeout of its own (the config's default applies).
//    While the PodGroup does not exist the gang waits.
// 2. PodGroup: label scheduling.x-k8s.io/pod-group: <name> names a scheduling.x-k8s.io/v1alpha1
//    PodGroup in the pod's namespace; minMember and scheduleTimeoutSeconds come from it. While
//    the PodGroup does not exist the gang waits (GangSpec::pod_group_missing).
// 3. Annotations gang-scheduling.preferred.jp/gang-name, …/gang-size (1 to kMaxGangSize, required
//    with gang-name) and …/gang-schedule-timeout-seconds (a non-negative integer).
// The first that a pod has wins (schedulingGroup, then the label, then the annotations). A pod
// with none is a gang of one.
//
// Topology: muster.dev/topology-required / muster.dev/topology-preferred name a level's label key
// (one of the configured topologyLevels, or kubernetes.io/hostname). They are read from the pod,
// else from the PodGroup's annotations (either kind of PodGroup). Both may be set when the preferred level is at or below
// the required one.
//
// GPU↔NIC alignment: muster.dev/gpu-nic-affinity: required | preferred (default preferred; see
// scheduler/devices.h), read from the pod, else from the PodGroup's annotations.
//
// The schedule timeout: when a gang has not been placed this long after the queue first saw it,
// the queue reports it as timed out (the lead emits an Event and updates the PodGroup); Muster
// holds nothing while a gang waits, so there is nothing to release. 0 or absent: the config's
// gang.defaultScheduleTimeoutSeconds (0: no timeout).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "proto/objects.h"
#include "scheduler/config.h"
#include "scheduler/devices.h"

namespace muster::scheduler {

// The largest gang Muster places (gang-size, PodGroup minMember).
inline constexpr int32_t kMaxGangSize = 1000000;

namespace vocab = proto::vocabulary;  // the names Muster uses on API objects


// A gang's identity: namespace/name. A pod that is its own gang has `single_pod` set, so a gang
// and a lone pod that share a name never collide.
struct GangKey {
  std::string namespace_;
  std::string name;
  bool single_pod = false;

  std::string toString() const { return namespace_ + "/" + name; }
  friend bool operator==(const GangKey&, const GangKey&) = default;
  friend auto operator<=>(const GangKey&, const GangKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const GangKey& k) {
    return H::combine(std::move(h), k.namespace_, k.name, k.single_pod);
  }
};

enum class GangSource { kSinglePod, kPodGroup, kAnnotations, kWorkloadPodGroup };

struct GangSpec {
  GangKey key;
  GangSource source = GangSource::kSinglePod;
  int32_t min_member = 1;
  // 0: no timeout.
  int64_t schedule_timeout_seconds = 0;
  // Topology level indices (SchedulerConfig::levelIndex); -1: none.
  int required_level = -1;
  int preferred_level = -1;
  GpuNicAffinity gpu_nic_affinity = GpuNicAffinity::kPreferred;
  // The pod names a PodGroup that does not exist (yet): the gang waits.
  bool pod_group_missing = false;
  // The pod is in a scheduling.k8s.io/v1alpha2 PodGroup (source kWorkloadPodGroup, or kSinglePod
  // for a basic one): its name, for the PodGroupScheduled condition.
  std::string workload_pod_group;

  friend bool operator==(const GangSpec&, const GangSpec&) = default;
};

// The gang a pod belongs to as far as the pod alone says (no PodGroup lookup): its
// spec.schedulingGroup, pod-group label or gang-name annotation, in that order, else the pod by
// itself. Preemption takes such a gang as one unit (a basic v1alpha2 PodGroup's pods too).
GangKey gangKeyOf(const proto::Pod& pod);

// Looks up a PodGroup by namespace and name; nullptr when it does not exist.
using PodGroupLookup =
    std::function<const proto::PodGroup*(std::string_view pod_namespace, std::string_view name)>;

// Looks up a scheduling.k8s.io/v1alpha2 PodGroup; nullptr when it does not exist.
using WorkloadPodGroupLookup = std::function<const proto::WorkloadPodGroup*(
    std::string_view pod_namespace, std::string_view name)>;

// The API a gang's PodGroup belongs to, for messages: "scheduling.k8s.io/v1alpha2", or
// "scheduling.x-k8s.io/v1alpha1".
std::string_view podGroupApiOf(const GangSpec& spec);

// The gang of `pod`. InvalidArgument, with a message for an Event, when an annotation is invalid
// (gang-size not a positive integer, an unknown topology level, ...); the pod is then not
// scheduled.
absl::StatusOr<GangSpec> gangSpecOf(const proto::Pod& pod, const PodGroupLookup& pod_groups,
                                    const SchedulerConfig& config,
                                    const WorkloadPodGroupLookup& workload_pod_groups = {});

}  // namespace muster::scheduler
