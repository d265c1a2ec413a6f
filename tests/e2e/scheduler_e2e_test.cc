// muster-scheduler against the real kube-apiserver + kwok (issue 3's checks). Each case runs
// its own scheduler process and its own nodes (label e2e-run=<run>); its pods select those nodes
// with a nodeSelector, so the suite's 1,000 background nodes never interfere.
#include <catch2/catch.hpp>

#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "proto/codec.h"
#include "proto/informer.h"
#include "proto/quantity.h"
#include "proto/kubeconfig.h"
#include "rapidjson/document.h"
#include "tests/e2e/pods.h"
#include "tests/e2e/support.h"
#include "tests/e2e/webhook.h"

namespace muster::e2e {
namespace {

// Racks of 8-GPU nodes: rack r has nodes <run>-r<r>-n<i>, labelled with unique block/spine/rack.
void makeRacks(Env& env, int racks, int nodes_per_rack) {
  for (int r = 0; r < racks; ++r)
    for (int i = 0; i < nodes_per_rack; ++i)
      createNode(*env.client, absl::StrCat(env.run, "-r", r, "-n", i), env.run,
                 {{"muster.dev/block", env.run + "-b0"},
                  {"muster.dev/spine", env.run + "-s0"},
                  {"muster.dev/rack", absl::StrCat(env.run, "-rack", r)}});
  waitNodesReady(*env.client, env.run, static_cast<size_t>(racks * nodes_per_rack));
}

std::set<std::string> racksOf(Env& env, const std::map<std::string, proto::Pod>& ps,
                              const std::string& prefix) {
  auto ns = listNodes(*env.client, env.run);
  std::set<std::string> out;
  for (const auto& [name, p] : ps)
    if (name.rfind(prefix, 0) == 0 && !p.spec.node_name.empty())
      out.insert(ns.at(p.spec.node_name).meta.labels.at("muster.dev/rack"));
  return out;
}

}  // namespace

TEST_CASE("feasibility rules: each pod that fits is bound, each that must not stays pending") {
  Env env("feas");
  NodeShape plain;
  createNode(*env.client, env.run + "-a", env.run, {{"zone", "a"}}, plain);
  NodeShape tainted;
  tainted.taints = {{"dedicated=gpu", "NoSchedule"}};
  createNode(*env.client, env.run + "-t", env.run, {{"zone", "t"}}, tainted);
  NodeShape cordoned;
  cordoned.unschedulable = true;
  createNode(*env.client, env.run + "-c", env.run, {{"zone", "c"}}, cordoned);
  NodeShape notready;
  notready.kwok = false;
  createNode(*env.client, env.run + "-x", env.run, {{"zone", "x"}}, notready);
  waitNodesReady(*env.client, env.run, 3);

  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());

  auto zone = [&](const std::string& name, const std::string& z) {
    return PodBuilder(name, env.run).select("zone", z);
  };
  // Resources (extended, cpu), the init-container max rule.
  create(*env.client, zone("gpu-fits", "a").withGpus(8));
  create(*env.client, zone("gpu-too-many", "a").withGpus(9));
  create(*env.client, zone("cpu-too-much", "a").withCpu("65"));
  create(*env.client, zone("init-too-many", "a").initGpus(9));
  // Taints: tolerated or not.
  create(*env.client, zone("taint-tolerated", "t").spec(
      R"("tolerations":[{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoSchedule"}])"));
  create(*env.client, zone("taint-not-tolerated", "t"));
  // Cordoned and NotReady nodes.
  create(*env.client, zone("on-cordoned", "c"));
  create(*env.client, zone("on-notready", "x"));
  // nodeSelector that matches nothing; required node affinity In / NotIn.
  create(*env.client, zone("selector-none", "nowhere"));
  create(*env.client, PodBuilder("affinity-in", env.run).spec(
      R"("affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["t"]}]}]}}},"tolerations":[{"operator":"Exists"}])"));
  create(*env.client, PodBuilder("affinity-notin", env.run).spec(
      R"("affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"NotIn","values":["a","t","c","x"]}]}]}}})"));
  // Host ports: the second pod asking for the same port on the one usable node stays pending.
  create(*env.client, zone("port-first", "a").hostPort(8080));
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("port-first").spec.node_name.empty(); }));
  create(*env.client, zone("port-second", "a").hostPort(8080));
  // Required pod affinity to pods that do not exist (and not to itself): kube-scheduler's words.
  create(*env.client, zone("pod-affinity", "a").spec(
      R"("affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"x"}},"topologyKey":"kubernetes.io/hostname"}]}})"));
  // A spread constraint no node can keep: its nodeSelector leaves one eligible zone, fewer than
  // minDomains 2 (so the global minimum is 0), and that zone already runs pods it counts
  // (port-first at least): skew >= 2 > maxSkew 1.
  create(*env.client, zone("spread", "a").spec(absl::StrCat(
      R"("topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule",)"
      R"("labelSelector":{"matchLabels":{"e2e-run":")", env.run, R"("}},"minDomains":2}])")));
  // Something Muster does not implement: never scheduled as if absent.
  create(*env.client, zone("dra", "a").spec(
      R"("resourceClaims":[{"name":"gpu","resourceClaimName":"no-such-claim"}])"));

  const std::map<std::string, std::string> expect_bound = {
      {"gpu-fits", env.run + "-a"}, {"taint-tolerated", env.run + "-t"},
      {"affinity-in", env.run + "-t"}, {"port-first", env.run + "-a"}};
  const std::map<std::string, std::string> expect_pending = {
      {"gpu-too-many", "Insufficient nvidia.com/gpu"},
      {"cpu-too-much", "Insufficient cpu"},
      {"init-too-many", "Insufficient nvidia.com/gpu"},
      {"taint-not-tolerated", "untolerated taint"},
      {"on-cordoned", "unschedulable"},
      {"on-notready", "not-ready"},
      {"selector-none", "didn't match"},
      {"affinity-notin", "didn't match"},
      {"port-second", "free ports"},
      {"pod-affinity", "1 node(s) didn't match pod affinity rules"},
      {"spread", "1 node(s) didn't match pod topology spread constraints"},
      {"dra", "does not implement"}};
  REQUIRE(waitFor([&] {
    auto ps = listPods(*env.client, env.run);
    for (const auto& [name, node] : expect_bound)
      if (!ps.count(name) || ps.at(name).spec.node_name != node) return false;
    for (const auto& [name, why] : expect_pending)
      if (!ps.count(name) || conditionMessage(ps.at(name)).empty()) return false;
    return true;
  }));
  auto ps = listPods(*env.client, env.run);
  for (const auto& [name, why] : expect_pending) {
    INFO(name << ": " << conditionMessage(ps.at(name)));
    CHECK(ps.at(name).spec.node_name.empty());
    CHECK_THAT(conditionMessage(ps.at(name)), Catch::StartsWith("False/Unschedulable: "));
    CHECK_THAT(conditionMessage(ps.at(name)), Catch::Contains(why));
  }
  // The unsupported feature is also an Event on the pod.
  REQUIRE(waitFor([&] {
    auto events = TestCluster::get().kubectl(
        {"get", "events", "-n", "default", "--field-selector",
         "involvedObject.name=dra,reason=FailedScheduling", "-o", "name"});
    return events.ok() && !events->empty();
  }));
}

TEST_CASE("a gang of 8 full-node pods with room for 7 is not bound at all, and one more node binds all 8") {
  Env env("gang8");
  for (int i = 0; i < 7; ++i)
    createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {{"muster.dev/rack", env.run}});
  waitNodesReady(*env.client, env.run, 7);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  for (int i = 0; i < 8; ++i)
    create(*env.client, PodBuilder(absl::StrCat("w", i), env.run).withGpus(8).gang("train", 8));
  REQUIRE(waitFor([&] {
    auto ps = listPods(*env.client, env.run);
    for (const auto& [n, p] : ps)
      if (conditionMessage(p).find("needs 8 pods") == std::string::npos) return false;
    return ps.size() == 8;
  }));
  auto ps = listPods(*env.client, env.run);
  CHECK(boundCount(ps) == 0);
  INFO(conditionMessage(ps.begin()->second));
  CHECK_THAT(conditionMessage(ps.begin()->second),
             Catch::Contains("gang default/train needs 8 pods × 8 nvidia.com/gpu") &&
                 Catch::Contains("can hold 7"));
  // Still none bound a while later (no partial binding while it waits).
  CHECK_FALSE(waitFor([&] { return boundCount(listPods(*env.client, env.run)) > 0; },
                      std::chrono::seconds(3)));
  createNode(*env.client, env.run + "-n7", env.run, {{"muster.dev/rack", env.run}});
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run)) == 8; }));
  std::set<std::string> used;
  for (const auto& [n, p] : listPods(*env.client, env.run)) used.insert(p.spec.node_name);
  CHECK(used.size() == 8);
}

TEST_CASE("two gangs each needing 60% of the cluster: one binds whole, the other waits whole, then binds") {
  Env env("twogangs");
  for (int i = 0; i < 10; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 10);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  for (int i = 0; i < 6; ++i) {
    create(*env.client, PodBuilder(absl::StrCat("a", i), env.run).withGpus(8).gang("ga", 6));
    create(*env.client, PodBuilder(absl::StrCat("b", i), env.run).withGpus(8).gang("gb", 6));
  }
  REQUIRE(waitFor([&] {
    auto ps = listPods(*env.client, env.run);
    return boundCount(ps, "a") + boundCount(ps, "b") == 6;
  }));
  auto ps = listPods(*env.client, env.run);
  const bool a_won = boundCount(ps, "a") == 6;
  CHECK((a_won ? boundCount(ps, "b") : boundCount(ps, "a")) == 0);
  const std::string loser = a_won ? "b" : "a";
  CHECK_FALSE(waitFor([&] { return boundCount(listPods(*env.client, env.run), loser) > 0; },
                      std::chrono::seconds(3)));
  // Delete the winner: the other gang binds, whole.
  for (int i = 0; i < 6; ++i) {
    proto::Request del;
    del.verb = proto::Verb::kDelete;
    del.path = proto::resources::kPods.objectPath("default", absl::StrCat(a_won ? "a" : "b", i));
    del.query = {{"gracePeriodSeconds", "0"}};
    REQUIRE(env.client->callSync(del).ok());
  }
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), loser) == 6; }));
}

