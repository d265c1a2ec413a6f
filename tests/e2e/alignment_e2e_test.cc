// GPU↔RDMA NIC alignment end to end (issue 6): muster-topology agent publishes NodeTopology objects
// for kwok nodes from the real hwloc exports in tests/topology/testdata, and muster-scheduler,
// watching them through the real kube-apiserver, steers a gang's pods to the nodes where each
// pod's GPU and NIC can be close together — and, when alignment is required, only there.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "proto/kubeconfig.h"
#include "proto/nodetopology.h"
#include "tests/e2e/support.h"

namespace muster::e2e {
namespace {

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

// A gang member asking for 1 GPU and 1 RDMA NIC.
std::string podJson(const std::string& name, const std::string& run, const std::string& gang,
                    int size, const std::string& affinity) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
      R"(","namespace":"default","labels":{"e2e-run":")", run,
      R"("},"annotations":{"gang-scheduling.preferred.jp/gang-name":")", gang,
      R"(","gang-scheduling.preferred.jp/gang-size":")", size,
      R"(","muster.dev/gpu-nic-affinity":")", affinity,
      R"("}},"spec":{"schedulerName":"muster-scheduler","nodeSelector":{"e2e-run":")", run,
      R"("},"containers":[{"name":"main","image":"busybox","resources":{"limits":{"nvidia.com/gpu":"1","preferred.jp/rdma":"1"}}}]}})");
}

struct Env {
  IoThread io;
  std::shared_ptr<proto::Client> client;
  std::string run = uniqueName("align");
  std::vector<std::string> topologies;
  Env() {
    auto config = proto::loadKubeconfig(TestCluster::get().kubeconfig());
    REQUIRE(config.ok());
    client = makeClient(io.executor(), *config);
  }
  ~Env() {
    for (const auto& name : topologies) {
      proto::Request req;
      req.verb = proto::Verb::kDelete;
      req.path = proto::resources::kNodeTopologies.objectPath("", name);
      (void)client->callSync(req);
    }
    cleanupRun(*client, run);
  }

  void createPod(const std::string& name, const std::string& gang, int size,
                 const std::string& affinity) {
    proto::Request req;
    req.verb = proto::Verb::kPost;
    req.path = proto::resources::kPods.collectionPath("default");
    req.body = podJson(name, run, gang, size, affinity);
    auto created = client->callSync(req);
    INFO(created.status().message());
    REQUIRE(created.ok());
  }

  std::map<std::string, proto::Pod> pods() { return listPods(*client, run); }

  // Node name → pods of `prefix` bound there; empty until all `count` are bound.
  std::map<std::string, int> boundPerNode(const std::string& prefix, size_t count) {
    std::map<std::string, int> out;
    size_t bound = 0;
    for (const auto& [name, p] : pods()) {
      if (name.rfind(prefix, 0) != 0 || p.spec.node_name.empty()) continue;
      ++out[p.spec.node_name.substr(run.size() + 1)];
      ++bound;
    }
    return bound == count ? out : std::map<std::string, int>{};
  }

  // muster-topology agent --once for `node` from an hwloc export (no verbs, no sysfs).
  void publish(const std::string& node, const std::string& xml) {
    auto out = runCommand({MUSTER_TOPOLOGY_BIN, "agent", "--once", "--node-name", node,
                           "--kubeconfig", TestCluster::get().kubeconfig(), "--hwloc-xml",
                           fixture(xml), "--sysfs-root", "/nonexistent", "--no-verbs"});
    INFO(out.status().message());
    REQUIRE(out.ok());
    topologies.push_back(node);
  }
};

