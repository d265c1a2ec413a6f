#include "proto/event_recorder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <list>

#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/strings.h"

namespace muster::proto {

namespace {

metrics::Counter& droppedMetric() {
  static auto& c = metrics::defaultRegistry()
                       .counter("muster_events_dropped_total",
                                "Events not written because of rate limits.")
                       .with();
  return c;
}
metrics::Counter& aggregatedMetric() {
  static auto& c = metrics::defaultRegistry()
                       .counter("muster_events_aggregated_total",
                                "Repeated Events folded into the count of an earlier one.")
                       .with();
  return c;
}

class ClientEventSink final : public EventSink {
 public:
  explicit ClientEventSink(std::shared_ptr<Client> client) : client_(std::move(client)) {}
  asio::awaitable<absl::Status> create(const Event& event) override {
    Request req;
    req.verb = Verb::kPost;
    req.path = resources::kEvents.collectionPath(event.meta.namespace_);
    req.body = encode(event);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }
  asio::awaitable<absl::Status> updateSeries(const Event& event) override {
    Request req;
    req.verb = Verb::kPatch;
    req.path = resources::kEvents.objectPath(event.meta.namespace_, event.meta.name);
    req.content_type = std::string(contentType(PatchType::kMerge));
    req.body = eventSeriesPatch(event.count, event.last_timestamp);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

 private:
  std::shared_ptr<Client> client_;
};

ObjectReference reference(const ObjectMeta& meta, std::string kind, std::string api_version) {
  ObjectReference ref;
  ref.kind = std::move(kind);
  ref.api_version = std::move(api_version);
  ref.namespace_ = meta.namespace_;
  ref.name = meta.name;
  ref.uid = meta.uid;
  return ref;
}

}  // namespace

EventSinkPtr makeClientEventSink(std::shared_ptr<Client> client) {
  return std::make_shared<ClientEventSink>(std::move(client));
}

ObjectReference referenceTo(const Pod& pod) { return reference(pod.meta, "Pod", "v1"); }
ObjectReference referenceTo(const PodGroup& group) {
  return reference(group.meta, "PodGroup", "scheduling.x-k8s.io/v1alpha1");
}
ObjectReference referenceTo(const WorkloadPodGroup& group) {
  return reference(group.meta, "PodGroup", "scheduling.k8s.io/v1alpha2");
}
ObjectReference referenceTo(const ParallelJob& job) {
  return reference(job.meta, "ParallelJob", "preferred.jp/v1alpha1");
}

struct EventRecorder::State : std::enable_shared_from_this<State> {
  State(EventSinkPtr s, asio::any_io_executor ex, EventRecorderOptions o, Clock c)
      : sink(std::move(s)),
        strand(asio::make_strand(ex)),
        options(std::move(o)),
        clock(std::move(c)),
        tokens(options.burst) {}

  struct Series {
    Event event;          // as created; count and last_timestamp as they are now
    absl::Time last;      // the latest occurrence
    bool created = false; // the create returned: patches may follow
    int32_t written = 0;  // the count the API server has
    std::list<std::string>::iterator age;  // position in `order`
  };
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };

  EventSinkPtr sink;
  asio::strand<asio::any_io_executor> strand;
  const EventRecorderOptions options;
  Clock clock;
  // --- on strand ---
  bool stopped = false;
  double tokens;
  absl::Time refilled = absl::InfinitePast();
  std::map<std::string, Series> series;             // by aggregation key
  std::list<std::string> order;                     // series keys, oldest first
  std::map<std::string, Bucket> objects;            // per involved object
  std::unique_ptr<asio::steady_timer> timer;
  std::atomic<uint64_t> created{0}, updates{0}, aggregated{0}, dropped{0};

  static std::string objectKey(const ObjectReference& r) {
    return strCat(r.kind, "/", r.namespace_, "/", r.name, "/", r.uid);
  }

  bool admit(const std::string& object, absl::Time now) {
    // The whole process.
    if (refilled == absl::InfinitePast()) refilled = now;
    tokens = std::min<double>(options.burst,
                              tokens + options.qps * absl::ToDoubleSeconds(now - refilled));
    refilled = now;
    // The object.
    auto [it, fresh] = objects.try_emplace(object);
    Bucket& b = it->second;
    if (fresh) {
      b.tokens = options.per_object_burst;
      b.refilled = now;
      if (objects.size() > options.max_tracked) objects.clear();  // bound memory; limits reset
    } else if (options.per_object_refill > absl::ZeroDuration()) {
      const double back = std::floor(absl::FDivDuration(now - b.refilled, options.per_object_refill));
      if (back >= 1) {
        b.tokens = std::min<double>(options.per_object_burst, b.tokens + back);
        b.refilled += options.per_object_refill * back;
      }
    }
    if (tokens < 1 || b.tokens < 1) return false;
    tokens -= 1;
    b.tokens -= 1;
    return true;
  }

