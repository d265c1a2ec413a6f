// Tenancy (scheduler/tenancy/tenancy.h) against a real ClusterCache: membership, accounting
// through the cache's observer, limits, fair share from the cache's nodes, the cross-queue
// rank, and the rate of Queue status writes.
#include "scheduler/tenancy/tenancy.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::tenancy {
namespace {

using testing::node;
using testing::pod;

const absl::Time kStart = absl::FromUnixSeconds(1800000000);

proto::QueueResource gpuQuota(const std::string& quota, const std::string& limit = "",
                              double weight = 1.0) {
  proto::QueueResource r;
  r.quota = *proto::Quantity::parse(quota);
  if (!limit.empty()) r.limit = *proto::Quantity::parse(limit);
  r.over_quota_weight = weight;
  return r;
}

std::shared_ptr<const proto::Queue> queue(const std::string& name, const std::string& parent,
                                          proto::QueueResource gpu) {
  auto q = std::make_shared<proto::Queue>();
  q->meta.name = name;
  q->meta.generation = 1;
  q->spec.parent = parent;
  q->spec.resources["nvidia.com/gpu"] = gpu;
  return q;
}

// A cache whose accounting feeds a Tenancy, and the namespaces' labels it reads.
struct World {
  SchedulerConfig config;
  std::map<std::string, proto::Labels> namespaces;
  ClusterCache cache{{}};
  std::unique_ptr<Tenancy> tenancy;

  World() {
    config.tenancy_enabled = true;
    tenancy = std::make_unique<Tenancy>(config, [this](std::string_view ns) -> const proto::Labels* {
      auto it = namespaces.find(std::string(ns));
      return it == namespaces.end() ? nullptr : &it->second;
    });
    cache.setPodObserver([this](std::string_view key, const PlacedPod& placed,
                                const Resources& requests, int32_t gpu_milli, int sign) {
      tenancy->observe(key, placed, requests, gpu_milli, sign);
    });
    for (int i = 0; i < 4; ++i) cache.addNode(node("n" + std::to_string(i)).gpus(8));
  }
  Request gpus(int n) {
    Request r;
    r.requests[*findResource("nvidia.com/gpu")] = n;
    return r;
  }
};

TEST_CASE("a pod's queue: its own label, else its namespace's, else the default") {
  World w;
  w.namespaces["team-b-ns"][proto::vocabulary::kQueueLabel] = "team-b";
  CHECK(w.tenancy->queueOf(pod("a").label("muster.dev/queue", "team-a").ns("team-b-ns").build()) == "team-a");
  CHECK(w.tenancy->queueOf(pod("b").ns("team-b-ns").build()) == "team-b");
  CHECK(w.tenancy->queueOf(pod("c").ns("other").build()) == "default");
}

TEST_CASE("placed pods count in their queue and every queue above it, until they leave") {
  World w;
  w.tenancy->setQueue(queue("org", "", gpuQuota("16")));
  w.tenancy->setQueue(queue("team", "org", gpuQuota("8")));
  w.cache.addPod(pod("p1").gpus(4).label("muster.dev/queue", "team").onNode("n0"));
  w.cache.addPod(pod("p2").gpuFraction("250m").label("muster.dev/queue", "team").onNode("n1"));
  w.cache.addPod(pod("other").gpus(2).onNode("n2"));  // the default queue, which does not exist
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 4250);
  CHECK(w.tenancy->allocated("org", "nvidia.com/gpu") == 4250);
  w.cache.removePod("ml/p1");
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 250);
  CHECK(w.tenancy->allocated("org", "nvidia.com/gpu") == 250);
  // A queue declared after its pods were placed sees them.
  w.tenancy->setQueue(queue("default", "", gpuQuota("0")));
  CHECK(w.tenancy->allocated("default", "nvidia.com/gpu") == 2000);
}

