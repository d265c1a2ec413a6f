#include "topology/discovery/discovery.h"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
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
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "proto/log.h"
#include "proto/strings.h"

namespace muster::topology {
namespace fs = std::filesystem;
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kAmdVendor = 0x1002;
constexpr unsigned kAmazonVendor = 0x1d0f;
constexpr unsigned kClassVga = 0x0300;
constexpr unsigned kClassAccelerator = 0x1200;  // processing accelerator (some AMD Instinct)

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

// Where a PCI device (or an OS device's PCI parent) sits. The PCI bridge chain above it, bottom
// up, is [downstream port, switch upstream port, ..., root port]: the switch (PIX) is the bridge two
// up (the upstream port above the downstream port the device hangs on) or the only one; the
// hierarchy (PXB) is the topmost. NUMA: the nodeset of the nearest non-I/O ancestor, unless it
// spans packages (then unknown: such a device is attached at the machine level).
Place placeOf(hwloc_topology_t topo, hwloc_obj_t obj) {
  Place p;
  std::vector<hwloc_obj_t> chain;  // bottom-up
  hwloc_obj_t host = nullptr;
  for (hwloc_obj_t a = obj->parent; a != nullptr && hwloc_obj_type_is_io(a->type); a = a->parent) {
    if (isBridgeToPci(a)) chain.push_back(a);
    if (a->type == HWLOC_OBJ_BRIDGE && a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      host = a;
    }
  }
  if (!chain.empty()) {
    p.pcie_switch = busId(chain.size() >= 2 ? chain[1] : chain[0]);
    p.pcie_root = busId(chain.back());
  }
  if (host != nullptr) {
    const auto& d = host->attr->bridge.downstream.pci;
    p.host_bridge = absl::StrFormat("%04x:[%02x-%02x]", d.domain, d.secondary_bus,
                                    d.subordinate_bus);
  }
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (anc == nullptr || anc->nodeset == nullptr) return p;
  hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, anc);
  if (pkg == nullptr && anc->type == HWLOC_OBJ_PACKAGE) pkg = anc;
  // Above the packages (a board holding several, or the machine): local to one only when the
  // machine has just one.
  if (pkg == nullptr && hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE) == 1) {
    pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
  }
  if (pkg != nullptr) p.package = static_cast<int32_t>(pkg->os_index);
  // Every NUMA node of the nodeset, unless they belong to different packages (a device attached
  // at the machine level of a multi-socket box is near none of them in particular).
  std::set<hwloc_obj_t> packages;
  for (int n = hwloc_bitmap_first(anc->nodeset); n >= 0; n = hwloc_bitmap_next(anc->nodeset, n)) {
    p.numa_nodes.push_back(n);
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(n));
    if (node != nullptr) {
      packages.insert(hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, node));
    }
  }
  if (p.numa_nodes.size() > 1 && packages.size() > 1) p.numa_nodes.clear();
  if (!p.numa_nodes.empty()) p.numa_node = p.numa_nodes.front();
  return p;
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
  Vendor vendor = Vendor::kOther;
  std::optional<int32_t> cuda, nvml, rsmi;
  int rsmi_devices = 0;  // several: a partitioned GPU (MI300 in CPX mode), one per partition
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

// A GPU: NVIDIA or AMD, display class (0x03xx) or processing accelerator (0x1200). An AMD VGA
// (class 0x0300) counts only with a compute OS device (rsmi, OpenCL): servers carry old ATI VGA
// chips for their consoles.
std::optional<Vendor> gpuVendor(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  const bool display = (a.class_id >> 8) == 0x03 || a.class_id == kClassAccelerator;
  if (!display) return std::nullopt;
  if (a.vendor_id == kNvidiaVendor) return Vendor::kNvidia;
  if (a.vendor_id != kAmdVendor) return std::nullopt;
  if (a.class_id != kClassVga) return Vendor::kAmd;
  for (hwloc_obj_t os = pci->io_first_child; os != nullptr; os = os->next_sibling) {
    if (os->type == HWLOC_OBJ_OS_DEVICE && os->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) {
      return Vendor::kAmd;
    }
  }
  return std::nullopt;
}

