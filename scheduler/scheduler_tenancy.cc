// The Scheduler's part of tenancy (scheduler/tenancy/tenancy.h): Queue events, the refusal of
// gangs over a queue's limit, the periodic fair-share refresh, the Queue status writes and the
// muster_queue_* metrics.

#include "absl/strings/str_cat.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/vocabulary.h"
#include "scheduler/scheduler.h"

namespace muster::scheduler {

namespace asio = proto::asio;


namespace {

// Queue status writes per second, all queues together (scheduler/tenancy/README.md).
constexpr size_t kQueueWritesPerSecond = 10;

struct QueueMetrics {
  metrics::Family<metrics::Gauge>& allocated = metrics::defaultRegistry().gauge(
      "muster_queue_allocated", "What a queue's subtree holds, by resource (GPUs and cpu in "
      "units, memory in bytes).", {"queue", "resource"});
  metrics::Family<metrics::Gauge>& fair_share = metrics::defaultRegistry().gauge(
      "muster_queue_fair_share", "A queue's fair share at the last refresh, by resource.",
      {"queue", "resource"});
  metrics::Family<metrics::Gauge>& pending = metrics::defaultRegistry().gauge(
      "muster_queue_pending_gangs", "Gangs of a queue waiting to be placed.", {"queue"});
  metrics::Counter& refused = metrics::defaultRegistry()
                                  .counter("muster_queue_limit_refusals_total",
                                           "Gang attempts refused for a queue's limit or a "
                                           "queue that does not exist.")
                                  .with();
  metrics::Family<metrics::Counter>& reclaims = metrics::defaultRegistry().counter(
      "muster_queue_reclaims_total", "Reclaims decided for a queue's gangs.", {"queue"});
  metrics::Family<metrics::Counter>& reclaimed_gpus = metrics::defaultRegistry().counter(
      "muster_queue_reclaimed_gpus_total",
      "GPUs of the gangs evicted by reclaims, by the queue they were taken from.", {"queue"});
  metrics::Counter& status_writes = metrics::defaultRegistry()
                                        .counter("muster_queue_status_writes_total",
                                                 "Queue status subresource writes sent.")
                                        .with();
};

QueueMetrics& qm() {
  static QueueMetrics* m = new QueueMetrics();
  return *m;
}

double asUnits(std::string_view resource, int64_t units) {
  return tenancy::countedInBytes(resource) ? static_cast<double>(units)
                                           : static_cast<double>(units) / 1000.0;
}

}  // namespace

void Scheduler::onQueue(const std::shared_ptr<const proto::Queue>& queue, bool deleted) {
  if (deleted) tenancy_.removeQueue(queue->meta.name);
  else tenancy_.setQueue(queue);
  // A queue that appeared or a limit that grew may let refused gangs in.
  queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
  kick();
}

std::optional<Unschedulable> Scheduler::tenancyRefusal(const GangAttempt& attempt) {
  if (!tenancy_.enabled() || attempt.members.empty()) return std::nullopt;
  const std::string queue = tenancy_.queueOf(attempt.members.front()->pod());
  tenancy::Request request;
  for (const PodInfoPtr& member : attempt.members)
    request += tenancy::Request{member->requests, member->gpu_milli};
  std::optional<tenancy::Refusal> refusal = tenancy_.refuses(queue, request);
  if (!refusal) return std::nullopt;
  qm().refused.inc();
  Unschedulable verdict;
  verdict.message = refusal->message;
  verdict.waiting_for_quota = true;
  return verdict;
}

void Scheduler::noteReclaim(const std::string& queue, const PreemptionPlan& plan) {
  qm().reclaims.with({queue}).inc();
  for (const VictimUnit& unit : plan.victims) {
    if (unit.pods.empty()) continue;
    double gpus = 0;  // whole or in thousandths
    for (const std::string& pod : unit.pods)
      gpus += static_cast<double>(tenancy_.podUnits(pod, proto::vocabulary::kGpuResource)) / 1000.0;
    qm().reclaimed_gpus.with({std::string(tenancy_.queueOfPod(unit.pods.front()))}).inc(gpus);
  }
}

void Scheduler::refreshTenancy(bool now_if_changed) {
  const absl::Time now = clock_();
  if (!tenancy_.refreshDue(now, now_if_changed)) return;
  std::vector<std::pair<std::string, tenancy::Request>> pending;
  queue_.forEachPendingGang([&](const std::string& tenant, const GangKey&,
                                const std::map<std::string, PodInfoPtr>& members) {
    tenancy::Request request;
    for (const auto& [key, member] : members) request += tenancy::Request{member->requests, member->gpu_milli};
    pending.emplace_back(tenant, request);
  });
  tenancy_.refresh(now, cache_, pending, now_if_changed);
  const tenancy::QueueTree& tree = tenancy_.tree();
  for (size_t i = 1; i < tree.size(); ++i) {
    const std::string& name = tree.name(i);
    qm().pending.with({name}).set(static_cast<double>(tenancy_.pendingGangs(name)));
    for (const std::string& r : tenancy_.resourceNames()) {
      qm().allocated.with({name, r}).set(asUnits(r, tenancy_.allocated(name, r)));
      qm().fair_share.with({name, r}).set(asUnits(r, tenancy_.fairShare(name, r)));
    }
  }
  if (!queue_status_writing_ && !stopping_) {
    queue_status_writing_ = true;
    asio::co_spawn(strand_, writeQueueStatuses(), proto::dieOnException("queue status"));
  }
}

asio::awaitable<void> Scheduler::writeQueueStatuses() {
  auto due = tenancy_.dueStatuses(clock_(), kQueueWritesPerSecond);
  for (auto& [name, status] : due) {
    std::vector<std::string> removed;
    if (const proto::Queue* q = tenancy_.queue(name))
      for (const auto& [resource, r] : q->status.resources)
        if (!status.resources.contains(resource)) removed.push_back(resource);
    qm().status_writes.inc();
    absl::Status written = co_await api_->setQueueStatus(name, status, std::move(removed));
    co_await asio::post(strand_, asio::use_awaitable);
    if (!written.ok() && !absl::IsNotFound(written)) {
      MUSTER_LOG_WARNING("Queue status not written", "queue", name, "error", written.ToString());
      tenancy_.writeFailed(name);
    }
    if (stopping_) break;
  }
  queue_status_writing_ = false;
}

}  // namespace muster::scheduler
