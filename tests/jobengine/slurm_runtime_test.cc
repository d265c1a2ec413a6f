// A Slurm batch submission end to end without a cluster: sbatch's options -> the ParallelJob and
// Secret it submits (submit.h) -> the pods the slurm runtime builds -> the job states reconcile
// reaches with Slurm's rules (runtime.h).
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "jobengine/naming.h"
#include "jobengine/reconcile.h"
#include "jobengine/slurm/cli/job_ids.h"
#include "jobengine/slurm/cli/job_view.h"
#include "jobengine/slurm/core/dependency.h"
#include "jobengine/slurm/core/limits.h"
#include "jobengine/slurm/core/script.h"
#include "jobengine/slurm/runtime/runtime.h"
#include "jobengine/slurm/runtime/submit.h"
#include "proto/codec.h"
#include "proto/json.h"

namespace muster::jobengine::slurm {
namespace {

constexpr char kConfig[] = R"(
slurm:
  clusterName: testcluster
  defaultPartition: gpu
  partitions:
  - name: gpu
    nodeSelector: {muster.dev/pool: gpu}
    defaultTime: "2:00:00"
    maxTime: "1-00:00:00"
    maxNodes: 16
    defaultMemPerCpu: 2048
    priorityClassName: training
    topologyPreferred: muster.dev/rack
    template:
      metadata: {labels: {team: hpc}}
      spec:
        serviceAccountName: slurm-jobs
        tolerations: [{key: gpu, operator: Exists}]
        containers:
        - name: main
          image: registry.example.com/hpc:1
          env: [{name: SITE, value: "a"}]
          volumeMounts: [{name: home, mountPath: /home}]
        volumes:
        - {name: home, persistentVolumeClaim: {claimName: jail-pvc}}
  - name: cpu
    template:
      spec:
        containers: [{name: main, image: "registry.example.com/cpu:1"}]
)";

SlurmConfig config() {
  auto c = parseSlurmSection(kConfig);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

SubmitContext context() {
  SubmitContext ctx;
  ctx.ns = "alice";
  ctx.user = "alice@example.com";
  ctx.submit_host = "login-0";
  ctx.submit_dir = "/home/alice/proj";
  ctx.environment = {{"PATH", "/usr/bin"}, {"HOME", "/home/alice"}, {"SECRET_TOKEN", "s3cr3t"}};
  ctx.script = "#!/bin/bash\n#SBATCH --job-name=train\necho hi\n";
  ctx.script_path = "train.sh";
  ctx.now = absl::FromUnixSeconds(1767225600);
  // Four 8-GPU nodes of 64 cpus and 512 GiB, and one small node.
  ctx.nodes.emplace();
  for (int i = 0; i < 4; ++i)
    ctx.nodes->push_back({"gpu-" + std::to_string(i), 64000, 512 * 1024, 8,
                          {{"muster.dev/pool", "gpu"}, {"muster.dev/gpu.model", "a100"}, {"nvme", "true"}}});
  ctx.nodes->push_back({"small", 4000, 16 * 1024, 0, {{"muster.dev/pool", "gpu"}}});
  return ctx;
}

BatchOptions options(const std::vector<std::string>& argv) {
  auto o = parseSbatchArgs(argv);
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  return *o;
}

// What the API server would hand back: the submitted job, encoded and decoded, with a uid.
proto::ParallelJob submitted(const Submission& s) {
  proto::ParallelJob job;
  REQUIRE(proto::decodeJson(proto::encode(s.job), &job).ok());
  job.meta.uid = "uid-job";
  job.meta.resource_version = "1";
  return job;
}

rapidjson::Document podOf(const SlurmRuntime& runtime, const proto::ParallelJob& job,
                          int32_t attempt, int32_t index) {
  AttemptInfo a{attempt, groupName(job.meta.name, attempt)};
  auto body = runtime.buildPod(job, a, index);
  INFO(body.status().ToString());
  REQUIRE(body.ok());
  auto doc = proto::parseJson(*body);
  REQUIRE(doc.ok());
  return std::move(*doc);
}

std::string envOf(const rapidjson::Value& c, const std::string& name) {
  for (const auto& e : c["env"].GetArray())
    if (e["name"].GetString() == name) return e["value"].GetString();
  return "<unset>";
}

RuntimeOptions runtimeOptions() {
  RuntimeOptions o;
  o.slurm = config();
  return o;
}

TEST_CASE("a 4-node GPU batch job becomes one gang of 4 pods that ask for what the script asks",
          "[slurm]") {
  auto s = buildSubmission(
      options({"-N", "4", "--ntasks-per-node=2", "-c", "4", "--gpus-per-node=8", "-t", "30"}),
      config(), context(), 123);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  proto::ParallelJob job = submitted(*s);
  CHECK(job.meta.name == "slurm-123");
  CHECK(job.spec.runtime_ref_name == "slurm");
  CHECK(job.spec.num_pods == 4);
  CHECK(job.spec.max_restarts == 3);  // --requeue is Slurm's default
  REQUIRE(job.spec.slurm);
  CHECK(job.spec.slurm->ntasks == 8);
  CHECK(job.spec.slurm->tasks_per_node == std::vector<int32_t>{2, 2, 2, 2});
  CHECK(job.spec.slurm->time_limit_seconds == 1800);
  CHECK(job.spec.slurm->partition == "gpu");
  CHECK(job.spec.slurm->work_dir == "/home/alice/proj");
  CHECK(job.meta.annotations.at("muster.dev/topology-preferred") == "muster.dev/rack");

  SlurmRuntime runtime(runtimeOptions());
  auto batch = podOf(runtime, job, 0, 0);
  const auto& spec = batch["spec"];
  CHECK(std::string(spec["serviceAccountName"].GetString()) == "slurm-jobs");
  CHECK(std::string(spec["priorityClassName"].GetString()) == "training");
  CHECK(std::string(spec["nodeSelector"]["muster.dev/pool"].GetString()) == "gpu");
  CHECK(spec["activeDeadlineSeconds"].GetInt64() == 1800 + 300);
  CHECK(std::string(spec["dnsConfig"]["searches"][0].GetString()) ==
        "slurm-123-0.alice.svc.cluster.local");
  const auto& main = spec["containers"][0];
  CHECK(std::string(main["image"].GetString()) == "registry.example.com/hpc:1");
  CHECK(std::string(main["command"][1].GetString()) == "batch-step");
  CHECK(std::string(main["resources"]["requests"]["cpu"].GetString()) == "8000m");
  CHECK(std::string(main["resources"]["requests"]["memory"].GetString()) == "16384Mi");
  CHECK(std::string(main["resources"]["limits"]["nvidia.com/gpu"].GetString()) == "8");
  CHECK(envOf(main, "SLURM_JOB_ID") == "123");
  CHECK(envOf(main, "SLURM_JOB_NODELIST") == "slurm-123-0-[0-3]");
  CHECK(envOf(main, "SLURM_TASKS_PER_NODE") == "2(x4)");
  CHECK(envOf(main, "SLURM_NTASKS") == "8");
  CHECK(envOf(main, "SLURM_CPUS_PER_TASK") == "4");
  CHECK(envOf(main, "SLURM_JOB_PARTITION") == "gpu");
  CHECK(envOf(main, "SLURM_SUBMIT_DIR") == "/home/alice/proj");
  CHECK(envOf(main, "SLURM_RESTART_COUNT") == "0");
  CHECK(envOf(main, "SLURM_CLUSTER_NAME") == "testcluster");
  CHECK(envOf(main, "SITE") == "a");  // the partition's own env stays
  CHECK(envOf(main, "SECRET_TOKEN") == "<unset>");  // the submission env is in the Secret only
  CHECK(std::string(batch["metadata"]["annotations"]["gang-scheduling.preferred.jp/gang-size"].GetString()) == "4");
  CHECK(std::string(batch["metadata"]["labels"]["team"].GetString()) == "hpc");
  bool batch_mounted = false;
  for (const auto& m : main["volumeMounts"].GetArray())
    batch_mounted |= std::string(m["mountPath"].GetString()) == kBatchMountPath;
  CHECK(batch_mounted);

  auto node = podOf(runtime, job, 0, 2);
  const auto& node_main = node["spec"]["containers"][0];
  CHECK(std::string(node_main["command"][1].GetString()) == "/etc/muster/mpi/sshd.sh");
  CHECK(envOf(node_main, "SLURMD_NODENAME") == "slurm-123-0-2");
  CHECK(envOf(node_main, "SLURM_NODEID") == "2");
  CHECK(std::string(node["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"].GetString()) ==
        "jail-pvc");
}

TEST_CASE("the job name is -J's, else the script's base name, in the job and SLURM_JOB_NAME",
          "[slurm]") {
  SlurmRuntime runtime(runtimeOptions());
  auto named = buildSubmission(options({"-J", "train"}), config(), context(), 7);
  REQUIRE(named.ok());
  proto::ParallelJob job = submitted(*named);
  CHECK(job.spec.slurm->job_name == "train");
  CHECK(envOf(podOf(runtime, job, 0, 0)["spec"]["containers"][0], "SLURM_JOB_NAME") == "train");
  // From the script's #SBATCH lines, as sbatch reads them.
  auto directives = parseBatchScript(context().script, "train.sh");
  REQUIRE(directives.ok());
  auto from_script = parseScriptOptions(*directives);
  REQUIRE(from_script.ok());
  auto resolved = resolveBatchOptions(*from_script, {}, options({"/home/alice/proj/run.sh"}));
  REQUIRE(resolved.ok());
  auto scripted = buildSubmission(*resolved, config(), context(), 8);
  REQUIRE(scripted.ok());
  CHECK(submitted(*scripted).spec.slurm->job_name == "train");
  // Without -J: the script's base name.
  auto unnamed = buildSubmission(options({"/home/alice/proj/run.sh"}), config(), context(), 9);
  REQUIRE(unnamed.ok());
  CHECK(submitted(*unnamed).spec.slurm->job_name == "run.sh");
}

TEST_CASE("the batch Secret holds the script and the environment after --export, not the pods",
          "[slurm]") {
  auto s = buildSubmission(options({"--export=PATH,EXTRA=1"}), config(), context(), 7);
  REQUIRE(s.ok());
  CHECK(s->batch.meta.name == "slurm-7-batch");
  CHECK(s->batch.string_data.at("script") == context().script);
  const std::string env = s->batch.string_data.at("environment");
  CHECK(env.find(std::string("PATH=/usr/bin\0", 14)) != std::string::npos);
  CHECK(env.find(std::string("EXTRA=1\0", 8)) != std::string::npos);
  CHECK(env.find("SECRET_TOKEN") == std::string::npos);
  CHECK(env.find("HOME=") == std::string::npos);
  // Whose it is, and unchangeable once created (issue 43).
  CHECK(s->batch.meta.annotations.at("muster.dev/slurm-user") == "alice@example.com");
  auto doc = proto::parseJson(proto::encode(s->batch));
  REQUIRE(doc.ok());
  CHECK((*doc)["immutable"].GetBool());
  CHECK(std::string((*doc)["metadata"]["annotations"]["muster.dev/slurm-user"].GetString()) ==
        "alice@example.com");
}

TEST_CASE("what no partition can ever run is refused with Slurm's words", "[slurm]") {
  auto refusal = [](const std::vector<std::string>& argv) {
    absl::Status s = checkSubmission(options(argv), config(), context());
    REQUIRE_FALSE(s.ok());
    return std::string(s.message());
  };
  CHECK(refusal({"-p", "nope"}) == "sbatch: error: Batch job submission failed: Invalid partition name specified");
  // Without --time: the partition's default; with only a maximum, the maximum (Slurm's rule).
  CHECK(buildSubmission(options({}), config(), context(), 1)->job.spec.slurm->time_limit_seconds == 7200);
  CHECK(refusal({"-t", "2-00:00:00"}) ==
        "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)");
  CHECK(refusal({"-N", "17"}) == "sbatch: error: Batch job submission failed: Node count specification invalid");
  CHECK(refusal({"--gpus-per-node=16"}) ==
        "sbatch: error: Batch job submission failed: Requested node configuration is not available");
  CHECK(refusal({"--gres=gpu:h100:1"}) ==
        "sbatch: error: Batch job submission failed: Requested node configuration is not available");
  CHECK(refusal({"-w", "gpu-9"}).find("node gpu-9 is not in partition gpu") != std::string::npos);
  CHECK(refusal({"-N", "5", "--exclusive", "--gpus-per-node=8"}) ==
        "sbatch: error: Batch job submission failed: Requested node configuration is not available");
  CHECK(refusal({"--array=3-1"}) == "sbatch: error: Batch job submission failed: Invalid job array specification");
  CHECK(refusal({"--array=0-1001"}) == "sbatch: error: Batch job submission failed: Invalid job array specification");
  CHECK(refusal({"--dependency=after:1:"}) == "sbatch: error: Batch job submission failed: Job dependency problem");
  // Without the nodes (the user may not list them), only the partition's own limits apply.
  SubmitContext blind = context();
  blind.nodes.reset();
  CHECK(checkSubmission(options({"--gpus-per-node=16"}), config(), blind).ok());
}

TEST_CASE("sbatch -w -x and -C become node affinity and a node selector", "[slurm]") {
  auto s = buildSubmission(options({"-w", "gpu-[0-1]", "-x", "gpu-3", "-C", "muster.dev/gpu.model=a100&nvme"}),
                           config(), context(), 9);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  auto doc = proto::parseJson(s->job.spec.launcher);
  REQUIRE(doc.ok());
  const auto& spec = (*doc)["spec"];
  CHECK(std::string(spec["nodeSelector"]["muster.dev/gpu.model"].GetString()) == "a100");
  const auto& exprs = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                          ["nodeSelectorTerms"][0]["matchExpressions"];
  REQUIRE(exprs.Size() == 3);
  CHECK(std::string(exprs[0]["operator"].GetString()) == "In");
  CHECK(exprs[0]["values"].Size() == 2);
  CHECK(std::string(exprs[1]["operator"].GetString()) == "NotIn");
  CHECK(std::string(exprs[2]["key"].GetString()) == "nvme");
  CHECK(std::string(exprs[2]["operator"].GetString()) == "Exists");
  // Recorded for scontrol's ReqNodeList/ExcNodeList and squeue's ReqNodeNotAvail.
  const proto::ParallelJob job = submitted(*s);
  CHECK(job.spec.slurm->required_nodes == std::vector<std::string>{"gpu-0", "gpu-1"});
  CHECK(job.spec.slurm->excluded_nodes == std::vector<std::string>{"gpu-3"});
}

// --- job states ------------------------------------------------------------------------------

struct Job {
  Job(const std::vector<std::string>& argv = {"-N", "3"}, int64_t id = 55) : runtimes() {
    auto s = buildSubmission(options(argv), config(), context(), id);
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    job = submitted(*s);
    runtimes.add(std::make_unique<SlurmRuntime>(runtimeOptions()));
  }
  // The job as reconcile leaves it after `plan`.
  void apply(const Plan& plan) {
    if (plan.status) job.status = *plan.status;
  }
  Plan run(absl::Time now = absl::FromUnixSeconds(1767225600)) {
    Observation obs;
    obs.job = &job;
    obs.pods = pods;
    obs.now_time = now;
    obs.now = proto::rfc3339(now);
    obs.jobs = jobs;
    return reconcile(obs, runtimes);
  }
  // Runs reconcile until the attempt's pods would be created, then "creates" them all Running.
  void startRunning() {
    apply(run());  // Pending, attempt recorded
    Plan p = run();
    REQUIRE(p.create_pods_needed);
    AttemptInfo a{job.status.restarts, job.status.job_group_name};
    pods.clear();
    for (int32_t i = 0; i < job.spec.num_pods; ++i) {
      auto body = runtimes.find("slurm")->buildPod(job, a, i);
      REQUIRE(body.ok());
      auto pod = std::make_shared<proto::Pod>();
      REQUIRE(proto::decodeJson(*body, pod.get()).ok());
      pod->meta.uid = pod->meta.name;
      pod->spec.node_name = "gpu-" + std::to_string(i);
      pod->status.phase = "Running";
      pods.push_back(pod);
    }
    apply(p);
    apply(run());  // PodsCreated
    apply(run());  // Running
    REQUIRE(job.status.phase == "Running");
    REQUIRE(job.status.slurm->state == "RUNNING");
  }
  // As if the pods were created but nothing was bound yet: the job is still PENDING.
  void waitForRoom() {
    startRunning();
    job.status.phase = "Pending";
    job.status.slurm->state = "PENDING";
    job.status.conditions.clear();
    for (int i = 0; i < job.spec.num_pods; ++i) {
      pod(i).spec.node_name.clear();
      pod(i).status.phase = "Pending";
    }
  }
  proto::Pod& pod(int i) { return const_cast<proto::Pod&>(*pods[i]); }
  // squeue's reason while the batch pod is Unschedulable with the scheduler's `message`.
  std::string reasonWhileUnschedulable(const std::string& message) {
    proto::PodCondition c;
    c.type = "PodScheduled";
    c.status = "False";
    c.reason = "Unschedulable";
    c.message = message;
    pod(0).status.conditions = {c};
    Plan p = run();
    return p.status ? p.status->slurm->reason : job.status.slurm->reason;
  }
  // Task `k` (in task id order) of the array `argv` submits from job id `first_id`.
  void becomeTask(const std::vector<std::string>& argv, int64_t first_id, size_t k) {
    auto subs = buildSubmissions(options(argv), config(), context(), first_id);
    REQUIRE(subs.ok());
    REQUIRE(k < subs->size());
    job = submitted((*subs)[k]);
    job.meta.uid = "uid-" + std::to_string(job.spec.slurm->job_id);
  }

  RuntimeRegistry runtimes;
  proto::ParallelJob job;
  std::vector<std::shared_ptr<const proto::Pod>> pods;
  const JobDirectory* jobs = nullptr;
};

TEST_CASE("a batch script that exits 0 is COMPLETED and the other nodes are released", "[slurm]") {
  Job j;
  j.startRunning();
  j.pod(0).status.phase = "Succeeded";
  j.pod(0).status.container_statuses = {{"main", false, 0, "terminated", 0, "Completed", {}, "0:0"}};
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->slurm->state == "COMPLETED");
  CHECK(p.status->slurm->exit_code == "0:0");
  CHECK(p.delete_pods.size() == 2);
}

TEST_CASE("a batch script that fails is FAILED with its exit code, never requeued", "[slurm]") {
  Job j;
  j.startRunning();
  j.pod(0).status.phase = "Failed";
  j.pod(0).status.container_statuses = {{"main", false, 0, "terminated", 3, "Error", {}, "3:0"}};
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->phase == "Failed");
  CHECK(p.status->restarts == 0);
  CHECK(p.status->slurm->state == "FAILED");
  CHECK(p.status->slurm->exit_code == "3:0");
  // The idle nodes are released; the batch pod stays for kubectl logs.
  std::vector<std::string> deleted;
  for (const auto& r : p.delete_pods) deleted.push_back(r.name);
  std::sort(deleted.begin(), deleted.end());
  CHECK(deleted == std::vector<std::string>{"slurm-55-0-1", "slurm-55-0-2"});
}

