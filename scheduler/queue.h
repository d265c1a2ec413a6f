#pragma once

// SchedulingQueue: the gangs waiting to be placed, in the order they are tried, with
// kube-scheduler's three sets and a reservation rule against starvation.
//
// - Order: highest priority (the maximum spec.priority of the gang's pending members) first, then
//   the oldest (earliest creationTimestamp of a member; the time the queue first saw the gang when
//   no timestamp parses), then the key.
// - active: ready to try. pop() hands out the first and marks it in flight.
// - unschedulable: tried and did not fit. A cluster event (onClusterEvent) moves every such gang to
//   active, or to backoff while its backoff runs; a gang left there longer than 5 minutes is moved
//   anyway (kube-scheduler's podMaxInUnschedulablePodsDuration). Backoff per gang: initial ×
//   2^(failures-1), capped at max. Nothing is retried in a busy loop: nextWakeup() says when the
//   caller should next call pop().
// - backoff: waiting for its backoff to expire; then active.
// - waiting: fewer members than minMember exist, or the PodGroup is missing: tried again when a
//   member is added or the PodGroup appears, with no backoff.
// A gang that does not fit goes to unschedulable, so it never blocks the gangs behind it.
//
// Reservation: a gang that is still unschedulable after queue.reservationAfterSeconds (since the
// queue first saw it) reserves a set of nodes (planReservation: the domain that could hold it
// once emptied, closest to fitting now). While the reservation holds, every other gang whose
// priority is lower than or equal to the reserving gang's gets those nodes in
// GangRequest::blocked_nodes and cannot place anything there; higher-priority gangs are not
// blocked. As pods on the reserved nodes finish, the room accumulates for the reserving gang only.
// The reservation ends when the gang is placed or removed; it is planned again when one of its
// nodes disappears.
//
// Not thread-safe: called from the scheduler's strand. Time comes only from the injected clock.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/clock.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/filter.h"
#include "scheduler/gang.h"
#include "scheduler/placement.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

using Clock = proto::Clock;

// What changed in the cluster, for onClusterEvent.
enum class ClusterEvent {
  kNodeAdded,
  kNodeUpdated,     // allocatable, labels, taints, cordon, readiness
  kPodDeleted,      // a pod bound to a node went away
  kPodTerminated,   // a pod on a node Succeeded or Failed
};

// One try of one gang, as pop() hands it out.
struct GangAttempt {
  GangKey key;
  GangSpec spec;
  std::vector<PodInfoPtr> members;  // pending members
  std::vector<std::pair<std::string, std::string>> bound;  // pod key → node
  int32_t priority = 0;
  int failures = 0;        // earlier failed tries
  // The first attempt after the gang has waited longer than its schedule timeout (once per gang;
  // an unschedulable gang is tried again when its timeout passes, so the Event is on time).
  bool timed_out = false;
  // Still short of members queue.waitingEventAfterSeconds after it was first seen, and not told
  // yet: the caller says so in a Warning Event (once per gang).
  bool report_waiting = false;
  // First seen at least queue.waitingConditionAfterSeconds ago: a gang still short of members
  // now tells its pods so in their PodScheduled condition. Before that its members are most
  // likely still being created, and a gang that completes in time costs no status write.
  bool report_waiting_condition = false;
};

// A pending pod that must not be placed yet: it is being deleted (deletionTimestamp) or carries
// spec.schedulingGates. It is not a gang member until that changes.
bool isHeldBack(const proto::Pod& pod);

// The verdict for a gang that cannot be tried yet (PodGroup missing, too few members), or nullopt.
std::optional<Unschedulable> precheck(const GangAttempt& attempt);

class SchedulingQueue {
 public:
  // `claim_check(pod)`: why its claims keep a pod out (filter.h); `volumes_of(pod)`: what its
  // claims ask of a node (none without).
  using VolumesOf = std::function<std::vector<VolumeConstraint>(const proto::Pod&)>;
  // `spread_defaults(pod)`: the topology spread constraints a pod without its own is placed with
  // (scheduler/spread.h defaultSpreadConstraints; none without).
  using SpreadDefaults = std::function<std::vector<proto::TopologySpreadConstraint>(const proto::Pod&)>;
  SchedulingQueue(const SchedulerConfig& config, Clock clock, PodGroupLookup pod_groups,
                  ClaimCheck claim_check = {}, VolumesOf volumes_of = {},
                  SpreadDefaults spread_defaults = {});

