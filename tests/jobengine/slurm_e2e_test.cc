// sbatch end to end: the real muster-slurm CLI and the real muster-scheduler (scheduler + job
// engine with a Slurm partition) against the real kube-apiserver + kwok (tests/cluster/up.sh).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "proto/kubeconfig.h"
#include "tests/e2e/support.h"

namespace muster::e2e {
namespace {

constexpr auto kTimeout = std::chrono::seconds(120);

std::string kubectl(const std::vector<std::string>& args) {
  auto out = TestCluster::get().kubectl(args);
  INFO("kubectl " << absl::StrJoin(args, " ") << "\n" << out.status().ToString());
  REQUIRE(out.ok());
  return *out;
}

// Two racks of four 8-GPU kwok nodes for this test alone; a partition "gpu" on them whose jobs
// must fit one rack.
class SlurmFixture {
 public:
  // `slurm_extra`: more keys of the slurm: section (two-space indented lines).
  explicit SlurmFixture(const std::string& slurm_extra = "")
      : run_(uniqueName("sl")), ns_(run_), dir_("/tmp/" + run_) {
    auto config = proto::loadKubeconfig(TestCluster::get().kubeconfig());
    REQUIRE(config.ok());
    client_ = makeClient(io_.executor(), *config);
    kubectl({"apply", "-f", std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/"});
    kubectl({"wait", "--for", "condition=established", "--timeout=60s", "crd/paralleljobs.preferred.jp"});
    kubectl({"create", "namespace", ns_});
    // As the chart creates Slurm users' namespaces (slurm.users.createNamespaces): every job pod of
    // these tests must pass Pod Security baseline, or the API server refuses it and the job fails.
    kubectl({"label", "namespace", ns_, "pod-security.kubernetes.io/enforce=baseline"});
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 4; ++i)
        createNode(*client_, absl::StrCat(run_, "-r", r, "-", i), run_,
                   {{"muster.dev/block", run_ + "-b"}, {"muster.dev/spine", run_ + "-s"},
                    {"muster.dev/rack", absl::StrCat(run_, "-r", r)}});
    waitNodesReady(*client_, run_, 8);
    std::filesystem::create_directories(dir_);
    config_path_ = dir_ + "/muster.yaml";
    std::ofstream(config_path_) << absl::StrCat(R"(topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]
metricsBindAddress: 127.0.0.1:0
leaderElection: {enabled: false}
queue: {initialBackoffSeconds: 1, maxBackoffSeconds: 2}
slurm:
  clusterName: e2e
  jobIds: {namespace: )", ns_, R"(, name: job-ids}
)", slurm_extra, R"(  partitions:
  - name: gpu
    nodeSelector: {e2e-run: )", run_, R"(}
    topologyRequired: muster.dev/rack
    maxTime: "1-00:00:00"
    template:
      spec:
        containers: [{name: main, image: "busybox"}]
)");
    scheduler_ = std::make_unique<SchedulerProcess>(slurpConfig(), std::vector<std::string>{"--leader-elect=false", "-v", "3"});
    scheduler_->start();
    REQUIRE(waitFor([&] {
      std::string log = scheduler_->logTail(1 << 20);
      return log.find("Job engine caches synced") != std::string::npos &&
             log.find("Caches synced") != std::string::npos;
    }, kTimeout));
  }
  ~SlurmFixture() {
    scheduler_->terminate();
    // No garbage collector runs in the test cluster: delete what the jobs own, then the rest.
    (void)TestCluster::get().kubectl({"delete", "paralleljobs,pods,services,secrets,configmaps",
                                      "--all", "-n", ns_, "--grace-period=0", "--wait=false"});
    (void)TestCluster::get().kubectl({"delete", "namespace", ns_, "--wait=false"});
    cleanupRun(*client_, run_);
    std::filesystem::remove_all(dir_);
  }

  std::string slurpConfig() {
    std::ifstream in(config_path_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  // muster-slurm with the test's cluster, namespace and config; the command's status and output.
  absl::StatusOr<std::string> slurm(const std::vector<std::string>& args) {
    return runCommand(slurmArgv(args));
  }
  // The command line of `muster-slurm ARGS` against this cluster and namespace.
  std::vector<std::string> slurmArgv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"env", "KUBECONFIG=" + TestCluster::get().kubeconfig(),
                                     "MUSTER_NAMESPACE=" + ns_,
                                     "MUSTER_SLURM_CONFIG=file:" + config_path_,
                                     MUSTER_SLURM_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Runs `muster-slurm ARGS` until it prints `want` (or the timeout); the last output in `last`.
  bool printsWithin(const std::vector<std::string>& args, const std::string& want, std::string* last) {
    return waitFor([&] {
      auto out = slurm(args);
      *last = out.ok() ? *out : out.status().ToString();
      return out.ok() && *out == want;
    }, kTimeout, std::chrono::milliseconds(300));
  }

  // muster-slurm ARGS, which must succeed: what it printed.
  std::string ok(const std::vector<std::string>& args) {
    auto out = slurm(args);
    INFO(absl::StrJoin(args, " ") << ": " << out.status().ToString());
    REQUIRE(out.ok());
    return *out;
  }

  // muster-slurm ARGS, which must fail: its message.
  std::string refused(const std::vector<std::string>& args) {
    auto out = slurm(args);
    INFO(absl::StrJoin(args, " ") << " printed " << out.value_or(""));
    REQUIRE_FALSE(out.ok());
    return std::string(out.status().message());
  }

  // Checks that muster-slurm ARGS prints `want` before the timeout.
  void expectPrints(const std::vector<std::string>& args, const std::string& want) {
    std::string last;
    const bool printed = printsWithin(args, want, &last);
    INFO(absl::StrJoin(args, " ") << " printed:\n" << last << "wanted:\n" << want);
    INFO(scheduler().logTail());
    CHECK(printed);
  }

  std::string script(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  int64_t submittedId(const std::string& out) {
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("Submitted batch job ([0-9]+)")));
    return std::stoll(m[1]);
  }

  std::vector<proto::Pod> pods(const std::string& selector) {
    proto::Request req;
    req.path = proto::resources::kPods.collectionPath(ns_);
    req.query = {{"labelSelector", selector}};
    std::vector<proto::Pod> out;
    auto body = client_->callSync(req);
    if (!body.ok()) return out;
    rapidjson::Document doc;
    doc.Parse(body->c_str());
    for (const auto& item : doc["items"].GetArray()) {
      proto::Pod pod;
      if (proto::decode(item, &pod).ok()) out.push_back(std::move(pod));
    }
    return out;
  }

  size_t count(const std::string& resource) {
    std::string out = kubectl({"get", resource, "-n", ns_, "-o", "name"});
    return std::count(out.begin(), out.end(), '\n');
  }

  const std::string& ns() const { return ns_; }
  const std::string& run() const { return run_; }
  SchedulerProcess& scheduler() { return *scheduler_; }

 private:
  IoThread io_;
  std::string run_, ns_, dir_, config_path_;
  std::shared_ptr<proto::Client> client_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

TEST_CASE("sbatch of a 4-node GPU script is one gang bound whole inside one rack", "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("train.sh", "#!/bin/bash\n#SBATCH -J train\n#SBATCH -N 4\n"
                                          "#SBATCH --gpus-per-node=8\n#SBATCH -t 1:00:00\n"
                                          "srun hostname\n");
  auto out = f.slurm({"sbatch", path});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  const int64_t id = f.submittedId(*out);
  std::vector<proto::Pod> pods;
  bool bound = waitFor([&] {
    pods = f.pods("muster.dev/slurm-job-id=" + std::to_string(id));
    return pods.size() == 4 && std::all_of(pods.begin(), pods.end(), [](const proto::Pod& p) {
             return !p.spec.node_name.empty();
           });
  }, kTimeout, std::chrono::milliseconds(200));
  INFO(f.scheduler().logTail());
  REQUIRE(bound);
  std::set<std::string> racks;
  for (const auto& p : pods) racks.insert(p.spec.node_name.substr(0, p.spec.node_name.rfind('-')));
  CHECK(racks.size() == 1);
  // The ParallelJob and its Secret, owned by it; Slurm's state once kwok runs the pods.
  CHECK(kubectl({"get", "paralleljobs", "-n", f.ns(), "-o", "name"}).find("slurm-" + std::to_string(id)) !=
        std::string::npos);
  const std::string uid = kubectl({"get", "paralleljob", "-n", f.ns(), "slurm-" + std::to_string(id),
                                   "-o", "jsonpath={.metadata.uid}"});
  CHECK(kubectl({"get", "secret", "-n", f.ns(), absl::StrCat("slurm-", id, "-batch"), "-o",
                 "jsonpath={.metadata.ownerReferences[0].uid}"}) == uid);
  bool running = waitFor([&] {
    auto state = TestCluster::get().kubectl({"get", "paralleljob", "-n", f.ns(),
                                              "slurm-" + std::to_string(id), "-o",
                                              "jsonpath={.status.slurm.state}"});
    return state.ok() && *state == "RUNNING";
  }, kTimeout, std::chrono::milliseconds(300));
  CHECK(running);
}

TEST_CASE("50 jobs submitted by 8 sbatch processes at once get 50 distinct increasing ids",
          "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("held.sh", "#!/bin/sh\ntrue\n");
  std::vector<std::vector<int64_t>> ids(8);
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < (t < 2 ? 7 : 6); ++j) {
        auto out = f.slurm({"sbatch", "-H", "--parsable", path});
        if (!out.ok()) {
          errors[t] = std::string(out.status().message());
          return;
        }
        ids[t].push_back(std::stoll(*out));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK(e == "");
  std::set<int64_t> all;
  size_t total = 0;
  for (const auto& list : ids) {
    total += list.size();
    all.insert(list.begin(), list.end());
    CHECK(std::is_sorted(list.begin(), list.end()));  // one process's ids increase
  }
  CHECK(total == 50);
  REQUIRE(all.size() == 50);
  CHECK(*all.begin() == 1);
  CHECK(*all.rbegin() == 50);
  CHECK(f.count("paralleljobs") == 50);
}

TEST_CASE("a refused submission creates nothing", "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("big.sh", "#!/bin/sh\n#SBATCH --gpus-per-node=16\ntrue\n");
  auto too_big = f.slurm({"sbatch", path});
  REQUIRE_FALSE(too_big.ok());
  CHECK(std::string(too_big.status().message()).find(
            "sbatch: error: Batch job submission failed: Requested node configuration is not available") !=
        std::string::npos);
  auto no_partition = f.slurm({"sbatch", "-p", "nope", path});
  REQUIRE_FALSE(no_partition.ok());
  CHECK(std::string(no_partition.status().message()).find("Invalid partition name specified") !=
        std::string::npos);
  auto too_long = f.slurm({"sbatch", "-t", "2-00:00:00", "--gpus-per-node=1", path});
  REQUIRE_FALSE(too_long.ok());
  auto bad_option = f.slurm({"sbatch", "--no-such-option", path});
  REQUIRE_FALSE(bad_option.ok());
  CHECK(std::string(bad_option.status().message()).find("sbatch: unrecognized option '--no-such-option'") !=
        std::string::npos);
  CHECK(f.count("paralleljobs") == 0);
  CHECK(f.count("secrets") == 0);
  // Not even a job id was taken.
  CHECK_FALSE(TestCluster::get().kubectl({"get", "configmap", "-n", f.ns(), "job-ids"}).ok());
}


TEST_CASE("squeue, scontrol and scancel follow jobs through a hold, a wait for room and a cancel",
          "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("gang.sh", "#!/bin/bash\n#SBATCH -J gang\n#SBATCH -N 4\n"
                                         "#SBATCH --gpus-per-node=8\nsrun hostname\n");
  // Waits until `squeue ARGS` prints `want`.
  auto squeueShows = [&](std::vector<std::string> args, const std::string& want) {
    args.insert(args.begin(), "squeue");
    f.expectPrints(args, want);
  };
  const std::string sa = std::to_string(f.submittedId(f.ok({"sbatch", "-H", "-t", "60", path})));
  // Held: pending for JobHeldUser, and no pod exists.
  squeueShows({"-h", "-o", "%i %t %R", "-j", sa}, sa + " PD (JobHeldUser)\n");
  CHECK(f.pods("muster.dev/slurm-job-id=" + sa).empty());
  std::string shown = f.ok({"scontrol", "show", "job", sa});
  CHECK(shown.find("JobId=" + sa + " JobName=gang\n") == 0);
  CHECK(shown.find("   JobState=PENDING Reason=JobHeldUser ") != std::string::npos);
  // The test's user may patch nodes, so it is an operator: it raises the held job's limit.
  f.ok({"scontrol", "update", "JobId=" + sa, "TimeLimit=3:00:00"});
  squeueShows({"-h", "-o", "%i %l", "-j", sa}, sa + " 3:00:00\n");

  // Two more jobs take both racks.
  const std::string sb = std::to_string(f.submittedId(f.ok({"sbatch", path})));
  const std::string sc = std::to_string(f.submittedId(f.ok({"sbatch", path})));
  squeueShows({"-h", "-o", "%i %t"}, sa + " PD\n" + sb + " R\n" + sc + " R\n");
  // A running job's limit goes down, never up: its pods' activeDeadlineSeconds holds.
  f.ok({"scontrol", "update", "JobId=" + sc, "TimeLimit=2:00:00"});
  squeueShows({"-h", "-o", "%i %l", "-j", sc}, sc + " 2:00:00\n");
  CHECK(f.refused({"scontrol", "update", "JobId=" + sc, "TimeLimit=+10"}).find(
            "slurm_update error: Requested operation not supported on this job for job " + sc +
            " (its pods exist") != std::string::npos);
  // The default layout: Slurm's header, pending jobs first, a running job's node list.
  std::string table = f.ok({"squeue"});
  INFO("squeue printed:\n" << table);
  CHECK(table.rfind("             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n", 0) == 0);
  CHECK(table.find("      gpu     gang ") != std::string::npos);
  CHECK(table.find("slurm-" + sb + "-0-[0-3]\n") != std::string::npos);

  // Released, the first job waits for room: Resources.
  f.ok({"scontrol", "release", sa});
  squeueShows({"-h", "-o", "%i %t %R", "-j", sa}, sa + " PD (Resources)\n");
  CHECK(f.refused({"scontrol", "hold", sc}).find(
            absl::StrCat("Job is no longer pending execution for job ", sc, "\n")) != std::string::npos);

  // Cancelling the second gives its rack to the first; the cancelled job keeps no pod.
  f.ok({"scancel", sb});
  squeueShows({"-h", "-t", "all", "-o", "%i %t"}, sb + " CA\n" + sa + " R\n" + sc + " R\n");
  CHECK(waitFor([&] { return f.pods("muster.dev/slurm-job-id=" + sb).empty(); }, kTimeout));
  shown = f.ok({"scontrol", "show", "job", sb});
  CHECK(shown.find("   JobState=CANCELLED Reason=None ") != std::string::npos);
  CHECK(shown.find(" ExitCode=0:15\n") != std::string::npos);
  // Without -t a finished job is not listed.
  squeueShows({"-h", "-o", "%i"}, sa + "\n" + sc + "\n");

  // Slurm's errors, and the other jobs of the call are still handled.
  CHECK(f.refused({"scancel", sb}).find(absl::StrCat("scancel: error: Kill job error on job id ", sb,
                                                   ": Job/step already completing or completed")) !=
        std::string::npos);
  CHECK(f.refused({"scancel", "99999", sc}).find(
            "scancel: error: Kill job error on job id 99999: Invalid job id specified") !=
        std::string::npos);
  squeueShows({"-h", "-t", "CA", "-o", "%i"}, sb + "\n" + sc + "\n");
  CHECK(f.refused({"squeue", "-j", "99999"}).find("slurm_load_jobs error: Invalid job id specified") !=
        std::string::npos);
}


TEST_CASE("sbatch -d starts jobs once their dependencies are met and cancels one that never can be",
          "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("step.sh", "#!/bin/sh\n#SBATCH -N 1\ntrue\n");
  auto squeueShows = [&](const std::string& id, const std::string& want) {
    f.expectPrints({"squeue", "-h", "-t", "all", "-j", id, "-o", "%i %t %r %E"}, want);
  };
  // A job that does not exist is refused, and nothing is created.
  auto unknown = f.slurm({"sbatch", "-d", "afterok:99999", path});
  REQUIRE_FALSE(unknown.ok());
  CHECK(std::string(unknown.status().message()).find(
            "sbatch: error: Batch job submission failed: Job dependency problem") != std::string::npos);
  CHECK(f.count("paralleljobs") == 0);

  const std::string a = std::to_string(f.submittedId(f.ok({"sbatch", "-J", "nightly", path})));
  squeueShows(a, a + " R None (null)\n");
  const std::string ok = std::to_string(f.submittedId(f.ok({"sbatch", "-d", "afterok:" + a, path})));
  const std::string notok =
      std::to_string(f.submittedId(f.ok({"sbatch", "--dependency=afternotok:" + a, path})));
  const std::string kept = std::to_string(
      f.submittedId(f.ok({"sbatch", "-d", "afternotok:" + a, "--kill-on-invalid-dep=no", path})));
  const std::string single =
      std::to_string(f.submittedId(f.ok({"sbatch", "-J", "nightly", "-d", "singleton", path})));
  squeueShows(ok, ok + " PD Dependency afterok:" + a + "(unfulfilled)\n");
  squeueShows(notok, notok + " PD Dependency afternotok:" + a + "(unfulfilled)\n");
  squeueShows(single, single + " PD Dependency singleton(unfulfilled)\n");
  CHECK(f.pods("muster.dev/slurm-job-id=" + ok).empty());
  CHECK(f.ok({"scontrol", "show", "job", ok}).find(
            "   JobState=PENDING Reason=Dependency Dependency=afterok:" + a + "(unfulfilled)\n") !=
        std::string::npos);

  // kwok: the first job's batch script exits 0.
  kubectl({"annotate", "pod", "-n", f.ns(), "slurm-" + a + "-0-0", "muster.dev/sim-succeed-after=1s"});
  squeueShows(a, a + " CD None (null)\n");
  squeueShows(ok, ok + " R None (null)\n");
  squeueShows(single, single + " R None (null)\n");
  squeueShows(notok, notok + " CA DependencyNeverSatisfied (null)\n");
  squeueShows(kept, kept + " PD DependencyNeverSatisfied afternotok:" + a + "(failed)\n");
  CHECK(f.pods("muster.dev/slurm-job-id=" + notok).empty());
  std::string shown = f.ok({"scontrol", "show", "job", notok});
  CHECK(shown.find("   JobState=CANCELLED Reason=DependencyNeverSatisfied Dependency=(null)\n") !=
        std::string::npos);
}


TEST_CASE("sbatch --array runs every task, at most %N at once, and scancel takes one element",
          "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("task.sh", "#!/bin/sh\n#SBATCH -N 1\n#SBATCH -J sweep\ntrue\n");
  auto succeed = [&](int64_t job_id) {
    kubectl({"annotate", "pod", "-n", f.ns(), "slurm-" + std::to_string(job_id) + "-0-0",
             "muster.dev/sim-succeed-after=1s"});
  };
  // A bad specification is refused, and nothing is created.
  auto bad = f.slurm({"sbatch", "--array=5-2", path});
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find(
            "sbatch: error: Batch job submission failed: Invalid job array specification") != std::string::npos);
  CHECK(f.count("paralleljobs") == 0);

