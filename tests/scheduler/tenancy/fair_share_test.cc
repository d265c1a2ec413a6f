#include "scheduler/tenancy/fair_share.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "scheduler/tenancy/queue_tree.h"
#include "tests/scheduler/tenancy/builders.h"

namespace muster::scheduler::tenancy {
namespace {

using testing::gpus;
using testing::kCpu;
using testing::kGpu;
using testing::queue;

// A scenario: the tree, and the input filled in by queue name.
struct Scenario {
  QueueTree tree;
  FairShareInput input;

  explicit Scenario(std::vector<QueueSpec> specs) : tree(QueueTree::build(std::move(specs))) {
    input.demand.resize(tree.size());
    input.usage.resize(tree.size());
  }
  size_t at(const std::string& name) const {
    std::optional<size_t> i = tree.find(name);
    REQUIRE(i.has_value());
    return *i;
  }
  Scenario& capacity(const std::string& resource, int64_t amount) {
    input.capacity[resource] = amount;
    return *this;
  }
  Scenario& demand(const std::string& name, int64_t gpu_amount) {
    input.demand[at(name)][kGpu] = gpu_amount;
    return *this;
  }
  Scenario& usage(const std::string& name, double gpu_seconds) {
    input.usage[at(name)][kGpu] = gpu_seconds;
    return *this;
  }
  FairShare compute(bool use_usage = false) const {
    FairShareOptions options;
    options.use_usage = use_usage;
    return FairShare::compute(tree, input, options);
  }
  int64_t gpuShare(const FairShare& fs, const std::string& name) const {
    return fs.share(at(name), kGpu);
  }
};

TEST_CASE("two equal siblings split what is over their quotas evenly, as far as they want it",
          "[tenancy][fair_share]") {
  // 64 GPUs; A and B each guaranteed 16 (a quarter), weight 1.
  Scenario s({queue("a").gpu(gpus(16)), queue("b").gpu(gpus(16))});
  s.capacity(kGpu, gpus(64));

  SECTION("both want everything") {
    // Quota: 16 + 16; the 32 left split 1:1 → 32 / 32.
    s.demand("a", gpus(64)).demand("b", gpus(64));
    FairShare fs = s.compute();
    CHECK(s.gpuShare(fs, "a") == gpus(32));
    CHECK(s.gpuShare(fs, "b") == gpus(32));
    CHECK(fs.share(QueueTree::kRoot, kGpu) == gpus(64));
  }
  SECTION("B wants only 8") {
    // Quota: A 16, B min(8, 16) = 8; the 40 left go to A alone (B wants no more) → 56 / 8.
    s.demand("a", gpus(64)).demand("b", gpus(8));
    FairShare fs = s.compute();
    CHECK(s.gpuShare(fs, "a") == gpus(56));
    CHECK(s.gpuShare(fs, "b") == gpus(8));
  }
  SECTION("nobody wants all of it") {
    // 10 + 20 of 64: the 34 nobody wants stay unassigned.
    s.demand("a", gpus(10)).demand("b", gpus(20));
    FairShare fs = s.compute();
    CHECK(s.gpuShare(fs, "a") == gpus(10));
    CHECK(s.gpuShare(fs, "b") == gpus(20));
    CHECK(fs.share(QueueTree::kRoot, kGpu) == gpus(64));
  }
}

TEST_CASE("what is over quota is split by over-quota weight", "[tenancy][fair_share]") {
  // 40 GPUs, no quotas, weights 1 : 3, both want 100 → 40 × 1/4 = 10, 40 × 3/4 = 30.
  Scenario s({queue("a").gpu(0, std::nullopt, 1.0), queue("b").gpu(0, std::nullopt, 3.0)});
  s.capacity(kGpu, gpus(40)).demand("a", gpus(100)).demand("b", gpus(100));
  FairShare fs = s.compute();
  CHECK(s.gpuShare(fs, "a") == gpus(10));
  CHECK(s.gpuShare(fs, "b") == gpus(30));
}

TEST_CASE("a limit caps a queue and the rest goes to its siblings", "[tenancy][fair_share]") {
  // 64 GPUs, equal weights, both want 64; A may hold at most 20 → A 20, B 44.
  Scenario s({queue("a").gpu(0, gpus(20)), queue("b").gpu(0)});
  s.capacity(kGpu, gpus(64)).demand("a", gpus(64)).demand("b", gpus(64));
  FairShare fs = s.compute();
  CHECK(s.gpuShare(fs, "a") == gpus(20));
  CHECK(s.gpuShare(fs, "b") == gpus(44));
}

TEST_CASE("quotas larger than the cluster are scaled down proportionally",
          "[tenancy][fair_share]") {
  // 10 GPUs; quotas 10 and 30 (40 > 10): scaled by 1/4 → 2.5 and 7.5; nothing is left over.
  Scenario s({queue("a").gpu(gpus(10)), queue("b").gpu(gpus(30))});
  s.capacity(kGpu, gpus(10)).demand("a", gpus(100)).demand("b", gpus(100));
  FairShare fs = s.compute();
  CHECK(s.gpuShare(fs, "a") == 2500);
  CHECK(s.gpuShare(fs, "b") == 7500);
}

TEST_CASE("a three-level tree is divided level by level", "[tenancy][fair_share]") {
  // root 100 GPUs
  // ├── org1 quota 60
  // │   ├── t1 quota 20, weight 1
  // │   └── t2 quota 20, weight 3
  // └── org2 quota 40
  Scenario s({queue("org1").gpu(gpus(60)), queue("t1", "org1").gpu(gpus(20), std::nullopt, 1.0),
              queue("t2", "org1").gpu(gpus(20), std::nullopt, 3.0), queue("org2").gpu(gpus(40))});
  s.capacity(kGpu, gpus(100));

  SECTION("teams want more than org1 can give") {
    // Demands: t1 50, t2 50, org2 30; org1's subtree wants 100.
    // root (100): quota step org1 min(100, 60) = 60, org2 min(30, 40) = 30; 10 left, only org1
    //   wants more → org1 70, org2 30.
    // org1 (70): quota step t1 20, t2 20; 30 left, split 1:3 → 7.5 / 22.5, nobody reaches its
    //   demand (30 more each) → t1 27.5, t2 42.5.
    s.demand("t1", gpus(50)).demand("t2", gpus(50)).demand("org2", gpus(30));
    FairShare fs = s.compute();
    CHECK(s.gpuShare(fs, "org1") == gpus(70));
    CHECK(s.gpuShare(fs, "org2") == gpus(30));
    CHECK(s.gpuShare(fs, "t1") == 27500);
    CHECK(s.gpuShare(fs, "t2") == 42500);
    CHECK(fs.demand(s.at("org1"), kGpu) == gpus(100));
    CHECK(fs.ownShare(s.at("org1"), kGpu) == 0);
    CHECK(fs.ownShare(s.at("t1"), kGpu) == 27500);  // a leaf's own share is its share
  }
  SECTION("org1 also runs work of its own, which competes as a pseudo-child") {
    // Demands: t1 50, t2 50, org1 itself 10, org2 10; org1's subtree wants 110.
    // root (100): quota step org1 60, org2 min(10, 40) = 10; 30 left, only org1 wants more →
    //   org1 90, org2 10.
    // org1 (90): participants own (quota 0, weight 1, wants 10), t1 (20, 1, 50), t2 (20, 3, 50).
    //   Quota step 0 + 20 + 20 = 40; 50 left, total weight 5. Rooms / weights: own 10/1 = 10,
    //   t2 30/3 = 10, t1 30/1 = 30.
    //   Level 50/5 = 10: own's room 10 fits → own 10; 40 left, weight 4.
    //   Level 40/4 = 10: t2's room 30 = 10 × 3 fits → t2 50; 10 left, weight 1.
    //   Level 10: t1's room 30 does not fit → t1 20 + 10 = 30.
    s.demand("t1", gpus(50)).demand("t2", gpus(50)).demand("org1", gpus(10));
    s.demand("org2", gpus(10));
    FairShare fs = s.compute();
    CHECK(s.gpuShare(fs, "org1") == gpus(90));
    CHECK(s.gpuShare(fs, "org2") == gpus(10));
    CHECK(fs.ownShare(s.at("org1"), kGpu) == gpus(10));
    CHECK(s.gpuShare(fs, "t1") == gpus(30));
    CHECK(s.gpuShare(fs, "t2") == gpus(50));
  }
}

TEST_CASE("without recent usage the correction changes nothing", "[tenancy][fair_share]") {
  // Same as the 1:3 split, with use_usage on but no usage: U = S, correction 2^0 = 1.
  Scenario s({queue("a").gpu(0, std::nullopt, 1.0), queue("b").gpu(0, std::nullopt, 3.0)});
  s.capacity(kGpu, gpus(40)).demand("a", gpus(100)).demand("b", gpus(100));
  FairShare fs = s.compute(/*use_usage=*/true);
  CHECK(s.gpuShare(fs, "a") == gpus(10));
  CHECK(s.gpuShare(fs, "b") == gpus(30));
}

TEST_CASE("a queue that used more recently gets less of what is over quota",
          "[tenancy][fair_share]") {
  // Equal weights, quotas 0, 100 GPUs, both want 100. A's decayed usage is 3× B's:
  //   S = 1/2 each; U_A = 3/4, U_B = 1/4.
  //   correction A = 2^(-0.75/0.5) / 2^-1 = 2^-0.5 ≈ 0.7071
  //   correction B = 2^(-0.25/0.5) / 2^-1 = 2^0.5  ≈ 1.4142   (ratio B : A = 2)
  //   A = 100 × 0.7071 / 2.1213 = 33.333…, B = 66.666… → 33333 and 66667 (the one unit left by
  //   rounding goes to the larger remainder, B's .667).
  CHECK(usageCorrection(0.5, 0.75, 1.0 / 64) == Approx(std::pow(2.0, -1.5) / std::pow(2.0, -1)));
  CHECK(usageCorrection(0.5, 0.25, 1.0 / 64) == Approx(std::pow(2.0, -0.5) / std::pow(2.0, -1)));
  CHECK(usageCorrection(0.5, 0.5, 1.0 / 64) == 1.0);

  Scenario s({queue("a").gpu(0), queue("b").gpu(0)});
  s.capacity(kGpu, gpus(100)).demand("a", gpus(100)).demand("b", gpus(100));
  s.usage("a", 3e6).usage("b", 1e6);
  FairShare fs = s.compute(/*use_usage=*/true);
  CHECK(s.gpuShare(fs, "a") == 33333);
  CHECK(s.gpuShare(fs, "b") == 66667);

  // Switched off: pure water-filling, 50 / 50.
  FairShare pure = s.compute(/*use_usage=*/false);
  CHECK(s.gpuShare(pure, "a") == gpus(50));
  CHECK(s.gpuShare(pure, "b") == gpus(50));
}

TEST_CASE("with little history the usage correction acts only in part", "[tenancy][fair_share]") {
  // As above (A used 3× B's), with a horizon: 100 GPUs (100,000 milli) × 100 s = 1e7 of usage
  // acts in full. A sum of 4e6 is 40% of it: U_A = 1/2 + 0.4 × (3/4 - 1/2) = 0.6, U_B = 0.4.
  //   correction A = 2^(1 - 0.6/0.5) = 2^-0.2, B = 2^(1 - 0.4/0.5) = 2^0.2; B : A = 2^0.4.
  //   A = 100 / (1 + 2^0.4) = 100 / 2.3195 = 43.11…, B = 56.88… → 43113 and 56887.
  Scenario s({queue("a").gpu(0), queue("b").gpu(0)});
  s.capacity(kGpu, gpus(100)).demand("a", gpus(100)).demand("b", gpus(100));
  s.usage("a", 3e6).usage("b", 1e6);
  FairShareOptions options;
  options.usage_horizon_seconds = 100;
  FairShare fs = FairShare::compute(s.tree, s.input, options);
  CHECK(s.gpuShare(fs, "a") == 43113);
  CHECK(s.gpuShare(fs, "b") == 56887);
  // 40 s of 100 GPUs against a week's horizon: even, to a thousandth of a GPU.
  options.usage_horizon_seconds = 7 * 24 * 3600 / std::log(2.0);
  FairShare young = FairShare::compute(s.tree, s.input, options);
  CHECK(std::abs(s.gpuShare(young, "a") - gpus(50)) <= 1);
  CHECK(std::abs(s.gpuShare(young, "b") - gpus(50)) <= 1);
  // Enough history: as without a horizon.
  s.usage("a", 3e12).usage("b", 1e12);
  FairShare old = FairShare::compute(s.tree, s.input, options);
  CHECK(s.gpuShare(old, "a") == 33333);
}

TEST_CASE("the usage correction never drops below 1/64", "[tenancy][fair_share]") {
  // Eight equal siblings; a did all the recent work: S = 1/8, U_a = 1 → 2^(1 - 8) = 1/128,
  // floored to 1/64; the others U = 0 → 2^1 = 2. Total weight 7 × 2 + 1/64 = 897/64, so of
  // 897 GPUs a gets 897 × (1/64) / (897/64) = 1 and each other 897 × 2 / (897/64) = 128.
  std::vector<QueueSpec> specs;
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g", "h"}) specs.push_back(queue(name));
  Scenario s(std::move(specs));
  s.capacity(kGpu, gpus(897));
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g", "h"}) s.demand(name, gpus(1000));
  s.usage("a", 5e9);
  CHECK(usageCorrection(0.125, 1.0, 1.0 / 64) == 1.0 / 64);
  FairShare fs = s.compute(/*use_usage=*/true);
  CHECK(s.gpuShare(fs, "a") == gpus(1));
  for (const char* name : {"b", "c", "d", "e", "f", "g", "h"}) {
    INFO(name);
    CHECK(s.gpuShare(fs, name) == gpus(128));
  }
}

TEST_CASE("rounding hands the leftover units out by remainder, then by name",
          "[tenancy][fair_share]") {
  // 10 units among three equal siblings: 3.333… each → 3 + 3 + 3, one unit left; the remainders
  // tie, so the first name (a) gets it → 4 / 3 / 3, summing to exactly 10.
  Scenario s({queue("c").gpu(0), queue("b").gpu(0), queue("a").gpu(0)});
  s.capacity(kGpu, 10).demand("a", 100).demand("b", 100).demand("c", 100);
  FairShare fs = s.compute();
  CHECK(s.gpuShare(fs, "a") == 4);
  CHECK(s.gpuShare(fs, "b") == 3);
  CHECK(s.gpuShare(fs, "c") == 3);

  // 11 units, weights 1 : 1 : 2 → 2.75, 2.75, 5.5 → 2 + 2 + 5 = 9; the two units left go to the
  // largest remainders, a's and b's .75 → 3 / 3 / 5.
  Scenario w({queue("a").gpu(0), queue("b").gpu(0), queue("c").gpu(0, std::nullopt, 2.0)});
  w.capacity(kGpu, 11).demand("a", 100).demand("b", 100).demand("c", 100);
  FairShare fw = w.compute();
  CHECK(w.gpuShare(fw, "a") == 3);
  CHECK(w.gpuShare(fw, "b") == 3);
  CHECK(w.gpuShare(fw, "c") == 5);
}

TEST_CASE("decay halves usage every half-life", "[tenancy][fair_share]") {
  CHECK(decay(100, absl::Hours(1), absl::Hours(1)) == Approx(50));
  CHECK(decay(100, absl::Hours(2), absl::Hours(1)) == Approx(25));
  CHECK(decay(100, absl::Minutes(30), absl::Hours(1)) == Approx(100 / std::sqrt(2.0)));
  CHECK(decay(100, absl::Hours(5), absl::ZeroDuration()) == 100);
  CHECK(decay(100, absl::Hours(5), -absl::Hours(1)) == 100);
  CHECK(decay(100, absl::ZeroDuration(), absl::Hours(1)) == 100);
}

TEST_CASE("accrue decays what was used and adds what is held times the time",
          "[tenancy][fair_share]") {
  DecayedUsage usage(1);
  usage[0][kGpu] = 100;
  Usage allocated(2);
  allocated[0][kGpu] = 2000;
  allocated[1][kCpu] = 500;
  // Queue 0: 100 halves to 50, plus 2000 × 10 s; queue 1 (new): 500 × 10 s.
  accrue(&usage, allocated, absl::Seconds(10), absl::Seconds(10));
  REQUIRE(usage.size() == 2);
  CHECK(usage[0].at(kGpu) == Approx(50 + 20000));
  CHECK(usage[1].at(kCpu) == Approx(5000));
}

TEST_CASE("the dominant share is the largest allocated-to-share ratio", "[tenancy][fair_share]") {
  // One queue alone gets all it asks for: 32 GPUs and 64 cpu.
  Scenario s({queue("a"), queue("idle")});
  s.capacity(kGpu, gpus(32)).capacity(kCpu, 64000).demand("a", gpus(32));
  s.input.demand[s.at("a")][kCpu] = 64000;
  FairShare fs = s.compute();
  const size_t a = s.at("a");
  const size_t idle = s.at("idle");
  REQUIRE(fs.share(a, kGpu) == gpus(32));
  REQUIRE(fs.share(a, kCpu) == 64000);

  // max(16/32, 48/64) = 0.75
  CHECK(fs.dominantShare(a, {{kGpu, gpus(16)}, {kCpu, 48000}}) == Approx(0.75));
  CHECK(fs.dominantShare(a, {{kGpu, gpus(64)}}) == Approx(2.0));
  CHECK(fs.dominantShare(a, {}) == 0);
  CHECK(fs.dominantShare(a, {{kGpu, 0}}) == 0);
  // Allocated with no share: first in line is anyone else.
  CHECK(fs.dominantShare(idle, {{kGpu, 1}}) == std::numeric_limits<double>::infinity());
  CHECK(fs.dominantShare(a, {{"memory", 1}}) == std::numeric_limits<double>::infinity());
  // 0 / 0 is 0.
  CHECK(fs.dominantShare(idle, {{kGpu, 0}}) == 0);
  CHECK(fs.ownDominantShare(a, {{kGpu, gpus(8)}}) == Approx(0.25));
}

TEST_CASE("a random tree of 1000 queues keeps every share within its parent, demand and limit",
          "[tenancy][fair_share]") {
  const std::vector<std::string> resources = {kGpu, kCpu, "memory", "nvidia.com/gpu/model=H100"};
  std::mt19937 rng(20240611);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<QueueSpec> specs;
  for (int i = 0; i < 1000; ++i) {
    QueueSpec spec;
    spec.name = absl::StrCat("q", i);
    // A third under the root, the rest under an earlier queue.
    if (i > 0 && uniform(0, 2) > 0) spec.parent = absl::StrCat("q", uniform(0, i - 1));
    for (const std::string& resource : resources) {
      if (uniform(0, 3) == 0) continue;
      ResourceQuota q;
      q.quota = uniform(0, 20000);
      if (uniform(0, 3) == 0) q.limit = uniform(0, 60000);
      q.over_quota_weight = static_cast<double>(uniform(1, 8)) / 2;
      spec.resources[resource] = q;
    }
    specs.push_back(std::move(spec));
  }
  Scenario s(std::move(specs));
  for (const std::string& resource : resources) s.capacity(resource, uniform(100000, 2000000));
  for (size_t q = 1; q < s.tree.size(); ++q) {
    for (const std::string& resource : resources) {
      if (uniform(0, 2) == 0) continue;
      s.input.demand[q][resource] = uniform(0, 30000);
      s.input.usage[q][resource] = static_cast<double>(uniform(0, 1000000));
    }
  }

  for (bool use_usage : {false, true}) {
    FairShare fs = s.compute(use_usage);
    for (const std::string& resource : resources) {
      INFO(resource << " use_usage=" << use_usage);
      CHECK(fs.share(QueueTree::kRoot, resource) == s.input.capacity.at(resource));
      for (size_t p = 0; p < s.tree.size(); ++p) {
        const int64_t share = fs.share(p, resource);
        const int64_t own = fs.ownShare(p, resource);
        int64_t children = own;
        int64_t wanted = 0;
        auto it = s.input.demand[p].find(resource);
        const int64_t own_demand = it == s.input.demand[p].end() ? 0 : it->second;
        wanted += own_demand;
        CHECK(own >= 0);
        CHECK(own <= own_demand);
        for (size_t c : s.tree.children(p)) {
          const int64_t child = fs.share(c, resource);
          CHECK(child >= 0);
          CHECK(child <= fs.demand(c, resource));
          if (std::optional<int64_t> limit = s.tree.limit(c, resource)) CHECK(child <= *limit);
          children += child;
          int64_t cap = fs.demand(c, resource);
          if (std::optional<int64_t> limit = s.tree.limit(c, resource)) {
            cap = std::min(cap, *limit);
          }
          wanted += cap;
        }
        CHECK(children <= share);
        // Exact: the parent's share is handed out as far as its participants want it.
        CHECK(children == std::min(share, wanted));
      }
    }
  }
}

}  // namespace
}  // namespace muster::scheduler::tenancy
