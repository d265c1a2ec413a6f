#include "scheduler/binder.h"

#include <algorithm>
#include <tuple>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace asio = proto::asio;
namespace vocab = proto::vocabulary;

namespace {

struct Metrics {
  metrics::Family<metrics::Counter>& binds = metrics::defaultRegistry().counter(
      "muster_binds_total", "Pod bindings by result (success, error).", {"result"});
  metrics::Family<metrics::Histogram>& bind_duration = metrics::defaultRegistry().histogram(
      "muster_gang_bind_duration_seconds",
      "From a gang's placement being sent to its first member bound (first_bound) and to every "
      "member answered (all_answered).",
      metrics::exponentialBuckets(0.0005, 2, 16), {"stage"});
  metrics::Counter& evictions = metrics::defaultRegistry()
                                    .counter("muster_gang_evictions_total",
                                             "Bound gang members evicted because the rest of "
                                             "their gang could not join them.")
                                    .with();
};

Metrics& m() {
  static Metrics* metrics = new Metrics();
  return *metrics;
}

}  // namespace

struct Binder::Batch {
  GangKey gang;
  std::vector<PodRef> pods;
  std::vector<std::string> nodes;
  std::vector<int32_t> gpu_indices;  // Assignment::gpu_index
  size_t remaining = 0;
  Result result;
  Done done;
  bool per_pod_events = true;
  std::optional<proto::ObjectReference> regarding;  // the gang's Event (else its first bound pod)
  std::vector<size_t> bound;                        // indices into pods, as they answered
  std::string domain;  // GangPlacement::describe(), empty for one node or nodes of no common domain
  std::chrono::steady_clock::time_point sent;       // bind() called
  double first_bound_ms = -1;
};

namespace {

proto::ObjectReference podReference(const PodRef& pod) {
  proto::ObjectReference ref;
  ref.kind = "Pod";
  ref.api_version = "v1";
  ref.namespace_ = pod.namespace_;
  ref.name = pod.name;
  ref.uid = pod.uid;
  return ref;
}

// The distinct nodes of `which`, in order of first use.
std::vector<std::string> distinctNodes(const std::vector<std::string>& nodes,
                                       const std::vector<size_t>& which) {
  std::vector<std::string> distinct;
  for (size_t i : which)
    if (std::find(distinct.begin(), distinct.end(), nodes[i]) == distinct.end())
      distinct.push_back(nodes[i]);
  return distinct;
}

}  // namespace

Binder::Binder(SchedulerApiPtr api, asio::strand<asio::any_io_executor> strand,
               proto::EventRecorder& events, proto::Clock clock, bool per_pod_events, int in_flight)
    : api_(std::move(api)),
      strand_(std::move(strand)),
      events_(events),
      clock_(std::move(clock)),
      per_pod_events_(per_pod_events),
      in_flight_limit_(static_cast<size_t>(std::max(1, in_flight))) {
  for (const char* r : {"success", "error"}) m().binds.with({r});
  for (const char* s : {"first_bound", "all_answered"}) m().bind_duration.with({s});
}

void Binder::bind(const GangAttempt& attempt, const GangPlacement& placement, Done done,
                  std::optional<proto::ObjectReference> regarding) {
  auto batch = std::make_shared<Batch>();
  batch->gang = attempt.key;
  batch->done = std::move(done);
  batch->per_pod_events = per_pod_events_ || attempt.key.single_pod;
  batch->regarding = std::move(regarding);
  // A gang on one node is named by its node alone ("to node n1"), not twice.
  if (placement.level_key != kHostnameLevel) batch->domain = placement.describe();
  batch->sent = std::chrono::steady_clock::now();
  batch->remaining = placement.assignments.size();
  for (size_t i = 0; i < placement.assignments.size(); ++i) {
    batch->pods.push_back(PodRef::of(attempt.members[i]->pod()));
    batch->nodes.push_back(placement.assignments[i].node);
    batch->gpu_indices.push_back(placement.assignments[i].gpu_index);
  }
  if (batch->remaining == 0) {
    asio::post(strand_, [batch] { batch->done(std::move(batch->result)); });
    return;
  }
  // Queued, not sent at once: a request in flight costs kilobytes (its coroutine frames and
  // buffers) and the connection pool serves only so many at a time anyway.
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < batch->pods.size(); ++i) waiting_.emplace_back(batch, i);
  }
  pump();
}

void Binder::pump() {
  for (;;) {
    std::shared_ptr<Batch> batch;
    size_t i = 0;
    {
      absl::MutexLock lock(&mu_);
      if (in_flight_ >= in_flight_limit_ || waiting_.empty()) return;
      std::tie(batch, i) = std::move(waiting_.front());
      waiting_.pop_front();
      ++in_flight_;
    }
    // Off the strand: the request needs nothing of the scheduler's state (the batch's pods,
    // nodes and GPU indices do not change once sent); only its answer goes back to the strand.
    asio::co_spawn(strand_.get_inner_executor(), send(std::move(batch), i), proto::dieOnException("bind"));
  }
}

asio::awaitable<void> Binder::send(std::shared_ptr<Batch> batch, size_t i) {
  absl::Status status = absl::CancelledError("scheduler stopping");
  if (!stopping_) {
    status = absl::OkStatus();
    // The GPU a fraction went to, on the pod before the kubelet can see it.
    if (const int32_t gpu = batch->gpu_indices[i]; gpu >= 0) {
      status = co_await api_->setPodAnnotation(batch->pods[i], vocab::kGpuIndexAnnotation,
                                               absl::StrCat(gpu));
      if (!status.ok())
        status = absl::Status(status.code(), absl::StrCat("writing its GPU index (",
                                                          vocab::kGpuIndexAnnotation, "): ",
                                                          status.message()));
    }
    if (status.ok()) status = co_await api_->bind(batch->pods[i], batch->nodes[i]);
  }
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
  pump();
  co_await asio::post(strand_, asio::use_awaitable);
  answered(batch, i, std::move(status));
}