TEST_CASE("a preemption's what-if (suspend and resume in the cache) changes no queue's accounting") {
  World w;
  w.tenancy->setQueue(queue("team", "", gpuQuota("8")));
  w.cache.addPod(pod("p1").gpus(4).label("muster.dev/queue", "team").onNode("n0"));
  w.tenancy->markGoing("ml/p1");
  REQUIRE(w.cache.suspend("ml/p1").ok());
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 4000);
  CHECK(w.tenancy->queueOfPod("ml/p1") == "team");
  REQUIRE(w.cache.resume("ml/p1").ok());
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 4000);
  // Still going: a second mark changes nothing, and leaving takes it out once.
  w.tenancy->markGoing("ml/p1");
  w.cache.removePod("ml/p1");
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 0);
}

TEST_CASE("an assumed gang counts at once, and forgetting it gives the room back") {
  World w;
  w.tenancy->setQueue(queue("team", "", gpuQuota("8")));
  auto info = makePodInfo(pod("g0").gpus(8).label("muster.dev/queue", "team").build());
  REQUIRE(info.ok());
  REQUIRE(w.cache.assume(**info, "n0").ok());
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 8000);
  REQUIRE(w.cache.forget("ml/g0").ok());
  CHECK(w.tenancy->allocated("team", "nvidia.com/gpu") == 0);
}

TEST_CASE("a gang that would take a queue on its path above a limit is refused, naming it") {
  World w;
  w.tenancy->setQueue(queue("org", "", gpuQuota("8", "12")));
  w.tenancy->setQueue(queue("team", "org", gpuQuota("4", "16")));
  w.cache.addPod(pod("p1").gpus(8).label("muster.dev/queue", "team").onNode("n0"));
  CHECK_FALSE(w.tenancy->refuses("team", w.gpus(4)));
  std::optional<Refusal> r = w.tenancy->refuses("team", w.gpus(8));
  REQUIRE(r);
  CHECK(r->kind == Refusal::Kind::kLimit);
  CHECK(r->queue == "org");
  CHECK(r->resource == "nvidia.com/gpu");
  CHECK(r->message ==
        "waiting for quota: queue \"org\" (above queue \"team\") holds 8 nvidia.com/gpu of its "
        "limit of 12, and this gang asks for 8");
  // Resources a queue does not limit are never refused.
  Request cpu;
  cpu.requests[kCpu] = 1000000;
  CHECK_FALSE(w.tenancy->refuses("team", cpu));
}

TEST_CASE("a queue that does not exist is refused, but a missing default queue is no queue") {
  World w;
  std::optional<Refusal> r = w.tenancy->refuses("nope", w.gpus(1));
  REQUIRE(r);
  CHECK(r->kind == Refusal::Kind::kNoSuchQueue);
  CHECK(r->message == "queue \"nope\" does not exist (queues.muster.dev); the gang waits until it does");
  CHECK_FALSE(w.tenancy->refuses("default", w.gpus(1)));
  SchedulerConfig off;
  Tenancy disabled(off, {});
  CHECK_FALSE(disabled.refuses("nope", w.gpus(1)));
}

TEST_CASE("fair shares come from the cache's nodes and the queues' demand, and rank follows them") {
  World w;  // 4 nodes × 8 GPUs = 32
  w.tenancy->setQueue(queue("a", "", gpuQuota("8")));
  w.tenancy->setQueue(queue("b", "", gpuQuota("8")));
  for (int i = 0; i < 3; ++i)
    w.cache.addPod(pod("a" + std::to_string(i)).gpus(8).label("muster.dev/queue", "a").onNode("n" + std::to_string(i)));
  // b wants 24 (3 gangs of 8 pending), a holds 24 and wants nothing more.
  std::vector<std::pair<std::string, Request>> pending = {{"b", w.gpus(8)}, {"b", w.gpus(8)}, {"b", w.gpus(8)}};
  w.tenancy->refresh(kStart, w.cache, pending);
  // Quotas first (8 each), then the 16 left split evenly: 16 each.
  CHECK(w.tenancy->fairShare("a", "nvidia.com/gpu") == 16000);
  CHECK(w.tenancy->fairShare("b", "nvidia.com/gpu") == 16000);
  CHECK(w.tenancy->pendingGangs("b") == 3);
  CHECK(w.tenancy->rank("a") == std::vector<double>{1.5});  // 24 of 16
  CHECK(w.tenancy->rank("b") == std::vector<double>{0.0});
  CHECK(w.tenancy->rank("nope") > w.tenancy->rank("a"));
  // Not again within a second, unless the queues change.
  CHECK_FALSE(w.tenancy->refreshDue(kStart + absl::Milliseconds(500)));
  w.tenancy->setQueue(queue("b", "", gpuQuota("8", "", 3.0)));
  CHECK(w.tenancy->refreshDue(kStart + absl::Milliseconds(500)));
}

