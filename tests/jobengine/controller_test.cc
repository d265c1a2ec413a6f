// How the controller executes a plan when the API server refuses its status write, and whose jobs
// it reconciles first when many are queued (controller.h).
#include <catch2/catch.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "jobengine/controller.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "proto/client.h"
#include "proto/event_recorder.h"
#include "proto/informer_factory.h"

namespace muster::jobengine {
namespace {

absl::Status refused(int code, const std::string& reason) {
  return proto::apiError(code,
                         R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"no",)"
                         R"("reason":")" + reason + R"(","code":)" + std::to_string(code) + "}",
                         "patch paralleljobs/status");
}

TEST_CASE("a status the API server refuses for what it says never blocks the plan's deletes, "
          "while conflicts and server trouble are retried whole", "[controller]") {
  // status.slurm.steps[0].startTime: Invalid value: "10000-01-01T00:00:00Z": ... date-time
  CHECK(statusRefusedForGood(refused(422, "Invalid")));
  CHECK(statusRefusedForGood(refused(400, "BadRequest")));
  CHECK(statusRefusedForGood(refused(413, "RequestEntityTooLarge")));
  CHECK_FALSE(statusRefusedForGood(refused(409, "Conflict")));
  CHECK_FALSE(statusRefusedForGood(refused(404, "NotFound")));
  CHECK_FALSE(statusRefusedForGood(refused(403, "Forbidden")));
  CHECK_FALSE(statusRefusedForGood(refused(429, "TooManyRequests")));
  CHECK_FALSE(statusRefusedForGood(refused(500, "InternalError")));
  CHECK_FALSE(statusRefusedForGood(refused(504, "Timeout")));
  CHECK_FALSE(statusRefusedForGood(absl::UnavailableError("connection reset")));
  CHECK_FALSE(statusRefusedForGood(absl::InvalidArgumentError("not from the API server")));
  CHECK_FALSE(statusRefusedForGood(absl::OkStatus()));
}

namespace asio = proto::asio;

// A collection served by list pages, then watched: events go to the open watch as the test sends
// them. Runs on the test's io_context (one thread).
struct Collection {
  std::vector<std::string> items;
  std::deque<std::string> events;  // watch lines not yet delivered
  std::shared_ptr<asio::steady_timer> wake;  // what an idle watch waits on
  void send(std::string line) {
    events.push_back(std::move(line));
    if (wake) wake->cancel();
  }
};

class FakeListerWatcher final : public proto::ListerWatcher {
 public:
  explicit FakeListerWatcher(Collection* c) : c_(c) {}
  asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t limit, std::string cont) override {
    const size_t begin = cont.empty() ? 0 : std::stoul(cont);
    const size_t end = limit > 0 ? std::min(c_->items.size(), begin + limit) : c_->items.size();
    std::string page = R"({"kind":"List","metadata":{"resourceVersion":"1","continue":")" +
                       (end < c_->items.size() ? std::to_string(end) : "") + R"("},"items":[)";
    for (size_t i = begin; i < end; ++i) page += (i > begin ? "," : "") + c_->items[i];
    co_return page + "]}";
  }
  asio::awaitable<absl::Status> watch(std::string, int,
                                      std::function<absl::Status(std::string_view)> on_line) override {
    while (!cancelled_) {
      while (!c_->events.empty()) {
        std::string line = std::move(c_->events.front());
        c_->events.pop_front();
        if (absl::Status s = on_line(line); !s.ok()) co_return s;
      }
      c_->wake = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor,
                                                      std::chrono::hours(1));
      boost::system::error_code ec;
      co_await c_->wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return absl::CancelledError("watch cancelled");
  }
  void cancel() override {
    cancelled_ = true;
    if (c_->wake) c_->wake->cancel();
  }

 private:
  Collection* c_;
  bool cancelled_ = false;
};

// The API calls of the controller: every status write is recorded (one per reconcile of a job
// whose status changes), and the first is held until the test opens the gate.
class FakeJobApi final : public JobApi {
 public:
  struct Write {
    std::string name;
    std::string body;
    std::chrono::steady_clock::time_point at;
  };
  std::vector<Write> status_writes;
  std::shared_ptr<asio::steady_timer> gate;  // the first write waits on it
  void open() {
    opened = true;
    if (gate) gate->cancel();
  }
  bool opened = false;

  asio::awaitable<absl::StatusOr<std::string>> create(const proto::Resource&, std::string_view,
                                                      std::string) override {
    co_return std::string("{}");
  }
  asio::awaitable<absl::StatusOr<std::string>> get(const proto::Resource&, std::string_view,
                                                   std::string_view) override {
    co_return std::string("{}");
  }
  asio::awaitable<absl::StatusOr<std::string>> remove(const proto::Resource&, std::string_view,
                                                      std::string_view, std::string_view) override {
    co_return std::string("{}");
  }
  asio::awaitable<absl::StatusOr<std::string>> patch(const proto::Resource&, std::string_view,
                                                     std::string_view, std::string) override {
    co_return std::string("{}");
  }
  asio::awaitable<absl::StatusOr<std::string>> patchStatus(const proto::Resource&,
                                                           std::string_view, std::string_view name,
                                                           std::string body) override {
    status_writes.push_back({std::string(name), std::move(body), std::chrono::steady_clock::now()});
    if (status_writes.size() == 1 && !opened) {
      gate = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor,
                                                  std::chrono::hours(1));
      boost::system::error_code ec;
      co_await gate->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return std::string("{}");
  }
};

