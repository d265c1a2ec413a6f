#include "scheduler/spread.h"

#include <catch2/catch.hpp>
#include <set>

#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;

constexpr char kHost[] = "kubernetes.io/hostname";
constexpr char kZone[] = "topology.kubernetes.io/zone";

// Zone a: a1, a2; zone b: b1. 8 GPUs each.
ClusterCache zones() {
  ClusterCache cache({});
  cache.addNode(node("a1").gpus(8).label(kZone, "a"));
  cache.addNode(node("a2").gpus(8).label(kZone, "a"));
  cache.addNode(node("b1").gpus(8).label(kZone, "b"));
  return cache;
}

std::map<std::string, std::string> verdicts(const testing::PodBuilder& p, const ClusterCache& cache) {
  PodInfoPtr info = p.info();
  std::optional<SpreadFilter> f = SpreadFilter::prepare(*info, cache);
  std::map<std::string, std::string> out;
  for (NodeId id : cache.topology().order) {
    Status s = f ? f->check(cache.node(id)) : Status::success();
    out[cache.node(id).name] = s.ok() ? "ok" : s.reasons.front();
  }
  return out;
}

TEST_CASE("DoNotSchedule: count + self - global minimum may not exceed maxSkew", "[spread]") {
  ClusterCache cache = zones();
  cache.addPod(pod("w0").label("app", "web").onNode("a1"));
  auto web = pod("w1").label("app", "web").spread(kZone, 1, "DoNotSchedule", "app", "web");
  // Zone a has 1, zone b 0: a → 1+1-0 = 2 > 1; b → 0+1-0 = 1.
  CHECK(verdicts(web, cache) == std::map<std::string, std::string>{
                                    {"a1", std::string(kReasonSpread)},
                                    {"a2", std::string(kReasonSpread)}, {"b1", "ok"}});
  // maxSkew 2 allows zone a.
  CHECK(verdicts(pod("w1").label("app", "web").spread(kZone, 2, "DoNotSchedule", "app", "web"), cache)
            .at("a2") == "ok");
  // A pod the selector does not match itself adds nothing: 1+0-0 = 1.
  CHECK(verdicts(pod("x").spread(kZone, 1, "DoNotSchedule", "app", "web"), cache).at("a1") == "ok");
  // Another namespace's pods are not counted; terminating pods are not counted.
  ClusterCache other = zones();
  other.addPod(pod("w0").ns("elsewhere").label("app", "web").onNode("a1"));
  other.addPod(pod("w9").label("app", "web").deleting().onNode("a2"));
  CHECK(verdicts(web, other).at("a1") == "ok");
}

TEST_CASE("per host, a node without the key, minDomains, and the inclusion policies", "[spread]") {
  ClusterCache cache = zones();
  cache.addNode(node("bare").gpus(8));  // no zone label
  cache.addPod(pod("w0").label("app", "web").onNode("a1"));
  auto host = verdicts(pod("w1").label("app", "web").spread(kHost, 1, "DoNotSchedule", "app", "web"), cache);
  CHECK(host.at("a1") == kReasonSpread);
  CHECK(host.at("a2") == "ok");
  CHECK(verdicts(pod("w1").label("app", "web").spread(kZone, 5, "DoNotSchedule", "app", "web"), cache)
            .at("bare") == kReasonSpreadLabel);
  // minDomains 3 with two zones: the global minimum counts as 0 (b has 0 anyway: same verdicts),
  // and once b has one too, zone a with 1 still passes at maxSkew 1 only because the minimum is 0.
  cache.addPod(pod("w2").label("app", "web").onNode("b1"));
  CHECK(verdicts(pod("w1").label("app", "web").spread(kZone, 1, "DoNotSchedule", "app", "web"), cache)
            .at("a2") == "ok");  // 1+1-1
  cache.addPod(pod("w3").label("app", "web").onNode("a2"));  // a: 2, b: 1
  CHECK(verdicts(pod("w1").label("app", "web").spread(kZone, 1, "DoNotSchedule", "app", "web"), cache)
            .at("a1") == kReasonSpread);  // 2+1-1
  CHECK(verdicts(pod("w1").label("app", "web").spread(kZone, 2, "DoNotSchedule", "app", "web", 3), cache)
            .at("a1") == kReasonSpread);  // 2+1-0 = 3 > 2: fewer domains than minDomains
  CHECK(verdicts(pod("w1").label("app", "web").spread(kZone, 2, "DoNotSchedule", "app", "web"), cache)
            .at("a1") == "ok");           // 2+1-1 = 2
  // nodeAffinityPolicy Honor (default): a nodeSelector to zone a leaves zone b out of the
  // domains, so the minimum is zone a's own count.
  auto pinned = pod("w1").label("app", "web").nodeSelector(kZone, "a")
                    .spread(kZone, 1, "DoNotSchedule", "app", "web");
  CHECK(verdicts(pinned, cache).at("a1") == "ok");  // 2+1-2
  pinned.lastSpread().node_affinity_policy = "Ignore";
  CHECK(verdicts(pinned, cache).at("a1") == kReasonSpread);  // 2+1-1
  // nodeTaintsPolicy Honor: a tainted zone the pod does not tolerate is no domain.
  cache.updateNode(node("b1").gpus(8).label(kZone, "b").taint("gpu", "busy", "NoSchedule"));
  auto honest = pod("w1").label("app", "web").spread(kZone, 1, "DoNotSchedule", "app", "web");
  CHECK(verdicts(honest, cache).at("a1") == kReasonSpread);  // Ignore: b counts, min 1
  honest.lastSpread().node_taints_policy = "Honor";
  CHECK(verdicts(honest, cache).at("a1") == "ok");  // only zone a: min 2
}

