// Pods asking for a fraction of one GPU (muster.dev/gpu-fraction): parsing, the cache's per-GPU
// accounting, and where placement puts them.
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "bench/sim/fgd.h"
#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"
#include "tests/scheduler/placing.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;
using testing::placeLone;

const NodeInfo& nodeNamed(const ClusterCache& cache, const std::string& name) {
  return cache.node(*cache.findNode(name));
}

// GPU index → thousandths held on it.
std::map<int32_t, int32_t> sharesOf(const NodeInfo& n) {
  std::map<int32_t, int32_t> out;
  for (const NodeInfo::GpuShare& s : n.gpu_shares) out[s.index] = s.used;
  return out;
}

TEST_CASE("the fraction annotation is read as thousandths of a GPU, and bad values are refused",
          "[fraction]") {
  CHECK(*gpuFractionMilli(pod("a").build()) == 0);
  CHECK(*gpuFractionMilli(pod("a").gpuFraction("0.5").build()) == 500);
  CHECK(*gpuFractionMilli(pod("a").gpuFraction("250m").build()) == 250);
  CHECK(*gpuFractionMilli(pod("a").gpuFraction("0.0001").build()) == 1);  // rounded up
  for (const char* bad : {"1", "1.5", "0", "-0.5", "half", ""}) {
    absl::StatusOr<int32_t> r = gpuFractionMilli(pod("a").gpuFraction(bad).build());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("muster.dev/gpu-fraction"));
  }
  absl::StatusOr<int32_t> both = gpuFractionMilli(pod("a").gpuFraction("0.5").gpus(1).build());
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(std::string(both.status().message()), Catch::Contains("ask for one or the other"));
  // makePodInfo refuses such a pod with the reason.
  absl::StatusOr<PodInfoPtr> info = makePodInfo(pod("a").gpuFraction("2").build());
  REQUIRE_FALSE(info.ok());
  CHECK_THAT(std::string(info.status().message()), Catch::Contains("above 0 and below 1"));
  CHECK(gpuIndexOf(pod("a").annotation("muster.dev/gpu-index", "3").build()) == 3);
  CHECK_FALSE(gpuIndexOf(pod("a").annotation("muster.dev/gpu-index", "-1").build()).has_value());
}

TEST_CASE("two fractional pods share one GPU and a third that does not fit gets another",
          "[fraction]") {
  ClusterCache cache({});
  cache.addNode(node("n").gpus(2).cpu("16"));
  CHECK(placeLone(cache, pod("a").gpuFraction("0.5").cpu("1")) == "n");
  CHECK(placeLone(cache, pod("b").gpuFraction("0.5").cpu("1")) == "n");
  CHECK(placeLone(cache, pod("c").gpuFraction("0.6").cpu("1")) == "n");
  CHECK(cache.sharedGpuOf("ml/a") == 0);
  CHECK(cache.sharedGpuOf("ml/b") == 0);
  CHECK(cache.sharedGpuOf("ml/c") == 1);
  const NodeInfo& n = nodeNamed(cache, "n");
  CHECK(sharesOf(n) == std::map<int32_t, int32_t>{{0, 1000}, {1, 600}});
  // Both GPUs are taken for whole-GPU pods; a 0.4 still fits beside c, a 0.5 does not.
  CHECK(n.freeOf(cache.gpuResource()) == 0);
  CHECK_THAT(placeLone(cache, pod("whole").gpus(1)), Catch::Contains("Insufficient nvidia.com/gpu"));
  CHECK_THAT(placeLone(cache, pod("d").gpuFraction("0.5")), Catch::Contains("1 Insufficient nvidia.com/gpu"));
  CHECK(placeLone(cache, pod("e").gpuFraction("0.4")) == "n");
  CHECK(cache.sharedGpuOf("ml/e") == 1);
  // Forgetting pods gives their share back; the last one gives the GPU back whole.
  REQUIRE(cache.forget("ml/c").ok());
  REQUIRE(cache.forget("ml/e").ok());
  CHECK(sharesOf(nodeNamed(cache, "n")) == std::map<int32_t, int32_t>{{0, 1000}});
  CHECK(nodeNamed(cache, "n").freeOf(cache.gpuResource()) == 1);
  CHECK(placeLone(cache, pod("whole2").gpus(1)) == "n");
  CHECK_FALSE(cache.sharedGpuOf("ml/whole2").has_value());
}

