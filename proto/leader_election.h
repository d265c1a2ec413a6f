#pragma once

// Leader election through a coordination.k8s.io/v1 Lease, with client-go's rules: a lease is
// free when its holder is empty or its record has not changed for leaseDuration as observed on
// this process's own clock (no trust in other machines' clocks); updates use the Lease's
// resourceVersion, so two candidates can never both win; a leader that cannot renew within
// renewDeadline stops leading.

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

class LeaderElector {
 public:
  LeaderElector(std::shared_ptr<Client> client, LeaderElectionOptions options);

  // Campaigns until it leads, calls `on_started_leading`, then renews every retry period. Returns
  // (after calling `on_stopped_leading`) when leadership is lost or stop() is called; on stop()
  // while leading it first releases the lease so a standby can take over at once.
  asio::awaitable<void> run(std::function<void()> on_started_leading,
                            std::function<void()> on_stopped_leading);
  void stop() { stopping_ = true; }
  bool isLeader() const { return leading_.load(); }

 private:
  // One try: OK when this candidate holds the lease afterwards.
  asio::awaitable<absl::Status> tryAcquireOrRenew();
  asio::awaitable<void> release();

  std::shared_ptr<Client> client_;
  LeaderElectionOptions options_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> stopping_{false};
  // The last record seen and when (our clock) it was first seen.
  std::string observed_holder_, observed_renew_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::shared_ptr<const Lease> current_;
};

// "2026-11-29T21:00:00.123456Z", the MicroTime format.
std::string microTimeNow();

}  // namespace muster::proto