TEST_CASE("matchLabelKeys narrows the selector to the pod's own values", "[spread]") {
  ClusterCache cache = zones();
  cache.addPod(pod("old").label("app", "web").label("rev", "1").onNode("a1"));
  auto rev2 = pod("new").label("app", "web").label("rev", "2").spread(kZone, 1, "DoNotSchedule", "app", "web");
  CHECK(verdicts(rev2, cache).at("a1") == kReasonSpread);
  rev2.lastSpread().match_label_keys = {"rev"};
  CHECK(verdicts(rev2, cache).at("a1") == "ok");  // rev 1 is not counted
}

GangPlacement placed(const PlacementResult& r) {
  if (const Unschedulable* u = std::get_if<Unschedulable>(&r)) FAIL("unschedulable: " << u->message);
  return std::get<GangPlacement>(r);
}

TEST_CASE("ScheduleAnyway prefers the emptier domain over packing, and never refuses", "[spread]") {
  ClusterCache cache = zones();
  cache.addPod(pod("w0").label("app", "web").gpus(2).onNode("a1"));
  auto lone = [&](testing::PodBuilder b) {
    GangRequest r;
    r.key = GangKey{"ml", "lone", true};
    r.members.push_back(b.info());
    return placed(place(r, cache)).assignments.at(0).node;
  };
  CHECK(lone(pod("plain").label("app", "web").gpus(1)) == "a1");  // packing
  CHECK(lone(pod("soft").label("app", "web").gpus(1).spread(kZone, 1, "ScheduleAnyway", "app", "web")) == "b1");
  // Unsatisfiable as DoNotSchedule when b is full; ScheduleAnyway still places it.
  cache.addPod(pod("fill").gpus(8).onNode("b1"));
  CHECK(lone(pod("soft2").label("app", "web").gpus(1).spread(kZone, 1, "ScheduleAnyway", "app", "web")) != "b1");
}

TEST_CASE("a gang whose members spread over each other is refused, one that spreads from others "
          "is placed", "[spread]") {
  ClusterCache cache = zones();
  cache.addPod(pod("web").label("app", "web").onNode("a1"));
  auto among = [](int i) {
    return pod("m" + std::to_string(i)).gpus(1).gang("g", 2).label("job", "g")
        .spread(kZone, 1, "DoNotSchedule", "job", "g");
  };
  GangRequest r;
  r.key = GangKey{"ml", "g", false};
  r.min_member = 2;
  for (int i = 0; i < 2; ++i) r.members.push_back(among(i).info());
  const PlacementResult refused = place(r, cache);
  REQUIRE(std::holds_alternative<Unschedulable>(refused));
  CHECK_THAT(std::get<Unschedulable>(refused).message,
             Catch::Contains("Muster does not spread a gang's members over domains yet"));
  // Spreading away from the web pods only: both members avoid zone a (2 web pods there).
  cache.addPod(pod("web2").label("app", "web").onNode("a2"));
  GangRequest away;
  away.key = GangKey{"ml", "h", false};
  away.min_member = 2;
  for (int i = 0; i < 2; ++i)
    away.members.push_back(pod("h" + std::to_string(i)).gpus(1).gang("h", 2)
                               .spread(kZone, 1, "DoNotSchedule", "app", "web").info());
  for (const Assignment& a : placed(place(away, cache)).assignments) CHECK(a.node == "b1");
}

}  // namespace
}  // namespace muster::scheduler
