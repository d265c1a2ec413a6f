// The whole Scheduler (informers, cache, queue, placement, Binder, rollback, PodGroup status)
// against the seam fakes of fake_cluster.h: binds that fail at every member index, a crash
// between binds, evictions refused. Time is a ManualClock; backoff passes when the test says so.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/clock.h"
#include "proto/event_recorder.h"
#include "proto/informer_factory.h"
#include "proto/metrics.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/fake_cluster.h"

namespace muster::scheduler {
namespace {

using testing::FakeCluster;
using testing::FakeEventSink;
using testing::FakeSchedulerApi;
using testing::replicaSetJson;
using testing::serviceJson;
using testing::nodeJson;
using testing::podGroupJson;
using testing::podJson;
using testing::workloadPodGroupJson;

constexpr char kRequiredRack[] = "muster.dev/topology-required";

SchedulerConfig config() {
  SchedulerConfig c;
  c.topology_levels = {"muster.dev/rack"};
  c.queue_initial_backoff_seconds = 1;
  c.queue_max_backoff_seconds = 1;
  return c;
}

// Backoff that doubles from 1 s up to 60 s, as configured by default (config() caps it at 1 s).
SchedulerConfig growingBackoff() {
  SchedulerConfig c = config();
  c.queue_initial_backoff_seconds = 1;
  c.queue_max_backoff_seconds = 60;
  return c;
}

struct Fixture {
  Fixture() : api(std::make_shared<FakeSchedulerApi>(cluster)) {}
  ~Fixture() { crash(); }

  void start(SchedulerConfig c = config()) {
    informers = std::make_unique<proto::InformerFactory>(cluster.maker(), io.get_executor());
    proto::EventRecorderOptions o;
    o.component = "muster-scheduler";
    o.flush_interval = absl::Hours(1);
    events = std::make_unique<proto::EventRecorder>(sink, io.get_executor(), o, clock.clock());
    scheduler = std::make_unique<Scheduler>(c, *informers, api, *events, io.get_executor(),
                                            clock.clock());
    informers->start();
    scheduler->start();
    REQUIRE(cluster.runUntil([&] { return scheduler->ready(); }));
  }
  // What kill -9 leaves: the cluster as it is, nothing of the scheduler's memory.
  void crash() {
    if (!scheduler) return;
    scheduler->stop();
    informers->stop();
    events->stop();
    for (int i = 0; i < 5; ++i) cluster.settle();
    scheduler.reset();
    events.reset();
    informers.reset();
    cluster.settle();
  }
  // Every bind of `pod` ("ml/w1") refused, as an admission webhook would; the others succeed.
  void refuseBindsOf(const std::string& pod) {
    api->on_bind = [pod](const testing::BindCall& call, int) {
      return call.pod == pod ? absl::PermissionDeniedError("admission webhook denied the request")
                             : absl::OkStatus();
    };
  }
  long bindsOf(const std::string& pod) const {
    return std::count_if(api->binds.begin(), api->binds.end(),
                         [&](const testing::BindCall& b) { return b.pod == pod; });
  }
  // A quarter second of the fake clock, and the loop and the cluster given time to act on it.
  void tick() {
    clock.advance(absl::Milliseconds(250));
    scheduler->wake();
    for (int i = 0; i < 3; ++i) cluster.settle();
  }
  // Lets the queue's backoff pass and the loop notice.
  void afterBackoff() {
    clock.advance(absl::Seconds(2));
    scheduler->wake();
  }

  std::string nodeOf(const std::string& pod) {
    auto json = cluster.get("pods", "ml", pod);
    if (!json) return "";
    rapidjson::Document d;
    d.Parse(json->c_str());
    return d["spec"].HasMember("nodeName") ? d["spec"]["nodeName"].GetString() : "";
  }
  int bound(const std::vector<std::string>& pods) {
    return static_cast<int>(std::count_if(pods.begin(), pods.end(),
                                          [&](const std::string& p) { return !nodeOf(p).empty(); }));
  }
  bool exists(const std::string& pod) { return cluster.get("pods", "ml", pod).has_value(); }
  // "<reason>: <message>" of the pod's PodScheduled condition, or "".
  std::string scheduledCondition(const std::string& pod) {
    auto json = cluster.get("pods", "ml", pod);
    if (!json) return "";
    rapidjson::Document d;
    d.Parse(json->c_str());
    if (!d["status"].HasMember("conditions")) return "";
    for (const auto& c : d["status"]["conditions"].GetArray())
      if (std::string(c["type"].GetString()) == "PodScheduled")
        return std::string(c["reason"].GetString()) + ": " + c["message"].GetString();
    return "";
  }
  // The recorder's counts once everything posted to it so far has been handled.
  proto::EventRecorder::Stats eventStats() {
    std::optional<proto::EventRecorder::Stats> stats;
    events->settle([&] { stats = events->stats(); });
    REQUIRE(cluster.runUntil([&] { return stats.has_value(); }));
    return *stats;
  }
  size_t indexOf(const std::vector<std::string>& calls, const std::string& what) {
    return std::find(calls.begin(), calls.end(), what) - calls.begin();
  }

  proto::asio::io_context io;
  FakeCluster cluster{io};
  std::shared_ptr<FakeSchedulerApi> api;
  std::shared_ptr<FakeEventSink> sink = std::make_shared<FakeEventSink>();
  proto::ManualClock clock;
  std::unique_ptr<proto::InformerFactory> informers;
  std::unique_ptr<proto::EventRecorder> events;
  std::unique_ptr<Scheduler> scheduler;
};

const std::vector<std::string> kGang4 = {"w0", "w1", "w2", "w3"};

void racks(Fixture& f) {
  // Rack r1: n1, n2 (8 GPUs each); rack r2: n3, n4.
  f.cluster.put("nodes", nodeJson("n1").rack("r1"));
  f.cluster.put("nodes", nodeJson("n2").rack("r1"));
  f.cluster.put("nodes", nodeJson("n3").rack("r2"));
  f.cluster.put("nodes", nodeJson("n4").rack("r2"));
}

TEST_CASE("a gang of 4 is bound whole, one bind per member, with one Scheduled Event for the "
          "gang (or one per pod when configured)", "[scheduler]") {
  const bool per_pod = GENERATE(false, true);
  Fixture f;
  racks(f);
  for (const auto& p : kGang4) f.cluster.put("pods", podJson(p).gpus(4).gang("train", 4));
  SchedulerConfig c = config();
  c.scheduled_events_per_pod = per_pod;
  f.start(c);
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 4; }));
  f.cluster.settle();
  CHECK(f.api->binds.size() == 4);
  // 16 GPUs: exactly one rack's two nodes.
  std::set<std::string> nodes;
  for (const auto& p : kGang4) nodes.insert(f.nodeOf(p));
  CHECK((nodes == std::set<std::string>{"n1", "n2"} || nodes == std::set<std::string>{"n3", "n4"}));
  if (per_pod) {
    for (const auto& p : kGang4) CHECK(f.sink->count("Scheduled", "ml/" + p) == 1);
    return;
  }
  REQUIRE(f.sink->count("Scheduled") == 1);
  const proto::Event& e = *std::find_if(f.sink->created.begin(), f.sink->created.end(),
                                        [](const proto::Event& e) { return e.reason == "Scheduled"; });
  CHECK(e.involved_object.kind == "Pod");
  CHECK(std::find(kGang4.begin(), kGang4.end(), e.involved_object.name) != kGang4.end());
  CHECK(e.message == absl::StrCat("Successfully assigned 4 pods of gang ml/train to muster.dev/rack=",
                                  *nodes.begin() == "n1" ? "r1" : "r2", ": nodes ",
                                  f.nodeOf(e.involved_object.name) == *nodes.begin()
                                      ? absl::StrCat(*nodes.begin(), ", ", *nodes.rbegin())
                                      : absl::StrCat(*nodes.rbegin(), ", ", *nodes.begin())));
}

