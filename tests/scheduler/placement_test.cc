#include "scheduler/placement.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "tests/scheduler/builders.h"
#include "tests/scheduler/placing.h"

namespace muster::scheduler {
namespace {
using testing::addRacks;
using testing::node;
using testing::pod;
using testing::placeLone;
using testing::placed;

const std::vector<std::string> kLevels{testing::kSpine, testing::kRack};
constexpr int kSpineLevel = 0;
constexpr int kRackLevel = 1;

// A gang of `n` members built from `shape` ("w0".."w<n-1>").
GangRequest gang(const std::string& name, int n, const std::function<testing::PodBuilder(int)>& shape) {
  GangRequest r;
  r.key = GangKey{"ml", name, false};
  r.min_member = n;
  for (int i = 0; i < n; ++i) r.members.push_back(shape(i).info());
  return r;
}

GangRequest fullNodeGang(const std::string& name, int n) {
  return gang(name, n, [&](int i) { return pod(name + "-w" + std::to_string(i)).gpus(8).gang(name, n); });
}

Unschedulable refused(const PlacementResult& r) {
  if (std::holds_alternative<GangPlacement>(r)) FAIL("placed: " << std::get<GangPlacement>(r).describe());
  return std::get<Unschedulable>(r);
}

std::set<std::string> racksOf(const ClusterCache& cache, const GangPlacement& p) {
  std::set<std::string> racks;
  for (const Assignment& a : p.assignments) {
    racks.insert(cache.node(*cache.findNode(a.node)).labels().at(testing::kRack));
  }
  return racks;
}

std::set<std::string> nodesOf(const GangPlacement& p) {
  std::set<std::string> nodes;
  for (const Assignment& a : p.assignments) nodes.insert(a.node);
  return nodes;
}

void assumeAll(ClusterCache& cache, const GangRequest& r, const GangPlacement& p) {
  for (size_t i = 0; i < p.assignments.size(); ++i) {
    REQUIRE(cache.assume(*r.members[i], p.assignments[i].node).ok());
  }
}

TEST_CASE("a gang of 8 is not placed at all when only 7 fit, and the message says why",
          "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 1, 7, 8);
  GangRequest r = fullNodeGang("train-3", 8);
  const Unschedulable u = refused(place(r, cache));
  CHECK(u.message ==
        "gang ml/train-3 needs 8 pods × 8 nvidia.com/gpu; the cluster can hold 7; "
        "7/7 nodes are available.");
  CHECK_FALSE(u.evict_bound_members);

  cache.addNode(node("r0-n7").gpus(8).rack("r0").spine("s0"));
  CHECK(placed(place(r, cache)).assignments.size() == 8);
}

TEST_CASE("the message aggregates per-node reasons and counts cordoned nodes", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 1, 4, 8);
  for (int i = 0; i < 4; ++i) {
    cache.addNode(node("c" + std::to_string(i)).gpus(8).rack("r0").spine("s0").cordoned());
  }
  cache.addPod(pod("busy").gpus(4).onNode("r0-n0"));
  const Unschedulable u = refused(place(fullNodeGang("train", 6), cache));
  CHECK(u.message ==
        "gang ml/train needs 6 pods × 8 nvidia.com/gpu; the cluster can hold 3; 4 nodes are "
        "cordoned; 3/8 nodes are available: 1 Insufficient nvidia.com/gpu, 4 node(s) were "
        "unschedulable.");
  CHECK(u.reasons.at("node(s) were unschedulable") == 4);
}

TEST_CASE("a single pod that fits nowhere gets kube-scheduler's message", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(4));
  cache.addNode(node("n2").gpus(8).cordoned());
  GangRequest r;
  r.key = GangKey{"ml", "solo", true};
  r.members.push_back(pod("solo").gpus(8).info());
  CHECK(refused(place(r, cache)).message ==
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.");
}

TEST_CASE("4 racks × 8 nodes: a 16-pod gang of full-node pods lands in exactly 2 racks",
          "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8);
  const GangPlacement p = placed(place(fullNodeGang("big", 16), cache));
  CHECK(racksOf(cache, p).size() == 2);
  CHECK(nodesOf(p).size() == 16);
}

TEST_CASE("4 racks × 8 nodes: an 8-pod gang lands in one rack", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8);
  const GangPlacement p = placed(place(fullNodeGang("eight", 8), cache));
  CHECK(racksOf(cache, p).size() == 1);
  CHECK(p.level == kRackLevel);
  CHECK(p.describe().rfind("muster.dev/rack=r", 0) == 0);
}

