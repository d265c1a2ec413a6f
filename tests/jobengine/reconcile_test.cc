#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "jobengine/reconcile.h"
#include "tests/jobengine/builders.h"

namespace muster::jobengine {
namespace {

using testing::decodeJob;
using testing::pod;
using testing::seedJob;
using testing::seedJobJson;

constexpr char kNow[] = "2026-02-01T10:00:00Z";

// A job that reconcile has already started: status written for `attempt`, PodsCreated as given.
proto::ParallelJob started(proto::ParallelJob job, int32_t attempt, bool all_created,
                           const std::string& phase = "") {
  job.status.phase = !phase.empty() ? phase : attempt == 0 ? "Pending" : "Restarting";
  job.status.restarts = attempt;
  job.status.job_group_name = groupName(job.meta.name, attempt);
  job.status.start_time = "2026-02-01T09:00:00Z";
  job.status.conditions.push_back({vocab::kConditionPodsCreated, all_created ? "True" : "False",
                                   all_created ? "AllPodsCreated" : "CreatingPods", "m",
                                   "2026-02-01T09:00:00Z"});
  return job;
}

struct Scenario {
  explicit Scenario(proto::ParallelJob j) : job(std::move(j)) {}
  RuntimeRegistry runtimes = defaultRuntimes(RuntimeOptions{});
  proto::ParallelJob job;
  std::vector<std::shared_ptr<const proto::Pod>> pods;
  std::map<std::string, DeletedPod> deleted;
  std::set<std::string> nodes = {"node-00001"};

  Plan run() {
    Observation obs;
    obs.job = &job;
    obs.pods = pods;
    obs.deleted = deleted;
    obs.node_exists = [this](const std::string& n) { return nodes.count(n) > 0; };
    obs.now = kNow;
    return reconcile(obs, runtimes);
  }
};

std::vector<std::string> names(const std::vector<PodRef>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs) out.push_back(r.name);
  std::sort(out.begin(), out.end());
  return out;
}

// What the controller remembers of a pod of `attempt` it saw deleted.
DeletedPod seenDeleted(int32_t attempt, int32_t index, bool by_muster = false,
                       const std::string& preempted_by = "") {
  DeletedPod d;
  d.attempt = attempt;
  d.index = index;
  d.by_muster = by_muster;
  d.preempted = !preempted_by.empty();
  if (d.preempted) d.preempted_message = "Preempted by " + preempted_by;
  return d;
}

int countEvents(const Plan& plan, const std::string& reason) {
  return static_cast<int>(std::count_if(plan.events.begin(), plan.events.end(),
                                        [&](const EventSpec& e) { return e.reason == reason; }));
}

bool hasEvent(const Plan& plan, const std::string& reason) {
  return std::any_of(plan.events.begin(), plan.events.end(),
                     [&](const EventSpec& e) { return e.reason == reason; });
}

TEST_CASE("a new job first records its attempt in status, and creates nothing yet", "[reconcile]") {
  Scenario s(seedJob());
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Pending");
  CHECK(plan.status->restarts == 0);
  CHECK(plan.status->job_group_name == "mpi-sample-job-0");
  CHECK(plan.status->start_time == kNow);
  const auto* created = findCondition(plan.status->conditions, vocab::kConditionPodsCreated);
  REQUIRE(created != nullptr);
  CHECK(created->status == "False");
  CHECK_FALSE(created->reason.empty());
  CHECK(hasEvent(plan, "Created"));
  CHECK(plan.create_pods.empty());
}

TEST_CASE("once the attempt is recorded, all pods of the gang are created together", "[reconcile]") {
  Scenario s(started(seedJob(), 0, false));
  Plan plan = s.run();
  CHECK(plan.create_pods_needed);
  CHECK(plan.create_pods == std::vector<int32_t>{0, 1, 2});
  CHECK(plan.delete_pods.empty());
}

TEST_CASE("pods missing before all were created are created, not counted as failures",
          "[reconcile]") {
  Scenario s(started(seedJob(), 0, false));
  s.pods = {pod(s.job, 0, 0)};
  Plan plan = s.run();
  CHECK(plan.create_pods == std::vector<int32_t>{1, 2});
  CHECK(s.job.status.restarts == (plan.status ? plan.status->restarts : 0));
}

TEST_CASE("when every pod exists PodsCreated becomes True and Running only when all run",
          "[reconcile]") {
  Scenario s(started(seedJob(), 0, false));
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running(), pod(s.job, 0, 2)};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(findCondition(plan.status->conditions, vocab::kConditionPodsCreated)->status == "True");
  CHECK(plan.status->phase == "Pending");
  CHECK(plan.status->message == "attempt mpi-sample-job-0: 2 of 3 pods running");
  CHECK(plan.status->pods_ready == 2);
  CHECK(plan.status->ready == "2/3");  // the READY column