TEST_CASE("the cross-queue rank is hierarchical: the parent's place decides before the child's") {
  World w;
  w.tenancy->setQueue(queue("org1", "", gpuQuota("16")));
  w.tenancy->setQueue(queue("org2", "", gpuQuota("16")));
  w.tenancy->setQueue(queue("t1", "org1", gpuQuota("8")));
  w.tenancy->setQueue(queue("t2", "org2", gpuQuota("8")));
  w.tenancy->setQueue(queue("t3", "org2", gpuQuota("8")));
  // org2 holds its whole share through t3; t2 holds nothing. org1 holds half of its share.
  w.cache.addPod(pod("x").gpus(8).label("muster.dev/queue", "t1").onNode("n0"));
  w.cache.addPod(pod("y").gpus(8).label("muster.dev/queue", "t3").onNode("n1"));
  w.cache.addPod(pod("z").gpus(8).label("muster.dev/queue", "t3").onNode("n2"));
  std::vector<std::pair<std::string, Request>> pending = {{"t1", w.gpus(8)}, {"t2", w.gpus(8)}};
  w.tenancy->refresh(kStart, w.cache, pending);
  // t2 is furthest below its own share, but org1 is below org2: t1 goes first.
  CHECK(w.tenancy->rank("t1") < w.tenancy->rank("t2"));
}

TEST_CASE("Queue statuses: written when they change, at most once per interval, usage alone rarely") {
  World w;
  w.tenancy->setQueue(queue("a", "", gpuQuota("8", "16")));
  w.tenancy->setQueue(queue("b", "", gpuQuota("8")));
  w.tenancy->refresh(kStart, w.cache, {});
  auto first = w.tenancy->dueStatuses(kStart, 10);
  REQUIRE(first.size() == 2);
  CHECK(first[0].first == "a");
  const proto::QueueStatus& a = first[0].second;
  CHECK(a.summary.gpu_quota == "8");
  CHECK(a.summary.gpu_limit == "16");
  CHECK(a.summary.gpu_fair_share == "0");  // demand-aware: nothing wanted, nothing shared
  CHECK(a.resources.at("nvidia.com/gpu").allocated == "0");
  CHECK(a.conditions.at(0).type == "Valid");
  CHECK(a.conditions.at(0).status == "True");
  CHECK(w.tenancy->dueStatuses(kStart, 10).empty());

  // A change is written, but not before the interval (10 s by default) has passed.
  w.cache.addPod(pod("p").gpus(8).label("muster.dev/queue", "a").onNode("n0"));
  w.tenancy->refresh(kStart + absl::Seconds(2), w.cache, {});
  CHECK(w.tenancy->dueStatuses(kStart + absl::Seconds(2), 10).empty());
  w.tenancy->refresh(kStart + absl::Seconds(10), w.cache, {});
  auto second = w.tenancy->dueStatuses(kStart + absl::Seconds(10), 10);
  REQUIRE(second.size() == 1);
  CHECK(second[0].second.resources.at("nvidia.com/gpu").allocated == "8");
  CHECK(second[0].second.resources.at("nvidia.com/gpu").usage > 0);

  // Only usage grows from now on: written after kUsageWriteInterval, not before.
  w.tenancy->refresh(kStart + absl::Seconds(60), w.cache, {});
  CHECK(w.tenancy->dueStatuses(kStart + absl::Seconds(60), 10).empty());
  const absl::Time later = kStart + absl::Seconds(10) + Tenancy::kUsageWriteInterval;
  w.tenancy->refresh(later, w.cache, {});
  auto third = w.tenancy->dueStatuses(later, 10);
  REQUIRE(third.size() == 1);
  CHECK(third[0].first == "a");

  // At most `per_second` writes in any second, however often it is asked; a failed write is due
  // again.
  w.tenancy->writeFailed("a");
  w.tenancy->writeFailed("b");
  const absl::Time t = later + absl::Seconds(1);
  CHECK(w.tenancy->dueStatuses(t, 1).size() == 1);
  CHECK(w.tenancy->dueStatuses(t, 1).empty());
  CHECK(w.tenancy->dueStatuses(t + absl::Milliseconds(999), 1).empty());
  CHECK(w.tenancy->dueStatuses(t + absl::Seconds(1), 1).size() == 1);
  CHECK(w.tenancy->dueStatuses(t + absl::Seconds(2), 1).empty());  // both written
}