TEST_CASE("the tightest rack that fits is chosen", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8);
  // r0: 2 nodes busy (room for 6); r1: 4 busy (room for 4); r2: 5 busy (room for 3); r3: empty.
  auto fill = [&](int rack, int nodes) {
    for (int n = 0; n < nodes; ++n) {
      std::string name = "r" + std::to_string(rack) + "-n" + std::to_string(n);
      cache.addPod(pod("busy-" + name).gpus(8).onNode(name));
    }
  };
  fill(0, 2);
  fill(1, 4);
  fill(2, 5);
  const GangPlacement p = placed(place(fullNodeGang("four", 4), cache));
  CHECK(racksOf(cache, p) == std::set<std::string>{"r1"});
}

TEST_CASE("inside a rack, the fullest nodes that fit are used first", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 1, 4, 8);
  cache.addPod(pod("a").gpus(6).onNode("r0-n1"));  // n1 has 2 free
  cache.addPod(pod("b").gpus(4).onNode("r0-n2"));  // n2 has 4 free
  GangRequest r = gang("small", 2, [](int i) { return pod("s" + std::to_string(i)).gpus(2).gang("small", 2); });
  // Both pods fit on n2 (4 free): one node, the tightest that takes the whole gang.
  CHECK(nodesOf(placed(place(r, cache))) == std::set<std::string>{"r0-n2"});
}

TEST_CASE("topology-required at rack level: a 9-pod gang stays pending with a clear message",
          "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8);
  GangRequest r = fullNodeGang("nine", 9);
  r.required_level = kRackLevel;
  const Unschedulable u = refused(place(r, cache));
  CHECK(u.message ==
        "gang ml/nine needs 9 pods × 8 nvidia.com/gpu; the largest muster.dev/rack domain "
        "(muster.dev/rack=r0) can hold 8; 32/32 nodes are available.");
}

TEST_CASE("topology-preferred falls back to spanning racks and says so", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8, /*racks_per_spine=*/2);
  GangRequest r = fullNodeGang("nine", 9);
  r.preferred_level = kRackLevel;
  const GangPlacement p = placed(place(r, cache));
  CHECK(p.fell_back);
  CHECK(p.level == kSpineLevel);
  CHECK(racksOf(cache, p).size() == 2);
}

TEST_CASE("a gang too big for any domain spans as few top-level domains as possible",
          "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8, /*racks_per_spine=*/1);  // one rack per spine
  const GangPlacement p = placed(place(fullNodeGang("huge", 20), cache));
  CHECK(p.level == -1);
  CHECK(p.domains_spanned == 3);
  CHECK(racksOf(cache, p).size() == 3);
}

TEST_CASE("bound members constrain where the rest goes", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8);
  // Two members already run in r2; the rest must join them there even though r0 is tighter.
  cache.addPod(pod("bound-0").gpus(8).gang("g", 4).onNode("r2-n0"));
  cache.addPod(pod("bound-1").gpus(8).gang("g", 4).onNode("r2-n1"));
  cache.addPod(pod("filler").gpus(8).onNode("r0-n0"));
  GangRequest r = fullNodeGang("g", 2);
  r.min_member = 4;
  r.bound = {{"ml/bound-0", "r2-n0"}, {"ml/bound-1", "r2-n1"}};
  r.required_level = kRackLevel;
  const GangPlacement p = placed(place(r, cache));
  CHECK(racksOf(cache, p) == std::set<std::string>{"r2"});
}

TEST_CASE("bound members in different racks under topology-required must be evicted",
          "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 4, 8, 8);
  GangRequest r = fullNodeGang("g", 2);
  r.min_member = 4;
  r.bound = {{"ml/b0", "r0-n0"}, {"ml/b1", "r1-n0"}};
  r.required_level = kRackLevel;
  const Unschedulable u = refused(place(r, cache));
  CHECK(u.evict_bound_members);
  CHECK(u.message.find("bound members are not within one muster.dev/rack domain") !=
        std::string::npos);
}

