// Tenancy (queues.muster.dev) against the real kube-apiserver + kwok: limits, a queue that does
// not exist, the Queue status and columns, and reclaim between two teams. Each case runs its own
// scheduler with tenancy on, its own nodes and its own queues (cluster-scoped, named after the
// run), and deletes them at the end.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/queue.h"
#include "tests/e2e/pods.h"
#include "tests/e2e/support.h"

namespace muster::e2e {
namespace {

constexpr char kQueueLabel[] = "muster.dev/queue";

void applyQueueCrd() {
  auto& cluster = TestCluster::get();
  auto applied = cluster.kubectl(
      {"apply", "-f", std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/queues.muster.dev.yaml"});
  INFO(applied.status().message());
  REQUIRE(applied.ok());
  REQUIRE(cluster.kubectl({"wait", "--for", "condition=established", "--timeout=60s",
                           "crd/queues.muster.dev"}).ok());
}

// The suite's config with tenancy on and Queue statuses written at most once a second.
std::string tenancyConfig() {
  return absl::StrCat(kTestSchedulerConfig,
                      "tenancy:\n  enabled: true\n  statusIntervalSeconds: 1\n");
}

// Queues named <run>-<name>, deleted with the test.
struct Queues {
  Env& env;
  std::vector<std::string> made;
  explicit Queues(Env& e) : env(e) { applyQueueCrd(); }
  ~Queues() {
    for (const std::string& q : made) {
      proto::Request del;
      del.verb = proto::Verb::kDelete;
      del.path = proto::resources::kQueues.objectPath("", q);
      (void)env.client->callSync(del);
    }
  }
  std::string name(const std::string& short_name) const { return env.run + "-" + short_name; }
  // A queue with a quota of `resource` (and a limit, "" for none), a child of `parent` ("" the
  // root).
  std::string add(const std::string& short_name, const std::string& quota,
                  const std::string& limit = "", const std::string& parent = "",
                  const std::string& resource = "nvidia.com/gpu", double weight = 1.0) {
    proto::Queue q;
    q.meta.name = name(short_name);
    if (!parent.empty()) q.spec.parent = name(parent);
    proto::QueueResource& gpu = q.spec.resources[resource];
    gpu.quota = *proto::Quantity::parse(quota);
    if (!limit.empty()) gpu.limit = *proto::Quantity::parse(limit);
    gpu.over_quota_weight = weight;
    proto::Request req;
    req.verb = proto::Verb::kPost;
    req.path = proto::resources::kQueues.collectionPath("");
    req.body = proto::encode(q);
    auto created = env.client->callSync(req);
    INFO(req.body);
    INFO(created.status().message());
    REQUIRE(created.ok());
    made.push_back(q.meta.name);
    return q.meta.name;
  }
  proto::Queue get(const std::string& full_name) const {
    proto::Request req;
    req.path = proto::resources::kQueues.objectPath("", full_name);
    auto body = env.client->callSync(req);
    REQUIRE(body.ok());
    proto::Queue q;
    REQUIRE(proto::decodeQueueJson(*body, &q).ok());
    return q;
  }
};

// A gang of `size` pods of 8 GPUs each, <gang>-<i>, in `queue`; the GPUs are `resource`.
void createGang(Env& env, const std::string& gang, int size, const std::string& queue,
                const std::string& resource = "nvidia.com/gpu") {
  for (int i = 0; i < size; ++i) {
    PodBuilder pod(absl::StrCat(gang, "-", i), env.run);
    if (resource == "nvidia.com/gpu") pod.withGpus(8);
    else pod.withLimit(resource, "8");
    create(*env.client, pod.gang(gang, size).label(kQueueLabel, queue));
  }
}

// A GPU resource that only this run's nodes have: the suite's background nodes (1,000 of them in
// CI) would otherwise be part of the cluster the queues share, and no fair share would be tight.
std::string runGpus(const Env& env) { return env.run + ".e2e.muster.dev/gpu"; }

// A node with `gpus` of this run's own GPUs (and no nvidia.com/gpu).
NodeShape runShape(const Env& env, int gpus = 8) {
  NodeShape shape;
  shape.gpus = 0;
  shape.rdma = 0;
  shape.extra[runGpus(env)] = std::to_string(gpus);
  return shape;
}

// `count` nodes of this run with `gpus` of its own GPUs each.
void createRunNodes(Env& env, int count, int gpus = 8) {
  for (int i = 0; i < count; ++i)
    createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {}, runShape(env, gpus));
  waitNodesReady(*env.client, env.run, static_cast<size_t>(count));
}

void deletePod(Env& env, const std::string& name) {
  proto::Request del;
  del.verb = proto::Verb::kDelete;
  del.path = proto::resources::kPods.objectPath("default", name);
  del.query = {{"gracePeriodSeconds", "0"}};
  REQUIRE(env.client->callSync(del).ok());
}

// Gangs by name (the pod name before its last '-'): pods present, and how many are bound.
struct GangState {
  int pods = 0;
  int bound = 0;
};
std::map<std::string, GangState> gangs(Env& env) {
  std::map<std::string, GangState> out;
  for (const auto& [name, p] : listPods(*env.client, env.run)) {
    GangState& g = out[name.substr(0, name.rfind('-'))];
    ++g.pods;
    if (!p.spec.node_name.empty()) ++g.bound;
  }
  return out;
}

}  // namespace

TEST_CASE("a queue at its limit waits even on an empty cluster, says which queue and resource, "
          "and binds when room in the queue frees") {
  Env env("tlimit");
  Queues queues(env);
  const std::string qa = queues.add("a", "8", "16");
  const std::string qb = queues.add("b", "8");
  for (int i = 0; i < 6; ++i) createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {});
  waitNodesReady(*env.client, env.run, 6);
  SchedulerProcess sched(tenancyConfig());
  sched.start();
  REQUIRE(sched.waitReady());
  createGang(env, "a1", 2, qa);
  REQUIRE(waitFor([&] { return gangs(env)["a1"].bound == 2; }));
  createGang(env, "a2", 2, qa);
  createGang(env, "b1", 2, qb);  // another queue is not held back by a's limit
  REQUIRE(waitFor([&] { return gangs(env)["b1"].bound == 2; }));
  const std::string want = absl::StrCat("waiting for quota: queue \"", qa, "\" holds 16 nvidia.com/gpu "
                                        "of its limit of 16, and this gang asks for 16");
  REQUIRE(waitFor([&] {
    return absl::StrContains(conditionMessage(listPods(*env.client, env.run).at("a2-0")), want);
  }));
  CHECK(gangs(env)["a2"].bound == 0);
  CHECK(absl::StrContains(eventMessages("a2-0", "FailedScheduling"), want));
  // The Queue's status and columns say what it holds and that a gang waits.
  REQUIRE(waitFor([&] {
    proto::Queue q = queues.get(qa);
    auto r = q.status.resources.find("nvidia.com/gpu");
    return r != q.status.resources.end() && r->second.allocated == "16" && q.status.pending_gangs == 1;
  }));
  proto::Queue q = queues.get(qa);
  REQUIRE(q.status.conditions.size() == 1);
  CHECK(q.status.conditions[0].type == "Valid");
  CHECK(q.status.conditions[0].status == "True");
  auto row = TestCluster::get().kubectl(
      {"get", "queues.muster.dev", qa, "--no-headers", "-o",
       "custom-columns=Q:.status.summary.gpuQuota,L:.status.summary.gpuLimit,A:.status.summary.gpuAllocated,P:.status.pendingGangs"});
  REQUIRE(row.ok());
  CHECK(absl::StrContains(*row, "8") );
  CHECK(absl::StrContains(*row, "16"));
  // Room in the queue frees: the waiting gang binds, whole.
  deletePod(env, "a1-0");
  deletePod(env, "a1-1");
  REQUIRE(waitFor([&] { return gangs(env)["a2"].bound == 2; }));
  INFO(sched.logLines("quota"));
  CHECK(sched.alive());
}

TEST_CASE("a pod naming a queue that does not exist stays pending with an Event, and binds once "
          "the Queue is created") {
  Env env("tmissing");
  Queues queues(env);
  createNode(*env.client, env.run + "-n0", env.run, {});
  waitNodesReady(*env.client, env.run, 1);
  SchedulerProcess sched(tenancyConfig());
  sched.start();
  REQUIRE(sched.waitReady());
  const std::string missing = queues.name("nope");
  create(*env.client, PodBuilder("p-0", env.run).withGpus(1).label(kQueueLabel, missing));
  const std::string want = absl::StrCat("queue \"", missing, "\" does not exist (queues.muster.dev)");
  REQUIRE(waitFor([&] {
    return absl::StrContains(conditionMessage(listPods(*env.client, env.run).at("p-0")), want);
  }));
  CHECK(absl::StrContains(eventMessages("p-0", "FailedScheduling"), want));
  CHECK(listPods(*env.client, env.run).at("p-0").spec.node_name.empty());
  queues.add("nope", "1");
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("p-0").spec.node_name.empty(); }));
}