void Binder::answered(const std::shared_ptr<Batch>& batch, size_t index, absl::Status status) {
  const PodRef& pod = batch->pods[index];
  const std::string& node = batch->nodes[index];
  const std::string key = pod.key();
  if (status.ok()) {
    m().binds.with({"success"}).inc();
    MUSTER_LOG_INFO(2, "Bound pod", "pod", key, "node", node, "gang", batch->gang.toString());
    if (batch->bound.empty()) {
      const auto d = std::chrono::steady_clock::now() - batch->sent;
      batch->first_bound_ms = std::chrono::duration<double, std::milli>(d).count();
      m().bind_duration.with({"first_bound"}).observe(std::chrono::duration<double>(d).count());
    }
    if (batch->per_pod_events) {
      events_.event(podReference(pod), "Normal", "Scheduled",
                    absl::StrCat("Successfully assigned ", key, " to ", node));
    }
    batch->bound.push_back(index);
    batch->result.bound.push_back(key);
  } else {
    m().binds.with({"error"}).inc();
    MUSTER_LOG_WARNING("Bind failed", "pod", key, "node", node, "error", status.ToString());
    batch->result.failed.push_back({key, std::move(status)});
  }
  if (--batch->remaining > 0) return;
  const auto all = std::chrono::steady_clock::now() - batch->sent;
  m().bind_duration.with({"all_answered"}).observe(std::chrono::duration<double>(all).count());
  MUSTER_LOG_INFO(2, "Gang bound", "gang", batch->gang.toString(), "pods", batch->pods.size(),
                  "bound", batch->bound.size(), "firstBoundMs", batch->first_bound_ms,
                  "allAnsweredMs", std::chrono::duration<double, std::milli>(all).count());
  if (!batch->per_pod_events && !batch->bound.empty()) {
    // One Event for the gang: its bound members' nodes in the order they were sent.
    std::vector<size_t> bound = batch->bound;
    std::sort(bound.begin(), bound.end());
    const size_t n = bound.size();
    const std::vector<std::string> nodes = distinctNodes(batch->nodes, bound);
    std::string message = absl::StrCat("Successfully assigned ", n, n == 1 ? " pod" : " pods",
                                       " of gang ", batch->gang.toString(), " to ");
    if (!batch->domain.empty()) absl::StrAppend(&message, batch->domain, ": ");
    absl::StrAppend(&message, nodes.size() == 1 ? "node " : "nodes ", joinSome(nodes));
    if (!batch->result.failed.empty())
      absl::StrAppend(&message, " (", batch->result.failed.size(), " more failed to bind)");
    events_.event(batch->regarding ? *batch->regarding : podReference(batch->pods[bound.front()]),
                  "Normal", "Scheduled", std::move(message));
  }
  batch->done(std::move(batch->result));
}

void Binder::rollback(const GangAttempt& attempt, const std::string& why,
                      const PodLookup& lookup) {
  const std::string gang = attempt.key.toString();
  for (const auto& [pod_key, node] : attempt.bound) {
    auto slash = pod_key.find('/');
    std::string ns = pod_key.substr(0, slash), name = pod_key.substr(slash + 1);
    std::shared_ptr<const proto::Pod> pod = lookup(ns, name);
    if (!pod || pod->meta.deletion_timestamp) continue;
    if (pod->meta.controllerRef() == nullptr) {
      std::string message = absl::StrCat(
          "pod is bound to ", node, " but the rest of gang ", gang, " cannot be placed with it (",
          why,
          "); it has no controller to recreate it, so Muster does not evict it: delete it to let "
          "the gang be scheduled again");
      events_.event(*pod, "Warning", "GangPartlyBound", std::move(message));
      MUSTER_LOG_WARNING("Gang partly bound, member has no owner", "pod", pod_key, "gang", gang);
      continue;
    }
    if (stopping_) return;
    m().evictions.inc();
    MUSTER_LOG_INFO(2, "Evicting bound gang member", "pod", pod_key, "node", node, "gang", gang);
    events_.event(*pod, "Warning", "GangEvicted",
                  absl::StrCat("evicted: the rest of gang ", gang, " cannot be placed with it (",
                               why, ")"));
    proto::PodCondition rollback;
    rollback.type = vocab::kGangRollbackCondition;
    rollback.status = "True";
    rollback.reason = vocab::kGangRollbackReason;
    rollback.message = absl::StrCat("the rest of gang ", gang, " cannot be placed with this pod");
    rollback.last_transition_time = proto::rfc3339(clock_());
    asio::co_spawn(strand_, [api = api_, ref = PodRef::of(*pod),
                             rollback = std::move(rollback)]() -> asio::awaitable<void> {
      // No marker, no eviction: the job engine must tell a rollback from a failure.
      absl::Status marked = co_await api->setPodCondition(ref, rollback);
      if (!marked.ok()) {
        if (!proto::isNotFound(marked))
          MUSTER_LOG_WARNING("Cannot mark pod for eviction", "pod", ref.key(), "error",
                             marked.ToString());
        co_return;
      }
      absl::Status evicted = co_await api->evict(ref);
      if (!evicted.ok() && !proto::isNotFound(evicted))
        MUSTER_LOG_WARNING("Eviction refused", "pod", ref.key(), "error", evicted.ToString());
    }, proto::dieOnException("gang rollback"));
  }
}

}  // namespace muster::scheduler
