#include "scheduler/queue.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::addRacks;
using testing::node;
using testing::pod;

// Simulated time: tests advance it; nothing sleeps.
struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1700000000);
  Clock clock() {
    return [this] { return now; };
  }
  void advance(absl::Duration d) { now += d; }
};

const PodGroupLookup kNoGroups = [](std::string_view, std::string_view) {
  return static_cast<const proto::PodGroup*>(nullptr);
};

SchedulerConfig config() {
  SchedulerConfig c;
  c.topology_levels = {testing::kRack};
  c.queue_initial_backoff_seconds = 1;
  c.queue_max_backoff_seconds = 8;
  c.queue_reservation_after_seconds = 300;
  return c;
}

void addGang(SchedulingQueue& q, const std::string& name, int n, int gpus, int32_t priority = 0) {
  for (int i = 0; i < n; ++i) {
    REQUIRE(q.addOrUpdatePod(pod(name + "-" + std::to_string(i)).gpus(gpus).gang(name, n).priority(priority)).ok());
  }
}

Unschedulable noFit() { return Unschedulable{"no fit", {}, 0, 0, false, false}; }

TEST_CASE("gangs come out by priority, then age", "[queue]") {
  FakeClock clock;
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  addGang(q, "old-low", 2, 1, 0);
  clock.advance(absl::Seconds(1));
  addGang(q, "new-high", 2, 1, 100);
  clock.advance(absl::Seconds(1));
  addGang(q, "new-low", 2, 1, 0);
  CHECK(q.pop()->key.name == "new-high");
  CHECK(q.pop()->key.name == "old-low");
  CHECK(q.pop()->key.name == "new-low");
  CHECK_FALSE(q.pop().has_value());
}

TEST_CASE("with tenancy, the queue furthest below its fair share goes first, then priority and age",
          "[queue]") {
  FakeClock clock;
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  std::map<std::string, std::vector<double>> rank = {{"a", {0.5}}, {"b", {0.2}}};
  q.setTenancy(
      [](const proto::Pod& p) {
        auto it = p.meta.labels.find("muster.dev/queue");
        return it == p.meta.labels.end() ? std::string() : it->second;
      },
      [&rank](std::string_view queue) { return rank.at(std::string(queue)); });
  auto add = [&](const std::string& name, const std::string& queue, int32_t priority) {
    for (int i = 0; i < 2; ++i)
      REQUIRE(q.addOrUpdatePod(pod(name + "-" + std::to_string(i)).gang(name, 2).priority(priority)
                                   .label("muster.dev/queue", queue)).ok());
    clock.advance(absl::Seconds(1));
  };
  add("a-high", "a", 100);
  add("b-old", "b", 0);
  add("b-high", "b", 10);
  add("a-low", "a", 0);
  CHECK(q.activeCount() == 4);
  CHECK(q.pop()->key.name == "b-high");  // b is further below its share than a
  CHECK(q.pop()->key.name == "b-old");
  CHECK(q.pop()->key.name == "a-high");
  rank["a"] = {0.1};  // the order follows the rank at each pop
  add("b-new", "b", 1000);
  CHECK(q.pop()->key.name == "a-low");
  CHECK(q.pop()->key.name == "b-new");
  CHECK_FALSE(q.pop().has_value());
  CHECK(q.activeCount() == 0);
}

TEST_CASE("creation timestamps order gangs when present", "[queue]") {
  FakeClock clock;
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  REQUIRE(q.addOrUpdatePod(pod("b").created("2024-01-02T00:00:00Z")).ok());
  REQUIRE(q.addOrUpdatePod(pod("a").created("2024-01-01T00:00:00Z")).ok());
  CHECK(q.pop()->key.name == "a");
}

TEST_CASE("an unschedulable gang waits for a cluster event and its backoff, without busy looping",
          "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  addGang(q, "g", 2, 8);
  GangAttempt a = *q.pop();
  q.reportUnschedulable(a, noFit(), cache);
  CHECK(q.unschedulableCount() == 1);
  CHECK_FALSE(q.pop().has_value());
  // Without an event it comes back only after the 5-minute flush.
  CHECK(*q.nextWakeup() == clock.now + absl::Minutes(5));
  q.onClusterEvent(ClusterEvent::kNodeAdded);
  CHECK(q.backoffCount() == 1);  // 1 s backoff still running
  CHECK_FALSE(q.pop().has_value());
  CHECK(*q.nextWakeup() == clock.now + absl::Seconds(1));
  clock.advance(absl::Seconds(1));
  a = *q.pop();
  CHECK(a.failures == 1);
  // Backoff doubles: 2 s, 4 s, 8 s, 8 s.
  for (int expected : {2, 4, 8, 8}) {
    q.reportUnschedulable(a, noFit(), cache);
    q.onClusterEvent(ClusterEvent::kPodDeleted);
    clock.advance(absl::Seconds(expected) - absl::Milliseconds(1));
    CHECK_FALSE(q.pop().has_value());
    clock.advance(absl::Milliseconds(1));
    REQUIRE(q.pop().has_value());
  }
}

