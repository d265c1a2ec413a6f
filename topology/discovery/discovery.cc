#include "topology/discovery/discovery.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)  // GCC (the ASan build) and recent clang
#define MUSTER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MUSTER_ASAN 1
#endif
#endif
#ifdef MUSTER_ASAN
#include <sanitizer/lsan_interface.h>
#define MUSTER_LSAN_SCOPE() __lsan::ScopedDisabler lsan_disabled_
#endif
#ifndef MUSTER_LSAN_SCOPE
#define MUSTER_LSAN_SCOPE() \
  do {                      \
  } while (false)
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/log.h"

namespace muster::topology {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kClass3D = 0x0302;
constexpr unsigned kClassVga = 0x0300;

struct TopologyDeleter {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v == nullptr ? "" : v;
}

std::string busId(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return absl::StrFormat("%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
}

std::string bitmapList(hwloc_const_bitmap_t set) {
  if (set == nullptr || hwloc_bitmap_iszero(set)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) return "";
  std::string out(text);
  free(text);
  return out;
}

bool isBridgeToPci(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_BRIDGE &&
         obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

// NUMA node OS index of the device's nearest non-I/O ancestor when it covers exactly one node.
int32_t numaOf(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (anc == nullptr || anc->nodeset == nullptr) return -1;
  if (hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

// The PCIe switch a device is behind: the chain of PCI-to-PCI bridges above it, from the root
// port down; the bridge just below the root port is the switch's upstream port. A device straight
// on a root port (or with no bridge above it) is behind no switch.
std::string pcieSwitchOf(hwloc_obj_t obj) {
  std::vector<hwloc_obj_t> chain;  // bottom-up
  for (hwloc_obj_t p = obj->parent; p != nullptr && hwloc_obj_type_is_io(p->type);
       p = p->parent) {
    if (isBridgeToPci(p)) chain.push_back(p);
  }
  if (chain.size() < 2) return "";
  hwloc_obj_t upstream = chain[chain.size() - 2];
  return busId(upstream);
}

// hwloc's OS device index from its name: "cuda3" -> 3.
std::optional<int32_t> osdevIndex(const std::string& name, std::string_view prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  int32_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

struct GpuFound {
  Gpu gpu;
  std::optional<int32_t> cuda, nvml;
};

void warn(Topology* t, std::string message) {
  MUSTER_LOG_WARNING("Topology discovery degraded", "reason", message);
  t->warnings.push_back(std::move(message));
}

// Number of bytes in an address like "80:00:01:05:fe:80:...": 20 for IPoIB, 6 for Ethernet.
size_t addressBytes(const std::string& address) {
  if (address.empty()) return 0;
  return static_cast<size_t>(std::count(address.begin(), address.end(), ':')) + 1;
}

void readGpus(hwloc_topology_t topo, Topology* t) {
  std::vector<GpuFound> found;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const auto& a = pci->attr->pcidev;
    if (a.vendor_id != kNvidiaVendor) continue;
    if (a.class_id != kClass3D && a.class_id != kClassVga) continue;
    GpuFound f;
    f.gpu.bus_id = busId(pci);
    f.gpu.vendor = info(pci, "PCIVendor");
    f.gpu.model = info(pci, "PCIDevice");
    f.gpu.numa_node = numaOf(topo, pci);
    f.gpu.pcie_switch = pcieSwitchOf(pci);
    for (hwloc_obj_t os = pci->io_first_child; os != nullptr; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE || os->name == nullptr) continue;
      const std::string name = os->name;
      f.gpu.os_devices.push_back(name);
      const std::string backend = info(os, "Backend");
      const bool is_cuda = backend == "CUDA" || osdevIndex(name, "cuda").has_value();
      const bool is_nvml = backend == "NVML" || osdevIndex(name, "nvml").has_value();
      if (is_cuda) f.cuda = osdevIndex(name, "cuda");
      if (is_nvml) f.nvml = osdevIndex(name, "nvml");
      if (is_cuda || is_nvml) {
        if (std::string m = info(os, "GPUModel"); !m.empty()) f.gpu.model = m;
        if (std::string v = info(os, "GPUVendor"); !v.empty()) f.gpu.vendor = v;
      }
      if (std::string uuid = info(os, "NVIDIAUUID"); !uuid.empty()) f.gpu.uuid = uuid;
    }
    if (f.gpu.model.empty()) f.gpu.model = absl::StrFormat("NVIDIA %04x", a.device_id);
    if (f.gpu.numa_node < 0) {
      warn(t, absl::StrCat("GPU ", f.gpu.bus_id, ": no NUMA affinity known"));
    }
    found.push_back(std::move(f));
  }
  if (found.empty()) return;
  // Index: NVML's (the device plugin's) when every GPU has one, else CUDA's, else PCI bus order
  // (NVML's default enumeration order).
  auto allHave = [&](auto member) {
    std::set<int32_t> seen;
    for (const GpuFound& f : found) {
      if (!(f.*member) || !seen.insert(*(f.*member)).second) return false;
    }
    return true;
  };
  std::sort(found.begin(), found.end(),
            [](const GpuFound& a, const GpuFound& b) { return a.gpu.bus_id < b.gpu.bus_id; });
  const bool by_nvml = allHave(&GpuFound::nvml);
  const bool by_cuda = !by_nvml && allHave(&GpuFound::cuda);
  if (!by_nvml && !by_cuda) {
    bool any = false;
    for (const GpuFound& f : found) any = any || f.cuda || f.nvml;
    warn(t, any ? "GPU indexes assigned in PCI bus order: not every GPU has a CUDA or NVML "
                  "device in hwloc"
                : "GPU indexes assigned in PCI bus order: hwloc saw no CUDA or NVML devices");
  }
  for (size_t i = 0; i < found.size(); ++i) {
    Gpu g = std::move(found[i].gpu);
    g.index = by_nvml ? *found[i].nvml : by_cuda ? *found[i].cuda : static_cast<int32_t>(i);
    t->gpus.push_back(std::move(g));
  }
  std::sort(t->gpus.begin(), t->gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
}

void readNics(hwloc_topology_t topo, Topology* t) {
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topo, os)) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr) continue;
    RdmaNic nic;
    nic.name = os->name;
    nic.node_guid = info(os, "NodeGUID");
    hwloc_obj_t pci = os->parent;
    size_t ipoib = 0, ethernet = 0;
    if (pci != nullptr && pci->type == HWLOC_OBJ_PCI_DEVICE) {
      nic.bus_id = busId(pci);
      nic.model = info(pci, "PCIDevice");
      nic.pcie_switch = pcieSwitchOf(pci);
      for (hwloc_obj_t sib = pci->io_first_child; sib != nullptr; sib = sib->next_sibling) {
        if (sib->type != HWLOC_OBJ_OS_DEVICE || sib->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK ||
            sib->name == nullptr) {
          continue;
        }
        nic.net_devices.push_back(sib->name);
        const size_t bytes = addressBytes(info(sib, "Address"));
        if (bytes == 20) ++ipoib;
        if (bytes == 6) ++ethernet;
      }
    } else {
      warn(t, absl::StrCat("RDMA NIC ", nic.name, ": no PCI device above it in hwloc (software "
                           "RDMA?); no PCIe locality"));
    }
    nic.numa_node = numaOf(topo, os);
    if (nic.numa_node < 0) warn(t, absl::StrCat("RDMA NIC ", nic.name, ": no NUMA affinity known"));
    // Ports as hwloc's Linux backend recorded them (Port<N>State = ibv_port_state number).
    for (int p = 1; p <= 16; ++p) {
      const std::string state = info(os, absl::StrCat("Port", p, "State").c_str());
      const std::string gid = info(os, absl::StrCat("Port", p, "GID0").c_str());
      if (state.empty() && gid.empty()) continue;
      RdmaPort port;
      port.port = p;
      static const char* const kStates[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE",
                                            "ACTIVE_DEFER"};
      if (state.size() == 1 && state[0] >= '0' && state[0] <= '5') port.state = kStates[state[0] - '0'];
      port.gid = gid;
      // A 20-byte hardware address on the NIC's interface is IPoIB: the port is InfiniBand.
      if (ipoib > 0 && ethernet == 0) port.link_layer = LinkLayer::kInfiniBand;
      if (ethernet > 0 && ipoib == 0) port.link_layer = LinkLayer::kEthernet;
      if (port.link_layer == LinkLayer::kInfiniBand && gid.size() == 39) port.guid = gid.substr(20);
      nic.ports.push_back(std::move(port));
    }
    t->rdma_nics.push_back(std::move(nic));
  }
}

// Completes NIC facts from the providers (first that knows a device wins), adds devices that
// hwloc did not show, and derives each NIC's link layer from its ports.
void mergeProviders(const std::vector<VerbsProvider*>& providers, Topology* t) {
  std::set<std::string> done;
  for (VerbsProvider* provider : providers) {
    if (provider == nullptr) continue;
    absl::StatusOr<std::vector<RdmaDeviceInfo>> devices = provider->devices();
    if (!devices.ok()) {
      MUSTER_LOG_INFO(3, "RDMA provider sees no devices", "provider", provider->name(), "reason",
                      devices.status().message());
      continue;
    }
    for (RdmaDeviceInfo& d : *devices) {
      if (done.contains(d.name)) continue;
      RdmaNic* nic = nullptr;
      for (RdmaNic& n : t->rdma_nics) {
        if (n.name == d.name) nic = &n;
      }
      if (nic == nullptr) {
        t->rdma_nics.emplace_back().name = d.name;
        nic = &t->rdma_nics.back();
        nic->bus_id = d.bus_id;
        nic->numa_node = d.numa_node;
        warn(t, absl::StrCat("RDMA NIC ", d.name, " seen by ", provider->name(),
                             " but not by hwloc: no PCIe switch locality",
                             d.numa_node >= 0 ? "" : " and no NUMA locality"));
      }
      if (d.ports.empty() && !nic->ports.empty()) continue;  // provider could not open it
      done.insert(d.name);
      if (!d.node_guid.empty()) nic->node_guid = d.node_guid;
      if (nic->model.empty()) nic->model = d.model;
      if (nic->net_devices.empty()) nic->net_devices = d.net_devices;
      if (!d.ports.empty()) nic->ports = std::move(d.ports);
    }
  }
  for (RdmaNic& nic : t->rdma_nics) {
    std::set<LinkLayer> layers;
    for (const RdmaPort& p : nic.ports) layers.insert(p.link_layer);
    nic.link_layer = layers.size() == 1 ? *layers.begin() : LinkLayer::kUnknown;
    if (nic.ports.empty()) {
      warn(t, absl::StrCat("RDMA NIC ", nic.name, ": no port information (no libibverbs access, "
                           "no sysfs entry, none recorded by hwloc)"));
    } else if (nic.link_layer == LinkLayer::kUnknown) {
      warn(t, absl::StrCat("RDMA NIC ", nic.name, ": link layer unknown"));
    }
  }
  std::sort(t->rdma_nics.begin(), t->rdma_nics.end(),
            [](const RdmaNic& a, const RdmaNic& b) { return a.name < b.name; });
}

}  // namespace

