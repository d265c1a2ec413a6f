// muster-topology agent against the real kube-apiserver + kwok nodes (tests/cluster): the live
// machine's honest topology (what this machine has, read independently of hwloc: its NVIDIA GPUs
// from sysfs, cross-checked with nvidia-smi -L and /proc/driver/nvidia/gpus when present, its RDMA
// devices from /sys/class/infiniband) and fixture-backed ones, published as NodeTopology objects
// and node labels, read back through Muster's client and the model.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "proto/codec.h"
#include "proto/kubeconfig.h"
#include "proto/nodetopology.h"
#include "tests/e2e/support.h"
#include "tests/topology/run.h"
#include "topology/model/affinity.h"
#include "topology/model/topology.h"

namespace muster::topology {
namespace {

using e2e::TestCluster;

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

void applyCrd() {
  auto& cluster = TestCluster::get();
  auto applied = cluster.kubectl(
      {"apply", "-f", std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/nodetopologies.muster.dev.yaml"});
  INFO(applied.status().message());
  REQUIRE(applied.ok());
  auto established = cluster.kubectl({"wait", "--for", "condition=established", "--timeout=60s",
                                      "crd/nodetopologies.muster.dev"});
  INFO(established.status().message());
  REQUIRE(established.ok());
}

// The last `n` kwok nodes by name (the suite's other tests use the first ones).
std::vector<std::string> lastNodes(size_t n) {
  auto names = TestCluster::get().kubectl(
      {"get", "nodes", "-l", "type=kwok", "-o", "jsonpath={.items[*].metadata.name}"});
  REQUIRE(names.ok());
  std::vector<std::string> all;
  std::istringstream in(*names);
  for (std::string s; in >> s;) all.push_back(s);
  std::sort(all.begin(), all.end());
  REQUIRE(all.size() >= n);
  return {all.end() - static_cast<long>(n), all.end()};
}

testing::RunResult agentOnce(const std::string& node, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {MUSTER_TOPOLOGY_BIN, "agent", "--once", "--node-name", node,
                                   "--kubeconfig", TestCluster::get().kubeconfig(), "-v", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return testing::run(argv);
}

struct Api {
  e2e::IoThread io;
  std::shared_ptr<proto::Client> client;
  Api() {
    auto config = proto::loadKubeconfig(TestCluster::get().kubeconfig());
    REQUIRE(config.ok());
    client = e2e::makeClient(io.executor(), *config);
  }
  ~Api() { client->shutdown(); }

  proto::NodeTopology topology(const std::string& name) {
    return e2e::getNodeTopology(*client, name);
  }
  std::map<std::string, std::string> labels(const std::string& node) {
    proto::Request req;
    req.path = proto::resources::kNodes.objectPath("", node);
    auto body = client->callSync(req);
    REQUIRE(body.ok());
    proto::Node out;
    REQUIRE(proto::decodeJson(*body, &out).ok());
    return out.meta.labels;
  }
};

namespace fs = std::filesystem;

std::string readTrimmed(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

size_t entries(const fs::path& dir) {
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// This machine's NVIDIA GPUs as the agent defines them (PCI vendor 0x10de, class VGA or 3D
// controller), counted from /sys/bus/pci/devices, not through hwloc. Where the driver is loaded,
// nvidia-smi -L and /proc/driver/nvidia/gpus must agree with it.
size_t machineGpus() {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/sys/bus/pci/devices", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string cls = readTrimmed(it->path() / "class");  // 0x030200
    if (readTrimmed(it->path() / "vendor") == "0x10de" &&
        (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0))
      ++n;
  }
  if (fs::is_directory("/proc/driver/nvidia/gpus")) CHECK(entries("/proc/driver/nvidia/gpus") == n);
  auto smi = testing::run({"sh", "-c", "command -v nvidia-smi >/dev/null && nvidia-smi -L"});
  if (smi.exit_code == 0) {
    size_t listed = 0;
    std::istringstream lines(smi.out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("GPU ", 0) == 0) ++listed;
    CHECK(listed == n);
  }
  return n;
}

// RDMA devices the kernel shows (what libibverbs and the sysfs provider enumerate).
size_t machineRdmaDevices() { return entries("/sys/class/infiniband"); }

void cleanup(const std::vector<std::string>& nodes) {
  for (const std::string& n : nodes) {
    (void)TestCluster::get().kubectl({"delete", "nodetopology", n, "--ignore-not-found"});
    (void)TestCluster::get().kubectl({"label", "node", n, "muster.dev/gpu.count-",
                                      "muster.dev/gpu.model-", "muster.dev/rdma.count-",
                                      "muster.dev/rdma.link-layer-"});
  }
}

TEST_CASE("agent --once publishes what this machine has, no more and no less, and exits 0") {
  applyCrd();
  const std::string node = lastNodes(1)[0];
  cleanup({node});
  auto r = agentOnce(node);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  Api api;
  proto::NodeTopology t = api.topology(node);
  CHECK(t.spec.node_name == node);
  const size_t gpus = machineGpus();
  const size_t rdma = machineRdmaDevices();
  INFO("this machine: " << gpus << " NVIDIA GPU(s), " << rdma << " RDMA device(s)");
  CHECK(t.spec.gpus.size() == gpus);
  CHECK(t.spec.summary.gpus == static_cast<int32_t>(gpus));
  CHECK(t.spec.rdma_nics.size() == rdma);
  CHECK(t.spec.summary.rdma_nics == static_cast<int32_t>(rdma));
  CHECK_FALSE(t.spec.numa_nodes.empty());
  CHECK(t.spec.source.agent_version == "muster-topology v0.1.0");
  REQUIRE(t.status.conditions.size() == 1);
  CHECK(t.status.conditions[0].type == "Discovered");
  CHECK(t.status.conditions[0].status == "True");
  CHECK(t.status.observed_generation == t.meta.generation);
  auto labels = api.labels(node);
  CHECK(labels["muster.dev/gpu.count"] == std::to_string(gpus));
  CHECK(labels["muster.dev/rdma.count"] == std::to_string(rdma));
  CHECK(labels.contains("muster.dev/gpu.model") == (gpus > 0));
  CHECK(labels.contains("muster.dev/rdma.link-layer") == (rdma > 0));

  // Nothing changed: a second run writes nothing.
  auto again = agentOnce(node);
  REQUIRE(again.exit_code == 0);
  CHECK(api.topology(node).meta.resource_version == t.meta.resource_version);
  cleanup({node});
}

TEST_CASE("fixture-backed NodeTopologies for two kwok nodes are published, read back and used") {
  applyCrd();
  const std::vector<std::string> nodes = lastNodes(3);
  const std::string pascal = nodes[0], lassen = nodes[1];
  cleanup({pascal, lassen});
  auto r1 = agentOnce(pascal, {"--hwloc-xml", fixture("cts1-pascal.xml")});
  INFO(r1.err);
  REQUIRE(r1.exit_code == 0);
  auto r2 = agentOnce(lassen, {"--hwloc-xml", fixture("coral-lassen.xml")});
  INFO(r2.err);
  REQUIRE(r2.exit_code == 0);

  Api api;
  proto::NodeTopology p = api.topology(pascal);
  CHECK(p.spec.summary.gpus == 2);
  CHECK(p.spec.summary.gpu_model == "Tesla P100-PCIE-16GB");
  CHECK(p.spec.summary.link_layer == "InfiniBand");
  REQUIRE(p.spec.rdma_nics.size() == 1);
  CHECK(p.spec.rdma_nics[0].place.pcie_switch == "0000:02:00.0");
  CHECK(p.spec.gpus[0].place.numa_node == 0);
  auto pm = fromNodeTopology(p);
  REQUIRE(pm.ok());
  CHECK(DeviceLocality(*pm).bestAlignment({2, 1}) == Alignment::kPCIeSwitch);
  auto pl = api.labels(pascal);
  CHECK(pl["muster.dev/gpu.count"] == "2");
  CHECK(pl["muster.dev/gpu.model"] == "Tesla-P100-PCIE-16GB");
  CHECK(pl["muster.dev/rdma.count"] == "1");
  CHECK(pl["muster.dev/rdma.link-layer"] == "InfiniBand");

  proto::NodeTopology l = api.topology(lassen);
  CHECK(l.spec.summary.gpus == 4);
  CHECK(l.spec.summary.rdma_nics == 4);
  auto lm = fromNodeTopology(l);
  REQUIRE(lm.ok());
  CHECK(DeviceLocality(*lm).bestAlignment({4, 4}) == Alignment::kNUMANode);
  CHECK(api.labels(lassen)["muster.dev/gpu.model"] == "Tesla-V100-SXM2-16GB");

  // kubectl shows the printer columns from spec.summary.
  auto row = TestCluster::get().kubectl({"get", "ntopo", pascal, "--no-headers"});
  REQUIRE(row.ok());
  CHECK(row->find("Tesla P100-PCIE-16GB") != std::string::npos);

  // The hardware changes (the node now looks like a machine without GPUs): spec and labels follow.
  auto r3 = agentOnce(pascal, {"--hwloc-xml", fixture("96em64t-4n4d3ca2co-pci.xml")});
  REQUIRE(r3.exit_code == 0);
  proto::NodeTopology changed = api.topology(pascal);
  CHECK(changed.spec.gpus.empty());
  CHECK(changed.spec.summary.gpu_model.empty());
  CHECK(changed.meta.generation > p.meta.generation);
  CHECK(changed.status.observed_generation == changed.meta.generation);
  auto cl = api.labels(pascal);
  CHECK(cl["muster.dev/gpu.count"] == "0");
  CHECK_FALSE(cl.contains("muster.dev/gpu.model"));
  cleanup({pascal, lassen});
}

TEST_CASE("agent --once fails with a clear error when the node does not exist") {
  applyCrd();
  const std::string ghost = e2e::uniqueName("no-such-node");
  auto r = agentOnce(ghost, {"--hwloc-xml", fixture("cts1-pascal.xml")});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("does not exist; nothing published") != std::string::npos);
  CHECK_FALSE(TestCluster::get().kubectl({"get", "nodetopology", ghost}).ok());
  (void)TestCluster::get().kubectl({"delete", "nodetopology", ghost, "--ignore-not-found"});
}

}  // namespace
}  // namespace muster::topology
