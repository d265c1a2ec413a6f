// The agent's labels and condition, and the muster-topology command line (no API server needed).
#include <catch2/catch.hpp>

#include "proto/nodetopology.h"
#include "tests/topology/builders.h"
#include "tests/topology/run.h"
#include "topology/agent/agent.h"

namespace muster::topology {
namespace {

using testing::run;

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

TEST_CASE("label values are made valid from free text") {
  CHECK(labelValue("Tesla P100-PCIE-16GB") == "Tesla-P100-PCIE-16GB");
  CHECK(labelValue("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3");
  CHECK(labelValue("  (weird) ") == "weird");
  CHECK(labelValue(std::string(100, 'a')).size() == 63);
  CHECK(labelValue("").empty());
}

TEST_CASE("node labels carry GPU and RDMA counts, model and link layer, and absent ones are removed") {
  auto labels = nodeLabels(testing::node().gpu(0, "", 0, "Tesla P100-PCIE-16GB")
                               .gpu(1, "", 0, "Tesla P100-PCIE-16GB").nic("mlx5_0", "", 0).build());
  CHECK(labels.at("muster.dev/gpu.count") == "2");
  CHECK(labels.at("muster.dev/gpu.model") == "Tesla-P100-PCIE-16GB");
  CHECK(labels.at("muster.dev/rdma.count") == "1");
  CHECK(labels.at("muster.dev/rdma.link-layer") == "InfiniBand");
  auto empty = nodeLabels(Topology{});
  CHECK(empty.at("muster.dev/gpu.count") == "0");
  CHECK(empty.at("muster.dev/rdma.count") == "0");
  CHECK_FALSE(empty.at("muster.dev/gpu.model").has_value());
  CHECK_FALSE(empty.at("muster.dev/rdma.link-layer").has_value());
}

TEST_CASE("the Discovered condition counts what was found and points at warnings") {
  Topology t = testing::node().numa(0, "0-7").gpu(0, "", 0).build();
  proto::Condition c = discoveredCondition(t);
  CHECK(c.type == "Discovered");
  CHECK(c.status == "True");
  CHECK(c.reason == "Discovered");
  CHECK(c.message == "1 GPUs, 0 RDMA NICs, 1 NUMA nodes");
  t.warnings.push_back("x");
  c = discoveredCondition(t);
  CHECK(c.reason == "DiscoveredWithWarnings");
  CHECK(c.message == "1 GPUs, 0 RDMA NICs, 1 NUMA nodes; 1 warnings (see spec.source.warnings)");
}

TEST_CASE("muster-topology show --json prints the NodeTopology the agent would publish") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--json", "--node-name", "cts1-pascal", "--hwloc-xml",
                fixture("cts1-pascal.xml")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  proto::NodeTopology obj;
  REQUIRE(proto::decodeNodeTopologyJson(r.out, &obj).ok());
  CHECK(obj.meta.name == "cts1-pascal");
  CHECK(obj.spec.summary.gpus == 2);
  CHECK(obj.spec.summary.gpu_model == "Tesla P100-PCIE-16GB");
  CHECK(obj.spec.rdma_nics.at(0).pcie_switch == "0000:02:00.0");
  CHECK(obj.spec.source.hwloc_version.rfind("2.", 0) == 0);
}

TEST_CASE("muster-topology show prints tables with the GPU to NIC pairing") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--hwloc-xml", fixture("coral-lassen.xml")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("GPUs: 4") != std::string::npos);
  CHECK(r.out.find("RDMA NICs: 4") != std::string::npos);
  CHECK(r.out.find("mlx5_2,mlx5_3  NUMA node 8") != std::string::npos);
}

TEST_CASE("muster-topology agent without a node name says how to give one") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "agent", "--once"}, {{"NODE_NAME", testing::kUnset}});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--node-name or $NODE_NAME") != std::string::npos);
  CHECK(run({MUSTER_TOPOLOGY_BIN, "frobnicate"}).exit_code == 2);
  CHECK(run({MUSTER_TOPOLOGY_BIN, "agent", "--interval", "soon"}).exit_code == 2);
}

TEST_CASE("a missing fixture makes show fail with a message, not a crash") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--hwloc-xml", "/nonexistent.xml"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("hwloc cannot read XML /nonexistent.xml") != std::string::npos);
}

}  // namespace
}  // namespace muster::topology