TEST_CASE("gangs land in as few racks as they need, and a required rack level never falls back") {
  Env env("topo");
  makeRacks(env, 4, 8);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  for (int i = 0; i < 16; ++i)
    create(*env.client, PodBuilder(absl::StrCat("big", i), env.run).withGpus(8).gang("big", 16));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "big") == 16; }));
  CHECK(racksOf(env, listPods(*env.client, env.run), "big").size() == 2);

  for (int i = 0; i < 8; ++i)
    create(*env.client, PodBuilder(absl::StrCat("small", i), env.run).withGpus(8).gang("small", 8));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "small") == 8; }));
  auto small_racks = racksOf(env, listPods(*env.client, env.run), "small");
  CHECK(small_racks.size() == 1);
  for (const auto& r : racksOf(env, listPods(*env.client, env.run), "big")) CHECK_FALSE(small_racks.count(r));

  // 8 nodes are left, one whole rack; 9 pods required inside one rack cannot fit anywhere.
  for (int i = 0; i < 9; ++i)
    create(*env.client, PodBuilder(absl::StrCat("nine", i), env.run)
                            .withGpus(8)
                            .gang("nine", 9)
                            .annotate("muster.dev/topology-required", "muster.dev/rack"));
  REQUIRE(waitFor([&] {
    auto ps = listPods(*env.client, env.run);
    return ps.count("nine0") && conditionMessage(ps.at("nine0")).find("muster.dev/rack") != std::string::npos;
  }));
  auto ps = listPods(*env.client, env.run);
  CHECK(boundCount(ps, "nine") == 0);
  INFO(conditionMessage(ps.at("nine0")));
  CHECK_THAT(conditionMessage(ps.at("nine0")), Catch::Contains("gang default/nine needs 9 pods"));
  CHECK_FALSE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "nine") > 0; },
                      std::chrono::seconds(3)));
}

TEST_CASE("a stream of 1-pod jobs does not starve a waiting 32-pod gang past the reservation time") {
  // The control: without a reservation (its time out of reach) the same stream starves the gang
  // for the whole window, so the reservation is what places it.
  const bool reservation = GENERATE(true, false);
  Env env(reservation ? "starve" : "starve-control");
  makeRacks(env, 4, 8);
  std::string config = std::string(kTestSchedulerConfig) +
                       (reservation ? "  reservationAfterSeconds: 3\n" : "  reservationAfterSeconds: 100000\n");
  const auto window = reservation ? std::chrono::seconds(60) : std::chrono::seconds(30);
  SchedulerProcess sched(config);
  sched.start();
  REQUIRE(sched.waitReady());
  // Keep every node busy with short single-GPU jobs, then add a gang that needs all 32 nodes.
  int created = 0;
  auto single = [&] {
    create(*env.client, PodBuilder(absl::StrCat("s", created++), env.run)
                            .withGpus(1)
                            .annotate("muster.dev/sim-succeed-after", "3s"));
  };
  for (int i = 0; i < 64; ++i) single();
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "s") >= 64; }));
  for (int i = 0; i < 32; ++i)
    create(*env.client, PodBuilder(absl::StrCat("gang", i), env.run).withGpus(8).gang("wide", 32));
  auto gang_created = std::chrono::steady_clock::now();
  int singles_bound_at_gang = boundCount(listPods(*env.client, env.run), "s");
  bool placed = false;
  while (std::chrono::steady_clock::now() - gang_created < window) {
    for (int i = 0; i < 8; ++i) single();  // ~16 new single jobs a second (paced below)
    if (boundCount(listPods(*env.client, env.run), "gang") == 32) {
      placed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - gang_created).count();
  std::cout << "e2e: the 32-pod gang " << (reservation ? "with" : "without")
            << " a reservation waited " << waited << "s behind a stream of " << created
            << " single-pod jobs, placed: " << placed << std::endl;
  // A scheduler that crashed places nothing: the control would pass for the wrong reason.
  CHECK(sched.alive());
  if (!reservation) {
    CHECK_FALSE(placed);
    return;
  }
  if (!placed) {
    // What holds the gang back, from the API: the pods still on its nodes, its own members.
    std::string on_nodes;
    int gang_bound = 0;
    for (const auto& [name, p] : listPods(*env.client, env.run)) {
      if (name.rfind("gang", 0) == 0) gang_bound += !p.spec.node_name.empty();
      if (name.rfind("s", 0) == 0 && !p.spec.node_name.empty() && p.status.phase != "Succeeded")
        absl::StrAppend(&on_nodes, " ", name, "@", p.spec.node_name, ":", p.status.phase);
    }
    UNSCOPED_INFO("gang members bound: " << gang_bound << "; unfinished single pods on nodes:"
                                         << on_nodes);
    UNSCOPED_INFO("the scheduler's log about the gang:\n" << sched.logLines("default/wide"));
  }
  REQUIRE(placed);
  // Small jobs kept running meanwhile: the gang did not block them while it could not fit.
  CHECK(boundCount(listPods(*env.client, env.run), "s") > singles_bound_at_gang);
}

TEST_CASE("50 gangs of 20, scheduler killed twice mid-binding: every gang ends fully bound, none stays partly bound") {
  Env env("crash");
  for (int i = 0; i < 125; ++i)
    createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run,
               {{"muster.dev/rack", absl::StrCat(env.run, "-rack", i / 8)}});
  waitNodesReady(*env.client, env.run, 125);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());

  // All 1,000 pods go in as fast as the API server takes them, from several requests at once.
  std::vector<std::string> bodies;
  for (int g = 0; g < 50; ++g)
    for (int i = 0; i < 20; ++i)
      bodies.push_back(PodBuilder(absl::StrCat("g", g, "-", i), env.run).withGpus(1).gang(absl::StrCat("g", g), 20).json());
  std::atomic<int> failures{0};
  std::vector<std::thread> creators;
  for (int t = 0; t < 8; ++t) {
    creators.emplace_back([&, t] {
      for (size_t i = t; i < bodies.size(); i += 8) {
        proto::Request req;
        req.verb = proto::Verb::kPost;
        req.path = proto::resources::kPods.collectionPath("default");
        req.body = bodies[i];
        if (!env.client->callSync(req).ok()) failures++;
      }
    });
  }
  auto bound = [&] { return boundCount(listPods(*env.client, env.run)); };
  REQUIRE(waitFor([&] { return bound() >= 100; }, std::chrono::seconds(120), std::chrono::milliseconds(5)));
  sched.kill9();
  int at_first_kill = bound();
  sched.start();
  REQUIRE(sched.waitReady());
  REQUIRE(waitFor([&] { return bound() >= at_first_kill + 200; }, std::chrono::seconds(120),
                  std::chrono::milliseconds(5)));
  sched.kill9();
  int at_second_kill = bound();
  for (auto& t : creators) t.join();
  REQUIRE(failures == 0);
  sched.start();
  REQUIRE(sched.waitReady());
  auto restarted = std::chrono::steady_clock::now();
  std::cout << "e2e: killed at " << at_first_kill << " and " << at_second_kill
            << " of 1000 pods bound" << std::endl;

  // From outside, while the restarted scheduler converges: no gang stays partly bound for more
  // than kPartlyBoundLimit (its bound members are joined or rolled back), and all end bound.
  constexpr auto kPartlyBoundLimit = std::chrono::seconds(15);
  auto partly_bound = [&] {
    std::map<std::string, int> per_gang;
    for (const auto& [name, p] : listPods(*env.client, env.run))
      if (!p.spec.node_name.empty()) per_gang[name.substr(0, name.find('-'))]++;
    std::vector<std::string> partial;
    for (const auto& [g, n] : per_gang)
      if (n != 20) partial.push_back(absl::StrCat(g, "=", n));
    return partial;
  };
  std::map<std::string, std::chrono::steady_clock::time_point> partial_since;  // "g7=13" -> first seen
  std::set<std::string> stuck;
  REQUIRE(waitFor([&] {
    auto now = std::chrono::steady_clock::now();
    std::map<std::string, std::chrono::steady_clock::time_point> still;
    for (const auto& g : partly_bound()) {
      const std::string gang = g.substr(0, g.find('='));
      auto it = partial_since.find(gang);
      still[gang] = it == partial_since.end() ? now : it->second;
      if (now - still[gang] > kPartlyBoundLimit) stuck.insert(g);
    }
    partial_since = std::move(still);
    return bound() == 1000;
  }, std::chrono::seconds(120), std::chrono::milliseconds(200)));
  std::cout << "e2e: converged " << std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count()
            << "s after the last restart" << std::endl;
  INFO("gangs partly bound for more than 15 s: " << absl::StrJoin(stuck, ", "));
  CHECK(stuck.empty());
  CHECK(partly_bound().empty());
}

TEST_CASE("pods naming another scheduler stay pending and untouched") {
  Env env("other");
  createNode(*env.client, env.run + "-n0", env.run, {});
  waitNodesReady(*env.client, env.run, 1);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  create(*env.client, PodBuilder("theirs", env.run).schedulerName("someone-else").withGpus(1));
  create(*env.client, PodBuilder("ours", env.run).withGpus(1));
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("ours").spec.node_name.empty(); }));
  // Ours was decided, and theirs arrived before it: theirs got no node and no condition.
  auto theirs = listPods(*env.client, env.run).at("theirs");
  CHECK(theirs.spec.node_name.empty());
  CHECK(theirs.findCondition("PodScheduled") == nullptr);
}

// A PersistentVolume `pv` of the run, pre-bound to `claim` (claimRef). `source` is its volume
// source and anything more of its spec, as JSON members ending in a comma.
void createVolume(Env& env, const std::string& pv, const std::string& claim,
                  const std::string& access_mode, const std::string& storage_class,
                  const std::string& source) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kPersistentVolumes.collectionPath();
  req.body = absl::StrCat(
      R"({"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":")", pv,
      R"(","labels":{"e2e-run":")", env.run,
      R"("}},"spec":{"capacity":{"storage":"1Gi"},"accessModes":[")", access_mode,
      R"("],"storageClassName":")", storage_class, R"(",)", source,
      R"("claimRef":{"namespace":"default","name":")", claim, R"("}}})");
  INFO(req.body);
  REQUIRE(env.client->callSync(req).ok());
}