TEST_CASE("reclaim: two equal teams with a quarter of the cluster each - A fills it, B takes back "
          "half, whole gangs only, none twice") {
  Env env("treclaim");
  Queues queues(env);
  // 8 nodes of 8 GPUs = 64; quotas 16 each; the 32 left split evenly: fair shares 32 and 32.
  const std::string gpu = runGpus(env);
  const std::string qa = queues.add("a", "16", "", "", gpu);
  const std::string qb = queues.add("b", "16", "", "", gpu);
  createRunNodes(env, 8);
  SchedulerProcess sched(tenancyConfig());
  sched.start();
  REQUIRE(sched.waitReady());
  for (int g = 0; g < 4; ++g) createGang(env, absl::StrCat("a", g), 2, qa, gpu);
  REQUIRE(waitFor([&] {
    int bound = 0;
    for (const auto& [name, g] : gangs(env)) bound += g.bound;
    return bound == 8;
  }));
  // B asks for the whole cluster: 4 gangs of 2 × 8 GPUs.
  for (int g = 0; g < 4; ++g) createGang(env, absl::StrCat("b", g), 2, qb, gpu);
  auto held = [&](char team) {
    int gpus = 0;
    for (const auto& [name, g] : gangs(env))
      if (name[0] == team) gpus += g.bound * 8;
    return gpus;
  };
  REQUIRE(waitFor([&] { return held('b') >= 32; }, std::chrono::seconds(120)));
  // Settled: nothing more moves for a while (no oscillation).
  CHECK_FALSE(waitFor([&] { return held('b') > 32 || held('a') < 32; }, std::chrono::seconds(8)));
  CHECK(held('b') == 32);  // half the cluster, not just its quota of 16
  CHECK(held('a') == 32);
  // Whole gangs only: every gang has all its pods bound, or none (A's evicted gangs are gone).
  for (const auto& [name, g] : gangs(env)) {
    INFO(name << ": " << g.bound << " of " << g.pods << " bound");
    CHECK((g.bound == 0 || g.bound == g.pods));
    CHECK((g.pods == 2));
  }
  int a_gangs = 0;
  for (const auto& [name, g] : gangs(env)) a_gangs += name[0] == 'a';
  CHECK(a_gangs == 2);  // exactly two of A's gangs were taken, each once (their pods are gone)
  // The victims were told who took their room.
  auto events = TestCluster::get().kubectl(
      {"get", "events", "-n", "default", "--field-selector", "reason=Reclaimed", "-o",
       "jsonpath={.items[*].message}"});
  REQUIRE(events.ok());
  CHECK(absl::StrContains(*events, absl::StrCat("Reclaimed by queue ", qb, " for gang default/b")));
  CHECK(sched.alive());
}

