#include "scheduler/recorder.h"


#include "proto/codec.h"
#include "proto/log.h"
#include "proto/metrics.h"

namespace muster::scheduler {
namespace asio = proto::asio;

namespace {
metrics::Counter& droppedEvents() {
  static auto& c = metrics::defaultRegistry()
                       .counter("muster_events_dropped_total",
                                "Events not written because of rate limits.")
                       .with();
  return c;
}
metrics::Counter& eventErrors() {
  static auto& c = metrics::defaultRegistry()
                       .counter("muster_api_write_errors_total",
                                "Event and status writes the API server refused.", {"kind"})
                       .with({"event"});
  return c;
}

}  // namespace

Recorder::Recorder(std::shared_ptr<proto::Client> client, asio::any_io_executor executor,
                   RecorderOptions options)
    : client_(std::move(client)),
      strand_(asio::make_strand(executor)),
      options_(std::move(options)),
      tokens_(options_.events_burst),
      refilled_(std::chrono::steady_clock::now()) {}

bool Recorder::admit(const std::string& key) {
  auto now = std::chrono::steady_clock::now();
  tokens_ = std::min<double>(options_.events_burst,
                             tokens_ + options_.events_per_second *
                                           std::chrono::duration<double>(now - refilled_).count());
  refilled_ = now;
  auto& [window_start, count] = per_object_[key];
  if (now - window_start > std::chrono::minutes(1)) {
    window_start = now;
    count = 0;
  }
  if (tokens_ < 1 || count >= options_.max_per_object_per_minute) {
    droppedEvents().inc();
    return false;
  }
  tokens_ -= 1;
  ++count;
  if (per_object_.size() > 100000) per_object_.clear();  // bound memory; limits reset
  return true;
}

void Recorder::post(proto::Request request, std::string what) {
  asio::co_spawn(strand_, [client = client_, request = std::move(request),
                           what = std::move(what)]() -> asio::awaitable<void> {
    auto result = co_await client->call(request);
    if (!result.ok() && !proto::isNotFound(result.status())) {
      eventErrors().inc();
      MUSTER_LOG_WARNING("Write refused", "what", what, "error", result.status().ToString());
    }
  }, asio::detached);
}

void Recorder::event(const proto::Pod& pod, std::string type, std::string reason,
                     std::string message) {
  proto::ObjectReference ref;
  ref.kind = "Pod";
  ref.api_version = "v1";
  ref.namespace_ = pod.meta.namespace_;
  ref.name = pod.meta.name;
  ref.uid = pod.meta.uid;
  event(std::move(ref), std::move(type), std::move(reason), std::move(message));
}

void Recorder::event(proto::ObjectReference ref, std::string type, std::string reason,
                     std::string message) {
  asio::post(strand_, [this, ref = std::move(ref), type = std::move(type),
                       reason = std::move(reason), message = std::move(message)]() mutable {
    if (!admit(ref.kind + "/" + ref.namespace_ + "/" + ref.name + "/" + reason)) return;
    proto::Event e = proto::newEvent(ref, std::move(type), std::move(reason), std::move(message),
                                     options_.component, options_.instance);
    proto::Request req;
    req.verb = proto::Verb::kPost;
    req.path = proto::resources::kEvents.collectionPath(e.meta.namespace_);
    req.body = proto::encode(e);
    post(std::move(req), "event " + e.reason + " for " + ref.namespace_ + "/" + ref.name);
  });
}

void Recorder::unschedulable(const proto::Pod& pod, const std::string& message) {
  if (const auto* c = pod.findCondition("PodScheduled");
      c != nullptr && c->status == "False" && c->reason == "Unschedulable" && c->message == message)
    return;
  proto::PodCondition cond;
  cond.type = "PodScheduled";
  cond.status = "False";
  cond.reason = "Unschedulable";
  cond.message = message;
  cond.last_transition_time = proto::rfc3339Now();
  proto::Request req;
  req.verb = proto::Verb::kPatch;
  req.path = proto::resources::kPods.objectPath(pod.meta.namespace_, pod.meta.name, "status");
  req.content_type = std::string(proto::contentType(proto::PatchType::kStrategicMerge));
  req.body = proto::podConditionPatch(cond);
  asio::post(strand_, [this, req = std::move(req), key = pod.meta.namespace_ + "/" + pod.meta.name]() mutable {
    writeStatus(key, std::move(req));
  });
}

void Recorder::writeStatus(const std::string& pod_key, proto::Request request) {
  StatusWrites& w = status_writes_[pod_key];
  if (w.in_flight) {
    w.next = std::move(request);
    return;
  }
  w.in_flight = true;
  asio::co_spawn(strand_, [this, pod_key, request = std::move(request)]() mutable -> asio::awaitable<void> {
    for (;;) {
      auto result = co_await client_->call(request);
      if (!result.ok() && !proto::isNotFound(result.status())) {
        eventErrors().inc();
        MUSTER_LOG_WARNING("Write refused", "what", "PodScheduled condition of " + pod_key,
                           "error", result.status().ToString());
      }
      // Back on strand_ (the coroutine runs there): send the newest pending write, if any.
      StatusWrites& w = status_writes_[pod_key];
      if (!w.next) {
        status_writes_.erase(pod_key);
        co_return;
      }
      request = std::move(*w.next);
      w.next.reset();
    }
  }, asio::detached);
}

}  // namespace muster::scheduler
