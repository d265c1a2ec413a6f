#pragma once

// GPU↔RDMA NIC locality inside nodes, as the scheduler sees it (DESIGN.md §5; issue 6).
//
// The node agent (muster-topology) publishes one NodeTopology per node: its GPUs, RDMA NICs and
// which of them share a PCIe switch or a NUMA node. The scheduler never runs hwloc; it turns each
// NodeTopology into a NodeDevices (topology/model's DeviceLocality) and asks one question of it:
// how many more pods asking for g GPUs and r NICs each can still get GPUs and NICs that are close
// together (AlignedCapacity), given what is in use on the node.
//
// What is in use. The scheduler knows how many GPUs and NICs the pods on a node request (the
// cache), not which ones the kubelet gave them:
// - When the agent published the free devices (spec.allocatable, read from the kubelet's
//   pod-resources API), those are the truth; pods the agent has not seen yet (the scheduler's
//   count is higher than the agent's) are taken out of them as the kubelet would allocate them.
// - Otherwise the devices in use are modelled as one allocation of that many GPUs and NICs, made
//   as the kubelet's Topology Manager makes it: as few PCIe switches (else NUMA nodes) as possible.
// Either way it is an estimate of what the kubelet will do; the kubelet must run the Topology
// Manager (topology/README.md, "On the node: Topology Manager and free devices") for the
// alignment to hold on the node.
//
// A pod is aligned when every GPU it gets has one of its NICs close by, at one of three tiers
// (topology/README.md, "Paths between GPUs and NICs", has the mapping): behind the same deepest
// PCIe switch (PIX), under the same root port (PXB: NCCL still uses GPUDirect RDMA up to here by
// default), or on the same NUMA node (NODE, which includes the same host bridge). Only pods asking
// for both a GPU resource (nvidia.com/gpu or amd.com/gpu) and preferred.jp/rdma are concerned.
//
// Thread-safety: NodeDevices is immutable except for an internal memo behind a mutex; share it.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/nodetopology.h"
#include "topology/model/affinity.h"
#include "topology/model/topology.h"

namespace muster::scheduler {

namespace vocab = proto::vocabulary;  // the names Muster uses on API objects


// muster.dev/gpu-nic-affinity on a pod or its PodGroup. Preferred is the default: inside the
// network domain the gang gets, nodes where its pods can be aligned come first. Required: a pod
// asking for GPUs and NICs goes only to a node where they can be aligned (same PCIe switch or same
// NUMA node: at most NODE); a node without a NodeTopology does not qualify.
enum class GpuNicAffinity { kPreferred, kRequired };

// How many more pods of one shape can be aligned on a node: `pcie` of them at most PXB apart
// (GPUDirect RDMA), `numa` (which includes those) at most NODE apart, `pix` (among `pcie`) behind
// one deepest switch. Allocating them one after another, best first, as the kubelet would.
struct AlignedCapacity {
  int32_t pcie = 0;
  int32_t numa = 0;
  int32_t pix = 0;
  friend bool operator==(const AlignedCapacity&, const AlignedCapacity&) = default;
};

class NodeDevices {
 public:
  // InvalidArgument (from topology::fromNodeTopology) when the object is inconsistent.
  static absl::StatusOr<std::shared_ptr<const NodeDevices>> fromNodeTopology(
      const proto::NodeTopology& object);
  explicit NodeDevices(topology::Topology topology);

  int32_t gpuCount() const { return static_cast<int32_t>(topology_.gpus.size()); }
  int32_t nicCount() const { return static_cast<int32_t>(topology_.rdma_nics.size()); }
  bool publishesFreeDevices() const { return topology_.allocatable.has_value(); }
  // Equal for two nodes exactly when every answer of alignedCapacity() is: the devices, their
  // grouping and the published free devices (not bus ids, GUIDs or models). Nodes of one hardware
  // model share one NodeDevices (ClusterCache::setNodeDevices), and so one memo.
  const std::string& shapeKey() const { return shape_key_; }

  // For pods asking for `per_pod` (both counts > 0) each, with `used_gpus` / `used_nics` already
  // requested on the node by the pods the scheduler knows of.
  AlignedCapacity alignedCapacity(const topology::DeviceRequest& per_pod, int64_t used_gpus,
                                  int64_t used_nics) const;

 private:
  AlignedCapacity compute(const topology::DeviceRequest& per_pod, int64_t used_gpus,
                          int64_t used_nics) const;

  topology::Topology topology_;
  topology::DeviceLocality locality_;
  std::string shape_key_;
  mutable std::mutex mu_;
  mutable absl::flat_hash_map<uint64_t, AlignedCapacity> memo_;
};

// "required" / "preferred"; InvalidArgument naming the annotation otherwise.
absl::StatusOr<GpuNicAffinity> parseGpuNicAffinity(std::string_view value);

}  // namespace muster::scheduler