// A local volume's source on `node`: the path and its node affinity (for createVolume).
std::string localSource(const std::string& path, const std::string& node) {
  return absl::StrCat(R"("local":{"path":")", path, R"("},)",
                      R"("nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchExpressions":[)",
                      R"({"key":"kubernetes.io/hostname","operator":"In","values":[")", node,
                      R"("]}]}]}},)");
}

// A 1Gi claim of the run; with `volume`, its spec.volumeName (the claim is still Pending).
void createClaim(Env& env, const std::string& claim, const std::string& access_mode,
                 const std::string& storage_class, const std::string& volume = "") {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kPersistentVolumeClaims.collectionPath("default");
  req.body = absl::StrCat(
      R"({"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":")", claim,
      R"(","labels":{"e2e-run":")", env.run,
      R"("}},"spec":{"accessModes":[")", access_mode, R"("],"storageClassName":")",
      storage_class, R"(","resources":{"requests":{"storage":"1Gi"}})",
      volume.empty() ? "" : absl::StrCat(R"(,"volumeName":")", volume, R"(")"), "}}");
  INFO(req.body);
  REQUIRE(env.client->callSync(req).ok());
}

// status.phase Bound on a claim, as the PersistentVolume controller sets it.
void markClaimBound(const std::string& claim) {
  REQUIRE(TestCluster::get()
              .kubectl({"patch", "pvc", claim, "-n", "default", "--subresource=status",
                        "--type=merge", "-p", R"({"status":{"phase":"Bound"}})"})
              .ok());
}

// A PersistentVolume `pv` and the claim `claim` bound to it, as a provisioner and the PV controller
// leave them (no controller runs here: the test writes both sides of the binding).
void boundClaim(Env& env, const std::string& claim, const std::string& pv,
                const std::string& access_mode, const std::string& storage_class,
                const std::string& source) {
  createVolume(env, pv, claim, access_mode, storage_class, source);
  createClaim(env, claim, access_mode, storage_class, pv);
  markClaimBound(claim);
}

// The pod with a volume of `claim`.
PodBuilder withClaim(PodBuilder b, const std::string& claim) {
  return b.spec(absl::StrCat(R"("volumes":[{"name":"data","persistentVolumeClaim":{"claimName":")",
                             claim, R"("}}])"));
}

TEST_CASE("pods with bound claims go where their local volumes live, a gang included") {
  Env env("pv");
  for (int i = 0; i < 3; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 3);
  // A bound claim and its local PersistentVolume on `node`.
  auto volumeOn = [&](const std::string& claim, const std::string& node) {
    boundClaim(env, claim, absl::StrCat(env.run, "-pv-", claim), "ReadWriteOnce", "local",
               localSource("/mnt/disks/" + claim, node));
  };
  const std::string c0 = env.run + "-w0", c1 = env.run + "-w1", gone = env.run + "-gone";
  volumeOn(c0, env.run + "-n2");
  volumeOn(c1, env.run + "-n0");
  volumeOn(gone, env.run + "-n9");  // a node that does not exist (any more)

  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  create(*env.client, withClaim(PodBuilder("w0", env.run).withGpus(8).gang("g", 2), c0));
  create(*env.client, withClaim(PodBuilder("w1", env.run).withGpus(8).gang("g", 2), c1));
  create(*env.client, withClaim(PodBuilder("stranded", env.run).withGpus(1), gone));
  INFO(sched.logTail());
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return boundCount(pods, "w") == 2 &&
           conditionMessage(pods.at("stranded")).find("volume node affinity conflict") !=
               std::string::npos;
  }));
  auto pods = listPods(*env.client, env.run);
  CHECK(pods.at("w0").spec.node_name == env.run + "-n2");
  CHECK(pods.at("w1").spec.node_name == env.run + "-n0");
  CHECK(pods.at("stranded").spec.node_name.empty());
  // Other nodes (the suite's background and other cases') fail its nodeSelector; this run's 3
  // fail its volume.
  const std::string message = conditionMessage(pods.at("stranded"));
  CHECK(message.rfind("False/Unschedulable: 0/", 0) == 0);
  CHECK(absl::EndsWith(message, ", 3 node(s) had volume node affinity conflict."));
  (void)TestCluster::get().kubectl({"delete", "pvc,pv", "-n", "default", "-l", "e2e-run=" + env.run,
                                    "--wait=false"});
}

// A CSINode for `node` whose driver `driver` attaches at most `count` volumes.
void setCSINode(Env& env, const std::string& node, const std::string& driver, int count) {
  const std::string body = absl::StrCat(
      R"({"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":")", node,
      R"(","labels":{"e2e-run":")", env.run, R"("}},"spec":{"drivers":[{"name":")", driver,
      R"(","nodeID":")", node, R"(","allocatable":{"count":)", count, "}}]}}");
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kCSINodes.collectionPath();
  req.body = body;
  if (env.client->callSync(req).ok()) return;
  INFO(body);
  REQUIRE(TestCluster::get()
              .kubectl({"patch", "csinode", node, "--type=merge", "-p",
                        absl::StrCat(R"({"spec":{"drivers":[{"name":")", driver, R"(","nodeID":")",
                                     node, R"(","allocatable":{"count":)", count, "}}]}}")})
              .ok());
}

TEST_CASE("node volume limits: a node's CSINode caps the volumes its pods attach, a gang's "
          "included") {
  Env env("vlim");
  const std::string driver = "csi.e2e.test";
  for (int i = 0; i < 2; ++i) {
    createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
    setCSINode(env, absl::StrCat(env.run, "-n", i), driver, 1);
  }
  waitNodesReady(*env.client, env.run, 2);
  std::vector<std::string> claims;
  for (int i = 0; i < 3; ++i) {
    const std::string claim = absl::StrCat(env.run, "-c", i);
    boundClaim(env, claim, claim + "-pv", "ReadWriteOnce", "",
               absl::StrCat(R"("csi":{"driver":")", driver, R"(","volumeHandle":")", claim, R"("},)"));
    claims.push_back(claim);
  }
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  // Packing alone would put both one-GPU members on one node; each node attaches one volume.
  create(*env.client, withClaim(PodBuilder("g0", env.run).withGpus(1).gang("g", 2), claims[0]));
  create(*env.client, withClaim(PodBuilder("g1", env.run).withGpus(1).gang("g", 2), claims[1]));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "g") == 2; }));
  auto pods = listPods(*env.client, env.run);
  CHECK(pods.at("g0").spec.node_name != pods.at("g1").spec.node_name);
  // A third volume fits nowhere, in kube-scheduler's words.
  create(*env.client, withClaim(PodBuilder("third", env.run).withGpus(1), claims[2]));
  REQUIRE(waitFor([&] {
    return absl::EndsWith(conditionMessage(listPods(*env.client, env.run).at("third")),
                          ", 2 node(s) exceed max volume count.");
  }));
  // The driver on n1 now attaches 2: the pod is decided again and binds there.
  setCSINode(env, env.run + "-n1", driver, 2);
  REQUIRE(waitFor([&] {
    return listPods(*env.client, env.run).at("third").spec.node_name == env.run + "-n1";
  }));
  CHECK(sched.alive());
  (void)TestCluster::get().kubectl({"delete", "pvc,pv", "-n", "default", "-l", "e2e-run=" + env.run,
                                    "--wait=false"});
  (void)TestCluster::get().kubectl({"delete", "csinodes", "-l", "e2e-run=" + env.run, "--wait=false"});
}

// The run's claims: name → the node in their volume.kubernetes.io/selected-node ("" without),
// and whether they are bound.
struct ClaimState {
  std::string selected_node;
  std::string volume_name;
};
std::map<std::string, ClaimState> runClaims(Env& env) {
  proto::Request req;
  req.verb = proto::Verb::kGet;
  req.path = proto::resources::kPersistentVolumeClaims.collectionPath("default") +
             "?labelSelector=e2e-run%3D" + env.run;
  auto body = env.client->callSync(req);
  REQUIRE(body.ok());
  rapidjson::Document d;
  d.Parse(body->c_str());
  std::map<std::string, ClaimState> out;
  for (const auto& item : d["items"].GetArray()) {
    ClaimState c;
    const auto& meta = item["metadata"];
    if (meta.HasMember("annotations") &&
        meta["annotations"].HasMember("volume.kubernetes.io/selected-node"))
      c.selected_node = meta["annotations"]["volume.kubernetes.io/selected-node"].GetString();
    if (item["spec"].HasMember("volumeName")) c.volume_name = item["spec"]["volumeName"].GetString();
    out[meta["name"].GetString()] = c;
  }
  return out;
}

// What an external provisioner and the PersistentVolume controller do (neither runs here): each
// claim with a selected node and no volume gets a local volume on that node, pre-bound to it,
// and is bound to it. Returns how many claims it provisioned.
int provisionSelected(Env& env, const std::string& storage_class) {
  int n = 0;
  for (const auto& [claim, state] : runClaims(env)) {
    if (state.selected_node.empty() || !state.volume_name.empty()) continue;
    const std::string pv = env.run + "-pv-" + claim;
    createVolume(env, pv, claim, "ReadWriteOnce", storage_class,
                 localSource("/mnt/" + claim, state.selected_node));
    REQUIRE(TestCluster::get()
                .kubectl({"patch", "pvc", claim, "-n", "default", "--type=merge", "-p",
                          absl::StrCat(R"({"spec":{"volumeName":")", pv, R"("}})")})
                .ok());
    markClaimBound(claim);
    ++n;
  }
  return n;
}