TEST_CASE("heterogeneous members: a small launcher and full-node workers fit together",
          "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 2, 4, 8);
  GangRequest r = gang("mpi", 5, [](int i) {
    if (i == 0) return pod("launcher").cpu("1").gang("mpi", 5);
    return pod("worker-" + std::to_string(i)).gpus(8).cpu("60").gang("mpi", 5);
  });
  const GangPlacement p = placed(place(r, cache));
  REQUIRE(p.assignments.size() == 5);
  CHECK(racksOf(cache, p).size() == 1);
  CHECK(p.assignments[0].pod_key == "ml/launcher");
  // Workers take 60 of 64 cpus, so the launcher shares a worker's node only with 1 cpu: fine.
  assumeAll(cache, r, p);
  std::set<std::string> worker_nodes;
  for (size_t i = 1; i < 5; ++i) worker_nodes.insert(p.assignments[i].node);
  CHECK(worker_nodes.size() == 4);
}

TEST_CASE("heterogeneous members never overcommit a node between groups", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8).cpu("8"));
  cache.addNode(node("n2").gpus(8).cpu("8"));
  GangRequest r = gang("mix", 3, [](int i) {
    if (i == 0) return pod("a").gpus(8).cpu("6").gang("mix", 3);
    return pod("b" + std::to_string(i)).cpu("3").gang("mix", 3);
  });
  const GangPlacement p = placed(place(r, cache));
  assumeAll(cache, r, p);
  for (const char* n : {"n1", "n2"}) {
    const NodeInfo& info = cache.node(*cache.findNode(n));
    CHECK(info.freeOf(kCpu) >= 0);
  }
}

TEST_CASE("single pods pack onto the fullest node by default, spread when configured",
          "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("empty").gpus(8));
  cache.addNode(node("half").gpus(8));
  cache.addPod(pod("x1").gpus(2).onNode("half"));
  cache.addPod(pod("x2").gpus(2).onNode("half"));
  GangRequest r;
  r.key = GangKey{"ml", "p", true};
  r.members.push_back(pod("p").gpus(2).info());
  CHECK(placed(place(r, cache)).assignments[0].node == "half");
  PlacementOptions spread{SinglePodStrategy::kSpread};
  CHECK(placed(place(r, cache, spread)).assignments[0].node == "empty");
}

TEST_CASE("a lone pod keeps the whole GPUs that the cluster's bigger pods need", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("empty").gpus(8));
  cache.addNode(node("half").gpus(8));
  // The pods that run here ask for 4 GPUs each: "half" has room for one more.
  cache.addPod(pod("x").gpus(4).onNode("half"));
  GangRequest r;
  r.key = GangKey{"ml", "p", true};
  r.members.push_back(pod("p").gpus(2).info());
  // Packing would fill "half" and leave 2 GPUs no such pod can use; on "empty" 6 are left, room
  // for one.
  CHECK(placed(place(r, cache)).assignments[0].node == "empty");
}

TEST_CASE("fractions of a GPU go where the GPUs keep room for the fractions that come",
          "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(1));
  cache.addNode(node("b").gpus(1));
  // The workload: pods asking for half a GPU. "a" has 600 thousandths left on its GPU, "b" 500.
  cache.addPod(pod("x").gpuFraction("0.4").onNode("a"));
  cache.addPod(pod("y").gpuFraction("0.5").onNode("b"));
  GangRequest r;
  r.key = GangKey{"ml", "q", true};
  r.members.push_back(pod("q").gpuFraction("0.1").info());
  // The fullest GPU with room is "b"'s, but 0.1 there leaves 400, too little for a half; on "a"
  // it leaves 500, room for one.
  const GangPlacement p = placed(place(r, cache));
  CHECK(p.assignments[0].node == "a");
  CHECK(p.assignments[0].gpu_index == *cache.sharedGpuOf("ml/x"));
}

