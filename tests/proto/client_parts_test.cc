// The client's rate limiter and retry policy on their own (proto/client/internal.h), with time
// passed in. The whole client is tested against a local TLS server in client_test.cc and against
// the real kube-apiserver in tests/e2e.
#include <catch2/catch.hpp>

#include "proto/client/internal.h"

namespace muster::proto::client_internal {
namespace {

using std::chrono::milliseconds;

TEST_CASE("the token bucket lets a burst through, then spaces requests at qps", "[client]") {
  const Clock::time_point t0{};
  TokenBucket bucket(10, 3, t0);
  CHECK(bucket.reserve(t0) == Clock::duration::zero());
  CHECK(bucket.reserve(t0) == Clock::duration::zero());
  CHECK(bucket.reserve(t0) == Clock::duration::zero());
  // The fourth waits for one token (100 ms), the fifth for two: reservations queue up.
  CHECK(std::chrono::duration_cast<milliseconds>(bucket.reserve(t0)).count() == 100);
  CHECK(std::chrono::duration_cast<milliseconds>(bucket.reserve(t0)).count() == 200);
  // A second later the bucket is full again, never more than its burst.
  const Clock::time_point t1 = t0 + std::chrono::seconds(10);
  for (int i = 0; i < 3; ++i) CHECK(bucket.reserve(t1) == Clock::duration::zero());
  CHECK(bucket.reserve(t1) > Clock::duration::zero());
}

TEST_CASE("qps 0 means no client-side limit", "[client]") {
  TokenBucket bucket(0, 0, Clock::time_point{});
  CHECK_FALSE(bucket.limited());
  for (int i = 0; i < 1000; ++i) CHECK(bucket.reserve(Clock::time_point{}) == Clock::duration::zero());
}

TEST_CASE("only answers that mean the server did not act are retried for a POST", "[client]") {
  ClientOptions o;
  o.max_retries = 5;
  RetryPolicy p(o);
  CHECK(p.retryStatus(Verb::kGet, 500, false, 0));
  CHECK(p.retryStatus(Verb::kPost, 503, false, 0));
  CHECK(p.retryStatus(Verb::kPost, 429, false, 0));
  CHECK_FALSE(p.retryStatus(Verb::kPost, 500, false, 0));
  CHECK(p.retryStatus(Verb::kPost, 500, true, 0));  // the server asked, with Retry-After
  CHECK_FALSE(p.retryStatus(Verb::kGet, 501, false, 0));
  CHECK_FALSE(p.retryStatus(Verb::kGet, 404, false, 0));
  CHECK_FALSE(p.retryStatus(Verb::kGet, 500, false, 5));  // out of tries
  CHECK(p.retryTransport(Verb::kPost, true, false, 0));   // never written
  CHECK_FALSE(p.retryTransport(Verb::kPost, true, true, 0));
  CHECK_FALSE(p.retryTransport(Verb::kGet, false, false, 0));  // TLS verification failed
  CHECK(RetryPolicy::staleConnection(Verb::kGet, true, false, true));
  CHECK_FALSE(RetryPolicy::staleConnection(Verb::kGet, false, false, true));
  CHECK_FALSE(RetryPolicy::staleConnection(Verb::kGet, true, true, true));
}

TEST_CASE("backoff doubles from the initial delay, is capped, and is jittered down", "[client]") {
  ClientOptions o;
  o.initial_backoff = milliseconds(200);
  o.max_backoff = milliseconds(10000);
  RetryPolicy p(o);
  for (int attempt = 0; attempt < 12; ++attempt) {
    const double full = std::min(200.0 * (1 << attempt), 10000.0);
    const auto d = std::chrono::duration<double, std::milli>(p.backoff(attempt)).count();
    CHECK(d >= full * 0.5 - 1e-6);
    CHECK(d <= full + 1e-6);
  }
}

}  // namespace
}  // namespace muster::proto::client_internal
