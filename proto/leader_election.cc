#include "proto/leader_election.h"

#include <sys/time.h>

#include <ctime>

#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"

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

namespace {

metrics::Gauge& leaderGauge(const std::string& lease_name) {
  static metrics::Family<metrics::Gauge>& family = metrics::defaultRegistry().gauge(
      "leader_election_master_status",
      "1 while this process holds the leader lease, else 0.", {"name"});
  return family.with({lease_name});
}

std::chrono::milliseconds asMillis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

}  // namespace

ClientOptions leaderElectionClientOptions(const LeaderElectionOptions& options,
                                          std::string user_agent) {
  ClientOptions o;
  o.qps = 0;          // never waits behind the process's other requests
  o.max_retries = 0;  // the renew loop is the retry loop, within the renew deadline
  o.max_connections = 2;
  o.request_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.renew_deadline);
  o.user_agent = std::move(user_agent);
  return o;
}

LeaderElector::LeaderElector(std::shared_ptr<Client> client, LeaderElectionOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  (void)leaderGauge(options_.lease_name);  // exported (as 0) before the first campaign
}

asio::awaitable<absl::Status> LeaderElector::tryAcquireOrRenew(std::chrono::milliseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  Request get;
  get.path = resources::kLeases.objectPath(options_.lease_namespace, options_.lease_name);
  get.timeout = timeout;
  auto got = co_await client_->call(get);
  Lease lease;
  if (!got.ok()) {
    if (!isNotFound(got.status())) co_return got.status();
    lease.meta.name = options_.lease_name;
    lease.meta.namespace_ = options_.lease_namespace;
    lease.spec.holder_identity = options_.identity;
    lease.spec.lease_duration_seconds = static_cast<int32_t>(options_.lease_duration.count());
    lease.spec.acquire_time = lease.spec.renew_time = microTimeNow();
    lease.spec.lease_transitions = 0;
    Request create;
    create.verb = Verb::kPost;
    create.path = resources::kLeases.collectionPath(options_.lease_namespace);
    create.body = encode(lease);
    create.timeout = timeout;
    auto created = co_await client_->call(create);
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
  Request put;
  put.verb = Verb::kPut;
  put.path = resources::kLeases.objectPath(options_.lease_namespace, options_.lease_name);
  put.body = encode(lease);
  put.timeout = asMillis(timeout - (std::chrono::steady_clock::now() - now));
  if (put.timeout->count() <= 0) co_return absl::DeadlineExceededError("renew deadline passed");
  auto updated = co_await client_->call(put);
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

void LeaderElector::lose(const std::string& why, const std::function<void()>& on_stopped_leading) {
  if (lost_) return;
  lost_ = true;
  leading_ = false;
  leaderGauge(options_.lease_name).set(0);
  MUSTER_LOG_ERROR("Leader lease lost", "lease",
                   options_.lease_namespace + "/" + options_.lease_name, "identity",
                   options_.identity, "reason", why);
  on_stopped_leading();
}

asio::awaitable<void> LeaderElector::run(std::function<void()> on_started_leading,
                                         std::function<void()> on_stopped_leading) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  auto sleep = [&](std::chrono::steady_clock::duration d) -> asio::awaitable<void> {
    timer.expires_after(d);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  };
  const auto renew_deadline = std::chrono::duration_cast<std::chrono::milliseconds>(options_.renew_deadline);
  MUSTER_LOG_INFO(1, "Attempting to acquire the leader lease", "lease",
                  options_.lease_namespace + "/" + options_.lease_name, "identity",
                  options_.identity);
  auto last_renew = std::chrono::steady_clock::now();
  while (!stopping_) {
    last_renew = std::chrono::steady_clock::now();
    absl::Status s = co_await tryAcquireOrRenew(renew_deadline);
    if (s.ok()) break;
    MUSTER_LOG_INFO(4, "Lease not acquired", "reason", s.ToString());
    co_await sleep(options_.retry_period);
  }
  if (stopping_) co_return;
  leading_ = true;
  leaderGauge(options_.lease_name).set(1);
  MUSTER_LOG_INFO(1, "Acquired the leader lease", "lease",
                  options_.lease_namespace + "/" + options_.lease_name, "identity",
                  options_.identity);
  on_started_leading();
  // The watchdog: fires at the renew deadline unless a renewal moved it; shares the lifetime of
  // this frame through `deadline` (cancelled, then awaited out, before run() returns).
  auto deadline = std::make_shared<asio::steady_timer>(executor);
  auto watchdog_done = std::make_shared<asio::steady_timer>(executor, asio::steady_timer::time_point::max());
  auto watchdog_finished = std::make_shared<bool>(false);
  deadline->expires_at(last_renew + options_.renew_deadline);
  asio::co_spawn(executor, [this, deadline, watchdog_done, watchdog_finished,
                            on_stopped_leading]() -> asio::awaitable<void> {
    for (;;) {
      boost::system::error_code ec;
      co_await deadline->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopping_ || lost_) break;
      if (!ec || deadline->expiry() <= std::chrono::steady_clock::now()) {
        lose("not renewed within the renew deadline", on_stopped_leading);
        break;
      }
      // Cancelled by a renewal that moved the deadline: wait for the new one.
    }
    *watchdog_finished = true;
    watchdog_done->cancel();
  }, dieOnException("leader election watchdog"));

  while (!stopping_ && !lost_) {
    co_await sleep(options_.retry_period);
    if (stopping_ || lost_) break;
    const auto started = std::chrono::steady_clock::now();
    const auto left = asMillis(last_renew + options_.renew_deadline - started);
    absl::Status s = left.count() > 0 ? absl::OkStatus()
                                      : absl::DeadlineExceededError("renew deadline passed");
    if (s.ok()) s = co_await tryAcquireOrRenew(left);
    if (lost_) break;
    if (s.ok()) {
      last_renew = started;  // what others observe is no older than when we sent it
      deadline->expires_at(last_renew + options_.renew_deadline);  // cancels the wait
      continue;
    }
    MUSTER_LOG_WARNING("Lease renewal failed", "error", s.ToString());
    if (isConflict(s) || absl::IsFailedPrecondition(s) ||
        std::chrono::steady_clock::now() - last_renew >= options_.renew_deadline) {
      lose(s.ToString(), on_stopped_leading);
      break;
    }
  }
  const bool released = !lost_;
  if (released) {
    lost_ = true;  // the watchdog stands down
    leading_ = false;
    leaderGauge(options_.lease_name).set(0);
  }
  deadline->cancel();
  if (!*watchdog_finished) {
    boost::system::error_code ec;
    co_await watchdog_done->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (released) {
    co_await release();
    on_stopped_leading();
  }
}

}  // namespace muster::proto