TEST_CASE("a lost node requeues the whole job (NODE_FAIL) and SLURM_RESTART_COUNT grows",
          "[slurm]") {
  Job j;
  j.startRunning();
  j.pod(2).status.phase = "Failed";
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->phase == "Restarting");
  CHECK(p.status->restarts == 1);
  CHECK(p.status->slurm->state == "PENDING");
  CHECK(p.status->slurm->reason == "Requeued");
  j.apply(p);
  SlurmRuntime runtime(runtimeOptions());
  auto next = podOf(runtime, j.job, 1, 0);
  CHECK(envOf(next["spec"]["containers"][0], "SLURM_RESTART_COUNT") == "1");
  CHECK(envOf(next["spec"]["containers"][0], "SLURM_JOB_NODELIST") == "slurm-55-1-[0-2]");
}

// What muster-scheduler sets on every member of a gang it preempts, before evicting it.
void markPreempted(proto::Pod& pod) {
  proto::PodCondition c;
  c.type = proto::vocabulary::kPreemptedCondition;
  c.status = "True";
  c.reason = proto::vocabulary::kPreemptedReason;
  c.message = "Preempted by hpc/urgent";
  pod.status.conditions.push_back(c);
}

TEST_CASE("a preempted job is requeued as with PreemptMode=REQUEUE: PENDING, Restarts+1, "
          "not a NODE_FAIL",
          "[slurm][preemption]") {
  Job j;
  j.startRunning();
  for (int i = 0; i < 3; ++i) markPreempted(j.pod(i));
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->phase == "Pending");
  CHECK(p.status->restarts == 0);
  CHECK(p.status->preemptions == 1);
  CHECK(p.delete_pods.size() == 3);
  // While the preempted run's pods go: PENDING, reason BeginTime (Slurm's requeue sets the begin
  // time past the old allocation's cleanup), no start time, no steps of a run that ended.
  CHECK(p.status->slurm->state == "PENDING");
  CHECK(p.status->slurm->reason == "BeginTime");
  CHECK(p.status->slurm->start_time.empty());
  CHECK(p.status->slurm->end_time.empty());
  j.apply(p);
  std::optional<JobView> view = viewOf(j.job);
  REQUIRE(view);
  CHECK(view->state == JobState::kPending);
  CHECK(view->restarts == 1);  // Slurm's restart_cnt counts the requeue
  const std::string shown = renderShowJob(*view, absl::FromUnixSeconds(1767225600));
  CHECK(shown.find("JobState=PENDING Reason=BeginTime") != std::string::npos);
  CHECK(shown.find("Restarts=1 ") != std::string::npos);

  // Gone: the same attempt (same node names) is created again; SLURM_RESTART_COUNT says 1.
  j.pods.clear();
  Plan again = j.run();
  CHECK(again.create_pods == std::vector<int32_t>{0, 1, 2});
  REQUIRE(again.status);
  CHECK(again.status->slurm->reason == "Requeued");
  j.apply(again);
  SlurmRuntime runtime(runtimeOptions());
  auto next = podOf(runtime, j.job, 0, 0);
  CHECK(envOf(next["spec"]["containers"][0], "SLURM_RESTART_COUNT") == "1");
  CHECK(envOf(next["spec"]["containers"][0], "SLURM_JOB_NODELIST") == "slurm-55-0-[0-2]");
}

