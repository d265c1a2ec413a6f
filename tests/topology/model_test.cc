// topology/model: locality groups, GPU↔NIC affinity, conversion to and from NodeTopology, and the
// NodeTopology codec (proto/nodetopology.h).
#include <catch2/catch.hpp>

#include "proto/nodetopology.h"
#include "tests/topology/builders.h"
#include "topology/model/affinity.h"
#include "topology/model/topology.h"

namespace muster::topology {
namespace {

using testing::dgxLike;
using testing::node;

FreeDevices freeOf(std::vector<int32_t> gpus, std::vector<std::string> nics) {
  return FreeDevices{std::move(gpus), std::move(nics)};
}

TEST_CASE("groups list the devices behind each PCIe switch, on each NUMA node, and on the node") {
  Topology t = node().gpu(0, "0000:02:00.0", 0).gpu(1, "0000:02:00.0", 0).gpu(2, "", 1)
                   .nic("mlx5_0", "0000:02:00.0", 0).nic("mlx5_1", "", -1).build();
  REQUIRE(t.groups.size() == 4);
  CHECK(t.groups[0].id == "0000:02:00.0");
  CHECK(t.groups[0].kind == GroupKind::kPCIeSwitch);
  CHECK(t.groups[0].gpus == std::vector<int32_t>{0, 1});
  CHECK(t.groups[0].rdma_nics == std::vector<std::string>{"mlx5_0"});
  CHECK(t.groups[1].id == "numa0");
  CHECK(t.groups[1].rdma_nics == std::vector<std::string>{"mlx5_0"});
  CHECK(t.groups[2].id == "numa1");
  CHECK(t.groups[2].gpus == std::vector<int32_t>{2});
  CHECK(t.groups[2].rdma_nics.empty());
  CHECK(t.groups[3].kind == GroupKind::kNode);
  CHECK(t.groups[3].rdma_nics == std::vector<std::string>{"mlx5_0", "mlx5_1"});
}

TEST_CASE("a node without GPUs or NICs has no groups and empty summaries") {
  Topology t = node().numa(0, "0-1").build();
  CHECK(t.groups.empty());
  CHECK(gpuModelSummary(t).empty());
  CHECK(linkLayerSummary(t).empty());
}

TEST_CASE("summaries name the common GPU model and link layer, or say mixed") {
  CHECK(gpuModelSummary(node().gpu(0, "", 0, "A100").gpu(1, "", 0, "A100").build()) == "A100");
  CHECK(gpuModelSummary(node().gpu(0, "", 0, "A100").gpu(1, "", 0, "H100").build()) == "mixed");
  CHECK(linkLayerSummary(node().nic("a", "", 0, LinkLayer::kEthernet).build()) == "Ethernet");
  CHECK(linkLayerSummary(node().nic("a", "", 0).nic("b", "", 0, LinkLayer::kEthernet).build()) ==
        "mixed");
}

TEST_CASE("2 GPUs and 1 NIC behind one switch are aligned at the PCIe switch") {
  DeviceLocality loc(node().gpu(0, "sw", 0).gpu(1, "sw", 0).nic("mlx5_0", "sw", 0).build());
  CHECK(loc.bestAlignment({2, 1}) == Alignment::kPCIeSwitch);
  CHECK(loc.fitsInOneGroup(GroupKind::kPCIeSwitch, {2, 1}));
  auto sel = loc.select({2, 1});
  REQUIRE(sel);
  CHECK(sel->gpus == std::vector<int32_t>{0, 1});
  CHECK(sel->rdma_nics == std::vector<std::string>{"mlx5_0"});
}

TEST_CASE("8 GPUs and 8 NICs on a DGX-like node are aligned at the PCIe switch though no single "
          "switch holds them") {
  DeviceLocality loc(dgxLike());
  CHECK(loc.bestAlignment({8, 8}) == Alignment::kPCIeSwitch);
  CHECK_FALSE(loc.fitsInOneGroup(GroupKind::kPCIeSwitch, {8, 8}));
  CHECK_FALSE(loc.fitsInOneGroup(GroupKind::kNUMANode, {8, 8}));
  CHECK(loc.fitsInOneGroup(GroupKind::kNUMANode, {4, 4}));
  CHECK(loc.pairedGpus(GroupKind::kPCIeSwitch) == 8);
}

TEST_CASE("8 GPUs with 4 NICs cannot all pair behind switches on a DGX-like node") {
  // 8 GPUs need 8 switch groups each giving a NIC: only 4 NICs requested, so at most 4 groups.
  DeviceLocality loc(dgxLike());
  CHECK(loc.bestAlignment({8, 4}) == Alignment::kNUMANode);
  auto sel = loc.select({8, 4});
  REQUIRE(sel);
  CHECK(sel->alignment == Alignment::kNUMANode);
  CHECK(sel->gpus.size() == 8);
  CHECK(sel->rdma_nics.size() == 4);
}

TEST_CASE("a switch whose NIC is taken no longer aligns its GPU but another switch does") {
  DeviceLocality loc(dgxLike());
  FreeDevices free = freeOf({0, 1}, {"mlx5_1", "mlx5_2"});
  // GPU 0's NIC (mlx5_0) is taken; GPU 1 still has mlx5_1.
  CHECK(loc.bestAlignment({1, 1}, &free) == Alignment::kPCIeSwitch);
  auto sel = loc.select({1, 1}, &free);
  REQUIRE(sel);
  CHECK(sel->gpus == std::vector<int32_t>{1});
  CHECK(sel->rdma_nics == std::vector<std::string>{"mlx5_1"});
  // Both GPUs need a NIC each: only NUMA alignment is left (mlx5_1, mlx5_2 on NUMA 0).
  CHECK(loc.bestAlignment({2, 2}, &free) == Alignment::kNUMANode);
}

TEST_CASE("GPUs and NICs on different NUMA nodes align only at the node") {
  DeviceLocality loc(node().gpu(0, "a", 0).nic("mlx5_0", "b", 1).build());
  CHECK(loc.bestAlignment({1, 1}) == Alignment::kNode);
  auto sel = loc.select({1, 1});
  REQUIRE(sel);
  CHECK(sel->alignment == Alignment::kNode);
}

TEST_CASE("too few free devices is Insufficient and a request without GPUs or NICs is NotApplicable") {
  DeviceLocality loc(dgxLike());
  CHECK(loc.bestAlignment({9, 1}) == Alignment::kInsufficient);
  CHECK_FALSE(loc.select({9, 1}).has_value());
  FreeDevices none = freeOf({}, {});
  CHECK(loc.bestAlignment({1, 0}, &none) == Alignment::kInsufficient);
  CHECK(loc.bestAlignment({4, 0}) == Alignment::kNotApplicable);
  CHECK(loc.bestAlignment({0, 2}) == Alignment::kNotApplicable);
  CHECK(alignmentName(Alignment::kNUMANode) == "NUMANode");
}

TEST_CASE("alignment uses as few groups as possible and each chosen group gives a GPU and a NIC") {
  // sw0: 2 GPUs + 1 NIC, sw1: 1 GPU + 1 NIC, sw2: 1 GPU + 2 NICs.
  DeviceLocality loc(node().gpu(0, "sw0", 0).gpu(1, "sw0", 0).gpu(2, "sw1", 0).gpu(3, "sw2", 0)
                         .nic("n0", "sw0", 0).nic("n1", "sw1", 0).nic("n2", "sw2", 0)
                         .nic("n3", "sw2", 0).build());
  auto sel = loc.select({3, 3});
  REQUIRE(sel);
  CHECK(sel->alignment == Alignment::kPCIeSwitch);
  // sw0 + sw2 give 3 GPUs and 3 NICs with two groups.
  CHECK(sel->gpus == std::vector<int32_t>{0, 1, 3});
  CHECK(sel->rdma_nics == std::vector<std::string>{"n0", "n2", "n3"});
}

TEST_CASE("a NodeTopology round-trips through the model and the codec") {
  Topology t = dgxLike();
  t.warnings.push_back("GPU indexes assigned in PCI bus order");
  t.hwloc_version = "2.9.0";
  proto::NodeTopology obj = toNodeTopology(t, "gpu-node-1", "muster-topology v0.1.0",
                                           "2026-01-15T09:30:00Z");
  CHECK(obj.meta.name == "gpu-node-1");
  CHECK(obj.spec.summary.gpus == 8);
  CHECK(obj.spec.summary.rdma_nics == 8);
  CHECK(obj.spec.summary.gpu_model == "NVIDIA H100 80GB HBM3");
  CHECK(obj.spec.summary.link_layer == "InfiniBand");

  proto::NodeTopology back;
  REQUIRE(proto::decodeNodeTopologyJson(proto::encode(obj), &back).ok());
  CHECK(back.spec == obj.spec);

  auto model = fromNodeTopology(back);
  REQUIRE(model.ok());
  CHECK(model->gpus.size() == 8);
  CHECK(model->groups.size() == t.groups.size());
  CHECK(DeviceLocality(*model).bestAlignment({8, 8}) == Alignment::kPCIeSwitch);
}

// A GPU at `numa` (and behind `pcie_switch`) as an object of the first schema wrote it.
proto::NodeTopologyGpu protoGpu(int32_t index, int32_t numa, std::string pcie_switch = "") {
  proto::NodeTopologyGpu g;
  g.index = index;
  g.place.numa_node = numa;
  g.place.pcie_switch = std::move(pcie_switch);
  return g;
}

TEST_CASE("the codec keeps fractional rates, unknown NUMA nodes and absent bus ids") {
  proto::NodeTopology obj;
  obj.meta.name = "n";
  obj.spec.node_name = "n";
  proto::NodeTopologyRdmaNic nic;
  nic.name = "qib0";
  nic.ports.push_back({1, "ACTIVE", 2.5, "InfiniBand", "", ""});
  obj.spec.rdma_nics.push_back(nic);
  obj.spec.gpus.push_back(protoGpu(0, -1));
  const std::string json = proto::encode(obj);
  CHECK(json.find("\"rateGbps\":2.5") != std::string::npos);
  CHECK(json.find("busId") == std::string::npos);  // the CRD's pattern refuses ""
  proto::NodeTopology back;
  REQUIRE(proto::decodeNodeTopologyJson(json, &back).ok());
  CHECK(back.spec == obj.spec);
  CHECK(back.spec.gpus[0].place.numa_node == -1);
}

TEST_CASE("a NodeTopology with a wrong JSON type is refused with the field's path") {
  proto::NodeTopology out;
  absl::Status s = proto::decodeNodeTopologyJson(
      R"({"metadata":{"name":"n"},"spec":{"nodeName":"n","gpus":[{"index":"0"}]}})", &out);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "spec.gpus[0].index: expected int32");
  s = proto::decodeNodeTopologyJson(
      R"({"spec":{"rdmaNics":[{"name":"m","ports":[{"port":1,"rateGbps":"100"}]}]}})", &out);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "spec.rdmaNics[0].ports[0].rateGbps: expected number");
}