TEST_CASE("single pods pack without stranding GPUs behind exhausted CPU", "[placement]") {
  ClusterCache cache({});
  auto lone = placeLone;
  cache.addNode(node("gpu").gpus(8).cpu("64"));
  cache.addNode(node("cpu").cpu("40"));
  // The cluster's GPU pods ask for 8 cores per GPU: the 4 free GPUs of "gpu" need 32 cores.
  cache.addPod(pod("train").gpus(4).cpu("32").onNode("gpu"));
  // Packing by cores alone would fill "gpu" (24 left against 32) and leave one of its GPUs
  // without cores; the CPU-only pod goes to the node without GPUs.
  CHECK(lone(cache, pod("etl").cpu("8")) == "cpu");
  // A node with cores to spare beyond its free GPUs strands nothing either: packing decides.
  cache.addNode(node("roomy").gpus(8).cpu("128"));
  cache.addPod(pod("train2").gpus(4).cpu("32").onNode("roomy"));  // 96 cores for 4 GPUs
  CHECK(lone(cache, pod("etl2").cpu("30")) == "cpu");    // 2 left there, 66 on "roomy"
  CHECK(lone(cache, pod("etl3").cpu("30")) == "roomy");  // "cpu" is full; "gpu" would strand 4
  // A GPU pod: the node it fills most would keep its last GPU without cores; it takes the one
  // where the GPUs left keep theirs.
  ClusterCache two({});
  two.addNode(node("a").gpus(4).cpu("40"));
  two.addNode(node("b").gpus(4).cpu("64"));
  two.addPod(pod("x").gpus(2).cpu("15").onNode("a"));  // a: 2 GPUs, 25 cores free
  two.addPod(pod("y").gpus(1).cpu("15").onNode("b"));  // b: 3 GPUs, 49 cores free
  // 10 cores per GPU. On a, the GPU left would have 5 cores; on b, 2 GPUs keep 29.
  CHECK(lone(two, pod("big-cpu").gpus(1).cpu("20")) == "b");
  // Without CPU to compare (a pod asking for GPUs only), packing alone: the fullest.
  CHECK(lone(two, pod("gpus-only").gpus(1)) == "a");
}

TEST_CASE("a gang's members take the node whose GPUs would otherwise be stranded", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(4).cpu("64"));
  cache.addNode(node("b").gpus(4).cpu("64"));
  // The cluster's pods: 2 GPUs with 48 cores, and 2 GPUs with 16. Both nodes have 2 GPUs free;
  // "a" 48 cores, "b" 16: "b" cannot take the first kind.
  cache.addPod(pod("x").gpus(2).cpu("16").onNode("a"));
  cache.addPod(pod("y").gpus(2).cpu("48").onNode("b"));
  GangRequest r = gang("pair", 2, [](int i) {
    return pod("p" + std::to_string(i)).gpus(1).cpu("8").gang("pair", 2);
  });
  // Each node takes both members (the same number of nodes either way); on "a" they would leave
  // "b"'s 2 GPUs to the 16-core kind only, on "b" they use what no 48-core pod could.
  CHECK(nodesOf(placed(place(r, cache))) == std::set<std::string>{"b"});
  // A gang that needs two of three such nodes: the one with too few cores for the 48-core kind
  // ("c") is one of them, and still no more nodes than two.
  ClusterCache three({});
  for (const char* name : {"a", "b", "c"}) three.addNode(node(name).gpus(4).cpu("64"));
  three.addPod(pod("x").gpus(2).cpu("16").onNode("a"));
  three.addPod(pod("y").gpus(2).cpu("16").onNode("b"));
  three.addPod(pod("z").gpus(2).cpu("48").onNode("c"));
  GangRequest four = gang("four", 4, [](int i) {
    return pod("f" + std::to_string(i)).gpus(1).cpu("8").gang("four", 4);
  });
  const std::set<std::string> used = nodesOf(placed(place(four, three)));
  CHECK(used.size() == 2);
  CHECK(used.contains("c"));
}