TEST_CASE("a cluster event after the backoff expired makes the gang active at once", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  addGang(q, "g", 1, 8);
  q.reportUnschedulable(*q.pop(), noFit(), cache);
  clock.advance(absl::Seconds(30));
  CHECK_FALSE(q.pop().has_value());
  q.onClusterEvent(ClusterEvent::kPodTerminated);
  CHECK(q.pop().has_value());
}

TEST_CASE("a gang that cannot fit does not block smaller ones behind it", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  addGang(q, "big", 4, 8, 10);
  addGang(q, "small", 1, 1, 0);
  GangAttempt big = *q.pop();
  CHECK(big.key.name == "big");
  q.reportUnschedulable(big, noFit(), cache);
  CHECK(q.pop()->key.name == "small");
}

TEST_CASE("a gang is tried only once minMember pods exist, without backoff", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  REQUIRE(q.addOrUpdatePod(pod("w0").gang("g", 2)).ok());
  GangAttempt a = *q.pop();
  std::optional<Unschedulable> u = precheck(a);
  REQUIRE(u.has_value());
  CHECK(u->message == "gang ml/g is waiting for members: 1 of 2 exist");
  q.reportUnschedulable(a, *u, cache);
  CHECK(q.waitingCount() == 1);
  CHECK_FALSE(q.pop().has_value());
  REQUIRE(q.addOrUpdatePod(pod("w1").gang("g", 2)).ok());
  a = *q.pop();
  CHECK(a.members.size() == 2);
  CHECK_FALSE(precheck(a).has_value());
}

TEST_CASE("pods with scheduling gates or being deleted are never handed out, nor counted as members",
          "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  REQUIRE(q.addOrUpdatePod(pod("gated").gate("example.com/quota")).ok());
  REQUIRE(q.addOrUpdatePod(pod("leaving").deleting()).ok());
  CHECK_FALSE(q.pop().has_value());
  CHECK(q.pendingPodCount() == 0);

  // A gang of 2 with one member gated waits for it; the gate's removal completes it.
  REQUIRE(q.addOrUpdatePod(pod("w0").gang("g", 2)).ok());
  REQUIRE(q.addOrUpdatePod(pod("w1").gang("g", 2).gate("example.com/quota")).ok());
  GangAttempt a = *q.pop();
  CHECK(a.members.size() == 1);
  std::optional<Unschedulable> u = precheck(a);
  REQUIRE(u.has_value());
  CHECK(u->message == "gang ml/g is waiting for members: 1 of 2 exist");
  q.reportUnschedulable(a, *u, cache);
  REQUIRE(q.addOrUpdatePod(pod("w1").gang("g", 2)).ok());  // gate removed
  std::optional<GangAttempt> next = q.pop();
  REQUIRE(next.has_value());
  a = *next;
  CHECK(a.members.size() == 2);
  CHECK_FALSE(precheck(a).has_value());

  // A queued member that starts terminating leaves its gang at once.
  REQUIRE(q.addOrUpdatePod(pod("w1").gang("g", 2).deleting()).ok());
  CHECK(q.pendingPodCount() == 1);
}