  void record(ObjectReference regarding, std::string type, std::string reason,
              std::string message, absl::Time now) {
    if (stopped) return;
    const std::string object = objectKey(regarding);
    std::string key = strCat(object, "\n", type, "\n", reason, "\n", message);
    if (auto it = series.find(key); it != series.end()) {
      Series& s = it->second;
      if (now - s.last <= options.series_window) {
        ++s.event.count;
        s.event.last_timestamp = rfc3339(now);
        s.last = now;
        order.splice(order.end(), order, s.age);
        aggregated.fetch_add(1);
        aggregatedMetric().inc();
        return;
      }
      order.erase(s.age);
      series.erase(it);
    }
    if (!admit(object, now)) {
      dropped.fetch_add(1);
      droppedMetric().inc();
      MUSTER_LOG_INFO(4, "Event dropped by rate limit", "object", object, "reason", reason);
      return;
    }
    Event e = newEvent(std::move(regarding), std::move(type), std::move(reason),
                       std::move(message), options.component, options.instance, now);
    order.push_back(key);
    Series& s = series[key];
    s.event = e;
    s.last = now;
    s.age = std::prev(order.end());
    while (series.size() > options.max_tracked) {
      series.erase(order.front());
      order.pop_front();
    }
    asio::co_spawn(strand, [self = shared_from_this(), key, e = std::move(e)]() -> asio::awaitable<void> {
      absl::Status st = co_await self->sink->create(e);
      if (st.ok()) self->created.fetch_add(1);
      if (!st.ok()) {
        self->refused(st, e);
        self->forget(key, e.meta.name);
        co_return;
      }
      if (auto it = self->series.find(key); it != self->series.end() && it->second.event.meta.name == e.meta.name) {
        it->second.created = true;
        it->second.written = e.count;
      }
    }, dieOnException("event write"));
  }

  void refused(const absl::Status& st, const Event& e) {
    if (isNotFound(st)) return;
    metrics::apiWriteErrors("event").inc();
    MUSTER_LOG_WARNING("Event refused", "event", e.reason, "object",
                       strCat(e.involved_object.namespace_, "/", e.involved_object.name), "error",
                       st.ToString());
  }

  void forget(const std::string& key, const std::string& name) {
    auto it = series.find(key);
    if (it == series.end() || it->second.event.meta.name != name) return;
    order.erase(it->second.age);
    series.erase(it);
  }

  void flushNow() {
    const absl::Time now = clock();
    for (auto it = series.begin(); it != series.end();) {
      Series& s = it->second;
      if (s.created && s.event.count > s.written) {
        s.written = s.event.count;
        asio::co_spawn(strand, [self = shared_from_this(), key = it->first,
                                e = s.event]() -> asio::awaitable<void> {
          absl::Status st = co_await self->sink->updateSeries(e);
          if (st.ok()) self->updates.fetch_add(1);
          if (!st.ok()) {
            self->refused(st, e);
            if (isNotFound(st)) self->forget(key, e.meta.name);  // deleted: start afresh
          }
        }, dieOnException("event write"));
      }
      if (now - s.last > options.series_window && s.written == s.event.count) {
        order.erase(s.age);
        it = series.erase(it);
      } else {
        ++it;
      }
    }
  }

  asio::awaitable<void> flushLoop() {
    timer = std::make_unique<asio::steady_timer>(strand);
    while (!stopped) {
      timer->expires_after(absl::ToChronoMilliseconds(options.flush_interval));
      boost::system::error_code ec;
      co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopped) break;
      flushNow();
    }
  }
};

EventRecorder::EventRecorder(EventSinkPtr sink, asio::any_io_executor executor,
                             EventRecorderOptions options, Clock clock)
    : state_(std::make_shared<State>(std::move(sink), std::move(executor), std::move(options),
                                     std::move(clock))) {
  asio::co_spawn(state_->strand, [state = state_]() -> asio::awaitable<void> {
    co_await state->flushLoop();
  }, dieOnException("event flush"));
}

EventRecorder::~EventRecorder() { stop(); }

void EventRecorder::event(ObjectReference regarding, std::string_view type,
                          std::string_view reason, std::string message) {
  // The time of the call, not of the strand's turn: what happened when is the caller's.
  asio::post(state_->strand, [state = state_, regarding = std::move(regarding),
                              type = std::string(type), reason = std::string(reason),
                              message = std::move(message), now = state_->clock()]() mutable {
    state->record(std::move(regarding), std::move(type), std::move(reason), std::move(message),
                  now);
  });
}

void EventRecorder::flush() {
  asio::post(state_->strand, [state = state_] {
    if (!state->stopped) state->flushNow();
  });
}

void EventRecorder::stop() {
  asio::post(state_->strand, [state = state_] {
    if (state->stopped) return;
    state->flushNow();
    state->stopped = true;
    if (state->timer) state->timer->cancel();
  });
}

EventRecorder::Stats EventRecorder::stats() const {
  return Stats{state_->created.load(), state_->updates.load(), state_->aggregated.load(),
               state_->dropped.load()};
}

void EventRecorder::settle(std::function<void()> done) {
  asio::post(state_->strand, std::move(done));
}

}  // namespace muster::proto