TEST_CASE("with --no-requeue a preempted job ends PREEMPTED and keeps no pod", "[slurm][preemption]") {
  Job j({"-N", "3", "--no-requeue"});
  j.startRunning();
  for (int i = 0; i < 3; ++i) markPreempted(j.pod(i));
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->phase == "Failed");
  CHECK(p.status->preemptions == 0);
  CHECK(p.status->slurm->state == "PREEMPTED");
  CHECK(p.status->slurm->exit_code == "0:15");
  CHECK(p.status->message.find("Preempted by hpc/urgent") == 0);
  CHECK(p.delete_pods.size() == 3);
  j.apply(p);
  std::optional<JobView> view = viewOf(j.job);
  REQUIRE(view);
  CHECK(view->state == JobState::kPreempted);
}

TEST_CASE("with --no-requeue a lost node ends the job as NODE_FAIL", "[slurm]") {
  Job j({"-N", "3", "--no-requeue"});
  CHECK(j.job.spec.max_restarts == 0);
  j.startRunning();
  j.pods.erase(j.pods.begin() + 1);  // gone
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->phase == "Failed");
  CHECK(p.status->slurm->state == "NODE_FAIL");
}

TEST_CASE("past --time the job is TIMEOUT and every pod is stopped", "[slurm]") {
  Job j({"-N", "2", "-t", "10"});
  j.startRunning();
  const absl::Time started = absl::FromUnixSeconds(1767225600);
  Plan early = j.run(started + absl::Minutes(9));
  CHECK_FALSE(early.status);
  REQUIRE(early.requeue_after);
  CHECK(*early.requeue_after == std::chrono::milliseconds(60000));
  Plan late = j.run(started + absl::Minutes(10));
  REQUIRE(late.status);
  CHECK(late.status->slurm->state == "TIMEOUT");
  CHECK(late.delete_pods.size() == 2);
}

TEST_CASE("scontrol requeue runs a running or ended job again as its next attempt, once",
          "[slurm]") {
  Job j({"-N", "2", "--no-requeue"});
  j.startRunning();
  // The batch script exits 0: COMPLETED, only the batch pod kept.
  j.pod(0).status.phase = "Succeeded";
  j.apply(j.run());
  REQUIRE(j.job.status.slurm->state == "COMPLETED");
  // Requeued (even with --no-requeue an operator's requeue of a finished job is the engine's to
  // do; scontrol refuses it, see job_view_test): every pod goes, attempt 1 starts, PENDING.
  j.job.spec.slurm->requeue_attempt = 0;
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK(p.status->phase == "Restarting");
  CHECK(p.status->restarts == 1);
  CHECK(p.status->job_group_name == "slurm-55-1");
  CHECK(p.status->completion_time.empty());
  CHECK(p.delete_pods.size() == 2);
  CHECK(p.status->slurm->state == "PENDING");
  CHECK(p.status->slurm->reason == "Requeued");
  CHECK(p.status->slurm->end_time.empty());
  CHECK(p.status->message.find("job 55 was requeued (scontrol requeue): attempt slurm-55-0 is deleted") == 0);
  j.apply(p);
  j.pods.clear();
  // Done once: the next reconcile creates attempt 1's pods, and asks for nothing more.
  SlurmRuntime runtime(runtimeOptions());
  CHECK_FALSE(runtime.requeueRequested(j.job));
  CHECK(j.run().create_pods_needed);
  // A running job is requeued the same way; a cancelled one never is.
  Job running({"-N", "2"});
  running.startRunning();
  running.job.spec.slurm->requeue_attempt = 0;
  Plan q = running.run();
  REQUIRE(q.status);
  CHECK(q.status->restarts == 1);
  CHECK(q.delete_pods.size() == 2);
  running.job.spec.slurm->cancel = true;
  CHECK_FALSE(runtime.requeueRequested(running.job));
}

TEST_CASE("a time limit lowered while the job runs (scontrol update TimeLimit) ends it then",
          "[slurm]") {
  Job j({"-N", "2", "-t", "60"});
  j.startRunning();
  const absl::Time started = absl::FromUnixSeconds(1767225600);
  CHECK_FALSE(j.run(started + absl::Minutes(20)).status);
  j.job.spec.slurm->time_limit_seconds = 15 * 60;
  Plan late = j.run(started + absl::Minutes(20));
  REQUIRE(late.status);
  CHECK(late.status->slurm->state == "TIMEOUT");
  CHECK(late.delete_pods.size() == 2);
}

TEST_CASE("a held job creates no pods and one with --begin waits until then", "[slurm]") {
  Job held({"-H"});
  held.apply(held.run());
  Plan p = held.run();
  CHECK_FALSE(p.create_pods_needed);
  CHECK(held.job.status.slurm->reason == "JobHeldUser");

  Job later({"--begin=2026-01-01T02:00:00"});
  later.apply(later.run());
  Plan q = later.run();
  CHECK_FALSE(q.create_pods_needed);
  REQUIRE(q.requeue_after);
  CHECK(*q.requeue_after == std::chrono::milliseconds(2 * 3600 * 1000));
  Plan r = later.run(absl::FromUnixSeconds(1767225600) + absl::Hours(2));
  CHECK(r.create_pods_needed);
}


TEST_CASE("a running job has its start time, and an ended one keeps it with its end time", "[slurm]") {
  Job j;
  j.startRunning();
  CHECK(j.job.status.slurm->start_time == "2026-01-01T00:00:00Z");
  CHECK(j.job.status.slurm->end_time.empty());
  j.pod(0).status.phase = "Succeeded";
  j.pod(0).status.container_statuses = {{"main", false, 0, "terminated", 0, "Completed", {}, "0:0"}};
  Plan p = j.run(absl::FromUnixSeconds(1767225600) + absl::Minutes(5));
  REQUIRE(p.status);
  CHECK(p.status->slurm->start_time == "2026-01-01T00:00:00Z");
  CHECK(p.status->slurm->end_time == "2026-01-01T00:05:00Z");
}

TEST_CASE("scancel of a running job ends it CANCELLED and deletes every pod, the batch pod too",
          "[slurm]") {
  Job j;
  j.startRunning();
  j.job.spec.slurm->cancel = true;
  Plan p = j.run(absl::FromUnixSeconds(1767225600) + absl::Minutes(1));
  REQUIRE(p.status);
  CHECK(p.status->phase == "Failed");
  CHECK(p.status->slurm->state == "CANCELLED");
  CHECK(p.status->slurm->exit_code == "0:15");
  CHECK(p.status->slurm->end_time == "2026-01-01T00:01:00Z");
  std::vector<std::string> deleted;
  for (const auto& r : p.delete_pods) deleted.push_back(r.name);
  std::sort(deleted.begin(), deleted.end());
  CHECK(deleted == std::vector<std::string>{"slurm-55-0-0", "slurm-55-0-1", "slurm-55-0-2"});
  // Later reconciles keep deleting what is left and change nothing else.
  j.apply(p);
  Plan again = j.run(absl::FromUnixSeconds(1767225600) + absl::Minutes(2));
  CHECK_FALSE(again.status);
  CHECK(again.delete_pods.size() == 3);
}

TEST_CASE("scancel --signal reaches the running batch pod as its annotation, once per request",
          "[slurm]") {
  Job j;
  j.startRunning();
  // The batch pod reads the annotation through a downward API volume; the other pods do not.
  const rapidjson::Value* volume = nullptr;
  auto body = j.runtimes.find("slurm")->buildPod(j.job, {0, j.job.status.job_group_name}, 0);
  REQUIRE(body.ok());
  auto doc = proto::parseJson(*body);
  REQUIRE(doc.ok());
  for (const auto& v : (*doc)["spec"]["volumes"].GetArray())
    if (std::string(v["name"].GetString()) == "muster-slurm-signal") volume = &v;
  REQUIRE(volume != nullptr);
  CHECK(proto::toJson((*volume)["downwardAPI"]) ==
        R"({"items":[{"path":"signal","fieldRef":{"fieldPath":"metadata.annotations['muster.dev/slurm-signal']"}}]})");
  CHECK(envOf((*doc)["spec"]["containers"][0], "MUSTER_SLURM_SIGNAL_FILE") == kSignalFile);
  CHECK(j.run().annotate_pods.empty());

  j.job.spec.slurm->signal = proto::SlurmSignal{1, 10, "batch"};
  Plan p = j.run();
  REQUIRE(p.annotate_pods.size() == 1);
  CHECK(p.annotate_pods[0].pod.name == "slurm-55-0-0");
  CHECK(p.annotate_pods[0].pod.uid == "slurm-55-0-0");
  CHECK(p.annotate_pods[0].key == "muster.dev/slurm-signal");
  CHECK(p.annotate_pods[0].value == "1:10:batch");
  CHECK_FALSE(p.status);
  // Once the pod has it, nothing more is written.
  j.pod(0).meta.annotations["muster.dev/slurm-signal"] = "1:10:batch";
  CHECK(j.run().annotate_pods.empty());
  // A pod created while a request stands starts with it (its batch step takes it as old).
  auto again = j.runtimes.find("slurm")->buildPod(j.job, {0, j.job.status.job_group_name}, 0);
  REQUIRE(again.ok());
  proto::Pod built;
  REQUIRE(proto::decodeJson(*again, &built).ok());
  CHECK(built.meta.annotations["muster.dev/slurm-signal"] == "1:10:batch");
  // The next request, and a pod that ended gets none.
  j.job.spec.slurm->signal = proto::SlurmSignal{2, 12, ""};
  Plan next = j.run();
  REQUIRE(next.annotate_pods.size() == 1);
  CHECK(next.annotate_pods[0].value == "2:12:steps");
  j.pod(0).status.phase = "Failed";
  j.pod(0).status.container_statuses = {{"main", false, 0, "terminated", 1, "Error", {}, "1:0"}};
  CHECK(j.run().annotate_pods.empty());
}