TEST_CASE("no more binds are outstanding at once than configured, the rest follow in turn",
          "[scheduler]") {
  const int limit = GENERATE(2, 64);
  Fixture f;
  racks(f);
  std::vector<std::string> gang;
  for (int i = 0; i < 16; ++i) {
    gang.push_back("w" + std::to_string(i));
    f.cluster.put("pods", podJson(gang.back()).gpus(2).gang("train", 16));
  }
  f.api->yield_in_bind = true;
  SchedulerConfig c = config();
  c.binds_in_flight = limit;
  f.start(c);
  REQUIRE(f.cluster.runUntil([&] { return f.bound(gang) == 16; }));
  CHECK(f.api->binds.size() == 16);
  // Each bind waits on the executor: with room for every member they were all out at once.
  CHECK(f.api->most_binds_outstanding == std::min(limit, 16));
}

TEST_CASE("a single pod gets kube-scheduler's Scheduled Event, and a PodGroup's gang gets its "
          "one on the PodGroup", "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("podgroups", podGroupJson("g", 3));
  for (const auto& p : {"w0", "w1", "w2"}) f.cluster.put("pods", podJson(p).gpus(2).podGroup("g"));
  f.cluster.put("pods", podJson("solo").gpus(1));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"w0", "w1", "w2", "solo"}) == 4; }));
  f.cluster.settle();
  CHECK(f.sink->count("Scheduled") == 2);
  CHECK(f.sink->count("Scheduled", "ml/solo") == 1);
  CHECK(f.sink->count("Scheduled", "ml/g") == 1);
  for (const proto::Event& e : f.sink->created) {
    if (e.reason != "Scheduled") continue;
    if (e.involved_object.name == "solo") {
      CHECK(e.message == "Successfully assigned ml/solo to " + f.nodeOf("solo"));
    } else {
      CHECK(e.involved_object.kind == "PodGroup");
      // 3 x 2 GPUs fit one 8-GPU node: the gang's one node is named once.
      REQUIRE(f.nodeOf("w0") == f.nodeOf("w1"));
      REQUIRE(f.nodeOf("w0") == f.nodeOf("w2"));
      CHECK(e.message == "Successfully assigned 3 pods of gang ml/g to node " + f.nodeOf("w0"));
    }
  }
}

TEST_CASE("pods without spread constraints spread by kube-scheduler's defaults over what their "
          "Service or ReplicaSet selects, and pack otherwise", "[scheduler][spread]") {
  Fixture f;
  for (const char* n : {"n1", "n2", "n3"}) f.cluster.put("nodes", nodeJson(n).rack("r1").gpus(8));
  f.cluster.put("services", serviceJson("web", {{"app", "web"}}));
  f.cluster.put("replicasets", replicaSetJson("db", {{"app", "db"}}));
  std::vector<std::string> all;
  for (int i = 0; i < 3; ++i) {
    const std::string web = "web-" + std::to_string(i), db = "db-" + std::to_string(i),
                      plain = "plain-" + std::to_string(i);
    f.cluster.put("pods", podJson(web).label("app", "web"));
    f.cluster.put("pods", podJson(db).label("app", "db").controlledBy("apps/v1", "ReplicaSet", "db"));
    // Labelled like the web pods' namespace-mates but selected by nothing: packed.
    f.cluster.put("pods", podJson(plain).label("app", "batch"));
    all.insert(all.end(), {web, db, plain});
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.bound(all) == 9; }));
  auto nodesOf = [&](const std::string& prefix) {
    std::set<std::string> nodes;
    for (int i = 0; i < 3; ++i) nodes.insert(f.nodeOf(prefix + std::to_string(i)));
    return nodes;
  };
  CHECK(nodesOf("web-").size() == 3);   // maxSkew 3 per host is a preference: fewest first
  CHECK(nodesOf("db-").size() == 3);
  CHECK(nodesOf("plain-").size() == 1);  // packing, as without defaults
}

TEST_CASE("a gang of 3 is not bound at all while only 2 of its members fit", "[scheduler]") {
  Fixture f;
  f.cluster.put("nodes", nodeJson("n1").rack("r1").gpus(8));
  for (const auto& p : {"w0", "w1", "w2"}) f.cluster.put("pods", podJson(p).gpus(4).gang("g", 3));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.sink->count("FailedScheduling") > 0; }));
  f.cluster.settle();
  CHECK(f.api->binds.empty());
  CHECK(std::count(f.api->conditions.begin(), f.api->conditions.end(),
                   "ml/w0 PodScheduled=False") == 1);
}

TEST_CASE("a bind failing at any member leaves the others bound and that member joins them",
          "[scheduler]") {
  const int failing = GENERATE(0, 1, 2, 3);
  Fixture f;
  racks(f);
  for (const auto& p : kGang4)
    f.cluster.put("pods", podJson(p).gpus(4).gang("train", 4).annotation(kRequiredRack, "muster.dev/rack"));
  const std::string victim = "ml/w" + std::to_string(failing);
  f.api->on_bind = [&](const testing::BindCall& call, int index) {
    return call.pod == victim && index < 4 ? absl::UnavailableError("etcd leader changed")
                                            : absl::OkStatus();
  };
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 3; }));
  f.cluster.settle();
  CHECK(f.api->binds.size() == 4);
  CHECK(f.sink->count("FailedScheduling", victim) == 1);
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 4; }));
  CHECK(f.api->binds.size() == 5);
  CHECK(f.api->binds.back().pod == victim);
  // It joined the rack of the bound members; nothing was evicted.
  std::set<std::string> nodes;
  for (const auto& p : kGang4) nodes.insert(f.nodeOf(p));
  CHECK((nodes == std::set<std::string>{"n1", "n2"} || nodes == std::set<std::string>{"n3", "n4"}));
  CHECK(f.api->evictions.empty());
}

TEST_CASE("a member whose bind is refused every time: after 3 tries its bound gang-mates are "
          "rolled back", "[scheduler]") {
  Fixture f;
  racks(f);
  for (const auto& p : kGang4) f.cluster.put("pods", podJson(p).gpus(4).gang("train", 4).controlledBy("j"));
  f.api->on_bind = [](const testing::BindCall& call, int) {
    return call.pod == "ml/w1" ? absl::PermissionDeniedError("admission webhook denied the request")
                               : absl::OkStatus();
  };
  f.start();
  for (size_t tries = 1; tries <= 2; ++tries) {
    REQUIRE(f.cluster.runUntil([&] { return f.api->binds.size() == 3 + tries; }));
    f.cluster.settle();
    CHECK(f.api->evictions.empty());  // a refused bind may be transient: try again first
    CHECK(f.bound(kGang4) == 3);
    f.afterBackoff();
  }
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 0; }));
  CHECK(f.api->binds.size() == 6);
  std::vector<std::string> evicted = f.api->evictions;
  std::sort(evicted.begin(), evicted.end());
  CHECK(evicted == std::vector<std::string>{"ml/w0", "ml/w2", "ml/w3"});
  f.cluster.settle();
  CHECK(f.sink->count("GangEvicted", "ml/w0") == 1);
}

// A gang of two on two 4-GPU nodes whose second bind fails; then another scheduler's pod takes
// the node the second member was meant for, so the gang can no longer be completed.
void strandOneMember(Fixture& f, bool with_controller) {
  f.cluster.put("nodes", nodeJson("n1").gpus(4));
  f.cluster.put("nodes", nodeJson("n2").gpus(4));
  for (const auto& p : {"w0", "w1"}) {
    auto pod = podJson(p).gpus(4).gang("g", 2);
    if (with_controller) pod.controlledBy("train");
    f.cluster.put("pods", pod);
  }
  f.api->on_bind = [](const testing::BindCall& call, int) {
    return call.pod == "ml/w1" ? absl::UnavailableError("connection reset") : absl::OkStatus();
  };
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"w0"}) == 1 && f.api->binds.size() == 2; }));
  f.cluster.settle();
  const std::string free_node = f.nodeOf("w0") == "n1" ? "n2" : "n1";
  f.cluster.put("pods", podJson("other").gpus(4).schedulerName("default-scheduler").boundTo(free_node));
  f.afterBackoff();
}

