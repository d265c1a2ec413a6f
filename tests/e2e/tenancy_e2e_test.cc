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
                  const std::string& resource = "nvidia.com/gpu") {
    proto::Queue q;
    q.meta.name = name(short_name);
    if (!parent.empty()) q.spec.parent = name(parent);
    proto::QueueResource& gpu = q.spec.resources[resource];
    gpu.quota = *proto::Quantity::parse(quota);
    if (!limit.empty()) gpu.limit = *proto::Quantity::parse(limit);
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

// `count` nodes of this run with 8 of its own GPUs each (and no nvidia.com/gpu).
void createRunNodes(Env& env, int count) {
  NodeShape shape;
  shape.gpus = 0;
  shape.rdma = 0;
  shape.extra[runGpus(env)] = "8";
  for (int i = 0; i < count; ++i)
    createNode(*env.client, absl::StrCat(env.run, "-n", i), env.run, {}, shape);
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

}  // namespace muster::e2e