TEST_CASE("fractions arriving one by one on a node with little history pack its GPUs best-fit",
          "[fraction]") {
  // The cluster has seen only the pods placed here, so the learned shapes say little of what
  // comes next: 0.5 + 0.3 + 0.6 + 0.2 + 0.4 fill the node's two GPUs only if each fraction takes
  // the GPU it fills most (the end-to-end test places the same pods through the API server).
  ClusterCache cache({});
  cache.addNode(node("n").gpus(2));
  for (const char* f : {"0.5", "0.3", "0.6", "0.2", "0.4"})
    CHECK(placeLone(cache, pod(std::string("p") + f).gpuFraction(f)) == "n");
  CHECK(sharesOf(nodeNamed(cache, "n")) == std::map<int32_t, int32_t>{{0, 1000}, {1, 1000}});
  CHECK(cache.sharedGpuOf("ml/p0.5") == cache.sharedGpuOf("ml/p0.3"));
  CHECK(cache.sharedGpuOf("ml/p0.5") == cache.sharedGpuOf("ml/p0.2"));
  CHECK(cache.sharedGpuOf("ml/p0.6") == cache.sharedGpuOf("ml/p0.4"));
}

TEST_CASE("a fraction goes to the shared GPU it fills most before taking a GPU of its own",
          "[fraction]") {
  ClusterCache cache({});
  cache.addNode(node("full").gpus(4).cpu("64"));
  cache.addNode(node("half").gpus(4).cpu("64"));
  cache.addNode(node("quarter").gpus(4).cpu("64"));
  cache.addPod(pod("w").gpus(3).onNode("full"));  // one GPU free: the fullest node
  cache.addPod(pod("h").gpuFraction("0.5").annotation("muster.dev/gpu-index", "2").onNode("half"));
  cache.addPod(pod("q").gpuFraction("0.75").annotation("muster.dev/gpu-index", "1").onNode("quarter"));
  CHECK(sharesOf(nodeNamed(cache, "half")) == std::map<int32_t, int32_t>{{2, 500}});
  CHECK(nodeNamed(cache, "half").freeOf(cache.gpuResource()) == 3);
  // 0.25 fills quarter's shared GPU exactly.
  CHECK(placeLone(cache, pod("p1").gpuFraction("0.25")) == "quarter");
  CHECK(cache.sharedGpuOf("ml/p1") == 1);
  // Then 0.5 fills half's.
  CHECK(placeLone(cache, pod("p2").gpuFraction("0.5")) == "half");
  CHECK(cache.sharedGpuOf("ml/p2") == 2);
  // No shared GPU has room: a new GPU on the node with the fewest free, the lowest index free of
  // shares.
  CHECK(placeLone(cache, pod("p3").gpuFraction("0.3")) == "full");
  CHECK(cache.sharedGpuOf("ml/p3") == 0);
  // A bound pod that says nothing of its GPU is given one by the cache, never over a whole GPU.
  cache.addPod(pod("old").gpuFraction("0.8").onNode("half"));
  CHECK(sharesOf(nodeNamed(cache, "half")) == std::map<int32_t, int32_t>{{2, 1000}, {0, 800}});
  // Removing a bound pod gives its share back.
  cache.removePod(pod("h").gpuFraction("0.5").onNode("half").build());
  CHECK(sharesOf(nodeNamed(cache, "half")) == std::map<int32_t, int32_t>{{2, 500}, {0, 800}});
}

TEST_CASE("an assumed fraction is confirmed by its bind with the GPU index it was given",
          "[fraction]") {
  ClusterCache cache({});
  cache.addNode(node("n").gpus(2));
  CHECK(placeLone(cache, pod("a").gpuFraction("0.5")) == "n");
  const int32_t gpu = *cache.sharedGpuOf("ml/a");
  cache.updatePod(pod("a").gpuFraction("0.5").annotation("muster.dev/gpu-index", std::to_string(gpu)).onNode("n"));
  CHECK_FALSE(cache.isAssumed("ml/a"));
  CHECK(sharesOf(nodeNamed(cache, "n")) == std::map<int32_t, int32_t>{{gpu, 500}});
  CHECK(nodeNamed(cache, "n").freeOf(cache.gpuResource()) == 1);
  // Suspended and resumed (preemption's simulation), it holds the same GPU.
  REQUIRE(cache.suspend("ml/a").ok());
  CHECK(nodeNamed(cache, "n").gpu_shares.empty());
  CHECK(nodeNamed(cache, "n").freeOf(cache.gpuResource()) == 2);
  REQUIRE(cache.resume("ml/a").ok());
  CHECK(sharesOf(nodeNamed(cache, "n")) == std::map<int32_t, int32_t>{{gpu, 500}});
}