TEST_CASE("fromNodeTopology refuses duplicate devices and groups naming unknown ones") {
  proto::NodeTopology obj;
  obj.meta.name = "n";
  obj.spec.gpus.push_back(protoGpu(0, 0));
  obj.spec.gpus.push_back(protoGpu(0, 0));
  CHECK(fromNodeTopology(obj).status().message() == "NodeTopology n: GPU index 0 twice");
  obj.spec.gpus.pop_back();
  obj.spec.groups.push_back({"numa0", "NUMANode", {0}, {"mlx5_9"}});
  CHECK(fromNodeTopology(obj).status().message() ==
        "NodeTopology n: group numa0 names RDMA NIC mlx5_9, which is not listed");
  obj.spec.groups = {{"x", "Switch", {}, {}}};
  CHECK(fromNodeTopology(obj).status().message() ==
        "NodeTopology n: group x has unknown kind \"Switch\"");
}

TEST_CASE("without published groups the model computes them from the devices") {
  proto::NodeTopology obj;
  obj.spec.gpus.push_back(protoGpu(0, 0, "sw"));
  proto::NodeTopologyRdmaNic nic;
  nic.name = "mlx5_0";
  nic.place.pcie_switch = "sw";
  nic.place.numa_node = 0;
  obj.spec.rdma_nics.push_back(nic);
  auto t = fromNodeTopology(obj);
  REQUIRE(t.ok());
  CHECK(DeviceLocality(*t).bestAlignment({1, 1}) == Alignment::kPCIeSwitch);
}

