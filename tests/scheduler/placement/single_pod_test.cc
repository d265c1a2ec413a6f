// The single pod's node (scheduler/placement/single_pod.h) on its own: shape, cache, options and
// per-node feasibility in, a position out.
#include "scheduler/placement/single_pod.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::node;
using testing::pod;

struct Lone {
  explicit Lone(const ClusterCache& cache, const PodInfoPtr& p, PlacementOptions options = {})
      : cache(cache), pod(p), options(std::move(options)) {
    request.key = GangKey{"ml", p->key, true};
    request.members = {p};
  }
  // The chosen node's name and GPU, or "" when none.
  std::pair<std::string, int32_t> best() const {
    const NodeFeasibility feasible(cache, request, DeviceResources::find());
    const GroupShape g = shapeOf(*pod, cache, options, DeviceResources::find(), false, false);
    auto found = bestNodeForSinglePod(g, dominantResource(pod->requests), cache, options, feasible);
    if (!found) return {"", -1};
    return {cache.node(cache.topology().order[found->first]).name, found->second};
  }
  const ClusterCache& cache;
  PodInfoPtr pod;
  PlacementOptions options;
  GangRequest request;
};

TEST_CASE("a lone pod packs onto the node it leaves fullest, or spreads onto the emptiest",
          "[placement-single]") {
  ClusterCache cache({testing::kRack});
  cache.addNode(node("a").gpus(8).rack("r0"));
  cache.addNode(node("b").gpus(8).rack("r0"));
  cache.addNode(node("c").gpus(8).rack("r1"));
  REQUIRE(cache.assume(*pod("x").gpus(5).info(), "b").ok());
  REQUIRE(cache.assume(*pod("y").gpus(2).info(), "c").ok());
  const PodInfoPtr p = pod("w0").gpus(2).info();
  CHECK(Lone(cache, p).best().first == "b");  // packing (the default)
  PlacementOptions spread;
  spread.single_pod_strategy = SinglePodStrategy::kSpread;
  CHECK(Lone(cache, p, spread).best().first == "a");
}

TEST_CASE("a lone pod that fits nowhere gets no node", "[placement-single]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(4));
  CHECK(Lone(cache, pod("w0").gpus(8).info()).best().first.empty());
}

TEST_CASE("a fraction of a GPU goes onto a shared GPU with room, and gets its index",
          "[placement-single]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(2));
  REQUIRE(cache.assume(*pod("half").gpuFraction("0.5").info(), "a", 1).ok());
  const auto [name, gpu] = Lone(cache, pod("w0").gpuFraction("0.25").info()).best();
  CHECK(name == "a");
  CHECK(gpu == 1);
}

}  // namespace
}  // namespace muster::scheduler::placement
