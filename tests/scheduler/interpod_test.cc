#include "scheduler/interpod.h"

#include <catch2/catch.hpp>
#include <set>

#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"
#include "tests/scheduler/placing.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;
using testing::placed;

constexpr char kHost[] = "kubernetes.io/hostname";
constexpr char kZoneKey[] = "topology.kubernetes.io/zone";
const std::vector<std::string> kLevels{testing::kRack};

// Two racks of two 8-GPU nodes: r0-n0, r0-n1, r1-n0, r1-n1.
ClusterCache racks() {
  ClusterCache cache(kLevels);
  testing::addRacks(cache, 2, 2, 8);
  return cache;
}

// The verdict of the filter for `p` on each node, "ok" or its reason.
std::map<std::string, std::string> verdicts(const proto::Pod& p, const ClusterCache& cache) {
  std::map<std::string, std::string> out;
  std::optional<InterPodFilter> f = InterPodFilter::prepare(p, cache);
  for (const char* n : {"r0-n0", "r0-n1", "r1-n0", "r1-n1"}) {
    Status s = f ? f->check(cache.node(*cache.findNode(n))) : Status::success();
    out[n] = s.ok() ? "ok" : s.reasons.front();
  }
  return out;
}

TEST_CASE("a term selects pods by labels in its namespaces", "[interpod]") {
  proto::PodAffinityTerm t = testing::PodBuilder::podTerm("app", "db", kHost);
  const proto::Labels db{{"app", "db"}}, web{{"app", "web"}};
  CHECK(termSelects(t, "ml", "ml", db));
  CHECK_FALSE(termSelects(t, "ml", "ml", web));
  CHECK_FALSE(termSelects(t, "ml", "other", db));  // no namespaces: the owner's only
  t.namespaces = {"other"};
  CHECK(termSelects(t, "ml", "other", db));
  CHECK_FALSE(termSelects(t, "ml", "ml", db));  // listed namespaces replace the owner's
  t.namespaces.clear();
  t.namespace_selector.emplace();  // {}: every namespace
  CHECK(termSelects(t, "ml", "third", db));
  t.namespace_selector->match_labels["team"] = "a";
  proto::Labels team_a{{"team", "a"}};
  CHECK(termSelects(t, "ml", "third", db, [&](std::string_view ns) -> const proto::Labels* {
    return ns == "third" ? &team_a : nullptr;
  }));
  CHECK_FALSE(termSelects(t, "ml", "fourth", db, [&](std::string_view ns) -> const proto::Labels* {
    return ns == "third" ? &team_a : nullptr;
  }));
  t.label_selector.reset();  // absent selector: no pod
  CHECK_FALSE(termSelects(t, "ml", "ml", db));
  t.label_selector.emplace();  // {}: every pod
  t.namespace_selector.reset();
  CHECK(termSelects(t, "ml", "ml", web));
}

TEST_CASE("required anti-affinity keeps a pod off the domains of the pods it selects", "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("db-0").label("app", "db").onNode("r0-n0"));
  // On the host: only r0-n0 is refused.
  auto host = verdicts(pod("web").requiredAntiAffinity("app", "db", kHost), cache);
  CHECK(host == std::map<std::string, std::string>{{"r0-n0", std::string(kReasonPodAntiAffinity)},
                                                   {"r0-n1", "ok"}, {"r1-n0", "ok"}, {"r1-n1", "ok"}});
  // On the rack: all of r0.
  auto rack = verdicts(pod("web").requiredAntiAffinity("app", "db", testing::kRack), cache);
  CHECK(rack.at("r0-n1") == kReasonPodAntiAffinity);
  CHECK(rack.at("r1-n1") == "ok");
  // A term on a key no node has refuses nothing.
  auto zone = verdicts(pod("web").requiredAntiAffinity("app", "db", "topology.kubernetes.io/zone"), cache);
  CHECK(zone.at("r0-n0") == "ok");
  // Another namespace's db is not selected.
  ClusterCache other = racks();
  other.addPod(pod("db-0").ns("elsewhere").label("app", "db").onNode("r0-n0"));
  CHECK(verdicts(pod("web").requiredAntiAffinity("app", "db", kHost), other).at("r0-n0") == "ok");
}