TEST_CASE("bound members whose gang can no longer be completed are marked, then evicted",
          "[scheduler]") {
  Fixture f;
  strandOneMember(f, /*with_controller=*/true);
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("w0"); }));
  // No marker, no eviction: the marker goes first.
  const size_t marked = f.indexOf(f.api->log, "condition ml/w0 muster.dev/GangRollback=True");
  const size_t evicted = f.indexOf(f.api->log, "evict ml/w0");
  REQUIRE(marked < f.api->log.size());
  CHECK(marked < evicted);
  CHECK(f.api->evictions == std::vector<std::string>{"ml/w0"});
  f.cluster.settle();
  CHECK(f.sink->count("GangEvicted", "ml/w0") == 1);
  CHECK(f.nodeOf("w1").empty());
}

TEST_CASE("a bound member with no controller is reported, never evicted", "[scheduler]") {
  Fixture f;
  strandOneMember(f, /*with_controller=*/false);
  REQUIRE(f.cluster.runUntil([&] { return f.sink->count("GangPartlyBound", "ml/w0") == 1; }));
  CHECK(f.api->evictions.empty());
  CHECK(f.exists("w0"));
}

TEST_CASE("an eviction a PodDisruptionBudget refuses is tried again on the next attempt",
          "[scheduler]") {
  Fixture f;
  f.cluster.put("nodes", nodeJson("n1").gpus(4));
  f.cluster.put("pods", podJson("w0").gpus(4).gang("g", 2).controlledBy("train").boundTo("n1"));
  f.cluster.put("pods", podJson("w1").gpus(4).gang("g", 2).controlledBy("train"));
  f.api->on_evict = [](const std::string&, int index) {
    return index == 0 ? absl::ResourceExhaustedError(
                            "Cannot evict pod as it would violate the pod's disruption budget.")
                      : absl::OkStatus();
  };
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.api->evictions.size() == 1; }));
  f.cluster.settle();
  CHECK(f.exists("w0"));
  // Nothing changed in the cluster: the gang is tried again when unschedulable gangs are
  // flushed (5 minutes, as kube-scheduler's podMaxInUnschedulablePodsDuration).
  f.clock.advance(absl::Minutes(6));
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("w0"); }));
  CHECK(f.api->evictions.size() == 2);
  CHECK(f.api->binds.empty());  // w1 was never bound on its own
}

TEST_CASE("after a crash between binds the restarted scheduler completes the gang in its rack",
          "[scheduler]") {
  Fixture f;
  racks(f);
  // What the last life of the scheduler left: two of four members bound to n3 (rack r2).
  for (const auto& p : kGang4) {
    auto pod = podJson(p).gpus(4).gang("train", 4).annotation(kRequiredRack, "muster.dev/rack");
    if (p == "w0" || p == "w1") pod.boundTo("n3");
    f.cluster.put("pods", pod);
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 4; }));
  CHECK(f.api->binds.size() == 2);
  CHECK(f.nodeOf("w2") == "n4");
  CHECK(f.nodeOf("w3") == "n4");
  CHECK(f.api->evictions.empty());
}

TEST_CASE("a crash mid-gang, then a scheduler that restarts and must roll the gang back",
          "[scheduler]") {
  Fixture f;
  racks(f);
  for (const auto& p : kGang4)
    f.cluster.put("pods", podJson(p).gpus(4).gang("train", 4).controlledBy("train")
                              .annotation(kRequiredRack, "muster.dev/rack"));
  // The first life binds two members, then dies.
  f.api->on_bind = [&](const testing::BindCall&, int index) {
    return index < 2 ? absl::OkStatus() : absl::UnavailableError("the scheduler was killed");
  };
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.api->binds.size() == 4; }));
  f.crash();
  REQUIRE(f.bound(kGang4) == 2);
  // While it was down, other work filled the rest of that rack.
  std::map<std::string, int> free = {{"n1", 8}, {"n2", 8}, {"n3", 8}, {"n4", 8}};
  for (const auto& p : kGang4)
    if (!f.nodeOf(p).empty()) free[f.nodeOf(p)] -= 4;
  const bool in_r1 = free["n1"] < 8 || free["n2"] < 8;
  for (const std::string& n : in_r1 ? std::vector<std::string>{"n1", "n2"}
                                   : std::vector<std::string>{"n3", "n4"}) {
    if (free[n] > 0)
      f.cluster.put("pods", podJson("filler-" + n).gpus(free[n]).schedulerName("x").boundTo(n));
  }
  f.api->on_bind = nullptr;
  f.api->binds.clear();
  f.start();
  // The bound two cannot be joined in their rack (required): both are marked and evicted.
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 0; }));
  CHECK(f.api->evictions.size() == 2);
  CHECK(f.api->binds.empty());
}

TEST_CASE("a gated member is marked SchedulingGated and never bound, and without the gate its gang binds",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("pods", podJson("w0").gpus(4).gang("g", 2));
  f.cluster.put("pods", podJson("w1").gpus(4).gang("g", 2).gate("example.com/quota"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("w1") ==
           "SchedulingGated: Scheduling is blocked due to non-empty scheduling gates";
  }));
  // w0 is told that its gang waits once queue.waitingConditionAfterSeconds (5 s) have passed.
  f.clock.advance(absl::Seconds(5));
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("w0") ==
               "Unschedulable: gang ml/g is waiting for its members: it is placed once 2 pods exist";
  }));
  f.cluster.settle();
  CHECK(f.api->binds.empty());
  CHECK(f.sink->count("FailedScheduling") == 0);  // a gate is not a failure
  f.cluster.edit("pods", "ml", "w1", [](rapidjson::Document& d) {
    d["spec"].RemoveMember("schedulingGates");
  });
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"w0", "w1"}) == 2; }));
}

TEST_CASE("a pending pod that is being deleted is never bound", "[scheduler]") {
  Fixture f;
  racks(f);
  std::string leaving = podJson("leaving").gpus(1);
  leaving.insert(leaving.find("\"uid\""), "\"deletionTimestamp\":\"2026-01-01T00:00:01Z\",");
  f.cluster.put("pods", leaving);
  f.cluster.put("pods", podJson("later").gpus(1));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("later").empty(); }));
  f.cluster.settle();
  CHECK(f.nodeOf("leaving").empty());
  CHECK(f.api->binds.size() == 1);
}

TEST_CASE("a pod with DRA resource claims gets one FailedScheduling Event, stays pending",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("pods", podJson("dra").gpus(1).resourceClaim("gpu-claim"));
  f.cluster.put("pods", podJson("bad-size").gpus(1).gang("g", 2).annotation(
                            "gang-scheduling.preferred.jp/gang-size", "abc"));
  f.start();
  const std::string dra_message =
      "Unschedulable: pod ml/dra uses what muster-scheduler does not implement: dynamic resource "
      "allocation (spec.resourceClaims); it stays pending";
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("dra") == dra_message &&
           f.scheduledCondition("bad-size").find("gang-size") != std::string::npos;
  }));
  // The condition write comes back as an update; it must not record the Event again.
  for (int i = 0; i < 5; ++i) f.cluster.settle();
  CHECK(f.sink->count("FailedScheduling", "ml/dra") == 1);
  CHECK(f.sink->count("FailedScheduling", "ml/bad-size") == 1);
  CHECK(f.eventStats().aggregated == 0);
  CHECK(f.api->binds.empty());
}

TEST_CASE("a gang short of members gets a Warning Event once it has waited past the grace",
          "[scheduler]") {
  Fixture f;
  racks(f);
  SchedulerConfig c = config();
  c.queue_waiting_event_after_seconds = 60;
  f.cluster.put("pods", podJson("w0").gpus(1).gang("huge", 100000));
  f.start(c);
  for (int i = 0; i < 5; ++i) f.cluster.settle();
  CHECK(f.api->conditions.empty());  // members may still be on their way: nothing written
  f.clock.advance(absl::Seconds(5));
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("w0").empty(); }));
  CHECK(f.scheduledCondition("w0") ==
        "Unschedulable: gang ml/huge is waiting for its members: it is placed once 100000 pods "
        "exist");
  f.cluster.settle();
  CHECK(f.sink->count("FailedScheduling") == 0);  // the Event comes later
  f.clock.advance(absl::Seconds(55));
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] { return f.sink->count("FailedScheduling", "ml/w0") == 1; }));
  CHECK(f.sink->created.back().message ==
        "gang ml/huge is waiting for members: 1 of 100000 exist; still waiting 60s after its "
        "first member was seen");
  f.clock.advance(absl::Seconds(600));
  f.scheduler->wake();
  for (int i = 0; i < 5; ++i) f.cluster.settle();
  CHECK(f.sink->count("FailedScheduling", "ml/w0") == 1);
}