TEST_CASE("a bad tree is said on the Queue: a cycle is Valid=False with the cycle in the message") {
  World w;
  w.tenancy->setQueue(queue("x", "y", gpuQuota("1")));
  w.tenancy->setQueue(queue("y", "x", gpuQuota("1")));
  w.tenancy->refresh(kStart, w.cache, {});
  auto due = w.tenancy->dueStatuses(kStart, 10);
  REQUIRE(due.size() == 2);
  for (const auto& [name, status] : due) {
    CHECK(status.conditions.at(0).status == "False");
    CHECK(status.conditions.at(0).reason == "Cycle");
  }
  // Both are placed under the root, so their gangs are still decided.
  CHECK_FALSE(w.tenancy->refuses("x", w.gpus(1)));
}

TEST_CASE("usage goes on from what the Queue's status says, decayed, after a restart") {
  World w;
  auto q = std::make_shared<proto::Queue>(*queue("a", "", gpuQuota("8")));
  q->status.resources["nvidia.com/gpu"].usage = 1000.0;
  w.tenancy->setQueue(q);
  w.tenancy->refresh(kStart, w.cache, {});
  w.tenancy->refresh(kStart + absl::Hours(7 * 24), w.cache, {});  // one half-life, nothing held
  auto due = w.tenancy->dueStatuses(kStart + absl::Hours(7 * 24), 10);
  REQUIRE(due.size() == 1);
  CHECK(due[0].second.resources.at("nvidia.com/gpu").usage == Approx(500.0));
}

TEST_CASE("a namespace's new queue label moves its running pods, but not those with their own") {
  World w;
  w.tenancy->setQueue(queue("a", "", gpuQuota("8")));
  w.tenancy->setQueue(queue("b", "", gpuQuota("8")));
  w.namespaces["ml"][proto::vocabulary::kQueueLabel] = "a";
  w.cache.addPod(pod("p1").gpus(4).onNode("n0"));
  w.cache.addPod(pod("p2").gpus(2).label("muster.dev/queue", "a").onNode("n1"));
  CHECK(w.tenancy->allocated("a", "nvidia.com/gpu") == 6000);
  w.namespaces["ml"][proto::vocabulary::kQueueLabel] = "b";
  w.tenancy->onNamespace("ml");
  CHECK(w.tenancy->allocated("a", "nvidia.com/gpu") == 2000);
  CHECK(w.tenancy->allocated("b", "nvidia.com/gpu") == 4000);
  w.cache.removePod("ml/p1");
  CHECK(w.tenancy->allocated("b", "nvidia.com/gpu") == 0);
}

}  // namespace
}  // namespace muster::scheduler::tenancy

