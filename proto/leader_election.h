#pragma once

// Leader election through a coordination.k8s.io/v1 Lease, with client-go's rules: a lease is
// free when its holder is empty or its record has not changed for leaseDuration as observed on
// this process's own clock (no trust in other machines' clocks); updates use the Lease's
// resourceVersion, so two candidates can never both win; a leader that cannot renew within
// renewDeadline stops leading.
//
// Bounded renewals: each request carries a timeout of what is left until the renew deadline,
// and a watchdog calls on_stopped_leading at `last successful renewal sent + renewDeadline` even
// while a request is still hanging (a stalled or blackholed API server), so the leader stops
// acting before leaseDuration can let another candidate take over. Give the elector a Client of
// its own (no retries, no rate limit, its own connections; makeLeaderElectionClientOptions) so
// renewals never queue behind the process's other requests.
//
// Metric: leader_election_master_status{name="<lease name>"} is 1 while leading, else 0 (the
// name client-go gives it).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "proto/asio.h"
#include "proto/client.h"
#include "proto/objects.h"

namespace muster::proto {

struct LeaderElectionOptions {
  std::string lease_namespace = "kube-system";
  std::string lease_name;
  std::string identity;
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_deadline{10};
  std::chrono::seconds retry_period{2};
};

// The ClientOptions for the elector's own Client.
ClientOptions leaderElectionClientOptions(const LeaderElectionOptions& options,
                                          std::string user_agent);

class LeaderElector {
 public:
  LeaderElector(std::shared_ptr<Client> client, LeaderElectionOptions options);

  // Campaigns until it leads, calls `on_started_leading`, then renews every retry period. Returns
  // (after calling `on_stopped_leading`) when leadership is lost or stop() is called; on stop()
  // while leading it first releases the lease so a standby can take over at once. When the lease
  // is lost, on_stopped_leading runs at the renew deadline at the latest, possibly before run()
  // returns. Run it on a strand (or a single-threaded executor).
  asio::awaitable<void> run(std::function<void()> on_started_leading,
                            std::function<void()> on_stopped_leading);
  void stop() { stopping_ = true; }
  bool isLeader() const { return leading_.load(); }

 private:
  // One try: OK when this candidate holds the lease afterwards. Each request is bounded by
  // `timeout`.
  asio::awaitable<absl::Status> tryAcquireOrRenew(std::chrono::milliseconds timeout);
  asio::awaitable<void> release();
  // Stops leading once (the watchdog or the renew loop, whichever is first).
  void lose(const std::string& why, const std::function<void()>& on_stopped_leading);

  std::shared_ptr<Client> client_;
  LeaderElectionOptions options_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> stopping_{false};
  bool lost_ = false;  // on the executor
  // The last record seen and when (our clock) it was first seen.
  std::string observed_holder_, observed_renew_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::shared_ptr<const Lease> current_;
};

// "2026-11-29T21:00:00.123456Z", the MicroTime format.
std::string microTimeNow();

}  // namespace muster::proto