TEST_CASE("a gang still short of members after the grace is reported once, then waits quietly",
          "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulerConfig c = config();
  c.queue_waiting_event_after_seconds = 60;
  SchedulingQueue q(c, clock.clock(), kNoGroups);
  const absl::Time first_seen = clock.now;
  REQUIRE(q.addOrUpdatePod(pod("w0").gang("g", 100000)).ok());
  std::optional<GangAttempt> next = q.pop();
  REQUIRE(next.has_value());
  GangAttempt a = *next;
  CHECK_FALSE(a.report_waiting);
  CHECK_FALSE(a.report_waiting_condition);  // members are most likely still being created
  q.reportUnschedulable(a, *precheck(a), cache);
  CHECK_FALSE(q.pop().has_value());
  // The queue wakes the caller when the condition is due (5 s), then when the Event is (60 s).
  CHECK(*q.nextWakeup() == first_seen + absl::Seconds(5));
  clock.advance(absl::Seconds(5));
  next = q.pop();
  REQUIRE(next.has_value());
  a = *next;
  CHECK(a.report_waiting_condition);
  CHECK_FALSE(a.report_waiting);
  q.reportUnschedulable(a, *precheck(a), cache);
  CHECK(*q.nextWakeup() == first_seen + absl::Seconds(60));
  clock.advance(absl::Seconds(54));
  CHECK_FALSE(q.pop().has_value());
  clock.advance(absl::Seconds(1));
  next = q.pop();
  REQUIRE(next.has_value());
  a = *next;
  CHECK(a.report_waiting);
  CHECK(a.report_waiting_condition);
  q.reportUnschedulable(a, *precheck(a), cache);
  CHECK_FALSE(q.nextWakeup().has_value());
  // A new member makes it try again, but the Event is not repeated.
  REQUIRE(q.addOrUpdatePod(pod("w1").gang("g", 100000)).ok());
  next = q.pop();
  REQUIRE(next.has_value());
  a = *next;
  CHECK_FALSE(a.report_waiting);
  CHECK(a.report_waiting_condition);  // the new member is told at once: the grace has passed
  CHECK(precheck(a)->message == "gang ml/g is waiting for members: 2 of 100000 exist");
}

TEST_CASE("a gang whose members arrive within the condition grace is never told it waits",
          "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulerConfig c = config();
  c.queue_waiting_condition_after_seconds = 5;
  SchedulingQueue q(c, clock.clock(), kNoGroups);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(q.addOrUpdatePod(pod(absl::StrCat("w", i)).gang("g", 4)).ok());
    GangAttempt a = *q.pop();
    CHECK_FALSE(a.report_waiting_condition);
    q.reportUnschedulable(a, *precheck(a), cache);
    clock.advance(absl::Seconds(1));
  }
  REQUIRE(q.addOrUpdatePod(pod("w3").gang("g", 4)).ok());
  GangAttempt complete = *q.pop();
  CHECK_FALSE(precheck(complete).has_value());
  CHECK(complete.members.size() == 4);

  // 0 keeps the old behaviour: told at the first attempt.
  c.queue_waiting_condition_after_seconds = 0;
  SchedulingQueue at_once(c, clock.clock(), kNoGroups);
  REQUIRE(at_once.addOrUpdatePod(pod("v0").gang("h", 2)).ok());
  CHECK(at_once.pop()->report_waiting_condition);
}

TEST_CASE("a missing PodGroup makes its gang wait until the PodGroup appears", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  std::optional<proto::PodGroup> group;
  SchedulingQueue q(config(), clock.clock(), [&](std::string_view, std::string_view) {
    return group ? &*group : nullptr;
  });
  REQUIRE(q.addOrUpdatePod(pod("w0").podGroup("pg")).ok());
  GangAttempt a = *q.pop();
  REQUIRE(precheck(a).has_value());
  CHECK(precheck(a)->message.find("waiting for its PodGroup ml/pg") != std::string::npos);
  q.reportUnschedulable(a, *precheck(a), cache);
  group.emplace();
  group->meta.name = "pg";
  group->meta.namespace_ = "ml";
  group->spec.min_member = 1;
  q.onPodGroup("ml", "pg");
  a = *q.pop();
  CHECK_FALSE(precheck(a).has_value());
}

TEST_CASE("our own status updates of a pending pod do not requeue its gang", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  proto::Pod p = pod("p").gpus(1);
  REQUIRE(q.addOrUpdatePod(p).ok());
  q.reportUnschedulable(*q.pop(), noFit(), cache);
  p.status.conditions.push_back({"PodScheduled", "False", "Unschedulable", "no fit", ""});
  REQUIRE(q.addOrUpdatePod(p).ok());
  clock.advance(absl::Seconds(10));
  CHECK_FALSE(q.pop().has_value());
}

TEST_CASE("invalid and unsupported pods are refused with a reason and not queued", "[queue]") {
  FakeClock clock;
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  absl::Status s = q.addOrUpdatePod(pod("w").gang("g", 0));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  proto::Pod p = pod("dra");
  p.spec.has_resource_claims = true;
  s = q.addOrUpdatePod(p);
  CHECK(s.code() == absl::StatusCode::kUnimplemented);
  CHECK(std::string(s.message()).find("dynamic resource allocation") != std::string::npos);
  CHECK(q.pendingPodCount() == 0);
  CHECK_FALSE(q.pop().has_value());
}