TEST_CASE("a three-level tree divides the cluster level by level: quota first, the rest by "
          "weight among queues that want more") {
  Env env("ttree");
  Queues queues(env);
  const std::string gpu = runGpus(env);
  // 16 nodes x 4 GPUs = 64. The tree (quota, weight):
  //   org (32, 1)                 ops (8, 1)
  //     ml (16, 3)    sim (8, 1)
  //       train (8, 1)  eval (0, 1)
  const std::string org = queues.add("org", "32", "", "", gpu);
  const std::string ops = queues.add("ops", "8", "", "", gpu);
  const std::string ml = queues.add("ml", "16", "", "org", gpu, 3);
  const std::string sim = queues.add("sim", "8", "", "org", gpu);
  const std::string train = queues.add("train", "8", "", "ml", gpu);
  const std::string eval = queues.add("eval", "0", "", "ml", gpu);
  createRunNodes(env, 16, 4);
  // Usage would correct the weights as time passes: this case checks the division alone.
  SchedulerProcess sched(absl::StrCat(tenancyConfig(), "  usageHalfLife: 0s\n"));
  sched.start();
  REQUIRE(sched.waitReady());
  // Demand: sim holds a bound gang of 2 x 4 GPUs; every other pod asks for 8 GPUs, which no
  // 4-GPU node has, so it stays pending and counts as demand without ever reclaiming anything.
  for (int i = 0; i < 2; ++i)
    create(*env.client, PodBuilder(absl::StrCat("simrun-", i), env.run).withLimit(gpu, "4")
                            .gang("simrun", 2).label(kQueueLabel, sim));
  REQUIRE(waitFor([&] { return gangs(env)["simrun"].bound == 2; }));
  auto demand = [&](const std::string& prefix, int pods, const std::string& queue) {
    for (int i = 0; i < pods; ++i)
      create(*env.client, PodBuilder(absl::StrCat(prefix, "-", i), env.run).withLimit(gpu, "8")
                              .label(kQueueLabel, queue));
  };
  demand("ops", 2, ops);      // 16
  demand("train", 8, train);  // 64
  demand("eval", 1, eval);    // 8
  demand("sim", 7, sim);      // 56, + 8 held = 64
  // By hand:
  //   root, 64: org wants 136, ops 16. Quotas first: org 32, ops 8 (24 left); 12 each by equal
  //     weights, but ops wants only 8 more: ops 16, org 32 + 12 + 4 = 48.
  //   org, 48: ml wants 72, sim 64. Quotas: ml 16, sim 8 (24 left); 3:1 -> ml 34, sim 14.
  //   ml, 34: train wants 64, eval 8. Quotas: train 8, eval 0 (26 left); 13 each, eval wants 8:
  //     eval 8, train 8 + 13 + 5 = 26.
  const std::map<std::string, std::string> want = {{org, "48"}, {ops, "16"}, {ml, "34"},
                                                   {sim, "14"}, {train, "26"}, {eval, "8"}};
  std::map<std::string, std::string> seen;
  auto divided = [&] {
    for (const auto& [queue, share] : want) {
      proto::Queue q = queues.get(queue);
      auto r = q.status.resources.find(gpu);
      seen[queue] = r == q.status.resources.end() ? "<none>" : r->second.fair_share;
    }
    return seen == want;
  };
  const bool ok = waitFor(divided, std::chrono::seconds(60));
  for (const auto& [queue, share] : seen) INFO(queue << " fairShare " << share << ", want " << want.at(queue));
  CHECK(ok);
  // Nothing was evicted for it: the only bound gang is whole and still there.
  CHECK(gangs(env)["simrun"].bound == 2);
  CHECK(queues.get(sim).status.resources[gpu].allocated == "8");
  CHECK(sched.alive());
}