TEST_CASE("a pending job over its partition's limits, lowered after it was submitted, waits for "
          "PartitionTimeLimit or PartitionNodeLimit and starts once back within them",
          "[slurm]") {
  Job j({"-N", "3", "-t", "10:00:00"});
  // The operator lowers the partition's MaxTime to 4 h and MaxNodes to 2 (a new config).
  RuntimeOptions lowered = runtimeOptions();
  for (Partition& p : lowered.slurm.partitions)
    if (p.name == "gpu") {
      p.max_time_seconds = 4 * 3600;
      p.max_nodes = 2;
    }
  j.runtimes = RuntimeRegistry();
  j.runtimes.add(std::make_unique<SlurmRuntime>(lowered));
  j.apply(j.run());
  Plan p = j.run();
  CHECK_FALSE(p.create_pods_needed);
  j.apply(p);
  REQUIRE(j.job.status.slurm);
  CHECK(j.job.status.slurm->state == "PENDING");
  CHECK(j.job.status.slurm->reason == "PartitionTimeLimit");
  INFO(j.job.status.message);
  CHECK(j.job.status.message.find("job 55's time limit (10:00:00) is over partition gpu's MaxTime "
                                  "(4:00:00): lower it with scontrol update JobId=55 TimeLimit=") !=
        std::string::npos);
  // scontrol update TimeLimit=2:00:00: now only its node count is over.
  j.job.spec.slurm->time_limit_seconds = 2 * 3600;
  j.apply(j.run());
  CHECK(j.job.status.slurm->reason == "PartitionNodeLimit");
  CHECK_FALSE(j.run().create_pods_needed);
  // A held job is held first.
  j.job.spec.slurm->hold = true;
  j.apply(j.run());
  CHECK(j.job.status.slurm->reason == "JobHeldUser");
  // Within both limits (the old config again) it starts.
  j.job.spec.slurm->hold = false;
  j.runtimes = RuntimeRegistry();
  j.runtimes.add(std::make_unique<SlurmRuntime>(runtimeOptions()));
  CHECK(j.run().create_pods_needed);
}

TEST_CASE("scancel of a pending job ends it CANCELLED before any pod exists", "[slurm]") {
  Job j({"-H"});
  j.apply(j.run());
  j.job.spec.slurm->cancel = true;
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK_FALSE(p.create_pods_needed);
  CHECK(p.status->slurm->state == "CANCELLED");
  CHECK(p.status->slurm->exit_code == "0:0");
  CHECK(p.status->slurm->start_time.empty());
}

TEST_CASE("a hold while the gang waits for room takes back its unbound pods, not bound ones",
          "[slurm]") {
  Job j;
  j.waitForRoom();
  j.job.spec.slurm->hold = true;
  Plan p = j.run();
  CHECK(p.delete_pods.size() == 3);
  REQUIRE(p.status);
  CHECK(p.status->slurm->reason == "JobHeldUser");

  // Once one pod is bound the job has its nodes: the hold no longer stops it.
  j.pod(1).spec.node_name = "gpu-1";
  Plan q = j.run();
  CHECK(q.delete_pods.empty());
}

TEST_CASE("a gang waiting for room is PENDING for Priority while its nodes are held for a gang "
          "ahead, else for Resources", "[slurm]") {
  Job j;
  j.waitForRoom();
  auto waitingFor = [&](const std::string& message) { return j.reasonWhileUnschedulable(message); };
  // Muster's scheduler's words (scheduler/placement.cc).
  CHECK(waitingFor("gang slurm-55-0: 3 nodes are reserved for other gangs; 0/8 nodes are "
                   "available: 3 node(s) were reserved for another gang, 5 Insufficient "
                   "nvidia.com/gpu.") == "Priority");
  CHECK(waitingFor("gang slurm-55-0: the cluster can hold 2; 0/8 nodes are available: "
                   "8 Insufficient nvidia.com/gpu.") == "Resources");
  // A cordoned node does not stop a job that did not ask for it.
  const std::string drained = "gang slurm-55-0: 0/8 nodes are available: 1 node(s) were unschedulable, "
                              "7 Insufficient nvidia.com/gpu.";
  CHECK(waitingFor(drained) == "Resources");
  j.pod(0).status.conditions.clear();
  Plan none = j.run();
  REQUIRE(none.status);
  CHECK(none.status->slurm->reason == "Resources");

  // A job that names its nodes (-w) waits for ReqNodeNotAvail when one is drained or not ready.
  Job named({"-N", "2", "-w", "gpu-[0-1]"}, 56);
  named.waitForRoom();
  auto namedWaitingFor = [&](const std::string& message) { return named.reasonWhileUnschedulable(message); };
  CHECK(namedWaitingFor(drained) == "ReqNodeNotAvail");
  CHECK(namedWaitingFor("gang slurm-56-0: 0/8 nodes are available: 1 node(s) had untolerated taint "
                        "{node.kubernetes.io/not-ready: }, 7 node(s) didn't match Pod's node affinity/selector.") ==
        "ReqNodeNotAvail");
  CHECK(namedWaitingFor("gang slurm-56-0: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu.") == "Resources");
}

TEST_CASE("a gang whose queue is at its limit is PENDING for AssocGrpGRES (cpu: AssocGrpCpuLimit, "
          "memory: AssocGrpMemLimit), one naming no queue for InvalidAccount", "[slurm]") {
  Job j;
  j.waitForRoom();
  auto waitingFor = [&](const std::string& message) { return j.reasonWhileUnschedulable(message); };
  // Muster's scheduler's words (scheduler/tenancy/tenancy.cc, Tenancy::refuses).
  CHECK(waitingFor("waiting for quota: queue \"physics\" holds 8 nvidia.com/gpu of its limit of 8, "
                   "and this gang asks for 24") == "AssocGrpGRES");
  CHECK(waitingFor("waiting for quota: queue \"lab\" (above queue \"physics\") holds 60 cpu of its "
                   "limit of 64, and this gang asks for 12") == "AssocGrpCpuLimit");
  CHECK(waitingFor("waiting for quota: queue \"physics\" holds 200Gi memory of its limit of 256Gi, "
                   "and this gang asks for 96Gi") == "AssocGrpMemLimit");
  CHECK(waitingFor("waiting for quota: queue \"physics\" holds 3 rdma/ib of its limit of 4, and "
                   "this gang asks for 3") == "AssocGrpGRES");
  CHECK(waitingFor("queue \"phisics\" does not exist (queues.muster.dev); the gang waits until it "
                   "does") == "InvalidAccount");
}

}  // namespace
}  // namespace muster::jobengine::slurm