  s.job = started(seedJob(), 0, true);
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running(), pod(s.job, 0, 2).running()};
  plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Running");
  CHECK(findCondition(plan.status->conditions, vocab::kConditionRunning)->status == "True");
  CHECK(hasEvent(plan, "Running"));
}

TEST_CASE("an unschedulable gang says why in the job's message", "[reconcile]") {
  Scenario s(started(seedJob(), 0, true));
  s.pods = {pod(s.job, 0, 0).unschedulable("0/16 nodes fit the gang of 3"), pod(s.job, 0, 1),
            pod(s.job, 0, 2)};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->message.find("not scheduled yet: 0/16 nodes fit the gang of 3") !=
        std::string::npos);
}

TEST_CASE("reconciling an unchanged job writes nothing", "[reconcile]") {
  Scenario s(started(seedJob(), 0, true));
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running(), pod(s.job, 0, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  s.job.status = *plan.status;
  Plan again = s.run();
  CHECK_FALSE(again.status);
  CHECK(again.events.empty());
  CHECK(again.create_pods.empty());
  CHECK(again.delete_pods.empty());
}

TEST_CASE("the launcher succeeding makes the job Succeeded and removes the workers",
          "[reconcile]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running().succeeded(), pod(s.job, 0, 1).running(),
            pod(s.job, 0, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Succeeded");
  CHECK(plan.status->completion_time == kNow);
  CHECK(findCondition(plan.status->conditions, vocab::kConditionSucceeded)->status == "True");
  CHECK(hasEvent(plan, "Succeeded"));
  CHECK(names(plan.delete_pods) ==
        std::vector<std::string>{"mpi-sample-job-0-1", "mpi-sample-job-0-2"});
  // Later reconciles keep removing workers that are still there, never the launcher.
  s.job.status = *plan.status;
  Plan again = s.run();
  CHECK_FALSE(again.status);
  CHECK(names(again.delete_pods) ==
        std::vector<std::string>{"mpi-sample-job-0-1", "mpi-sample-job-0-2"});
}

TEST_CASE("a failed worker restarts the whole job: status first, then the attempt is deleted",
          "[reconcile]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running().failed(137, "OOMKilled"),
            pod(s.job, 0, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Restarting");
  CHECK(plan.status->restarts == 1);
  CHECK(plan.status->job_group_name == "mpi-sample-job-1");
  CHECK(plan.status->message.find("pod mpi-sample-job-0-1 (worker 1) failed: exit code 137 (OOMKilled)") !=
        std::string::npos);
  CHECK(findCondition(plan.status->conditions, vocab::kConditionPodsCreated)->status == "False");
  CHECK(hasEvent(plan, "Restarting"));
  CHECK(names(plan.delete_pods) == std::vector<std::string>{"mpi-sample-job-0-0", "mpi-sample-job-0-1",
                                                            "mpi-sample-job-0-2"});
  REQUIRE(plan.delete_support);
  CHECK(plan.delete_support->group == "mpi-sample-job-0");
  CHECK(plan.create_pods.empty());
}

TEST_CASE("the next attempt starts only when no pod of the previous one is left", "[reconcile]") {
  Scenario s(started(seedJob(), 1, false, "Restarting"));
  s.pods = {pod(seedJob(), 0, 0).running().deleting(), pod(seedJob(), 0, 2).running()};
  Plan plan = s.run();
  CHECK(plan.create_pods.empty());
  CHECK(names(plan.delete_pods) == std::vector<std::string>{"mpi-sample-job-0-2"});

  s.pods.clear();
  plan = s.run();
  CHECK(plan.create_pods == std::vector<int32_t>{0, 1, 2});
  CHECK(plan.attempt.group == "mpi-sample-job-1");
}

TEST_CASE("past maxRestarts the job fails naming the pod, exit code and reason, and keeps the pods",
          "[reconcile]") {
  Scenario s(started(decodeJob(seedJobJson("mpi-sample-job", 3, 2, 1)), 1, true, "Running"));
  s.pods = {pod(s.job, 1, 0).running().failed(3, "Error"), pod(s.job, 1, 1).running(),
            pod(s.job, 1, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Failed");
  CHECK(plan.status->restarts == 1);
  CHECK(plan.status->completion_time == kNow);
  CHECK(plan.status->message.find("pod mpi-sample-job-1-0 (launcher) failed: exit code 3 (Error)") == 0);
  CHECK(plan.status->message.find("maxRestarts 1") != std::string::npos);
  CHECK(findCondition(plan.status->conditions, vocab::kConditionFailed)->reason == "MaxRestartsExceeded");
  CHECK(hasEvent(plan, "MaxRestartsExceeded"));
  CHECK(plan.delete_pods.empty());
  // Failed is final.
  s.job.status = *plan.status;
  Plan again = s.run();
  CHECK_FALSE(again.status);
  CHECK(again.delete_pods.empty());
  CHECK(again.create_pods.empty());
}

TEST_CASE("maxRestarts 0 fails at the first failure", "[reconcile]") {
  Scenario s(started(decodeJob(seedJobJson("j", 2, 1, 0)), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running().failed(1, "Error")};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Failed");
}

TEST_CASE("a deleted worker restarts the job", "[reconcile]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 2).running()};
  s.deleted["mpi-sample-job-0-1"] = seenDeleted(0, 1);
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->restarts == 1);
  CHECK(plan.status->message.find("pod mpi-sample-job-0-1 (worker 1) was deleted") != std::string::npos);

  SECTION("also when the process did not see the delete (a restart of the engine)") {
    s.deleted.clear();
    Plan p2 = s.run();
    REQUIRE(p2.status);
    CHECK(p2.status->restarts == 1);
  }
  SECTION("also while it is being deleted") {
    s.deleted.clear();
    s.pods.push_back(pod(s.job, 0, 1).running().deleting());
    Plan p3 = s.run();
    REQUIRE(p3.status);
    CHECK(p3.status->restarts == 1);
  }
}

TEST_CASE("a pod evicted by Muster's scheduler is created again without a restart", "[reconcile]") {
  Scenario s(started(seedJob(), 0, true));
  // What muster-scheduler sets before it evicts a member of a gang it rolls back.
  s.pods = {pod(s.job, 0, 0), pod(s.job, 0, 2),
            pod(s.job, 0, 1).node("node-00001").deleting().condition(vocab::kGangRollbackCondition,
                                                                     "True", "GangRollback")};
  Plan plan = s.run();
  CHECK((!plan.status || plan.status->restarts == 0));
  CHECK(plan.create_pods.empty());  // still there

  s.pods.pop_back();
  s.deleted["mpi-sample-job-0-1"] = seenDeleted(0, 1, true);
  plan = s.run();
  CHECK((!plan.status || plan.status->restarts == 0));
  CHECK(plan.create_pods == std::vector<int32_t>{1});
}

// --- preemption by Muster's scheduler (muster.dev/Preempted) -------------------------------------

TEST_CASE("a preempted gang is requeued without a restart, and every pod of the attempt goes",
          "[reconcile][preemption]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.job.status.conditions.push_back({vocab::kConditionRunning, "True", "AllPodsRunning", "m", kNow});
  // Only worker 1 carries the mark so far (the scheduler marks, then evicts, pod by pod).
  std::vector<std::string> deleted = {"mpi-sample-job-0-0", "mpi-sample-job-0-2"};
  SECTION("a marked pod being evicted (terminating)") {
    s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running().preempted().deleting(),
              pod(s.job, 0, 2).running()};
  }
  SECTION("a marked pod whose containers ended Failed (not deleted yet: the engine deletes it)") {
    s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running().preempted().failed(143, "Error"),
              pod(s.job, 0, 2).running()};
    deleted = {"mpi-sample-job-0-0", "mpi-sample-job-0-1", "mpi-sample-job-0-2"};
  }
  SECTION("a marked pod already gone, remembered from its deletion") {
    s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 2).running()};
    s.deleted["mpi-sample-job-0-1"] = seenDeleted(0, 1, false, "ml/big-train");
  }
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Pending");
  CHECK(plan.status->restarts == 0);
  CHECK(plan.status->preemptions == 1);
  CHECK(plan.status->job_group_name == "mpi-sample-job-0");
  const auto* preempted = findCondition(plan.status->conditions, kConditionPreempted);
  REQUIRE(preempted != nullptr);
  CHECK(preempted->status == "True");
  CHECK(preempted->reason == "Preempted");
  CHECK(preempted->message == "Preempted by ml/big-train");
  CHECK(findCondition(plan.status->conditions, vocab::kConditionRunning)->status == "False");
  CHECK(findCondition(plan.status->conditions, vocab::kConditionPodsCreated)->status == "False");
  CHECK_FALSE(findCondition(plan.status->conditions, vocab::kConditionFailed));
  CHECK(plan.status->message.find("Preempted by ml/big-train: requeued (restarts stay 0)") == 0);
  REQUIRE(countEvents(plan, "Preempted") == 1);
  CHECK(plan.events.size() == 1);
  CHECK(plan.events[0].type == "Warning");
  CHECK(plan.events[0].message == "Preempted by ml/big-train");
  // The unmarked pods go too: a preempted gang keeps none of its pods.
  CHECK(names(plan.delete_pods) == deleted);
  CHECK_FALSE(plan.delete_support);  // the same attempt runs again with its Service and Secret
  CHECK(plan.create_pods.empty());
}

TEST_CASE("a requeued attempt is created again, same names, once none of its pods is left",
          "[reconcile][preemption]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running().preempted(), pod(s.job, 0, 1).running().preempted(),
            pod(s.job, 0, 2).running().preempted()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  s.job.status = *plan.status;
  REQUIRE(s.job.status.preemptions == 1);

  // The Event and the count are the preemption's, not every reconcile's.
  s.pods = {pod(s.job, 0, 0).running().preempted().deleting(),
            pod(s.job, 0, 2).running().preempted().failed(143, "Error")};
  s.deleted["mpi-sample-job-0-1"] = seenDeleted(0, 1, false, "ml/big-train");
  Plan waiting = s.run();
  CHECK(waiting.events.empty());
  CHECK((!waiting.status || waiting.status->preemptions == 1));
  CHECK(waiting.create_pods.empty());
  CHECK_FALSE(waiting.create_pods_needed);
  CHECK(names(waiting.delete_pods) == std::vector<std::string>{"mpi-sample-job-0-2"});
  if (waiting.status) s.job.status = *waiting.status;

  // All gone (two deleted by the engine itself, unmarked): the same attempt's pods are created.
  s.pods.clear();
  s.deleted["mpi-sample-job-0-0"] = seenDeleted(0, 0, false, "ml/big-train");
  s.deleted["mpi-sample-job-0-2"] = seenDeleted(0, 2);
  Plan again = s.run();
  REQUIRE(again.status);
  CHECK(again.status->restarts == 0);
  CHECK(again.status->phase == "Pending");
  CHECK(again.attempt.group == "mpi-sample-job-0");
  CHECK(again.create_pods_needed);
  CHECK(again.create_pods == std::vector<int32_t>{0, 1, 2});
  CHECK(again.events.empty());
  s.job.status = *again.status;

  // Slow start created pod 0 only: the others are created, the deletions remembered from before
  // the requeue are no failure and no new preemption.
  s.pods = {pod(s.job, 0, 0)};
  Plan rest = s.run();
  CHECK((!rest.status || (rest.status->restarts == 0 && rest.status->preemptions == 1)));
  CHECK(rest.create_pods == std::vector<int32_t>{1, 2});
  CHECK(rest.events.empty());
  if (rest.status) s.job.status = *rest.status;

  // Gang-scheduled again and running: Running, and Preempted is over.
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running(), pod(s.job, 0, 2).running()};
  Plan created = s.run();
  REQUIRE(created.status);
  s.job.status = *created.status;
  Plan running = s.run();
  if (running.status) s.job.status = *running.status;
  CHECK(s.job.status.phase == "Running");
  CHECK(s.job.status.restarts == 0);
  CHECK(s.job.status.preemptions == 1);
  const auto* preempted = findCondition(s.job.status.conditions, kConditionPreempted);
  REQUIRE(preempted != nullptr);
  CHECK(preempted->status == "False");
  CHECK(preempted->reason == "Requeued");
  CHECK(preempted->message.find("Preempted by ml/big-train") == 0);
  CHECK(hasEvent(created, "Running") != hasEvent(running, "Running"));
  CHECK_FALSE(hasEvent(running, "Preempted"));
}