TEST_CASE("reclaim for a gang that requires one rack clears exactly one rack, and nothing in the "
          "others") {
  Env env("track");
  Queues queues(env);
  const std::string gpu = runGpus(env);
  // 3 racks x 2 nodes x 8 GPUs = 48. A (quota 8) borrows the whole cluster; B (quota 16) then
  // wants one rack: fair shares B 16, A 32, so B reclaims 16 GPUs from A.
  const std::string qa = queues.add("a", "8", "", "", gpu);
  const std::string qb = queues.add("b", "16", "", "", gpu);
  auto node = [&](int r, int i) { return absl::StrCat(env.run, "-r", r, "-n", i); };
  auto rackOf = [&](const std::string& n) { return n.substr(env.run.size() + 1, 2); };
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 2; ++i)
      createNode(*env.client, node(r, i), env.run,
                 {{"muster.dev/block", env.run + "-b0"}, {"muster.dev/spine", env.run + "-s0"},
                  {"muster.dev/rack", absl::StrCat(env.run, "-rack", r)}},
                 runShape(env));
  waitNodesReady(*env.client, env.run, 6);
  SchedulerProcess sched(tenancyConfig());
  sched.start();
  REQUIRE(sched.waitReady());
  // One 8-GPU pod of A per node, the youngest (the cheapest to lose) on r0-n0 and r1-n0: a
  // choice blind to racks would take those two, in two racks, and B would still not fit.
  const std::vector<std::pair<int, int>> order = {{0, 1}, {1, 1}, {2, 0}, {2, 1}, {0, 0}, {1, 0}};
  for (const auto& [r, i] : order) {
    const std::string name = absl::StrCat("a", r, i);
    create(*env.client, PodBuilder(name, env.run).withLimit(gpu, "8").label(kQueueLabel, qa)
                            .select("kubernetes.io/hostname", node(r, i)));
    REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at(name).spec.node_name.empty(); }));
  }
  for (int i = 0; i < 2; ++i)
    create(*env.client, PodBuilder(absl::StrCat("b-", i), env.run).withLimit(gpu, "8").gang("b", 2)
                            .label(kQueueLabel, qb)
                            .annotate("muster.dev/topology-required", "muster.dev/rack"));
  REQUIRE(waitFor([&] { return gangs(env)["b"].bound == 2; }, std::chrono::seconds(120)));
  const auto pods = listPods(*env.client, env.run);
  const std::string rack = rackOf(pods.at("b-0").spec.node_name);
  CHECK(rackOf(pods.at("b-1").spec.node_name) == rack);
  // Exactly the two pods of that rack were taken; the other four run where they were.
  // (Taken pods are gone before B binds: the scheduler waits for them to terminate.)
  std::set<std::string> left;
  for (const auto& [name, p] : pods)
    if (name[0] == 'a') {
      INFO(name << " on " << p.spec.node_name);
      CHECK(rackOf(p.spec.node_name) != rack);
      CHECK_FALSE(p.meta.deletion_timestamp.has_value());
      left.insert(name);
    }
  CHECK(left.size() == 4);
  CHECK(sched.alive());
}