// scheduler_schedule_attempts_total{result=...}: process-wide, so tests compare differences.
double attempts(const std::string& result) {
  return metrics::defaultRegistry()
      .counter("scheduler_schedule_attempts_total", "", {"result"})
      .with({result})
      .value();
}

TEST_CASE("a gang whose members arrive within the grace is bound without a status write",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.start();
  const double unschedulable_before = attempts("unschedulable");
  const double scheduled_before = attempts("scheduled");
  for (const std::string& p : kGang4) {
    f.cluster.put("pods", podJson(p).gpus(1).gang("g", 4));
    for (int i = 0; i < 3; ++i) f.cluster.settle();
    f.clock.advance(absl::Seconds(1));  // 4 members over 3 s, inside the 5 s grace
    f.scheduler->wake();
  }
  REQUIRE(f.cluster.runUntil([&] { return f.bound(kGang4) == 4; }));
  INFO(absl::StrJoin(f.api->conditions, "; "));
  CHECK(f.api->conditions.empty());
  CHECK(f.sink->count("FailedScheduling") == 0);
  // A gang still short of members is not tried, so it is no unschedulable attempt: one attempt,
  // the one that placed it.
  CHECK(attempts("unschedulable") == unschedulable_before);
  CHECK(attempts("scheduled") == scheduled_before + 1);
}

TEST_CASE("a pod whose claim is bound is placed, and one whose Immediate claim is pending waits until "
          "it binds",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("persistentvolumeclaims", testing::claimJson("data", true));
  f.cluster.put("persistentvolumes", testing::volumeJson("data"));
  f.cluster.put("persistentvolumeclaims", testing::claimJson("scratch", false));
  f.cluster.put("pods", podJson("reader").gpus(1).claim("data"));
  f.cluster.put("pods", podJson("writer").gpus(1).claim("scratch"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] {
    return !f.nodeOf("reader").empty() &&
           f.scheduledCondition("writer").find(
               "pod has unbound immediate PersistentVolumeClaims") != std::string::npos;
  }));
  CHECK(f.nodeOf("writer").empty());
  f.cluster.put("persistentvolumeclaims", testing::claimJson("scratch", true));
  f.cluster.put("persistentvolumes", testing::volumeJson("scratch"));
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("writer").empty(); }));
}

// Plays a provisioner and the PersistentVolume controller for the claims Muster asked volumes
// for ("selected-node ml/<claim> <node>" in the fake API's log): each gets the volume
// "pv-<claim>" on that node and is bound to it. Returns how many it provisioned.
int provisionSelected(Fixture& f, size_t* seen) {
  int n = 0;
  for (; *seen < f.api->volume_writes.size(); ++*seen) {
    const std::vector<std::string> w = absl::StrSplit(f.api->volume_writes[*seen], ' ');
    if (w.size() != 3 || w[0] != "selected-node" || w[2].empty()) continue;
    const std::string claim = w[1].substr(w[1].find('/') + 1);
    f.cluster.put("persistentvolumes", testing::volumeJson(claim, {w[2]}));
    f.cluster.put("persistentvolumeclaims", testing::claimJson(claim, true));
    ++n;
  }
  return n;
}

TEST_CASE("a gang whose claims wait for their first consumer: volumes are asked for on the chosen "
          "nodes first, and the pods bound once every claim is", "[scheduler][volumes]") {
  Fixture f;
  racks(f);
  f.cluster.put("storageclasses", testing::storageClassJson("fast", "WaitForFirstConsumer",
                                                            "csi.example.com"));
  std::vector<std::string> gang;
  for (int i = 0; i < 8; ++i) {
    const std::string w = "w" + std::to_string(i);
    gang.push_back(w);
    f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("data-" + w, "fast"));
    f.cluster.put("pods", podJson(w).gpus(2).gang("train", 8).claim("data-" + w));
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() == 8; }));
  for (int i = 0; i < 5; ++i) f.cluster.settle();
  // Nothing is bound before the volumes are.
  CHECK(f.api->binds.empty());
  CHECK(f.bound(gang) == 0);
  size_t seen = 0;
  CHECK(provisionSelected(f, &seen) == 8);
  REQUIRE(f.cluster.runUntil([&] { return f.bound(gang) == 8; }));
  // Each claim's volume was asked for on the node its pod went to; 16 GPUs: one rack.
  std::set<std::string> nodes;
  for (const std::string& write : f.api->volume_writes) {
    const std::vector<std::string> w = absl::StrSplit(write, ' ');
    REQUIRE(w.size() == 3);
    const std::string pod = w[1].substr(std::string("ml/data-").size());
    CHECK(f.nodeOf(pod) == w[2]);
    nodes.insert(w[2]);
  }
  CHECK((nodes == std::set<std::string>{"n1", "n2"} || nodes == std::set<std::string>{"n3", "n4"}));
  // Every volume write came before the first bind.
  auto first_bind = std::find_if(f.api->log.begin(), f.api->log.end(),
                                 [](const std::string& l) { return l.starts_with("bind "); });
  CHECK(std::count_if(f.api->log.begin(), first_bind, [](const std::string& l) {
          return l.starts_with("selected-node ");
        }) == 8);
}

TEST_CASE("a gang with such claims that cannot fit asks for no volume at all",
          "[scheduler][volumes]") {
  Fixture f;
  racks(f);
  f.cluster.put("storageclasses", testing::storageClassJson("fast", "WaitForFirstConsumer",
                                                            "csi.example.com"));
  for (int i = 0; i < 8; ++i) {
    const std::string w = "w" + std::to_string(i);
    f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("data-" + w, "fast"));
    f.cluster.put("pods", podJson(w).gpus(8).gang("huge", 8).claim("data-" + w));
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("w0").empty(); }));
  CHECK_THAT(f.scheduledCondition("w0"),
             Catch::Contains("gang ml/huge needs 8 pods × 8 nvidia.com/gpu, 1 cpu, 1Gi memory; "
                             "the cluster can hold 4"));
  for (int i = 0; i < 3; ++i) {
    f.afterBackoff();
    f.cluster.settle();
  }
  CHECK(f.api->volume_writes.empty());
  CHECK(f.api->binds.empty());
}

