#include "scheduler/spread.h"

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/str_join.h"
#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"
#include "tests/scheduler/placing.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;
using testing::placed;

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

TEST_CASE("default constraints count what the pod's Services and controller select", "[spread]") {
  auto svc = [](const std::string& ns, std::map<std::string, std::string> selector) {
    auto s = std::make_shared<proto::Service>();
    s->meta.namespace_ = ns;
    s->selector = std::move(selector);
    return std::shared_ptr<const proto::Service>(s);
  };
  const proto::Pod web = pod("w").label("app", "web").label("tier", "front").build();
  // A matching Service of the namespace counts; one of another namespace, one that does not
  // match the pod, and one without a selector do not.
  std::optional<proto::LabelSelector> s = defaultSelector(
      web, {svc("ml", {{"app", "web"}}), svc("other", {{"tier", "front"}}), svc("ml", {{"app", "db"}}),
            svc("ml", {})},
      nullptr, nullptr);
  REQUIRE(s.has_value());
  CHECK(s->match_labels == std::map<std::string, std::string>{{"app", "web"}});
  CHECK(s->match_expressions.empty());
  // A ReplicaSet's selector is added as requirements.
  proto::LabelSelector rs;
  rs.match_labels["tier"] = "front";
  s = defaultSelector(web, {svc("ml", {{"app", "web"}})}, nullptr, &rs);
  REQUIRE(s.has_value());
  CHECK(s->matches({{"app", "web"}, {"tier", "front"}}));
  CHECK_FALSE(s->matches({{"app", "web"}}));
  // A ReplicationController's map is merged; nothing selecting the pod: no defaults.
  const std::map<std::string, std::string> rc{{"tier", "front"}};
  CHECK(defaultSelector(web, {}, &rc, nullptr)->match_labels == rc);
  CHECK_FALSE(defaultSelector(web, {svc("ml", {{"app", "db"}})}, nullptr, nullptr).has_value());
}

TEST_CASE("System default constraints prefer fewer matching pods and do not rank down a node "
          "without the zone label", "[spread]") {
  ClusterCache cache = zones();
  cache.addNode(node("x1").gpus(8));  // no zone label
  for (const char* n : {"a1", "a2", "b1"}) cache.addPod(pod(std::string("web-") + n).label("app", "web").onNode(n));
  SchedulerConfig config;
  proto::LabelSelector selector;
  selector.match_labels["app"] = "web";
  proto::Pod p = pod("next").label("app", "web").gpus(1).build();
  p.spec.topology_spread_constraints = defaultSpreadConstraints(config, selector);
  p.spec.has_topology_spread_constraints = true;
  REQUIRE(p.spec.topology_spread_constraints.size() == 2);
  CHECK(p.spec.topology_spread_constraints[0].system_default);
  std::optional<SpreadScore> score = SpreadScore::prepare(**makePodInfo(p), cache);
  REQUIRE(score.has_value());
  const auto at = [&](const char* n) { return score->score(cache.node(*cache.findNode(n))); };
  CHECK(at("x1") > at("b1"));  // 0 pods on it, and its missing zone is not held against it
  CHECK(at("b1") > at("a1"));  // zone b has 1 web pod, zone a 2
  // The same constraints given by the pod itself: a node without the key ranks last.
  for (auto& c : p.spec.topology_spread_constraints) c.system_default = false;
  score = SpreadScore::prepare(**makePodInfo(p), cache);
  CHECK(score->score(cache.node(*cache.findNode("x1"))) < score->score(cache.node(*cache.findNode("a1"))));
}

// Members of gang `name` with `gpus` GPUs each, labelled job=<name>, spreading over each other.
std::vector<PodInfoPtr> spreading(const std::string& name, int n, const std::string& key,
                                  int32_t max_skew, int gpus = 1) {
  std::vector<PodInfoPtr> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(pod(name + "-" + std::to_string(i)).gpus(gpus).gang(name, n).label("job", name)
                      .spread(key, max_skew, "DoNotSchedule", "job", name).info());
  }
  return out;
}

GangRequest request(const std::string& name, std::vector<PodInfoPtr> members) {
  GangRequest r;
  r.key = GangKey{"ml", name, false};
  r.min_member = static_cast<int32_t>(members.size());
  r.members = std::move(members);
  return r;
}