TEST_CASE("while a requeued gang waits to run, the job says it was preempted", "[reconcile][preemption]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running().preempted(), pod(s.job, 0, 1).running(), pod(s.job, 0, 2).running()};
  s.job.status = *s.run().status;
  s.pods.clear();
  s.job.status = *s.run().status;  // creating again
  s.pods = {pod(s.job, 0, 0).unschedulable("0/16 nodes fit the gang of 3"), pod(s.job, 0, 1),
            pod(s.job, 0, 2)};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Pending");
  CHECK(plan.status->message ==
        "attempt mpi-sample-job-0 (requeued after a preemption): 0 of 3 pods running; not scheduled "
        "yet: 0/16 nodes fit the gang of 3");
  CHECK(findCondition(plan.status->conditions, kConditionPreempted)->status == "True");
}

TEST_CASE("a job with no restarts left that is preempted is requeued, not failed",
          "[reconcile][preemption]") {
  Scenario s(started(decodeJob(seedJobJson("mpi-sample-job", 3, 2, 1)), 1, true, "Running"));
  s.pods = {pod(s.job, 1, 0).running().preempted().failed(143, "Error"),
            pod(s.job, 1, 1).running().preempted().deleting(), pod(s.job, 1, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Pending");
  CHECK(plan.status->restarts == 1);
  CHECK(plan.status->preemptions == 1);
  CHECK_FALSE(findCondition(plan.status->conditions, vocab::kConditionFailed));
  CHECK_FALSE(hasEvent(plan, "MaxRestartsExceeded"));
  CHECK(names(plan.delete_pods) == std::vector<std::string>{"mpi-sample-job-1-0", "mpi-sample-job-1-2"});
}

TEST_CASE("a pod deleted without the Preempted mark is still a failure", "[reconcile][preemption]") {
  SECTION("in a job never preempted") {
    Scenario s(started(seedJob(), 0, true, "Running"));
    s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 2).running()};
    s.deleted["mpi-sample-job-0-1"] = seenDeleted(0, 1);
    Plan plan = s.run();
    REQUIRE(plan.status);
    CHECK(plan.status->restarts == 1);
    CHECK(plan.status->preemptions == 0);
    CHECK_FALSE(hasEvent(plan, "Preempted"));
  }
  SECTION("in a job that was preempted and runs again") {
    Scenario s(started(seedJob(), 0, true, "Running"));
    s.job.status.preemptions = 1;
    s.job.status.conditions.push_back(
        {kConditionPreempted, "False", "Requeued", "Preempted by ml/big-train; requeued", kNow});
    s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running().deleting(),
              pod(s.job, 0, 2).running()};
    Plan plan = s.run();
    REQUIRE(plan.status);
    CHECK(plan.status->phase == "Restarting");
    CHECK(plan.status->restarts == 1);
    CHECK(plan.status->preemptions == 1);
    CHECK(plan.status->message.find("pod mpi-sample-job-0-1 (worker 1) was deleted") != std::string::npos);
  }
}