TEST_CASE("NodeTopologies published from hwloc fixtures steer a gang to nodes with aligned GPU/NIC pairs, and required alignment waits for them") {
  auto& cluster = TestCluster::get();
  auto applied = cluster.kubectl({"apply", "-f", std::string(MUSTER_SOURCE_DIR) +
                                                     "/manifests/crds/nodetopologies.muster.dev.yaml"});
  INFO(applied.status().message());
  REQUIRE(applied.ok());
  REQUIRE(cluster.kubectl({"wait", "--for", "condition=established", "--timeout=60s",
                           "crd/nodetopologies.muster.dev"}).ok());
  Env env;
  const std::map<std::string, std::string> rack = {{"muster.dev/block", env.run + "-b"},
                                                   {"muster.dev/spine", env.run + "-s"},
                                                   {"muster.dev/rack", env.run + "-r"}};
  // One rack. a-plain: no NodeTopology (sorts first, so plain packing would start there).
  // b-lassen: coral-lassen.xml, 4 V100s and 4 NICs paired per NUMA node, no shared switch.
  // c-pascal, d-pascal: cts1-pascal.xml, 2 P100s and mlx5_0 behind one PCIe switch.
  NodeShape four;
  four.gpus = 4;
  NodeShape pascal;
  pascal.gpus = 2;
  pascal.rdma = 1;
  createNode(*env.client, env.run + "-a-plain", env.run, rack, four);
  createNode(*env.client, env.run + "-b-lassen", env.run, rack, four);
  createNode(*env.client, env.run + "-c-pascal", env.run, rack, pascal);
  createNode(*env.client, env.run + "-d-pascal", env.run, rack, pascal);
  waitNodesReady(*env.client, env.run, 4);
  env.publish(env.run + "-b-lassen", "coral-lassen.xml");
  env.publish(env.run + "-c-pascal", "cts1-pascal.xml");
  env.publish(env.run + "-d-pascal", "cts1-pascal.xml");

  SchedulerProcess scheduler(kTestSchedulerConfig);
  scheduler.start();
  REQUIRE(scheduler.waitReady());
  // The scheduler reads NodeTopologies with its informer; a gang created now must see them. The
  // cache is filled before "Caches synced" for nodes and pods only, so wait for the topologies'
  // effect below rather than assume it.

  // 6 pods × (1 GPU + 1 NIC), preferred: the aligned room is exactly 1 + 1 (PCIe switch) + 4
  // (NUMA node). Plain packing would take a-plain ×4 + b-lassen ×2.
  for (int i = 0; i < 6; ++i) env.createPod(absl::StrCat("pref-", i), "pref", 6, "preferred");
  std::map<std::string, int> placed;
  bool bound = waitFor([&] {
    placed = env.boundPerNode("pref-", 6);
    return !placed.empty();
  }, std::chrono::seconds(90));
  INFO(scheduler.logTail());
  REQUIRE(bound);
  CHECK(placed == std::map<std::string, int>{{"b-lassen", 4}, {"c-pascal", 1}, {"d-pascal", 1}});
  const std::string log = scheduler.logTail(200000);
  CHECK(log.find("alignedPCIeSwitch=2") != std::string::npos);
  CHECK(log.find("alignedNUMANode=4") != std::string::npos);

  // Every aligned GPU/NIC pair is taken now: a pod that requires alignment waits, and says why,
  // although a-plain has 4 free GPUs and NICs.
  env.createPod("req-0", "req", 1, "required");
  std::string message;
  REQUIRE(waitFor([&] {
    auto ps = env.pods();
    const auto* c = ps.at("req-0").findCondition("PodScheduled");
    if (c == nullptr || c->status != "False") return false;
    message = c->message;
    return true;
  }, std::chrono::seconds(60)));
  INFO(message);
  CHECK(message.find("muster.dev/gpu-nic-affinity: required") != std::string::npos);
  CHECK(env.pods().at("req-0").spec.node_name.empty());

  // The preferred gang finishes (its pods are deleted): the required pod gets an aligned node.
  for (int i = 0; i < 6; ++i) {
    proto::Request del;
    del.verb = proto::Verb::kDelete;
    del.path = proto::resources::kPods.objectPath("default", absl::StrCat("pref-", i));
    del.query = {{"gracePeriodSeconds", "0"}};
    REQUIRE(env.client->callSync(del).ok());
  }
  std::map<std::string, int> req;
  REQUIRE(waitFor([&] {
    req = env.boundPerNode("req-", 1);
    return !req.empty();
  }, std::chrono::seconds(60)));
  CHECK(req.count("a-plain") == 0);
  // A single pod ranks a PCIe switch above a NUMA node.
  CHECK((req.count("c-pascal") == 1 || req.count("d-pascal") == 1));
}

}  // namespace
}  // namespace muster::e2e