TEST_CASE("a pod that accepts any GPU model leaves the model other pods require to them",
          "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("t4").gpus(4).label(proto::vocabulary::kLabelGpuModel, "T4"));
  cache.addNode(node("a100").gpus(8).label(proto::vocabulary::kLabelGpuProduct, "A100"));
  auto lone = [&](testing::PodBuilder b) { return placeLone(cache, std::move(b)); };
  // No pod requires a model yet: packing, the fullest node.
  CHECK(lone(pod("any1").gpus(1)) == "t4");
  // Once pods restricted to T4 hold some of it, pods that accept any model go elsewhere.
  CHECK(lone(pod("t4-only").gpus(1).nodeSelector(proto::vocabulary::kLabelGpuModel, "T4")) == "t4");
  CHECK(lone(pod("any2").gpus(1)) == "a100");
  // A pod accepting T4 or A100 by node affinity is restricted too, and goes where it fits best.
  CHECK(lone(pod("either").gpus(2).requiredAffinity(
            testing::term(proto::vocabulary::kLabelGpuModel, "In", {"T4", "A100"}))) == "t4");
  CHECK(requiredGpuModels(pod("x").requiredAffinity(testing::term(proto::vocabulary::kLabelGpuProduct,
                                                                  "In", {"A", "B"})).build()) ==
        std::vector<std::string>{"A", "B"});
  // A second term without a model restriction lets the pod go anywhere.
  CHECK(requiredGpuModels(pod("y").requiredAffinity(testing::term(proto::vocabulary::kLabelGpuModel,
                                                                  "In", {"A"}))
                              .requiredAffinity(testing::term("zone", "In", {"z"})).build())
            .empty());
}

TEST_CASE("a gang that accepts any GPU model leaves the model other pods require to them",
          "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("t4").gpus(4).label(proto::vocabulary::kLabelGpuModel, "T4"));
  cache.addNode(node("v100").gpus(4).label(proto::vocabulary::kLabelGpuModel, "V100"));
  GangRequest pair = gang("pair", 2, [](int i) { return pod("p" + std::to_string(i)).gpus(2).gang("pair", 2); });
  // No pod requires a model: either node holds the gang, the first of equals.
  CHECK(nodesOf(placed(place(pair, cache))) == std::set<std::string>{"t4"});
  // A pod restricted to T4 is running: the gang goes to the V100 node, as full after it.
  cache.addPod(pod("t4-only").gpus(1).nodeSelector(proto::vocabulary::kLabelGpuModel, "T4").onNode("t4"));
  cache.addPod(pod("filler").gpus(1).onNode("v100"));
  GangRequest three = gang("three", 3, [](int i) { return pod("t" + std::to_string(i)).gpus(1).gang("three", 3); });
  CHECK(nodesOf(placed(place(three, cache))) == std::set<std::string>{"v100"});
}

TEST_CASE("a pod that needs no RDMA NIC or big memory leaves those nodes to the pods that do",
          "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("ib").gpus(8).resource("preferred.jp/rdma", "4"));
  cache.addNode(node("eth").gpus(8));
  // The workload: pods with 2 GPUs and a NIC. Packing would fill "ib" (6 free against 8).
  cache.addPod(pod("mpi").gpus(2).request("preferred.jp/rdma", "1").onNode("ib"));
  CHECK(placeLone(cache, pod("plain").gpus(2)) == "eth");
  // The same pod with a NIC can only go to "ib".
  CHECK(placeLone(cache, pod("mpi2").gpus(2).request("preferred.jp/rdma", "1")) == "ib");

  ClusterCache memory({});
  memory.addNode(node("big").gpus(8).memory("2Ti"));
  memory.addNode(node("small").gpus(8).memory("512Gi"));
  // Pods with 2 GPUs and 800 GiB run here; only "big" has room for them (1.2 TiB free).
  memory.addPod(pod("huge").gpus(2).memory("800Gi").onNode("big"));
  // 500 GiB on "big" would leave too little for the next such pod; "small" holds it.
  CHECK(placeLone(memory, pod("mid").gpus(2).memory("500Gi")) == "small");
  // "small" has 12 GiB left for its 6 free GPUs: a pod light enough uses those GPUs, which
  // neither shape could.
  CHECK(placeLone(memory, pod("light").gpus(2).memory("10Gi")) == "small");
  // One that would not fit there goes to "big", leaving it 1.1 TiB.
  CHECK(placeLone(memory, pod("fair").gpus(2).memory("100Gi")) == "big");
}