TEST_CASE("a gang of 8 whose claims wait for their first consumer: volumes provisioned for the "
          "chosen nodes, then the pods bound, and none asked for when the gang cannot fit") {
  Env env("wffc");
  for (int i = 0; i < 4; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 4);
  const std::string storage_class = env.run + "-wffc";
  {
    proto::Request req;
    req.verb = proto::Verb::kPost;
    req.path = proto::resources::kStorageClasses.collectionPath();
    req.body = absl::StrCat(
        R"({"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":")",
        storage_class, R"(","labels":{"e2e-run":")", env.run,
        R"("}},"provisioner":"e2e.muster.dev/fake","volumeBindingMode":"WaitForFirstConsumer"})");
    REQUIRE(env.client->callSync(req).ok());
  }
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  INFO(sched.logTail());

  // 8 × 8 GPUs on 4 nodes of 8: cannot fit, and no claim is touched.
  for (int i = 0; i < 8; ++i) {
    const std::string claim = absl::StrCat(env.run, "-big-", i);
    createClaim(env, claim, "ReadWriteOnce", storage_class);
    create(*env.client, withClaim(PodBuilder(absl::StrCat("big", i), env.run).withGpus(8).gang("big", 8), claim));
  }
  REQUIRE(waitFor([&] {
    return conditionMessage(listPods(*env.client, env.run).at("big0")).find("Unschedulable") !=
           std::string::npos;
  }));
  for (const auto& [claim, state] : runClaims(env)) CHECK(state.selected_node.empty());
  for (int i = 0; i < 8; ++i)
    (void)TestCluster::get().kubectl({"delete", "pod", absl::StrCat("big", i), "-n", "default",
                                      "--wait=false", "--grace-period=0", "--force"});

  // 8 × 4 GPUs: fits; each claim is asked for on its pod's node, and nothing binds before.
  for (int i = 0; i < 8; ++i) {
    const std::string claim = absl::StrCat(env.run, "-w", i);
    createClaim(env, claim, "ReadWriteOnce", storage_class);
    create(*env.client, withClaim(PodBuilder(absl::StrCat("w", i), env.run).withGpus(4).gang("g", 8), claim));
  }
  REQUIRE(waitFor([&] {
    int selected = 0;
    for (const auto& [claim, state] : runClaims(env))
      if (claim.rfind(env.run + "-w", 0) == 0 && !state.selected_node.empty()) ++selected;
    return selected == 8;
  }));
  CHECK(boundCount(listPods(*env.client, env.run), "w") == 0);
  CHECK(provisionSelected(env, storage_class) == 8);
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "w") == 8; }));
  auto pods = listPods(*env.client, env.run);
  auto claims = runClaims(env);
  for (int i = 0; i < 8; ++i) {
    CHECK(pods.at(absl::StrCat("w", i)).spec.node_name ==
          claims.at(absl::StrCat(env.run, "-w", i)).selected_node);
  }
  for (const auto& [claim, state] : claims)
    if (claim.rfind(env.run + "-big-", 0) == 0) CHECK(state.selected_node.empty());
  (void)TestCluster::get().kubectl({"delete", "pvc,pv,storageclass", "-A", "-l",
                                    "e2e-run=" + env.run, "--wait=false"});
}

TEST_CASE("a ReadWriteOncePod claim: a second pod using it waits, and binds once the first is gone") {
  Env env("rwop");
  for (int i = 0; i < 2; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 2);
  // A claim bound to a volume reachable from every node.
  const std::string claim = env.run + "-data";
  boundClaim(env, claim, env.run + "-pv", "ReadWriteOncePod", "manual",
             absl::StrCat(R"("hostPath":{"path":"/mnt/)", claim, R"("},)"));
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  create(*env.client, withClaim(PodBuilder("rwop-first", env.run).withGpus(1), claim));
  INFO(sched.logTail());
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("rwop-first").spec.node_name.empty(); }));
  create(*env.client, withClaim(PodBuilder("rwop-second", env.run).withGpus(1), claim));
  REQUIRE(waitFor([&] {
    return conditionMessage(listPods(*env.client, env.run).at("rwop-second"))
               .find("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                     "access mode already in-use by another pod") != std::string::npos;
  }));
  CHECK(listPods(*env.client, env.run).at("rwop-second").spec.node_name.empty());
  // The first pod goes away: the claim is free, and the second pod is placed.
  REQUIRE(TestCluster::get()
              .kubectl({"delete", "pod", "rwop-first", "-n", "default", "--grace-period=0",
                        "--force", "--wait=false"})
              .ok());
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("rwop-second").spec.node_name.empty(); }));
  (void)TestCluster::get().kubectl({"delete", "pvc,pv", "-n", "default", "-l", "e2e-run=" + env.run,
                                    "--wait=false"});
}

// --- binds the API server refuses, and pods that must not be bound --------------------------------

namespace {

std::string nodeOf(Env& env, const std::string& pod) {
  auto pods = listPods(*env.client, env.run);
  auto it = pods.find(pod);
  return it == pods.end() ? "" : it->second.spec.node_name;
}

bool gone(Env& env, const std::string& pod) { return !listPods(*env.client, env.run).count(pod); }

// These two run inside webhook callbacks (not the test's thread: no assertions there); the
// caller checks the returned status on its own thread.
absl::Status bindTo(proto::Client& client, const std::string& pod, const std::string& node) {
  proto::Binding b;
  b.meta.name = pod;
  b.meta.namespace_ = "default";
  b.target_node = node;
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kPods.objectPath("default", pod, "binding");
  req.body = proto::encode(b);
  return client.callSync(req).status();
}

absl::Status deletePod(proto::Client& client, const std::string& pod) {
  proto::Request req;
  req.verb = proto::Verb::kDelete;
  req.path = proto::resources::kPods.objectPath("default", pod);
  req.query = {{"gracePeriodSeconds", "0"}};
  return client.callSync(req).status();
}

// Two 8-GPU kwok nodes <run>-a and <run>-b, and a scheduler that has listed them.
struct RefusalEnv : Env {
  SchedulerProcess sched{kTestSchedulerConfig};
  explicit RefusalEnv(const std::string& prefix) : Env(prefix) {
    createNode(*client, run + "-a", run, {});
    createNode(*client, run + "-b", run, {});
    waitNodesReady(*client, run, 2);
  }
  void startScheduler() {
    sched.start();
    REQUIRE(sched.waitReady());
  }
  // The scheduler is alive and still places new work.
  void stillServing(const std::string& name) {
    REQUIRE(sched.alive());
    create(*client, PodBuilder(name, run).withGpus(1));
    INFO(sched.logTail());
    REQUIRE(waitFor([&] { return !nodeOf(*this, name).empty(); }));
    CHECK(sched.alive());
  }
};

}  // namespace

TEST_CASE("a bind refused with 403 or 500 is reported on the pod and retried, and the scheduler keeps serving") {
  const int code = GENERATE(403, 500);
  RefusalEnv env(absl::StrCat("refused-", code));
  std::atomic<int> refusals{0};
  BindingWebhook hook(*env.client, [&](const BindingWebhook::Review& r) {
    if (r.pod == "victim" && refusals < 2) {
      ++refusals;
      return BindingWebhook::refuse(code, "e2e: binding refused on purpose");
    }
    return BindingWebhook::allow();
  });
  env.startScheduler();
  create(*env.client, PodBuilder("victim", env.run).withGpus(1));
  INFO(env.sched.logTail());
  REQUIRE(waitFor([&] { return !nodeOf(env, "victim").empty(); }));
  CHECK(hook.reviewsOf("victim") == 3);  // refused, refused, bound
  REQUIRE(waitFor([&] {
    return eventMessages("victim", "FailedScheduling").find("binding refused on purpose") !=
           std::string::npos;
  }, std::chrono::seconds(30)));
  env.stillServing("after");
}

TEST_CASE("a pod deleted while its bind is in flight: the bind fails, nothing else is disturbed") {
  RefusalEnv env("refused-deleted");
  std::mutex mu;
  std::optional<absl::Status> deleted;
  BindingWebhook hook(*env.client, [&](const BindingWebhook::Review& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (r.pod == "victim" && !deleted) deleted = deletePod(*env.client, "victim");
    return BindingWebhook::allow();
  });
  env.startScheduler();
  create(*env.client, PodBuilder("victim", env.run).withGpus(1));
  INFO(env.sched.logTail());
  REQUIRE(waitFor([&] { return hook.reviewsOf("victim") >= 1 && gone(env, "victim"); }));
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(deleted.has_value());
    CHECK(deleted->ok());
  }
  env.stillServing("after");
  CHECK(hook.reviewsOf("victim") == 1);  // gone: never tried again
}

TEST_CASE("a pod bound elsewhere while muster's bind is in flight stays where it was bound") {
  RefusalEnv env("refused-elsewhere");
  std::mutex mu;
  std::string elsewhere;
  std::optional<absl::Status> bound_elsewhere;
  BindingWebhook hook(*env.client, [&](const BindingWebhook::Review& r) {
    std::unique_lock<std::mutex> lock(mu);
    if (r.pod == "victim" && elsewhere.empty()) {
      // Someone else binds it first, to the other node; muster's bind then conflicts. (That
      // binding comes through here too, on another thread, and is let through.)
      elsewhere = r.node == env.run + "-a" ? env.run + "-b" : env.run + "-a";
      const std::string target = elsewhere;
      lock.unlock();
      absl::Status s = bindTo(*env.client, "victim", target);
      lock.lock();
      bound_elsewhere = s;
    }
    return BindingWebhook::allow();
  });
  env.startScheduler();
  create(*env.client, PodBuilder("victim", env.run).withGpus(1));
  INFO(env.sched.logTail());
  REQUIRE(waitFor([&] { return hook.reviewsOf("victim") == 2 && !nodeOf(env, "victim").empty(); }));
  env.stillServing("after");
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(bound_elsewhere.has_value());
  CHECK(bound_elsewhere->ok());
  CHECK(nodeOf(env, "victim") == elsewhere);
  CHECK(hook.reviewsOf("victim") == 2);  // the other binding, then muster's (refused: conflict)
}