namespace muster::jobengine::slurm {
namespace {

// The other jobs of the namespace, as the controller's cache would hold them.
struct Directory final : JobDirectory {
  std::shared_ptr<const proto::ParallelJob> get(std::string_view ns,
                                                std::string_view name) const override {
    for (const auto& j : jobs)
      if (j->meta.namespace_ == ns && j->meta.name == name) return j;
    return nullptr;
  }
  std::vector<std::shared_ptr<const proto::ParallelJob>> knownAs(const std::string& key) const override {
    static const SlurmRuntime runtime(runtimeOptions());
    ++known_as_calls;
    std::vector<std::shared_ptr<const proto::ParallelJob>> out;
    for (const auto& j : jobs) {
      auto keys = runtime.knownAs(*j);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) out.push_back(j);
    }
    return out;
  }
  // The tasks of an array (sbatch `argv`, job ids from `first_id`), each PENDING, uids
  // "uid-<job id>".
  std::vector<std::shared_ptr<proto::ParallelJob>> addArray(const std::vector<std::string>& argv,
                                                            int64_t first_id) {
    auto subs = buildSubmissions(options(argv), config(), context(), first_id);
    REQUIRE(subs.ok());
    std::vector<std::shared_ptr<proto::ParallelJob>> tasks;
    for (const Submission& sub : *subs) {
      auto j = std::make_shared<proto::ParallelJob>(submitted(sub));
      j->meta.uid = "uid-" + std::to_string(j->spec.slurm->job_id);
      j->status.slurm.emplace().state = "PENDING";
      jobs.push_back(j);
      tasks.push_back(j);
    }
    return tasks;
  }
  // Another job of the same submitter, in Slurm state `state`.
  std::shared_ptr<proto::ParallelJob> add(int64_t id, const std::string& state,
                                          const std::vector<std::string>& argv = {"-N", "1"}) {
    Job other(argv, id);
    auto j = std::make_shared<proto::ParallelJob>(other.job);
    j->meta.uid = "uid-" + std::to_string(id);
    j->status.slurm.emplace().state = state;
    if (state != "PENDING") j->status.slurm->start_time = "2026-01-01T00:00:00Z";
    jobs.push_back(j);
    return j;
  }
  std::vector<std::shared_ptr<proto::ParallelJob>> jobs;
  mutable int known_as_calls = 0;  // how often a dependency looked jobs up
};

TEST_CASE("a job with -d afterok waits for Dependency until its job COMPLETED, then starts", "[slurm]") {
  Directory dir;
  auto first = dir.add(40, "RUNNING");
  Job j({"-N", "3", "-d", "afterok:40"});
  j.jobs = &dir;
  CHECK(j.job.spec.slurm->dependency == "afterok:40");
  j.apply(j.run());
  Plan p = j.run();
  CHECK_FALSE(p.create_pods_needed);
  j.apply(p);
  CHECK(j.job.status.slurm->state == "PENDING");
  CHECK(j.job.status.slurm->reason == "Dependency");
  CHECK(j.job.status.slurm->dependency == "afterok:40(unfulfilled)");
  CHECK(j.job.status.message == "job 55 waits for its dependency afterok:40(unfulfilled)");
  // Reconciled again whenever job 40 changes.
  SlurmRuntime runtime(runtimeOptions());
  CHECK(runtime.waitsOn(j.job) == std::vector<std::string>{"alice/slurm-40", "slurm-array:alice/40"});

  first->status.slurm->state = "COMPLETED";
  Plan q = j.run();
  CHECK(q.create_pods_needed);
  j.apply(q);
  CHECK(j.job.status.slurm->dependency.empty());
  CHECK(j.job.status.slurm->reason == "Resources");
}

TEST_CASE("a dependency that can never be met cancels the job, or with --kill-on-invalid-dep=no "
          "keeps it pending", "[slurm]") {
  Directory dir;
  dir.add(40, "FAILED");
  Job j({"-N", "2", "-d", "afterok:40"});
  j.jobs = &dir;
  j.apply(j.run());
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK_FALSE(p.create_pods_needed);
  CHECK(p.status->phase == "Failed");
  CHECK(p.status->slurm->state == "CANCELLED");
  CHECK(p.status->slurm->reason == "DependencyNeverSatisfied");
  CHECK(p.status->slurm->exit_code == "0:0");
  CHECK(p.status->message.find("job 55's dependency can never be satisfied: afterok:40(failed)") == 0);

  Job kept({"-N", "2", "-d", "afterok:40", "--kill-on-invalid-dep=no"});
  kept.jobs = &dir;
  kept.apply(kept.run());
  Plan q = kept.run();
  CHECK_FALSE(q.create_pods_needed);
  kept.apply(q);
  CHECK(kept.job.status.phase == "Pending");
  CHECK(kept.job.status.slurm->reason == "DependencyNeverSatisfied");
  CHECK(kept.job.status.slurm->dependency == "afterok:40(failed)");

  // afternotok on the same job is met; ',' needs every entry, '?' one.
  Job other({"-N", "2", "-d", "afternotok:40"});
  other.jobs = &dir;
  other.apply(other.run());
  CHECK(other.run().create_pods_needed);
  dir.add(41, "RUNNING");
  Job all({"-N", "2", "-d", "afternotok:40,afterany:41"});
  all.jobs = &dir;
  all.apply(all.run());
  CHECK_FALSE(all.run().create_pods_needed);
  CHECK(all.job.status.slurm->dependency == "afterany:41(unfulfilled)");
  Job any({"-N", "2", "-d", "afterok:40?after:41"});
  any.jobs = &dir;
  any.apply(any.run());
  CHECK(any.run().create_pods_needed);
}

TEST_CASE("sbatch -d singleton waits while an earlier job of the same user and name runs or is queued",
          "[slurm]") {
  Directory dir;
  auto running = dir.add(40, "RUNNING", {"-N", "1", "-J", "nightly"});
  dir.add(41, "RUNNING", {"-N", "1", "-J", "other"});
  Job j({"-N", "1", "-J", "nightly", "-d", "singleton"});
  j.jobs = &dir;
  j.apply(j.run());
  CHECK_FALSE(j.run().create_pods_needed);
  CHECK(j.job.status.slurm->dependency == "singleton(unfulfilled)");
  running->status.slurm->state = "COMPLETED";
  dir.add(60, "PENDING", {"-N", "1", "-J", "nightly"});  // behind it: no matter
  CHECK(j.run().create_pods_needed);
  dir.add(50, "PENDING", {"-N", "1", "-J", "nightly"});
  CHECK_FALSE(j.run().create_pods_needed);
}

TEST_CASE("a job that ended is deleted once slurm.accountingRetention has passed", "[slurm]") {
  Job j({"-N", "2"});
  j.startRunning();
  j.pod(0).status.phase = "Succeeded";
  j.pod(0).status.container_statuses = {{"main", false, 0, "terminated", 0, "Completed", {}, "0:0"}};
  const absl::Time ended = absl::FromUnixSeconds(1767225600) + absl::Minutes(5);
  j.apply(j.run(ended));
  REQUIRE(j.job.status.slurm->state == "COMPLETED");
  // Kept for the default 7 days, and looked at again then (a day at a time until it is near:
  // reconcile.h kMaxRequeueAfter).
  Plan kept = j.run(ended + absl::Hours(1));
  CHECK_FALSE(kept.delete_job);
  REQUIRE(kept.requeue_after);
  CHECK(*kept.requeue_after == std::chrono::milliseconds(kMaxRequeueAfter));
  Plan near = j.run(ended + absl::Hours(7 * 24 - 1));
  CHECK_FALSE(near.delete_job);
  REQUIRE(near.requeue_after);
  CHECK(*near.requeue_after == std::chrono::hours(1));
  Plan gone = j.run(ended + absl::Hours(7 * 24));
  CHECK(gone.delete_job);
  CHECK_FALSE(gone.status);

  // UNLIMITED keeps it; the retention is read from the config.
  auto c = parseSlurmSection("slurm:\n  accountingRetention: UNLIMITED\n  partitions: []\n");
  REQUIRE(c.ok());
  CHECK_FALSE(c->accounting_retention_seconds);
  RuntimeOptions o = runtimeOptions();
  o.slurm.accounting_retention_seconds = std::nullopt;
  CHECK_FALSE(SlurmRuntime(o).expiresAt(j.job));
  o.slurm.accounting_retention_seconds = 20;
  CHECK(SlurmRuntime(o).expiresAt(j.job) == ended + absl::Seconds(20));
  auto short_one = parseSlurmSection("slurm:\n  accountingRetention: \"0:20\"\n  partitions: []\n");
  REQUIRE(short_one.ok());
  CHECK(short_one->accounting_retention_seconds == 20);
}

TEST_CASE("a job that is gone lifts a dependency on it", "[slurm]") {
  Directory dir;
  Job j({"-N", "1", "-d", "afterok:40"});
  j.jobs = &dir;
  j.apply(j.run());
  CHECK(j.run().create_pods_needed);
}

TEST_CASE("sbatch -d is refused for unknown jobs, bad syntax and what Muster lacks", "[slurm]") {
  SubmitContext ctx = context();
  ctx.job_exists = [](int64_t id) { return id == 40; };
  auto refusal = [&](const std::vector<std::string>& argv) {
    absl::Status s = checkSubmission(options(argv), config(), ctx);
    REQUIRE_FALSE(s.ok());
    return std::string(s.message());
  };
  CHECK(checkSubmission(options({"-d", "afterok:40"}), config(), ctx).ok());
  CHECK(refusal({"-d", "afterok:41"}) == "sbatch: error: Batch job submission failed: Job dependency problem");
  CHECK(refusal({"-d", "afterok:40:"}) == "sbatch: error: Batch job submission failed: Job dependency problem");
  CHECK(refusal({"-d", "afterok:40,singleton?after:40"}) ==
        "sbatch: error: Batch job submission failed: Job dependency problem");
  CHECK(refusal({"-d", "afterburstbuffer:40"}).find("afterburstbuffer is not supported") != std::string::npos);
  CHECK(refusal({"-d", "expand:40"}).find("expand is not supported") != std::string::npos);
  // Arrays: a task, every task, the corresponding task.
  CHECK(checkSubmission(options({"-d", "afterok:40_3"}), config(), ctx).ok());
  CHECK(checkSubmission(options({"-d", "afterany:40_*"}), config(), ctx).ok());
  CHECK(checkSubmission(options({"--array=0-3", "-d", "aftercorr:40"}), config(), ctx).ok());
  CHECK(refusal({"-d", "afterok:41_2"}) == "sbatch: error: Batch job submission failed: Job dependency problem");
}

TEST_CASE("sbatch --array makes one job per task, with consecutive job ids and Slurm's array "
          "variables", "[slurm]") {
  const BatchOptions o = options({"-N", "1", "--array=1,3,5-9:2%2"});
  CHECK(jobIdsNeeded(o) == 5);
  CHECK(jobIdsNeeded(options({"-N", "1"})) == 1);
  auto subs = buildSubmissions(o, config(), context(), 70);
  INFO(subs.status().ToString());
  REQUIRE(subs.ok());
  REQUIRE(subs->size() == 5);
  std::vector<int64_t> ids, tasks;
  for (const Submission& sub : *subs) {
    ids.push_back(sub.job.spec.slurm->job_id);
    tasks.push_back(sub.job.spec.slurm->array->task_id);
    CHECK(sub.job.meta.labels.at("muster.dev/slurm-array-job-id") == "70");
    CHECK(sub.job.meta.labels.at("muster.dev/slurm-job-id") == std::to_string(sub.job.spec.slurm->job_id));
    CHECK(sub.job.meta.name == "slurm-" + std::to_string(sub.job.spec.slurm->job_id));
    CHECK(sub.batch.meta.name == "slurm-" + std::to_string(sub.job.spec.slurm->job_id) + "-batch");
  }
  CHECK(ids == std::vector<int64_t>{70, 71, 72, 73, 74});
  CHECK(tasks == std::vector<int64_t>{1, 3, 5, 7, 9});
  // Through the API server's encoding and back.
  proto::ParallelJob job = submitted((*subs)[2]);
  REQUIRE(job.spec.slurm->array);
  const proto::SlurmArrayTask& a = *job.spec.slurm->array;
  CHECK(a.array_job_id == 70);
  CHECK(a.task_count == 5);
  CHECK(a.task_min == 1);
  CHECK(a.task_max == 9);
  CHECK(a.task_step == 2);
  CHECK(a.max_running == 2);

  SlurmRuntime runtime(runtimeOptions());
  auto pod = podOf(runtime, job, 0, 0);
  const auto& main = pod["spec"]["containers"][0];
  CHECK(envOf(main, "SLURM_JOB_ID") == "72");
  CHECK(envOf(main, "SLURM_ARRAY_JOB_ID") == "70");
  CHECK(envOf(main, "SLURM_ARRAY_TASK_ID") == "5");
  CHECK(envOf(main, "SLURM_ARRAY_TASK_COUNT") == "5");
  CHECK(envOf(main, "SLURM_ARRAY_TASK_MIN") == "1");
  CHECK(envOf(main, "SLURM_ARRAY_TASK_MAX") == "9");
  CHECK(envOf(main, "SLURM_ARRAY_TASK_STEP") == "2");
  CHECK(envOf(main, "MUSTER_SLURM_STDOUT") == "slurm-%A_%a.out");
  // A job that is no array has none of them.
  auto plain = buildSubmission(options({"-N", "1"}), config(), context(), 69);
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->job.spec.slurm->array);
  CHECK(envOf(podOf(runtime, submitted(*plain), 0, 0)["spec"]["containers"][0], "SLURM_ARRAY_JOB_ID") == "<unset>");
}