TEST_CASE("a placed pod's required anti-affinity keeps the pods it selects away (symmetry)",
          "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("loner").label("app", "loner").requiredAntiAffinity("app", "noisy", testing::kRack)
                   .onNode("r1-n0"));
  auto noisy = verdicts(pod("n").label("app", "noisy"), cache);
  CHECK(noisy == std::map<std::string, std::string>{
                     {"r0-n0", "ok"}, {"r0-n1", "ok"},
                     {"r1-n0", std::string(kReasonExistingAntiAffinity)},
                     {"r1-n1", std::string(kReasonExistingAntiAffinity)}});
  CHECK(verdicts(pod("quiet").label("app", "quiet"), cache).at("r1-n1") == "ok");
  // Gone with the pod.
  cache.removePod("ml/loner");
  CHECK(verdicts(pod("n").label("app", "noisy"), cache).at("r1-n1") == "ok");
}

TEST_CASE("required affinity needs a selected pod in the node's domain, except for the first of a "
          "group that selects itself", "[interpod]") {
  ClusterCache cache = racks();
  // Nothing selected anywhere and the pod does not select itself: no node.
  auto none = verdicts(pod("w").requiredAffinity("app", "cache", testing::kRack), cache);
  for (const auto& [n, v] : none) CHECK(v == kReasonPodAffinity);
  // Selecting itself, first of its kind: any node that has the key.
  auto first = verdicts(pod("w").label("app", "cache").requiredAffinity("app", "cache", testing::kRack), cache);
  for (const auto& [n, v] : first) CHECK(v == "ok");
  // Once one runs in r1, only r1.
  cache.addPod(pod("cache-0").label("app", "cache").onNode("r1-n1"));
  auto second = verdicts(pod("w").label("app", "cache").requiredAffinity("app", "cache", testing::kRack), cache);
  CHECK(second == std::map<std::string, std::string>{
                      {"r0-n0", std::string(kReasonPodAffinity)},
                      {"r0-n1", std::string(kReasonPodAffinity)}, {"r1-n0", "ok"}, {"r1-n1", "ok"}});
  // A node without the term's key never passes.
  cache.addNode(node("bare").gpus(8));
  std::optional<InterPodFilter> f =
      InterPodFilter::prepare(pod("w").requiredAffinity("app", "cache", "topology.kubernetes.io/zone"), cache);
  REQUIRE(f);
  CHECK(f->check(cache.node(*cache.findNode("bare"))).reasons.front() == kReasonPodAffinity);
}

TEST_CASE("a namespaceSelector term selects pods by their namespace's labels", "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("db").ns("team-a").label("app", "db").onNode("r0-n0"));
  cache.addPod(pod("db").ns("team-b").label("app", "db").onNode("r1-n0"));
  auto p = pod("web").requiredAntiAffinity("app", "db", kHost).build();
  p.spec.affinity->pod_anti_affinity.required[0].namespace_selector.emplace().match_labels["tier"] = "prod";
  const proto::Labels prod{{"tier", "prod"}};
  NamespaceLabels labels = [&](std::string_view ns) -> const proto::Labels* {
    return ns == "team-a" ? &prod : nullptr;
  };
  std::optional<InterPodFilter> f = InterPodFilter::prepare(p, cache, labels);
  REQUIRE(f);
  CHECK_FALSE(f->check(cache.node(*cache.findNode("r0-n0"))).ok());  // team-a is prod
  CHECK(f->check(cache.node(*cache.findNode("r1-n0"))).ok());        // team-b is not
  // Without namespace labels nothing is selected by it.
  std::optional<InterPodFilter> blind = InterPodFilter::prepare(p, cache);
  REQUIRE(blind);
  CHECK(blind->check(cache.node(*cache.findNode("r0-n0"))).ok());
}