TEST_CASE("a scheduler SIGKILLed twice in the middle of a reclaim leaves no gang partly evicted "
          "or partly bound, and the reclaim completes") {
  Env env("tkill");
  Queues queues(env);
  // 8 nodes x 8 GPUs = 64; A (quota 16) fills it with 8 gangs of 2 x 4 GPUs; B (quota 16) asks
  // for all of it in 4 gangs of 2 x 8: fair shares 32 and 32.
  const std::string gpu = runGpus(env);
  const std::string qa = queues.add("a", "16", "", "", gpu);
  const std::string qb = queues.add("b", "16", "", "", gpu);
  createRunNodes(env, 8);
  SchedulerProcess sched(tenancyConfig());
  sched.start();
  REQUIRE(sched.waitReady());
  for (int g = 0; g < 8; ++g)
    for (int i = 0; i < 2; ++i)
      create(*env.client, PodBuilder(absl::StrCat("a", g, "-", i), env.run).withLimit(gpu, "4")
                              .gang(absl::StrCat("a", g), 2).label(kQueueLabel, qa));
  REQUIRE(waitFor([&] {
    int bound = 0;
    for (const auto& [name, g] : gangs(env)) bound += g.bound;
    return bound == 16;
  }));
  for (int g = 0; g < 4; ++g) createGang(env, absl::StrCat("b", g), 2, qb, gpu);
  // An A pod taken: gone, or on its way out.
  auto taken = [&] {
    int n = 0;
    auto pods = listPods(*env.client, env.run);
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 2; ++i) {
        auto it = pods.find(absl::StrCat("a", g, "-", i));
        n += it == pods.end() || it->second.meta.deletion_timestamp.has_value();
      }
    return n;
  };
  // Killed at the first eviction of the reclaim, and again at the next one after the restart
  // (or after 30 s, if the first reclaim had already been sent whole).
  REQUIRE(waitFor([&] { return taken() > 0; }, std::chrono::seconds(60), std::chrono::milliseconds(10)));
  sched.kill9();
  const int after_first = taken();
  sched.start();
  REQUIRE(sched.waitReady());
  (void)waitFor([&] { return taken() > after_first; }, std::chrono::seconds(30), std::chrono::milliseconds(10));
  sched.kill9();
  sched.start();
  REQUIRE(sched.waitReady());
  auto held = [&](char team) {
    int gpus = 0;
    for (const auto& [name, g] : gangs(env))
      if (name[0] == team) gpus += g.bound * (team == 'a' ? 4 : 8);
    return gpus;
  };
  REQUIRE(waitFor([&] { return held('b') >= 32; }, std::chrono::seconds(120)));
  CHECK_FALSE(waitFor([&] { return held('b') > 32 || held('a') < 32; }, std::chrono::seconds(8)));
  CHECK(held('b') == 32);
  CHECK(held('a') == 32);
  // Every gang whole: A's all bound (the taken ones have no pod left at all), B's all bound or
  // (the two beyond its share) all waiting.
  for (const auto& [name, g] : gangs(env)) {
    INFO(name << ": " << g.bound << " of " << g.pods << " bound");
    CHECK(g.pods == 2);
    if (name[0] == 'a') CHECK(g.bound == 2);
    else CHECK((g.bound == 0 || g.bound == 2));
  }
  CHECK(sched.alive());
}

