// A waiting gang's reservation (scheduler/placement/reservation.h) on its own: the main group's
// shape and capacity columns in, node names out.
#include "scheduler/placement/reservation.h"

#include <catch2/catch.hpp>
#include <set>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::addRacks;
using testing::pod;

struct Waiting {
  Waiting(const ClusterCache& cache, int members, int required_level = -1) : cache(cache), units(cache) {
    for (int i = 0; i < members; ++i) request.members.push_back(pod("w" + std::to_string(i)).gpus(8).info());
    request.required_level = required_level;
  }
  std::set<std::string> reserve() const {
    const NodeFeasibility feasible(cache, request, DeviceResources::find());
    const GroupShape main =
        shapeOf(*request.members[0], cache, PlacementOptions{}, DeviceResources::find(), false, false);
    // The capacity columns as the fill keeps them: per position, and their prefix sums.
    std::vector<int32_t> cap(units.nodes());
    std::vector<int64_t> pre(units.nodes() + 1, 0);
    for (uint32_t p = 0; p < units.nodes(); ++p) {
      cap[p] = feasible.capacity(main, cache.topology().order[p]);
      pre[p + 1] = pre[p] + cap[p];
    }
    const std::vector<std::string> nodes =
        reservedNodes(main, cap, pre, static_cast<int64_t>(request.members.size()),
                      request.required_level, units, cache, feasible);
    return {nodes.begin(), nodes.end()};
  }
  const ClusterCache& cache;
  const Units units;
  GangRequest request;
};

TEST_CASE("a waiting gang reserves the rack with the most room now among those that could hold it",
          "[placement-reservation]") {
  ClusterCache cache({testing::kSpine, testing::kRack});
  addRacks(cache, 2, 4, 8);
  for (int n = 0; n < 3; ++n)
    cache.addPod(pod("s0-" + std::to_string(n)).gpus(1).onNode("r0-n" + std::to_string(n)));
  cache.addPod(pod("s1").gpus(1).onNode("r1-n0"));
  // r1 has 3 free nodes now, r0 one: r1, its free nodes first, then the busy one to make 4.
  CHECK(Waiting(cache, 4).reserve() == std::set<std::string>{"r1-n0", "r1-n1", "r1-n2", "r1-n3"});
  // Two pods: the two free nodes of r1 hold them now; no busy node is needed.
  CHECK(Waiting(cache, 2).reserve() == std::set<std::string>{"r1-n1", "r1-n2"});
}

TEST_CASE("a gang no rack could ever hold reserves nothing when a rack is required", "[placement-reservation]") {
  ClusterCache cache({testing::kSpine, testing::kRack});
  addRacks(cache, 2, 4, 8);
  CHECK(Waiting(cache, 5, /*required_level=*/1).reserve().empty());
  // Not required: the cluster could hold it, across racks.
  CHECK(Waiting(cache, 5).reserve().size() == 5);
}

}  // namespace
}  // namespace muster::scheduler::placement
