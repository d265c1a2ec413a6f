#include "topology/agent/rdma_conf.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "topology/discovery/discovery.h"

namespace muster::topology {
namespace fs = std::filesystem;
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> splitList(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) comma = s.size();
    std::string item = trim(s.substr(start, comma - start));
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}


}  // namespace

std::string normalizeBusId(std::string s) { return normalizePciAddress(s); }

namespace {

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const std::string* envValue(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// One GPU id as CUDA and ROCm accept them: an index, a PCI address, a full or unique-prefix UUID
// ("GPU-c52dbede", as CUDA takes it), or a MIG device: "MIG-GPU-<uuid>/<gi>/<ci>" names its parent;
// a bare "MIG-<uuid>" does not, and stands for the GPUs the container sees in /proc (the toolkit
// exposes only the MIG device's parent there).
std::vector<const Gpu*> resolveGpu(const RdmaConfInput& in, const std::string& token,
                                   std::string* why) {
  const Topology& t = in.topology;
  auto byBus = [&](const std::string& bus) -> const Gpu* {
    for (const Gpu& g : t.gpus) {
      if (g.bus_id == normalizeBusId(bus)) return &g;
    }
    return nullptr;
  };
  if (allDigits(token) && token.size() <= 9) {
    const Gpu* g = t.findGpu(static_cast<int32_t>(std::stol(token)));
    return g ? std::vector<const Gpu*>{g} : std::vector<const Gpu*>{};
  }
  std::string uuid = token;
  if (token.rfind("MIG-", 0) == 0) {
    if (token.rfind("MIG-GPU-", 0) == 0) {
      uuid = token.substr(4, token.find('/') == std::string::npos ? std::string::npos
                                                                   : token.find('/') - 4);
    } else {
      std::vector<const Gpu*> parents;
      for (const std::string& bus : in.proc_gpu_bus_ids) {
        if (const Gpu* g = byBus(bus)) parents.push_back(g);
      }
      if (parents.empty()) *why = "a MIG device whose parent GPU is not in /proc/driver/nvidia/gpus";
      return parents;
    }
  }
  if (uuid.rfind("GPU-", 0) == 0) {
    // Every UUID known for a GPU: the topology's, and the driver's /proc entries.
    std::vector<std::pair<std::string, const Gpu*>> known;
    for (const Gpu& g : t.gpus) {
      if (!g.uuid.empty()) known.emplace_back(g.uuid, &g);
    }
    for (const auto& [u, bus] : in.gpu_uuid_to_bus) {
      if (const Gpu* g = byBus(bus)) known.emplace_back(u, g);
    }
    std::set<const Gpu*> matches;
    for (const auto& [u, g] : known) {
      if (u == uuid) return {g};
      if (u.rfind(uuid, 0) == 0) matches.insert(g);
    }
    if (matches.size() == 1) return {*matches.begin()};
    if (matches.size() > 1) *why = "a UUID prefix that matches several GPUs";
    return {};
  }
  if (token.find(':') != std::string::npos) {
    const Gpu* g = byBus(token);
    return g ? std::vector<const Gpu*>{g} : std::vector<const Gpu*>{};
  }
  return {};
}

// The pod's GPUs as topology indexes, from the first of: NVIDIA_VISIBLE_DEVICES,
// CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES (then HIP_VISIBLE_DEVICES picks among those by
// position), HIP_VISIBLE_DEVICES, the driver's /proc entries.
std::vector<int32_t> podGpus(const RdmaConfInput& in, std::vector<std::string>* notes) {
  const Topology& t = in.topology;
  std::vector<std::string> tokens;
  std::string source;
  const std::string* hip = envValue(in.env, "HIP_VISIBLE_DEVICES");
  if (const std::string* v = envValue(in.env, "NVIDIA_VISIBLE_DEVICES")) {
    source = "NVIDIA_VISIBLE_DEVICES";
    const std::string s = trim(*v);
    if (s == "all") {
      std::vector<int32_t> all;
      for (const Gpu& g : t.gpus) all.push_back(g.index);
      return all;
    }
    if (s.empty() || s == "none" || s == "void") return {};
    tokens = splitList(s);
  } else if (const std::string* c = envValue(in.env, "CUDA_VISIBLE_DEVICES")) {
    source = "CUDA_VISIBLE_DEVICES";
    tokens = splitList(*c);
  } else if (const std::string* r = envValue(in.env, "ROCR_VISIBLE_DEVICES")) {
    source = "ROCR_VISIBLE_DEVICES";
    tokens = splitList(*r);
    if (hip != nullptr) {
      std::vector<std::string> picked;
      for (const std::string& h : splitList(*hip)) {
        if (allDigits(h) && h.size() <= 9 && std::stoul(h) < tokens.size()) {
          picked.push_back(tokens[std::stoul(h)]);
        } else {
          notes->push_back(absl::StrCat("HIP_VISIBLE_DEVICES: \"", h, "\" is not a position in "
                                        "ROCR_VISIBLE_DEVICES; ignored"));
        }
      }
      tokens = std::move(picked);
      source = "ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES";
    }
  } else if (hip != nullptr) {
    source = "HIP_VISIBLE_DEVICES";
    tokens = splitList(*hip);
  } else if (!in.proc_gpu_bus_ids.empty()) {
    source = "/proc/driver/nvidia/gpus";
    tokens = in.proc_gpu_bus_ids;
  } else {
    if (!t.gpus.empty()) {
      notes->push_back("no NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, "
                       "HIP_VISIBLE_DEVICES or /proc/driver/nvidia/gpus: the pod's GPUs are "
                       "unknown, every NIC is used");
    }
    return {};
  }
  std::set<int32_t> out;
  for (const std::string& token : tokens) {
    std::string why;
    std::vector<const Gpu*> gpus = resolveGpu(in, token, &why);
    if (gpus.empty()) {
      notes->push_back(absl::StrCat(source, ": GPU \"", token, "\" ",
                                    why.empty() ? "not found in the node's topology" : why,
                                    "; ignored"));
      continue;
    }
    for (const Gpu* g : gpus) out.insert(g->index);
  }
  return {out.begin(), out.end()};
}

// The pod's NICs (names). `explicit_choice` tells whether the pod's env named them.
std::vector<const RdmaNic*> podNics(const RdmaConfInput& in, std::vector<std::string>* notes) {
  const Topology& t = in.topology;
  std::vector<const RdmaNic*> out;
  if (const std::string* v = envValue(in.env, "MUSTER_RDMA_DEVICES")) {
    for (const std::string& name : splitList(*v)) {
      if (const RdmaNic* nic = t.findNic(name)) {
        out.push_back(nic);
      } else {
        notes->push_back(absl::StrCat("MUSTER_RDMA_DEVICES: ", name, " not found; ignored"));
      }
    }
    return out;
  }
  std::set<std::string> pci;
  std::vector<std::string> vars;
  for (const auto& [name, value] : in.env) {
    if (name.rfind("PCIDEVICE_", 0) != 0) continue;
    vars.push_back(name);
    for (const std::string& a : splitList(value)) pci.insert(normalizeBusId(a));
  }
  if (!vars.empty()) {
    for (const RdmaNic& nic : t.rdma_nics) {
      if (!nic.bus_id.empty() && pci.contains(nic.bus_id)) out.push_back(&nic);
    }
    if (out.empty()) {
      notes->push_back(absl::StrCat(absl::StrJoin(vars, ", "),
                                    ": no RDMA device at those PCI addresses"));
    }
    return out;
  }
  for (const RdmaNic& nic : t.rdma_nics) out.push_back(&nic);
  return out;
}

// NCCL's IB transport runs over InfiniBand and RoCE (and is tried on a NIC of unknown kind);
// EFA goes through libfabric; iWARP through neither.
bool takesIbSettings(const RdmaNic& n) {
  return n.kind == NicKind::kInfiniBand || n.kind == NicKind::kRoCE || n.kind == NicKind::kUnknown;
}

std::string placeWords(GroupKind path, const Gpu& g) {
  switch (path) {
    case GroupKind::kPCIeSwitch: return absl::StrCat("PIX, behind PCIe switch ", g.pcie_switch);
    case GroupKind::kPCIeHierarchy: return absl::StrCat("PXB, under root port ", g.pcie_root);
    case GroupKind::kHostBridge: return absl::StrCat("PHB, under host bridge ", g.host_bridge);
    case GroupKind::kNUMANode:
      return absl::StrCat("NODE, on NUMA node ", absl::StrJoin(g.numaSet(), "+"));
    case GroupKind::kPackage: return absl::StrCat("SOC, on package ", g.package);
    case GroupKind::kNode: break;
  }
  return "SYS, on the node";
}

}  // namespace

std::string shellQuote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string shellComment(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "# ";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  out += "\n";
  return out;
}

std::string shellDefault(std::string_view name, std::string_view value) {
  return absl::StrCat("[ -n \"${", std::string(name), ":-}\" ] || ", std::string(name), "=",
                      shellQuote(value), "\nexport ", std::string(name), "\n");
}

absl::StatusOr<RdmaConf> buildRdmaConf(const RdmaConfInput& in) {
  RdmaConf conf;
  const Topology& t = in.topology;
  conf.gpus = podGpus(in, &conf.notes);
  std::vector<const RdmaNic*> nics;
  for (const RdmaNic* nic : podNics(in, &conf.notes)) {
    bool usable = nic->ports.empty();
    for (const RdmaPort& p : nic->ports) usable = usable || p.usable();
    if (!usable) {
      conf.notes.push_back(absl::StrCat(nic->name, ": no ACTIVE port; skipped"));
      continue;
    }
    nics.push_back(nic);
  }
  // NICs NCCL can use: the IB transport's, else EFA's (never both kinds in one file).
  std::vector<const RdmaNic*> ib, efa;
  for (const RdmaNic* n : nics) {
    if (takesIbSettings(*n)) {
      ib.push_back(n);
    } else if (n->kind == NicKind::kEFA) {
      efa.push_back(n);
    } else {
      conf.notes.push_back(absl::StrCat(n->name, ": ", std::string(nicKindName(n->kind)),
                                        " is not used by NCCL; skipped"));
    }
  }
  if (!ib.empty() && !efa.empty()) {
    conf.notes.push_back("EFA devices skipped: the pod also has InfiniBand/RoCE NICs");
  }
  conf.efa = ib.empty() && !efa.empty();
  nics = conf.efa ? efa : ib;
  // For each GPU, the NICs at the closest path it has (PIX, then PXB, PHB, NODE, SOC, SYS);
  // without GPUs, every usable NIC.
  std::set<std::string> chosen;
  std::vector<std::string> why;
  if (conf.gpus.empty()) {
    for (const RdmaNic* n : nics) chosen.insert(n->name);
  } else {
    for (int32_t index : conf.gpus) {
      const Gpu* g = t.findGpu(index);
      if (g == nullptr || nics.empty()) continue;
      GroupKind best;
      const std::vector<std::string> names = closestNics(t, index, nics, &best);
      chosen.insert(names.begin(), names.end());
      why.push_back(absl::StrCat("GPU ", g->index, " (", g->bus_id, "): ",
                                 absl::StrJoin(names, ", "), " (", placeWords(best, *g), ")"));
    }
  }
  std::set<LinkLayer> layers;
  std::set<int32_t> gid_indexes;
  bool gid_unknown = false;
  for (const RdmaNic* n : nics) {
    if (!chosen.contains(n->name)) continue;
    if (conf.efa) {
      conf.efa_devices.push_back(n->name);
      continue;
    }
    bool any_port = false;
    for (const RdmaPort& p : n->ports) {
      if (!p.usable()) continue;
      any_port = true;
      conf.hcas.push_back(absl::StrCat(n->name, ":", p.port));
      layers.insert(p.link_layer);
      if (p.link_layer == LinkLayer::kEthernet) {
        if (p.roce_v2_gid_index >= 0) gid_indexes.insert(p.roce_v2_gid_index);
        else gid_unknown = true;
      }
    }
    if (!any_port) {
      conf.hcas.push_back(absl::StrCat(n->name, ":1"));
      layers.insert(n->link_layer);
      conf.notes.push_back(absl::StrCat(n->name, ": port state unknown; port 1 assumed"));
    }
  }
  conf.roce = layers.size() == 1 && *layers.begin() == LinkLayer::kEthernet;
  if (layers.size() > 1) {
    conf.notes.push_back("the chosen NICs mix link layers; NCCL_IB_GID_INDEX not set");
  }
  if (conf.roce) {
    if (gid_indexes.size() == 1 && !gid_unknown) {
      conf.gid_index = *gid_indexes.begin();
    } else {
      conf.gid_index = 3;
      conf.notes.push_back("RoCE v2 IPv4 GID index not readable or not the same on every port; "
                           "using 3 (the usual one)");
    }
  }
  // NCCL matches NCCL_IB_HCA entries as prefixes (mlx5_1 also selects mlx5_10); when a chosen name
  // is a prefix of another device on the node, ask for exact matching with a leading '='.
  bool exact = false;
  for (const std::string& name : chosen) {
    for (const RdmaNic& other : t.rdma_nics) {
      if (other.name != name && other.name.rfind(name, 0) == 0) exact = true;
    }
  }

  std::string gpus_text = conf.gpus.empty() ? "none known" : "";
  for (int32_t i : conf.gpus) {
    const Gpu* g = t.findGpu(i);
    if (!gpus_text.empty()) gpus_text += ", ";
    gpus_text += absl::StrCat(i, g != nullptr ? absl::StrCat(" (", g->bus_id, ")") : "");
  }
  // Every comment line goes through shellComment: the notes quote the pod's env as written.
  std::string header =
      "# Written by muster-topology rdma-conf for this pod's devices. Values already set in the\n";
  header += shellComment(absl::StrCat("environment are kept. GPUs: ", gpus_text, "."));
  for (const std::string& w : why) header += shellComment(w);
  for (const std::string& n : conf.notes) header += shellComment(absl::StrCat("note: ", n));
  const std::string hca_list = absl::StrJoin(conf.hcas, ",");
  const std::string ifname = in.socket_ifname.empty() ? "^lo,docker" : in.socket_ifname;

  std::string nccl = header;
  const bool gpu = !conf.gpus.empty();
  if (conf.efa) {
    // aws-ofi-nccl (NCCL's net plugin on EFA) reads libfabric's variables; NCCL's IB transport and
    // UCX's rc do not run over EFA.
    nccl += shellComment(absl::StrCat("EFA: ", absl::StrJoin(conf.efa_devices, ","),
                                      " through libfabric (aws-ofi-nccl)"));
    nccl += shellDefault("FI_PROVIDER", "efa");
    if (gpu) nccl += shellDefault("FI_EFA_USE_DEVICE_RDMA", "1");
    nccl += shellDefault("NCCL_IB_DISABLE", "1");
  } else if (conf.hcas.empty()) {
    nccl += "# No RDMA NIC with an active port: NCCL uses sockets.\n";
    nccl += shellDefault("NCCL_IB_DISABLE", "1");
  } else {
    nccl += shellDefault("NCCL_IB_HCA", exact ? "=" + hca_list : hca_list);
    if (conf.gid_index) nccl += shellDefault("NCCL_IB_GID_INDEX", std::to_string(*conf.gid_index));
  }
  nccl += shellDefault("NCCL_SOCKET_IFNAME", ifname);
  conf.nccl = std::move(nccl);

  std::string ucx = header;
  if (conf.efa) {
    ucx += "# EFA: UCX has no transport for it; UCX uses TCP.\n";
    ucx += shellDefault("UCX_TLS", gpu ? "tcp,sm,self,cuda_copy,cuda_ipc" : "tcp,sm,self");
  } else if (conf.hcas.empty()) {
    ucx += "# No RDMA NIC with an active port: UCX uses TCP.\n";
    ucx += shellDefault("UCX_TLS", gpu ? "tcp,sm,self,cuda_copy,cuda_ipc" : "tcp,sm,self");
  } else {
    ucx += shellDefault("UCX_NET_DEVICES", hca_list);
    ucx += shellDefault("UCX_TLS", gpu ? "rc,sm,self,cuda_copy,cuda_ipc" : "rc,sm,self");
    if (conf.gid_index) ucx += shellDefault("UCX_IB_GID_INDEX", std::to_string(*conf.gid_index));
  }
  conf.ucx = std::move(ucx);
  return conf;
}

std::map<std::string, std::string> readNvidiaProcGpus(const std::string& proc_root,
                                                      std::vector<std::string>* bus_ids) {
  std::map<std::string, std::string> out;
  for (const auto& [bus, gpu] : readNvidiaDriverInfo(proc_root)) {
    if (bus_ids != nullptr) bus_ids->push_back(bus);
    if (!gpu.uuid.empty()) out[gpu.uuid] = bus;
  }
  return out;
}

std::string defaultRouteInterface(const std::string& proc_root) {
  std::ifstream in(fs::path(proc_root) / "net" / "route");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string iface, destination, gateway, flags;
    if (!(fields >> iface >> destination >> gateway >> flags)) continue;
    if (destination == "00000000" && iface != "lo") return iface;
  }
  return "";
}

absl::Status writeFileAtomically(const std::string& path, std::string_view text) {
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", target.parent_path().string(), ": ", ec.message()));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace muster::topology