namespace muster::scheduler::tenancy {
namespace {

// a holds 3 of 4 nodes (24 GPUs), b one (8) and wants 16 more; quotas 8 each, so fair shares
// are 8 + 8 of the 16 left = 16 each.
struct Contention : World {
  Contention() {
    tenancy->setQueue(queue("a", "", gpuQuota("8")));
    tenancy->setQueue(queue("b", "", gpuQuota("8")));
    tenancy->setQueue(queue("c", "b", gpuQuota("0")));
    for (int i = 0; i < 3; ++i)
      cache.addPod(pod("a" + std::to_string(i)).gpus(8).label("muster.dev/queue", "a").onNode("n" + std::to_string(i)));
    cache.addPod(pod("b0").gpus(8).label("muster.dev/queue", "b").onNode("n3"));
    tenancy->refresh(kStart, cache, {{"b", gpus(8)}, {"b", gpus(8)}});
  }
};

TEST_CASE("reclaim: only from another queue above its floor, and never down past its fair share") {
  Contention w;
  REQUIRE(w.tenancy->fairShare("a", "nvidia.com/gpu") == 16000);
  REQUIRE(w.tenancy->fairShare("b", "nvidia.com/gpu") == 16000);
  CHECK(w.tenancy->belowFairShare("b"));
  CHECK_FALSE(w.tenancy->belowFairShare("a"));
  CHECK(w.tenancy->queueOfPod("ml/a0") == "a");
  CHECK(w.tenancy->podUnits("ml/a0", "nvidia.com/gpu") == 8000);
  CHECK(w.tenancy->mayReclaimFrom("b", "a"));
  CHECK_FALSE(w.tenancy->mayReclaimFrom("a", "b"));  // b holds less than its share
  CHECK_FALSE(w.tenancy->mayReclaimFrom("b", "b"));
  CHECK_FALSE(w.tenancy->mayReclaimFrom("c", "b"));  // a queue above the taker
  // One gang of a: a keeps 16, its fair share; two would leave it 8.
  CHECK(w.tenancy->victimsAllowed("b", w.gpus(8), {{"ml/a0"}}, true));
  CHECK_FALSE(w.tenancy->victimsAllowed("b", w.gpus(8), {{"ml/a0"}, {"ml/a1"}}, true));
  // Priority preemption stops at the quota instead.
  CHECK(w.tenancy->victimsAllowed("b", w.gpus(8), {{"ml/a0"}, {"ml/a1"}}, false));
  CHECK_FALSE(w.tenancy->victimsAllowed("b", w.gpus(8), {{"ml/a0"}, {"ml/a1", "ml/a2"}}, false));
}

TEST_CASE("reclaim never leaves the taker further above its share than the victim: no oscillation") {
  Contention w;
  // b would hold 16 of 16 and a 16 of 16: even.
  CHECK(w.tenancy->victimsAllowed("b", w.gpus(8), {{"ml/a0"}}, true));
  // b would hold 24 of 16 against a's 16 of 16: a would take it back.
  CHECK_FALSE(w.tenancy->victimsAllowed("b", w.gpus(16), {{"ml/a0"}}, true));
}

}  // namespace
}  // namespace muster::scheduler::tenancy

namespace muster::scheduler::tenancy {
namespace {

TEST_CASE("reclaims decided one after another count the victims already going") {
  World w;  // 4 nodes; 4 more here: 64 GPUs
  for (int i = 4; i < 8; ++i) w.cache.addNode(node("n" + std::to_string(i)).gpus(8));
  w.tenancy->setQueue(queue("a", "", gpuQuota("16")));
  w.tenancy->setQueue(queue("b", "", gpuQuota("16")));
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 2; ++i)
      w.cache.addPod(pod("a" + std::to_string(g) + "-" + std::to_string(i)).gpus(8)
                         .label("muster.dev/queue", "a").onNode("n" + std::to_string(2 * g + i)));
  std::vector<std::pair<std::string, Request>> pending(4, {"b", w.gpus(16)});
  w.tenancy->refresh(kStart, w.cache, pending);
  REQUIRE(w.tenancy->fairShare("a", "nvidia.com/gpu") == 32000);
  auto gang = [](int g) {
    return std::vector<std::vector<std::string>>{
        {"ml/a" + std::to_string(g) + "-0", "ml/a" + std::to_string(g) + "-1"}};
  };
  REQUIRE(w.tenancy->belowFairShare("b"));
  REQUIRE(w.tenancy->victimsAllowed("b", w.gpus(16), gang(0), true));
  for (const auto& pods = gang(0); const std::string& p : pods[0]) w.tenancy->markGoing(p);
  REQUIRE(w.tenancy->victimsAllowed("b", w.gpus(16), gang(1), true));
  for (const auto& pods = gang(1); const std::string& p : pods[0]) w.tenancy->markGoing(p);
  CHECK_FALSE(w.tenancy->victimsAllowed("b", w.gpus(16), gang(2), true));
  CHECK_FALSE(w.tenancy->mayReclaimFrom("b", "a"));
}

}  // namespace
}  // namespace muster::scheduler::tenancy