  // A pod for this scheduler was added or changed. Pending pods join their gang; bound pods are
  // remembered as bound members of theirs; terminal pods leave, and so do pending pods that are
  // being deleted or still carry scheduling gates (isHeldBack: never placed, not counted as
  // members). The pod is NOT queued, and the error says why for an Event, when its gang
  // annotations are invalid (InvalidArgument) or it uses a feature Muster does not implement
  // (Unimplemented).
  // The queue keeps `pod` itself (shared with the informer's store) while the pod waits.
  absl::Status addOrUpdatePod(std::shared_ptr<const proto::Pod> pod);
  absl::Status addOrUpdatePod(const proto::Pod& pod) {
    return addOrUpdatePod(std::make_shared<const proto::Pod>(pod));
  }
  void removePod(const proto::Pod& pod) { removePod(podKey(pod)); }
  void removePod(std::string_view pod_key);
  // Namespace labels for inter-pod terms in reservation plans (placement.h PlacementOptions).
  void setNamespaceLabels(std::function<const proto::Labels*(std::string_view)> lookup) {
    namespace_labels_ = std::move(lookup);
  }
  // Tenancy (scheduler/tenancy/tenancy.h): `tenant_of(pod)` names the queue a pod's gang belongs
  // to (its first pending member's), `rank(queue)` how far the queue is from its fair share
  // (compared lexicographically, lower: tried first). With both set, pop() takes the active gang of the lowest-ranked queue
  // (ties by queue name), and within a queue the usual order (priority, then age). Unset, every
  // gang is in the queue "" and the order is exactly the one above.
  void setTenancy(std::function<std::string(const proto::Pod&)> tenant_of,
                  std::function<std::vector<double>(std::string_view)> rank) {
    tenant_of_ = std::move(tenant_of);
    rank_ = std::move(rank);
  }
  // Every gang with pending members, with its queue and those members (demand for fair share).
  void forEachPendingGang(
      const std::function<void(const std::string& tenant, const GangKey&,
                               const std::map<std::string, PodInfoPtr>& pending)>& f) const {
    for (const auto& [key, gang] : gangs_)
      if (!gang.pending.empty()) f(gang.tenant, key, gang.pending);
  }
  // Where scheduling.k8s.io/v1alpha2 PodGroups are looked up (none: every one is missing).
  void setWorkloadPodGroups(WorkloadPodGroupLookup lookup) {
    workload_pod_groups_ = std::move(lookup);
  }
  // A PodGroup (either kind) was created, changed or deleted: re-reads the specs of its gang.
  void onPodGroup(std::string_view pod_namespace, std::string_view name);
  // Something that may let unschedulable gangs fit now.
  void onClusterEvent(ClusterEvent event);

  // The next gang to try, or nullopt when none is active now.
  std::optional<GangAttempt> pop();
  // When pop() may next return something that it would not return now: now when a gang is active,
  // the earliest backoff expiry or unschedulable flush otherwise; nullopt when nothing is queued.
  std::optional<absl::Time> nextWakeup() const;

  // The request for place(): members, bound members, topology, and the nodes reserved for other
  // gangs that this one may not use.
  GangRequest buildRequest(const GangAttempt& attempt) const;

  // The gang's placement was assumed in the cache: its placed members count as bound from now.
  void reportPlaced(const GangAttempt& attempt, const GangPlacement& placement);
  // The gang did not fit (or precheck said it cannot be tried). Starts its backoff and, when it
  // has waited long enough, plans its reservation against `cache`.
  void reportUnschedulable(const GangAttempt& attempt, const Unschedulable& verdict,
                           const ClusterCache& cache);
  // Binding failed for `pod_keys` (members of `attempt` that still exist) after reportPlaced
  // (the caller forgot them in the cache and evicted the rest as needed): they are pending again
  // and the gang backs off; a lone pod, which left the queue when it was placed, comes back.
  // Returns how many binds of this gang in a row have failed so far.
  int reportBindFailed(const GangAttempt& attempt, const std::vector<std::string>& pod_keys);
  // Every bind of the gang's attempt succeeded: its run of bind failures ends.
  void reportBound(const GangKey& key);