TEST_CASE("a launcher that succeeded ends the job even when its workers are being preempted",
          "[reconcile][preemption]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running().succeeded(), pod(s.job, 0, 1).running().preempted(),
            pod(s.job, 0, 2).running().preempted()};
  Plan done = s.run();
  REQUIRE(done.status);
  CHECK(done.status->phase == "Succeeded");
  CHECK(done.status->preemptions == 0);
  // A launcher that exited 0 on the eviction's SIGTERM, itself marked, did not finish its work.
  s.pods[0] = pod(s.job, 0, 0).running().preempted().succeeded();
  Plan requeued = s.run();
  REQUIRE(requeued.status);
  CHECK(requeued.status->phase == "Pending");
  CHECK(requeued.status->preemptions == 1);
}

TEST_CASE("a pod whose node is gone restarts the job, naming the node", "[reconcile]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running(), pod(s.job, 0, 1).running().node("node-00009"),
            pod(s.job, 0, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->restarts == 1);
  CHECK(plan.status->message.find("lost its node node-00009") != std::string::npos);
}

TEST_CASE("an unknown runtime fails the job with a condition and an Event and creates no pods",
          "[reconcile]") {
  Scenario s(decodeJob(seedJobJson("j", 2, 1, 3, "mpi-mpich")));
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Failed");
  const auto* failed = findCondition(plan.status->conditions, vocab::kConditionFailed);
  REQUIRE(failed != nullptr);
  CHECK(failed->reason == "UnknownRuntime");
  CHECK(failed->message.find("\"mpi-mpich\"") != std::string::npos);
  CHECK(failed->message.find("mpi-openmpi") != std::string::npos);
  CHECK(hasEvent(plan, "UnknownRuntime"));
  CHECK(plan.create_pods.empty());
}