TEST_CASE("a gang member whose bind is always refused: its bound gang-mates are evicted, none stays bound") {
  RefusalEnv env("refused-gang");
  // A ConfigMap stands in for the gang's controller, so rollback may evict the members.
  proto::Request owner;
  owner.verb = proto::Verb::kPost;
  owner.path = proto::resources::kConfigMaps.collectionPath("default");
  owner.body = absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
                            env.run, R"(-owner"}})");
  auto created = env.client->callSync(owner);
  REQUIRE(created.ok());
  rapidjson::Document cm;
  cm.Parse(created->c_str());
  const std::string owner_ref = absl::StrCat(
      R"("ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":")", env.run,
      R"(-owner","uid":")", cm["metadata"]["uid"].GetString(), R"(","controller":true}])");
  BindingWebhook hook(*env.client, [&](const BindingWebhook::Review& r) {
    return r.pod == "g-1" ? BindingWebhook::refuse(403, "e2e: g-1 may not be bound")
                          : BindingWebhook::allow();
  });
  env.startScheduler();
  for (int i = 0; i < 3; ++i)
    create(*env.client, PodBuilder(absl::StrCat("g-", i), env.run).withGpus(4).gang("g", 3).meta(owner_ref));
  INFO(env.sched.logTail());
  // Some members bind; after repeated refusals they are rolled back and evicted.
  REQUIRE(waitFor([&] { return !eventMessages("g-0", "GangEvicted").empty() ||
                               !eventMessages("g-2", "GangEvicted").empty(); },
                  std::chrono::seconds(90)));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "g-") == 0; },
                  std::chrono::seconds(90)));
  CHECK(hook.reviewsOf("g-1") >= 3);
  CHECK(nodeOf(env, "g-1").empty());
  env.stillServing("after");
  (void)env.client->callSync([&] {
    proto::Request del;
    del.verb = proto::Verb::kDelete;
    del.path = proto::resources::kConfigMaps.objectPath("default", env.run + "-owner");
    return del;
  }());
}

TEST_CASE("a gated member is never bound and blocks its gang until the gate is removed") {
  RefusalEnv env("gated");
  BindingWebhook hook(*env.client, [](const BindingWebhook::Review&) { return BindingWebhook::allow(); });
  env.startScheduler();
  create(*env.client, PodBuilder("w0", env.run).withGpus(1).gang("g", 2));
  create(*env.client, PodBuilder("w1", env.run).withGpus(1).gang("g", 2)
                          .spec(R"("schedulingGates":[{"name":"e2e.muster.dev/hold"}])"));
  INFO(env.sched.logTail());
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return conditionMessage(pods.at("w1")) ==
               "False/SchedulingGated: Scheduling is blocked due to non-empty scheduling gates" &&
           conditionMessage(pods.at("w0")).find("waiting for its members") != std::string::npos;
  }));
  env.stillServing("after");  // decided after both members: they had their turn
  CHECK(hook.reviewsOf("w0") == 0);
  CHECK(hook.reviewsOf("w1") == 0);
  auto patched = TestCluster::get().kubectl(
      {"patch", "pod", "w1", "-n", "default", "--type=json",
       "-p", R"([{"op":"remove","path":"/spec/schedulingGates"}])"});
  REQUIRE(patched.ok());
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "w") == 2; }));
  CHECK(env.sched.alive());
}

TEST_CASE("a pending pod that is being deleted is never bound") {
  RefusalEnv env("terminating");
  BindingWebhook hook(*env.client, [](const BindingWebhook::Review&) { return BindingWebhook::allow(); });
  // A finalizer keeps it, deletionTimestamp set, for as long as the test needs.
  create(*env.client, PodBuilder("leaving", env.run).withGpus(1)
                          .meta(R"("finalizers":["e2e.muster.dev/hold"])"));
  auto deleted = TestCluster::get().kubectl({"delete", "pod", "leaving", "-n", "default", "--wait=false"});
  REQUIRE(deleted.ok());
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return pods.count("leaving") && pods.at("leaving").meta.deletion_timestamp.has_value();
  }));
  env.startScheduler();
  env.stillServing("after");  // listed after "leaving": that one was decided first
  CHECK(nodeOf(env, "leaving").empty());
  CHECK(hook.reviewsOf("leaving") == 0);
  REQUIRE(TestCluster::get().kubectl({"patch", "pod", "leaving", "-n", "default", "--type=merge",
                                      "-p", R"({"metadata":{"finalizers":null}})"}).ok());
}

}  // namespace muster::e2e

namespace muster::e2e {

// The managers that wrote the pod through its status subresource (metadata.managedFields).
std::set<std::string> statusWriters(proto::Client& client, const std::string& pod) {
  proto::Request req;
  req.path = proto::resources::kPods.objectPath("default", pod);
  auto body = client.callSync(req);
  REQUIRE(body.ok());
  rapidjson::Document doc;
  doc.Parse(body->c_str());
  std::set<std::string> managers;
  const auto& meta = doc["metadata"];
  if (!meta.HasMember("managedFields")) return managers;
  for (const auto& f : meta["managedFields"].GetArray()) {
    if (f.HasMember("subresource") && std::string(f["subresource"].GetString()) == "status")
      managers.insert(f["manager"].GetString());
  }
  return managers;
}

TEST_CASE("a gang whose members arrive within the grace costs no status write, and one still short after it is told") {
  Env env("grace");
  for (int i = 0; i < 3; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 3);
  SchedulerProcess sched(kTestSchedulerConfig);  // queue.waitingConditionAfterSeconds: 5 (default)
  sched.start();
  REQUIRE(sched.waitReady());
  INFO(sched.logTail());
  // Three members one second apart, as a controller creating them one by one would (the spacing
  // is the scenario, not a wait for something to happen).
  const auto first = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_until(first + std::chrono::seconds(i));
    create(*env.client, PodBuilder(absl::StrCat("w", i), env.run).withGpus(1).gang("g", 3));
  }
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "w") == 3; }));
  for (int i = 0; i < 3; ++i) {
    const std::string pod = absl::StrCat("w", i);
    INFO(pod);
    CHECK(statusWriters(*env.client, pod).count("muster-scheduler") == 0);
  }
  // The control: a gang that stays short is told after the grace, and that write is seen.
  create(*env.client, PodBuilder("lone", env.run).withGpus(1).gang("short", 2));
  REQUIRE(waitFor([&] {
    return conditionMessage(listPods(*env.client, env.run).at("lone")).find("waiting for its members") !=
           std::string::npos;
  }));
  const std::set<std::string> lone_writers = statusWriters(*env.client, "lone");
  INFO("status writers of lone: " << absl::StrJoin(lone_writers, ", "));
  CHECK(lone_writers.count("muster-scheduler") == 1);
  const proto::Pod lone = listPods(*env.client, env.run).at("lone");
  const auto* condition = lone.findCondition("PodScheduled");
  REQUIRE(condition != nullptr);
  INFO("created " << lone.meta.creation_timestamp << ", condition " << condition->last_transition_time);
  absl::Time created, told;
  REQUIRE(absl::ParseTime(absl::RFC3339_full, lone.meta.creation_timestamp, &created, nullptr));
  REQUIRE(absl::ParseTime(absl::RFC3339_full, condition->last_transition_time, &told, nullptr));
  CHECK(told - created >= absl::Seconds(4));  // 5 s, at the API's one-second resolution
  CHECK(sched.alive());
}

TEST_CASE("inter-pod anti-affinity: a gang gets one member per node, and later pods keep away") {
  Env env("ipa");
  makeRacks(env, 1, 4);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  const std::string role = env.run + "-worker";
  auto worker = [&](const std::string& name, const std::string& gang, int size) {
    return PodBuilder(name, env.run).withGpus(1).gang(gang, size).label("role", role)
        .spec(absl::StrCat(R"("affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[)"
                           R"({"labelSelector":{"matchLabels":{"role":")", role,
                           R"("}},"topologyKey":"kubernetes.io/hostname"}]}})"));
  };
  for (int i = 0; i < 4; ++i) create(*env.client, worker(absl::StrCat("a", i), "first", 4));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "a") == 4; }));
  std::set<std::string> nodes;
  for (const auto& [name, p] : listPods(*env.client, env.run))
    if (name.rfind("a", 0) == 0) nodes.insert(p.spec.node_name);
  CHECK(nodes.size() == 4);  // 4 one-GPU pods on 4 nodes of 8 GPUs: the term, not the room
  // Every node now runs a worker: a second gang of them waits whole, in kube-scheduler's words.
  for (int i = 0; i < 2; ++i) create(*env.client, worker(absl::StrCat("b", i), "second", 2));
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return pods.count("b0") &&
           conditionMessage(pods.at("b0")).find("4 node(s) didn't match pod anti-affinity rules") !=
               std::string::npos;
  }));
  CHECK(boundCount(listPods(*env.client, env.run), "b") == 0);
  // The same term with the namespace chosen by its labels (a Namespace informer): kept away too.
  const std::string ns_label = env.run + "-ns";
  REQUIRE(TestCluster::get().kubectl({"label", "namespace", "default", ns_label + "=yes", "--overwrite"}).ok());
  create(*env.client, PodBuilder("c0", env.run).withGpus(1).spec(absl::StrCat(
      R"("affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[)"
      R"({"labelSelector":{"matchLabels":{"role":")", role, R"("}},"namespaceSelector":)"
      R"({"matchLabels":{")", ns_label, R"(":"yes"}},"topologyKey":"kubernetes.io/hostname"}]}})")));
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return pods.count("c0") &&
           conditionMessage(pods.at("c0")).find("4 node(s) didn't match pod anti-affinity rules") !=
               std::string::npos;
  }));
  (void)TestCluster::get().kubectl({"label", "namespace", "default", ns_label + "-"});
  CHECK(sched.alive());
}