TEST_CASE("labels changed on a running pod are what terms see", "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("x").label("app", "db").onNode("r0-n0"));
  CHECK(verdicts(pod("web").requiredAntiAffinity("app", "db", kHost), cache).at("r0-n0") ==
        kReasonPodAntiAffinity);
  cache.updatePod(pod("x").label("app", "retired").onNode("r0-n0"));
  CHECK(verdicts(pod("web").requiredAntiAffinity("app", "db", kHost), cache).at("r0-n0") == "ok");
}

// --- preferred terms: the score ------------------------------------------------------------------

std::map<std::string, int64_t> scores(const proto::Pod& p, const ClusterCache& cache) {
  std::map<std::string, int64_t> out;
  std::optional<InterPodScore> s = InterPodScore::prepare(p, cache);
  for (const char* n : {"r0-n0", "r0-n1", "r1-n0", "r1-n1"})
    out[n] = s ? s->score(cache.node(*cache.findNode(n))) : 0;
  return out;
}

TEST_CASE("preferred terms score a node by the pods in its domains, as kube-scheduler adds them",
          "[interpod]") {
  ClusterCache cache = racks();
  CHECK_FALSE(InterPodScore::prepare(pod("web").preferredPodAffinity(50, "app", "db", kHost), cache));
  cache.addPod(pod("db").label("app", "db").onNode("r1-n1"));
  cache.addPod(pod("noisy").label("app", "noisy").onNode("r0-n0"));
  auto p = pod("web").preferredPodAffinity(50, "app", "db", kHost)
               .preferredPodAntiAffinity(30, "app", "noisy", testing::kRack).build();
  CHECK(scores(p, cache) == std::map<std::string, int64_t>{
                                {"r0-n0", -30}, {"r0-n1", -30}, {"r1-n0", 0}, {"r1-n1", 50}});
  // Symmetry: a placed pod's preferred affinity (by weight) and required affinity (weight 1) to
  // this pod draw it to that pod's domains; its preferred anti-affinity pushes it away.
  cache.addPod(pod("fan").label("app", "fan").preferredPodAffinity(20, "app", "web", testing::kRack)
                   .requiredAffinity("app", "web", kHost).onNode("r1-n0"));
  cache.addPod(pod("shy").preferredPodAntiAffinity(7, "app", "web", kHost).onNode("r0-n1"));
  CHECK(scores(pod("w").label("app", "web"), cache) ==
        std::map<std::string, int64_t>{{"r0-n0", 0}, {"r0-n1", -7}, {"r1-n0", 21}, {"r1-n1", 20}});
  CHECK(scores(pod("other").label("app", "other"), cache) ==
        std::map<std::string, int64_t>{{"r0-n0", 0}, {"r0-n1", 0}, {"r1-n0", 0}, {"r1-n1", 0}});
}

TEST_CASE("a lone pod goes where its preferred terms point before packing tighter", "[interpod]") {
  ClusterCache cache = racks();
  // Packing alone would pick r0-n0 (fragmentation is no help: the running pods fit either node).
  cache.addPod(pod("filler-a").gpus(2).onNode("r0-n0"));
  cache.addPod(pod("filler-b").gpus(2).onNode("r0-n0"));
  cache.addPod(pod("db").label("app", "db").gpus(1).onNode("r1-n1"));
  auto lone = [&](testing::PodBuilder b) {
    GangRequest r;
    r.key = GangKey{"ml", "lone", true};
    r.members.push_back(b.info());
    const PlacementResult result = place(r, cache);
    REQUIRE(std::holds_alternative<GangPlacement>(result));
    return std::get<GangPlacement>(result).assignments.at(0).node;
  };
  CHECK(lone(pod("plain").gpus(1)) == "r0-n0");
  CHECK(lone(pod("near").gpus(1).preferredPodAffinity(10, "app", "db", kHost)) == "r1-n1");
  CHECK(lone(pod("far").gpus(1).preferredPodAntiAffinity(10, "app", "db", testing::kRack)) == "r0-n0");
  CHECK(lone(pod("far2").gpus(4).preferredPodAntiAffinity(10, "app", "db", testing::kRack)) == "r0-n0");
  // Preferred node affinity still comes first.
  cache.updateNode(node("r1-n0").gpus(8).rack("r1").spine("s0").label("disk", "ssd"));
  CHECK(lone(pod("both").gpus(1).preferredAffinity(1, testing::term("disk", "In", {"ssd"}))
                 .preferredPodAffinity(100, "app", "db", kHost)) == "r1-n0");
}

