#include "topology/model/topology.h"

#include <algorithm>
#include <array>
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

std::string_view nicKindName(NicKind kind) {
  switch (kind) {
    case NicKind::kInfiniBand: return "InfiniBand";
    case NicKind::kRoCE: return "RoCE";
    case NicKind::kEFA: return "EFA";
    case NicKind::kIWARP: return "iWARP";
    case NicKind::kUnknown: break;
  }
  return "Unknown";
}

NicKind parseNicKind(std::string_view text) {
  for (NicKind k : {NicKind::kInfiniBand, NicKind::kRoCE, NicKind::kEFA, NicKind::kIWARP}) {
    if (text == nicKindName(k)) return k;
  }
  return NicKind::kUnknown;
}

namespace {
constexpr std::string_view kGroupKindNames[kGroupKinds] = {
    "PCIeSwitch", "PCIeHierarchy", "HostBridge", "NUMANode", "Package", "Node"};
constexpr std::string_view kPathNames[kGroupKinds] = {"PIX", "PXB", "PHB", "NODE", "SOC", "SYS"};
}  // namespace

std::string_view groupKindName(GroupKind kind) {
  return kGroupKindNames[static_cast<int>(kind)];
}

std::optional<GroupKind> parseGroupKind(std::string_view text) {
  for (int k = 0; k < kGroupKinds; ++k) {
    if (text == kGroupKindNames[k]) return static_cast<GroupKind>(k);
  }
  return std::nullopt;
}

std::string_view pathName(GroupKind kind) { return kPathNames[static_cast<int>(kind)]; }