TEST_CASE("an array's %N throttle lets N tasks run at once, in task id order, and the next "
          "start as tasks end", "[slurm]") {
  const std::vector<std::string> argv{"-N", "1", "--array=0-3%2"};
  Directory dir;
  auto tasks = dir.addArray(argv, 80);
  SlurmRuntime runtime(runtimeOptions());
  // A waiting task looks again when a task of its array takes or frees a place, and only then.
  CHECK(runtime.waitsOn(*tasks[2]) == std::vector<std::string>{"slurm-array-slot:alice/80"});
  auto known = [&](const proto::ParallelJob& j, const std::string& key) {
    const std::vector<std::string> keys = runtime.knownAs(j);
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  CHECK(known(*tasks[1], "slurm-array:alice/80"));
  CHECK_FALSE(known(*tasks[1], "slurm-array-slot:alice/80"));

  Job third;
  third.becomeTask(argv, 80, 2);
  third.jobs = &dir;
  third.apply(third.run());
  Plan p = third.run();
  CHECK_FALSE(p.create_pods_needed);
  third.apply(p);
  CHECK(third.job.status.slurm->state == "PENDING");
  CHECK(third.job.status.slurm->reason == "JobArrayTaskLimit");
  CHECK(third.job.status.message ==
        "task 2 of array job 80 waits: at most 2 of its tasks run at once (--array ...%2); 0 run, 2 wait ahead of it");
  // Tasks 0 and 1 go first; task 0 running still leaves no place.
  Job first;
  first.becomeTask(argv, 80, 0);
  first.jobs = &dir;
  first.apply(first.run());
  CHECK(first.run().create_pods_needed);
  tasks[0]->status.slurm->state = "RUNNING";
  CHECK(known(*tasks[0], "slurm-array-slot:alice/80"));
  CHECK_FALSE(third.run().create_pods_needed);
  // Task 1 ends: task 2 takes its place; task 3 still waits.
  tasks[1]->status.slurm->state = "COMPLETED";
  CHECK(third.run().create_pods_needed);
  tasks[2]->status.slurm->state = "RUNNING";
  Job fourth;
  fourth.becomeTask(argv, 80, 3);
  fourth.jobs = &dir;
  fourth.apply(fourth.run());
  CHECK_FALSE(fourth.run().create_pods_needed);
  // A held task does not keep a place (scontrol hold 80_2 before it ran).
  tasks[2]->status.slurm->state = "PENDING";
  tasks[2]->spec.slurm->hold = true;
  CHECK(fourth.run().create_pods_needed);
}

TEST_CASE("a dependency on an array waits for all of its tasks, on one task for that task, and "
          "aftercorr for the task of the same id", "[slurm]") {
  Directory dir;
  auto tasks = dir.addArray({"-N", "1", "--array=0-2"}, 90);
  tasks[0]->status.slurm->state = "COMPLETED";
  tasks[1]->status.slurm->state = "RUNNING";
  tasks[2]->status.slurm->state = "COMPLETED";
  auto starts = [&](const std::vector<std::string>& argv, size_t task = 0) {
    Job j;
    j.becomeTask(argv, 100, task);
    j.jobs = &dir;
    j.apply(j.run());
    Plan p = j.run();
    j.apply(p);
    return std::pair{p.create_pods_needed, j.job};
  };
  auto [all_ok, all] = starts({"-N", "1", "-d", "afterok:90"});
  CHECK_FALSE(all_ok);
  CHECK(all.status.slurm->dependency == "afterok:90(unfulfilled)");
  SlurmRuntime runtime(runtimeOptions());
  const auto keys = runtime.waitsOn(all);
  CHECK(std::find(keys.begin(), keys.end(), "slurm-array:alice/90") != keys.end());
  CHECK(starts({"-N", "1", "-d", "afterok:90_0"}).first);
  CHECK_FALSE(starts({"-N", "1", "-d", "afterok:90_1"}).first);
  CHECK_FALSE(starts({"-N", "1", "-d", "afterany:90_*"}).first);
  // Job id 91 is task 1's own: that task alone.
  CHECK_FALSE(starts({"-N", "1", "-d", "afterok:91"}).first);
  CHECK(starts({"-N", "1", "-d", "afterok:92"}).first);
  // aftercorr: task 0 after task 0 of array 90, task 1 after task 1.
  CHECK(starts({"-N", "1", "--array=0-1", "-d", "aftercorr:90"}, 0).first);
  CHECK_FALSE(starts({"-N", "1", "--array=0-1", "-d", "aftercorr:90"}, 1).first);
  // A task that fails: the whole array is not ok, the job can never start.
  tasks[1]->status.slurm->state = "FAILED";
  auto [never, cancelled] = starts({"-N", "1", "-d", "afterok:90"});
  CHECK_FALSE(never);
  CHECK(cancelled.status.slurm->state == "CANCELLED");
  CHECK(starts({"-N", "1", "-d", "afterany:90"}).first);
}

// --- what one user's job may not do to the others (issue 43) -----------------------------------

// 4 KiB of array expressions (the CRD's maxLength for spec.slurm.dependency) that expanded to
// 371,371 entries.
std::string amplifiedDependency() {
  std::string text = "afterok:";
  while (text.size() + 11 < 4096) text += "1_[0-1000]:";
  text.pop_back();
  return text;
}

// The message a job ends Failed with, reason InvalidSpec, when `change` was written into its
// spec.slurm (kubectl edit, a CRD without the limits); no pod is created.
std::string invalidSpec(const std::function<void(proto::SlurmJobSpec&)>& change) {
  Job j({"-N", "2"});
  change(*j.job.spec.slurm);
  Plan p = j.run();
  REQUIRE(p.status);
  INFO(p.status->message);
  REQUIRE(p.status->phase == "Failed");
  const proto::Condition* failed = findCondition(p.status->conditions, vocab::kConditionFailed);
  REQUIRE(failed != nullptr);
  CHECK(failed->reason == "InvalidSpec");
  CHECK_FALSE(p.create_pods_needed);
  REQUIRE(p.events.size() == 1);
  CHECK(p.events[0].type == "Warning");
  CHECK(p.events[0].reason == "InvalidSpec");
  CHECK(p.events[0].message == p.status->message);
  return p.status->message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("a job past Muster's Slurm limits ends InvalidSpec with an Event naming the field, and "
          "nothing is sized by it", "[slurm][limits]") {
  CHECK(invalidSpec([](auto& s) { s.gpus_per_node = kMaxGpusPerNode + 1; }) ==
        "the job cannot run: spec.slurm.gpusPerNode is 65, outside 0..64 (Muster's Slurm limits; "
        "sbatch and the ParallelJob CRD refuse it). No pods were created");
  // The audit's value: refused as quickly, never a vector of 2^31 GPU indices.
  CHECK(contains(invalidSpec([](auto& s) { s.gpus_per_node = INT32_MAX; }),
                 "spec.slurm.gpusPerNode is 2147483647, outside 0..64"));
  CHECK(contains(invalidSpec([](auto& s) { s.gpus_per_node = -1; }), "spec.slurm.gpusPerNode is -1"));
  CHECK(contains(invalidSpec([](auto& s) { s.gpus_per_task = 65; }), "spec.slurm.gpusPerTask is 65"));
  CHECK(contains(invalidSpec([](auto& s) { s.ntasks = kMaxTasks + 1; }),
                 "spec.slurm.ntasks is 2097153, outside 1..2097152"));
  CHECK(contains(invalidSpec([](auto& s) { s.ntasks_per_node = 513; }),
                 "spec.slurm.ntasksPerNode is 513, outside 1..512"));
  CHECK(contains(invalidSpec([](auto& s) { s.cpus_per_task = 1025; }),
                 "spec.slurm.cpusPerTask is 1025, outside 1..1024"));
  CHECK(contains(invalidSpec([](auto& s) { s.tasks_per_node = {1, INT32_MAX}; }),
                 "spec.slurm.tasksPerNode[1] is 2147483647, outside 0..512"));
  CHECK(contains(invalidSpec([](auto& s) { s.mem_per_node_mb = kMaxMemoryMb + 1; }),
                 "spec.slurm.memPerNodeMB is 67108865"));
  CHECK(contains(invalidSpec([](auto& s) { s.mem_per_cpu_mb = -5; }), "spec.slurm.memPerCpuMB is -5"));
  CHECK(contains(invalidSpec([](auto& s) { s.time_limit_seconds = INT64_MAX; }),
                 "spec.slurm.timeLimitSeconds is 9223372036854775807, outside 0..2147483647"));
  CHECK(contains(invalidSpec([](auto& s) { s.job_id = kMaxJobId + 1; }),
                 "spec.slurm.jobId is 2147483648, outside 1..2147483647"));
  CHECK(contains(invalidSpec([](auto& s) {
                   proto::SlurmArrayTask& task = s.array.emplace();
                   task.array_job_id = 1;
                   task.task_id = 4000001;
                 }),
                 "spec.slurm.array.taskId is 4000001"));
  CHECK(contains(invalidSpec([](auto& s) { s.begin_time = "10000-01-01T00:00:00Z"; }),
                 "spec.slurm.beginTime \"10000-01-01T00:00:00Z\" is not an RFC 3339 time up to "
                 "9999-12-31T23:59:59Z"));
  CHECK(contains(invalidSpec([](auto& s) { s.begin_time = "tomorrow"; }), "spec.slurm.beginTime"));
  // At the limits it runs.
  Job edge({"-N", "2"});
  edge.job.spec.slurm->gpus_per_node = kMaxGpusPerNode;
  edge.job.spec.slurm->tasks_per_node = {kMaxTasksPerNode, 1};
  edge.job.spec.slurm->cpus_per_task = kMaxCpusPerTask;
  edge.apply(edge.run());
  CHECK(edge.job.status.phase == "Pending");
  CHECK(edge.run().create_pods_needed);
  const auto batch = podOf(SlurmRuntime(runtimeOptions()), edge.job, 0, 0);
  const auto& main = batch["spec"]["containers"][0];
  CHECK(envOf(main, "SLURM_GPUS_ON_NODE") == "64");
  CHECK(envOf(main, "SLURM_CPUS_ON_NODE") == "524288");
}

TEST_CASE("sbatch refuses a request past Muster's limits in Slurm's words, even without listing "
          "the nodes", "[slurm][limits]") {
  SubmitContext blind = context();
  blind.nodes.reset();
  auto refusal = [&](const std::vector<std::string>& argv) {
    absl::Status s = checkSubmission(options(argv), config(), blind);
    REQUIRE_FALSE(s.ok());
    return std::string(s.message());
  };
  const std::string unavailable =
      "sbatch: error: Batch job submission failed: Requested node configuration is not available";
  CHECK(refusal({"--gpus-per-node=65"}) == unavailable);
  CHECK(refusal({"--gpus-per-node=2147483647"}) == unavailable);
  CHECK(refusal({"--gpus-per-task=65"}) == unavailable);
  CHECK(refusal({"--ntasks-per-node=513"}) == unavailable);
  CHECK(refusal({"-c", "1025"}) == unavailable);
  CHECK(refusal({"--mem=65T"}) == unavailable);
  CHECK(refusal({"--dependency=" + amplifiedDependency()}) ==
        "sbatch: error: Batch job submission failed: Job dependency problem (more than 1024 "
        "entries once array ranges are expanded; name a whole array by its job id)");
  CHECK(checkSubmission(options({"--gpus-per-node=64", "--ntasks-per-node=512", "-c", "1024"}),
                        config(), blind)
            .ok());
}

TEST_CASE("the ParallelJob CRD's maxima on spec.slurm are Muster's Slurm limits, and the chart's "
          "copy is the same file", "[slurm][limits]") {
  const std::string path = std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/paralleljobs.preferred.jp.yaml";
  const YAML::Node crd = YAML::LoadFile(path);
  const YAML::Node slurm = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                              ["spec"]["properties"]["slurm"];
  REQUIRE(slurm.IsMap());
  const YAML::Node fields = slurm["properties"];
  auto maximum = [](const YAML::Node& field) -> int64_t {
    REQUIRE(field["maximum"]);
    return field["maximum"].as<int64_t>();
  };
  CHECK(maximum(fields["jobId"]) == kMaxJobId);
  CHECK(maximum(fields["array"]["properties"]["arrayJobId"]) == kMaxJobId);
  CHECK(maximum(fields["array"]["properties"]["taskId"]) == kMaxArrayTaskId);
  CHECK(maximum(fields["ntasks"]) == kMaxTasks);
  CHECK(maximum(fields["ntasksPerNode"]) == kMaxTasksPerNode);
  CHECK(maximum(fields["tasksPerNode"]["items"]) == kMaxTasksPerNode);
  CHECK(fields["tasksPerNode"]["maxItems"].as<int64_t>() == kMaxNumPods);
  CHECK(maximum(fields["cpusPerTask"]) == kMaxCpusPerTask);
  CHECK(maximum(fields["gpusPerNode"]) == kMaxGpusPerNode);
  CHECK(maximum(fields["gpusPerTask"]) == kMaxGpusPerNode);
  CHECK(maximum(fields["memPerNodeMB"]) == kMaxMemoryMb);
  CHECK(maximum(fields["memPerCpuMB"]) == kMaxMemoryMb);
  CHECK(maximum(fields["timeLimitSeconds"]) == kMaxTimeLimitSeconds);
  CHECK(fields["dependency"]["maxLength"].as<int64_t>() == 4096);
  // Every integer under spec.slurm has a maximum.
  std::vector<std::string> unbounded;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n,
                                                                        const std::string& at) {
    if (!n.IsMap()) return;
    if (n["type"] && n["type"].as<std::string>() == "integer" && !n["maximum"]) unbounded.push_back(at);
    if (n["properties"])
      for (const auto& p : n["properties"]) walk(p.second, at + "." + p.first.as<std::string>());
    if (n["items"]) walk(n["items"], at + "[]");
  };
  walk(slurm, "spec.slurm");
  CHECK(unbounded == std::vector<std::string>{});
  // The chart installs the same CRD.
  auto read = [](const std::string& file) {
    std::ifstream in(file);
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  CHECK(read(path) ==
        read(std::string(MUSTER_SOURCE_DIR) + "/manifests/charts/muster/crds/paralleljobs.preferred.jp.yaml"));
}

TEST_CASE("the job id counter never wraps around: ids past Muster's limit are refused",
          "[slurm][limits]") {
  CHECK(*takeJobIds(1, 1) == 2);
  CHECK(*takeJobIds(41, 1000) == 1041);
  CHECK(*takeJobIds(kMaxJobId, 1) == kMaxJobId + 1);  // the last id is taken
  const absl::StatusOr<int64_t> past = takeJobIds(kMaxJobId, 2);
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(past.status().message() ==
        "only 1 job id is left below Muster's limit of 2147483647 (2 asked for); the job id "
        "counter is at 2147483647");
  CHECK_FALSE(takeJobIds(INT64_MAX, 1).ok());
  CHECK_FALSE(takeJobIds(kMaxJobId + 1, 1).ok());
  CHECK_FALSE(takeJobIds(5, 0).ok());
}

TEST_CASE("a dependency on every task of an array looks the array up once, and what status says "
          "of it stays short", "[slurm][dependency]") {
  Directory dir;
  dir.addArray({"-N", "1", "--array=0-199"}, 1000);
  Job j({"-N", "1"});
  j.job.spec.slurm->dependency = "afterok:1000_[0-199]";
  j.jobs = &dir;
  Plan first = j.run();
  REQUIRE(first.status);
  j.apply(first);
  const proto::SlurmJobStatus& slurm = *j.job.status.slurm;
  CHECK(slurm.reason == "Dependency");
  CHECK(slurm.dependency.size() <= kDependencyStatusMax);
  CHECK(slurm.dependency.rfind("afterok:1000_0(unfulfilled),afterok:1000_1(unfulfilled),", 0) == 0);
  CHECK(contains(slurm.dependency, " more)"));
  CHECK(j.job.status.message.size() <= kDependencyStatusMax + 64);
  // A reconcile evaluates it twice (the start gate, the status): one lookup of array 1000 each,
  // not one per entry.
  dir.known_as_calls = 0;
  Plan again = j.run();
  CHECK_FALSE(again.create_pods_needed);
  CHECK(dir.known_as_calls <= 2);
  // Once every task completed it starts.
  for (auto& task : dir.jobs) task->status.slurm->state = "COMPLETED";
  CHECK(j.run().create_pods_needed);
}

TEST_CASE("a 4 KiB dependency that would expand to 371,371 entries ends the job at once, in a "
          "message of bounded size", "[slurm][dependency]") {
  Directory dir;
  Job j({"-N", "1"});
  j.job.spec.slurm->dependency = amplifiedDependency();  // kubectl can write it; sbatch refuses it
  j.jobs = &dir;
  j.apply(j.run());
  Plan p = j.run();
  REQUIRE(p.status);
  CHECK_FALSE(p.create_pods_needed);
  CHECK(p.status->phase == "Failed");
  CHECK(p.status->slurm->reason == "DependencyNeverSatisfied");
  CHECK(p.status->message.size() <= 512);
  CHECK(contains(p.status->message, "Job dependency problem (more than 1024 entries"));
  CHECK(dir.known_as_calls == 0);
  CHECK(SlurmRuntime(runtimeOptions()).waitsOn(j.job).empty());
}

TEST_CASE("a begin time centuries ahead is looked at again after a day, not in a hot loop",
          "[slurm][time]") {
  Job later({"--begin=2400-01-01"});
  later.apply(later.run());
  Plan q = later.run();
  CHECK_FALSE(q.create_pods_needed);
  REQUIRE(q.requeue_after);
  CHECK(*q.requeue_after == std::chrono::milliseconds(kMaxRequeueAfter));
  later.apply(q);
  CHECK(later.job.status.slurm->reason == "BeginTime");
  // The longest time limit, in a partition without a MaxTime: looked at again after a day too.
  Job unlimited({"-N", "2", "-p", "cpu"});
  unlimited.job.spec.slurm->time_limit_seconds = kMaxTimeLimitSeconds;
  unlimited.startRunning();
  Plan r = unlimited.run(absl::FromUnixSeconds(1767225600) + absl::Minutes(1));
  REQUIRE(r.requeue_after);
  CHECK(*r.requeue_after == std::chrono::milliseconds(kMaxRequeueAfter));
}

TEST_CASE("a time limit over the partition's MaxTime, or none, is held to MaxTime: a pending job "
          "waits for PartitionTimeLimit, a running one ends at MaxTime", "[slurm][limits]") {
  // timeLimitSeconds 0 is UNLIMITED (sbatch --time=0), over the gpu partition's MaxTime of a day.
  Job pending({"-N", "2", "-t", "60"});
  pending.job.spec.slurm->time_limit_seconds = 0;
  pending.apply(pending.run());
  Plan p = pending.run();
  CHECK_FALSE(p.create_pods_needed);
  pending.apply(p);
  CHECK(pending.job.status.slurm->reason == "PartitionTimeLimit");
  CHECK(contains(pending.job.status.message,
                 "job 55's time limit (UNLIMITED) is over partition gpu's MaxTime (1-00:00:00)"));
  // Raised past MaxTime (or to 0) while it runs, by anyone who may patch the job: it still ends
  // when it has run for MaxTime, as slurmctld holds a running job to its partition's limit.
  const absl::Time started = absl::FromUnixSeconds(1767225600);
  for (int64_t raised : {int64_t{0}, int64_t{7 * 24 * 3600}}) {
    Job running({"-N", "2", "-t", "60"});
    running.startRunning();
    running.job.spec.slurm->time_limit_seconds = raised;
    Plan early = running.run(started + absl::Hours(23));
    REQUIRE(early.requeue_after);
    CHECK(*early.requeue_after == std::chrono::hours(1));
    Plan late = running.run(started + absl::Hours(24));
    REQUIRE(late.status);
    CHECK(late.status->slurm->state == "TIMEOUT");
    CHECK(late.delete_pods.size() == 2);
  }
  // The pods' own deadline (the kubelet's backstop) is MaxTime + 5 minutes too.
  Job big({"-N", "1", "-t", "60"});
  big.job.spec.slurm->time_limit_seconds = 7 * 24 * 3600;
  const auto pod = podOf(SlurmRuntime(runtimeOptions()), big.job, 0, 0);
  CHECK(pod["spec"]["activeDeadlineSeconds"].GetInt64() == 24 * 3600 + 300);
  // In a partition without a MaxTime the job's own limit holds, and 0 is no limit.
  Job free({"-N", "1", "-p", "cpu"});
  free.job.spec.slurm->time_limit_seconds = 0;
  CHECK_FALSE(SlurmRuntime(runtimeOptions()).timeLimit(free.job));
  free.job.spec.slurm->time_limit_seconds = 3 * 24 * 3600;
  CHECK(SlurmRuntime(runtimeOptions()).timeLimit(free.job) == absl::Hours(72));
}

TEST_CASE("step times a job writes past 9999 are clamped, so that its status can be written",
          "[slurm][steps]") {
  Job j;
  j.startRunning();
  j.pod(0).status.phase = "Succeeded";
  j.pod(0).status.container_statuses = {
      {"main", false, 0, "terminated", 0, "Completed", {},
       "0:0\nstep\t0\tCOMPLETED\t0:0\t253402300800\t9223372036854775807\t1\t1\t1\tn1\tx\n"}};
  Plan p = j.run(absl::FromUnixSeconds(1767225600) + absl::Minutes(5));
  REQUIRE(p.status);
  CHECK(p.status->slurm->state == "COMPLETED");
  REQUIRE(p.status->slurm->steps.size() == 1);
  CHECK(p.status->slurm->steps[0].start_time == "9999-12-31T23:59:59Z");
  CHECK(p.status->slurm->steps[0].end_time == "9999-12-31T23:59:59Z");
}


TEST_CASE("another user's job that claims an array's id neither holds its %N throttle nor decides "
          "a dependency on the array", "[slurm][tenancy]") {
  Directory dir;
  auto tasks = dir.addArray({"-N", "1", "--array=0-1%1"}, 300);
  // mallory's job 310 says it is task 0 of array 300, and runs; another says task 5 and FAILED.
  auto fake = dir.add(310, "RUNNING", {"-N", "1", "--array=0%1"});
  fake->spec.slurm->user = "mallory@example.com";
  fake->spec.slurm->array->array_job_id = 300;
  fake->spec.slurm->array->task_id = 0;
  auto failed = dir.add(311, "FAILED", {"-N", "1", "--array=5"});
  failed->spec.slurm->user = "mallory@example.com";
  failed->spec.slurm->array->array_job_id = 300;
  failed->spec.slurm->array->task_id = 5;
  // alice's task 0 still has the throttle's one place.
  Job first;
  first.becomeTask({"-N", "1", "--array=0-1%1"}, 300, 0);
  first.jobs = &dir;
  first.apply(first.run());
  CHECK(first.run().create_pods_needed);
  // A dependency on alice's array is hers alone: her tasks completed, so afterok:300 is met.
  tasks[0]->status.slurm->state = "COMPLETED";
  tasks[1]->status.slurm->state = "COMPLETED";
  Job after({"-N", "1", "-d", "afterok:300"}, 320);
  after.jobs = &dir;
  after.apply(after.run());
  Plan p = after.run();
  CHECK(p.create_pods_needed);
  // With the head (job 300) gone, the tasks of the dependent job's own user count.
  dir.jobs.erase(dir.jobs.begin());
  Job later({"-N", "1", "-d", "afterok:300"}, 321);
  later.jobs = &dir;
  later.apply(later.run());
  CHECK(later.run().create_pods_needed);
}


TEST_CASE("sbatch takes fresh job ids when slurm-<id> or its Secret's name is taken, and gives up "
          "after 5 tries", "[slurm][tenancy]") {
  // A fake API: names taken beforehand by someone else; the counter hands out ids from 40.
  std::set<std::string> taken{"slurm-40", "slurm-42-batch"};
  std::vector<std::string> removed;
  int64_t next = 40;
  SubmitSteps steps;
  steps.allocate_ids = [&](int64_t count) -> absl::StatusOr<int64_t> {
    int64_t first = next;
    next += count;
    return first;
  };
  steps.create = [&](Submission& sub) {
    if (taken.count(sub.job.meta.name)) return absl::AlreadyExistsError(sub.job.meta.name);
    if (taken.count(sub.batch.meta.name)) {
      removed.push_back(sub.job.meta.name);  // createJob removes the job it made
      return absl::AlreadyExistsError(sub.batch.meta.name);
    }
    taken.insert(sub.job.meta.name);
    taken.insert(sub.batch.meta.name);
    return absl::OkStatus();
  };
  steps.remove = [&](const std::string& name) {
    removed.push_back(name);
    taken.erase(name);
  };
  // 40's job name is taken: 41 is used.
  auto one = submitAll(options({"-N", "1"}), config(), context(), steps);
  REQUIRE(one.ok());
  CHECK(one->front().job.spec.slurm->job_id == 41);
  CHECK(one->front().job.spec.slurm->batch_secret == "slurm-41-batch");
  // An array of 2 from 42: task 0's Secret name is taken; 44 and 45 are used instead.
  auto array = submitAll(options({"-N", "1", "--array=0-1"}), config(), context(), steps);
  REQUIRE(array.ok());
  CHECK(array->front().job.spec.slurm->job_id == 44);
  CHECK(array->back().job.spec.slurm->array->array_job_id == 44);
  CHECK(removed == std::vector<std::string>{"slurm-42"});
  // Every id taken: 5 tries, then an error that says why; nothing is left behind.
  steps.create = [&](Submission& sub) { return absl::AlreadyExistsError(sub.job.meta.name); };
  auto none = submitAll(options({"-N", "1"}), config(), context(), steps);
  REQUIRE_FALSE(none.ok());
  CHECK(next == 51);
  CHECK(std::string(none.status().message()) ==
        "Batch job submission failed: the names of job ids 46, 47, 48, 49, 50 (slurm-<id>, "
        "slurm-<id>-batch) were already taken in namespace alice by objects sbatch did not "
        "create; ask an administrator to remove them");
  // Another error is not retried.
  steps.create = [&](Submission&) { return absl::PermissionDeniedError("forbidden"); };
  CHECK(submitAll(options({"-N", "1"}), config(), context(), steps).status().code() ==
        absl::StatusCode::kPermissionDenied);
  CHECK(next == 52);
}


// A partition whose template restricts nodes and sets limits of its own.
constexpr char kPinnedConfig[] = R"(
slurm:
  partitions:
  - name: pinned
    template:
      spec:
        automountServiceAccountToken: true
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: zone, operator: In, values: [a]}]
              - matchExpressions: [{key: zone, operator: In, values: [b]}]
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {noisy: "true"}}}
        containers:
        - name: main
          image: registry.example.com/hpc:1
          resources:
            limits: {memory: 64Gi, example.com/scratch: "1"}
            requests: {example.com/scratch: "1"}
)";

