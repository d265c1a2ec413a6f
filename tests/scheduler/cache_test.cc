#include "scheduler/cache.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;

ResourceId gpu() { return *internResource("nvidia.com/gpu"); }

int64_t freeGpus(const ClusterCache& cache, const std::string& name) {
  return cache.node(*cache.findNode(name)).freeOf(gpu());
}

TEST_CASE("pods of every scheduler bound to a node are accounted", "[cache]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  proto::Pod other = pod("other").gpus(3).onNode("n1");
  other.spec.scheduler_name = "default-scheduler";
  cache.addPod(other);
  CHECK(freeGpus(cache, "n1") == 5);
  CHECK(cache.node(*cache.findNode("n1")).requested[kPods] == 1);
}

TEST_CASE("a pod that finishes stops counting, and a terminating one counts until gone", "[cache]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  proto::Pod p = pod("p").gpus(8).onNode("n1");
  cache.addPod(p);
  p.meta.deletion_timestamp = "2024-01-01T00:00:00Z";
  cache.updatePod(p);
  CHECK(freeGpus(cache, "n1") == 0);
  p.status.phase = "Succeeded";
  cache.updatePod(p);
  CHECK(freeGpus(cache, "n1") == 8);
  cache.removePod(p);
  CHECK(cache.podCount() == 0);
}

TEST_CASE("a pending pod nominated to a node holds room there until it is bound or gone",
          "[cache]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  auto held = [&] {
    const NodeInfo& n = cache.node(*cache.findNode("n1"));
    std::vector<std::string> out;
    for (const auto& x : n.nominated) out.push_back(x.pod + "@" + std::to_string(x.priority));
    return out;
  };
  cache.addPod(pod("p").gpus(8).priority(100).nominatedTo("n1"));
  CHECK(held() == std::vector<std::string>{"ml/p@100"});
  CHECK(cache.node(*cache.findNode("n1")).requested[kPods] == 0);  // not bound: not accounted
  CHECK(cache.node(*cache.findNode("n1")).nominatedFor(100, [](const std::string&) { return false; })
            == cache.node(*cache.findNode("n1")).nominated[0].requests);
  CHECK(cache.node(*cache.findNode("n1")).nominatedFor(101, [](const std::string&) { return false; })
            == Resources{});  // only for pods of its priority or lower
  // Renominated elsewhere, then bound: the hold moves, then goes.
  cache.addNode(node("n2").gpus(8));
  cache.updatePod(pod("p").gpus(8).priority(100).nominatedTo("n2"));
  CHECK(held().empty());
  cache.updatePod(pod("p").gpus(8).priority(100).onNode("n2"));
  CHECK(cache.node(*cache.findNode("n2")).nominated.empty());
  // Deleted while nominated.
  cache.addPod(pod("q").gpus(1).nominatedTo("n1"));
  CHECK(held().size() == 1);
  cache.removePod("ml/q");
  CHECK(held().empty());
  // Nominated to a node not seen yet: kept, and there when it appears.
  cache.addPod(pod("r").gpus(1).nominatedTo("later"));
  cache.addNode(node("later").gpus(8));
  CHECK(cache.node(*cache.findNode("later")).nominated.size() == 1);
}

TEST_CASE("pods bound to a node not seen yet count once the node appears", "[cache]") {
  ClusterCache cache({});
  cache.addPod(pod("early").gpus(2).onNode("n1"));
  CHECK_FALSE(cache.findNode("n1").has_value());
  cache.addNode(node("n1").gpus(8));
  CHECK(freeGpus(cache, "n1") == 6);
}

TEST_CASE("assume accounts a pod, forget undoes it, the informer's bind confirms it", "[cache]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  PodInfoPtr p = pod("p").gpus(8).info();
  REQUIRE(cache.assume(*p, "n1").ok());
  CHECK(cache.isAssumed("ml/p"));
  CHECK(freeGpus(cache, "n1") == 0);
  CHECK(cache.assume(*p, "n1").code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(cache.forget("ml/p").ok());
  CHECK(freeGpus(cache, "n1") == 8);

  REQUIRE(cache.assume(*p, "n1").ok());
  cache.updatePod(p->pod());  // the informer still shows it pending: stays assumed
  CHECK(cache.isAssumed("ml/p"));
  proto::Pod bound = p->pod();
  bound.spec.node_name = "n1";
  cache.updatePod(bound);
  CHECK_FALSE(cache.isAssumed("ml/p"));
  CHECK(freeGpus(cache, "n1") == 0);
  CHECK(cache.forget("ml/p").code() == absl::StatusCode::kFailedPrecondition);
  CHECK(cache.assume(*pod("q").info(), "nowhere").code() == absl::StatusCode::kNotFound);
}

TEST_CASE("the topology index groups nodes into contiguous domains with free sums", "[cache]") {
  ClusterCache cache({testing::kSpine, testing::kRack});
  cache.addNode(node("b").gpus(8).spine("s1").rack("r2"));
  cache.addNode(node("a").gpus(8).spine("s1").rack("r1"));
  cache.addNode(node("c").gpus(8).spine("s2").rack("r3"));
  cache.addNode(node("d").gpus(8).spine("s1").rack("r1"));
  cache.addNode(node("e").gpus(8));  // no labels
  const Topology& t = cache.topology();
  REQUIRE(t.levels.size() == 2);
  REQUIRE(t.levels[0].size() == 3);  // "", s1, s2
  CHECK(t.levels[0][0].value.empty());
  CHECK(t.levels[0][1].value == "s1");
  CHECK(t.levels[0][1].end - t.levels[0][1].begin == 3);
  CHECK(t.levels[0][1].child_end - t.levels[0][1].child_begin == 2);
  const Domain& r1 = t.levels[1][t.levels[0][1].child_begin];
  CHECK(r1.value == "r1");
  CHECK(r1.free[gpu()] == 16);
  CHECK(cache.node(t.order[r1.begin]).name == "a");
  CHECK(cache.node(t.order[r1.begin + 1]).name == "d");

  // Sums follow pods incrementally.
  cache.addPod(pod("p").gpus(3).onNode("a"));
  CHECK(cache.topology().levels[1][t.levels[0][1].child_begin].free[gpu()] == 13);
  CHECK(cache.topology().levels[0][1].free[gpu()] == 21);
}

TEST_CASE("node updates keep labels, taints and allocatable current", "[cache]") {
  ClusterCache cache({testing::kRack});
  cache.addNode(node("n1").gpus(8).rack("r1"));
  cache.addPod(pod("p").gpus(2).onNode("n1"));
  cache.updateNode(node("n1").gpus(4).rack("r1").cordoned());
  const NodeInfo& n = cache.node(*cache.findNode("n1"));
  CHECK(n.unschedulable);
  CHECK(n.freeOf(gpu()) == 2);
  CHECK(cache.topology().levels[0][0].free[gpu()] == 2);
  cache.updateNode(node("n1").gpus(4).rack("r9"));
  CHECK(cache.topology().levels[0][0].value == "r9");
  cache.removeNode(node("n1").build());
  CHECK_FALSE(cache.findNode("n1").has_value());
  CHECK(cache.nodeCount() == 0);
  CHECK(cache.topology().order.empty());
}

}  // namespace
}  // namespace muster::scheduler