std::vector<int32_t> Place::numaSet() const {
  if (!numa_nodes.empty()) return numa_nodes;
  if (numa_node >= 0) return {numa_node};
  return {};
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

namespace {

// NUMA nodes that some device is near together: union-find over the devices' NUMA sets. The
// group of a device is named after its component, "numa0" or "numa0+2".
class NumaComponents {
 public:
  void add(const std::vector<int32_t>& set) {
    for (int32_t n : set) parent_.try_emplace(n, n);
    for (size_t i = 1; i < set.size(); ++i) parent_[find(set[i])] = find(set[0]);
  }
  std::string idOf(const std::vector<int32_t>& set) {
    if (set.empty()) return "";
    const int32_t root = find(set[0]);
    std::vector<int32_t> members;
    for (const auto& [n, p] : parent_) {
      if (find(n) == root) members.push_back(n);
    }
    std::string id = "numa";
    for (size_t i = 0; i < members.size(); ++i) absl::StrAppend(&id, i ? "+" : "", members[i]);
    return id;
  }

 private:
  int32_t find(int32_t n) {
    while (parent_[n] != n) n = parent_[n] = parent_[parent_[n]];
    return n;
  }
  std::map<int32_t, int32_t> parent_;  // ordered: ids list their members in order
};

// The group ids of a device, one per kind ("" = in no group of that kind): the switch's bus id,
// "rootport-<bus id>", "hostbridge-<domain>:[<buses>]", "numa0" or "numa0+2", "package0", "node".
std::array<std::string, kGroupKinds> groupIds(const Place& p, NumaComponents& numa) {
  // Ids are unique across kinds (the CRD keys groups by id): a root port can be a device's
  // PCIeSwitch group and its PCIeHierarchy group at once.
  return {p.pcie_switch,
          p.pcie_root.empty() ? "" : absl::StrCat("rootport-", p.pcie_root),
          p.host_bridge.empty() ? "" : absl::StrCat("hostbridge-", p.host_bridge),
          numa.idOf(p.numaSet()),
          p.package >= 0 ? absl::StrCat("package", p.package) : "",
          "node"};
}

}  // namespace

void computeGroups(Topology* topology) {
  topology->groups.clear();
  NumaComponents numa;
  for (const Gpu& g : topology->gpus) numa.add(g.numaSet());
  for (const RdmaNic& n : topology->rdma_nics) numa.add(n.numaSet());
  std::map<std::string, LocalityGroup> by_kind[kGroupKinds];
  auto groupOf = [&](int kind, const std::string& id) -> LocalityGroup& {
    LocalityGroup& g = by_kind[kind][id];
    g.id = id;
    g.kind = static_cast<GroupKind>(kind);
    return g;
  };
  for (const Gpu& gpu : topology->gpus) {
    const auto ids = groupIds(gpu, numa);
    for (int k = 0; k < kGroupKinds; ++k) {
      if (!ids[k].empty()) groupOf(k, ids[k]).gpus.push_back(gpu.index);
    }
  }
  for (const RdmaNic& nic : topology->rdma_nics) {
    const auto ids = groupIds(nic, numa);
    for (int k = 0; k < kGroupKinds; ++k) {
      if (!ids[k].empty()) groupOf(k, ids[k]).rdma_nics.push_back(nic.name);
    }
  }
  for (auto& kind : by_kind) {
    for (auto& [id, g] : kind) topology->groups.push_back(std::move(g));
  }
}

GroupKind pathBetween(const Topology& topology, int32_t gpu, std::string_view nic) {
  GroupKind best = GroupKind::kNode;
  for (const LocalityGroup& g : topology.groups) {
    if (g.kind < best && std::find(g.gpus.begin(), g.gpus.end(), gpu) != g.gpus.end() &&
        std::find(g.rdma_nics.begin(), g.rdma_nics.end(), nic) != g.rdma_nics.end()) {
      best = g.kind;
    }
  }
  return best;
}

std::vector<std::string> closestNics(const Topology& topology, int32_t gpu,
                                     const std::vector<const RdmaNic*>& candidates,
                                     GroupKind* path) {
  std::vector<std::pair<GroupKind, const RdmaNic*>> paths;
  GroupKind best = GroupKind::kNode;
  for (const RdmaNic* n : candidates) {
    paths.emplace_back(pathBetween(topology, gpu, n->name), n);
    best = std::min(best, paths.back().first);
  }
  std::vector<std::string> out;
  for (const auto& [kind, n] : paths) {
    if (kind == best) out.push_back(n->name);
  }
  *path = best;
  return out;
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

namespace {

proto::NodeTopologyPlace toProto(const Place& p) {
  proto::NodeTopologyPlace out;
  out.numa_nodes = p.numaSet();
  out.numa_node = out.numa_nodes.empty() ? -1 : out.numa_nodes.front();
  out.package = p.package;
  out.pcie_switch = p.pcie_switch;
  out.pcie_root = p.pcie_root;
  out.host_bridge = p.host_bridge;
  return out;
}

void fromProto(const proto::NodeTopologyPlace& p, Place* out) {
  out->numa_nodes = p.numa_nodes;
  if (out->numa_nodes.empty() && p.numa_node >= 0) out->numa_nodes = {p.numa_node};
  std::sort(out->numa_nodes.begin(), out->numa_nodes.end());
  out->numa_node = out->numa_nodes.empty() ? -1 : out->numa_nodes.front();
  out->package = p.package;
  out->pcie_switch = p.pcie_switch;
  out->pcie_root = p.pcie_root;
  out->host_bridge = p.host_bridge;
}

}  // namespace

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
    proto::NodeTopologyGpu& p = s.gpus.emplace_back();
    p.index = g.index;
    p.bus_id = g.bus_id;
    p.vendor = g.vendor;
    p.model = g.model;
    p.uuid = g.uuid;
    p.place = toProto(g);
    p.os_devices = g.os_devices;
    for (const RdmaNic& n : topology.rdma_nics) {
      p.nic_paths.push_back({n.name, std::string(pathName(pathBetween(topology, g.index, n.name)))});
    }
  }
  for (const RdmaNic& n : topology.rdma_nics) {
    proto::NodeTopologyRdmaNic& p = s.rdma_nics.emplace_back();
    p.name = n.name;
    p.bus_id = n.bus_id;
    p.model = n.model;
    p.node_guid = n.node_guid;
    p.place = toProto(n);
    p.kind = std::string(nicKindName(n.kind));
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
    Gpu& gpu = t.gpus.emplace_back();
    fromProto(g.place, &gpu);
    gpu.index = g.index;
    gpu.bus_id = g.bus_id;
    gpu.vendor = g.vendor;
    gpu.model = g.model;
    gpu.uuid = g.uuid;
    gpu.os_devices = g.os_devices;
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
    fromProto(n.place, &nic);
    nic.link_layer = parseLinkLayer(n.link_layer);
    // Objects of the first schema have no kind: their link layer tells IB from RoCE.
    nic.kind = !n.kind.empty()                            ? parseNicKind(n.kind)
               : nic.link_layer == LinkLayer::kInfiniBand ? NicKind::kInfiniBand
               : nic.link_layer == LinkLayer::kEthernet   ? NicKind::kRoCE
                                                          : NicKind::kUnknown;
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
