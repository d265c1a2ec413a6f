#pragma once

// Builders that make topologies read like the machines they describe:
//   node().gpu(0, "sw0", 0).nic("mlx5_0", "sw0", 0).build()

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "topology/model/topology.h"

namespace muster::topology::testing {

class TopologyBuilder {
 public:
  TopologyBuilder& gpu(int32_t index, std::string pcie_switch, int32_t numa,
                       std::string model = "NVIDIA H100 80GB HBM3") {
    Gpu g;
    g.index = index;
    g.bus_id = busId(index, 0x10);
    g.model = std::move(model);
    g.vendor = "NVIDIA Corporation";
    g.pcie_switch = std::move(pcie_switch);
    g.numa_node = numa;
    t_.gpus.push_back(std::move(g));
    last_ = &t_.gpus.back();
    return *this;
  }
  TopologyBuilder& nic(std::string name, std::string pcie_switch, int32_t numa,
                       LinkLayer layer = LinkLayer::kInfiniBand, std::string state = "ACTIVE") {
    RdmaNic n;
    n.bus_id = busId(static_cast<int32_t>(t_.rdma_nics.size()), 0x80);
    n.name = std::move(name);
    n.pcie_switch = std::move(pcie_switch);
    n.numa_node = numa;
    n.link_layer = layer;
    n.kind = layer == LinkLayer::kInfiniBand ? NicKind::kInfiniBand
             : layer == LinkLayer::kEthernet ? NicKind::kRoCE
                                             : NicKind::kUnknown;
    RdmaPort p;
    p.state = std::move(state);
    p.link_layer = layer;
    p.rate_gbps = 400;
    n.ports.push_back(p);
    t_.rdma_nics.push_back(std::move(n));
    last_ = &t_.rdma_nics.back();
    last_nic_ = &t_.rdma_nics.back();
    return *this;
  }
  // The device added last sits under root port `root` (its PXB group).
  TopologyBuilder& under(std::string root) {
    last_->pcie_root = std::move(root);
    return *this;
  }
  // The device added last is near these NUMA nodes (HBM/CXL flat mode, SNC).
  TopologyBuilder& near(std::vector<int32_t> numa_nodes) {
    last_->numa_nodes = std::move(numa_nodes);
    last_->numa_node = last_->numa_nodes.empty() ? -1 : last_->numa_nodes.front();
    return *this;
  }
  // The NIC added last is of this kind.
  TopologyBuilder& kind(NicKind kind) {
    last_nic_->kind = kind;
    return *this;
  }
  TopologyBuilder& numa(int32_t id, std::string cpus) {
    t_.numa_nodes.push_back({id, std::move(cpus), int64_t{1} << 37});
    return *this;
  }
  Topology build() {
    Topology t = t_;
    computeGroups(&t);
    return t;
  }

 private:
  static std::string busId(int32_t i, int32_t base) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0000:%02x:00.0", base + i);
    return buf;
  }
  Topology t_;
  // Into t_'s vectors; reserved so that adding devices never moves them.
  Place* last_ = nullptr;
  RdmaNic* last_nic_ = nullptr;

 public:
  TopologyBuilder() {
    t_.gpus.reserve(64);
    t_.rdma_nics.reserve(64);
  }
  TopologyBuilder(const TopologyBuilder&) = delete;
};

inline TopologyBuilder node() { return TopologyBuilder(); }

// One root port rp0 of a DGX-H100-like tray, with inner switches swA (GPUs 0, 1), swB (GPUs 2, 3),
// swC (mlx5_1) and swD. mlx5_0 sits in `first_nic_switch`: "swA" puts it behind the same deepest
// switch as GPUs 0 and 1 (PIX), "swD" only under the same root port as every GPU (PXB).
inline Topology tray(const std::string& first_nic_switch) {
  return TopologyBuilder()
      .gpu(0, "swA", 0).under("rp0").gpu(1, "swA", 0).under("rp0")
      .gpu(2, "swB", 0).under("rp0").gpu(3, "swB", 0).under("rp0")
      .nic("mlx5_0", first_nic_switch, 0).under("rp0").nic("mlx5_1", "swC", 0).under("rp0")
      .build();
}

// A DGX H100-like node: 8 GPUs and 8 NICs, a GPU and a NIC behind each of 8 switches, 4 per
// NUMA node.
inline Topology dgxLike() {
  TopologyBuilder b;
  b.numa(0, "0-55,112-167").numa(1, "56-111,168-223");
  for (int i = 0; i < 8; ++i) {
    const std::string sw = "sw" + std::to_string(i);
    b.gpu(i, sw, i / 4).nic("mlx5_" + std::to_string(i), sw, i / 4);
  }
  return b.build();
}

}  // namespace muster::topology::testing
