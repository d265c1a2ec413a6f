// GPU↔RDMA NIC alignment end to end (issue 6): muster-topology agent publishes NodeTopology objects
// for kwok nodes from the real hwloc exports in tests/topology/testdata, and muster-scheduler,
// watching them through the real kube-apiserver, steers a gang's pods to the nodes where each
// pod's GPU and NIC can be close together — and, when alignment is required, only there. With a
// kubelet-like pod-resources server (tests/topology/fake_kubelet.h) the agent also publishes the
// free devices (spec.allocatable), and the scheduler places by them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "proto/kubeconfig.h"
#include "proto/nodetopology.h"
#include "tests/e2e/support.h"
#include "tests/topology/builders.h"
#include "tests/topology/fake_kubelet.h"
#include "topology/model/topology.h"

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

  // Pods are named "<run>-<name>" (unique in "default"); pods() and the helpers below use <name>.
  void createPod(const std::string& name, const std::string& gang, int size,
                 const std::string& affinity) {
    proto::Request req;
    req.verb = proto::Verb::kPost;
    req.path = proto::resources::kPods.collectionPath("default");
    req.body = podJson(run + "-" + name, run, run + "-" + gang, size, affinity);
    auto created = client->callSync(req);
    INFO(created.status().message());
    REQUIRE(created.ok());
  }

  std::map<std::string, proto::Pod> pods() {
    std::map<std::string, proto::Pod> out;
    for (auto& [name, pod] : listPods(*client, run)) out[name.substr(run.size() + 1)] = pod;
    return out;
  }

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
  // boundPerNode once all `count` are bound; empty when they are not within `timeout`.
  std::map<std::string, int> waitBound(const std::string& prefix, size_t count,
                                       std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::map<std::string, int> out;
    waitFor([&] {
      out = boundPerNode(prefix, count);
      return !out.empty();
    }, timeout);
    return out;
  }

  // Waits until `pod` is reported unschedulable (PodScheduled False); returns the message.
  std::string waitUnschedulable(const std::string& pod) {
    std::string message;
    REQUIRE(waitFor([&] {
      auto ps = pods();
      const auto* c = ps.at(pod).findCondition("PodScheduled");
      if (c == nullptr || c->status != "False") return false;
      message = c->message;
      return true;
    }, std::chrono::seconds(60)));
    return message;
  }

  // muster-topology agent --once for `node` from an hwloc export (no verbs, no sysfs), with
  // `extra` flags (the kubelet's pod-resources socket; without it the default path, absent here).
  void publish(const std::string& node, const std::string& xml,
               const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {MUSTER_TOPOLOGY_BIN, "agent", "--once", "--node-name", node,
                                     "--kubeconfig", TestCluster::get().kubeconfig(),
                                     "--hwloc-xml", fixture(xml), "--sysfs-root", "/nonexistent",
                                     "--no-verbs"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto out = runCommand(argv);
    INFO(out.status().message());
    REQUIRE(out.ok());
    if (std::find(topologies.begin(), topologies.end(), node) == topologies.end()) {
      topologies.push_back(node);
    }
  }
};

void applyNodeTopologyCrd() {
  auto& cluster = TestCluster::get();
  auto applied = cluster.kubectl({"apply", "-f", std::string(MUSTER_SOURCE_DIR) +
                                                     "/manifests/crds/nodetopologies.muster.dev.yaml"});
  INFO(applied.status().message());
  REQUIRE(applied.ok());
  REQUIRE(cluster.kubectl({"wait", "--for", "condition=established", "--timeout=60s",
                           "crd/nodetopologies.muster.dev"}).ok());
}

// The labels that put a test's nodes in one rack of their own.
std::map<std::string, std::string> rackOf(const Env& env) {
  return {{"muster.dev/block", env.run + "-b"},
          {"muster.dev/spine", env.run + "-s"},
          {"muster.dev/rack", env.run + "-r"}};
}

