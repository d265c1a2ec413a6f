// Candidate domains (scheduler/placement/domains.h) on their own: the topology's units and the
// scope bound members leave a gang.
#include "scheduler/placement/domains.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::addRacks;

const std::vector<std::string> kLevels{testing::kSpine, testing::kRack};

// The index of the rack domain labelled `rack`.
uint32_t rackDomain(const ClusterCache& cache, const std::string& rack) {
  const auto& racks = cache.topology().levels[1];
  for (uint32_t d = 0; d < racks.size(); ++d)
    if (racks[d].value == rack) return d;
  FAIL("no rack " << rack);
  return 0;
}

TEST_CASE("a unit is a run of positions: the cluster, a domain, or one node", "[placement-domains]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 3, 4, 8);
  const Units units(cache);
  CHECK(units.levels() == 2);
  CHECK(units.nodes() == 12);
  CHECK(units.isHost(2));
  CHECK(units.begin(-1, 0) == 0);
  CHECK(units.end(-1, 0) == 12);
  const uint32_t r1 = rackDomain(cache, "r1");
  CHECK(units.end(1, r1) - units.begin(1, r1) == 4);
  for (uint32_t p = units.begin(1, r1); p < units.end(1, r1); ++p)
    CHECK(units.node(p).labels().at(testing::kRack) == "r1");
  CHECK(units.begin(2, 5) == 5);
  CHECK(units.end(2, 5) == 6);
  const ResourceId gpu = *findResource("nvidia.com/gpu");
  CHECK(units.freeDom(1, r1, gpu) == 32);
  CHECK(units.freeDom(2, 5, gpu) == 8);
  CHECK(units.freeDom(-1, 0, gpu) == 0);
}

TEST_CASE("bound members in one rack allow only that rack and the levels above it", "[placement-domains]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 2, 4, 8);
  GangRequest r;
  r.bound = {{"ml/w0", "r1-n0"}, {"ml/w1", "r1-n2"}};
  std::string problem;
  const BoundScope scope = BoundScope::resolve(r, cache, &problem);
  CHECK(problem.empty());
  CHECK(scope.any());
  const uint32_t r1 = rackDomain(cache, "r1");
  CHECK(scope.domain(1) == static_cast<int32_t>(r1));
  CHECK(scope.allows(1, r1));
  CHECK_FALSE(scope.allows(1, rackDomain(cache, "r0")));
  CHECK(scope.domain(2) == -1);  // two nodes: no one node holds them
  CHECK_FALSE(scope.allows(2, 0));
  CHECK(scope.allows(-1, 0));

  GangRequest none;
  const BoundScope open = BoundScope::resolve(none, cache, &problem);
  CHECK_FALSE(open.any());
  CHECK(open.allows(1, rackDomain(cache, "r0")));
}

TEST_CASE("bound members say why no unit can hold them", "[placement-domains]") {
  ClusterCache cache(kLevels);
  addRacks(cache, 2, 4, 8);
  GangRequest gone;
  gone.bound = {{"ml/w0", "r0-n0"}, {"ml/w1", "vanished"}};
  std::string problem;
  BoundScope::resolve(gone, cache, &problem);
  CHECK(problem == "its member ml/w1 is bound to node vanished, which no longer exists");

  GangRequest apart;
  apart.bound = {{"ml/w0", "r0-n0"}, {"ml/w1", "r1-n0"}};
  apart.required_level = 1;
  problem.clear();
  const BoundScope scope = BoundScope::resolve(apart, cache, &problem);
  CHECK(problem ==
        "its 2 bound members are not within one muster.dev/rack domain, which "
        "muster.dev/topology-required requires");
  CHECK(scope.any());
  CHECK_FALSE(scope.allows(1, rackDomain(cache, "r0")));
}

}  // namespace
}  // namespace muster::scheduler::placement