// Index: the device plugin's. NVIDIA: NVML's (nvmlN) when every GPU has one, else CUDA's, else
// PCI bus order (NVML's default enumeration). AMD: ROCm SMI's (rsmiN), else PCI bus order. A node
// with both numbers the NVIDIA GPUs first.
void numberGpus(std::vector<GpuFound> found, Vendor vendor, Topology* t) {
  std::erase_if(found, [&](const GpuFound& f) { return f.vendor != vendor; });
  if (found.empty()) return;
  auto allHave = [&](auto member) {
    std::set<int32_t> seen;
    for (const GpuFound& f : found) {
      if (!(f.*member) || !seen.insert(*(f.*member)).second) return false;
    }
    return true;
  };
  const bool nvidia = vendor == Vendor::kNvidia;
  const bool by_nvml = nvidia && allHave(&GpuFound::nvml);
  const bool by_cuda = nvidia && !by_nvml && allHave(&GpuFound::cuda);
  const bool partitioned = std::any_of(found.begin(), found.end(),
                                       [](const GpuFound& f) { return f.rsmi_devices > 1; });
  const bool by_rsmi = !nvidia && !partitioned && allHave(&GpuFound::rsmi);
  if (partitioned) {
    warn(t, "AMD GPU indexes assigned in PCI bus order: the GPUs are partitioned (several ROCm "
            "SMI devices each)");
  } else if (!by_nvml && !by_cuda && !by_rsmi) {
    bool any = false;
    for (const GpuFound& f : found) any = any || f.cuda || f.nvml || f.rsmi;
    const char* what = nvidia ? "CUDA or NVML" : "ROCm SMI";
    warn(t, any ? absl::StrCat(nvidia ? "NVIDIA" : "AMD", " GPU indexes assigned in PCI bus "
                               "order: not every GPU has a ", what, " device in hwloc")
                : absl::StrCat(nvidia ? "NVIDIA" : "AMD", " GPU indexes assigned in PCI bus "
                               "order: hwloc saw no ", what, " devices"));
  }
  const int32_t base = static_cast<int32_t>(t->gpus.size());
  for (size_t i = 0; i < found.size(); ++i) {
    Gpu g = std::move(found[i].gpu);
    g.index = base + (by_nvml   ? *found[i].nvml
                      : by_cuda ? *found[i].cuda
                      : by_rsmi ? *found[i].rsmi
                                : static_cast<int32_t>(i));
    t->gpus.push_back(std::move(g));
  }
  std::sort(t->gpus.begin() + base, t->gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
}

void readGpus(hwloc_topology_t topo, const NvidiaDriverInfo& driver, Topology* t) {
  std::vector<GpuFound> found;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const std::optional<Vendor> vendor = gpuVendor(pci);
    if (!vendor) continue;
    const auto& a = pci->attr->pcidev;
    GpuFound f;
    f.vendor = *vendor;
    static_cast<Place&>(f.gpu) = placeOf(topo, pci);
    f.gpu.bus_id = busId(pci);
    f.gpu.vendor = *vendor == Vendor::kNvidia ? "NVIDIA" : "AMD";
    f.gpu.model = info(pci, "PCIDevice");
    bool compute_model = false;  // the model came from CUDA, NVML or ROCm SMI (beats OpenCL's)
    for (hwloc_obj_t os = pci->io_first_child; os != nullptr; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE || os->name == nullptr) continue;
      const std::string name = os->name;
      f.gpu.os_devices.push_back(name);
      const std::string backend = info(os, "Backend");
      const bool is_cuda = backend == "CUDA" || osdevIndex(name, "cuda").has_value();
      const bool is_nvml = backend == "NVML" || osdevIndex(name, "nvml").has_value();
      const bool is_rsmi = backend == "RSMI" || osdevIndex(name, "rsmi").has_value();
      if (is_cuda) f.cuda = osdevIndex(name, "cuda");
      if (is_nvml) f.nvml = osdevIndex(name, "nvml");
      if (is_rsmi) {
        f.rsmi = osdevIndex(name, "rsmi");
        ++f.rsmi_devices;
      }
      if (is_cuda || is_nvml || is_rsmi) {
        if (std::string m = info(os, "GPUModel"); !m.empty()) f.gpu.model = m;
        compute_model = true;
      } else if (backend == "OpenCL" && !compute_model) {
        if (std::string m = info(os, "GPUModel"); !m.empty()) f.gpu.model = m;
      }
      if (std::string uuid = info(os, "NVIDIAUUID"); !uuid.empty()) f.gpu.uuid = uuid;
      if (std::string uuid = info(os, "AMDUUID");
          !uuid.empty() && uuid.find_first_not_of('0') != std::string::npos) {
        f.gpu.uuid = uuid;
      }
    }
    if (auto it = driver.find(f.gpu.bus_id); it != driver.end()) {
      if (!it->second.model.empty()) f.gpu.model = it->second.model;
      if (f.gpu.uuid.empty()) f.gpu.uuid = it->second.uuid;
    }
    if (f.gpu.model.empty()) f.gpu.model = absl::StrFormat("%s %04x", f.gpu.vendor, a.device_id);
    if (f.gpu.numa_nodes.empty()) {
      warn(t, absl::StrCat("GPU ", f.gpu.bus_id, ": no NUMA affinity known"));
    }
    found.push_back(std::move(f));
  }
  std::sort(found.begin(), found.end(),
            [](const GpuFound& a, const GpuFound& b) { return a.gpu.bus_id < b.gpu.bus_id; });
  numberGpus(found, Vendor::kNvidia, t);
  numberGpus(std::move(found), Vendor::kAmd, t);
}

