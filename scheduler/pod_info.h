#pragma once

// What the scheduler derives once from a pod and reuses on every attempt: its key, requests, host
// ports, priority, and a signature of its node constraints (so members of a gang with the same
// requests and constraints are filtered once, not once per pod).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/objects.h"
#include "scheduler/resources.h"

namespace muster::scheduler {

// "namespace/name".
std::string podKey(const proto::Pod& pod);

// A host port a pod uses on its node. `ip` "" is normalised to "0.0.0.0", `protocol` "" to "TCP".
struct HostPort {
  std::string ip;
  std::string protocol;
  int32_t port = 0;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// The host ports of every container (hostNetwork pods use their container ports as host ports).
std::vector<HostPort> hostPortsOf(const proto::Pod& pod);
// NodePorts' conflict rule: same protocol and port, and the addresses equal or either 0.0.0.0.
bool conflicts(const HostPort& a, const HostPort& b);

// A PersistentVolume that a claim waiting for its first consumer could be bound to.
struct CandidateVolume {
  std::string name;
  std::string resource_version;  // the precondition of the claimRef write
  std::optional<proto::NodeSelector> node_affinity;  // spec.nodeAffinity.required
};

// A PersistentVolumeClaim of a pending pod, and what it asks of a node: a bound claim's
// PersistentVolume's node affinity; for a claim whose StorageClass binds WaitForFirstConsumer
// and that is not bound yet (`to_bind`), the volumes it could be bound to or whether its class
// can provision one reachable from the node.
struct VolumeConstraint {
  std::string claim;   // the claim's name, in the pod's namespace
  std::string volume;  // the PersistentVolume it is bound to
  bool found = false;  // the PersistentVolume exists
  std::optional<proto::NodeSelector> node_affinity;  // spec.nodeAffinity.required
  // The claim's access modes include ReadWriteOncePod: no other placed pod may use it.
  bool read_write_once_pod = false;

  bool to_bind = false;
  std::string claim_uid{};
  // Matching unbound volumes (class, access modes, volume mode, size, selector), a volume
  // pre-bound to the claim first, then smallest first.
  std::vector<CandidateVolume> candidates{};
  // The class has a provisioner (not kubernetes.io/no-provisioner) and the claim no selector.
  bool provisionable = false;
  std::optional<proto::NodeSelector> provision_topology{};  // the class's allowedTopologies
  std::string selected_node{};  // volume.kubernetes.io/selected-node already on the claim
  // The CSI driver that attaches it (its volume's, or its class's provisioner while it is
  // unbound; in-tree plugins by the driver they migrate to): node volume limits count it.
  std::string csi_driver{};
};

struct PodInfo {
  std::string key;
  // The pod as the informer's store holds it, shared rather than copied: a pending pod's PodInfo
  // lives as long as the pod waits, beside the store's copy.
  std::shared_ptr<const proto::Pod> shared_pod;
  const proto::Pod& pod() const { return *shared_pod; }
  Resources requests;
  // Resources requested that no node advertised when this was made (requests[kUnadvertised] is 1
  // then), sorted; and how many names were interned then: once more are, the queue makes the
  // PodInfo again (a node advertising one of them may have appeared).
  std::vector<std::string> unadvertised;
  int resource_count = 0;
  std::vector<HostPort> host_ports;
  // The pod's claims whose volumes constrain its node (filterVolumeBinding).
  std::vector<VolumeConstraint> volumes;
  int32_t priority = 0;
  // Equal for two pods exactly when their requests, host ports, nodeName, nodeSelector, node
  // affinity, volumes and tolerations are equal.
  std::string constraint_signature;
  // requiredGpuModels(pod).
  std::vector<std::string> gpu_models;
  // gpuFractionMilli(pod): thousandths of one GPU, 0 for a pod that asks for no fraction.
  int32_t gpu_milli = 0;
  // Fast-path flags for filtering.
  bool has_node_selector = false;  // nodeSelector, required node affinity or volume constraints
  bool has_preferred_affinity = false;
};
using PodInfoPtr = std::shared_ptr<const PodInfo>;

// InvalidArgument when the pod's requests cannot be tracked (see podRequests).
// `volumes`: what the pod's bound claims ask of a node (from the claim and volume caches).
absl::StatusOr<PodInfoPtr> makePodInfo(std::shared_ptr<const proto::Pod> pod,
                                       std::vector<VolumeConstraint> volumes = {});
// The same for a pod no store holds (tests, benchmarks, a pod with defaults filled in).
absl::StatusOr<PodInfoPtr> makePodInfo(proto::Pod pod, std::vector<VolumeConstraint> volumes = {});

// The fraction of one GPU the pod asks for with muster.dev/gpu-fraction, in thousandths (rounded
// up): 1..999; 0 without the annotation. InvalidArgument, naming the annotation, when the value is
// not a quantity, is not above 0 and below 1, or the pod also requests whole nvidia.com/gpu.
absl::StatusOr<int32_t> gpuFractionMilli(const proto::Pod& pod);
// The GPU index the scheduler wrote to muster.dev/gpu-index (a non-negative integer), if any.
std::optional<int32_t> gpuIndexOf(const proto::Pod& pod);

// Succeeded or Failed: no longer holds resources on its node.
bool isTerminal(const proto::Pod& pod);

// Its nodeSelector and required node affinity as text: equal for pods that may use the same nodes
// by them (a part of constraint_signature).
std::string nodeAffinitySignature(const proto::Pod& pod);

// The GPU models the pod's nodeSelector or required node affinity restricts it to (the node label
// muster.dev/gpu.model or nvidia.com/gpu.product): any of them. Empty when it does not (a term
// of its required affinity without such a restriction lets it go anywhere).
std::vector<std::string> requiredGpuModels(const proto::Pod& pod);

}  // namespace muster::scheduler
