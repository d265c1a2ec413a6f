#pragma once

// The shape of a group of a gang's members (placement stage 1, kube-scheduler's PreFilter): what
// one pod of the group asks and which per-node checks it needs, computed once per group from its
// first member. Members with equal requests and node constraints form one group
// (PodInfo::constraint_signature), so what holds for this pod holds for every member of it.
//
// Input: the pod, the cluster cache (for what placed pods and claims mean to it) and the
// placement options. Output: a GroupShape, immutable while the gang is placed; the per-node
// feasibility (feasibility.h) and the fill read it.

#include <array>
#include <cstdint>
#include <optional>

#include "scheduler/cache.h"
#include "scheduler/interpod.h"
#include "scheduler/placement.h"
#include "scheduler/pod_info.h"
#include "scheduler/resources.h"
#include "scheduler/spread.h"
#include "topology/model/affinity.h"

namespace muster::scheduler::placement {

// The non-zero entries of a request, so the per-node loop touches 3-5 resources, not all.
struct SparseRequest {
  std::array<ResourceId, kMaxResources> ids{};
  std::array<int64_t, kMaxResources> amounts{};
  int n = 0;
};

SparseRequest sparse(const Resources& r);

// The device resources placement counts: GPUs of either vendor (a NodeTopology lists both kinds
// as its GPUs) and RDMA NICs; unset until some node advertises them (findResource).
struct DeviceResources {
  std::optional<ResourceId> gpu, amd_gpu, rdma;

  static DeviceResources find();
  int64_t gpusIn(const Resources& r) const {
    return saturatingAdd(gpu ? r[*gpu] : 0, amd_gpu ? r[*amd_gpu] : 0);
  }
};

struct GroupShape {
  const PodInfo* rep = nullptr;  // the first member: the one every check is made with
  SparseRequest req;
  bool has_ports = false;
  bool fast_static = false;  // no nodeName, nodeSelector or required affinity
  topology::DeviceRequest dev;  // GPUs and RDMA NICs per pod
  bool align = false;           // asks for both: GPU↔NIC alignment matters
  // Inter-pod (anti-)affinity against placed pods (nullopt: nothing to check), and whether at most
  // one of the group's pods may share a node (anti-affinity among them on the host).
  std::optional<InterPodFilter> inter;
  bool one_per_node = false;
  // Preferred inter-pod terms in play (scheduler/interpod.h InterPodScore); nullopt: none.
  std::optional<InterPodScore> pod_score;
  // Topology spread constraints (scheduler/spread.h): DoNotSchedule as a filter, ScheduleAnyway
  // as a preference.
  std::optional<SpreadFilter> spread;
  std::optional<SpreadScore> spread_score;
  // A ReadWriteOncePod claim of the group's pods is used by a placed pod: no node will do.
  bool rwop_conflict = false;
  // Its pods have claims to bind (WaitForFirstConsumer): a node takes no more of them than its
  // existing volumes serve where the class cannot provision (staticVolumeRoom).
  bool claims_to_bind = false;
  // Its pods have volumes a CSI driver attaches: a node with a CSINode limit for the driver takes
  // no more of them than the volumes it can still attach (volumeLimitRoom).
  bool csi = false;
  bool prefers = false;  // preferred node affinity or pod_score: nodes are ranked by preference()
};

// The shape of the group whose first member is `pod`. `one_per_node`: the gang's analysis found
// anti-affinity among its members on the host (GangInterPod::one_per_node). `align_required`:
// muster.dev/gpu-nic-affinity: required (alignment is asked even without any NodeTopology).
GroupShape shapeOf(const PodInfo& pod, const ClusterCache& cache, const PlacementOptions& options,
                   const DeviceResources& devices, bool one_per_node, bool align_required);

}  // namespace muster::scheduler::placement
