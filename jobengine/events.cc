#include "jobengine/events.h"

#include <ctime>
#include <random>

#include "proto/codec.h"
#include "proto/log.h"
#include "proto/metrics.h"

namespace muster::jobengine {
namespace asio = proto::asio;

std::string rfc3339Now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {
metrics::Counter& eventErrors() {
  static auto& c = metrics::defaultRegistry()
                       .counter("muster_jobengine_event_errors_total",
                                "ParallelJob Events the API server refused.")
                       .with();
  return c;
}
std::string randomSuffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
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
  proto::Event e;
  e.meta.namespace_ = job.meta.namespace_;
  // Event names are DNS subdomains of at most 253 characters.
  e.meta.name = job.meta.name.substr(0, 200) + "." + randomSuffix();
  e.involved_object.kind = "ParallelJob";
  e.involved_object.api_version = "preferred.jp/v1alpha1";
  e.involved_object.namespace_ = job.meta.namespace_;
  e.involved_object.name = job.meta.name;
  e.involved_object.uid = job.meta.uid;
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.type = std::move(type);
  e.count = 1;
  e.first_timestamp = e.last_timestamp = rfc3339Now();
  e.source_component = component_;
  e.reporting_component = component_;
  e.reporting_instance = instance_;
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
