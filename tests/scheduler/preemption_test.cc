#include "scheduler/preemption.h"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;

const std::vector<std::string> kLevels{testing::kRack};
constexpr int kRackLevel = 0;
constexpr int kHostLevel = 1;
absl::Time parse(const std::string& t) {
  absl::Time out;
  std::string err;
  REQUIRE(absl::ParseTime(absl::RFC3339_full, t, &out, &err));
  return out;
}
const std::string kStarted = "2027-01-15T00:00:00Z";  // 10 hours before now

// A cluster kept as objects, so a test can build the cache again without some pods.
struct Cluster {
  std::vector<proto::Node> nodes;
  std::vector<proto::Pod> pods;

  ClusterCache cache(const std::set<std::string>& without = {}) const {
    ClusterCache c(kLevels);
    for (const proto::Node& n : nodes) c.addNode(n);
    for (const proto::Pod& p : pods)
      if (!without.contains(podKey(p))) c.addPod(p);
    return c;
  }
  void addNode(const std::string& name, const std::string& rack, int gpus) {
    nodes.push_back(node(name).gpus(gpus).rack(rack));
  }
  // A gang `name` of priority `priority`: one pod of `gpus` GPUs on each of `on`.
  void addGang(const std::string& name, int32_t priority, int gpus, std::vector<std::string> on) {
    for (size_t i = 0; i < on.size(); ++i) {
      testing::PodBuilder b = pod(on.size() > 1 ? name + "-" + std::to_string(i) : name)
                                  .gpus(gpus).priority(priority)
                                  .onNode(on[i]).started(kStarted);
      if (on.size() > 1) b.gang(name, static_cast<int>(on.size()));
      pods.push_back(b);
    }
  }
};

GangRequest preemptor(const std::string& name, int pods, int gpus, int32_t priority,
                      int required_level = -1) {
  GangRequest r;
  r.key = GangKey{"ml", name, pods == 1};
  r.min_member = pods;
  r.required_level = required_level;
  for (int i = 0; i < pods; ++i) {
    testing::PodBuilder b = pod(name + "-" + std::to_string(i)).gpus(gpus).priority(priority);
    if (pods > 1) b.gang(name, pods);
    r.members.push_back(b.info());
  }
  return r;
}

PreemptionRequest at(int32_t priority) {
  PreemptionRequest p;
  p.priority = priority;
  p.now = parse("2027-01-15T10:00:00Z");
  return p;
}

std::set<std::string> victimGangs(const PreemptionResult& r) {
  if (const NoPreemption* n = std::get_if<NoPreemption>(&r)) FAIL("no preemption: " << n->message);
  std::set<std::string> out;
  for (const VictimUnit& v : std::get<PreemptionPlan>(r).victims) out.insert(v.key.name);
  return out;
}

NoPreemption refused(const PreemptionResult& r) {
  if (const PreemptionPlan* p = std::get_if<PreemptionPlan>(&r)) FAIL("preempts: " << p->describe());
  return std::get<NoPreemption>(r);
}

TEST_CASE("a gang is preempted whole: every pod of it, also on nodes the preemptor does not use",
          "[preemption]") {
  Cluster c;
  c.addNode("n0", "r0", 8);
  c.addNode("n1", "r0", 8);
  c.addGang("low", 0, 4, {"n0", "n1"});   // half of each node
  c.addGang("solo", 0, 4, {"n1"});        // the other half of n1
  ClusterCache cache = c.cache();
  GangRequest big = preemptor("big", 1, 8, 100);
  REQUIRE(std::holds_alternative<Unschedulable>(place(big, cache)));
  PreemptionResult r = choosePreemption(big, at(100), cache);
  // n0 frees with "low" alone (one unit); n1 would need both.
  CHECK(victimGangs(r) == std::set<std::string>{"low"});
  const PreemptionPlan& plan = std::get<PreemptionPlan>(r);
  CHECK(plan.victims[0].pods == std::vector<std::string>{"ml/low-0", "ml/low-1"});
  CHECK(plan.placement.assignments[0].node == "n0");
  CHECK(plan.describe() == "2 pods of 1 gang on n0, n1");
}

