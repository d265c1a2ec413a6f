// A spreading group into a unit (scheduler/placement/spread_fill.h) on its own: its constraint,
// capacity by position and the members counted before it in, pods per position out.
#include "scheduler/placement/spread_fill.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::addRacks;
using testing::pod;

// Members that exclude each other on the rack: one per rack (what the gang's analysis gives
// required anti-affinity among a group's members, GangInterPod::one_per_domain).
GangSpread onePerRack(const ClusterCache& cache) {
  GangSpread a;
  a.key = testing::kRack;
  a.max_skew = 1;
  a.can_raise = false;
  a.anti_affinity = true;
  for (NodeId id : cache.topology().order) a.counts.try_emplace(cache.node(id).labels().at(testing::kRack), 0);
  a.sorted.assign(a.counts.size(), 0);
  return a;
}

struct Spreading {
  explicit Spreading(const ClusterCache& cache) : cache(cache), units(cache), pod_(pod("w0").gpus(8).info()) {
    shape = shapeOf(*pod_, cache, PlacementOptions{}, DeviceResources::find(), false, false);
    capacity.assign(units.nodes(), 1);  // each node takes one member
  }
  // Pods per rack, or {} when not all `count` fit; *fit: how many did.
  std::map<std::string, int64_t> place(int64_t count, int64_t* fit) const {
    std::vector<std::pair<uint32_t, int64_t>> out;
    *fit = spreadInto(shape, {onePerRack(cache)}, count, capacity, {}, {}, 0, units.nodes(), units,
                      *findResource("nvidia.com/gpu"), &out);
    std::map<std::string, int64_t> racks;
    for (const auto& [pos, k] : out) racks[units.node(pos).labels().at(testing::kRack)] += k;
    return racks;
  }
  const ClusterCache& cache;
  const Units units;
  PodInfoPtr pod_;
  GroupShape shape;
  std::vector<int32_t> capacity;
};

TEST_CASE("members that exclude each other on the rack go one per rack, as many as there are racks",
          "[placement-spread-fill]") {
  ClusterCache cache({testing::kSpine, testing::kRack});
  addRacks(cache, 3, 2, 8);
  const Spreading s(cache);
  int64_t fit = 0;
  CHECK(s.place(3, &fit) == std::map<std::string, int64_t>{{"r0", 1}, {"r1", 1}, {"r2", 1}});
  CHECK(fit == 3);
  CHECK(s.place(4, &fit).empty());
  CHECK(fit == 3);
}

TEST_CASE("a rack without room takes none, and the others still take one each", "[placement-spread-fill]") {
  ClusterCache cache({testing::kSpine, testing::kRack});
  addRacks(cache, 3, 2, 8);
  Spreading s(cache);
  for (uint32_t p = 0; p < s.units.nodes(); ++p)
    if (s.units.node(p).labels().at(testing::kRack) == "r1") s.capacity[p] = 0;
  int64_t fit = 0;
  CHECK(s.place(2, &fit) == std::map<std::string, int64_t>{{"r0", 1}, {"r2", 1}});
  CHECK(s.place(3, &fit).empty());
  CHECK(fit == 2);
}

}  // namespace
}  // namespace muster::scheduler::placement