TEST_CASE("the spec patch writes every field, and null for what is absent") {
  proto::NodeTopologySpec spec;
  spec.node_name = "n";
  const std::string patch = proto::specPatch(spec);
  CHECK(patch.rfind(R"({"spec":{"nodeName":"n","summary":{"gpus":0,"rdmaNics":0,"gpuModel":null,)"
                    R"("linkLayer":null},"numaNodes":[],"gpus":[],"rdmaNics":[],"groups":[],)"
                    R"("allocatable":null,)", 0) == 0);
  proto::NodeTopologyStatus status;
  status.observed_generation = 2;
  status.conditions.push_back({"Discovered", "True", "Discovered", "", "2026-01-15T09:30:00Z"});
  CHECK(proto::statusPatch(status) ==
        R"({"status":{"observedGeneration":2,"conditions":[{"type":"Discovered","status":"True",)"
        R"("reason":"Discovered","message":"","lastTransitionTime":"2026-01-15T09:30:00Z"}]}})");
}

TEST_CASE("a free list the agent did not publish reads back as every device of that kind") {
  Topology t = dgxLike();
  t.allocatable = FreeDevices{{1, 2}, {"mlx5_1"}};
  proto::NodeTopology obj = toNodeTopology(t, "n1", "test", "2026-01-15T09:30:00Z");
  proto::NodeTopology back;
  REQUIRE(proto::decodeNodeTopologyJson(proto::encode(obj), &back).ok());
  CHECK(back.spec.allocatable == obj.spec.allocatable);
  auto read = fromNodeTopology(back);
  REQUIRE(read.ok());
  CHECK(read->allocatable == t.allocatable);

  // Without freeRdmaNics the scheduler counts NICs from requests, as without allocatable.
  REQUIRE(proto::decodeNodeTopologyJson(
              R"({"metadata":{"name":"n1"},"spec":{"gpus":[{"index":0},{"index":1}],)"
              R"("rdmaNics":[{"name":"mlx5_0"},{"name":"mlx5_1"}],)"
              R"("allocatable":{"freeGpus":[1]}}})",
              &back)
              .ok());
  REQUIRE(back.spec.allocatable);
  CHECK(back.spec.allocatable->free_gpus == std::vector<int32_t>{1});
  CHECK_FALSE(back.spec.allocatable->free_rdma_nics.has_value());
  read = fromNodeTopology(back);
  REQUIRE(read.ok());
  REQUIRE(read->allocatable);
  CHECK(read->allocatable->gpus == std::vector<int32_t>{1});
  CHECK(read->allocatable->gpus_known);
  CHECK(read->allocatable->rdma_nics == std::vector<std::string>{"mlx5_0", "mlx5_1"});
  CHECK_FALSE(read->allocatable->rdma_nics_known);
  CHECK(toNodeTopology(*read, "n1", "test", "").spec.allocatable == back.spec.allocatable);
}

TEST_CASE("sameFacts ignores only the discovery time") {
  proto::NodeTopologySpec a, b;
  a.node_name = b.node_name = "n";
  a.source.discovered_at = "2026-01-15T09:30:00Z";
  b.source.discovered_at = "2026-01-16T00:00:00Z";
  CHECK(proto::sameFacts(a, b));
  b.summary.gpus = 1;
  CHECK_FALSE(proto::sameFacts(a, b));
}

}  // namespace
}  // namespace muster::topology