TEST_CASE("equal or higher priority is never preempted, nor a protected one", "[preemption]") {
  Cluster c;
  c.addNode("n0", "r0", 8);
  c.addGang("same", 50, 8, {"n0"});
  ClusterCache cache = c.cache();
  GangRequest big = preemptor("big", 1, 8, 50);
  CHECK(refused(choosePreemption(big, at(50), cache)).message.empty());
  CHECK(victimGangs(choosePreemption(big, at(51), cache)) == std::set<std::string>{"same"});
  PreemptionRequest p = at(51);
  p.protected_priority = 50;
  refused(choosePreemption(big, p, cache));
}

TEST_CASE("preemptionPolicy Never never preempts", "[preemption]") {
  CHECK(mayPreempt(pod("a").build()));
  CHECK(mayPreempt(pod("a").preemptionPolicy("PreemptLowerPriority").build()));
  CHECK_FALSE(mayPreempt(pod("a").preemptionPolicy("Never").build()));
}

TEST_CASE("minimum runtime and the cooldown keep a gang from being chosen", "[preemption]") {
  Cluster c;
  c.addNode("n0", "r0", 8);
  c.addNode("n1", "r0", 8);
  c.addGang("fresh", 0, 8, {"n0"});
  c.addGang("old", 0, 8, {"n1"});
  c.pods[0].status.start_time = "2027-01-15T09:59:00Z";  // fresh: a minute before kNow
  ClusterCache cache = c.cache();
  GangRequest big = preemptor("big", 1, 8, 10);
  // Without rules "fresh" goes: it has lost the least work.
  CHECK(victimGangs(choosePreemption(big, at(10), cache)) == std::set<std::string>{"fresh"});
  PreemptionRequest p = at(10);
  p.min_runtime_seconds = [](int64_t priority) { return priority >= 0 ? 600 : 0; };
  CHECK(victimGangs(choosePreemption(big, p, cache)) == std::set<std::string>{"old"});
  p.cooling_down = [](const GangKey& k) { return k.name == "old"; };
  refused(choosePreemption(big, p, cache));
}

TEST_CASE("the lowest priority goes first, then the fewest gangs, then the least work lost",
          "[preemption]") {
  Cluster c;
  for (int i = 0; i < 4; ++i) c.addNode("n" + std::to_string(i), "r0", 8);
  c.addGang("p5", 5, 8, {"n0"});
  c.addGang("p1a", 1, 4, {"n1"});
  c.addGang("p1b", 1, 4, {"n1"});
  c.addGang("p1c", 1, 8, {"n2"});
  c.addGang("p1d", 1, 8, {"n3"});
  c.pods.back().status.start_time = "2027-01-15T09:00:00Z";  // p1d: 1 h of work, p1c: 10 h
  ClusterCache cache = c.cache();
  // One whole node: p1d (one unit, priority 1, least work) rather than p5, p1a+p1b or p1c.
  CHECK(victimGangs(choosePreemption(preemptor("big", 1, 8, 10), at(10), cache)) ==
        std::set<std::string>{"p1d"});
  // Two whole nodes: p1c and p1d (fewer units than p1a+p1b+one of them), never p5.
  CHECK(victimGangs(choosePreemption(preemptor("two", 2, 8, 10), at(10), cache)) ==
        std::set<std::string>{"p1c", "p1d"});
}

