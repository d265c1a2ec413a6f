// The process-wide Event recorder against a fake sink (the seam below the API client): series
// aggregation, rate limits, best-effort failures. Time is a ManualClock; the io_context runs in
// the test's thread.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "proto/clock.h"
#include "proto/codec.h"
#include "proto/event_recorder.h"

namespace muster::proto {
namespace {

struct FakeSink final : EventSink {
  std::vector<Event> created;
  std::vector<Event> updated;
  absl::Status create_result = absl::OkStatus();
  absl::Status update_result = absl::OkStatus();
  asio::awaitable<absl::Status> create(const Event& e) override {
    created.push_back(e);
    co_return create_result;
  }
  asio::awaitable<absl::Status> updateSeries(const Event& e) override {
    updated.push_back(e);
    co_return update_result;
  }
};

struct Fixture {
  Fixture(EventRecorderOptions o = defaults()) {
    o.flush_interval = absl::Hours(24);  // flushed by the test
    recorder = std::make_unique<EventRecorder>(sink, io.get_executor(), o, clock.clock());
  }
  static EventRecorderOptions defaults() {
    EventRecorderOptions o;
    o.component = "muster-scheduler";
    o.instance = "host-1";
    return o;
  }
  void drain() {
    while (io.poll() > 0) {
    }
  }
  ~Fixture() {
    recorder->stop();
    drain();
  }
  asio::io_context io;
  ManualClock clock;
  std::shared_ptr<FakeSink> sink = std::make_shared<FakeSink>();
  std::unique_ptr<EventRecorder> recorder;
};

Pod pod(const std::string& name) {
  Pod p;
  p.meta.namespace_ = "ml";
  p.meta.name = name;
  p.meta.uid = "uid-" + name;
  return p;
}

TEST_CASE("an Event repeated 512 times is one Event with count 512, written twice", "[events]") {
  Fixture f;
  for (int i = 0; i < 512; ++i) {
    f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "0/8 nodes are available");
    f.clock.advance(absl::Milliseconds(100));
  }
  f.drain();
  REQUIRE(f.sink->created.size() == 1);
  CHECK(f.sink->created[0].count == 1);
  CHECK(f.sink->created[0].involved_object.kind == "Pod");
  CHECK(f.sink->created[0].reporting_component == "muster-scheduler");
  CHECK(f.sink->updated.empty());
  f.recorder->flush();
  f.drain();
  REQUIRE(f.sink->updated.size() == 1);
  CHECK(f.sink->updated[0].meta.name == f.sink->created[0].meta.name);
  CHECK(f.sink->updated[0].count == 512);
  CHECK(f.sink->updated[0].last_timestamp == rfc3339(f.clock.now() - absl::Milliseconds(100)));
  // Nothing new: the next flush writes nothing.
  f.recorder->flush();
  f.drain();
  CHECK(f.sink->updated.size() == 1);
}

TEST_CASE("a changed message or reason is a new Event, not a repeat", "[events]") {
  Fixture f;
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "0/8 nodes are available");
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "0/9 nodes are available");
  f.recorder->event(pod("w0"), "Normal", "Scheduled", "assigned");
  f.recorder->event(pod("w1"), "Normal", "Scheduled", "assigned");
  f.drain();
  CHECK(f.sink->created.size() == 4);
}

TEST_CASE("a repeat after the series window starts a new Event", "[events]") {
  Fixture f;
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "why");
  f.clock.advance(absl::Minutes(7));
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "why");
  f.drain();
  REQUIRE(f.sink->created.size() == 2);
  CHECK(f.sink->created[0].meta.name != f.sink->created[1].meta.name);
}

TEST_CASE("an object gets at most its burst of Events until tokens come back", "[events]") {
  EventRecorderOptions o = Fixture::defaults();
  o.per_object_burst = 3;
  o.per_object_refill = absl::Minutes(5);
  Fixture f(o);
  for (int i = 0; i < 10; ++i)
    f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "message " + std::to_string(i));
  f.recorder->event(pod("w1"), "Warning", "FailedScheduling", "another pod is not limited");
  f.drain();
  CHECK(f.sink->created.size() == 4);
  CHECK(f.recorder->stats().dropped == 7);
  f.clock.advance(absl::Minutes(11));  // two tokens back
  for (int i = 0; i < 5; ++i)
    f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "later " + std::to_string(i));
  f.drain();
  CHECK(f.sink->created.size() == 6);
}

TEST_CASE("the whole process is limited to its burst, refilled at qps", "[events]") {
  EventRecorderOptions o = Fixture::defaults();
  o.burst = 5;
  o.qps = 2;
  Fixture f(o);
  for (int i = 0; i < 20; ++i) f.recorder->event(pod("p" + std::to_string(i)), "Normal", "Scheduled", "x");
  f.drain();
  CHECK(f.sink->created.size() == 5);
  f.clock.advance(absl::Seconds(2));  // four tokens
  for (int i = 20; i < 30; ++i) f.recorder->event(pod("p" + std::to_string(i)), "Normal", "Scheduled", "x");
  f.drain();
  CHECK(f.sink->created.size() == 9);
}

TEST_CASE("a refused create is dropped and its repeats start afresh", "[events]") {
  Fixture f;
  f.sink->create_result = absl::PermissionDeniedError("events is forbidden");
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "why");
  f.drain();
  f.sink->create_result = absl::OkStatus();
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "why");
  f.drain();
  CHECK(f.sink->created.size() == 2);
  CHECK(f.recorder->stats().created == 1);
}

TEST_CASE("stop writes what is pending and nothing after", "[events]") {
  Fixture f;
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "why");
  f.recorder->event(pod("w0"), "Warning", "FailedScheduling", "why");
  f.drain();
  f.recorder->stop();
  f.drain();
  REQUIRE(f.sink->updated.size() == 1);
  CHECK(f.sink->updated[0].count == 2);
  f.recorder->event(pod("w1"), "Normal", "Scheduled", "x");
  f.drain();
  CHECK(f.sink->created.size() == 1);
}

}  // namespace
}  // namespace muster::proto