  // Introspection (metrics, tests).
  size_t activeCount() const { return active_count_; }
  size_t backoffCount() const { return backoff_.size(); }
  size_t unschedulableCount() const { return unschedulable_.size(); }
  size_t waitingCount() const;
  size_t pendingPodCount() const;
  // The nodes reserved for a gang, if it holds a reservation.
  const std::vector<std::string>* reservationOf(const GangKey& key) const;

 private:
  enum class State { kActive, kBackoff, kUnschedulable, kWaiting, kInFlight, kDone };

  struct BoundMember {
    std::string node;
    // Set from when the queue placed it until the informer shows it bound (to requeue it if
    // the bind fails).
    PodInfoPtr pod;
  };

  struct Gang {
    GangKey key;
    GangSpec spec;
    std::map<std::string, PodInfoPtr> pending;
    std::map<std::string, BoundMember> bound;
    State state = State::kActive;
    int failures = 0;
    absl::Time first_seen;
    absl::Time oldest_creation = absl::InfiniteFuture();
    absl::Time backoff_until;
    absl::Time unschedulable_since;
    int32_t priority = 0;
    std::string tenant;             // its queue (setTenancy), "" without tenancy
    int bind_failures = 0;          // attempts in a row whose binds failed
    bool waiting_reported = false;  // the waiting-for-members Event went out
    bool report_waiting = false;    // ... and is due at the next attempt
    bool waiting_condition = false;  // queue.waitingConditionAfterSeconds has passed
    absl::Time waiting_due_at;       // its key in waiting_due_ (the next of the two, while waiting)
    bool timeout_reported = false;  // the GangScheduleTimeout attempt happened
    absl::Time timeout_due_at;      // its key in timeout_due_ (the spec may change meanwhile)
    // Position key in active_ while active.
    std::tuple<int32_t, absl::Time, GangKey> order_key() const {
      return {-priority, std::min(first_seen, oldest_creation), key};
    }
  };

  struct Reservation {
    std::vector<std::string> nodes;
    int32_t priority = 0;
  };

  void setState(Gang& gang, State state);
  void leaveState(Gang& gang);
  void refreshPriority(Gang& gang);
  void activateOrBackoff(Gang& gang, absl::Time now);
  void flush(absl::Time now);
  void eraseGangIfEmpty(const GangKey& key);
  void requeueChanged(Gang& gang);
  absl::Duration backoffFor(int failures) const;
  absl::Time waitingEventDue(const Gang& gang) const;
  absl::Time waitingConditionDue(const Gang& gang) const;
  // The next of the waiting gang's two reports not yet due (condition, Event), or InfiniteFuture.
  absl::Time waitingDue(const Gang& gang) const;
  // When the gang's schedule timeout passes; InfiniteFuture without one or once reported.
  absl::Time timeoutDue(const Gang& gang) const;

  const SchedulerConfig config_;
  Clock clock_;
  PodGroupLookup pod_groups_;
  WorkloadPodGroupLookup workload_pod_groups_;
  std::function<const proto::Labels*(std::string_view)> namespace_labels_;
  ClaimCheck claim_check_;
  VolumesOf volumes_of_;
  SpreadDefaults spread_defaults_;
  // A node map: a Gang is large, and a flat map's empty slots would hold as much again.
  absl::node_hash_map<GangKey, Gang> gangs_;
  absl::flat_hash_map<std::string, GangKey> pod_gang_;
  // Active gangs by queue (tenant), each in order_key() order; active_count_ in all.
  using OrderKey = std::tuple<int32_t, absl::Time, GangKey>;
  std::map<std::string, std::set<OrderKey>, std::less<>> active_;
  size_t active_count_ = 0;
  void activeInsert(const Gang& gang);
  void activeErase(const Gang& gang);
  std::function<std::string(const proto::Pod&)> tenant_of_;
  std::function<std::vector<double>(std::string_view)> rank_;
  std::set<std::pair<absl::Time, GangKey>> backoff_;
  std::set<std::pair<absl::Time, GangKey>> unschedulable_;
  // Waiting gangs by when their next waiting-for-members report (condition, Event) is due.
  std::set<std::pair<absl::Time, GangKey>> waiting_due_;
  // Unschedulable gangs with a schedule timeout not yet reported, by when it passes.
  std::set<std::pair<absl::Time, GangKey>> timeout_due_;
  absl::flat_hash_map<GangKey, Reservation> reservations_;
};

}  // namespace muster::scheduler