TEST_CASE("preferred node affinity decides among feasible nodes", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("plain").gpus(8));
  cache.addNode(node("fast").gpus(8).label("net", "ib"));
  cache.addPod(pod("x").gpus(4).onNode("plain"));
  GangRequest r;
  r.key = GangKey{"ml", "p", true};
  r.members.push_back(pod("p").gpus(2).preferredAffinity(10, testing::term("net", "In", {"ib"})).info());
  CHECK(placed(place(r, cache)).assignments[0].node == "fast");
}

TEST_CASE("blocked (reserved) nodes are not used", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  cache.addNode(node("n2").gpus(8));
  GangRequest r;
  r.key = GangKey{"ml", "p", true};
  r.members.push_back(pod("p").gpus(8).info());
  r.blocked_nodes = {"n1"};
  CHECK(placed(place(r, cache)).assignments[0].node == "n2");
  r.blocked_nodes = {"n1", "n2"};
  CHECK(refused(place(r, cache)).message ==
        "0/2 nodes are available: 2 node(s) were reserved for another gang.");
}

TEST_CASE("fewer members than minMember: waiting for more pods", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 1, 8, 8);
  GangRequest r = fullNodeGang("t", 5);
  r.min_member = 8;
  const Unschedulable u = refused(place(r, cache));
  CHECK(u.waiting_for_members);
  CHECK(u.message == "gang ml/t is waiting for members: 5 of 8 exist");
}

TEST_CASE("a placement committed with assume is seen by the next decision", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 2, 8, 8);
  GangRequest a = fullNodeGang("a", 8);
  const GangPlacement pa = placed(place(a, cache));
  assumeAll(cache, a, pa);
  GangRequest b = fullNodeGang("b", 8);
  const GangPlacement pb = placed(place(b, cache));
  CHECK(racksOf(cache, pa) != racksOf(cache, pb));
  assumeAll(cache, b, pb);
  refused(place(fullNodeGang("c", 1), cache));
}

TEST_CASE("the reservation plan picks the domain closest to fitting", "[placement]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 2, 4, 8);
  // r0: 3 of 4 nodes busy with small pods; r1: 1 busy.
  for (int n = 0; n < 3; ++n) cache.addPod(pod("s0-" + std::to_string(n)).gpus(1).onNode("r0-n" + std::to_string(n)));
  cache.addPod(pod("s1").gpus(1).onNode("r1-n0"));
  std::vector<std::string> nodes = planReservation(fullNodeGang("g", 4), cache);
  CHECK(std::set<std::string>(nodes.begin(), nodes.end()) ==
        std::set<std::string>{"r1-n0", "r1-n1", "r1-n2", "r1-n3"});
}

TEST_CASE("room nominated to a pod of equal or higher priority is not taken, lower is", "[placement]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(8));
  cache.addNode(node("b").gpus(8));
  // Another scheduler preempted for "vip" on node a and nominated it there.
  cache.addPod(pod("vip").gpus(8).priority(1000).nominatedTo("a").schedulerName("default-scheduler"));
  auto lone = [&](testing::PodBuilder b) {
    GangRequest r;
    r.key = GangKey{"ml", "lone", true};
    r.members.push_back(b.info());
    return place(r, cache);
  };
  // Packing would pick a (first in order, equally empty); the hold sends it to b.
  CHECK(placed(lone(pod("low").gpus(8).priority(10))).assignments[0].node == "b");
  CHECK(placed(lone(pod("peer").gpus(8).priority(1000))).assignments[0].node == "b");
  // A pod of higher priority may take the held room (kube-scheduler would preempt for it too).
  CHECK(placed(lone(pod("higher").gpus(8).priority(2000))).assignments[0].node == "a");
  // Both nodes held: a gang of two full nodes waits, in kube-scheduler's words.
  cache.addPod(pod("vip2").gpus(8).priority(1000).nominatedTo("b"));
  Unschedulable u = refused(place(fullNodeGang("g", 2), cache));
  CHECK_THAT(u.message, Catch::Contains("2 Insufficient nvidia.com/gpu"));
  // A gang member's own nomination does not hold room against its gang.
  GangRequest own;
  own.key = GangKey{"ml", "vip", true};
  own.members.push_back(pod("vip").gpus(8).priority(1000).nominatedTo("a").info());
  CHECK(placed(place(own, cache)).assignments[0].node == "a");
}