TEST_CASE("sbatch -w, -x and -C add to the partition's node restriction and a job's resources to its "
          "limits, instead of replacing them", "[slurm][tenancy]") {
  auto parsed = parseSlurmSection(kPinnedConfig);
  INFO(parsed.status().ToString());
  REQUIRE(parsed.ok());
  SubmitContext ctx = context();
  ctx.nodes.reset();
  auto s = buildSubmissions(options({"-N", "2", "-p", "pinned", "-w", "gpu-0", "-C", "nvme", "--mem=8G"}),
                            *parsed, ctx, 12);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  const proto::ParallelJob job = submitted(s->front());
  RuntimeOptions o;
  o.slurm = *parsed;
  SlurmRuntime runtime(o);
  for (int index : {0, 1}) {
    rapidjson::Document pod = podOf(runtime, job, 0, index);
    const auto& spec = pod["spec"];
    // (zone a | zone b) & (gpu-0 & nvme): each of the partition's terms with the job's.
    const auto& terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                            ["nodeSelectorTerms"];
    REQUIRE(terms.Size() == 2);
    for (rapidjson::SizeType t = 0; t < 2; ++t) {
      const auto& exprs = terms[t]["matchExpressions"];
      REQUIRE(exprs.Size() == 3);
      CHECK(std::string(exprs[0]["key"].GetString()) == "zone");
      CHECK(std::string(exprs[0]["values"][0].GetString()) == (t == 0 ? "a" : "b"));
      CHECK(std::string(exprs[1]["operator"].GetString()) == "In");
      CHECK(std::string(exprs[1]["values"][0].GetString()) == "gpu-0");
      CHECK(std::string(exprs[2]["key"].GetString()) == "nvme");
    }
    CHECK(spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].Size() == 1);
    // The job's memory replaces the partition's; the partition's scratch limit stays.
    const auto& res = spec["containers"][spec["containers"].Size() - 1]["resources"];
    CHECK(std::string(res["limits"]["example.com/scratch"].GetString()) == "1");
    CHECK(std::string(res["requests"]["example.com/scratch"].GetString()) == "1");
    CHECK(std::string(res["requests"]["memory"].GetString()) == "8192Mi");
    // A Slurm job's pods get no ServiceAccount token, whatever the partition's template says.
    CHECK(spec["automountServiceAccountToken"].IsBool());
    CHECK_FALSE(spec["automountServiceAccountToken"].GetBool());
  }
  // A request over the partition's limit would be refused by the API server: InvalidSpec.
  auto big = buildSubmissions(options({"-N", "1", "-p", "pinned", "--mem=100G"}), *parsed, ctx, 13);
  REQUIRE(big.ok());
  auto body = runtime.buildPod(submitted(big->front()), {0, "slurm-13-0"}, 0);
  REQUIRE_FALSE(body.ok());
  CHECK(std::string(body.status().message()).find("over its limit 64Gi") != std::string::npos);
}

