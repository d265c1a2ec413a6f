#include "topology/model/topology.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace muster::topology {

std::string_view linkLayerName(LinkLayer layer) {
  switch (layer) {
    case LinkLayer::kInfiniBand: return "InfiniBand";
    case LinkLayer::kEthernet: return "Ethernet";
    case LinkLayer::kUnknown: break;
  }
  return "Unknown";
}

LinkLayer parseLinkLayer(std::string_view text) {
  if (text == "InfiniBand" || text == "IB") return LinkLayer::kInfiniBand;
  if (text == "Ethernet" || text == "RoCE") return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

std::string_view groupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kPCIeSwitch: return "PCIeSwitch";
    case GroupKind::kNUMANode: return "NUMANode";
    case GroupKind::kNode: break;
  }
  return "Node";
}

std::optional<GroupKind> parseGroupKind(std::string_view text) {
  if (text == "PCIeSwitch") return GroupKind::kPCIeSwitch;
  if (text == "NUMANode") return GroupKind::kNUMANode;
  if (text == "Node") return GroupKind::kNode;
  return std::nullopt;
}

const Gpu* Topology::findGpu(int32_t index) const {
  for (const Gpu& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

const RdmaNic* Topology::findNic(std::string_view name) const {
  for (const RdmaNic& n : rdma_nics) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

void computeGroups(Topology* topology) {
  topology->groups.clear();
  std::map<std::string, LocalityGroup> switches;
  std::map<int32_t, LocalityGroup> numa;
  LocalityGroup node{"node", GroupKind::kNode, {}, {}};
  auto switchGroup = [&](const std::string& id) -> LocalityGroup& {
    LocalityGroup& g = switches[id];
    g.id = id;
    g.kind = GroupKind::kPCIeSwitch;
    return g;
  };
  auto numaGroup = [&](int32_t id) -> LocalityGroup& {
    LocalityGroup& g = numa[id];
    g.id = absl::StrCat("numa", id);
    g.kind = GroupKind::kNUMANode;
    return g;
  };
  for (const Gpu& gpu : topology->gpus) {
    if (!gpu.pcie_switch.empty()) switchGroup(gpu.pcie_switch).gpus.push_back(gpu.index);
    if (gpu.numa_node >= 0) numaGroup(gpu.numa_node).gpus.push_back(gpu.index);
    node.gpus.push_back(gpu.index);
  }
  for (const RdmaNic& nic : topology->rdma_nics) {
    if (!nic.pcie_switch.empty()) switchGroup(nic.pcie_switch).rdma_nics.push_back(nic.name);
    if (nic.numa_node >= 0) numaGroup(nic.numa_node).rdma_nics.push_back(nic.name);
    node.rdma_nics.push_back(nic.name);
  }
  for (auto& [id, g] : switches) topology->groups.push_back(std::move(g));
  for (auto& [id, g] : numa) topology->groups.push_back(std::move(g));
  if (!node.gpus.empty() || !node.rdma_nics.empty()) topology->groups.push_back(std::move(node));
}

std::string gpuModelSummary(const Topology& topology) {
  std::set<std::string> models;
  for (const Gpu& g : topology.gpus) models.insert(g.model);
  if (models.empty()) return "";
  return models.size() == 1 ? *models.begin() : "mixed";
}

std::string linkLayerSummary(const Topology& topology) {
  std::set<LinkLayer> layers;
  for (const RdmaNic& n : topology.rdma_nics) layers.insert(n.link_layer);
  if (layers.empty()) return "";
  return layers.size() == 1 ? std::string(linkLayerName(*layers.begin())) : "mixed";
}

proto::NodeTopology toNodeTopology(const Topology& topology, std::string_view node_name,
                                   std::string_view agent_version,
                                   std::string_view discovered_at) {
  proto::NodeTopology out;
  out.meta.name = std::string(node_name);
  proto::NodeTopologySpec& s = out.spec;
  s.node_name = std::string(node_name);
  s.summary.gpus = static_cast<int32_t>(topology.gpus.size());
  s.summary.rdma_nics = static_cast<int32_t>(topology.rdma_nics.size());
  s.summary.gpu_model = gpuModelSummary(topology);
  s.summary.link_layer = linkLayerSummary(topology);
  for (const NumaNode& n : topology.numa_nodes) {
    s.numa_nodes.push_back({n.id, n.cpus, n.memory_bytes});
  }
  for (const Gpu& g : topology.gpus) {
    s.gpus.push_back({g.index, g.bus_id, g.vendor, g.model, g.uuid, g.numa_node, g.pcie_switch,
                      g.os_devices});
  }
  for (const RdmaNic& n : topology.rdma_nics) {
    proto::NodeTopologyRdmaNic& p = s.rdma_nics.emplace_back();
    p.name = n.name;
    p.bus_id = n.bus_id;
    p.model = n.model;
    p.node_guid = n.node_guid;
    p.numa_node = n.numa_node;
    p.pcie_switch = n.pcie_switch;
    p.link_layer = std::string(linkLayerName(n.link_layer));
    p.net_devices = n.net_devices;
    for (const RdmaPort& port : n.ports) {
      p.ports.push_back({port.port, port.state, port.rate_gbps,
                         std::string(linkLayerName(port.link_layer)), port.gid, port.guid});
    }
  }
  for (const LocalityGroup& g : topology.groups) {
    s.groups.push_back({g.id, std::string(groupKindName(g.kind)), g.gpus, g.rdma_nics});
  }
  if (topology.allocatable) {
    proto::NodeTopologyAllocatable& a = s.allocatable.emplace();
    if (topology.allocatable->gpus_known) a.free_gpus = topology.allocatable->gpus;
    if (topology.allocatable->rdma_nics_known) a.free_rdma_nics = topology.allocatable->rdma_nics;
  }
  s.source.agent_version = std::string(agent_version);
  s.source.hwloc_version = topology.hwloc_version;
  s.source.discovered_at = std::string(discovered_at);
  s.source.warnings = topology.warnings;
  return out;
}

absl::StatusOr<Topology> fromNodeTopology(const proto::NodeTopology& object) {
  const proto::NodeTopologySpec& s = object.spec;
  const std::string who = absl::StrCat("NodeTopology ", object.meta.name);
  Topology t;
  for (const auto& n : s.numa_nodes) t.numa_nodes.push_back({n.id, n.cpus, n.memory_bytes});
  std::set<int32_t> gpu_indexes;
  for (const auto& g : s.gpus) {
    if (!gpu_indexes.insert(g.index).second) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": GPU index ", g.index, " twice"));
    }
    t.gpus.push_back({g.index, g.bus_id, g.vendor, g.model, g.uuid, g.numa_node, g.pcie_switch,
                      g.os_devices});
  }
  std::set<std::string> nic_names;
  for (const auto& n : s.rdma_nics) {
    if (!nic_names.insert(n.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": RDMA NIC ", n.name, " twice"));
    }
    RdmaNic& nic = t.rdma_nics.emplace_back();
    nic.name = n.name;
    nic.bus_id = n.bus_id;
    nic.model = n.model;
    nic.node_guid = n.node_guid;
    nic.numa_node = n.numa_node;
    nic.pcie_switch = n.pcie_switch;
    nic.link_layer = parseLinkLayer(n.link_layer);
    nic.net_devices = n.net_devices;
    for (const auto& p : n.ports) {
      RdmaPort& port = nic.ports.emplace_back();
      port.port = p.port;
      port.state = p.state;
      port.rate_gbps = p.rate_gbps;
      port.link_layer = parseLinkLayer(p.link_layer);
      port.gid = p.gid;
      port.guid = p.guid;
    }
  }
  std::sort(t.gpus.begin(), t.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
  std::sort(t.rdma_nics.begin(), t.rdma_nics.end(),
            [](const RdmaNic& a, const RdmaNic& b) { return a.name < b.name; });
  for (const auto& g : s.groups) {
    std::optional<GroupKind> kind = parseGroupKind(g.kind);
    if (!kind) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": group ", g.id, " has unknown kind \"", g.kind, "\""));
    }
    for (int32_t i : g.gpus) {
      if (!gpu_indexes.contains(i)) {
        return absl::InvalidArgumentError(
            absl::StrCat(who, ": group ", g.id, " names GPU ", i, ", which is not listed"));
      }
    }
    for (const std::string& n : g.rdma_nics) {
      if (!nic_names.contains(n)) {
        return absl::InvalidArgumentError(
            absl::StrCat(who, ": group ", g.id, " names RDMA NIC ", n, ", which is not listed"));
      }
    }
    t.groups.push_back({g.id, *kind, g.gpus, g.rdma_nics});
  }
  if (t.groups.empty()) computeGroups(&t);
  if (s.allocatable) {
    FreeDevices& free = t.allocatable.emplace();
    free.gpus_known = s.allocatable->free_gpus.has_value();
    if (free.gpus_known) {
      free.gpus = *s.allocatable->free_gpus;
    } else {
      for (const Gpu& g : t.gpus) free.gpus.push_back(g.index);
    }
    free.rdma_nics_known = s.allocatable->free_rdma_nics.has_value();
    if (free.rdma_nics_known) {
      free.rdma_nics = *s.allocatable->free_rdma_nics;
    } else {
      for (const RdmaNic& n : t.rdma_nics) free.rdma_nics.push_back(n.name);
    }
  }
  t.hwloc_version = s.source.hwloc_version;
  t.warnings = s.source.warnings;
  return t;
}

}  // namespace muster::topology