TEST_CASE("placed members count as bound, and a bind failure puts them back", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  cache.addNode(node("n2").gpus(8));
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  addGang(q, "g", 2, 8);
  GangAttempt a = *q.pop();
  PlacementResult r = place(q.buildRequest(a), cache);
  REQUIRE(std::holds_alternative<GangPlacement>(r));
  q.reportPlaced(a, std::get<GangPlacement>(r));
  CHECK(q.pendingPodCount() == 0);
  CHECK_FALSE(q.pop().has_value());
  q.reportBindFailed(a, {"ml/g-1"});
  CHECK(q.pendingPodCount() == 1);
  clock.advance(absl::Seconds(1));
  GangAttempt again = *q.pop();
  CHECK(again.members.size() == 1);
  CHECK(again.bound.size() == 1);
}

TEST_CASE("the queue shares a pending pod with the informer and lets it go once it is seen bound",
          "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  cache.addNode(node("n2").gpus(8));
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  std::vector<std::shared_ptr<const proto::Pod>> pending;
  for (int i = 0; i < 2; ++i) {
    pending.push_back(std::make_shared<const proto::Pod>(pod("g-" + std::to_string(i)).gpus(8).gang("g", 2).build()));
    REQUIRE(q.addOrUpdatePod(pending.back()).ok());
  }
  GangAttempt late;  // the same gang, without its members
  {
    GangAttempt a = *q.pop();
    late.key = a.key;
    REQUIRE(a.members.size() == 2);
    CHECK(&a.members[0]->pod() == pending[0].get());  // not a copy
    PlacementResult r = place(q.buildRequest(a), cache);
    REQUIRE(std::holds_alternative<GangPlacement>(r));
    q.reportPlaced(a, std::get<GangPlacement>(r));
  }
  // Placed, not yet seen bound: the queue keeps each member to requeue it if its bind fails.
  CHECK(pending[0].use_count() == 2);
  CHECK(pending[1].use_count() == 2);
  proto::Pod bound = *pending[0];
  bound.spec.node_name = "n1";
  REQUIRE(q.addOrUpdatePod(bound).ok());
  CHECK(pending[0].use_count() == 1);
  CHECK(pending[1].use_count() == 2);
  // A failure reported late for the pod seen bound requeues only the other one.
  q.reportBindFailed(late, {"ml/g-0", "ml/g-1"});
  CHECK(q.pendingPodCount() == 1);
}

TEST_CASE("a lone pod whose bind failed is tried again after its backoff", "[queue]") {
  FakeClock clock;
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  REQUIRE(q.addOrUpdatePod(pod("solo").gpus(1)).ok());
  GangAttempt a = *q.pop();
  q.reportPlaced(a, std::get<GangPlacement>(place(q.buildRequest(a), cache)));
  CHECK(q.pendingPodCount() == 0);
  CHECK(q.reportBindFailed(a, {"ml/solo"}) == 1);
  CHECK(q.pendingPodCount() == 1);
  CHECK_FALSE(q.pop().has_value());
  clock.advance(absl::Seconds(1));
  std::optional<GangAttempt> again = q.pop();
  REQUIRE(again.has_value());
  CHECK(again->members.size() == 1);
  // Its pod's later update finds it queued once, not twice.
  REQUIRE(q.addOrUpdatePod(pod("solo").gpus(1)).ok());
  CHECK(q.pendingPodCount() == 1);
}

TEST_CASE("pods come and go: gangs grow as members are created and vanish when empty", "[queue]") {
  FakeClock clock;
  SchedulingQueue q(config(), clock.clock(), kNoGroups);
  REQUIRE(q.addOrUpdatePod(pod("w0").gang("g", 3)).ok());
  REQUIRE(q.addOrUpdatePod(pod("w1").gang("g", 3)).ok());
  CHECK(q.pendingPodCount() == 2);
  q.removePod(pod("w0").build());
  q.removePod(pod("w1").build());
  CHECK(q.pendingPodCount() == 0);
  CHECK(q.activeCount() == 0);
  CHECK_FALSE(q.pop().has_value());
}

// The scheduling loop as the lead runs it, on a fake clock: pop, place, assume, done.
struct Loop {
  FakeClock& clock;
  ClusterCache& cache;
  SchedulingQueue& q;
  std::vector<std::pair<std::string, std::string>> bound;  // pod key, node

