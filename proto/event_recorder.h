#pragma once

// Events for people (what `kubectl describe` shows), for every component of the process: the
// scheduler, the job engine, the Slurm controller. One recorder per process.
//
// - Aggregated: an Event that repeats (same object, type, reason and message) within
//   `series_window` of its last occurrence is not written again; its count and lastTimestamp
//   grow in memory and are written as one patch every `flush_interval` (the events.k8s.io/v1
//   series, kept in core/v1's count/lastTimestamp, which every kubectl shows as "x5 over 2m").
//   A repeat after the window starts a new Event. Unlike client-go, the message is part of the
//   key: a pod's scheduling message changes as the cluster does, and the newest must be visible.
// - Rate limited: a token bucket for the whole process (`qps`, `burst`) and one per involved
//   object (`per_object_burst`, one token back every `per_object_refill`: client-go's spam
//   filter), so a gang of 512 pods in a loop cannot flood the API server. Repeats that only grow
//   a series cost no token. Dropped Events are counted in muster_events_dropped_total.
// - Best effort: a refused write is logged and counted (muster_api_write_errors_total{kind=
//   "event"}), never retried; 404 (namespace gone) is ignored.
//
// Threading: every method is thread-safe; the state lives on the recorder's strand and writes
// run there. Time comes from the injected clock; the flush loop's interval is real time.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "proto/clock.h"
#include "proto/objects.h"

namespace muster::proto {

// Where Events go: the API server, or a fake in tests.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual asio::awaitable<absl::Status> create(const Event& event) = 0;
  // Brings an Event created earlier up to date (count and lastTimestamp).
  virtual asio::awaitable<absl::Status> updateSeries(const Event& event) = 0;
};
using EventSinkPtr = std::shared_ptr<EventSink>;

EventSinkPtr makeClientEventSink(std::shared_ptr<Client> client);

struct EventRecorderOptions {
  std::string component = "muster";  // source.component and reportingComponent
  std::string instance;              // reportingInstance: the process's identity
  double qps = 20;
  int burst = 100;
  int per_object_burst = 25;
  absl::Duration per_object_refill = absl::Minutes(5);
  absl::Duration series_window = absl::Minutes(6);
  absl::Duration flush_interval = absl::Seconds(30);
  size_t max_tracked = 20000;  // series and per-object buckets kept; the oldest go first
};

// core/v1 ObjectReference for an object Muster reports about.
ObjectReference referenceTo(const Pod& pod);
ObjectReference referenceTo(const PodGroup& group);
ObjectReference referenceTo(const WorkloadPodGroup& group);  // scheduling.k8s.io/v1alpha2
ObjectReference referenceTo(const ParallelJob& job);

class EventRecorder {
 public:
  EventRecorder(EventSinkPtr sink, asio::any_io_executor executor, EventRecorderOptions options,
                Clock clock = realClock());
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `type` is "Normal" or "Warning"; `reason` a CamelCase word (Scheduled, FailedScheduling).
  void event(ObjectReference regarding, std::string_view type, std::string_view reason,
             std::string message);
  template <class T>
  void event(const T& object, std::string_view type, std::string_view reason,
             std::string message) {
    event(referenceTo(object), type, reason, std::move(message));
  }

  // Writes every series that grew since it was last written, and forgets series older than the
  // window. Runs every flush_interval by itself; tests and shutdown call it directly.
  void flush();
  // Final flush; no Event is written after this returns. Idempotent.
  void stop();

  struct Stats {
    uint64_t created = 0;         // Events created
    uint64_t series_updates = 0;  // count/lastTimestamp patches
    uint64_t aggregated = 0;      // repeats folded into a series
    uint64_t dropped = 0;         // refused by a rate limit
  };
  // On the recorder's strand: call from a test after the events were posted (see settle()).
  Stats stats() const;
  // Runs `done` on the recorder's strand after everything posted before it (tests).
  void settle(std::function<void()> done);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace muster::proto