  const int64_t a = f.submittedId(f.ok({"sbatch", "--array=0-4%2", path}));
  const std::string id = std::to_string(a);
  CHECK(f.count("paralleljobs") == 5);
  // Two run; the rest wait on one line, as slurmctld shows the tasks it has not started.
  const std::vector<std::string> queue{"squeue", "-h", "-o", "%i %t %r"};
  f.expectPrints(queue, id + "_[2-4%2] PD JobArrayTaskLimit\n" + id + "_0 R None\n" + id + "_1 R None\n");
  CHECK(f.pods("muster.dev/slurm-job-id=" + std::to_string(a + 2)).empty());
  // squeue --json: one record per task, in Slurm's data_parser layout.
  auto json = proto::parseJson(f.ok({"squeue", "--json", "-j", id}));
  REQUIRE(json.ok());
  REQUIRE((*json)["jobs"].Size() == 5);
  for (int t = 0; t < 5; ++t) {
    const auto& job = (*json)["jobs"][t];
    CHECK(job["job_id"].GetInt64() == a + t);
    CHECK(job["array_job_id"]["number"].GetInt64() == a);
    CHECK(job["array_task_id"]["number"].GetInt64() == t);
    CHECK(std::string(job["job_state"][0].GetString()) == (t < 2 ? "RUNNING" : "PENDING"));
  }
  CHECK(std::string((*json)["meta"]["slurm"]["cluster"].GetString()) == "e2e");
  CHECK(f.ok({"scontrol", "show", "job", id + "_1"}).rfind(
            "JobId=" + std::to_string(a + 1) + " ArrayJobId=" + id + " ArrayTaskId=1 ArrayTaskThrottle=2 JobName=sweep\n", 0) == 0);

