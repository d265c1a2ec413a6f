#pragma once

// muster.dev/v1alpha1 NodeTopology: the GPU, RDMA NIC, PCIe and NUMA layout of one node, published
// by muster-topology (the node agent) and read by the scheduler. The value types hold every field
// of the CRD (manifests/crds/nodetopologies.muster.dev.yaml); the codec below is the only place
// those JSON field names appear.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "proto/client.h"
#include "proto/json.h"
#include "proto/objects.h"

namespace muster::proto {

namespace resources {
extern const Resource kNodeTopologies;  // muster.dev/v1alpha1 nodetopologies, cluster-scoped
}  // namespace resources

inline constexpr std::string_view kNodeTopologyApiVersion = "muster.dev/v1alpha1";
inline constexpr std::string_view kNodeTopologyKind = "NodeTopology";

struct NodeTopologySummary {
  int32_t gpus = 0;
  int32_t rdma_nics = 0;
  std::string gpu_model;   // all GPUs alike, "mixed" otherwise, "" when none
  std::string link_layer;  // all NICs agree, "mixed" otherwise, "" when none
  bool operator==(const NodeTopologySummary&) const = default;
};

struct NodeTopologyNumaNode {
  int32_t id = 0;
  std::string cpus;  // Linux cpuset list, "0-17,36-53"
  int64_t memory_bytes = 0;
  bool operator==(const NodeTopologyNumaNode&) const = default;
};

// Where a device sits: the ids of the groups it belongs to, one per level (topology/README.md,
// "Paths between GPUs and NICs"). numa_node is the lowest of numa_nodes (-1 when unknown), kept
// for readers of the first schema.
struct NodeTopologyPlace {
  int32_t numa_node = -1;
  std::vector<int32_t> numa_nodes;  // every NUMA node the device is near (HBM/CXL/SNC: several)
  int32_t package = -1;
  std::string pcie_switch;          // PIX: the deepest switch it is behind
  std::string pcie_root;            // PXB: the top PCI bridge above it (root port)
  std::string host_bridge;          // PHB
  bool operator==(const NodeTopologyPlace&) const = default;
};

// The PCIe path from a GPU to one RDMA NIC, in NCCL's words: PIX, PXB, PHB, NODE, SYS (and SOC:
// same socket, which NCCL also calls SYS).
struct NodeTopologyNicPath {
  std::string rdma_nic;
  std::string path;
  bool operator==(const NodeTopologyNicPath&) const = default;
};

struct NodeTopologyGpu {
  int32_t index = 0;
  std::string bus_id;  // "0000:04:00.0"
  std::string vendor;
  std::string model;
  std::string uuid;
  NodeTopologyPlace place;
  std::vector<std::string> os_devices;
  std::vector<NodeTopologyNicPath> nic_paths;
  bool operator==(const NodeTopologyGpu&) const = default;
};

struct NodeTopologyRdmaPort {
  int32_t port = 1;
  std::string state;       // "ACTIVE", "DOWN", ...; "" when unknown
  double rate_gbps = 0;    // 0 when unknown (not written)
  std::string link_layer;  // "InfiniBand", "Ethernet", "Unknown"; "" when not known
  std::string gid;
  std::string guid;
  bool operator==(const NodeTopologyRdmaPort&) const = default;
};

struct NodeTopologyRdmaNic {
  std::string name;  // ibverbs device name, "mlx5_0"
  std::string bus_id;
  std::string model;
  std::string node_guid;
  NodeTopologyPlace place;
  std::string kind;  // "InfiniBand", "RoCE", "EFA", "iWARP", "Unknown"; "" when not written
  std::string link_layer;
  std::vector<std::string> net_devices;
  std::vector<NodeTopologyRdmaPort> ports;
  bool operator==(const NodeTopologyRdmaNic&) const = default;
};

struct NodeTopologyGroup {
  std::string id;
  std::string kind;  // "PCIeSwitch", "PCIeHierarchy", "HostBridge", "NUMANode", "Package", "Node"
  std::vector<int32_t> gpus;
  std::vector<std::string> rdma_nics;
  bool operator==(const NodeTopologyGroup&) const = default;
};

// Each list is absent when the agent could not tell which devices of that kind pods hold (device
// ids it cannot map to the topology): it never lists as free what it cannot vouch for.
struct NodeTopologyAllocatable {
  std::optional<std::vector<int32_t>> free_gpus;
  std::optional<std::vector<std::string>> free_rdma_nics;
  bool operator==(const NodeTopologyAllocatable&) const = default;
};

struct NodeTopologySource {
  std::string agent_version;
  std::string hwloc_version;
  std::string discovered_at;  // RFC 3339
  std::vector<std::string> warnings;
  bool operator==(const NodeTopologySource&) const = default;
};

struct NodeTopologySpec {
  std::string node_name;
  NodeTopologySummary summary;
  std::vector<NodeTopologyNumaNode> numa_nodes;
  std::vector<NodeTopologyGpu> gpus;
  std::vector<NodeTopologyRdmaNic> rdma_nics;
  std::vector<NodeTopologyGroup> groups;
  // Present only when the agent can see device allocations.
  std::optional<NodeTopologyAllocatable> allocatable;
  NodeTopologySource source;
  bool operator==(const NodeTopologySpec&) const = default;
};

struct NodeTopologyStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;
};

struct NodeTopology {
  ObjectMeta meta;
  NodeTopologySpec spec;
  NodeTopologyStatus status;
};

// Same facts: equal except for source.discoveredAt (the agent rewrites a NodeTopology only when
// this is false).
bool sameFacts(const NodeTopologySpec& a, const NodeTopologySpec& b);

// Decoders in codec.h's style: every JSON type checked, errors name the field path, unknown fields
// ignored, absent fields keep their defaults (numaNode -1, as the CRD defaults it).
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeTopology* out);
absl::Status decode(const rapidjson::Value& v, NodeTopology* out);
absl::Status decodeNodeTopologyJson(std::string_view json, NodeTopology* out);

// A whole NodeTopology for POST: apiVersion, kind, metadata (name, labels, annotations) and spec.
std::string encode(const NodeTopology& topology);
// Merge patch {"spec":{...}} that makes the server's spec equal `spec`: every field is written,
// lists whole (a merge patch replaces arrays), absent optional fields as null.
std::string specPatch(const NodeTopologySpec& spec);
// Merge patch for the status subresource, {"status":{"observedGeneration":..,"conditions":[..]}}.
std::string statusPatch(const NodeTopologyStatus& status);

}  // namespace muster::proto