TEST_CASE("a launcher and its workers with terms toward each other: the workers in the launcher's "
          "rack, the launcher on a node of its own, or the gang waits whole") {
  Env env("ipl");
  makeRacks(env, 2, 3);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  // The workers require the launcher in their rack; the launcher requires no worker on its node.
  auto term = [](const std::string& kind, const std::string& role, const std::string& key) {
    return absl::StrCat(R"("affinity":{")", kind, R"(":{"requiredDuringSchedulingIgnoredDuringExecution":[)"
                        R"({"labelSelector":{"matchLabels":{"role":")", role, R"("}},"topologyKey":")", key,
                        R"("}]}})");
  };
  auto job = [&](const std::string& prefix, int workers) {
    const std::string launcher_role = env.run + prefix + "-launcher";
    const std::string worker_role = env.run + prefix + "-worker";
    create(*env.client, PodBuilder(prefix + "-launcher", env.run).gang(prefix, workers + 1)
                            .label("role", launcher_role)
                            .spec(term("podAntiAffinity", worker_role, "kubernetes.io/hostname")));
    for (int i = 0; i < workers; ++i)
      create(*env.client, PodBuilder(absl::StrCat(prefix, "-w", i), env.run).withGpus(4)
                              .gang(prefix, workers + 1).label("role", worker_role)
                              .spec(term("podAffinity", launcher_role, "muster.dev/rack")));
  };
  job("a", 4);
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "a-") == 5; }));
  auto pods = listPods(*env.client, env.run);
  CHECK(racksOf(env, pods, "a-").size() == 1);
  std::set<std::string> worker_nodes;
  for (const auto& [name, p] : pods)
    if (name.rfind("a-w", 0) == 0) worker_nodes.insert(p.spec.node_name);
  CHECK(worker_nodes.size() == 2);  // 4 workers of 4 GPUs pack 2 per 8-GPU node
  CHECK_FALSE(worker_nodes.contains(pods.at("a-launcher").spec.node_name));
  // Six workers fill the free rack's three nodes, leaving the launcher no node there: pending
  // whole, in kube-scheduler's words.
  job("b", 6);
  REQUIRE(waitFor([&] {
    auto ps = listPods(*env.client, env.run);
    return ps.count("b-w0") &&
           conditionMessage(ps.at("b-w0")).find("didn't match pod affinity rules") != std::string::npos;
  }));
  CHECK(boundCount(listPods(*env.client, env.run), "b-") == 0);
  CHECK(sched.alive());
}

TEST_CASE("preferred inter-pod terms: a pod goes near what it prefers and away from what it avoids") {
  Env env("ipp");
  makeRacks(env, 1, 2);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  const std::string role = env.run + "-x";
  create(*env.client, PodBuilder("x0", env.run).withGpus(4).label("role", role));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "x0") == 1; }));
  const std::string x_node = listPods(*env.client, env.run).at("x0").spec.node_name;
  auto term = [&](const char* kind) {
    return absl::StrCat(R"("affinity":{")", kind, R"(":{"preferredDuringSchedulingIgnoredDuringExecution":[)"
                        R"({"weight":100,"podAffinityTerm":{"labelSelector":{"matchLabels":{"role":")",
                        role, R"("}},"topologyKey":"kubernetes.io/hostname"}}]}})");
  };
  // Packing alone would put both 1-GPU pods next to x0 (the fuller node).
  create(*env.client, PodBuilder("away", env.run).withGpus(1).spec(term("podAntiAffinity")));
  create(*env.client, PodBuilder("near", env.run).withGpus(1).spec(term("podAffinity")));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run)) == 3; }));
  auto pods = listPods(*env.client, env.run);
  CHECK(pods.at("near").spec.node_name == x_node);
  CHECK(pods.at("away").spec.node_name != x_node);
  CHECK(sched.alive());
}

TEST_CASE("topology spread: single pods keep maxSkew over nodes where packing would stack them") {
  Env env("tsc");
  makeRacks(env, 1, 2);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  const std::string app = env.run + "-web";
  auto replica = [&](const std::string& name) {
    return PodBuilder(name, env.run).withGpus(1).label("app", app).spec(absl::StrCat(
        R"("topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"kubernetes.io/hostname",)"
        R"("whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":")", app, R"("}}}])"));
  };
  // One at a time, as a Deployment's replicas arrive: each sees the ones before it.
  for (int i = 0; i < 4; ++i) {
    create(*env.client, replica(absl::StrCat("r", i)));
    REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "r") == i + 1; }));
  }
  std::map<std::string, int> per_node;
  for (const auto& [name, p] : listPods(*env.client, env.run)) ++per_node[p.spec.node_name];
  CHECK(per_node.size() == 2);
  for (const auto& [node, n] : per_node) CHECK(n == 2);
  CHECK(sched.alive());
}

TEST_CASE("default topology spread: pods a Service selects spread over nodes, others pack") {
  Env env("dts");
  makeRacks(env, 1, 2);
  const std::string app = env.run + "-web";
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kServices.collectionPath("default");
  req.body = absl::StrCat(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")", app,
                          R"(","labels":{"e2e-run":")", env.run,
                          R"("}},"spec":{"clusterIP":"None","selector":{"app":")", app, R"("}}})");
  REQUIRE(env.client->callSync(req).ok());
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  // One at a time, as a Deployment's replicas arrive. No constraint of their own: kube-scheduler's
  // System defaults (maxSkew 3 per host, a preference) count the Service's pods.
  for (int i = 0; i < 4; ++i) {
    create(*env.client, PodBuilder(absl::StrCat("r", i), env.run).withGpus(1).label("app", app));
    REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "r") == i + 1; }));
  }
  for (int i = 0; i < 2; ++i) {
    create(*env.client, PodBuilder(absl::StrCat("p", i), env.run).withGpus(1));
    REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "p") == i + 1; }));
  }
  std::map<std::string, int> replicas, plain;
  for (const auto& [name, p] : listPods(*env.client, env.run))
    ++(name[0] == 'r' ? replicas : plain)[p.spec.node_name];
  CHECK(replicas.size() == 2);
  for (const auto& [node, n] : replicas) CHECK(n == 2);
  CHECK(plain.size() == 1);  // packed onto one node, as without a Service
  CHECK(sched.alive());
  (void)TestCluster::get().kubectl({"delete", "service", app, "-n", "default", "--wait=false"});
}

TEST_CASE("topology spread inside a gang: 8 members spread 4 and 4 over racks and 2 per node, "
          "and a gang the constraint cannot hold waits whole") {
  Env env("tsg");
  makeRacks(env, 2, 2);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  auto member = [&](const std::string& name, const std::string& gang, int size,
                    const std::string& constraints) {
    return PodBuilder(name, env.run).withGpus(1).gang(gang, size).label("job", env.run + gang)
        .spec(absl::StrCat(R"("topologySpreadConstraints":[)", constraints, "]"));
  };
  auto constraint = [&](const std::string& key, const std::string& gang, const std::string& extra) {
    return absl::StrCat(R"({"maxSkew":1,"topologyKey":")", key,
                        R"(","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":)"
                        R"({"job":")", env.run, gang, R"("}})", extra, "}");
  };
  // Packing alone would put all 8 one-GPU members on one node; the members count each other.
  const std::string both = absl::StrCat(constraint("muster.dev/rack", "even", ""), ",",
                                        constraint("kubernetes.io/hostname", "even", ""));
  for (int i = 0; i < 8; ++i) create(*env.client, member(absl::StrCat("e", i), "even", 8, both));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "e") == 8; }));
  std::map<std::string, int> per_node;
  for (const auto& [name, p] : listPods(*env.client, env.run))
    if (name.rfind("e", 0) == 0) ++per_node[p.spec.node_name];
  CHECK(per_node == std::map<std::string, int>{{env.run + "-r0-n0", 2}, {env.run + "-r0-n1", 2},
                                               {env.run + "-r1-n0", 2}, {env.run + "-r1-n1", 2}});
  // minDomains 3 with 2 racks keeps the minimum at 0: one member per rack, not the 4 asked for.
  const std::string strict = constraint("muster.dev/rack", "strict", R"(,"minDomains":3)");
  for (int i = 0; i < 4; ++i) create(*env.client, member(absl::StrCat("s", i), "strict", 4, strict));
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return pods.count("s0") &&
           conditionMessage(pods.at("s0")).find(
               "node(s) didn't match pod topology spread constraints: spread over muster.dev/rack "
               "with maxSkew 1, the nodes can take 2 of the 4 members") != std::string::npos;
  }));
  CHECK(boundCount(listPods(*env.client, env.run), "s") == 0);
  CHECK(sched.alive());
}

TEST_CASE("room another scheduler nominated to a higher-priority pod is not taken") {
  Env env("nnn");
  makeRacks(env, 1, 2);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  const std::string high = env.run + "-high";
  REQUIRE(TestCluster::get().kubectl({"create", "priorityclass", high, "--value=1000"}).ok());
  // A pod of another scheduler that preempted for it on node 0 and nominated it there.
  const std::string held_node = env.run + "-r0-n0";
  create(*env.client, PodBuilder("vip", env.run).withGpus(8).schedulerName("not-muster")
                          .spec(absl::StrCat(R"("priorityClassName":")", high, "\"")));
  REQUIRE(TestCluster::get().kubectl({"patch", "pod", "vip", "-n", "default", "--subresource=status",
                                      "--type=merge", "-p",
                                      absl::StrCat(R"({"status":{"nominatedNodeName":")", held_node, R"("}})")})
              .ok());
  // Packing would pick either equally empty node; the hold leaves only node 1.
  create(*env.client, PodBuilder("low", env.run).withGpus(8));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "low") == 1; }));
  CHECK(listPods(*env.client, env.run).at("low").spec.node_name == env.run + "-r0-n1");
  // Nothing left: the next one waits, in kube-scheduler's words.
  create(*env.client, PodBuilder("low2", env.run).withGpus(8));
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return pods.count("low2") &&
           conditionMessage(pods.at("low2")).find("2 Insufficient nvidia.com/gpu") != std::string::npos;
  }));
  (void)TestCluster::get().kubectl({"delete", "priorityclass", high, "--wait=false"});
  CHECK(sched.alive());
}

// The PodGroupScheduled condition of a scheduling.k8s.io/v1alpha2 PodGroup: "Status/Reason: message".
std::string podGroupScheduled(proto::Client& client, const std::string& name) {
  proto::Request get;
  get.path = proto::resources::kWorkloadPodGroups.objectPath("default", name);
  auto body = client.callSync(get);
  proto::WorkloadPodGroup group;
  if (!body.ok() || !proto::decodeJson(*body, &group).ok()) return "";
  const proto::Condition* c = group.condition("PodGroupScheduled");
  return c ? c->status + "/" + c->reason + ": " + c->message : "";
}

void createWorkloadPodGroup(proto::Client& client, const std::string& name, int min_count,
                            const std::string& run) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kWorkloadPodGroups.collectionPath("default");
  req.body = absl::StrCat(
      R"({"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup","metadata":{"name":")", name,
      R"(","labels":{"e2e-run":")", run, R"("},"annotations":{"muster.dev/topology-required":)",
      R"("muster.dev/rack"}},"spec":{"schedulingPolicy":{"gang":{"minCount":)", min_count, "}}}}");
  auto created = client.callSync(req);
  INFO(req.body);
  REQUIRE(created.ok());
}