// Members per value of `key` on the nodes of the placement (+ `existing` per value).
std::map<std::string, int> perDomain(const GangPlacement& p, const ClusterCache& cache,
                                     const std::string& key, std::map<std::string, int> existing = {}) {
  for (const Assignment& a : p.assignments)
    ++existing[cache.node(*cache.findNode(a.node)).labels().at(key)];
  return existing;
}

TEST_CASE("a gang whose members spread over each other holds the skew once all are placed",
          "[spread]") {
  ClusterCache cache({});
  for (const char* zone : {"a", "b", "c"})
    for (int i = 0; i < 2; ++i)
      cache.addNode(node(std::string(zone) + std::to_string(i)).gpus(8).label(kZone, zone));
  // 12 one-GPU members fit in one zone, but maxSkew 1 over 3 empty zones takes 4 in each: the
  // first member's own check (1 - 0 <= 1) would allow only one per zone.
  const GangPlacement even = placed(place(request("g", spreading("g", 12, kZone, 1)), cache));
  CHECK(perDomain(even, cache, kZone) == std::map<std::string, int>{{"a", 4}, {"b", 4}, {"c", 4}});
  // maxSkew 4 lets 12 go 4 + 8 or so, but never more than 4 above the emptiest zone.
  const GangPlacement loose = placed(place(request("h", spreading("h", 12, kZone, 4)), cache));
  for (const auto& [zone, n] : perDomain(loose, cache, kZone)) CHECK(n <= 4 + 2);
  // Existing pods of the job count: zone a already has 2, so 4 members go 0 / 2 / 2... or any
  // split that ends within 1 of the minimum.
  cache.addPod(pod("old-0").label("job", "k").gpus(1).onNode("a0"));
  cache.addPod(pod("old-1").label("job", "k").gpus(1).onNode("a1"));
  const GangPlacement topped = placed(place(request("k", spreading("k", 4, kZone, 1)), cache));
  const auto counts = perDomain(topped, cache, kZone, {{"a", 2}});
  int lo = 100, hi = 0;
  for (const auto& [zone, n] : counts) {
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  CHECK(counts.size() == 3);
  CHECK(hi - lo <= 1);
}

TEST_CASE("spread over hosts raises the minimum by filling every node", "[spread]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  cache.addNode(node("n2").gpus(8));
  cache.addPod(pod("old").label("job", "g").gpus(1).onNode("n1"));
  // n1 has 1 of the job, n2 0: 3 members end 2 / 2 (kube-scheduler, one by one: n2, n1, n2).
  const GangPlacement p = placed(place(request("g", spreading("g", 3, kHost, 1)), cache));
  CHECK(perDomain(p, cache, kHost, {{"n1", 1}}) == std::map<std::string, int>{{"n1", 2}, {"n2", 2}});
  // 6 go 3 / 3: with the old one 4 / 3.
  const GangPlacement six = placed(place(request("h", spreading("g", 6, kHost, 1)), cache));
  CHECK(perDomain(six, cache, kHost) == std::map<std::string, int>{{"n1", 3}, {"n2", 3}});
  // With minDomains 3 and 2 nodes the minimum stays 0: at most 1 per node beyond what exists.
  std::vector<PodInfoPtr> strict;
  for (int i = 0; i < 2; ++i)
    strict.push_back(pod("s" + std::to_string(i)).gpus(1).gang("s", 2).label("job", "s")
                         .spread(kHost, 1, "DoNotSchedule", "job", "s", 3).info());
  const GangPlacement one_each = placed(place(request("s", strict), cache));
  CHECK(perDomain(one_each, cache, kHost) == std::map<std::string, int>{{"n1", 1}, {"n2", 1}});
  strict.push_back(pod("s2").gpus(1).gang("s", 3).label("job", "s")
                       .spread(kHost, 1, "DoNotSchedule", "job", "s", 3).info());
  const PlacementResult refused = place(request("s", strict), cache);
  REQUIRE(std::holds_alternative<Unschedulable>(refused));
  CHECK_THAT(std::get<Unschedulable>(refused).message,
             Catch::Contains("node(s) didn't match pod topology spread constraints: spread over "
                             "kubernetes.io/hostname with maxSkew 1, the nodes can take 2 of the 3"));
}

TEST_CASE("a launcher the workers' spread counts is placed first and counted", "[spread]") {
  ClusterCache cache({});
  cache.addNode(node("a1").gpus(8).cpu("64").label(kZone, "a"));
  cache.addNode(node("b1").gpus(8).cpu("64").label(kZone, "b"));
  std::vector<PodInfoPtr> members = spreading("j", 3, kZone, 1);
  members.push_back(pod("j-launcher").cpu("1").gang("j", 4).label("job", "j").info());
  const GangPlacement p = placed(place(request("j", members), cache));
  // 4 pods of the job over 2 zones with maxSkew 1: 2 and 2, the launcher among them.
  CHECK(perDomain(p, cache, kZone) == std::map<std::string, int>{{"a", 2}, {"b", 2}});
}

TEST_CASE("members of two shapes that count each other spread as one", "[spread]") {
  ClusterCache cache({});
  for (const char* z : {"a", "b", "c"}) cache.addNode(node(std::string(z) + "1").gpus(8).label(kZone, z));
  // 2 small and 4 big members, one constraint alike: 2/2/2 over the zones, whatever the shapes.
  std::vector<PodInfoPtr> mixed = spreading("m", 2, kZone, 1);
  for (int i = 0; i < 4; ++i)
    mixed.push_back(pod("m-big" + std::to_string(i)).gpus(2).gang("m", 6).label("job", "m")
                        .spread(kZone, 1, "DoNotSchedule", "job", "m").info());
  CHECK(perDomain(placed(place(request("m", mixed), cache)), cache, kZone) ==
        std::map<std::string, int>{{"a", 2}, {"b", 2}, {"c", 2}});
}

TEST_CASE("gang spreads Muster does not place are refused with a message", "[spread]") {
  ClusterCache cache = zones();
  // Two shapes that count each other with different constraints.
  std::vector<PodInfoPtr> mixed = spreading("m", 2, kZone, 1);
  mixed.push_back(pod("m-big").gpus(2).gang("m", 3).label("job", "m")
                      .spread(kZone, 2, "DoNotSchedule", "job", "m").info());
  const PlacementResult r = place(request("m", mixed), cache);
  REQUIRE(std::holds_alternative<Unschedulable>(r));
  CHECK_THAT(std::get<Unschedulable>(r).message,
             Catch::Contains("which counts it too with other constraints or node constraints"));
  // A constraint that counts the others but not the pod itself.
  std::vector<PodInfoPtr> blind;
  blind.push_back(pod("x").gpus(1).gang("x", 2).label("role", "head")
                      .spread(kZone, 1, "DoNotSchedule", "role", "worker").info());
  blind.push_back(pod("y").gpus(1).gang("x", 2).label("role", "worker").info());
  const PlacementResult b = place(request("x", blind), cache);
  REQUIRE(std::holds_alternative<Unschedulable>(b));
  CHECK_THAT(std::get<Unschedulable>(b).message, Catch::Contains("but not the pod itself"));
  // Spreading away from other pods only (the selector counts no member) is a plain filter: both
  // members avoid zone a, which has 2 web pods.
  cache.addPod(pod("web").label("app", "web").onNode("a1"));
  cache.addPod(pod("web2").label("app", "web").onNode("a2"));
  GangRequest away;
  away.key = GangKey{"ml", "h", false};
  away.min_member = 2;
  for (int i = 0; i < 2; ++i)
    away.members.push_back(pod("h" + std::to_string(i)).gpus(1).gang("h", 2)
                               .spread(kZone, 1, "DoNotSchedule", "app", "web").info());
  for (const Assignment& a : placed(place(away, cache)).assignments) CHECK(a.node == "b1");
}

// A random small cluster: 1 or 2 nodes of 4 GPUs per zone, the GPUs not free used by other pods,
// up to one of them per node counted by the gang's selector (job=g).
struct RandomZones {
  ClusterCache cache{std::vector<std::string>{}};
  std::vector<std::string> names, zone_of;
  std::vector<int> room, existing;  // per node: free GPUs, pods the selector counts

  RandomZones(std::mt19937& rng, int zones_n, int free_values) {
    for (int z = 0; z < zones_n; ++z) {
      const std::string zone(1, static_cast<char>('a' + z));
      const int nodes = 1 + static_cast<int>(rng() % 2);
      for (int i = 0; i < nodes; ++i) {
        const int free = static_cast<int>(rng() % free_values);
        const std::string name = zone + std::to_string(i);
        cache.addNode(node(name).gpus(4).label(kZone, zone));
        const int old = std::min(static_cast<int>(rng() % 2), 4 - free);
        for (int k = 0; k < 4 - free; ++k) {
          auto p = pod(name + "-busy" + std::to_string(k)).gpus(1).onNode(name);
          if (k < old) p.label("job", "g");
          cache.addPod(p);
        }
        names.push_back(name);
        zone_of.push_back(zone);
        room.push_back(free);
        existing.push_back(old);
      }
    }
  }
  // With x[i] members on node i: per zone (maxSkew `skew`) and per node (`host_skew`, 0: no such
  // constraint), every domain that took members ends within maxSkew of the minimum.
  bool holds(const std::vector<int>& x, int skew, int host_skew) const {
    const size_t n = names.size();
    std::map<std::string, int> zone_count, zone_took;
    for (size_t i = 0; i < n; ++i) {
      zone_count[zone_of[i]] += existing[i] + x[i];
      zone_took[zone_of[i]] += x[i];
    }
    int lo = 1000;
    for (const auto& [z, c] : zone_count) lo = std::min(lo, c);
    for (const auto& [z, c] : zone_count)
      if (zone_took[z] > 0 && c > lo + skew) return false;
    if (host_skew == 0) return true;
    int host_lo = 1000;
    for (size_t i = 0; i < n; ++i) host_lo = std::min(host_lo, existing[i] + x[i]);
    for (size_t i = 0; i < n; ++i)
      if (x[i] > 0 && existing[i] + x[i] > host_lo + host_skew) return false;
    return true;
  }
  std::string describe() const {
    return absl::StrCat(names.size(), " nodes; free ", absl::StrJoin(room, ","), "; job pods ",
                        absl::StrJoin(existing, ","), "; zones ", absl::StrJoin(zone_of, ","));
  }
  size_t at(const std::string& node_name) const {
    return static_cast<size_t>(std::find(names.begin(), names.end(), node_name) - names.begin());
  }
};

// Random small clusters: a placement exists exactly when some split of the members over the nodes
// fits them and ends, per constraint, within maxSkew of the minimum wherever members went (found
// here by trying every split), and the placement found is such a split. Half the rounds add a
// constraint on the host to the one on the zone.
TEST_CASE("gang spread agrees with an exhaustive search over splits", "[spread]") {
  std::mt19937 rng(7);
  int feasible_rounds = 0;
  for (int round = 0; round < 400; ++round) {
    const int zones_n = 2 + static_cast<int>(rng() % 2);
    const int skew = 1 + static_cast<int>(rng() % 2);
    const int host_skew = rng() % 2 == 0 ? 0 : 1 + static_cast<int>(rng() % 2);  // 0: none
    const int members = 2 + static_cast<int>(rng() % 6);
    RandomZones c(rng, zones_n, 4);
    const size_t n = c.names.size();
    bool feasible = false;
    std::vector<int> x(n, 0);
    std::function<void(size_t, int)> tryAll = [&](size_t i, int left) {
      if (feasible) return;
      if (i == n) {
        feasible = left == 0 && c.holds(x, skew, host_skew);
        return;
      }
      for (int v = 0; v <= std::min(left, c.room[i]); ++v) {
        x[i] = v;
        tryAll(i + 1, left - v);
      }
      x[i] = 0;
    };
    tryAll(0, members);
    std::vector<PodInfoPtr> gang;
    for (int i = 0; i < members; ++i) {
      auto b = pod("m" + std::to_string(i)).gpus(1).gang("g", members).label("job", "g")
                   .spread(kZone, skew, "DoNotSchedule", "job", "g");
      if (host_skew > 0) b.spread(kHost, host_skew, "DoNotSchedule", "job", "g");
      gang.push_back(b.info());
    }
    const PlacementResult r = place(request("g", gang), c.cache);
    INFO("round " << round << ": " << zones_n << " zones, skew " << skew << ", host skew "
                  << host_skew << ", " << members << " members; " << c.describe());
    REQUIRE(std::holds_alternative<GangPlacement>(r) == feasible);
    if (!feasible) continue;
    ++feasible_rounds;
    std::vector<int> got(n, 0);
    for (const Assignment& a : std::get<GangPlacement>(r).assignments) ++got[c.at(a.node)];
    for (size_t i = 0; i < n; ++i) CHECK(got[i] <= c.room[i]);
    CHECK(c.holds(got, skew, host_skew));
  }
  // Both outcomes are exercised.
  CHECK(feasible_rounds > 50);
  CHECK(feasible_rounds < 350);
}

TEST_CASE("members of two shapes spreading together always hold the skew, and are rarely refused "
          "where a split exists", "[spread]") {
  std::mt19937 rng(13);
  int feasible_rounds = 0, placed_rounds = 0;
  for (int round = 0; round < 300; ++round) {
    const int zones_n = 2 + static_cast<int>(rng() % 2);
    const int skew = 1 + static_cast<int>(rng() % 2);
    const int host_skew = rng() % 3 == 0 ? 1 : 0;  // 0: none
    const int small_n = 1 + static_cast<int>(rng() % 3);
    const int big_n = 1 + static_cast<int>(rng() % 3);
    RandomZones c(rng, zones_n, 5);
    const size_t n = c.names.size();
    // Every split of the small (1 GPU) and big (2 GPU) members over the nodes.
    bool feasible = false;
    std::vector<int> s(n, 0), b(n, 0), x(n, 0);
    std::function<void(size_t, int, int)> tryAll = [&](size_t i, int small_left, int big_left) {
      if (feasible) return;
      if (i == n) {
        for (size_t k = 0; k < n; ++k) x[k] = s[k] + b[k];
        feasible = small_left == 0 && big_left == 0 && c.holds(x, skew, host_skew);
        return;
      }
      for (int bv = 0; bv <= big_left && 2 * bv <= c.room[i]; ++bv) {
        for (int sv = 0; sv <= small_left && sv + 2 * bv <= c.room[i]; ++sv) {
          s[i] = sv;
          b[i] = bv;
          tryAll(i + 1, small_left - sv, big_left - bv);
        }
      }
      s[i] = b[i] = 0;
    };
    tryAll(0, small_n, big_n);
    std::vector<PodInfoPtr> gang;
    for (int i = 0; i < small_n + big_n; ++i) {
      auto m = pod("m" + std::to_string(i)).gpus(i < small_n ? 1 : 2).gang("g", small_n + big_n)
                   .label("job", "g").spread(kZone, skew, "DoNotSchedule", "job", "g");
      if (host_skew > 0) m.spread(kHost, host_skew, "DoNotSchedule", "job", "g");
      gang.push_back(m.info());
    }
    const PlacementResult r = place(request("g", gang), c.cache);
    INFO("round " << round << ": skew " << skew << ", host skew " << host_skew << ", " << small_n
                  << " small + " << big_n << " big; " << c.describe());
    feasible_rounds += feasible;
    if (!std::holds_alternative<GangPlacement>(r)) continue;
    ++placed_rounds;
    REQUIRE(feasible);  // never placed where no split holds
    const GangPlacement& p = std::get<GangPlacement>(r);
    std::vector<int> got(n, 0), gpus(n, 0);
    for (size_t i = 0; i < p.assignments.size(); ++i) {
      const size_t at = c.at(p.assignments[i].node);
      ++got[at];
      gpus[at] += static_cast<int>(i) < small_n ? 1 : 2;
    }
    for (size_t i = 0; i < n; ++i) CHECK(gpus[i] <= c.room[i]);
    CHECK(c.holds(got, skew, host_skew));
  }
  // One shape after the other is not an exhaustive search: a split may exist that it misses.
  // It finds one in nearly every round where one exists.
  INFO(placed_rounds << " of " << feasible_rounds << " feasible rounds placed");
  CHECK(feasible_rounds > 50);
  CHECK(placed_rounds * 10 >= feasible_rounds * 9);
}

}  // namespace

}  // namespace muster::scheduler