TEST_CASE("NodeTopologies published from hwloc fixtures steer a gang to nodes with aligned GPU/NIC pairs, and required alignment waits for them") {
  applyNodeTopologyCrd();
  Env env;
  const std::map<std::string, std::string> rack = rackOf(env);
  // One rack. a-plain: 1 GPU + 1 NIC, no NodeTopology (sorts first, so plain packing would
  // take it before the pascal nodes). b-lassen: coral-lassen.xml, 4 V100s and 4 NICs paired per
  // NUMA node, no shared switch. c-pascal, d-pascal: cts1-pascal.xml, 2 P100s and mlx5_0 behind
  // one PCIe switch.
  NodeShape one;
  one.gpus = 1;
  NodeShape four;
  four.gpus = 4;
  NodeShape pascal;
  pascal.gpus = 2;
  pascal.rdma = 1;
  createNode(*env.client, env.run + "-a-plain", env.run, rack, one);
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
  // (NUMA node), on 3 nodes — as few as any placement needs. Plain packing would take b-lassen ×4,
  // then a-plain and c-pascal (name order).
  for (int i = 0; i < 6; ++i) env.createPod(absl::StrCat("pref-", i), "pref", 6, "preferred");
  const std::map<std::string, int> placed = env.waitBound("pref-", 6, std::chrono::seconds(90));
  INFO(scheduler.logTail());
  REQUIRE(!placed.empty());
  CHECK(placed == std::map<std::string, int>{{"b-lassen", 4}, {"c-pascal", 1}, {"d-pascal", 1}});
  const std::string log = scheduler.logTail(200000);
  CHECK(log.find("alignedPCIeSwitch=2") != std::string::npos);
  CHECK(log.find("alignedNUMANode=4") != std::string::npos);

  // Every aligned GPU/NIC pair is taken now: a pod that requires alignment waits, and says why,
  // although a-plain has a free GPU and NIC.
  env.createPod("req-0", "req", 1, "required");
  const std::string message = env.waitUnschedulable("req-0");
  INFO(message);
  CHECK(message.find("muster.dev/gpu-nic-affinity: required") != std::string::npos);
  CHECK(env.pods().at("req-0").spec.node_name.empty());

  // The preferred gang finishes (its pods are deleted): the required pod gets an aligned node.
  for (int i = 0; i < 6; ++i) {
    proto::Request del;
    del.verb = proto::Verb::kDelete;
    del.path = proto::resources::kPods.objectPath("default", absl::StrCat(env.run, "-pref-", i));
    del.query = {{"gracePeriodSeconds", "0"}};
    REQUIRE(env.client->callSync(del).ok());
  }
  const std::map<std::string, int> req = env.waitBound("req-", 1);
  REQUIRE(!req.empty());
  CHECK(req.count("a-plain") == 0);
  // A single pod ranks a PCIe switch above a NUMA node.
  CHECK((req.count("c-pascal") == 1 || req.count("d-pascal") == 1));
}

// A NodeTopology for `node`, POSTed as the agent would publish it.
void publishTopology(Env& env, const std::string& node, const topology::Topology& t) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kNodeTopologies.collectionPath();
  req.body = proto::encode(topology::toNodeTopology(t, node, "e2e", "2026-12-04T00:00:00Z"));
  auto created = env.client->callSync(req);
  INFO(created.status().message());
  REQUIRE(created.ok());
  env.topologies.push_back(node);
}

TEST_CASE("a pod goes to the node where its GPU and NIC share the deepest PCIe switch, not just a root port") {
  applyNodeTopologyCrd();
  Env env;
  NodeShape shape;
  shape.gpus = 4;
  shape.rdma = 2;
  // a-shallow sorts first: with the old one-level model (any shared switch of the root port) both
  // nodes would align every pod alike and the tie would go to it.
  createNode(*env.client, env.run + "-a-shallow", env.run, rackOf(env), shape);
  createNode(*env.client, env.run + "-b-nested", env.run, rackOf(env), shape);
  waitNodesReady(*env.client, env.run, 2);
  // The CRD takes the second schema's fields (group kinds PCIeHierarchy..., nicPaths) as served.
  publishTopology(env, env.run + "-a-shallow", topology::testing::tray("swD"));
  publishTopology(env, env.run + "-b-nested", topology::testing::tray("swA"));
  const proto::NodeTopology read = getNodeTopology(*env.client, env.run + "-b-nested");
  REQUIRE(!read.spec.gpus.empty());
  CHECK(read.spec.gpus[0].nic_paths ==
        std::vector<proto::NodeTopologyNicPath>{{"mlx5_0", "PIX"}, {"mlx5_1", "PXB"}});

  SchedulerProcess scheduler(kTestSchedulerConfig);
  scheduler.start();
  REQUIRE(scheduler.waitReady());
  // The scheduler takes NodeTopologies in after its informer syncs: wait until it has both (its
  // -v 2 log names each), then place.
  for (const char* node : {"-a-shallow", "-b-nested"}) {
    const std::string line = absl::StrCat("NodeTopology taken in\" node=\"", env.run, node, "\" devices=1");
    INFO(line);
    REQUIRE(waitFor([&] { return scheduler.logTail(200000).find(line) != std::string::npos; }));
  }
  env.createPod("one-0", "one", 1, "preferred");
  const std::map<std::string, int> one = env.waitBound("one-", 1);
  INFO(scheduler.logTail());
  REQUIRE(!one.empty());
  CHECK(one == std::map<std::string, int>{{"b-nested", 1}});
  CHECK(scheduler.logTail(200000).find("alignedPCIeSwitch=1") != std::string::npos);
}