// PCI vendor of each NIC's adapter, as hwloc saw it (Amazon's is EFA).
using NicVendors = std::map<std::string, unsigned>;

void readNics(hwloc_topology_t topo, Topology* t, NicVendors* vendors) {
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topo, os)) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr) continue;
    RdmaNic nic;
    nic.name = os->name;
    nic.node_guid = info(os, "NodeGUID");
    hwloc_obj_t pci = os->parent;
    size_t ipoib = 0, ethernet = 0;
    if (pci != nullptr && pci->type == HWLOC_OBJ_PCI_DEVICE) {
      static_cast<Place&>(nic) = placeOf(topo, pci);
      nic.bus_id = busId(pci);
      nic.model = info(pci, "PCIDevice");
      (*vendors)[nic.name] = pci->attr->pcidev.vendor_id;
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
      static_cast<Place&>(nic) = placeOf(topo, os);
      warn(t, absl::StrCat("RDMA NIC ", nic.name, ": no PCI device above it in hwloc (software "
                           "RDMA?); no PCIe locality"));
    }
    if (nic.numa_nodes.empty()) warn(t, absl::StrCat("RDMA NIC ", nic.name, ": no NUMA affinity known"));
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
      if (std::string layer = info(os, absl::StrCat("Port", p, "LinkLayer").c_str());
          !layer.empty()) {
        port.link_layer = parseLinkLayer(layer);
      }
      if (port.link_layer == LinkLayer::kInfiniBand && gid.size() == 39) port.guid = gid.substr(20);
      nic.ports.push_back(std::move(port));
    }
    t->rdma_nics.push_back(std::move(nic));
  }
}

// Completes NIC facts from the providers (first that knows a device wins), adds devices that
// hwloc did not show, and derives each NIC's link layer from its ports.
// What a NIC is: the provider's word for EFA and iWARP (driver, transport), else an Amazon adapter
// or an EFA device name ("rdmap0s31", "efa_0") is EFA, else the ports' link layer tells
// InfiniBand from RoCE.
NicKind kindOf(const RdmaNic& nic, NicKind provider_kind, const NicVendors& vendors) {
  if (provider_kind == NicKind::kEFA || provider_kind == NicKind::kIWARP) return provider_kind;
  auto v = vendors.find(nic.name);
  if ((v != vendors.end() && v->second == kAmazonVendor) || nic.name.rfind("rdmap", 0) == 0 ||
      nic.name.rfind("efa", 0) == 0) {
    return NicKind::kEFA;
  }
  if (nic.link_layer == LinkLayer::kInfiniBand) return NicKind::kInfiniBand;
  if (nic.link_layer == LinkLayer::kEthernet) return NicKind::kRoCE;
  return provider_kind;
}

