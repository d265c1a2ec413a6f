#pragma once

// Per-node feasibility (placement stage 2, kube-scheduler's Filter): how many pods of a group
// (gang_shape.h) a node can take now. It applies every per-node rule: the node's static filters
// (taints, selectors, affinity, readiness), the gang's required topology label, nodes reserved
// for other gangs, inter-pod terms against placed pods, DoNotSchedule spread against placed pods,
// host ports, the room nominated pods of the group's priority or more hold, resources (and GPU
// fractions), one pod per node where the gang asks it, volumes (claims to bind, CSI attach
// limits, ReadWriteOncePod) and required GPU↔NIC alignment. Device allocation by claim goes here,
// beside the device counting.
//
// Inputs: the cluster cache and the gang's request (its required level, blocked nodes and
// members, whose own nominations do not hold room against them), and per question a group's shape
// and what the fill has tentatively put on the node (`extra` resources and host ports; volumes
// by driver). Output: numbers and yes/no; nothing here changes the cache, and it keeps no state
// between questions but the blocked-node flags it sets up and clears on destruction.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "scheduler/placement/gang_shape.h"

namespace muster::scheduler::placement {

inline constexpr int64_t kUnlimited = std::numeric_limits<int32_t>::max();

// What other groups of the gang put on a node in a fill, for the CSI attach limits: volumes per
// driver, and the shared claims already counted (each is attached once).
struct VolumesAdded {
  absl::flat_hash_map<std::string, int64_t> by_driver;
  absl::flat_hash_set<std::string> shared_keys;
};

// A pod's CSI volumes on one driver: those its group shares (bound claims not yet attached on the
// node; each attached once) and those each pod brings (claims to bind, inline volumes).
struct DriverVolumes {
  std::string driver;
  int64_t shared = 0;
  int64_t own = 0;
};

// The pod's volumes the node does not attach yet, for the drivers the node limits. Shared claims
// already in `shared_keys` are not counted again; those counted are added to it.
std::vector<DriverVolumes> newVolumes(const PodInfo& pod, const NodeInfo& n,
                                      absl::flat_hash_set<std::string>* shared_keys = nullptr);

// How many pods like `pod` the node's existing volumes can serve where its claims to bind cannot
// be provisioned on the node.
int64_t staticVolumeRoom(const PodInfo& pod, const NodeInfo& n);

// How many pods asking `req` fit in the node's free room, less `extra` (kUnlimited for an empty
// request).
inline int64_t capacityOn(const SparseRequest& req, const NodeInfo& n, const Resources* extra) {
  int64_t cap = kUnlimited;
  for (int i = 0; i < req.n; ++i) {
    ResourceId id = req.ids[i];
    int64_t f = n.freeOf(id);
    if (extra) f = saturatingSub(f, (*extra)[id]);
    int64_t a = req.amounts[i];
    if (f < a) return 0;
    int64_t c = f / a;
    if (c < cap) cap = c;
  }
  return cap;
}

// Whether a domain's summed free room (Domain::free) could hold one pod asking `req`: the cheap
// test that skips whole domains without visiting their nodes.
inline bool sumFits(const SparseRequest& req, const Resources& free) {
  for (int i = 0; i < req.n; ++i) {
    if (free[req.ids[i]] < req.amounts[i]) return false;
  }
  return true;
}

class NodeFeasibility {
 public:
  NodeFeasibility(const ClusterCache& cache, const GangRequest& request, const DeviceResources& devices);
  ~NodeFeasibility();
  NodeFeasibility(const NodeFeasibility&) = delete;
  NodeFeasibility& operator=(const NodeFeasibility&) = delete;

  // How many of the group's pods node `id` can take now, with `extra` resources and
  // `extra_ports` tentatively placed there by the groups before it (null: none).
  int32_t capacity(const GroupShape& g, NodeId id, const Resources* extra = nullptr,
                   const std::vector<HostPort>* extra_ports = nullptr) const;
  // Whether node `id` takes one pod of the group (capacity(g, id) >= 1, checked cheapest first).
  bool fitsOne(const GroupShape& g, NodeId id) const;
  // GPU↔NIC alignment of the group's pods on a node, with `extra` tentatively placed there too.
  AlignedCapacity alignedOn(const GroupShape& g, const NodeInfo& n, const Resources* extra) const;
  // How many pods like `pod` the node can still attach the CSI volumes of (its CSINode limits):
  // claims already attached there or shared by the pods count once, a claim still to bind and an
  // inline volume once per pod. `added`: what the groups before it in a fill add there.
  int64_t volumeLimitRoom(const PodInfo& pod, const NodeInfo& n,
                          const VolumesAdded* added = nullptr) const;
  // Room held on `n` for pods nominated there with the group's priority or more (not this gang's).
  Resources heldFor(const GroupShape& g, const NodeInfo& n) const;
  // The gang's required level is set and the node has no label for it.
  bool lacksRequiredLabel(NodeId id) const;
  // The node is reserved for another gang (GangRequest::blocked_nodes).
  bool blocked(NodeId id) const;
  bool anyBlocked() const { return !blocked_ids_.empty(); }
  bool alignRequired() const { return align_required_; }

 private:
  const ClusterCache& cache_;
  const Topology& topo_;
  const int levels_;
  const int required_level_;
  const bool align_required_;
  const DeviceResources devices_;
  absl::flat_hash_set<std::string> member_keys_;  // filled only when pods are nominated
  std::vector<NodeId> blocked_ids_;
};

}  // namespace muster::scheduler::placement