class NullEventSink final : public proto::EventSink {
 public:
  asio::awaitable<absl::Status> create(const proto::Event&) override { co_return absl::OkStatus(); }
  asio::awaitable<absl::Status> updateSeries(const proto::Event&) override {
    co_return absl::OkStatus();
  }
};

// A job sbatch -H submitted: held until released (spec.slurm.hold).
std::string heldSlurmJob(const std::string& name, int64_t job_id, const std::string& user) {
  const std::string id = std::to_string(job_id);
  return R"({"apiVersion":"preferred.jp/v1alpha1","kind":"ParallelJob","metadata":{"name":")" +
         name + R"(","namespace":"hpc","uid":"uid-)" + id + R"(","resourceVersion":")" + id +
         R"("},"spec":{"runtimeRef":{"name":"slurm"},"numPods":1,"numProcPerPod":1,)"
         R"("launcher":{"spec":{"containers":[{"name":"main","image":"registry.example.com/cpu:1"}]}},)"
         R"("slurm":{"jobId":)" + id + R"(,"jobName":"train","partition":"cpu","user":")" + user +
         R"(","ntasks":1,"hold":true,"batchSecret":"slurm-)" + id + R"(-batch"}}})";
}

template <class Pred>
void runUntil(asio::io_context& io, Pred done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline)
    io.run_one_for(std::chrono::milliseconds(10));
  REQUIRE(done());
}

TEST_CASE("the job owner is the Slurm user of a Slurm job, else the namespace", "[controller]") {
  proto::ParallelJob job;
  job.meta.namespace_ = "hpc";
  job.meta.name = "j";
  CHECK(jobOwner(job) == "namespace:hpc");
  job.spec.slurm.emplace();
  job.spec.slurm->user = "alice";
  CHECK(jobOwner(job) == "slurm-user:hpc/alice");
  CHECK(jobOwner(job) != keyOwner("hpc/j"));
  CHECK(keyOwner("hpc/j") == "namespace:hpc");
}

TEST_CASE("with one user's 5,000 held jobs queued, another user's job is reconciled "
          "next-but-one, within 1 s",
          "[controller]") {
  asio::io_context io;  // outlives everything that waits on it
  Collection jobs, pods;
  for (int i = 0; i < 5000; ++i)
    jobs.items.push_back(heldSlurmJob("slurm-" + std::to_string(1000 + i), 1000 + i, "alice"));
  proto::InformerFactory informers(
      [&](const proto::Resource& r, const proto::ListWatchOptions&) -> proto::ListerWatcherPtr {
        return std::make_unique<FakeListerWatcher>(r.plural == "pods" ? &pods : &jobs);
      },
      io.get_executor());
  proto::EventRecorder events(std::make_shared<NullEventSink>(), io.get_executor(), {});
  auto api = std::make_shared<FakeJobApi>();
  ControllerOptions options;
  options.max_concurrent_reconciles = 1;
  options.watch_nodes = false;
  auto slurm = slurm::parseSlurmSection(R"(
slurm:
  clusterName: testcluster
  defaultPartition: cpu
  partitions:
  - name: cpu
    template:
      spec:
        containers: [{name: main, image: "registry.example.com/cpu:1"}]
)");
  REQUIRE(slurm.ok());
  options.runtime.slurm = *slurm;
  Controller controller(api, informers, events, io.get_executor(), options);
  informers.start();
  controller.start();

  // Synced: all of alice's jobs are queued and the first one's reconcile is under way, held at
  // its status write.
  runUntil(io, [&] { return controller.ready() && api->status_writes.size() == 1; },
           std::chrono::seconds(30));
  CHECK(api->status_writes[0].name.rfind("slurm-", 0) == 0);
  // bob submits one job.
  jobs.send(R"({"type":"ADDED","object":)" + heldSlurmJob("slurm-9000", 9000, "bob") + "}");
  runUntil(io, [&] {
    return informers.informer<proto::ParallelJob>(proto::resources::kParallelJobs)
               .get("hpc", "slurm-9000") != nullptr;
  }, std::chrono::seconds(10));
  io.poll();  // the informer's handler has queued bob's job on the controller's strand

  api->open();
  const auto opened = std::chrono::steady_clock::now();
  auto bob = [&]() -> const FakeJobApi::Write* {
    for (const auto& w : api->status_writes)
      if (w.name == "slurm-9000") return &w;
    return nullptr;
  };
  runUntil(io, [&] { return bob() != nullptr; }, std::chrono::seconds(10));
  // The held reconcile, at most one more of alice's, then bob's: not 5,000 of alice's first.
  const size_t position = bob() - api->status_writes.data();
  CHECK(position <= 2);
  CHECK(bob()->at - opened < std::chrono::seconds(1));
  CHECK(bob()->body.find("JobHeldUser") != std::string::npos);

  // Nothing starves: every one of alice's jobs is reconciled too, each once.
  runUntil(io, [&] { return api->status_writes.size() >= 5001; }, std::chrono::seconds(60));
  std::set<std::string> names;
  for (const auto& w : api->status_writes) names.insert(w.name);
  CHECK(names.size() == 5001);

  controller.stop();
  informers.stop();
  events.stop();
  io.poll();
}

}  // namespace
}  // namespace muster::jobengine
