#pragma once

// The node's device layout as Muster reasons about it: NUMA nodes, GPUs, RDMA NICs with their
// ports, and locality groups (devices behind one PCIe switch, on one NUMA node, on the node).
// Pure C++: the agent fills it from hwloc/ibverbs (topology/discovery), the scheduler from the
// NodeTopology object (fromNodeTopology). Words are hwloc's (NUMANode, PCIDev, OSDev).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/nodetopology.h"

namespace muster::topology {

enum class LinkLayer { kUnknown, kInfiniBand, kEthernet };
// "InfiniBand", "Ethernet", "Unknown" (the CRD's enum).
std::string_view linkLayerName(LinkLayer layer);
// Accepts the CRD's names and sysfs/ibverbs spellings ("InfiniBand", "Ethernet"); else kUnknown.
LinkLayer parseLinkLayer(std::string_view text);

struct NumaNode {
  int32_t id = 0;          // OS index
  std::string cpus;        // Linux cpuset list, "0-17,36-53"
  int64_t memory_bytes = 0;
};

struct Gpu {
  int32_t index = 0;       // the device plugin's / NVML's index
  std::string bus_id;      // "0000:04:00.0"
  std::string vendor;
  std::string model;
  std::string uuid;        // "GPU-…", when NVML reported it
  int32_t numa_node = -1;  // -1: unknown
  std::string pcie_switch; // upstream port bus id of the switch it is behind; "" when none
  std::vector<std::string> os_devices;  // cuda0, nvml0, opencl0d0
};

struct RdmaPort {
  int32_t port = 1;
  std::string state;       // "ACTIVE", "DOWN", "INIT", "ARMED", ...; "" when unknown
  double rate_gbps = 0;    // 0 when unknown
  LinkLayer link_layer = LinkLayer::kUnknown;
  std::string gid;         // GID 0
  std::string guid;        // port GUID (low 64 bits of GID 0 on InfiniBand)
  int32_t roce_v2_gid_index = -1;  // GID table index of a RoCE v2 IPv4 GID, when known

  // ACTIVE, or state unknown (then the port is assumed usable).
  bool usable() const { return state.empty() || state == "ACTIVE"; }
};

struct RdmaNic {
  std::string name;        // ibverbs device, "mlx5_0"
  std::string bus_id;
  std::string model;
  std::string node_guid;
  int32_t numa_node = -1;
  std::string pcie_switch;
  LinkLayer link_layer = LinkLayer::kUnknown;  // of its ports when they agree
  std::vector<std::string> net_devices;        // "ib0", "hsi0", "enp1s0f0"
  std::vector<RdmaPort> ports;
};

enum class GroupKind { kPCIeSwitch, kNUMANode, kNode };
std::string_view groupKindName(GroupKind kind);  // "PCIeSwitch", "NUMANode", "Node"
std::optional<GroupKind> parseGroupKind(std::string_view text);

struct LocalityGroup {
  std::string id;          // switch upstream port bus id, "numa<N>", "node"
  GroupKind kind = GroupKind::kNode;
  std::vector<int32_t> gpus;          // Gpu::index
  std::vector<std::string> rdma_nics; // RdmaNic::name
};

// Devices that no pod holds; known only where the kubelet's pod-resources API can be read.
// A kind the agent could not account for (device ids it cannot map to the topology) is not
// published: its `*_known` is false and its list names every device of that kind, so a reader
// that takes the lists as they are (the scheduler) falls back, for that kind, to counting
// requests exactly as it does without `allocatable`.
struct FreeDevices {
  std::vector<int32_t> gpus;
  std::vector<std::string> rdma_nics;
  bool gpus_known = true;
  bool rdma_nics_known = true;
  bool operator==(const FreeDevices&) const = default;
};

struct Topology {
  std::vector<NumaNode> numa_nodes;
  std::vector<Gpu> gpus;           // sorted by index
  std::vector<RdmaNic> rdma_nics;  // sorted by name
  std::vector<LocalityGroup> groups;
  std::optional<FreeDevices> allocatable;
  std::string hwloc_version;
  std::vector<std::string> warnings;  // what could not be determined, for a person

  const Gpu* findGpu(int32_t index) const;
  const RdmaNic* findNic(std::string_view name) const;
};

// Rebuilds topology->groups from the devices' pcie_switch and numa_node: one PCIeSwitch group per
// switch, one NUMANode group per NUMA node, one Node group, each listing its GPUs and NICs and
// present only when it has a device. Within a kind the groups are disjoint.
void computeGroups(Topology* topology);

// "Tesla P100-PCIE-16GB" when all GPUs have that model, "mixed" when they differ, "" when none.
std::string gpuModelSummary(const Topology& topology);
// "InfiniBand" / "Ethernet" / "Unknown" when every NIC agrees, "mixed" otherwise, "" when none.
std::string linkLayerSummary(const Topology& topology);

// The NodeTopology object for `node_name` (meta.name == spec.nodeName) with summary filled in.
proto::NodeTopology toNodeTopology(const Topology& topology, std::string_view node_name,
                                   std::string_view agent_version,
                                   std::string_view discovered_at);
// Back from the object. Checks what the scheduler relies on: unique GPU indexes and NIC names,
// groups naming only listed devices, known group kinds. Groups are taken as published; if none
// were published they are computed from the devices.
absl::StatusOr<Topology> fromNodeTopology(const proto::NodeTopology& object);

}  // namespace muster::topology
