// A gang's groups and their order (scheduler/placement/gang_groups.h) on their own: the request
// and its inter-pod analysis in, a PreparedGang out.
#include "scheduler/placement/gang_groups.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::pod;

const std::vector<std::string> kLevels{testing::kSpine, testing::kRack};

PreparedGang prepare(const GangRequest& r, const ClusterCache& cache) {
  const GangInterPod inter = analyzeGang(r.members, cache, cache.levels());
  return prepareGang(r, inter, cache, PlacementOptions{}, DeviceResources::find(), false);
}

TEST_CASE("alike members form one group, the biggest members' group first", "[placement-groups]") {
  ClusterCache cache(kLevels);
  testing::addRacks(cache, 1, 2, 8);
  GangRequest r;
  r.members = {pod("launcher").cpu("1").info(), pod("w0").gpus(8).info(), pod("w1").gpus(8).info(),
               pod("w2").gpus(8).info()};
  const PreparedGang gang = prepare(r, cache);
  REQUIRE(gang.groups.size() == 2);
  CHECK(gang.groups[0].members == std::vector<int>{1, 2, 3});
  CHECK(gang.groups[0].count == 3);
  CHECK(gang.groups[1].members == std::vector<int>{0});
  CHECK(gang.dominant == *findResource("nvidia.com/gpu"));
  CHECK(gang.total_count == 4);
  CHECK(gang.fill_order == std::vector<size_t>{0, 1});
  CHECK_FALSE(gang.gang_terms);
  CHECK(gang.unsupported.empty());
}

TEST_CASE("workers whose affinity needs the launcher come after it in the fill", "[placement-groups]") {
  ClusterCache cache(kLevels);
  testing::addRacks(cache, 1, 2, 8);
  GangRequest r;
  r.members.push_back(pod("launcher").cpu("1").label("role", "launcher").info());
  for (int i = 0; i < 2; ++i)
    r.members.push_back(pod("w" + std::to_string(i))
                            .gpus(4)
                            .label("role", "worker")
                            .requiredAffinity("role", "launcher", testing::kRack)
                            .info());
  const PreparedGang gang = prepare(r, cache);
  REQUIRE(gang.groups.size() == 2);
  // groups[0]: the workers (the bigger members); they need groups[1], the launcher.
  CHECK(gang.groups[0].needs == std::vector<size_t>{1});
  CHECK(gang.groups[1].needed_by == std::vector<size_t>{0});
  CHECK(gang.fill_order == std::vector<size_t>{1, 0});
  CHECK(gang.gang_terms);
}

TEST_CASE("fractions of GPUs mixed with other GPU members are refused, saying why", "[placement-groups]") {
  ClusterCache cache(kLevels);
  testing::addRacks(cache, 1, 2, 8);
  GangRequest r;
  r.members = {pod("a").gpuFraction("0.5").info(), pod("b").gpus(1).info()};
  CHECK_THAT(prepare(r, cache).unsupported,
             Catch::StartsWith("its members ask for GPUs in more than one way, some for a fraction"));
}

}  // namespace
}  // namespace muster::scheduler::placement