TEST_CASE("the free-GPU index skips domains without changing a single placement: a seeded stream "
          "on a fragmented cluster, placed with and without it", "[placement]") {
  std::mt19937 rng(20261204);
  ClusterCache indexed(kLevels), scanned(kLevels);
  for (ClusterCache* c : {&indexed, &scanned}) addRacks(*c, 24, 8, 8, 4);
  // Two GPU models, racks alternating; some pods ask for one (model scarcity is in play).
  for (ClusterCache* c : {&indexed, &scanned}) {
    for (int r = 0; r < 24; ++r) {
      for (int n = 0; n < 8; ++n) {
        c->updateNode(node("r" + std::to_string(r) + "-n" + std::to_string(n)).gpus(8)
                          .rack("r" + std::to_string(r)).spine("s" + std::to_string(r / 4))
                          .label(proto::vocabulary::kLabelGpuModel, r % 3 == 0 ? "T4" : "A100"));
      }
    }
  }
  // Background pods of all sizes, some nodes full, some empty.
  std::vector<std::string> nodes;
  for (int r = 0; r < 24; ++r)
    for (int n = 0; n < 8; ++n) nodes.push_back("r" + std::to_string(r) + "-n" + std::to_string(n));
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int used = static_cast<int>(rng() % 9);
    if (used == 0) continue;
    proto::Pod bg = pod("bg-" + std::to_string(i)).gpus(used).onNode(nodes[i]).build();
    indexed.addPod(bg);
    scanned.addPod(bg);
  }
  PlacementOptions with, without;
  without.gpu_index = false;
  std::vector<std::pair<GangRequest, GangPlacement>> running;
  int placed_count = 0, refused_count = 0;
  for (int step = 0; step < 400; ++step) {
    const int sizes[] = {1, 1, 1, 1, 2, 4, 8, 16};
    const int n = sizes[rng() % 8];
    const int gpus = 1 + static_cast<int>(rng() % 8);
    const std::string name = "g" + std::to_string(step);
    GangRequest r = gang(name, n, [&](int i) {
      testing::PodBuilder b = pod(name + "-" + std::to_string(i)).gpus(gpus);
      if (n > 1) b.gang(name, n);
      if (step % 5 == 0) b.nodeSelector(proto::vocabulary::kLabelGpuModel, "T4");
      return b;
    });
    if (n == 1) r.key.single_pod = true;
    if (rng() % 4 == 0) r.preferred_level = kRackLevel;
    PlacementOptions spread_with = with, spread_without = without;
    if (n == 1 && rng() % 5 == 0) {
      spread_with.single_pod_strategy = spread_without.single_pod_strategy = SinglePodStrategy::kSpread;
    }
    PlacementResult a = place(r, indexed, spread_with);
    PlacementResult b = place(r, scanned, spread_without);
    REQUIRE(a.index() == b.index());
    if (const auto* pa = std::get_if<GangPlacement>(&a)) {
      const GangPlacement& pb = std::get<GangPlacement>(b);
      INFO("step " << step << ": " << n << " x " << gpus << " GPUs");
      REQUIRE(pa->assignments == pb.assignments);
      assumeAll(indexed, r, *pa);
      assumeAll(scanned, r, pb);
      running.emplace_back(std::move(r), *pa);
      ++placed_count;
    } else {
      ++refused_count;
    }
    // Gangs finish now and then, so the cluster keeps changing both ways.
    if (!running.empty() && rng() % 3 == 0) {
      const size_t k = rng() % running.size();
      for (const auto& m : running[k].first.members) {
        REQUIRE(indexed.forget(m->key).ok());
        REQUIRE(scanned.forget(m->key).ok());
      }
      running.erase(running.begin() + static_cast<ptrdiff_t>(k));
    }
  }
  // The stream exercised both outcomes.
  CHECK(placed_count > 100);
  CHECK(refused_count > 10);
}

}  // namespace
}  // namespace muster::scheduler
