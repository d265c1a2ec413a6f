#include "topology/agent/show.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster::topology {
namespace {

// Columns padded to their widest cell, two spaces apart.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string orDash(const std::string& s) { return s.empty() ? "-" : s; }
std::string numa(const Place& p) {
  const std::vector<int32_t> set = p.numaSet();
  return set.empty() ? "-" : absl::StrJoin(set, "+");
}

std::string rateText(double gbps) {
  if (gbps <= 0) return "-";
  std::ostringstream out;
  out << gbps << " Gb/s";
  return out.str();
}

}  // namespace

std::string formatTable(const Topology& t) {
  std::string out;
  absl::StrAppend(&out, "NUMA nodes: ", t.numa_nodes.size(), "\n");
  std::vector<std::vector<std::string>> rows = {{"  NUMA", "CPUS", "MEMORY"}};
  for (const NumaNode& n : t.numa_nodes) {
    rows.push_back({absl::StrCat("  ", n.id), orDash(n.cpus),
                    absl::StrCat(n.memory_bytes / (1024 * 1024 * 1024), " GiB")});
  }
  out += table(rows);

  absl::StrAppend(&out, "\nGPUs: ", t.gpus.size(), "\n");
  if (!t.gpus.empty()) {
    rows = {{"  INDEX", "BUS ID", "VENDOR", "MODEL", "NUMA", "PCIE SWITCH", "ROOT PORT",
             "OS DEVICES", "UUID"}};
    for (const Gpu& g : t.gpus) {
      rows.push_back({absl::StrCat("  ", g.index), g.bus_id, orDash(g.vendor), orDash(g.model),
                      numa(g), orDash(g.pcie_switch), orDash(g.pcie_root),
                      orDash(absl::StrJoin(g.os_devices, ",")), orDash(g.uuid)});
    }
    out += table(rows);
  }

  absl::StrAppend(&out, "\nRDMA NICs: ", t.rdma_nics.size(), "\n");
  if (!t.rdma_nics.empty()) {
    rows = {{"  NAME", "KIND", "BUS ID", "NUMA", "PCIE SWITCH", "ROOT PORT", "PORT", "STATE",
             "LINK", "RATE", "NETDEVS"}};
    for (const RdmaNic& n : t.rdma_nics) {
      const std::string kind(nicKindName(n.kind));
      if (n.ports.empty()) {
        rows.push_back({absl::StrCat("  ", n.name), kind, orDash(n.bus_id), numa(n),
                        orDash(n.pcie_switch), orDash(n.pcie_root), "-", "-",
                        std::string(linkLayerName(n.link_layer)), "-",
                        orDash(absl::StrJoin(n.net_devices, ","))});
      }
      for (const RdmaPort& p : n.ports) {
        rows.push_back({absl::StrCat("  ", n.name), kind, orDash(n.bus_id), numa(n),
                        orDash(n.pcie_switch), orDash(n.pcie_root), std::to_string(p.port),
                        orDash(p.state), std::string(linkLayerName(p.link_layer)),
                        rateText(p.rate_gbps), orDash(absl::StrJoin(n.net_devices, ","))});
      }
    }
    out += table(rows);
  }

  if (!t.gpus.empty() && !t.rdma_nics.empty()) {
    // The NICs rdma-conf picks for each GPU (the closest path), and every path in NCCL's words.
    out += "\nGPU to NIC paths (closest NICs per GPU; PIX < PXB < PHB < NODE < SOC < SYS):\n";
    rows = {{"  GPU", "CLOSEST", "PATH", "ALL"}};
    std::vector<const RdmaNic*> nics;
    for (const RdmaNic& n : t.rdma_nics) nics.push_back(&n);
    for (const Gpu& g : t.gpus) {
      GroupKind best;
      const std::vector<std::string> closest = closestNics(t, g.index, nics, &best);
      std::vector<std::string> all;
      for (const RdmaNic& n : t.rdma_nics) {
        all.push_back(absl::StrCat(n.name, "=", std::string(pathName(pathBetween(t, g.index, n.name)))));
      }
      rows.push_back({absl::StrCat("  ", g.index), absl::StrJoin(closest, ","),
                      std::string(pathName(best)), absl::StrJoin(all, " ")});
    }
    out += table(rows);
  }

  if (!t.groups.empty()) {
    out += "\nLocality groups:\n";
    rows = {{"  KIND", "ID", "GPUS", "RDMA NICS"}};
    for (const LocalityGroup& g : t.groups) {
      rows.push_back({absl::StrCat("  ", std::string(groupKindName(g.kind))), g.id,
                      orDash(absl::StrJoin(g.gpus, ",")), orDash(absl::StrJoin(g.rdma_nics, ","))});
    }
    out += table(rows);
  }

  if (t.allocatable) {
    const FreeDevices& free = *t.allocatable;
    auto list = [](bool known, const auto& items) {
      if (!known) return std::string("not known");
      return items.empty() ? std::string("none") : absl::StrJoin(items, ",");
    };
    out += "\nFree (kubelet pod-resources):\n";
    absl::StrAppend(&out, "  GPUs: ", list(free.gpus_known, free.gpus), "\n");
    absl::StrAppend(&out, "  RDMA NICs: ", list(free.rdma_nics_known, free.rdma_nics), "\n");
  }

  if (!t.warnings.empty()) {
    out += "\nWarnings:\n";
    for (const std::string& w : t.warnings) absl::StrAppend(&out, "  ", w, "\n");
  }
  return out;
}

}  // namespace muster::topology