// --- inside a gang --------------------------------------------------------------------------------

GangRequest gangOf(int n, const std::function<testing::PodBuilder(int)>& shape) {
  GangRequest r;
  r.key = GangKey{"ml", "train", false};
  r.min_member = n;
  for (int i = 0; i < n; ++i) r.members.push_back(shape(i).info());
  return r;
}

std::string refusedWith(const PlacementResult& r) {
  if (std::holds_alternative<GangPlacement>(r)) FAIL("placed: " << std::get<GangPlacement>(r).describe());
  return std::get<Unschedulable>(r).message;
}

TEST_CASE("members with anti-affinity to each other on the host get one node each, or wait whole",
          "[interpod]") {
  ClusterCache cache = racks();  // 4 nodes of 8 GPUs
  auto worker = [](int i) {
    return pod("w" + std::to_string(i)).gpus(1).gang("train", 4).label("role", "worker")
        .label("index", std::to_string(i)).requiredAntiAffinity("role", "worker", kHost);
  };
  // Without the term all four 1-GPU pods would share one node; with it, four nodes.
  GangPlacement p = placed(place(gangOf(4, worker), cache));
  std::set<std::string> nodes;
  for (const Assignment& a : p.assignments) nodes.insert(a.node);
  CHECK(nodes.size() == 4);
  // Five cannot: the gang waits whole, nothing is placed.
  std::string why = refusedWith(place(gangOf(5, worker), cache));
  CHECK_THAT(why, Catch::Contains("4/4 nodes are available"));
  // A placed worker of another gang counts as well (ordinary anti-affinity).
  cache.addPod(pod("other").label("role", "worker").onNode("r0-n0"));
  GangPlacement three = placed(place(gangOf(3, worker), cache));
  for (const Assignment& a : three.assignments) CHECK(a.node != "r0-n0");
  CHECK_THAT(refusedWith(place(gangOf(4, worker), cache)),
             Catch::Contains("1 node(s) didn't match pod anti-affinity rules"));
}

TEST_CASE("members with anti-affinity to each other on a rack get one rack each, or wait whole",
          "[interpod]") {
  ClusterCache cache = racks();
  auto per_rack = [](int i) {
    return pod("w" + std::to_string(i)).gpus(1).gang("train", 2).label("role", "w")
        .requiredAntiAffinity("role", "w", testing::kRack);
  };
  // Without the term both 1-GPU pods would share a node; with it, one per rack.
  GangPlacement p = placed(place(gangOf(2, per_rack), cache));
  std::set<std::string> racks_used;
  for (const Assignment& a : p.assignments) racks_used.insert(a.node.substr(0, 2));
  CHECK(racks_used.size() == 2);
  // Three members, two racks: the gang waits whole, in kube-scheduler's words.
  CHECK_THAT(refusedWith(place(gangOf(3, per_rack), cache)),
             Catch::Contains("node(s) didn't match pod anti-affinity rules: one member per "
                             "muster.dev/rack, the nodes can take 2 of the 3 members"));
  // A placed pod the term selects takes its rack away (ordinary anti-affinity).
  cache.addPod(pod("other").label("role", "w").onNode("r1-n0"));
  for (const Assignment& a : placed(place(gangOf(1, per_rack), cache)).assignments)
    CHECK(a.node.rfind("r0-", 0) == 0);
  CHECK_THAT(refusedWith(place(gangOf(2, per_rack), cache)), Catch::Contains("anti-affinity"));
}