TEST_CASE("free devices the kubelet reports reach the scheduler through the agent's NodeTopology, and a NIC held outside the cluster view keeps a pod that requires alignment off its node") {
  applyNodeTopologyCrd();
  Env env;
  // One rack, two cts1-pascal nodes (2 P100s and mlx5_0 behind one PCIe switch). By requests both
  // are empty; a-nic-held sorts first, so it wins every tie.
  NodeShape pascal;
  pascal.gpus = 2;
  pascal.rdma = 1;
  const std::string a = env.run + "-a-nic-held", b = env.run + "-b-free";
  createNode(*env.client, a, env.run, rackOf(env), pascal);
  createNode(*env.client, b, env.run, rackOf(env), pascal);
  waitNodesReady(*env.client, env.run, 2);

  // Each node's kubelet hands out GPUs "0", "1" (deviceIDStrategy=index) and mlx5_0. On a, a pod
  // the scheduler never sees (a static pod, or one another scheduler placed) holds mlx5_0.
  topology::testing::FakeKubeletService kubelet_a, kubelet_b;
  for (auto* kubelet : {&kubelet_a, &kubelet_b}) {
    kubelet->canAllocate("nvidia.com/gpu", {"0", "1"});
    kubelet->canAllocate("preferred.jp/rdma", {"mlx5_0"});
  }
  kubelet_a.holds("outside-0", "main", "preferred.jp/rdma", {"mlx5_0"});
  topology::testing::KubeletSocket socket_a(&kubelet_a), socket_b(&kubelet_b);
  env.publish(a, "cts1-pascal.xml", {"--pod-resources-socket", socket_a.path()});
  env.publish(b, "cts1-pascal.xml", {"--pod-resources-socket", socket_b.path()});

  // What the agent published, read back through the API: a's NIC is not free, b's is.
  const proto::NodeTopology on_a = getNodeTopology(*env.client, a);
  REQUIRE(on_a.spec.allocatable);
  CHECK(on_a.spec.allocatable->free_gpus == std::vector<int32_t>{0, 1});
  REQUIRE(on_a.spec.allocatable->free_rdma_nics);
  CHECK(on_a.spec.allocatable->free_rdma_nics->empty());
  const proto::NodeTopology on_b = getNodeTopology(*env.client, b);
  REQUIRE(on_b.spec.allocatable);
  CHECK(on_b.spec.allocatable->free_gpus == std::vector<int32_t>{0, 1});
  CHECK(on_b.spec.allocatable->free_rdma_nics == std::vector<std::string>{"mlx5_0"});

  SchedulerProcess scheduler(kTestSchedulerConfig);
  scheduler.start();
  REQUIRE(scheduler.waitReady());

  // 1 GPU + 1 NIC, required. Had the scheduler ignored spec.allocatable, a and b would be the same
  // to it: the same hwloc fixture (one GPU/NIC pair behind a PCIe switch), the same capacity, no
  // pod requesting anything, so the same alignment, leftover and free room; the tie goes to the
  // first node in name order, a-nic-held, and the CHECK below fails. Only the free devices of a's
  // NodeTopology (no free NIC: nothing can be aligned there) send the pod to b.
  // The scheduler may still be taking in its NodeTopologies when the pod comes (its informer is
  // "synced" before it has handed them on), but it hands them on in name order from a list and in
  // publish order from a watch, a's first either way: a required pod placed on b (which needs
  // b's) was placed knowing a's.
  env.createPod("req-0", "req", 1, "required");
  const std::map<std::string, int> placed = env.waitBound("req-", 1);
  INFO(scheduler.logTail());
  REQUIRE(!placed.empty());
  CHECK(placed == std::map<std::string, int>{{"b-free", 1}});

  // b's NIC is requested now and a's is still held: the next such pod waits, although by requests
  // a has all its GPUs and its NIC free.
  env.createPod("next-0", "next", 1, "required");
  const std::string message = env.waitUnschedulable("next-0");
  INFO(message);
  CHECK(message.find("muster.dev/gpu-nic-affinity: required") != std::string::npos);

  // The outside pod ends; the agent publishes a's NIC as free and the waiting pod goes there:
  // the free devices alone kept it off a.
  kubelet_a.removePod("outside-0");
  env.publish(a, "cts1-pascal.xml", {"--pod-resources-socket", socket_a.path()});
  const proto::NodeTopology freed = getNodeTopology(*env.client, a);
  REQUIRE(freed.spec.allocatable);
  CHECK(freed.spec.allocatable->free_rdma_nics == std::vector<std::string>{"mlx5_0"});
  const std::map<std::string, int> next = env.waitBound("next-", 1);
  REQUIRE(!next.empty());
  CHECK(next == std::map<std::string, int>{{"a-nic-held", 1}});
}

}  // namespace
}  // namespace muster::e2e