TEST_CASE("a gang in Kubernetes' own PodGroup (scheduling.k8s.io/v1alpha2) waits for it, binds "
          "whole in one rack, and the PodGroup's condition says so") {
  Env env("wpg");
  makeRacks(env, 2, 2);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());

  const std::string group = env.run + "-train";
  auto member = [&](const std::string& name, const std::string& pod_group) {
    return PodBuilder(name, env.run)
        .withGpus(8)
        .spec(absl::StrCat(R"("schedulingGroup":{"podGroupName":")", pod_group, R"("})"));
  };
  create(*env.client, member("t0", group));
  create(*env.client, member("t1", group));
  // The PodGroup does not exist yet: both wait, and say why.
  REQUIRE(waitFor([&] {
    auto pods = listPods(*env.client, env.run);
    return pods.count("t0") && conditionMessage(pods.at("t0")) ==
        absl::StrCat("False/Unschedulable: gang default/", group, " is waiting for its PodGroup default/",
                     group, " (scheduling.k8s.io/v1alpha2) to exist");
  }));
  CHECK(boundCount(listPods(*env.client, env.run)) == 0);

  createWorkloadPodGroup(*env.client, group, 2, env.run);
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "t") == 2; }));
  auto pods = listPods(*env.client, env.run);
  // One rack (the PodGroup's topology-required annotation): both nodes are r0's or both r1's.
  CHECK(racksOf(env, pods, "t").size() == 1);
  REQUIRE(waitFor([&] { return podGroupScheduled(*env.client, group).rfind("True/Scheduled: 2 pods bound", 0) == 0; }));

  // Three nodes' worth in one rack of two: never placed, and the PodGroup says why.
  const std::string big = env.run + "-big";
  createWorkloadPodGroup(*env.client, big, 3, env.run);
  for (const char* name : {"b0", "b1", "b2"}) create(*env.client, member(name, big));
  REQUIRE(waitFor([&] { return podGroupScheduled(*env.client, big).rfind("False/Unschedulable: ", 0) == 0; }));
  CHECK(boundCount(listPods(*env.client, env.run), "b") == 0);
  CHECK(sched.alive());
}

TEST_CASE("a PodGroup gang is placed whole, its status follows its pods, and /metrics shows the work") {
  Env env("pg");
  auto applied = TestCluster::get().kubectl(
      {"apply", "-f", std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/podgroups.scheduling.x-k8s.io.yaml"});
  REQUIRE(applied.ok());
  REQUIRE(TestCluster::get()
              .kubectl({"wait", "--for", "condition=established", "--timeout=60s",
                        "crd/podgroups.scheduling.x-k8s.io"})
              .ok());
  for (int i = 0; i < 4; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 4);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());

  const std::string group = env.run;  // unique per run
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kPodGroups.collectionPath("default");
  req.body = absl::StrCat(R"({"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup","metadata":{"name":")",
                          group, R"(","labels":{"e2e-run":")", env.run,
                          R"("}},"spec":{"minMember":4}})");
  REQUIRE(env.client->callSync(req).ok());
  for (int i = 0; i < 4; ++i) {
    PodBuilder pod(absl::StrCat("m", i), env.run);
    pod.withGpus(8);
    std::string json = pod.json();
    // The PodGroup label, as mpi-operator and the coscheduling plugin set it.
    auto at = json.find(R"("labels":{)") + std::string(R"("labels":{)").size();
    json.insert(at, absl::StrCat(R"("scheduling.x-k8s.io/pod-group":")", group, R"(",)"));
    proto::Request create_pod;
    create_pod.verb = proto::Verb::kPost;
    create_pod.path = proto::resources::kPods.collectionPath("default");
    create_pod.body = json;
    REQUIRE(env.client->callSync(create_pod).ok());
    if (i < 3) {
      // Fewer than minMember exist: nothing is bound yet.
      CHECK_FALSE(waitFor([&] { return boundCount(listPods(*env.client, env.run)) > 0; },
                          std::chrono::milliseconds(300)));
    }
  }
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run)) == 4; }));
  // kwok runs them; the PodGroup's status says so.
  auto status = [&]() -> proto::PodGroupStatus {
    auto body = env.client->callSync([&] {
      proto::Request get;
      get.path = proto::resources::kPodGroups.objectPath("default", group);
      return get;
    }());
    proto::PodGroup pg;
    if (!body.ok() || !proto::decodeJson(*body, &pg).ok()) return {};
    return pg.status;
  };
  REQUIRE(waitFor([&] {
    auto s = status();
    return s.phase == "Running" && s.running == 4 && s.scheduled == 4;
  }));

  // The metrics endpoint serves what an operator watches.
  std::string log = sched.logTail(1000000);
  auto at = log.find("metrics=\"http://");
  REQUIRE(at != std::string::npos);
  std::string url = log.substr(at + 9, log.find('"', at + 9) - (at + 9));
  auto metrics = runCommand({"curl", "-sf", url});
  REQUIRE(metrics.ok());
  CHECK_THAT(*metrics, Catch::Contains("scheduler_schedule_attempts_total{result=\"scheduled\"} 1"));
  CHECK_THAT(*metrics, Catch::Contains("muster_binds_total{result=\"success\"} 4"));
  CHECK_THAT(*metrics, Catch::Contains("muster_gang_placement_duration_seconds_count 1"));
  std::string readyz_url = url.substr(0, url.rfind('/')) + "/readyz";
  auto ready = runCommand({"curl", "-sf", readyz_url});
  REQUIRE(ready.ok());
  CHECK(*ready == "ok\n");
  (void)TestCluster::get().kubectl({"delete", "podgroups.scheduling.x-k8s.io", group, "-n", "default", "--wait=false"});
}

// --- preemption (issue 12) ------------------------------------------------------------------------

namespace {

// Four racks of four 8-GPU nodes, each rack filled by two low-priority gangs of 4 × 4 GPUs
// (required rack). The racks fill one after another, at least a second apart, so each rack's
// gangs have run longer than the next rack's. Returns the racks in fill order, each with its gangs.
struct PreemptionWorld {
  Env& env;
  std::string low, high;  // PriorityClass names
  std::vector<std::pair<std::string, std::vector<std::string>>> racks;  // rack → its gangs

  explicit PreemptionWorld(Env& e) : env(e), low(e.run + "-low"), high(e.run + "-high") {
    makeRacks(env, 4, 4);
    REQUIRE(TestCluster::get().kubectl({"create", "priorityclass", low, "--value=10"}).ok());
    REQUIRE(TestCluster::get().kubectl({"create", "priorityclass", high, "--value=1000"}).ok());
  }
  ~PreemptionWorld() {
    (void)TestCluster::get().kubectl({"delete", "priorityclass", low, high, "--wait=false"});
  }
  PodBuilder pod(const std::string& name, const std::string& gang, int size, int gpus,
                 const std::string& priority_class) {
    return PodBuilder(name, env.run)
        .withGpus(gpus)
        .gang(gang, size)
        .label("e2e-gang", gang)
        .annotate("muster.dev/topology-required", "muster.dev/rack")
        .spec(absl::StrCat(R"("priorityClassName":")", priority_class, "\""));
  }
  void fill() {
    for (int r = 0; r < 4; ++r) {
      for (const char* half : {"a", "b"}) {
        const std::string gang = absl::StrCat("lo", r, half);
        for (int i = 0; i < 4; ++i) create(*env.client, pod(absl::StrCat(gang, "-", i), gang, 4, 4, low));
        REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), gang + "-") == 4; }));
        auto rack = racksOf(env, listPods(*env.client, env.run), gang + "-");
        REQUIRE(rack.size() == 1);
        if (racks.empty() || racks.back().first != *rack.begin()) racks.push_back({*rack.begin(), {}});
        racks.back().second.push_back(gang);
      }
      // The next rack's gangs start at least a second later (startTime has whole seconds).
      auto filled = std::chrono::system_clock::now();
      REQUIRE(waitFor([&] { return std::chrono::system_clock::now() - filled > std::chrono::milliseconds(1100); }));
    }
    REQUIRE(racks.size() == 4);
  }
  void createHigh(const std::string& gang) {
    for (int i = 0; i < 16; ++i) create(*env.client, pod(absl::StrCat(gang, "-", i), gang, 16, 2, high));
  }
  // Gangs with at least one pod left, and how many.
  std::map<std::string, int> lowGangs() {
    std::map<std::string, int> out;
    for (const auto& [name, p] : listPods(*env.client, env.run))
      if (name.rfind("lo", 0) == 0 && !p.meta.deletion_timestamp) out[name.substr(0, name.find('-'))]++;
    return out;
  }
};

}  // namespace