TEST_CASE("members with anti-affinity to each other on racks and on the zones holding them get "
          "one zone each", "[interpod]") {
  // Zone z0 holds rack r0, z1 holds r1: one member per zone is one per rack too.
  ClusterCache cache(kLevels);
  for (const char* n : {"r0-n0", "r0-n1", "r1-n0", "r1-n1"}) {
    const std::string rack = std::string(n).substr(0, 2);
    cache.addNode(node(n).gpus(8).rack(rack).spine("s0").label(kZoneKey, rack == "r0" ? "z0" : "z1"));
  }
  auto apart = [](int i) {
    return pod("w" + std::to_string(i)).gpus(1).gang("train", 2).label("role", "w")
        .requiredAntiAffinity("role", "w", testing::kRack).requiredAntiAffinity("role", "w", kZoneKey);
  };
  std::set<std::string> zones;
  for (const Assignment& a : placed(place(gangOf(2, apart), cache)).assignments)
    zones.insert(a.node.substr(0, 2));
  CHECK(zones.size() == 2);
  CHECK_THAT(refusedWith(place(gangOf(3, apart), cache)),
             Catch::Contains("one member per topology.kubernetes.io/zone, the nodes can take 2 of the 3"));
}

TEST_CASE("members with affinity to each other on a level land in one domain of it", "[interpod]") {
  ClusterCache cache = racks();
  auto member = [](int i) {
    return pod("m" + std::to_string(i)).gpus(8).gang("train", 2).label("job", "j1")
        .requiredAffinity("job", "j1", testing::kRack);
  };
  GangPlacement p = placed(place(gangOf(2, member), cache));
  CHECK(p.level == 0);  // one rack
  // Three full nodes fit the cluster but no rack: refused, not spread.
  CHECK_THAT(refusedWith(place(gangOf(3, member), cache)), Catch::Contains("muster.dev/rack"));
}

TEST_CASE("inter-pod terms among members that Muster cannot place yet are refused, not ignored",
          "[interpod]") {
  ClusterCache cache = racks();
  // Anti-affinity among members on two keys other than the host's whose domains cross (each
  // rack has a node in each zone).
  for (const char* n : {"r0-n0", "r0-n1", "r1-n0", "r1-n1"}) {
    cache.updateNode(node(n).gpus(8).rack(std::string(n).substr(0, 2)).spine("s0")
                         .label(kZoneKey, n[4] == '0' ? "z0" : "z1"));
  }
  auto two_keys = [](int i) {
    return pod("w" + std::to_string(i)).gpus(1).gang("train", 2).label("role", "w")
        .requiredAntiAffinity("role", "w", testing::kRack).requiredAntiAffinity("role", "w", kZoneKey);
  };
  CHECK_THAT(refusedWith(place(gangOf(2, two_keys), cache)),
             Catch::Contains("Muster supports it on one key (and kubernetes.io/hostname), or on keys "
                             "whose domains nest"));
  // Affinity of the launcher to the workers and of the workers to the launcher, neither matching
  // its own terms: no order of placing them one by one satisfies both (kube-scheduler leaves
  // them pending too).
  auto cycle = [](int i) {
    auto p = pod("c" + std::to_string(i)).gpus(1).gang("train", 4);
    if (i == 0) return p.label("role", "launcher").requiredAffinity("role", "worker", testing::kRack);
    if (i == 3) return p.label("role", "server");
    return p.label("role", "worker").requiredAffinity("role", "launcher", testing::kRack);
  };
  CHECK_THAT(refusedWith(place(gangOf(4, cycle), cache)),
             Catch::Contains("no order of the gang's members satisfies them"));
}