TEST_CASE("a gang of fractional pods shares GPUs, and fractions mixed with whole GPUs are refused",
          "[fraction]") {
  ClusterCache cache({testing::kRack});
  cache.addNode(node("a").gpus(2).label(testing::kRack, "r1"));
  cache.addNode(node("b").gpus(1).label(testing::kRack, "r1"));
  GangRequest r;
  r.key = GangKey{"ml", "g", false};
  r.min_member = 6;
  for (int i = 0; i < 6; ++i)
    r.members.push_back(pod("g" + std::to_string(i)).gpuFraction("0.5").gang("g", 6).info());
  PlacementResult result = place(r, cache);
  REQUIRE(std::holds_alternative<GangPlacement>(result));
  const GangPlacement& p = std::get<GangPlacement>(result);
  for (size_t i = 0; i < p.assignments.size(); ++i) REQUIRE(cache.assume(*r.members[i], p.assignments[i].node).ok());
  CHECK(sharesOf(nodeNamed(cache, "a")) == std::map<int32_t, int32_t>{{0, 1000}, {1, 1000}});
  CHECK(sharesOf(nodeNamed(cache, "b")) == std::map<int32_t, int32_t>{{0, 1000}});
  // A seventh would not fit: the gang of 7 is refused whole.
  ClusterCache fresh({testing::kRack});
  fresh.addNode(node("a").gpus(2).label(testing::kRack, "r1"));
  fresh.addNode(node("b").gpus(1).label(testing::kRack, "r1"));
  r.members.push_back(pod("g6").gpuFraction("0.5").gang("g", 7).info());
  r.min_member = 7;
  CHECK(std::holds_alternative<Unschedulable>(place(r, fresh)));
  // A launcher asking for a fraction with workers asking for whole GPUs: refused with a reason.
  GangRequest mixed;
  mixed.key = GangKey{"ml", "m", false};
  mixed.min_member = 3;
  mixed.members.push_back(pod("l").gpuFraction("0.5").gang("m", 3).info());
  mixed.members.push_back(pod("w0").gpus(1).gang("m", 3).info());
  mixed.members.push_back(pod("w1").gpus(1).gang("m", 3).info());
  PlacementResult m = place(mixed, fresh);
  REQUIRE(std::holds_alternative<Unschedulable>(m));
  CHECK_THAT(std::get<Unschedulable>(m).message, Catch::Contains("fraction"));
  // A fractional launcher with CPU-only workers is fine.
  GangRequest cpu_workers;
  cpu_workers.key = GangKey{"ml", "c", false};
  cpu_workers.min_member = 3;
  cpu_workers.members.push_back(pod("l").gpuFraction("0.5").gang("c", 3).info());
  cpu_workers.members.push_back(pod("w0").cpu("1").gang("c", 3).info());
  cpu_workers.members.push_back(pod("w1").cpu("1").gang("c", 3).info());
  CHECK(std::holds_alternative<GangPlacement>(place(cpu_workers, fresh)));
}

