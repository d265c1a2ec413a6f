// The fill (scheduler/placement/fill.h) on its own: a prepared gang, the feasibility and the units
// in, pods per position out, the capacity columns as they were afterwards.
#include "scheduler/placement/fill.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::addRacks;
using testing::pod;

const std::vector<std::string> kLevels{testing::kSpine, testing::kRack};

struct Filling {
  Filling(const ClusterCache& cache, GangRequest r)
      : cache(cache), request(std::move(r)), feasible(cache, request, DeviceResources::find()), units(cache),
        fill(prepareGang(request, analyzeGang(request.members, cache, cache.levels()), cache, PlacementOptions{},
                         DeviceResources::find(), false),
             request, cache, options, feasible, units) {
    fill.computeAllCaps();
  }
  // Pods per node of the last fill, all groups together.
  std::map<std::string, int64_t> perNode() const {
    std::map<std::string, int64_t> out;
    for (const GroupOut& group : fill.out())
      for (const auto& [pos, k] : group) out[units.node(pos).name] += k;
    return out;
  }
  uint32_t rack(const std::string& value) const {
    const auto& racks = cache.topology().levels[1];
    for (uint32_t d = 0; d < racks.size(); ++d)
      if (racks[d].value == value) return d;
    return 0;
  }
  const ClusterCache& cache;
  const PlacementOptions options;
  const GangRequest request;
  const NodeFeasibility feasible;
  const Units units;
  GangFill fill;
};

GangRequest gangOf(std::vector<PodInfoPtr> members) {
  GangRequest r;
  r.key = GangKey{"ml", "g", false};
  r.min_member = static_cast<int32_t>(members.size());
  r.members = std::move(members);
  return r;
}

TEST_CASE("a gang fills a rack's nodes, and the capacity columns are those of the cache again",
          "[placement-fill]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 2, 4, 8);
  std::vector<PodInfoPtr> members;
  for (int i = 0; i < 6; ++i) members.push_back(pod("w" + std::to_string(i)).gpus(4).info());
  Filling f(cache, gangOf(members));
  const FillGroup& g = f.fill.groups()[0];
  const uint32_t r1 = f.rack("r1");
  CHECK(f.fill.capsum(g, 1, r1) == 8);  // 4 nodes × 2 pods
  CHECK(f.fill.unitFits(1, r1));
  CHECK_FALSE(f.fill.unitFits(2, 0));  // one node takes 2 of the 6
  REQUIRE(f.fill.fill(1, r1));
  // The fewest nodes: three full ones.
  CHECK(f.perNode() == std::map<std::string, int64_t>{{"r1-n0", 2}, {"r1-n1", 2}, {"r1-n2", 2}});
  CHECK(f.fill.capsum(g, 1, r1) == 8);
  CHECK(f.fill.capsum(g, -1, 0) == 16);
}

TEST_CASE("a launcher and its workers fill one node together, the workers' room counting the launcher's",
          "[placement-fill]") {
  ClusterCache cache(kLevels);
  cache.addNode(testing::node("big").gpus(8).cpu("4").rack("r0").spine("s0"));
  // The launcher takes 2 CPUs; each worker 4 GPUs and 1 CPU: two workers fit beside it, not three.
  auto launcher = pod("launcher").cpu("2").info();
  auto worker = [](int i) { return pod("w" + std::to_string(i)).gpus(4).cpu("1").info(); };
  Filling two(cache, gangOf({launcher, worker(0), worker(1)}));
  REQUIRE(two.fill.groups().size() == 2);
  REQUIRE(two.fill.fill(2, 0));
  CHECK(two.perNode() == std::map<std::string, int64_t>{{"big", 3}});

  cache.addNode(testing::node("small").cpu("2").rack("r0").spine("s0"));
  Filling three(cache, gangOf({launcher, worker(0), worker(1)}));
  REQUIRE(three.fill.fill(1, 0));
  // In the rack, the launcher goes where it leaves the least of the gang's GPUs free: the small node.
  CHECK(three.perNode() == std::map<std::string, int64_t>{{"big", 2}, {"small", 1}});
}

}  // namespace
}  // namespace muster::scheduler::placement
