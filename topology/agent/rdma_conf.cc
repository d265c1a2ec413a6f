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

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string normalizeBusId(std::string s) {
  s = lower(trim(s));
  const size_t colon = s.find(':');
  if (colon != std::string::npos && colon > 4) {
    const std::string domain = s.substr(0, colon);
    const size_t nz = domain.find_first_not_of('0');
    std::string d = nz == std::string::npos ? "0" : domain.substr(nz);
    while (d.size() < 4) d.insert(d.begin(), '0');
    s = d + s.substr(colon);
  }
  return s;
}

namespace {

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const std::string* envValue(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// The pod's GPUs as topology indexes.
std::vector<int32_t> podGpus(const RdmaConfInput& in, std::vector<std::string>* notes) {
  const Topology& t = in.topology;
  std::vector<std::string> tokens;
  std::string source;
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
  } else if (!in.proc_gpu_bus_ids.empty()) {
    source = "/proc/driver/nvidia/gpus";
    tokens = in.proc_gpu_bus_ids;
  } else {
    if (!t.gpus.empty()) {
      notes->push_back("no NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES or "
                       "/proc/driver/nvidia/gpus: the pod's GPUs are unknown, every NIC is used");
    }
    return {};
  }
  std::set<int32_t> out;
  for (const std::string& token : tokens) {
    const Gpu* gpu = nullptr;
    if (allDigits(token) && token.size() <= 9) {
      gpu = t.findGpu(static_cast<int32_t>(std::stol(token)));
    } else if (token.rfind("GPU-", 0) == 0) {
      for (const Gpu& g : t.gpus) {
        if (g.uuid == token) gpu = &g;
      }
      if (gpu == nullptr) {
        if (auto it = in.gpu_uuid_to_bus.find(token); it != in.gpu_uuid_to_bus.end()) {
          for (const Gpu& g : t.gpus) {
            if (g.bus_id == normalizeBusId(it->second)) gpu = &g;
          }
        }
      }
    } else if (token.find(':') != std::string::npos) {
      for (const Gpu& g : t.gpus) {
        if (g.bus_id == normalizeBusId(token)) gpu = &g;
      }
    }
    if (gpu == nullptr) {
      notes->push_back(absl::StrCat(source, ": GPU \"", token,
                                    "\" not found in the node's topology; ignored"));
      continue;
    }
    out.insert(gpu->index);
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

int closeness(const Gpu& g, const RdmaNic& n) {
  if (!g.pcie_switch.empty() && g.pcie_switch == n.pcie_switch) return 0;
  if (g.numa_node >= 0 && g.numa_node == n.numa_node) return 1;
  return 2;
}

constexpr const char* kClosenessWords[] = {"behind PCIe switch", "on NUMA node", "on the node"};

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
  // For each GPU, the NICs at the closest level it has; without GPUs, every usable NIC.
  std::set<std::string> chosen;
  std::vector<std::string> why;
  if (conf.gpus.empty()) {
    for (const RdmaNic* n : nics) chosen.insert(n->name);
  } else {
    for (int32_t index : conf.gpus) {
      const Gpu* g = t.findGpu(index);
      if (g == nullptr || nics.empty()) continue;
      int best = 3;
      for (const RdmaNic* n : nics) best = std::min(best, closeness(*g, *n));
      std::vector<std::string> names;
      for (const RdmaNic* n : nics) {
        if (closeness(*g, *n) == best) {
          chosen.insert(n->name);
          names.push_back(n->name);
        }
      }
      std::string where = best == 0   ? absl::StrCat(" ", g->pcie_switch)
                          : best == 1 ? absl::StrCat(" ", g->numa_node)
                                      : "";
      why.push_back(absl::StrCat("GPU ", g->index, " (", g->bus_id, "): ", absl::StrJoin(names, ", "),
                                 " ", kClosenessWords[best], where));
    }
  }
  std::set<LinkLayer> layers;
  std::set<int32_t> gid_indexes;
  bool gid_unknown = false;
  for (const RdmaNic* n : nics) {
    if (!chosen.contains(n->name)) continue;
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
  if (conf.hcas.empty()) {
    nccl += "# No RDMA NIC with an active port: NCCL uses sockets.\n";
    nccl += shellDefault("NCCL_IB_DISABLE", "1");
  } else {
    nccl += shellDefault("NCCL_IB_HCA", exact ? "=" + hca_list : hca_list);
    if (conf.gid_index) nccl += shellDefault("NCCL_IB_GID_INDEX", std::to_string(*conf.gid_index));
  }
  nccl += shellDefault("NCCL_SOCKET_IFNAME", ifname);
  conf.nccl = std::move(nccl);

  std::string ucx = header;
  const bool gpu = !conf.gpus.empty();
  if (conf.hcas.empty()) {
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
  const fs::path dir = fs::path(proc_root) / "driver" / "nvidia" / "gpus";
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    const std::string bus = normalizeBusId(p.filename().string());
    if (bus_ids != nullptr) bus_ids->push_back(bus);
    std::ifstream in(p / "information");
    std::string line;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      if (trim(line.substr(0, colon)) == "GPU UUID") out[trim(line.substr(colon + 1))] = bus;
    }
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
