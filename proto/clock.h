#pragma once

// Time as the rest of Muster reads it: an injected clock, so that tests decide what "now" is and
// never sleep to wait for a backoff or a timeout. Production code takes realClock().

#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace muster::proto {

// Returns the current time. Cheap to copy; safe to call from any thread.
using Clock = std::function<absl::Time()>;

inline Clock realClock() {
  return [] { return absl::Now(); };
}

// A clock that moves only when told to, shared by the copies of clock() it hands out. For tests.
class ManualClock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1767225600))  // 2026-01-01
      : state_(std::make_shared<State>(start)) {}

  Clock clock() const {
    return [state = state_] {
      absl::MutexLock lock(&state->mu);
      return state->now;
    };
  }
  absl::Time now() const { return clock()(); }
  void advance(absl::Duration d) {
    absl::MutexLock lock(&state_->mu);
    state_->now += d;
  }
  void set(absl::Time t) {
    absl::MutexLock lock(&state_->mu);
    state_->now = t;
  }

 private:
  struct State {
    explicit State(absl::Time t) : now(t) {}
    absl::Mutex mu;
    absl::Time now ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

}  // namespace muster::proto