void mergeProviders(const std::vector<VerbsProvider*>& providers, const NicVendors& vendors,
                    Topology* t) {
  std::set<std::string> done;
  std::map<std::string, NicKind> provider_kinds;
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
        if (d.numa_node >= 0) nic->numa_nodes = {d.numa_node};
        warn(t, absl::StrCat("RDMA NIC ", d.name, " seen by ", provider->name(),
                             " but not by hwloc: no PCIe switch locality",
                             d.numa_node >= 0 ? "" : " and no NUMA locality"));
      }
      if (d.kind != NicKind::kUnknown) provider_kinds.try_emplace(d.name, d.kind);
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
    auto pk = provider_kinds.find(nic.name);
    nic.kind = kindOf(nic, pk == provider_kinds.end() ? NicKind::kUnknown : pk->second, vendors);
    if (nic.ports.empty()) {
      warn(t, absl::StrCat("RDMA NIC ", nic.name, ": no port information (no libibverbs access, "
                           "no sysfs entry, none recorded by hwloc)"));
    } else if (nic.link_layer == LinkLayer::kUnknown && nic.kind != NicKind::kEFA) {
      warn(t, absl::StrCat("RDMA NIC ", nic.name, ": link layer unknown"));
    }
  }
  std::sort(t->rdma_nics.begin(), t->rdma_nics.end(),
            [](const RdmaNic& a, const RdmaNic& b) { return a.name < b.name; });
}

}  // namespace

std::string loadedHwlocVersion();

std::string hwlocVersion() {
  static const std::string version = loadedHwlocVersion();
  return version;
}

std::string loadedHwlocVersion() {
  // The library's release ("2.9.0"), which hwloc records on the root of every topology it loads;
  // hwloc_get_api_version() is the API level (2.8.0 for 2.9.x), not the release.
  hwloc_topology_t raw = nullptr;
  std::string out;
  if (hwloc_topology_init(&raw) == 0) {
    TopologyHandle topo(raw);
    hwloc_topology_set_synthetic(raw, "node:1 pu:1");
    if (hwloc_topology_load(raw) == 0) out = info(hwloc_get_root_obj(raw), "hwlocVersion");
  }
  if (!out.empty()) return out;
  const unsigned v = hwloc_get_api_version();
  return absl::StrCat("API ", v >> 16, ".", (v >> 8) & 0xff, ".", v & 0xff);
}

NvidiaDriverInfo readNvidiaDriverInfo(const std::string& proc_root) {
  NvidiaDriverInfo out;
  if (proc_root.empty()) return out;
  const fs::path dir = fs::path(proc_root) / "driver" / "nvidia" / "gpus";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    NvidiaDriverGpu gpu;
    std::ifstream in(it->path() / "information");
    std::string line;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key(absl::StripAsciiWhitespace(line.substr(0, colon)));
      const std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      if (key == "Model") gpu.model = value;
      if (key == "GPU UUID") gpu.uuid = value;
    }
    out[normalizePciAddress(it->path().filename().string())] = std::move(gpu);
  }
  return out;
}

std::string normalizePciAddress(std::string_view text) {
  std::string s(absl::StripAsciiWhitespace(proto::av(text)));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t colon = s.find(':');
  if (colon != std::string::npos && colon > 4) {  // "00000000:04:00.0" (nvidia-smi, /proc)
    const std::string domain = s.substr(0, colon);
    const size_t nz = domain.find_first_not_of('0');
    std::string d = nz == std::string::npos ? "0" : domain.substr(nz);
    while (d.size() < 4) d.insert(d.begin(), '0');
    s = d + s.substr(colon);
  }
  return s;
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
  readGpus(raw, readNvidiaDriverInfo(options.proc_root), &t);
  NicVendors vendors;
  readNics(raw, &t, &vendors);
  mergeProviders(options.providers, vendors, &t);
  computeGroups(&t);
  MUSTER_LOG_INFO(3, "Discovered topology", "numaNodes", t.numa_nodes.size(), "gpus",
                  t.gpus.size(), "rdmaNics", t.rdma_nics.size(), "groups", t.groups.size(),
                  "warnings", t.warnings.size());
  return t;
}

}  // namespace muster::topology
