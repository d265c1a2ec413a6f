#include "scheduler/fragmentation.h"

#include <catch2/catch.hpp>

#include "scheduler/cache.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {

using testing::node;
using testing::pod;
using Classes = std::vector<WorkloadProfile::Class>;

constexpr int64_t kGi = int64_t{1} << 30;

TEST_CASE("fragmentation counts the free GPU capacity each shape cannot use, by hand",
          "[fragmentation]") {
  // 3 whole GPUs free, and two shared GPUs with 300 and 600 thousandths left; 20 cores, 64 GiB.
  NodeSlack s{20000, 64 * kGi, 0, 3, {300, 600}};
  // Two 2-GPU pods for every half GPU: 3900 thousandths free in all.
  const Classes classes{{PodShape{8000, 16 * kGi, 2, 0}, 2}, {PodShape{4000, 8 * kGi, 0, 500}, 1}};
  // 2 GPUs fit: the shared ones' 900 are unusable to them. Halves: 3 * 2 + 0 + 1 = 7 fit the
  // GPUs, but 20 cores hold 5: 3900 - 2500 = 1400 left, plus the 300 of the GPU with less than a
  // half free, which no half can use whatever else comes.
  CHECK(fragmentation(s, classes) == 2 * 900 + 1 * (1400 + 300));
  // Short of cores for a 2-GPU pod: all 3900 is unusable to it; 5 cores hold one half.
  s.cpu = 5000;
  CHECK(fragmentation(s, classes) == 2 * 3900 + 1 * (3900 - 500 + 300));
  // Short of cores for a half too: all of it, for both measures.
  s.cpu = 3000;
  CHECK(fragmentation(s, classes) == 2 * 3900 + 1 * (3900 + 3900));
  s.cpu = 5000;
  // A shape needing a NIC the node lacks cannot use anything there.
  const Classes nic{{PodShape{0, 0, 1, 0, 1}, 1}};
  CHECK(fragmentation(s, nic) == 3900);
  s.rdma = 1;
  CHECK(fragmentation(s, nic) == 900);
  // A node without free GPU capacity has none.
  CHECK(fragmentation(NodeSlack{}, classes) == 0);
}

TEST_CASE("the workload profile keeps the most common shapes, and pods leave it when they go",
          "[fragmentation]") {
  WorkloadProfile profile;
  CHECK(profile.empty());
  for (int64_t i = 0; i < 100; ++i) profile.count(PodShape{i + 1, 0, 1, 0}, +1);  // 100 rare shapes
  for (int i = 0; i < 50; ++i) profile.count(PodShape{8000, 0, 8, 0}, +1);
  const Classes& top = profile.classes();
  // The most common shapes, and the prior.
  REQUIRE(top.size() == WorkloadProfile::kMaxClasses + 1);
  CHECK(top[0].shape == PodShape{8000, 0, 8, 0});
  CHECK(top[0].weight == 50);
  CHECK(top.back().shape == WorkloadProfile::kPrior);
  CHECK(top.back().weight == 1);
  for (int i = 0; i < 50; ++i) profile.count(PodShape{8000, 0, 8, 0}, -1);
  for (int64_t i = 0; i < 100; ++i) profile.count(PodShape{i + 1, 0, 1, 0}, -1);
  CHECK(profile.empty());
}

TEST_CASE("the cache's profile is the GPU pods it accounts, bound or assumed", "[fragmentation]") {
  ClusterCache cache({});
  cache.addNode(node("n").gpus(8).cpu("64"));
  cache.addPod(pod("cpu-only").cpu("4").onNode("n"));
  CHECK(cache.workloadProfile().empty());
  cache.addPod(pod("train").gpus(4).cpu("32").onNode("n"));
  REQUIRE(cache.workloadProfile().classes().size() == 2);  // with the prior
  CHECK(cache.workloadProfile().classes()[0].shape == PodShape{32000, 0, 4, 0});
  REQUIRE(cache.assume(*pod("half").gpuFraction("0.5").info(), "n").ok());
  CHECK(cache.workloadProfile().classes().size() == 3);
  // Pods of the prior's shape add to its weight.
  for (int i = 0; i < 3; ++i) cache.addPod(pod("one" + std::to_string(i)).gpus(1).onNode("n"));
  const Classes& classes = cache.workloadProfile().classes();
  REQUIRE(classes.size() == 3);
  CHECK(classes[0].shape == WorkloadProfile::kPrior);
  CHECK(classes[0].weight == 4);
  for (int i = 0; i < 3; ++i) cache.removePod(pod("one" + std::to_string(i)).gpus(1).onNode("n").build());
  cache.removePod(pod("train").gpus(4).cpu("32").onNode("n").build());
  REQUIRE(cache.forget("ml/half").ok());
  CHECK(cache.workloadProfile().empty());
}

}  // namespace
}  // namespace muster::scheduler