TEST_CASE("random fractions, whole GPUs and departures never put more than one GPU's worth on a GPU",
          "[fraction]") {
  std::mt19937 rng(20261205);
  ClusterCache cache({});
  for (int i = 0; i < 6; ++i) cache.addNode(node("n" + std::to_string(i)).gpus(1 + i % 4).cpu("64"));
  const ResourceId gpu = cache.gpuResource();
  std::vector<std::string> placed;
  int fractions = 0, wholes = 0, refused = 0;
  for (int step = 0; step < 2000; ++step) {
    if (!placed.empty() && rng() % 3 == 0) {
      const size_t k = rng() % placed.size();
      REQUIRE(cache.forget(placed[k]).ok());
      placed.erase(placed.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const std::string name = "p" + std::to_string(step);
      testing::PodBuilder b = pod(name).cpu("1");
      const bool whole = rng() % 4 == 0;
      if (whole) b.gpus(1 + static_cast<int>(rng() % 2));
      else b.gpuFraction(std::to_string(1 + rng() % 999) + "m");
      const std::string at = placeLone(cache, b);
      if (at.rfind("unschedulable", 0) == 0) {
        ++refused;
      } else {
        placed.push_back("ml/" + name);
        ++(whole ? wholes : fractions);
      }
    }
    for (int i = 0; i < 6; ++i) {
      const NodeInfo& n = nodeNamed(cache, "n" + std::to_string(i));
      REQUIRE(n.requested[gpu] <= n.allocatable[gpu]);
      for (const NodeInfo::GpuShare& s : n.gpu_shares) {
        REQUIRE(s.used <= 1000);
        REQUIRE(s.used > 0);
        REQUIRE(s.index < n.allocatable[gpu]);
      }
    }
  }
  CHECK(fractions > 500);
  CHECK(wholes > 30);
  CHECK(refused > 0);
  for (const std::string& key : placed) REQUIRE(cache.forget(key).ok());
  for (int i = 0; i < 6; ++i) {
    const NodeInfo& n = nodeNamed(cache, "n" + std::to_string(i));
    CHECK(n.gpu_shares.empty());
    CHECK(n.requested[gpu] == 0);
  }
}

TEST_CASE("the simulator's FGD baseline fills a half-used GPU with a half and keeps whole GPUs "
          "whole", "[fraction]") {
  // The workload: 60 % halves of a GPU, 20 % 1-GPU pods, 20 % 2-GPU pods.
  std::vector<bench::SimJob> jobs(10);
  for (int i = 0; i < 10; ++i) {
    jobs[static_cast<size_t>(i)].gpus_per_pod = i < 8 ? 1 : 2;
    jobs[static_cast<size_t>(i)].gpu_milli = i < 6 ? 500 : 1000;
  }
  const bench::FgdScorer fgd(jobs);
  ClusterCache cache({});
  cache.addNode(node("shared").gpus(2).cpu("64").memory("256Gi"));
  cache.addNode(node("empty").gpus(2).cpu("64").memory("256Gi"));
  cache.addPod(pod("h").gpuFraction("0.5").cpu("1").memory("1Gi").annotation("muster.dev/gpu-index", "1").onNode("shared"));
  std::vector<NodeId> scan{*cache.findNode("empty"), *cache.findNode("shared")};
  auto any = [](const NodeInfo&) { return true; };
  // A half fills the other half of shared's GPU 1 (nothing left to fragment) rather than break
  // shared's whole GPU (then no 1-GPU pod fits there) or one of empty's (then no 2-GPU pod).
  auto half = fgd.choose(*pod("p").gpuFraction("0.5").cpu("1").memory("1Gi").info(), cache, cache.gpuResource(), scan, any);
  REQUIRE(half.has_value());
  CHECK(cache.node(half->node).name == "shared");
  CHECK(half->gpu_index == 1);
  // A whole GPU goes to shared's free one, leaving empty's two whole for a 2-GPU pod.
  auto whole = fgd.choose(*pod("w").gpus(1).cpu("1").memory("1Gi").info(), cache, cache.gpuResource(), scan, any);
  REQUIRE(whole.has_value());
  CHECK(cache.node(whole->node).name == "shared");
  CHECK(whole->gpu_index == -1);
  // A quarter on shared's GPU 1 leaves a quarter no class can use (by hand: fragmentation +50);
  // breaking shared's whole GPU costs the 1-GPU pods it (+100), one of empty's the 2-GPU pods
  // (+500).
  auto quarter = fgd.choose(*pod("q").gpuFraction("0.25").cpu("1").memory("1Gi").info(), cache, cache.gpuResource(), scan, any);
  REQUIRE(quarter.has_value());
  CHECK(cache.node(quarter->node).name == "shared");
  CHECK(quarter->gpu_index == 1);
}

}  // namespace
}  // namespace muster::scheduler