TEST_CASE("a job's pods get no ServiceAccount token", "[slurm][tenancy]") {
  Job j({"-N", "2"});
  for (int index : {0, 1}) {
    rapidjson::Document pod = podOf(*static_cast<const SlurmRuntime*>(j.runtimes.find("slurm")), j.job, 0, index);
    CHECK(pod["spec"].HasMember("automountServiceAccountToken"));
    CHECK_FALSE(pod["spec"]["automountServiceAccountToken"].GetBool());
  }
}

TEST_CASE("the time limit runs from the batch container's start as the kubelet reports it, not "
          "from when the engine saw every pod run", "[slurm][tenancy]") {
  Job j({"-N", "2", "-t", "10"});
  j.startRunning();  // Running since 1767225600 by the engine's clock
  const absl::Time seen = absl::FromUnixSeconds(1767225600);
  // Pods took 3 minutes to start and wait for SSH: the batch step started 3 minutes later.
  proto::ContainerStatus main;
  main.name = "main";
  main.state = "running";
  main.started_at = proto::rfc3339(seen + absl::Minutes(3));
  j.pod(0).status.container_statuses = {main};
  Plan early = j.run(seen + absl::Minutes(10));
  CHECK_FALSE(early.status);
  REQUIRE(early.requeue_after);
  CHECK(*early.requeue_after == std::chrono::milliseconds(3 * 60000));
  Plan late = j.run(seen + absl::Minutes(13));
  REQUIRE(late.status);
  CHECK(late.status->slurm->state == "TIMEOUT");
  // As the API server sends it.
  proto::Pod decoded;
  REQUIRE(proto::decodeJson(R"({"metadata":{"name":"p"},"status":{"containerStatuses":[{"name":"main",)"
                            R"("state":{"running":{"startedAt":"2026-01-01T00:03:00Z"}}}]}})",
                            &decoded).ok());
  REQUIRE(decoded.status.container_statuses.size() == 1);
  CHECK(decoded.status.container_statuses[0].started_at == "2026-01-01T00:03:00Z");
}

TEST_CASE("the batch Secret is mounted only when it is the job's: its user's annotation and an "
          "owner reference with the job's uid", "[slurm][tenancy]") {
  Job j({"-N", "1"});
  const SlurmRuntime& runtime = *static_cast<const SlurmRuntime*>(j.runtimes.find("slurm"));
  CHECK(runtime.jobSecret(j.job) == "slurm-55-batch");
  proto::ObjectMeta secret;
  secret.name = "slurm-55-batch";
  secret.annotations["muster.dev/slurm-user"] = "alice@example.com";
  proto::OwnerReference owner;
  owner.kind = "ParallelJob";
  owner.name = "slurm-55";
  owner.uid = j.job.meta.uid;
  secret.owner_references = {owner};
  CHECK(runtime.checkJobSecret(j.job, secret).ok());
  proto::ObjectMeta bobs = secret;
  bobs.annotations["muster.dev/slurm-user"] = "bob@example.com";
  CHECK(runtime.checkJobSecret(j.job, bobs).message() ==
        "the batch Secret alice/slurm-55-batch belongs to user \"bob@example.com\", not to the "
        "job's user \"alice@example.com\" (annotation muster.dev/slurm-user), and is not mounted");
  proto::ObjectMeta other_job = secret;
  other_job.owner_references[0].uid = "uid-of-bobs-job";
  CHECK(runtime.checkJobSecret(j.job, other_job).code() == absl::StatusCode::kInvalidArgument);
  proto::ObjectMeta unmarked = secret;
  unmarked.annotations.clear();
  CHECK(runtime.checkJobSecret(j.job, unmarked).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace muster::jobengine::slurm