std::string hwlocVersion() {
  const unsigned v = hwloc_get_api_version();
  return absl::StrCat(v >> 16, ".", (v >> 8) & 0xff, ".", v & 0xff);
}

absl::StatusOr<Topology> discover(const DiscoveryOptions& options) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return absl::InternalError(absl::StrCat("hwloc_topology_init: ", std::strerror(errno)));
  }
  TopologyHandle topo(raw);
  // Without this hwloc drops every PCI and OS device: no GPU, no NIC.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!options.hwloc_xml.empty() && hwloc_topology_set_xml(raw, options.hwloc_xml.c_str()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hwloc cannot read XML ", options.hwloc_xml,
                                                   ": ", std::strerror(errno)));
  }
  {
    // Sanitizer builds: hwloc 2.9's PCI plugin keeps ~1 KiB per load that LeakSanitizer cannot
    // attribute (the plugin is unloaded again); not Muster's to free.
    MUSTER_LSAN_SCOPE();
    if (hwloc_topology_load(raw) != 0) {
      return absl::InternalError(absl::StrCat("hwloc_topology_load: ", std::strerror(errno)));
    }
  }
  Topology t;
  t.hwloc_version = hwlocVersion();
  for (hwloc_obj_t n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
       n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, n)) {
    NumaNode numa;
    numa.id = static_cast<int32_t>(n->os_index);
    numa.cpus = bitmapList(n->cpuset);
    numa.memory_bytes = static_cast<int64_t>(n->attr->numanode.local_memory);
    t.numa_nodes.push_back(std::move(numa));
  }
  std::sort(t.numa_nodes.begin(), t.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  if (hwloc_get_next_pcidev(raw, nullptr) == nullptr) {
    warn(&t, "hwloc found no PCI devices (no I/O discovery: missing /sys/bus/pci, or an XML "
             "export without I/O objects)");
  }
  readGpus(raw, &t);
  readNics(raw, &t);
  mergeProviders(options.providers, &t);
  computeGroups(&t);
  MUSTER_LOG_INFO(3, "Discovered topology", "numaNodes", t.numa_nodes.size(), "gpus",
                  t.gpus.size(), "rdmaNics", t.rdma_nics.size(), "groups", t.groups.size(),
                  "warnings", t.warnings.size());
  return t;
}

}  // namespace muster::topology