TEST_CASE("a claim's class decides where it can be provisioned, and existing volumes are bound "
          "by claimRef, smallest first", "[scheduler][volumes]") {
  Fixture f;
  racks(f);
  // Provisioned only where allowedTopologies says: n3.
  f.cluster.put("storageclasses", testing::storageClassJson("zonal", "WaitForFirstConsumer",
                                                            "csi.example.com", {"n3"}));
  f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("zonal-data", "zonal"));
  f.cluster.put("pods", podJson("zonal").gpus(1).claim("zonal-data"));
  // Existing local volumes only: two on n2 (the smaller one is enough), one too small on n1.
  f.cluster.put("storageclasses", testing::storageClassJson("local", "WaitForFirstConsumer",
                                                            "kubernetes.io/no-provisioner"));
  f.cluster.put("persistentvolumes", testing::freeVolumeJson("local-n1", "local", "5Gi", {"n1"}));
  f.cluster.put("persistentvolumes", testing::freeVolumeJson("local-n2-big", "local", "500Gi", {"n2"}));
  f.cluster.put("persistentvolumes", testing::freeVolumeJson("local-n2", "local", "20Gi", {"n2"}));
  f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("scratch", "local", "10Gi"));
  f.cluster.put("pods", podJson("local").gpus(1).claim("scratch"));
  // An unknown class, and a class whose claims bind at once (Immediate): both wait.
  f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("lost", "no-such-class"));
  f.cluster.put("pods", podJson("lost").gpus(1).claim("lost"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() == 2; }));
  CHECK_THAT(f.api->volume_writes, Catch::VectorContains(std::string("selected-node ml/zonal-data n3")));
  CHECK_THAT(f.api->volume_writes, Catch::VectorContains(std::string("claimRef local-n2 ml/scratch")));
  // The PersistentVolume controller's part: bind the claims.
  size_t seen = 0;
  CHECK(provisionSelected(f, &seen) == 1);
  f.cluster.put("persistentvolumeclaims", testing::claimJson("scratch", true));
  f.cluster.edit("persistentvolumeclaims", "ml", "scratch", [](rapidjson::Document& d) {
    d["spec"]["volumeName"].SetString("local-n2");
  });
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("zonal").empty() && !f.nodeOf("local").empty(); }));
  CHECK(f.nodeOf("zonal") == "n3");
  CHECK(f.nodeOf("local") == "n2");
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("lost").empty(); }));
  CHECK(f.scheduledCondition("lost") ==
        "Unschedulable: storageclass.storage.k8s.io \"no-such-class\" not found");
  // Existing volumes all too small or elsewhere: no node will do, in kube-scheduler's words.
  f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("huge", "local", "1Ti"));
  f.cluster.put("pods", podJson("huge").gpus(1).claim("huge"));
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("huge").empty(); }));
  CHECK(f.scheduledCondition("huge") ==
        "Unschedulable: 0/4 nodes are available: 4 node(s) didn't find available persistent "
        "volumes to bind.");
}

TEST_CASE("a gang on local volumes takes no more members on a node than it has volumes for",
          "[scheduler][volumes]") {
  Fixture f;
  racks(f);
  // Two local volumes per node; 8 one-GPU members would pack onto one node without them.
  f.cluster.put("storageclasses", testing::storageClassJson("local", "WaitForFirstConsumer",
                                                            "kubernetes.io/no-provisioner"));
  for (const std::string n : {"n1", "n2", "n3", "n4"})
    for (const std::string d : {"a", "b"})
      f.cluster.put("persistentvolumes", testing::freeVolumeJson(n + "-" + d, "local", "100Gi", {n}));
  std::vector<std::string> gang;
  for (int i = 0; i < 8; ++i) {
    const std::string w = "w" + std::to_string(i);
    gang.push_back(w);
    f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("scratch-" + w, "local"));
    f.cluster.put("pods", podJson(w).gpus(1).gang("train", 8).claim("scratch-" + w));
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() == 8; }));
  // Each claim got its own volume, on the node of its pod's assignment, two per node.
  std::set<std::string> volumes;
  std::map<std::string, int> per_node;
  for (const std::string& write : f.api->volume_writes) {
    const std::vector<std::string> w = absl::StrSplit(write, ' ');
    REQUIRE(w.size() == 3);
    CHECK(w[0] == "claimRef");
    volumes.insert(w[1]);
    ++per_node[w[1].substr(0, 2)];
  }
  CHECK(volumes.size() == 8);
  for (const auto& [node, count] : per_node) CHECK(count == 2);
  // The PersistentVolume controller binds each claim to its volume; then the pods bind there.
  for (const std::string& write : f.api->volume_writes) {
    const std::vector<std::string> w = absl::StrSplit(write, ' ');
    const std::string claim = w[2].substr(3);
    f.cluster.put("persistentvolumeclaims", testing::claimJson(claim, true));
    f.cluster.edit("persistentvolumeclaims", "ml", claim, [&](rapidjson::Document& d) {
      d["spec"]["volumeName"].SetString(w[1].c_str(), d.GetAllocator());
    });
    f.cluster.edit("persistentvolumes", "", w[1], [](rapidjson::Document& d) {
      d["status"]["phase"].SetString("Bound");
    });
  }
  REQUIRE(f.cluster.runUntil([&] { return f.bound(gang) == 8; }));
  for (const std::string& write : f.api->volume_writes) {
    const std::vector<std::string> w = absl::StrSplit(write, ' ');
    CHECK(f.nodeOf(w[2].substr(std::string("ml/scratch-").size())) == w[1].substr(0, 2));
  }
}

TEST_CASE("volumes not bound in time are withdrawn and the gang is tried again",
          "[scheduler][volumes]") {
  Fixture f;
  racks(f);
  f.cluster.put("storageclasses", testing::storageClassJson("fast", "WaitForFirstConsumer",
                                                            "csi.example.com"));
  for (const std::string w : {"w0", "w1"}) {
    f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("data-" + w, "fast"));
    f.cluster.put("pods", podJson(w).gpus(8).gang("pair", 2).claim("data-" + w));
  }
  SchedulerConfig c = config();
  c.volume_binding_timeout_seconds = 30;
  f.start(c);
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() == 2; }));
  // No provisioner answers.
  f.clock.advance(absl::Seconds(31));
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() >= 4; }));
  CHECK_THAT(f.api->volume_writes, Catch::VectorContains(std::string("selected-node ml/data-w0 ")));
  CHECK_THAT(f.api->volume_writes, Catch::VectorContains(std::string("selected-node ml/data-w1 ")));
  REQUIRE(f.cluster.runUntil([&] { return f.sink->count("FailedScheduling", "ml/w0") > 0; }));
  const auto failed = std::find_if(f.sink->created.begin(), f.sink->created.end(),
                                   [](const proto::Event& e) { return e.reason == "FailedScheduling"; });
  CHECK_THAT(failed->message, Catch::Contains("were not bound within 30s"));
  CHECK(f.api->binds.empty());
  // Tried again: asked again, and this time a provisioner answers.
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() >= 6; }));
  size_t seen = 4;
  CHECK(provisionSelected(f, &seen) == 2);
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"w0", "w1"}) == 2; }));
}

TEST_CASE("a pod with an ephemeral volume waits for its claim, and only for one it owns",
          "[scheduler][volumes]") {
  Fixture f;
  racks(f);
  f.cluster.put("storageclasses", testing::storageClassJson("fast", "WaitForFirstConsumer",
                                                            "csi.example.com"));
  f.cluster.put("pods", podJson("eph").gpus(1).ephemeral("scratch"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("eph").empty(); }));
  CHECK(f.scheduledCondition("eph") ==
        "Unschedulable: waiting for ephemeral volume controller to create the "
        "persistentvolumeclaim \"eph-scratch\"");
  // A claim of that name the pod does not own is not its volume.
  f.cluster.put("persistentvolumeclaims", testing::pendingClaimJson("eph-scratch", "fast"));
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("eph").find("pod is not owner") != std::string::npos;
  }));
  CHECK(f.scheduledCondition("eph") ==
        "Unschedulable: PVC ml/eph-scratch was not created for pod ml/eph (pod is not owner)");
  f.cluster.put("persistentvolumeclaims",
                testing::pendingClaimJson("eph-scratch", "fast", "10Gi", "ml", "eph"));
  REQUIRE(f.cluster.runUntil([&] { return f.api->volume_writes.size() == 1; }));
  size_t seen = 0;
  CHECK(provisionSelected(f, &seen) == 1);
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("eph").empty(); }));
}

TEST_CASE("a ReadWriteOncePod claim in use keeps another pod off every node until its user is gone",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("persistentvolumeclaims", testing::claimJson("solo", true, "ml", "ReadWriteOncePod"));
  f.cluster.put("persistentvolumes", testing::volumeJson("solo"));
  f.cluster.put("pods", podJson("owner").gpus(1).claim("solo").boundTo("n1").phase("Running"));
  f.cluster.put("pods", podJson("second").gpus(1).claim("solo"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("second").empty(); }));
  CHECK_THAT(f.scheduledCondition("second"),
             Catch::Contains("4 node(s) unavailable due to PersistentVolumeClaim with "
                             "ReadWriteOncePod access mode already in-use by another pod"));
  CHECK(f.nodeOf("second").empty());
  f.cluster.remove("pods", "ml", "owner");
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("second").empty(); }));
  // Two members of one gang on one such claim can never both run: refused, with why.
  f.cluster.put("pods", podJson("g0").gpus(1).claim("shared").gang("pair", 2));
  f.cluster.put("pods", podJson("g1").gpus(1).claim("shared").gang("pair", 2));
  f.cluster.put("persistentvolumeclaims", testing::claimJson("shared", true, "ml", "ReadWriteOncePod"));
  f.cluster.put("persistentvolumes", testing::volumeJson("shared"));
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("g0").find("both use PersistentVolumeClaim ml/shared") != std::string::npos;
  }));
  CHECK(f.bound({"g0", "g1"}) == 0);
}