// Where each member went, by name.
std::map<std::string, std::string> nodesOf(const GangPlacement& p, const GangRequest& r) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < p.assignments.size(); ++i) out[r.members[i]->pod().meta.name] = p.assignments[i].node;
  return out;
}

TEST_CASE("a launcher and its workers with terms toward each other are placed in an order that "
          "satisfies them", "[interpod]") {
  // Two racks of three 8-GPU nodes; r0 has one node free.
  ClusterCache cache(kLevels);
  testing::addRacks(cache, 2, 3, 8);
  cache.addPod(pod("f0").gpus(8).onNode("r0-n0"));
  cache.addPod(pod("f1").gpus(8).onNode("r0-n1"));
  // The workers need the launcher in their rack; the launcher wants no worker on its node.
  auto job = [](int workers) {
    return gangOf(workers + 1, [workers](int i) {
      auto p = pod(i == 0 ? std::string("launcher") : "w" + std::to_string(i)).gang("train", workers + 1);
      if (i == 0) return p.cpu("1").label("role", "launcher").requiredAntiAffinity("role", "worker", kHost);
      return p.gpus(4).label("role", "worker").requiredAffinity("role", "launcher", testing::kRack);
    });
  };
  GangRequest four = job(4);
  std::map<std::string, std::string> at = nodesOf(placed(place(four, cache)), four);
  REQUIRE(at.size() == 5);
  // 16 GPUs: only r1 holds them, so the launcher is there too, on the node no worker uses.
  std::map<std::string, int> per_node;
  for (const auto& [name, node] : at) {
    CHECK(node.rfind("r1-", 0) == 0);
    if (name != "launcher") ++per_node[node];
  }
  CHECK(per_node.size() == 2);
  CHECK_FALSE(per_node.contains(at["launcher"]));
  // Six workers fill r1's three nodes: the launcher has no node there free of workers, and the
  // gang waits whole, naming the rule.
  const std::string why = refusedWith(place(job(6), cache));
  CHECK_THAT(why, Catch::Contains("didn't match pod affinity rules: the 6 members like ml/w1 need room "
                                  "in a muster.dev/rack domain holding members their affinity selects"));
  CHECK_THAT(why, Catch::Contains("didn't match pod anti-affinity rules: members like ml/w1 and "
                                  "ml/launcher may not share a kubernetes.io/hostname domain"));
  // Anti-affinity from the launcher only, between members that differ: never on one node.
  auto apart = [](int i) {
    auto p = pod("p" + std::to_string(i)).gang("train", 3);
    if (i == 0) return p.cpu("1").label("role", "launcher").requiredAntiAffinity("role", "worker", kHost);
    return p.gpus(1).label("role", "worker");
  };
  GangRequest three = gangOf(3, apart);
  std::map<std::string, std::string> where = nodesOf(placed(place(three, cache)), three);
  CHECK(where["p0"] != where["p1"]);
  CHECK(where["p0"] != where["p2"]);
}