TEST_CASE("on a fragmented cluster a reclaim evicts at most 1.25 times the GPUs it needs") {
  Env env("tfrag");
  Queues queues(env);
  // 4 nodes x 8 GPUs = 32. A (quota 8) holds all of it; B (quota 8) wants one 8-GPU pod: fair
  // shares B 8, A 24, so B takes 8 GPUs back.
  const std::string gpu = runGpus(env);
  const std::string qa = queues.add("a", "8", "", "", gpu);
  const std::string qb = queues.add("b", "8", "", "", gpu);
  createRunNodes(env, 4);
  SchedulerProcess sched(tenancyConfig());
  sched.start();
  REQUIRE(sched.waitReady());
  auto node = [&](int i) { return absl::StrCat(env.run, "-n", i); };
  std::map<std::string, int> gpus_of;  // A's pods
  auto place = [&](const std::string& name, int gpus, int on, const std::string& gang, int size) {
    PodBuilder pod(name, env.run);
    pod.withLimit(gpu, std::to_string(gpus)).label(kQueueLabel, qa).select("kubernetes.io/hostname", node(on));
    if (size > 1) pod.gang(gang, size);
    create(*env.client, pod);
    gpus_of[name] = gpus;
  };
  auto allBound = [&] {
    auto pods = listPods(*env.client, env.run);
    for (const auto& [name, g] : gpus_of)
      if (!pods.contains(name) || pods.at(name).spec.node_name.empty()) return false;
    return true;
  };
  // The oldest: one 8-GPU pod on n2, two 4-GPU pods on n3. The youngest (the least work lost):
  // two gangs of 2 x 4 GPUs, each across n0 and n1. Taking the cheapest gangs until 8 GPUs are
  // free would take both gangs, 16 GPUs, and still leave no node with 8 before the second.
  place("z-0", 8, 2, "", 1);
  place("w1-0", 4, 3, "", 1);
  place("w2-0", 4, 3, "", 1);
  REQUIRE(waitFor(allBound));
  for (const char* g : {"x", "y"}) {
    place(absl::StrCat(g, "-0"), 4, 0, g, 2);
    place(absl::StrCat(g, "-1"), 4, 1, g, 2);
    REQUIRE(waitFor(allBound));
  }
  create(*env.client, PodBuilder("b-0", env.run).withLimit(gpu, "8").label(kQueueLabel, qb));
  REQUIRE(waitFor([&] { return !listPods(*env.client, env.run).at("b-0").spec.node_name.empty(); },
                  std::chrono::seconds(60)));
  int evicted = 0;
  const auto pods = listPods(*env.client, env.run);
  for (const auto& [name, gpus] : gpus_of) {
    auto it = pods.find(name);
    if (it == pods.end() || it->second.meta.deletion_timestamp.has_value()) evicted += gpus;
  }
  INFO("evicted " << evicted << " GPUs for 8; B on " << pods.at("b-0").spec.node_name);
  CHECK(evicted >= 8);
  CHECK(evicted * 4 <= 8 * 5);  // <= 1.25 x
  // Whole gangs: x and y each kept both pods or lost both.
  for (const char* g : {"x", "y"})
    CHECK(pods.contains(absl::StrCat(g, "-0")) == pods.contains(absl::StrCat(g, "-1")));
  CHECK(sched.alive());
}

}  // namespace muster::e2e