TEST_CASE("each gang member goes where its bound volume can be reached, or the gang waits whole",
          "[scheduler]") {
  Fixture f;
  racks(f);
  // Local volumes: w0's data lives on n2, w1's on n4 (another rack).
  for (const auto& [claim, node] : {std::pair{"data-w0", "n2"}, std::pair{"data-w1", "n4"}}) {
    f.cluster.put("persistentvolumeclaims", testing::claimJson(claim, true));
    f.cluster.put("persistentvolumes", testing::volumeJson(claim, {node}));
  }
  f.cluster.put("pods", podJson("w0").gpus(1).gang("g", 2).claim("data-w0"));
  f.cluster.put("pods", podJson("w1").gpus(1).gang("g", 2).claim("data-w1"));
  // A third pod whose volume lives on a node that is gone.
  f.cluster.put("persistentvolumeclaims", testing::claimJson("data-solo", true));
  f.cluster.put("persistentvolumes", testing::volumeJson("data-solo", {"n9"}));
  f.cluster.put("pods", podJson("solo").gpus(1).claim("data-solo"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"w0", "w1"}) == 2; }));
  CHECK(f.nodeOf("w0") == "n2");
  CHECK(f.nodeOf("w1") == "n4");
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("solo").empty(); }));
  CHECK(f.scheduledCondition("solo") ==
        "Unschedulable: 0/4 nodes are available: 4 node(s) had volume node affinity conflict.");
  CHECK(f.nodeOf("solo").empty());
}

TEST_CASE("a pod whose bound claim's volume is missing waits, and is placed when it appears",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("persistentvolumeclaims", testing::claimJson("data", true));
  f.cluster.put("pods", podJson("reader").gpus(1).claim("data"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("reader").empty(); }));
  CHECK(f.scheduledCondition("reader") ==
        "Unschedulable: 0/4 nodes are available: 4 PersistentVolume pv-data of claim data not "
        "found.");
  f.cluster.put("persistentvolumes", testing::volumeJson("data", {"n3"}));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("reader").empty(); }));
  CHECK(f.nodeOf("reader") == "n3");
}

TEST_CASE("PodGroup status follows its pods from events, in few writes", "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("podgroups", podGroupJson("g", 3));
  for (const auto& p : {"w0", "w1", "w2"}) f.cluster.put("pods", podJson(p).gpus(2).podGroup("g"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] {
    return !f.api->group_statuses.empty() && f.api->group_statuses.back() == "ml/g Scheduled 3";
  }));
  CHECK(f.api->group_statuses.size() <= 3);
  // A pod running changes the phase; nothing polls.
  const size_t writes = f.api->group_statuses.size();
  for (const auto& p : {"w0", "w1", "w2"})
    f.cluster.edit("pods", "ml", p, [](rapidjson::Document& d) {
      d["status"]["phase"].SetString("Running");
    });
  REQUIRE(f.cluster.runUntil([&] { return f.api->group_statuses.back() == "ml/g Running 3"; }));
  CHECK(f.api->group_statuses.size() <= writes + 2);
}

TEST_CASE("pods naming 60 made-up resources do not use up what the scheduler can track",
          "[scheduler][resources]") {
  // Before, each name a pod requested took one of 24 slots for good: after ~20 such names every
  // new one (a new node type's, nvidia.com/gpu's on a fresh process) was refused cluster-wide.
  Fixture f;
  racks(f);
  std::vector<std::string> junk;
  for (int i = 0; i < 30; ++i) {
    junk.push_back("junk-" + std::to_string(i));
    f.cluster.put("pods", podJson(junk.back())
                              .request("example.com/junk-" + std::to_string(2 * i), "1")
                              .request("example.com/junk-" + std::to_string(2 * i + 1), "1"));
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] {
    return std::all_of(junk.begin(), junk.end(),
                       [&](const std::string& p) { return !f.scheduledCondition(p).empty(); });
  }));
  for (int i = 0; i < 60; ++i) {  // requests intern nothing
    CHECK_FALSE(findResource("example.com/junk-" + std::to_string(i)).has_value());
  }
  CHECK(f.scheduledCondition("junk-0") ==
        "Unschedulable: 0/4 nodes are available: 4 Insufficient example.com/junk-0, 4 Insufficient "
        "example.com/junk-1.");
  // A new kind of node and its resource, and GPUs, are still placed.
  f.cluster.put("nodes", nodeJson("fpga1").rack("r3").resource("example.com/fpga", "4"));
  f.cluster.put("pods", podJson("fpga-user").gpus(0).request("example.com/fpga", "2"));
  f.cluster.put("pods", podJson("gpu-user").gpus(2));
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"fpga-user", "gpu-user"}) == 2; }));
  CHECK(f.nodeOf("fpga-user") == "fpga1");
  CHECK(f.bound(junk) == 0);
}

TEST_CASE("a pod asking for a resource no node has yet is placed once a node brings it",
          "[scheduler][resources]") {
  Fixture f;
  racks(f);
  f.cluster.put("pods", podJson("early").gpus(0).request("example.com/late-accelerator", "1"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("early") ==
           "Unschedulable: 0/4 nodes are available: 4 Insufficient example.com/late-accelerator.";
  }));
  f.cluster.put("nodes", nodeJson("n9").rack("r3").resource("example.com/late-accelerator", "1"));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return f.nodeOf("early") == "n9"; }));
}

TEST_CASE("a gang past its schedule timeout gets a GangScheduleTimeout Event, not before",
          "[scheduler]") {
  Fixture f;
  racks(f);  // 4 nodes of 8 GPUs: a gang of 5 × 8 GPUs never fits
  const std::vector<std::string> gang = {"t0", "t1", "t2", "t3", "t4"};
  for (const auto& p : gang) {
    f.cluster.put("pods", podJson(p).gpus(8).gang("big", 5).annotation(
                              "gang-scheduling.preferred.jp/gang-schedule-timeout-seconds", "30"));
  }
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return f.sink->count("FailedScheduling") > 0; }));
  f.clock.advance(absl::Seconds(20));
  f.scheduler->wake();
  for (int i = 0; i < 5; ++i) f.cluster.settle();
  CHECK(f.sink->count("GangScheduleTimeout") == 0);
  f.clock.advance(absl::Seconds(11));  // 31 s after the gang was first seen
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] { return f.sink->count("GangScheduleTimeout") > 0; }));
  CHECK(f.sink->count("GangScheduleTimeout", "ml/t0") == 1);
  const proto::Event& e = f.sink->created.back();
  CHECK(e.type == "Warning");
  CHECK(e.message.rfind("gang ml/big has waited longer than its 30s schedule timeout: ", 0) == 0);
  CHECK(f.bound(gang) == 0);
}

