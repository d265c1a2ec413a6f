// The ranking rules of placement (scheduler/placement/scoring.h) on their own.
#include "scheduler/placement/scoring.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::node;
using testing::pod;

std::vector<uint32_t> order(const std::vector<Child>& children) {
  std::vector<uint32_t> out;
  for (const Child& c : children) out.push_back(c.idx);
  return out;
}

TEST_CASE("children rank by room, then preference, alignment, fullness and order", "[placement-scoring]") {
  std::vector<Child> children = {
      {2, 0, 10, 0}, {4, 0, 10, 1}, {2, 5, 10, 2}, {2, 5, 10, 3, 1}, {2, 5, 3, 4, 1}, {2, 0, 10, 5},
  };
  sortChildren(children);
  CHECK(order(children) == std::vector<uint32_t>{1, 4, 3, 2, 0, 5});
}

TEST_CASE("the tightest child that takes all that is needed, else none", "[placement-scoring]") {
  std::vector<Child> children = {{8, 0, 0, 0}, {4, 0, 0, 1}, {4, 1, 0, 2}, {2, 0, 0, 3}};
  sortChildren(children);  // 8, then the two 4s (the preferred first), then 2
  CHECK(tightestFor(children, 0, 3)->idx == 2);  // the smallest room >= 3, the preferred of equals
  CHECK(tightestFor(children, 0, 5)->idx == 0);
  CHECK(tightestFor(children, 0, 9) == children.end());
  CHECK(tightestFor(children, 3, 2)->idx == 3);  // from `start` on only
  CHECK(tightestFor(children, 3, 3) == children.end());
}

TEST_CASE("alignment scores 3 per pod behind one switch, 2 under one root port, 1 on one NUMA node",
          "[placement-scoring]") {
  const AlignedCapacity c{.pcie = 2, .numa = 4, .pix = 1};
  CHECK(alignScore(c, 1) == 3);
  CHECK(alignScore(c, 2) == 1 + 2 + 2);
  CHECK(alignScore(c, 8) == 1 + 2 + 4);
  CHECK(alignScore(AlignedCapacity{}, 4) == 0);
}

TEST_CASE("preferred node affinity ranks a node, and a group that prefers nothing ranks all alike",
          "[placement-scoring]") {
  ClusterCache cache({});
  cache.addNode(node("fast").label("zone", "z1"));
  cache.addNode(node("slow").label("zone", "z2"));
  const NodeInfo& fast = cache.node(*cache.findNode("fast"));
  const NodeInfo& slow = cache.node(*cache.findNode("slow"));
  const PodInfoPtr p = pod("w0").cpu("1").preferredAffinity(10, testing::term("zone", "In", {"z1"})).info();
  const GroupShape g = shapeOf(*p, cache, PlacementOptions{}, DeviceResources::find(), false, false);
  CHECK(preference(g, fast) > preference(g, slow));
  const PodInfoPtr q = pod("w1").cpu("1").info();
  const GroupShape h = shapeOf(*q, cache, PlacementOptions{}, DeviceResources::find(), false, false);
  CHECK(preference(h, fast) == 0);
  CHECK(preference(h, slow) == 0);
}

TEST_CASE("fragmentation orders a gang's nodes only for one group of whole GPUs, packing, with a workload",
          "[placement-scoring]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(8));
  const PodInfoPtr p = pod("w0").gpus(1).info();
  const GroupShape g = shapeOf(*p, cache, PlacementOptions{}, DeviceResources::find(), false, false);
  CHECK_FALSE(gangFragmentationApplies(g, 1, cache, PlacementOptions{}));  // no workload seen yet
  REQUIRE(cache.assume(*pod("seen").gpus(2).info(), "a").ok());
  REQUIRE_FALSE(cache.workloadProfile().empty());
  CHECK(gangFragmentationApplies(g, 1, cache, PlacementOptions{}));
  CHECK_FALSE(gangFragmentationApplies(g, 2, cache, PlacementOptions{}));
  PlacementOptions spread;
  spread.single_pod_strategy = SinglePodStrategy::kSpread;
  CHECK_FALSE(gangFragmentationApplies(g, 1, cache, spread));
}

}  // namespace
}  // namespace muster::scheduler::placement