  void drain() {
    while (std::optional<GangAttempt> a = q.pop()) {
      if (std::optional<Unschedulable> u = precheck(*a)) {
        q.reportUnschedulable(*a, *u, cache);
        continue;
      }
      PlacementResult r = place(q.buildRequest(*a), cache);
      if (const GangPlacement* p = std::get_if<GangPlacement>(&r)) {
        for (size_t i = 0; i < p->assignments.size(); ++i) {
          REQUIRE(cache.assume(*a->members[i], p->assignments[i].node).ok());
          bound.emplace_back(p->assignments[i].pod_key, p->assignments[i].node);
        }
        q.reportPlaced(*a, *p);
      } else {
        q.reportUnschedulable(*a, std::get<Unschedulable>(r), cache);
      }
    }
  }
};

TEST_CASE("a stream of 1-pod jobs does not starve a waiting 32-pod gang past the reservation time",
          "[queue]") {
  FakeClock clock;
  SchedulerConfig c = config();
  ClusterCache cache(c.topology_levels);
  addRacks(cache, 4, 8, 8);  // 32 nodes × 8 GPUs
  SchedulingQueue q(c, clock.clock(), kNoGroups);
  Loop loop{clock, cache, q, {}};

  // The cluster starts full of 1-GPU single pods.
  int next = 0;
  auto submitSmall = [&](int n) {
    for (int i = 0; i < n; ++i) {
      REQUIRE(q.addOrUpdatePod(pod("s" + std::to_string(next++)).gpus(1).priority(0)).ok());
    }
  };
  submitSmall(256);
  loop.drain();
  REQUIRE(loop.bound.size() == 256);

  // The gang needs every node whole: 32 pods × 8 GPUs.
  addGang(q, "big", 32, 8, 0);
  loop.drain();

  // Every 10 s: the 16 oldest small pods finish, 16 new ones arrive.
  size_t finished = 0;
  bool gang_placed = false;
  absl::Time start = clock.now;
  while (clock.now - start < absl::Minutes(30)) {
    clock.advance(absl::Seconds(10));
    for (int i = 0; i < 16 && finished < loop.bound.size(); ++i, ++finished) {
      auto [key, node_name] = loop.bound[finished];
      if (key.rfind("ml/big-", 0) == 0) continue;
      proto::Pod done = pod(key.substr(3)).gpus(1).onNode(node_name).phase("Succeeded");
      cache.updatePod(done);
      q.addOrUpdatePod(done).IgnoreError();
    }
    q.onClusterEvent(ClusterEvent::kPodTerminated);
    submitSmall(16);
    loop.drain();
    for (const auto& [key, n] : loop.bound) gang_placed |= key == "ml/big-0";
    if (gang_placed) break;
  }
  CHECK(gang_placed);
  // It got its reservation after 300 s and was placed once the reserved nodes drained, well before
  // the stream would have let it through by chance.
  CHECK(clock.now - start <= absl::Seconds(300) + absl::Seconds(600));
  CHECK(q.reservationOf(GangKey{"ml", "big", false}) == nullptr);
}

TEST_CASE("higher-priority work may use a lower-priority gang's reserved nodes", "[queue]") {
  FakeClock clock;
  SchedulerConfig c = config();
  ClusterCache cache(c.topology_levels);
  addRacks(cache, 1, 2, 8);
  cache.addPod(pod("busy").gpus(1).onNode("r0-n0"));
  SchedulingQueue q(c, clock.clock(), kNoGroups);
  addGang(q, "big", 2, 8, 0);
  clock.advance(absl::Seconds(301));
  GangAttempt a = *q.pop();
  q.reportUnschedulable(a, std::get<Unschedulable>(place(q.buildRequest(a), cache)), cache);
  REQUIRE(q.reservationOf(a.key) != nullptr);
  CHECK(q.reservationOf(a.key)->size() == 2);

  REQUIRE(q.addOrUpdatePod(pod("low").gpus(1).priority(0)).ok());
  REQUIRE(q.addOrUpdatePod(pod("high").gpus(1).priority(1000)).ok());
  GangAttempt high = *q.pop();
  CHECK(high.key.name == "high");
  CHECK(q.buildRequest(high).blocked_nodes.empty());
  GangAttempt low = *q.pop();
  CHECK(low.key.name == "low");
  CHECK(q.buildRequest(low).blocked_nodes.size() == 2);
  CHECK(std::holds_alternative<Unschedulable>(place(q.buildRequest(low), cache)));
}

}  // namespace
}  // namespace muster::scheduler