  f.ok({"scancel", id + "_3"});
  const std::vector<std::string> each{"squeue", "-h", "-r", "-t", "all", "-o", "%i %t"};
  f.expectPrints(each, id + "_3 CA\n" + id + "_2 PD\n" + id + "_4 PD\n" + id + "_0 R\n" + id + "_1 R\n");
  // Task 0 ends: task 2 takes its place; then 1 and 2 end and 4 runs (3 was cancelled).
  succeed(a);
  f.expectPrints(queue, id + "_4 PD JobArrayTaskLimit\n" + id + "_1 R None\n" + id + "_2 R None\n");
  succeed(a + 1);
  succeed(a + 2);
  f.expectPrints(queue, id + "_4 R None\n");
  succeed(a + 4);
  f.expectPrints({"sacct", "-P", "-n", "-X", "-j", id, "-o", "JobID,JobIDRaw,State"},
        id + "_0|" + id + "|COMPLETED\n" + id + "_1|" + std::to_string(a + 1) + "|COMPLETED\n" +
            id + "_2|" + std::to_string(a + 2) + "|COMPLETED\n" + id + "_3|" +
            std::to_string(a + 3) + "|CANCELLED\n" + id + "_4|" + std::to_string(a + 4) + "|COMPLETED\n");
  // Cancelling the finished array says so, as Slurm does.
  auto again = f.slurm({"scancel", id});
  REQUIRE_FALSE(again.ok());
  CHECK(std::string(again.status().message()).find(
            "Kill job error on job id " + id + ": Job/step already completing or completed") != std::string::npos);
}

TEST_CASE("scontrol requeue runs an ended job again as its next attempt, requeuehold holds it, "
          "and a pending job is refused", "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("again.sh", "#!/bin/sh\n#SBATCH -N 1\ntrue\n");
  const std::string id = std::to_string(f.submittedId(f.ok({"sbatch", path})));
  const std::vector<std::string> state{"squeue", "-h", "-t", "all", "-j", id, "-o", "%i %t %r"};
  f.expectPrints(state, id + " R None\n");
  kubectl({"annotate", "pod", "-n", f.ns(), "slurm-" + id + "-0-0", "muster.dev/sim-succeed-after=1s"});
  f.expectPrints(state, id + " CD None\n");
  // Back to PENDING, then running again as attempt 1: its pods are new, the restart counted.
  f.ok({"scontrol", "requeue", id});
  f.expectPrints(state, id + " R None\n");
  CHECK(f.ok({"scontrol", "show", "job", id}).find(" Restarts=1 ") != std::string::npos);
  CHECK(waitFor([&] {
    auto pods = f.pods("muster.dev/slurm-job-id=" + id);
    return pods.size() == 1 && pods[0].meta.name == "slurm-" + id + "-1-0";
  }, kTimeout));
  // requeuehold: the running job goes back and waits, held.
  f.ok({"scontrol", "requeuehold", id});
  f.expectPrints(state, id + " PD JobHeldUser\n");
  CHECK(f.ok({"scontrol", "show", "job", id}).find(" Restarts=2 ") != std::string::npos);
  CHECK(waitFor([&] { return f.pods("muster.dev/slurm-job-id=" + id).empty(); }, kTimeout));
  CHECK(f.refused({"scontrol", "requeue", id}).find(
            "slurm_requeue error: Job is pending execution for job " + id) != std::string::npos);
  f.ok({"scontrol", "release", id});
  f.expectPrints(state, id + " R None\n");
}

TEST_CASE("sacct shows a job and its batch step until the retention ends, then the job is deleted",
          "[slurm]") {
  SlurmFixture f("  accountingRetention: \"0:20\"\n");
  std::string path = f.script("acct.sh", "#!/bin/sh\n#SBATCH -N 2\n#SBATCH -J acct\ntrue\n");
  const std::string id = std::to_string(f.submittedId(f.ok({"sbatch", path})));
  const std::vector<std::string> sacct{"sacct", "-P", "-n", "-j", id, "-o", "JobID,JobName,State,ExitCode,NNodes"};
  f.expectPrints(sacct, id + "|acct|RUNNING|0:0|2\n" + id + ".batch|batch|RUNNING|0:0|1\n");
  // The caller's own jobs of today by default, in Slurm's layout.
  std::string table = f.ok({"sacct", "-X"});
  INFO("sacct -X printed:\n" << table);
  CHECK(table.rfind("JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
                    "------------ ---------- ---------- ---------- ---------- ---------- -------- \n", 0) == 0);
  CHECK(table.find("\n" + id + std::string(12 - id.size(), ' ') + "       acct        gpu ") != std::string::npos);

  // The batch step ends and hands over the steps srun recorded in its termination message
  // (step_record.h), which kwok plays here as the kubelet would read it.
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  const std::string message =
      absl::StrCat("0:0\nstep\t0\tCOMPLETED\t0:0\t", now - 9, "\t", now - 8, "\t2\t4\t4\tslurm-", id,
                   "-0-[0-1]\thostname\nstep\t1\tFAILED\t3:0\t", now - 7, "\t", now - 2,
                   "\t1\t1\t1\tslurm-", id, "-0-1\ttrain\n");
  kubectl({"annotate", "pod", "-n", f.ns(), "slurm-" + id + "-0-0",
           "muster.dev/sim-termination-message=" + message, "muster.dev/sim-succeed-after=1s"});
  f.expectPrints(sacct, id + "|acct|COMPLETED|0:0|2\n" + id + ".batch|batch|COMPLETED|0:0|1\n" + id +
                            ".0|hostname|COMPLETED|0:0|2\n" + id + ".1|train|FAILED|3:0|1\n");
  f.expectPrints({"sacct", "-P", "-n", "-j", id + ".1", "-o", "JobID,Elapsed,NTasks,NodeList"},
                 id + ".1|00:00:05|1|slurm-" + id + "-0-1\n");
  f.expectPrints({"sacct", "-n", "-X", "-s", "CD", "-o", "JobID%-10"}, id + std::string(10 - id.size(), ' ') + " \n");
  // 20 s after it ended the job engine deletes the job: sacct no longer knows it.
  bool deleted = waitFor([&] { return f.count("paralleljobs") == 0; }, kTimeout);
  INFO(f.scheduler().logTail());
  CHECK(deleted);
  CHECK(f.ok(sacct).empty());
}


TEST_CASE("scancel --signal reaches a running job's batch pod as its annotation, and a pending job "
          "is refused",
          "[slurm]") {
  SlurmFixture f;
  std::string path = f.script("sig.sh", "#!/bin/sh\n#SBATCH -N 2\ntrue\n");
  const std::string run = std::to_string(f.submittedId(f.ok({"sbatch", path})));
  const std::string held = std::to_string(f.submittedId(f.ok({"sbatch", "-H", path})));
  f.expectPrints({"squeue", "-h", "-j", run, "-o", "%i %t"}, run + " R\n");
  const std::string batch_pod = "slurm-" + run + "-0-0";
  auto annotation = [&] {
    return kubectl({"get", "pod", "-n", f.ns(), batch_pod, "-o",
                    "jsonpath={.metadata.annotations.muster\\.dev/slurm-signal}"});
  };
  CHECK(annotation().empty());
  f.ok({"scancel", "--signal=USR1", "-b", run});
  std::string last;
  CHECK(waitFor([&] { return (last = annotation()) == "1:10:batch"; }, kTimeout));
  INFO("annotation: " << last);
  // The next request counts up; the job keeps running (a signal is no cancel).
  f.ok({"scancel", "-s", "SIGUSR2", run});
  CHECK(waitFor([&] { return (last = annotation()) == "2:12:steps"; }, kTimeout));
  f.expectPrints({"squeue", "-h", "-j", run, "-o", "%i %t"}, run + " R\n");
  // The pod reads it through its downward API volume.
  CHECK(kubectl({"get", "pod", "-n", f.ns(), batch_pod, "-o",
                 "jsonpath={.spec.volumes[?(@.name==\"muster-slurm-signal\")].downwardAPI.items[0].fieldRef.fieldPath}"}) ==
        "metadata.annotations['muster.dev/slurm-signal']");
  // A pending job has nothing to signal, as slurmctld says; a bad signal name is refused.
  auto pending = f.slurm({"scancel", "--signal=USR1", held});
  REQUIRE_FALSE(pending.ok());
  CHECK(std::string(pending.status().message()).find(
            "scancel: error: Kill job error on job id " + held + ": Job is pending execution") !=
        std::string::npos);
  auto bad = f.slurm({"scancel", "--signal=USR3", run});
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("scancel: error: Invalid signal name: USR3") !=
        std::string::npos);
  // -i asks on a terminal (script(1) gives it one here), and is refused without one.
  std::string words;
  for (const std::string& w : f.slurmArgv({"scancel", "-i", held})) words += "'" + w + "' ";
  auto answer = [&](const std::string& reply) {
    return runCommand({"sh", "-c", "printf '" + reply + "\\n' | script -qec \"" + words + "\" /dev/null"});
  };
  auto no_tty = runCommand({"sh", "-c", words + "< /dev/null"});
  REQUIRE_FALSE(no_tty.ok());
  CHECK(std::string(no_tty.status().message()).find("scancel: error: --interactive asks on a terminal") !=
        std::string::npos);
  auto declined = answer("n");
  REQUIRE(declined.ok());
  CHECK(declined->find("Cancel job_id=" + held + " name=sig.sh partition=") != std::string::npos);
  f.expectPrints({"squeue", "-h", "-t", "all", "-j", held, "-o", "%i %t"}, held + " PD\n");
  auto accepted = answer("y");
  REQUIRE(accepted.ok());
  f.expectPrints({"squeue", "-h", "-t", "all", "-j", held, "-o", "%i %t"}, held + " CA\n");
  // --signal=KILL is a cancel.
  f.ok({"scancel", "--signal=KILL", run});
  f.expectPrints({"squeue", "-h", "-t", "all", "-j", run, "-o", "%i %t"}, run + " CA\n");
}


TEST_CASE("sinfo shows the partition's nodes idle, allocated and drained, and scontrol drains and resumes",
          "[slurm]") {
  SlurmFixture f;
  auto sinfoShows = [&](std::vector<std::string> args, const std::string& want) {
    args.insert(args.begin(), "sinfo");
    f.expectPrints(args, want);
  };
  const std::string r0 = f.run() + "-r0-[0-3]", r1 = f.run() + "-r1-[0-3]";
  sinfoShows({"-h", "-o", "%R %t %D %N"}, "gpu idle 8 " + r0 + "," + r1 + "\n");
  // A 4-node job of 8 GPUs a node takes one rack whole.
  std::string path = f.script("gang.sh", "#!/bin/sh\n#SBATCH -N 4\n#SBATCH --gpus-per-node=8\ntrue\n");
  f.ok({"sbatch", path});
  std::string last;
  bool allocated = waitFor([&] {
    auto out = f.slurm({"sinfo", "-h", "-o", "%t %D %N"});
    last = out.value_or(out.status().ToString());
    return out.ok() && (*out == "idle 4 " + r1 + "\nalloc 4 " + r0 + "\n" ||
                        *out == "idle 4 " + r0 + "\nalloc 4 " + r1 + "\n");
  }, kTimeout, std::chrono::milliseconds(300));
  INFO("sinfo printed:\n" << last);
  CHECK(allocated);
  const std::string busy_rack = last.find("alloc 4 " + r0) != std::string::npos ? "r0" : "r1";
  const std::string idle_node = f.run() + (busy_rack == "r0" ? "-r1-2" : "-r0-2");

  // Drained with a reason: cordoned, listed by -R and -t drain; refused without a reason.
  auto no_reason = f.slurm({"scontrol", "update", "NodeName=" + idle_node, "State=DRAIN"});
  REQUIRE_FALSE(no_reason.ok());
  CHECK(std::string(no_reason.status().message()).find("You must specify a reason") != std::string::npos);
  f.ok({"scontrol", "update", "NodeName=" + idle_node, "State=DRAIN", "Reason=bad DIMM"});
  CHECK(kubectl({"get", "node", idle_node, "-o", "jsonpath={.spec.unschedulable}"}) == "true");
  sinfoShows({"-h", "-t", "drain", "-o", "%N %E"}, idle_node + " bad DIMM\n");
  std::string reasons = f.ok({"sinfo", "-R", "-h", "-o", "%E|%N"});
  CHECK(reasons == "bad DIMM|" + idle_node + "\n");
  std::string shown = f.ok({"scontrol", "show", "node", idle_node});
  CHECK(shown.find("\n   State=DRAINED ") != std::string::npos);
  CHECK(shown.find("\n   Reason=bad DIMM\n") != std::string::npos);
  CHECK(f.ok({"scontrol", "show", "partition", "gpu"}).find("TotalNodes=8") != std::string::npos);
  const std::string config = f.ok({"scontrol", "show", "config"});
  INFO("scontrol show config printed:\n" << config);
  CHECK(config.rfind("Configuration data as of ", 0) == 0);
  CHECK(config.find("\nClusterName             = e2e\n") != std::string::npos);
  CHECK(config.find("\nPartitionNames          = gpu\n") != std::string::npos);

  // Resumed: schedulable again, idle, no reason left.
  f.ok({"scontrol", "update", "NodeName=" + idle_node, "State=RESUME"});
  CHECK(kubectl({"get", "node", idle_node, "-o", "jsonpath={.spec.unschedulable}"}) != "true");
  sinfoShows({"-h", "-t", "drain", "-o", "%N"}, "");
  CHECK(f.ok({"sinfo", "-R", "-h"}).empty());
}

}  // namespace
}  // namespace muster::e2e
