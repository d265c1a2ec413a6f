#include "scheduler/status_writer.h"

#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/vocabulary.h"

namespace muster::scheduler {
namespace asio = proto::asio;
namespace vocab = proto::vocabulary;

PodStatusWriter::PodStatusWriter(SchedulerApiPtr api, asio::any_io_executor executor,
                                 proto::Clock clock)
    : api_(std::move(api)), strand_(asio::make_strand(executor)), clock_(std::move(clock)) {}

bool PodStatusWriter::reflects(const proto::Pod& pod, std::string_view reason,
                               std::string_view message) {
  const auto* c = pod.findCondition(vocab::kPodScheduledCondition);
  return c != nullptr && c->status == "False" && c->reason == reason && c->message == message;
}

void PodStatusWriter::unschedulable(const proto::Pod& pod, std::string message) {
  set(pod, vocab::kUnschedulableReason, std::move(message));
}

void PodStatusWriter::gated(const proto::Pod& pod) {
  set(pod, vocab::kSchedulingGatedReason, vocab::kSchedulingGatedMessage);
}

void PodStatusWriter::set(const proto::Pod& pod, std::string_view reason, std::string message) {
  if (reflects(pod, reason, message)) return;
  proto::PodCondition cond;
  cond.type = vocab::kPodScheduledCondition;
  cond.status = "False";
  cond.reason = std::string(reason);
  cond.message = std::move(message);
  cond.last_transition_time = proto::rfc3339(clock_());
  asio::post(strand_, [this, pod = PodRef::of(pod), cond = std::move(cond)]() mutable {
    write(std::move(pod), std::move(cond));
  });
}

void PodStatusWriter::write(PodRef pod, proto::PodCondition condition) {
  std::string key = pod.key();
  Pending& p = pending_[key];
  if (p.in_flight) {
    p.next.emplace(std::move(pod), std::move(condition));
    return;
  }
  p.in_flight = true;
  asio::co_spawn(strand_, [this, key = std::move(key), pod = std::move(pod),
                           condition = std::move(condition)]() mutable -> asio::awaitable<void> {
    for (;;) {
      absl::Status status = co_await api_->setPodCondition(pod, condition);
      if (!status.ok() && !proto::isNotFound(status)) {
        metrics::apiWriteErrors("status").inc();
        MUSTER_LOG_WARNING("Write refused", "what", "PodScheduled condition of " + key, "error",
                           status.ToString());
      }
      // Back on strand_ (the coroutine runs there): send the newest pending write, if any.
      Pending& p = pending_[key];
      if (!p.next) {
        pending_.erase(key);
        co_return;
      }
      pod = std::move(p.next->first);
      condition = std::move(p.next->second);
      p.next.reset();
    }
  }, proto::dieOnException("pod condition write"));
}

}  // namespace muster::scheduler
