#pragma once

// The Binder applies a GangPlacement to the cluster, and takes back what a gang that cannot be
// completed holds. It is the scheduler's only path to the Binding and Eviction subresources.
//
// Contract:
// - bind(attempt, placement): one Binding per assignment, all sent at once (concurrently, over
//   the client's connection pool; a pod asking for a fraction of a GPU first gets the GPU's index
//   in muster.dev/gpu-index, and a failed write fails its bind); `done` runs on the strand given
//   at construction once every
//   member has answered, with the members that bound and the ones that failed (and why). The
//   bound members of a gang get one `Scheduled` Event together once all have answered, on
//   `regarding` (the gang's PodGroup) or else the first bound member in `placement`'s order,
//   naming how many pods, the domain and the nodes; each pod's own record is the
//   PodScheduled=True condition the bind sets. With `per_pod_events`, and always for a single
//   pod, each bound pod gets its own Event, as kube-scheduler writes. Members that bound stay
//   bound even when others failed: the
//   gang's next placement must join them (the queue knows them as bound members), and when it
//   cannot, or when the gang's binds have failed 3 attempts in a row, the scheduler calls
//   rollback(). A gang is therefore never left partly bound for longer than a few retries -
//   also across a crash, because the queue learns bound members from the API server when it
//   starts.
// - rollback(attempt, why, lookup): every bound member of the gang that still exists and is not
//   being deleted is taken back: a member with a controller (which will recreate it) first gets
//   the pod condition muster.dev/GangRollback=True (so the job engine does not count a failure),
//   then is evicted through the Eviction API (PodDisruptionBudgets apply); no marker, no
//   eviction. A member with no controller is not deleted: it is reported with a GangPartlyBound
//   Event for its owner to act on. Evicted members get a GangEvicted Event. Calling it again for
//   the same gang is harmless (already deleting pods are skipped; a second eviction is a no-op).
// - stop(): no request starts after it returns; answers to those in flight are still delivered.
//
// Threading: bind() and rollback() are called on the scheduler's strand; `done` runs there.

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/asio.h"
#include "proto/clock.h"
#include "proto/event_recorder.h"
#include "proto/objects.h"
#include "scheduler/api.h"
#include "scheduler/placement.h"
#include "scheduler/queue.h"

namespace muster::scheduler {

class Binder {
 public:
  struct Failure {
    std::string pod_key;
    absl::Status status;
  };
  struct Result {
    std::vector<std::string> bound;  // pod keys
    std::vector<Failure> failed;
  };
  using Done = std::function<void(Result)>;
  // The informer's current view of a pod (nullptr when it is gone).
  using PodLookup =
      std::function<std::shared_ptr<const proto::Pod>(std::string_view ns, std::string_view name)>;

  // At most `in_flight` Bindings are outstanding at once; the others wait their turn in order.
  Binder(SchedulerApiPtr api, proto::asio::strand<proto::asio::any_io_executor> strand,
         proto::EventRecorder& events, proto::Clock clock, bool per_pod_events = false,
         int in_flight = 256);

  void bind(const GangAttempt& attempt, const GangPlacement& placement, Done done,
            std::optional<proto::ObjectReference> regarding = std::nullopt);
  void rollback(const GangAttempt& attempt, const std::string& why, const PodLookup& lookup);
  void stop() { stopping_ = true; }

 private:
  struct Batch;
  void answered(const std::shared_ptr<Batch>& batch, size_t index, absl::Status status);
  // Sends queued binds while fewer than in_flight_ are outstanding.
  void pump();
  // One member's bind (and a fraction's GPU index before it).
  proto::asio::awaitable<void> send(std::shared_ptr<Batch> batch, size_t index);

  SchedulerApiPtr api_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  proto::EventRecorder& events_;
  proto::Clock clock_;
  bool per_pod_events_;
  std::atomic<bool> stopping_{false};
  // Members waiting to be sent, and how many binds are outstanding. Under a mutex, not on
  // strand_: a bind answered frees its turn at once, however busy the strand is.
  const size_t in_flight_limit_;
  absl::Mutex mu_;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::pair<std::shared_ptr<Batch>, size_t>> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace muster::scheduler