TEST_CASE("a job whose launcher template the runtime cannot use fails before creating pods",
          "[reconcile]") {
  auto job = seedJob();
  job.spec.launcher = R"({"spec":"not an object"})";
  Scenario s(job);
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Failed");
  CHECK(findCondition(plan.status->conditions, vocab::kConditionFailed)->reason == "InvalidSpec");
  CHECK(plan.create_pods.empty());
}

TEST_CASE("numPods above the maximum fails the job with InvalidSpec before any pod", "[reconcile]") {
  Scenario s(decodeJob(seedJobJson("huge", 20000)));  // a CRD without the maximum let it through
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Failed");
  const auto* failed = findCondition(plan.status->conditions, vocab::kConditionFailed);
  REQUIRE(failed != nullptr);
  CHECK(failed->reason == "InvalidSpec");
  CHECK(failed->message ==
        "the job cannot run: spec.numPods is 20000, more than the 4096 pods a ParallelJob may have "
        "(its hostfile must fit into one ConfigMap). No pods were created");
  CHECK(hasEvent(plan, "InvalidSpec"));
  CHECK(plan.create_pods.empty());
  CHECK_FALSE(plan.create_pods_needed);
}

TEST_CASE("status.pods counts the job's pods that exist: after success it drops to the launcher",
          "[reconcile]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.pods = {pod(s.job, 0, 0).running().succeeded(), pod(s.job, 0, 1).running(),
            pod(s.job, 0, 2).running()};
  Plan plan = s.run();
  REQUIRE(plan.status);
  CHECK(plan.status->phase == "Succeeded");
  CHECK(plan.status->pods == 3);  // the workers are still there when Succeeded is written
  s.job.status = *plan.status;
  // The workers are gone: only the count changed, and it is written (also by a process that
  // did not write the 3: it is read back from the job).
  s.pods = {pod(s.job, 0, 0).running().succeeded()};
  Plan after = s.run();
  REQUIRE(after.status);
  CHECK(after.status->phase == "Succeeded");
  CHECK(after.status->pods == 1);
  CHECK(after.status->pods_ready == 0);
  CHECK(after.status->ready == "0/3");  // READY as a completed Pod's
  // Written already: nothing to write.
  s.job.status = *after.status;
  CHECK_FALSE(s.run().status);
}

TEST_CASE("a job being deleted is left to the garbage collector", "[reconcile]") {
  Scenario s(started(seedJob(), 0, true, "Running"));
  s.job.meta.deletion_timestamp = kNow;
  Plan plan = s.run();
  CHECK_FALSE(plan.status);
  CHECK(plan.delete_pods.empty());
  CHECK(plan.create_pods.empty());
}

TEST_CASE("describeTermination prefers main's exit code and names other containers", "[reconcile]") {
  proto::Pod p;
  p.status.container_statuses = {{"sidecar", false, 0, "terminated", 2, "Error", {}, ""},
                                 {"main", false, 0, "terminated", 0, "Completed", {}, ""}};
  CHECK(describeTermination(p) == "exit code 0 (Completed)");
  p.status.container_statuses = {{"sidecar", false, 0, "terminated", 2, "Error", {}, ""}};
  CHECK(describeTermination(p) == "exit code 2 in container sidecar (Error)");
  p.status.container_statuses.clear();
  p.status.reason = "Evicted";
  p.status.message = "The node was low on resource: memory.";
  CHECK(describeTermination(p) == "no exit code (Evicted): The node was low on resource: memory.");
}

}  // namespace
}  // namespace muster::jobengine
