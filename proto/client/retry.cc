// Which failed requests are tried again, and how long to wait in between.
#include <algorithm>
#include <cmath>

#include "proto/client/internal.h"

namespace muster::proto::client_internal {

Clock::duration RetryPolicy::backoff(int attempt) {
  using namespace std::chrono;
  const double base = static_cast<double>(options_.initial_backoff.count()) *
                      std::pow(2.0, std::min(attempt, 30));
  const double capped = std::min(base, static_cast<double>(options_.max_backoff.count()));
  const double jittered = capped * absl::Uniform(rng_, 0.5, 1.0);
  return duration_cast<Clock::duration>(duration<double, std::milli>(jittered));
}

bool RetryPolicy::retryableStatus(int status) {
  return status == 429 || (status >= 500 && status != 501 && status <= 599);
}

bool RetryPolicy::retryStatus(Verb verb, int status, bool has_retry_after, int attempt) const {
  const bool may = retryableStatus(status) &&
                   (idempotent(verb) || status == 429 || status == 503 || has_retry_after);
  return may && attempt < options_.max_retries;
}

bool RetryPolicy::retryTransport(Verb verb, bool retryable, bool written, int attempt) const {
  return retryable && (idempotent(verb) || !written) && attempt < options_.max_retries;
}

bool RetryPolicy::staleConnection(Verb verb, bool reused, bool got_response_bytes, bool written) {
  return reused && !got_response_bytes && (idempotent(verb) || !written);
}

}  // namespace muster::proto::client_internal