TEST_CASE("affinity to some members only: those members first, the others in their domains",
          "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("f").gpus(7).onNode("r0-n0"));
  // Every member needs s1 (n=1) on its node; s1 matches its own term and nothing placed does.
  auto some = [](int i) {
    return pod("s" + std::to_string(i)).gpus(2).gang("train", 3).label("n", std::to_string(i))
        .requiredAffinity("n", "1", kHost);
  };
  GangRequest r = gangOf(3, some);
  std::map<std::string, std::string> at = nodesOf(placed(place(r, cache)), r);
  CHECK(at["s0"] == at["s1"]);
  CHECK(at["s2"] == at["s1"]);
  CHECK(at["s1"] != "r0-n0");
  // Self-affinity that only the workers satisfy: they share one rack, the launcher goes anywhere.
  auto workers = [](int n) {
    return gangOf(n + 1, [n](int i) {
      auto p = pod(i == 0 ? std::string("launcher") : "w" + std::to_string(i)).gang("train", n + 1);
      if (i == 0) return p.gpus(1).label("role", "launcher");
      return p.gpus(4).label("role", "worker").requiredAffinity("role", "worker", testing::kRack);
    });
  };
  GangRequest three = workers(3);  // r0 has room for 2 of them, r1 for 4
  std::map<std::string, std::string> w = nodesOf(placed(place(three, cache)), three);
  CHECK(w["w1"].substr(0, 2) == "r1");
  CHECK(w["w2"].substr(0, 2) == "r1");
  CHECK(w["w3"].substr(0, 2) == "r1");
  // With r1 half full, three workers of 4 fit no rack together: they wait, though the cluster
  // holds them apart.
  cache.addPod(pod("g").gpus(8).onNode("r1-n0"));
  CHECK_THAT(refusedWith(place(workers(3), cache)),
             Catch::Contains("the 3 members like ml/w1 share one muster.dev/rack domain, and none has "
                             "room for all"));
}

TEST_CASE("members with anti-affinity on a rack share a node that has no rack label, as "
          "kube-scheduler allows", "[interpod]") {
  ClusterCache cache = racks();
  cache.addNode(node("loose").gpus(4));
  auto per_rack = [](int i) {
    return pod("w" + std::to_string(i)).gpus(2).gang("train", 4).label("role", "w")
        .requiredAntiAffinity("role", "w", testing::kRack);
  };
  GangRequest r = gangOf(4, per_rack);
  std::map<std::string, int> per;
  for (const Assignment& a : placed(place(r, cache)).assignments) ++per[a.node];
  // One per rack, the other two on the node without the key.
  CHECK(per["loose"] == 2);
  CHECK(per.size() == 3);
  std::map<std::string, int> per_rack_count;
  for (const auto& [n, k] : per)
    if (n != "loose") per_rack_count[n.substr(0, 2)] += k;
  CHECK(per_rack_count == std::map<std::string, int>{{"r0", 1}, {"r1", 1}});
  // Five: one per rack, two on the loose node (4 GPUs): one too many.
  CHECK_THAT(refusedWith(place(gangOf(5, per_rack), cache)),
             Catch::Contains("one member per muster.dev/rack, the nodes can take 4 of the 5"));
}

TEST_CASE("a lone pod with terms is placed as kube-scheduler would", "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("db").label("app", "db").gpus(1).onNode("r1-n1"));
  GangRequest r;
  r.key = GangKey{"ml", "web", true};
  r.members.push_back(pod("web").gpus(1).requiredAffinity("app", "db", kHost).info());
  GangPlacement p = placed(place(r, cache));
  REQUIRE(p.assignments.size() == 1);
  CHECK(p.assignments[0].node == "r1-n1");
  GangRequest away;
  away.key = GangKey{"ml", "batch", true};
  away.members.push_back(pod("batch").gpus(8).requiredAntiAffinity("app", "db", testing::kRack).info());
  GangPlacement q = placed(place(away, cache));
  CHECK(q.assignments[0].node.rfind("r0-", 0) == 0);
}

TEST_CASE("a gang's members go to the rack their preferred affinity points to", "[interpod]") {
  ClusterCache cache = racks();
  cache.addPod(pod("cache").label("app", "cache").gpus(1).onNode("r1-n0"));
  cache.addPod(pod("filler").gpus(1).onNode("r0-n0"));  // r0 is as full: a tie without preference
  auto member = [](int i) {
    return pod("m" + std::to_string(i)).gpus(2).gang("train", 2)
        .preferredPodAffinity(10, "app", "cache", testing::kRack);
  };
  GangPlacement p = placed(place(gangOf(2, member), cache));
  for (const Assignment& a : p.assignments) CHECK(a.node.rfind("r1-", 0) == 0);
}

}  // namespace
}  // namespace muster::scheduler