TEST_CASE("a required rack: the victims are all in the one rack the gang lands in",
          "[preemption]") {
  Cluster c;
  for (int r = 0; r < 4; ++r) {
    for (int n = 0; n < 2; ++n) {
      std::string name = "r" + std::to_string(r) + "-n" + std::to_string(n);
      c.addNode(name, "r" + std::to_string(r), 8);
      c.addGang("g" + std::to_string(r) + std::to_string(n), 0, 8, {name});
    }
  }
  // Rack r2's gangs ran the shortest: the cheapest rack to clear.
  for (proto::Pod& p : c.pods)
    if (p.spec.node_name.starts_with("r2")) p.status.start_time = "2027-01-15T09:30:00Z";
  ClusterCache cache = c.cache();
  GangRequest big = preemptor("big", 2, 8, 100, kRackLevel);
  PreemptionResult r = choosePreemption(big, at(100), cache);
  CHECK(victimGangs(r) == std::set<std::string>{"g20", "g21"});
  std::set<std::string> nodes;
  for (const Assignment& a : std::get<PreemptionPlan>(r).placement.assignments) nodes.insert(a.node);
  CHECK(nodes == std::set<std::string>{"r2-n0", "r2-n1"});
}

TEST_CASE("a PodDisruptionBudget's gang is passed over, and the preemptor waits when only it "
          "would do", "[preemption]") {
  Cluster c;
  c.addNode("n0", "r0", 8);
  c.addNode("n1", "r0", 8);
  c.addGang("guarded", 0, 8, {"n0"});
  c.addGang("other", 0, 8, {"n1"});
  c.pods[0].status.start_time = "2027-01-15T05:00:00Z";  // "other" loses more work: second choice
  ClusterCache cache = c.cache();
  GangRequest big = preemptor("big", 1, 8, 10);
  PreemptionRequest p = at(10);
  CHECK(victimGangs(choosePreemption(big, p, cache)) == std::set<std::string>{"guarded"});
  p.pdb_refuses = [](const GangKey& k, const std::vector<UnitMember>&) { return k.name == "guarded"; };
  CHECK(victimGangs(choosePreemption(big, p, cache)) == std::set<std::string>{"other"});
  p.pdb_refuses = [](const GangKey&, const std::vector<UnitMember>&) { return true; };
  const NoPreemption n = refused(choosePreemption(big, p, cache));
  CHECK(n.pdb_blocked);
  CHECK_THAT(n.message, Catch::Contains("PodDisruptionBudget") && Catch::Contains("ml/guarded"));
}

TEST_CASE("room earlier preemptions are freeing counts: no victims beyond those already going, "
          "and none at all when it is enough", "[preemption]") {
  // Two racks of two full nodes, one single-pod gang on each node; rack r0's gangs ran the
  // shortest, so a gang needing a whole rack would take them.
  Cluster c;
  for (int r = 0; r < 2; ++r) {
    for (int n = 0; n < 2; ++n) c.addNode(absl::StrCat("r", r, "-n", n), absl::StrCat("r", r), 8);
    c.addGang(absl::StrCat("g", r, "a"), 0, 8, {absl::StrCat("r", r, "-n0")});
    c.addGang(absl::StrCat("g", r, "b"), 0, 8, {absl::StrCat("r", r, "-n1")});
  }
  for (proto::Pod& p : c.pods)
    if (p.spec.node_name.starts_with("r0")) p.status.start_time = "2027-01-15T09:30:00Z";
  // (Requests are read once a node advertises the resource: the preemptor after the cache.)
  ClusterCache fresh = c.cache();
  GangRequest big = preemptor("big", 2, 8, 100, kRackLevel);
  CHECK(victimGangs(choosePreemption(big, at(100), fresh)) == std::set<std::string>{"g0a", "g0b"});
  // The scheduler died after marking g1a (or g1a is being deleted): r1 now needs only g1b, which
  // is cheaper than both of r0's. Without counting g1a's room, r0's two would go as well.
  proto::PodCondition mark;
  mark.type = proto::vocabulary::kPreemptedCondition;
  mark.status = "True";
  for (bool marked : {true, false}) {
    Cluster going = c;
    for (proto::Pod& p : going.pods) {
      if (p.meta.name != "g1a") continue;
      if (marked) p.status.conditions.push_back(mark);
      else p.meta.deletion_timestamp = "2027-01-15T09:59:00Z";
    }
    ClusterCache cache = going.cache();
    PreemptionResult r = choosePreemption(big, at(100), cache);
    CHECK(victimGangs(r) == std::set<std::string>{"g1b"});
    std::set<std::string> nodes;
    for (const Assignment& a : std::get<PreemptionPlan>(r).placement.assignments) nodes.insert(a.node);
    CHECK(nodes == std::set<std::string>{"r1-n0", "r1-n1"});
    // Both of r1 going: nothing more to preempt, the plan is to wait there.
    for (proto::Pod& p : going.pods)
      if (p.meta.name == "g1b") p.status.conditions.push_back(mark);
    ClusterCache both = going.cache();
    r = choosePreemption(big, at(100), both);
    REQUIRE(std::holds_alternative<PreemptionPlan>(r));
    CHECK(std::get<PreemptionPlan>(r).victims.empty());
    CHECK(std::get<PreemptionPlan>(r).placement.assignments.size() == 2);
    // Not for a preemptor of the same priority as what is going: their room is not its to count.
    CHECK(refused(choosePreemption(preemptor("eq", 2, 8, 0, kRackLevel), at(0), both)).message.empty());
  }
}