TEST_CASE("a gang whose binds keep failing backs off longer each time, also after its rollback",
          "[scheduler]") {
  // Before, every placement reset the gang's failures, so a ParallelJob whose worker could never
  // be bound (its launcher rolled back and recreated by the job engine) was retried every second.
  Fixture f;
  racks(f);
  SchedulerConfig c = growingBackoff();
  for (const auto& p : {"w0", "w1"}) f.cluster.put("pods", podJson(p).gpus(4).gang("g", 2).controlledBy("j"));
  f.refuseBindsOf("ml/w1");
  auto w1Binds = [&] { return f.bindsOf("ml/w1"); };
  f.start(c);
  REQUIRE(f.cluster.runUntil([&] { return w1Binds() == 1; }));
  // 40 s in steps of 0.25 s; the job engine's part: an evicted member is created again.
  std::vector<double> at = {0};
  int replacements = 0;
  for (int step = 1; step <= 160; ++step) {
    f.tick();
    if (!f.exists("w0") && replacements == 0) {
      f.cluster.put("pods", podJson("w0b").gpus(4).gang("g", 2).controlledBy("j"));
      ++replacements;
    }
    while (static_cast<int>(at.size()) < w1Binds()) at.push_back(step * 0.25);
  }
  CHECK(replacements == 1);      // rolled back after 3 failed binds in a row
  REQUIRE(at.size() >= 4);
  CHECK(at.size() <= 7);         // 1 + 2 + 4 + 8 + 16 s of backoff fill the 40 s: not 40 tries
  for (size_t i = 2; i < at.size(); ++i) CHECK(at[i] - at[i - 1] >= at[i - 1] - at[i - 2]);
  CHECK(at[3] - at[2] >= 3.5);   // the 4th try, after the rollback, waited for its 4 s
  CHECK(f.nodeOf("w1").empty());
}

TEST_CASE("a pod naming a PodGroup that does not exist says so at once", "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("pods", podJson("orphan").gpus(1).podGroup("pg-missing"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("orphan").empty(); }));
  CHECK(f.scheduledCondition("orphan") ==
        "Unschedulable: gang ml/pg-missing is waiting for its PodGroup ml/pg-missing "
        "(scheduling.x-k8s.io/v1alpha1) to exist");
  f.cluster.put("podgroups", podGroupJson("pg-missing", 1));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("orphan").empty(); }));
}

// The PodGroupScheduled condition of a scheduling.k8s.io/v1alpha2 PodGroup: "Status Reason: message".
std::string podGroupScheduled(Fixture& f, const std::string& group) {
  auto json = f.cluster.get("workloadpodgroups", "ml", group);
  if (!json) return "";
  rapidjson::Document d;
  d.Parse(json->c_str());
  if (!d.HasMember("status") || !d["status"].HasMember("conditions")) return "";
  for (const auto& c : d["status"]["conditions"].GetArray())
    if (std::string(c["type"].GetString()) == "PodGroupScheduled")
      return std::string(c["status"].GetString()) + " " + c["reason"].GetString() + ": " +
             c["message"].GetString();
  return "";
}

TEST_CASE("a gang in a scheduling.k8s.io/v1alpha2 PodGroup waits for it, binds whole in its "
          "topology domain, and the PodGroup says so",
          "[scheduler]") {
  Fixture f;
  racks(f);
  // Two pods of 8 GPUs (a node each) that the PodGroup's schedulingConstraints.topology keeps in
  // one rack; the gang of three below does not fit in any rack.
  for (const char* p : {"u0", "u1"}) f.cluster.put("pods", podJson(p).gpus(8).schedulingGroup("upstream"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("u0").empty(); }));
  CHECK(f.scheduledCondition("u0") ==
        "Unschedulable: gang ml/upstream is waiting for its PodGroup ml/upstream "
        "(scheduling.k8s.io/v1alpha2) to exist");
  CHECK(f.bound({"u0", "u1"}) == 0);

  f.cluster.put("workloadpodgroups", workloadPodGroupJson("upstream", 2, "muster.dev/rack"));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"u0", "u1"}) == 2; }));
  // One rack: n1+n2 or n3+n4.
  std::set<std::string> nodes = {f.nodeOf("u0"), f.nodeOf("u1")};
  CHECK((nodes == std::set<std::string>{"n1", "n2"} || nodes == std::set<std::string>{"n3", "n4"}));
  REQUIRE(f.cluster.runUntil([&] { return !podGroupScheduled(f, "upstream").empty(); }));
  CHECK(podGroupScheduled(f, "upstream").rfind("True Scheduled: 2 pods bound (muster.dev/rack=", 0) == 0);

  // A gang that cannot fit: False, Unschedulable, with kube-scheduler's words.
  f.cluster.put("workloadpodgroups", workloadPodGroupJson("big", 3, "muster.dev/rack"));
  for (const char* p : {"b0", "b1", "b2"}) f.cluster.put("pods", podJson(p).gpus(8).schedulingGroup("big"));
  REQUIRE(f.cluster.runUntil([&] { return !podGroupScheduled(f, "big").empty(); }));
  CHECK(podGroupScheduled(f, "big").rfind("False Unschedulable: ", 0) == 0);
  CHECK(f.bound({"b0", "b1", "b2"}) == 0);
  const size_t writes = f.api->workload_conditions.size();
  for (int i = 0; i < 8; ++i) f.tick();  // retries with the same verdict write nothing
  CHECK(f.api->workload_conditions.size() == writes);
}

TEST_CASE("a basic v1alpha2 PodGroup places its pods one by one, even once they waited for it",
          "[scheduler]") {
  Fixture f;
  racks(f);
  f.cluster.put("pods", podJson("s0").gpus(8).schedulingGroup("serve"));
  f.cluster.put("pods", podJson("s1").gpus(8).schedulingGroup("serve"));
  f.cluster.put("pods", podJson("s2").gpus(9).schedulingGroup("serve"));  // fits nowhere
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.scheduledCondition("s0").empty(); }));
  CHECK(f.bound({"s0", "s1"}) == 0);
  f.cluster.put("workloadpodgroups", workloadPodGroupJson("serve", 0));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"s0", "s1"}) == 2; }));
  CHECK(f.nodeOf("s2").empty());
  CHECK(f.api->workload_conditions.empty());  // no PodGroupScheduled for basic pods
}

TEST_CASE("a gang recreated under the same names after its rollback is retried as a new one",
          "[scheduler]") {
  // As tests/chaos/bad_input.py does it: each round creates the same two pods, one of which is
  // always refused, and deletes them after the rollback. Nothing of a round's gang (failures,
  // binds in a row) may carry over into the next.
  Fixture f;
  racks(f);
  SchedulerConfig c = growingBackoff();
  f.refuseBindsOf("ml/r1");
  auto r1Binds = [&] { return f.bindsOf("ml/r1"); };
  f.start(c);
  for (int round = 0; round < 3; ++round) {
    const long before = r1Binds();
    f.cluster.put("pods", podJson("r0").gpus(4).gang("g-refused", 2));
    f.cluster.put("pods", podJson("r1").gpus(4).gang("g-refused", 2));
    for (int i = 0; i < 120 && r1Binds() < before + 3; ++i) f.tick();  // 30 s
    INFO("round " << round);
    CHECK(r1Binds() >= before + 3);  // 1 + 2 s of backoff: three tries, then the rollback
    f.cluster.remove("pods", "ml", "r0");
    f.cluster.remove("pods", "ml", "r1");
    for (int i = 0; i < 8; ++i) f.tick();
  }
}

}  // namespace
}  // namespace muster::scheduler

namespace muster::scheduler {
namespace {

// --- preemption ---------------------------------------------------------------------------------

// Rack r1 (n1, n2) full with the low-priority gang "low" (a Job's pods, one per node).
void fullOfLowPriority(Fixture& f) {
  f.cluster.put("nodes", nodeJson("n1").rack("r1"));
  f.cluster.put("nodes", nodeJson("n2").rack("r1"));
  f.cluster.put("pods", podJson("low-0").gpus(8).gang("low", 2).priority(1).controlledBy("low").boundTo("n1"));
  f.cluster.put("pods", podJson("low-1").gpus(8).gang("low", 2).priority(1).controlledBy("low").boundTo("n2"));
}

TEST_CASE("a high-priority pod preempts a whole lower-priority gang: both marked, then both "
          "evicted, the room held for it, then it is bound there", "[scheduler][preemption]") {
  Fixture f;
  fullOfLowPriority(f);
  f.cluster.put("pods", podJson("big").gpus(8).priority(100));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("low-0") && !f.exists("low-1"); }));
  // Every mark before any eviction: a crash in between leaves marks, never an unmarked gang
  // partly evicted.
  const size_t last_mark = std::max(f.indexOf(f.api->log, "condition ml/low-0 muster.dev/Preempted=True"),
                                    f.indexOf(f.api->log, "condition ml/low-1 muster.dev/Preempted=True"));
  const size_t first_evict = std::min(f.indexOf(f.api->log, "evict ml/low-0"),
                                      f.indexOf(f.api->log, "evict ml/low-1"));
  REQUIRE(last_mark < f.api->log.size());
  CHECK(last_mark < first_evict);
  REQUIRE(f.api->nominations.size() == 1);
  const std::string nominated = f.api->nominations[0].substr(std::string("ml/big ").size());
  CHECK((nominated == "n1" || nominated == "n2"));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("big").empty(); }));
  CHECK(f.nodeOf("big") == nominated);
  f.cluster.settle();
  CHECK(f.sink->count("Preempted", "ml/low-0") == 1);
  CHECK(f.sink->count("Preempted", "ml/low-1") == 1);
  CHECK(f.sink->count("Preempting", "ml/big") == 1);
  CHECK(f.api->evictions.size() == 2);
}

