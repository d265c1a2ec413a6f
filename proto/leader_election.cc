#include "proto/leader_election.h"

#include <sys/time.h>

#include <ctime>

#include "proto/codec.h"
#include "proto/log.h"

namespace muster::proto {

std::string microTimeNow() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  std::tm tm{};
  gmtime_r(&tv.tv_sec, &tm);
  char buf[128];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long>(tv.tv_usec));
  return buf;
}

LeaderElector::LeaderElector(std::shared_ptr<Client> client, LeaderElectionOptions options)
    : client_(std::move(client)), options_(std::move(options)) {}

asio::awaitable<absl::Status> LeaderElector::tryAcquireOrRenew() {
  const auto now = std::chrono::steady_clock::now();
  auto got = co_await client_->get(resources::kLeases, options_.lease_namespace,
                                   options_.lease_name);
  Lease lease;
  if (!got.ok()) {
    if (!isNotFound(got.status())) co_return got.status();
    lease.meta.name = options_.lease_name;
    lease.meta.namespace_ = options_.lease_namespace;
    lease.spec.holder_identity = options_.identity;
    lease.spec.lease_duration_seconds = static_cast<int32_t>(options_.lease_duration.count());
    lease.spec.acquire_time = lease.spec.renew_time = microTimeNow();
    lease.spec.lease_transitions = 0;
    auto created = co_await client_->create(resources::kLeases, options_.lease_namespace,
                                            encode(lease));
    if (!created.ok()) co_return created.status();
    observed_holder_ = options_.identity;
    observed_at_ = now;
    co_return absl::OkStatus();
  }
  if (absl::Status s = decodeJson(*got, &lease); !s.ok()) co_return s;
  const std::string holder = lease.spec.holder_identity;
  if (holder != observed_holder_ || lease.spec.renew_time != observed_renew_) {
    observed_holder_ = holder;
    observed_renew_ = lease.spec.renew_time;
    observed_at_ = now;
  }
  const auto duration = lease.spec.lease_duration_seconds
                            ? std::chrono::seconds(*lease.spec.lease_duration_seconds)
                            : options_.lease_duration;
  const bool held_by_other = !holder.empty() && holder != options_.identity;
  if (held_by_other && observed_at_ + duration > now) {
    co_return absl::FailedPreconditionError("lease held by " + holder);
  }
  if (holder != options_.identity) {
    lease.spec.acquire_time = microTimeNow();
    lease.spec.lease_transitions = lease.spec.lease_transitions.value_or(0) + 1;
  }
  lease.spec.holder_identity = options_.identity;
  lease.spec.lease_duration_seconds = static_cast<int32_t>(options_.lease_duration.count());
  lease.spec.renew_time = microTimeNow();
  // resourceVersion in the body makes this a compare-and-swap.
  auto updated = co_await client_->replace(resources::kLeases, options_.lease_namespace,
                                           options_.lease_name, encode(lease));
  if (!updated.ok()) co_return updated.status();
  observed_holder_ = options_.identity;
  observed_renew_ = lease.spec.renew_time;
  observed_at_ = now;
  co_return absl::OkStatus();
}

asio::awaitable<void> LeaderElector::release() {
  auto got = co_await client_->get(resources::kLeases, options_.lease_namespace,
                                   options_.lease_name);
  if (!got.ok()) co_return;
  Lease lease;
  if (!decodeJson(*got, &lease).ok() || lease.spec.holder_identity != options_.identity) co_return;
  lease.spec.holder_identity.clear();
  lease.spec.lease_duration_seconds = 1;
  lease.spec.renew_time = microTimeNow();
  auto updated = co_await client_->replace(resources::kLeases, options_.lease_namespace,
                                           options_.lease_name, encode(lease));
  if (updated.ok()) MUSTER_LOG_INFO(1, "Released the lease", "lease", options_.lease_name);
}

asio::awaitable<void> LeaderElector::run(std::function<void()> on_started_leading,
                                         std::function<void()> on_stopped_leading) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto sleep = [&](std::chrono::steady_clock::duration d) -> asio::awaitable<void> {
    timer.expires_after(d);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  };
  MUSTER_LOG_INFO(1, "Attempting to acquire the leader lease", "lease",
                  options_.lease_namespace + "/" + options_.lease_name, "identity",
                  options_.identity);
  while (!stopping_) {
    absl::Status s = co_await tryAcquireOrRenew();
    if (s.ok()) break;
    MUSTER_LOG_INFO(4, "Lease not acquired", "reason", s.ToString());
    co_await sleep(options_.retry_period);
  }
  if (stopping_) co_return;
  leading_ = true;
  MUSTER_LOG_INFO(1, "Acquired the leader lease", "lease",
                  options_.lease_namespace + "/" + options_.lease_name, "identity",
                  options_.identity);
  on_started_leading();
  auto last_renew = std::chrono::steady_clock::now();
  while (!stopping_) {
    co_await sleep(options_.retry_period);
    if (stopping_) break;
    absl::Status s = co_await tryAcquireOrRenew();
    auto now = std::chrono::steady_clock::now();
    if (s.ok()) {
      last_renew = now;
      continue;
    }
    MUSTER_LOG_WARNING("Lease renewal failed", "error", s.ToString());
    if (isConflict(s) || absl::IsFailedPrecondition(s) || now - last_renew >= options_.renew_deadline) {
      leading_ = false;
      MUSTER_LOG_ERROR("Leader lease lost", "lease",
                       options_.lease_namespace + "/" + options_.lease_name, "identity",
                       options_.identity);
      on_stopped_leading();
      co_return;
    }
  }
  leading_ = false;
  co_await release();
  on_stopped_leading();
}

}  // namespace muster::proto