TEST_CASE("preemption: a high-priority 16-pod gang needing one rack evicts exactly the two newest "
          "low gangs of one rack and binds there, a PodDisruptionBudget makes the next ones choose "
          "other racks, and equals are never preempted") {
  Env env("preempt");
  PreemptionWorld world(env);
  SchedulerProcess sched(kTestSchedulerConfig, {"-v", "2"});
  sched.start();
  REQUIRE(sched.waitReady());
  world.fill();
  const auto& [newest_rack, newest_gangs] = world.racks[3];

  world.createHigh("hi1");
  INFO(sched.logLines("Preempt"));
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "hi1-") == 16; },
                  std::chrono::seconds(90)));
  auto pods = listPods(*env.client, env.run);
  CHECK(racksOf(env, pods, "hi1-") == std::set<std::string>{newest_rack});
  // Exactly the newest rack's two gangs are gone, whole; the other six are whole and untouched.
  std::map<std::string, int> left = world.lowGangs();
  for (const auto& [rack, gangs] : world.racks) {
    for (const std::string& g : gangs) {
      if (rack == newest_rack) CHECK(left.count(g) == 0);
      else CHECK(left[g] == 4);
    }
  }
  for (const auto& [name, p] : pods)
    if (name.rfind("lo", 0) == 0) CHECK(p.findCondition(proto::vocabulary::kPreemptedCondition) == nullptr);
  CHECK(absl::StrContains(sched.logTail(1 << 20), "Preempting"));

  // A budget that allows no disruption of the (now) newest low rack: the next gang takes the
  // next cheapest rack instead, and the one after it the last unguarded rack.
  const auto& guarded_gangs = world.racks[2].second;
  const std::string pdb = env.run + "-guard";
  REQUIRE(TestCluster::get()
              .kubectl({"create", "poddisruptionbudget", pdb, "-n", "default", "--max-unavailable=0",
                        absl::StrCat("--selector=e2e-gang in (", absl::StrJoin(guarded_gangs, ","), ")")})
              .ok());
  for (int next : {1, 0}) {
    const std::string gang = next == 1 ? "hi2" : "hi3";
    world.createHigh(gang);
    REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), gang + "-") == 16; },
                    std::chrono::seconds(90)));
    CHECK(racksOf(env, listPods(*env.client, env.run), gang + "-") ==
          std::set<std::string>{world.racks[next].first});
    left = world.lowGangs();
    for (const std::string& g : world.racks[next].second) CHECK(left.count(g) == 0);
    for (const std::string& g : guarded_gangs) CHECK(left[g] == 4);
  }
  // Now only the guarded gangs are below it (the other high gangs are its equals): the fourth
  // waits, and says why.
  world.createHigh("hi4");
  REQUIRE(waitFor([&] {
    auto ps = listPods(*env.client, env.run);
    return ps.count("hi4-0") &&
           conditionMessage(ps.at("hi4-0")).find("PodDisruptionBudget") != std::string::npos;
  }));
  CHECK_FALSE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "hi4-") > 0; },
                      std::chrono::seconds(3)));
  left = world.lowGangs();
  for (const std::string& g : guarded_gangs) CHECK(left[g] == 4);
  for (const char* g : {"hi1-", "hi2-", "hi3-"}) CHECK(boundCount(listPods(*env.client, env.run), g) == 16);
  (void)TestCluster::get().kubectl({"delete", "poddisruptionbudget", pdb, "-n", "default", "--wait=false"});
  CHECK(sched.alive());
}

TEST_CASE("preemption: scheduler killed twice mid-preemption, no low gang is left partly evicted "
          "and the preemptor ends bound whole") {
  Env env("preempt-kill");
  PreemptionWorld world(env);
  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  world.fill();
  world.createHigh("hi");
  // The first kill as soon as any victim is marked or going; the second right after the restart
  // has listed everything (while it finishes what the first life left).
  auto touched = [&] {
    for (const auto& [name, p] : listPods(*env.client, env.run))
      if (name.rfind("lo", 0) == 0 &&
          (p.meta.deletion_timestamp || p.findCondition(proto::vocabulary::kPreemptedCondition)))
        return true;
    return false;
  };
  auto marked = [&] {
    int n = 0;
    for (const auto& [name, p] : listPods(*env.client, env.run))
      n += name.rfind("lo", 0) == 0 && p.findCondition(proto::vocabulary::kPreemptedCondition) != nullptr;
    return n;
  };
  REQUIRE(waitFor(touched, std::chrono::seconds(60), std::chrono::milliseconds(2)));
  sched.kill9();
  std::map<std::string, int> at_first_kill = world.lowGangs();
  const int marked_first = marked();
  sched.start();
  REQUIRE(sched.waitReady());
  sched.kill9();
  std::map<std::string, int> at_second_kill = world.lowGangs();
  const int marked_second = marked();
  sched.start();
  REQUIRE(sched.waitReady());
  std::cout << "e2e: low pods not terminating at the kills: "
            << absl::StrJoin(at_first_kill, " ", absl::PairFormatter("=")) << " (" << marked_first
            << " marked) | " << absl::StrJoin(at_second_kill, " ", absl::PairFormatter("="))
            << " (" << marked_second << " marked)" << std::endl;

  // Converged: the preemptor whole, every low gang either whole and unmarked or entirely gone,
  // and exactly one rack's gangs gone.
  auto settled = [&] {
    auto pods = listPods(*env.client, env.run);
    if (boundCount(pods, "hi-") != 16) return false;
    for (const auto& [g, n] : world.lowGangs())
      if (n != 4) return false;
    for (const auto& [name, p] : pods)
      if (name.rfind("lo", 0) == 0 && p.findCondition(proto::vocabulary::kPreemptedCondition)) return false;
    return true;
  };
  INFO(sched.logTail());
  REQUIRE(waitFor(settled, std::chrono::seconds(120), std::chrono::milliseconds(200)));
  CHECK(world.lowGangs().size() == 6);
  CHECK(racksOf(env, listPods(*env.client, env.run), "hi-").size() == 1);
}

TEST_CASE("pods asking for fractions of a GPU share one kwok node's GPUs, never past a whole GPU, "
          "and each carries its GPU's index before its Binding") {
  Env env("frac");
  NodeShape two;
  two.gpus = 2;
  createNode(*env.client, env.run + "-n", env.run, {}, two);
  waitNodesReady(*env.client, env.run, 1);
  // The container reads its GPU through the downward API, as the README documents.
  const std::string gpu_env =
      R"("env":[{"name":"NVIDIA_VISIBLE_DEVICES",)"
      R"("valueFrom":{"fieldRef":{"fieldPath":"metadata.annotations['muster.dev/gpu-index']"}}}])";
  const std::vector<std::pair<std::string, std::string>> asks = {
      {"f0", "0.5"}, {"f1", "0.3"}, {"f2", "0.6"}, {"f3", "200m"}, {"f4", "0.4"}};
  auto fraction = [&](const std::string& name, const std::string& f) {
    PodBuilder b(name, env.run);
    b.annotate("muster.dev/gpu-fraction", f).inContainer(gpu_env);
    return b;
  };
  for (const auto& [name, f] : asks) create(*env.client, fraction(name, f));
  // Every version of each pod from here on: the first one bound must carry the GPU's index.
  struct Watched {
    std::mutex mu;
    std::map<std::string, std::string> index_when_bound;  // pod → its gpu-index when first bound
    std::set<std::string> seen;
  };
  auto watched = std::make_shared<Watched>();
  // An informer on this run's pods sees each version the watch delivers.
  proto::ListWatchOptions lw;
  lw.namespace_ = "default";
  lw.label_selector = "e2e-run=" + env.run;
  proto::ReflectorOptions ro;
  ro.name = "pods";
  auto informer = std::make_unique<proto::Informer<proto::Pod>>(
      proto::makeClientListerWatcher(env.client, proto::resources::kPods, lw), env.io.executor(), ro);
  auto record = [watched](const std::shared_ptr<const proto::Pod>& p) {
    std::lock_guard lock(watched->mu);
    watched->seen.insert(p->meta.name);
    if (p->spec.node_name.empty() || watched->index_when_bound.contains(p->meta.name)) return;
    auto a = p->meta.annotations.find("muster.dev/gpu-index");
    watched->index_when_bound[p->meta.name] = a == p->meta.annotations.end() ? "(none)" : a->second;
  };
  proto::InformerHandlers<proto::Pod> handlers;
  handlers.on_add = record;
  handlers.on_update = [record](const auto&, const auto& p) { record(p); };
  informer->addHandlers(handlers);
  informer->start();
  REQUIRE(informer->waitForSync(std::chrono::seconds(30)));
  struct StopOnExit {
    proto::Informer<proto::Pod>& informer;
    ~StopOnExit() { informer.stop(); }
  } stop_on_exit{*informer};
  REQUIRE(waitFor([&] { std::lock_guard lock(watched->mu); return watched->seen.size() == asks.size(); }));

  SchedulerProcess sched(kTestSchedulerConfig);
  sched.start();
  REQUIRE(sched.waitReady());
  // 0.5 + 0.3 + 0.6 + 0.2 + 0.4 = 2.0: all five fit on the node's two GPUs, packed.
  REQUIRE(waitFor([&] { return boundCount(listPods(*env.client, env.run), "f") == 5; }));
  auto ps = listPods(*env.client, env.run);
  std::map<std::string, int> per_gpu;  // index → thousandths
  for (const auto& [name, f] : asks) {
    const proto::Pod& p = ps.at(name);
    REQUIRE(p.meta.annotations.contains("muster.dev/gpu-index"));
    const std::string index = p.meta.annotations.at("muster.dev/gpu-index");
    per_gpu[index] += static_cast<int>(proto::Quantity::parse(f)->milliValue());
    std::lock_guard lock(watched->mu);
    INFO(name);
    CHECK(watched->index_when_bound[name] == index);  // never bound without it, nor with another
  }
  CHECK(per_gpu == std::map<std::string, int>{{"0", 1000}, {"1", 1000}});
  // The node is full: one more fraction waits, and says why; so does a whole GPU.
  create(*env.client, fraction("g0", "0.1"));
  create(*env.client, PodBuilder("whole", env.run).withGpus(1));
  REQUIRE(waitFor([&] {
    auto now = listPods(*env.client, env.run);
    return conditionMessage(now.at("g0")).find("Unschedulable") != std::string::npos &&
           conditionMessage(now.at("whole")).find("Insufficient nvidia.com/gpu") != std::string::npos;
  }));
  // A pod leaving gives its share back: the 0.1 goes where the 0.3 was.
  const std::string freed = ps.at("f1").meta.annotations.at("muster.dev/gpu-index");
  proto::Request del;
  del.verb = proto::Verb::kDelete;
  del.path = proto::resources::kPods.objectPath("default", "f1");
  del.query = {{"gracePeriodSeconds", "0"}};
  REQUIRE(env.client->callSync(del).ok());
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("g0").spec.node_name.empty(); }));
  CHECK(listPods(*env.client, env.run).at("g0").meta.annotations.at("muster.dev/gpu-index") == freed);
  CHECK(listPods(*env.client, env.run).at("whole").spec.node_name.empty());
  // A fraction that is not one is refused with the reason, not rounded.
  create(*env.client, fraction("bad", "1.5"));
  REQUIRE(waitFor([&] {
    return conditionMessage(listPods(*env.client, env.run).at("bad")).find("muster.dev/gpu-fraction") !=
           std::string::npos;
  }));
}

}  // namespace muster::e2e
