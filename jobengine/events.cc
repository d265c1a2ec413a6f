#include "jobengine/events.h"


#include "proto/codec.h"
#include "proto/log.h"
#include "proto/metrics.h"

namespace muster::jobengine {
namespace asio = proto::asio;

namespace {
metrics::Counter& eventErrors() {
  static auto& c = metrics::defaultRegistry()
                       .counter("muster_jobengine_event_errors_total",
                                "ParallelJob Events the API server refused.")
                       .with();
  return c;
}
}  // namespace

EventRecorder::EventRecorder(std::shared_ptr<proto::Client> client,
                             asio::any_io_executor executor, std::string component,
                             std::string instance)
    : client_(std::move(client)),
      strand_(asio::make_strand(executor)),
      component_(std::move(component)),
      instance_(std::move(instance)) {}

void EventRecorder::event(const proto::ParallelJob& job, std::string type, std::string reason,
                          std::string message) {
  proto::ObjectReference ref;
  ref.kind = "ParallelJob";
  ref.api_version = "preferred.jp/v1alpha1";
  ref.namespace_ = job.meta.namespace_;
  ref.name = job.meta.name;
  ref.uid = job.meta.uid;
  proto::Event e = proto::newEvent(std::move(ref), std::move(type), std::move(reason),
                                   std::move(message), component_, instance_);
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kEvents.collectionPath(e.meta.namespace_);
  req.body = proto::encode(e);
  std::string what = e.reason + " for " + job.meta.namespace_ + "/" + job.meta.name;
  asio::co_spawn(strand_, [client = client_, req = std::move(req),
                           what = std::move(what)]() -> asio::awaitable<void> {
    auto result = co_await client->call(req);
    if (!result.ok() && !proto::isNotFound(result.status())) {
      eventErrors().inc();
      MUSTER_LOG_WARNING("Event refused", "event", what, "error", result.status().ToString());
    }
  }, asio::detached);
}

}  // namespace muster::jobengine
