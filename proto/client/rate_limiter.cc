// The client-side rate limit: a token bucket with reservations.
#include <algorithm>

#include "proto/client/internal.h"

namespace muster::proto::client_internal {

TokenBucket::TokenBucket(double qps, int burst, Clock::time_point now)
    : qps_(qps), burst_(burst), tokens_(0), refilled_(now) {
  tokens_ = qps_ > 0 ? size() : 0;
}

double TokenBucket::size() const { return burst_ > 0 ? burst_ : std::max(1.0, qps_); }

Clock::duration TokenBucket::reserve(Clock::time_point now) {
  if (qps_ <= 0) return Clock::duration::zero();
  const double elapsed = std::chrono::duration<double>(now - refilled_).count();
  tokens_ = std::min(size(), tokens_ + elapsed * qps_);
  refilled_ = now;
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

}  // namespace muster::proto::client_internal
