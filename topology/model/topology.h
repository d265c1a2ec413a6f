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

// What an RDMA NIC is, which decides what rdma-conf writes for it: InfiniBand and RoCE take the
// NCCL_IB_* / UCX rc settings; EFA takes libfabric's (aws-ofi-nccl); iWARP and Unknown take none
// (NCCL's IB transport does not run over them: sockets).
enum class NicKind { kUnknown, kInfiniBand, kRoCE, kEFA, kIWARP };
std::string_view nicKindName(NicKind kind);  // "InfiniBand", "RoCE", "EFA", "iWARP", "Unknown"
NicKind parseNicKind(std::string_view text);

struct NumaNode {
  int32_t id = 0;          // OS index
  std::string cpus;        // Linux cpuset list, "0-17,36-53"
  int64_t memory_bytes = 0;
};

// Where a device sits, one id per level of the PCIe tree (see GroupKind). Empty ids: not known
// (an export without I/O bridges, a NIC hwloc did not see).
struct Place {
  int32_t numa_node = -1;          // lowest of numa_nodes; -1: unknown
  std::vector<int32_t> numa_nodes; // the nodeset of its nearest CPU-side object: one node, or
                                   // several (DDR + HBM in flat mode, CXL); empty when unknown
                                   // or when it spans packages
  int32_t package = -1;
  std::string pcie_switch;  // PIX id: the bridge above the downstream port the device hangs on
                            // (its switch's upstream port), or its parent bridge when there is
                            // only one (a root port); "" when no PCI bridge is above it
  std::string pcie_root;    // PXB id: the topmost PCI bridge above it (the root port)
  std::string host_bridge;  // PHB id: "0000:[80-84]" (domain and bus range)

  // numa_nodes, or {numa_node} for objects written before sets existed.
  std::vector<int32_t> numaSet() const;
};

enum class Vendor { kOther, kNvidia, kAmd };

struct Gpu : Place {
  int32_t index = 0;       // the device plugin's index (NVML's / ROCm SMI's)
  std::string bus_id;      // "0000:04:00.0"
  std::string vendor;      // "NVIDIA", "AMD", else the PCI vendor name
  std::string model;
  std::string uuid;        // "GPU-…" (NVIDIA), when NVML or the driver reported it
  std::vector<std::string> os_devices;  // cuda0, nvml0, rsmi0, opencl0d0
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

struct RdmaNic : Place {
  std::string name;        // ibverbs device, "mlx5_0", "rdmap0s6"
  std::string bus_id;
  std::string model;
  std::string node_guid;
  NicKind kind = NicKind::kUnknown;
  LinkLayer link_layer = LinkLayer::kUnknown;  // of its ports when they agree
  std::vector<std::string> net_devices;        // "ib0", "hsi0", "enp1s0f0"
  std::vector<RdmaPort> ports;
};

// The levels of closeness inside a node, tightest first, with NCCL's name for a GPU↔NIC path whose
// tightest shared group is of that kind (topology/README.md, "Paths between GPUs and NICs"):
//   PCIeSwitch     PIX  the same deepest PCIe switch (at most one bridge on each side)
//   PCIeHierarchy  PXB  under the same root port, across switches (no host bridge crossed)
//   HostBridge     PHB  under the same host bridge (PCIe root complex)
//   NUMANode       NODE near a common NUMA node (devices near several are merged into one group)
//   Package        SYS  the same socket (NCCL calls this SYS too; "SOC" here)
//   Node           SYS  anywhere in the node
enum class GroupKind { kPCIeSwitch, kPCIeHierarchy, kHostBridge, kNUMANode, kPackage, kNode };
inline constexpr int kGroupKinds = 6;
std::string_view groupKindName(GroupKind kind);  // "PCIeSwitch", "PCIeHierarchy", ...
std::optional<GroupKind> parseGroupKind(std::string_view text);
// "PIX", "PXB", "PHB", "NODE", "SOC", "SYS".
std::string_view pathName(GroupKind kind);

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

// Rebuilds topology->groups from the devices' places: one group per PCIe switch, root port, host
// bridge, NUMA set (NUMA nodes that some device is near together are one group), package, and one
// Node group, each listing its GPUs and NICs and present only when it has a device. Within a kind
// the groups are disjoint; each group lies inside one group of every looser kind.
void computeGroups(Topology* topology);

// The tightest kind of group that holds both devices (kNode when no tighter one does).
GroupKind pathBetween(const Topology& topology, int32_t gpu, std::string_view nic);

// The NICs among `candidates` on the closest path from GPU `gpu` (in the candidates' order), and
// that path in *path; none when there are no candidates. What rdma-conf picks and show prints.
std::vector<std::string> closestNics(const Topology& topology, int32_t gpu,
                                     const std::vector<const RdmaNic*>& candidates,
                                     GroupKind* path);

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