TEST_CASE("the simulation leaves the cache exactly as it was", "[preemption]") {
  Cluster c;
  c.addNode("n0", "r0", 8);
  c.addNode("n1", "r1", 8);
  c.addGang("a", 0, 4, {"n0", "n1"});
  c.addGang("b", 0, 4, {"n0"});
  ClusterCache cache = c.cache();
  (void)cache.topology();
  auto snapshot = [&] {
    std::vector<std::pair<std::string, Resources>> out;
    for (NodeId id = 0; id < cache.slotCount(); ++id)
      out.emplace_back(cache.node(id).name, cache.node(id).requested);
    for (const auto& level : cache.topology().levels)
      for (const Domain& d : level) out.emplace_back(d.value, d.free);
    return out;
  };
  auto before = snapshot();
  size_t pods = cache.podCount();
  (void)choosePreemption(preemptor("big", 2, 8, 10), at(10), cache);
  CHECK(snapshot() == before);
  CHECK(cache.podCount() == pods);
}

// --- minimality against brute force ---------------------------------------------------------

int compare(const std::vector<const VictimUnit*>& a, const std::vector<const VictimUnit*>& b) {
  return cheaper(a, b) ? -1 : cheaper(b, a) ? 1 : 0;
}

TEST_CASE("on small random clusters the victims cost exactly the optimum of all subsets, and "
          "the large-scope search needs every victim it takes",
          "[preemption]") {
  std::mt19937 rng(20261204);
  int preempted = 0, refused_count = 0;
  for (int round = 0; round < 600; ++round) {
    Cluster c;
    const int racks = 1 + static_cast<int>(rng() % 3);
    std::vector<std::string> names;
    for (int r = 0; r < racks; ++r) {
      const int per = 1 + static_cast<int>(rng() % 2);
      for (int n = 0; n < per; ++n) {
        names.push_back("r" + std::to_string(r) + "n" + std::to_string(n));
        c.addNode(names.back(), "r" + std::to_string(r), 8);
      }
    }
    std::map<std::string, int> used;
    const int gangs = 2 + static_cast<int>(rng() % 6);
    for (int g = 0; g < gangs; ++g) {
      const int gpus = 1 << (rng() % 4);  // 1, 2, 4 or 8
      const int size = 1 + static_cast<int>(rng() % 3);
      std::vector<std::string> on;
      for (int i = 0; i < size; ++i) {
        const std::string& n = names[rng() % names.size()];
        if (used[n] + gpus > 8) continue;
        used[n] += gpus;
        on.push_back(n);
      }
      if (on.empty()) continue;
      const int32_t priority = std::vector<int32_t>{0, 1, 2, 5}[rng() % 4];
      c.addGang("g" + std::to_string(g), priority, gpus, on);
      // Different running times, so work lost differs.
      for (size_t i = c.pods.size() - on.size(); i < c.pods.size(); ++i)
        c.pods[i].status.start_time = "2027-01-15T0" + std::to_string(rng() % 10) + ":00:00Z";
    }
    const int size = 1 + static_cast<int>(rng() % 3);
    const int gpus = 1 << (rng() % 4);
    const int32_t priority = rng() % 2 ? 3 : 6;
    const int level = std::vector<int>{-1, kRackLevel, kHostLevel}[rng() % 3];
    GangRequest request = preemptor("p", size, gpus, priority, level);
    ClusterCache cache = c.cache();
    if (std::holds_alternative<GangPlacement>(place(request, cache))) continue;
    const PreemptionRequest p = at(priority);
    std::vector<VictimUnit> candidates = preemptionCandidates(request, p, cache);
    REQUIRE(candidates.size() <= 10);
    // Every subset, each on a cache built without it.
    std::optional<std::vector<const VictimUnit*>> best;
    for (uint32_t mask = 1; mask < (1u << candidates.size()); ++mask) {
      std::vector<const VictimUnit*> subset;
      std::set<std::string> without;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (!(mask & (1u << i))) continue;
        subset.push_back(&candidates[i]);
        without.insert(candidates[i].pods.begin(), candidates[i].pods.end());
      }
      if (best && compare(subset, *best) >= 0) continue;
      ClusterCache emptied = c.cache(without);
      if (std::holds_alternative<GangPlacement>(place(request, emptied))) best = subset;
    }
    PreemptionResult r = choosePreemption(request, p, cache);
    INFO("round " << round << ", " << candidates.size() << " candidates, level " << level);
    if (!best) {
      refused(r);
      ++refused_count;
      continue;
    }
    const PreemptionPlan* plan = std::get_if<PreemptionPlan>(&r);
    REQUIRE(plan != nullptr);
    std::vector<const VictimUnit*> chosen;
    for (const VictimUnit& v : plan->victims) chosen.push_back(&v);
    CHECK(compare(chosen, *best) == 0);
    // And the placement it found holds on a cache without the victims.
    std::set<std::string> without;
    for (const VictimUnit& v : plan->victims) without.insert(v.pods.begin(), v.pods.end());
    ClusterCache emptied = c.cache(without);
    for (size_t i = 0; i < plan->placement.assignments.size(); ++i)
      REQUIRE(emptied.assume(*request.members[i], plan->placement.assignments[i].node).ok());
    for (NodeId id = 0; id < emptied.slotCount(); ++id)
      CHECK(fitsIn(emptied.node(id).requested, emptied.node(id).allocatable));
    ++preempted;
    // The large-scope search (no exhaustive enumeration): a set that fits and has no victim the
    // placement does not need.
    PreemptionRequest greedy = p;
    greedy.limits.exact_units = 0;
    PreemptionResult g = choosePreemption(request, greedy, cache);
    const PreemptionPlan* gp = std::get_if<PreemptionPlan>(&g);
    REQUIRE(gp != nullptr);
    for (size_t drop = 0; drop <= gp->victims.size(); ++drop) {
      std::set<std::string> kept;
      for (size_t i = 0; i < gp->victims.size(); ++i)
        if (i != drop) kept.insert(gp->victims[i].pods.begin(), gp->victims[i].pods.end());
      ClusterCache emptied_g = c.cache(kept);
      // All victims: fits; any one spared: does not.
      CHECK(std::holds_alternative<GangPlacement>(place(request, emptied_g)) ==
            (drop == gp->victims.size()));
    }
  }
  // The rounds exercised both outcomes.
  CHECK(preempted > 100);
  CHECK(refused_count > 10);
}

}  // namespace
}  // namespace muster::scheduler