TEST_CASE("equal priority never preempts, nor a pod whose preemptionPolicy is Never",
          "[scheduler][preemption]") {
  Fixture f;
  fullOfLowPriority(f);
  f.cluster.put("pods", podJson("peer").gpus(8).priority(1));
  f.cluster.put("pods", podJson("polite").gpus(8).priority(100).preemptionPolicy("Never"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] {
    return f.scheduledCondition("polite").find("preemptionPolicy is Never") != std::string::npos;
  }));
  for (int i = 0; i < 3; ++i) {
    f.afterBackoff();
    f.cluster.settle();
  }
  CHECK(f.api->evictions.empty());
  CHECK(f.api->nominations.empty());
  CHECK(f.exists("low-0"));
  CHECK(f.exists("low-1"));
}

TEST_CASE("a gang a crash left partly marked is marked and evicted whole when the scheduler "
          "starts again", "[scheduler][preemption]") {
  Fixture f;
  f.cluster.put("nodes", nodeJson("n1").rack("r1"));
  f.cluster.put("nodes", nodeJson("n2").rack("r1"));
  // The last life marked low-0 and died before marking low-1 or evicting anything.
  f.cluster.put("pods", podJson("low-0").gpus(8).gang("low", 2).priority(1).controlledBy("low")
                            .boundTo("n1").markedPreempted("Preempted by ml/big"));
  f.cluster.put("pods", podJson("low-1").gpus(8).gang("low", 2).priority(1).controlledBy("low").boundTo("n2"));
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("low-0") && !f.exists("low-1"); }));
  CHECK(f.indexOf(f.api->log, "condition ml/low-1 muster.dev/Preempted=True") <
        f.indexOf(f.api->log, "evict ml/low-1"));
}

TEST_CASE("an eviction refused for a preempted pod is sent again until its gang is gone",
          "[scheduler][preemption]") {
  Fixture f;
  fullOfLowPriority(f);
  f.cluster.put("pods", podJson("big").gpus(8).priority(100));
  f.api->on_evict = [](const std::string& pod, int) {
    static int refusals = 0;
    return pod == "ml/low-1" && refusals++ < 2
               ? absl::ResourceExhaustedError("Cannot evict pod as it would violate the pod's disruption budget.")
               : absl::OkStatus();
  };
  f.start();
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("low-0"); }));
  f.cluster.settle();
  CHECK(f.exists("low-1"));
  for (int i = 0; i < 12 && f.exists("low-1"); ++i) {
    f.clock.advance(absl::Seconds(6));
    f.scheduler->wake();
    f.cluster.settle();
  }
  CHECK_FALSE(f.exists("low-1"));
  CHECK(std::count(f.api->evictions.begin(), f.api->evictions.end(), "ml/low-1") == 3);
}

}  // namespace
}  // namespace muster::scheduler

namespace muster::scheduler {
namespace {

TEST_CASE("a gang preempted once is not chosen again within the cooldown, and is after it",
          "[scheduler][preemption]") {
  Fixture f;
  fullOfLowPriority(f);
  // big1 takes both nodes of the rack from "low".
  for (const char* p : {"big1-0", "big1-1"}) f.cluster.put("pods", podJson(p).gpus(8).gang("big1", 2).priority(100));
  SchedulerConfig c = config();
  c.preemption_victim_cooldown_seconds = 600;
  f.start(c);
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("low-0") && !f.exists("low-1"); }));
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"big1-0", "big1-1"}) == 2; }));
  // Its controller recreates "low"; two more nodes come and it runs there.
  f.cluster.put("nodes", nodeJson("n3").rack("r2"));
  f.cluster.put("nodes", nodeJson("n4").rack("r2"));
  for (const char* p : {"low-0", "low-1"})
    f.cluster.put("pods", podJson(p).gpus(8).gang("low", 2).priority(1).controlledBy("low"));
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"low-0", "low-1"}) == 2; }));
  // A second high-priority pod fits only where "low" runs: not within the cooldown.
  f.cluster.put("pods", podJson("big2").gpus(8).priority(100));
  for (int i = 0; i < 5; ++i) {
    f.afterBackoff();
    f.cluster.settle();
  }
  CHECK(f.api->evictions.size() == 2);  // low's first two only
  CHECK(f.nodeOf("big2").empty());
  CHECK(f.bound({"low-0", "low-1"}) == 2);
  // Past it, "low" is a victim again, whole.
  f.clock.advance(absl::Seconds(601));
  f.scheduler->wake();
  REQUIRE(f.cluster.runUntil([&] { return !f.exists("low-0") && !f.exists("low-1"); }));
  CHECK(f.api->evictions.size() == 4);
  f.afterBackoff();
  REQUIRE(f.cluster.runUntil([&] { return !f.nodeOf("big2").empty(); }));
}

}  // namespace
}  // namespace muster::scheduler

namespace muster::scheduler {
namespace {

TEST_CASE("pods asking for a fraction of a GPU get the GPU's index written before their Binding",
          "[scheduler][fraction]") {
  Fixture f;
  f.cluster.put("nodes", testing::nodeJson("solo").gpus(2));
  for (const char* p : {"f0", "f1", "f2"}) f.cluster.put("pods", podJson(p).gpus(0).annotation("muster.dev/gpu-fraction", "0.4"));
  f.start();
  const bool all_bound = f.cluster.runUntil([&] { return f.bound({"f0", "f1", "f2"}) == 3; });
  INFO(absl::StrJoin(f.api->log, "\n") << "\n" << f.scheduledCondition("f0"));
  REQUIRE(all_bound);
  f.cluster.settle();
  std::map<std::string, int> per_gpu;  // index → pods
  for (const char* p : {"f0", "f1", "f2"}) {
    rapidjson::Document d;
    d.Parse(f.cluster.get("pods", "ml", p)->c_str());
    const std::string index = d["metadata"]["annotations"]["muster.dev/gpu-index"].GetString();
    ++per_gpu[index];
    // Annotated first, then bound.
    const auto& log = f.api->log;
    auto annotated = std::find(log.begin(), log.end(), absl::StrCat("annotate ml/", p, " muster.dev/gpu-index=", index));
    auto bound = std::find_if(log.begin(), log.end(), [&](const std::string& l) { return l.rfind(absl::StrCat("bind ml/", p, " "), 0) == 0; });
    REQUIRE(annotated != log.end());
    REQUIRE(bound != log.end());
    CHECK(annotated < bound);
  }
  // 0.4 + 0.4 on one GPU, the third on the other.
  CHECK(per_gpu == std::map<std::string, int>{{"0", 2}, {"1", 1}});
  // A pod that asks for too much is refused with the reason, and the rest keep being served.
  f.cluster.put("pods", podJson("bad").gpus(0).annotation("muster.dev/gpu-fraction", "1.5"));
  f.cluster.put("pods", podJson("f3").gpus(0).annotation("muster.dev/gpu-fraction", "0.6"));
  REQUIRE(f.cluster.runUntil([&] { return f.bound({"f3"}) == 1; }));
  REQUIRE(f.cluster.runUntil([&] { return f.scheduledCondition("bad").find("gpu-fraction") != std::string::npos; }));
}

}  // namespace
}  // namespace muster::scheduler
