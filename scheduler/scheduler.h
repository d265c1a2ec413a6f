#pragma once

// The scheduling loop. Shared informers (pods, nodes, PodGroups, NodeTopologies,
// PersistentVolumeClaims; from the process's InformerFactory) feed the ClusterCache and the SchedulingQueue; one gang at a time is
// decided against the cache (place()), assumed whole, and handed to the Binder. Unschedulable
// gangs get a PodScheduled condition (PodStatusWriter) and Events; PodGroup status follows from
// pod changes (PodGroupStatusUpdater).
//
// Contract:
// - The constructor registers handlers and indexes on the factory's informers; nothing is
//   decided before start(), and nothing after stop().
// - start() waits for pods, nodes and PersistentVolumeClaims to be listed (and NodeTopologies
//   for up to 5 s), then loops.
//   Call once.
// - A gang is never left partly bound: see Binder.
//
// Threading: all state lives on one strand (strand_); informer handlers post to it; the Binder
// and the PodGroup updater run on it too. Time comes from the injected clock; the loop sleeps
// on real timers until the queue's next wake-up (wake() cuts a sleep short).

#include <atomic>
#include <memory>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

#include "proto/asio.h"
#include "proto/clock.h"
#include "proto/event_recorder.h"
#include "proto/informer.h"
#include "proto/informer_factory.h"
#include "proto/nodetopology.h"
#include "proto/objects.h"
#include "proto/queue.h"
#include "scheduler/api.h"
#include "scheduler/binder.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/placement.h"
#include "scheduler/pod_group_status.h"
#include "scheduler/preemption.h"
#include "scheduler/queue.h"
#include "scheduler/status_writer.h"
#include "scheduler/tenancy/tenancy.h"
#include "scheduler/volume_binding.h"

namespace muster::scheduler {

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, proto::InformerFactory& informers, SchedulerApiPtr api,
            proto::EventRecorder& events, proto::asio::any_io_executor executor,
            proto::Clock clock = proto::realClock());
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void start();
  // Stops scheduling at once: no new decision or bind starts after this returns.
  void stop();
  // Pods and nodes are listed and the loop runs.
  bool ready() const { return ready_.load(); }
  // Ends the loop's current sleep (after the clock was moved, in tests). Thread-safe.
  void wake();

 private:
  // --- on strand_ ---
  proto::asio::awaitable<void> loop();
  proto::asio::awaitable<void> waitForCaches();
  void kick();
  void onPodAdd(const std::shared_ptr<const proto::Pod>& pod);
  void onPodUpdate(const std::shared_ptr<const proto::Pod>& old_pod,
                   const std::shared_ptr<const proto::Pod>& pod);
  void onPodDelete(const std::shared_ptr<const proto::Pod>& pod);
  void queuePod(const std::shared_ptr<const proto::Pod>& pod);
  void onNode(const std::shared_ptr<const proto::Node>& old_node,
              const std::shared_ptr<const proto::Node>& node);
  void onPodGroup(const std::shared_ptr<const proto::PodGroup>& group, bool deleted);
  void onWorkloadPodGroup(const std::shared_ptr<const proto::WorkloadPodGroup>& group,
                          bool deleted);
  // The PodGroupScheduled condition of a gang's scheduling.k8s.io/v1alpha2 PodGroup: True once
  // it is bound, False (Unschedulable) with the verdict; never back from True to False, as
  // kube-scheduler; written only when it changes.
  void setPodGroupScheduled(const GangAttempt& attempt, bool scheduled, std::string message);
  void onNodeTopology(const std::shared_ptr<const proto::NodeTopology>& topology, bool deleted);
  // Tenancy (tenancy.enabled): a Queue changed; the fair shares and the Queue status writes.
  void onQueue(const std::shared_ptr<const proto::Queue>& queue, bool deleted);
  // `now_if_changed`: also within the second when demand changed (before a reclaim).
  void refreshTenancy(bool now_if_changed = false);
  proto::asio::awaitable<void> writeQueueStatuses();
  // Why tenancy keeps the gang out now (a queue's limit, a queue that does not exist), if it does.
  std::optional<Unschedulable> tenancyRefusal(const GangAttempt& attempt);
  // Counts a reclaim for `queue` (metrics, and its victims' GPUs).
  void noteReclaim(const std::string& queue, const PreemptionPlan& plan);
  void onClaim(const proto::PersistentVolumeClaim& claim);
  void onVolume(const proto::PersistentVolume& volume);
  void onCSINode(const proto::CSINode& csi_node, bool deleted);
  // The default topology spread constraints of a pod without its own (scheduler/spread.h).
  std::vector<proto::TopologySpreadConstraint> spreadDefaultsFor(const proto::Pod& pod) const;
  // Pending pods with claims are decided again (a volume or StorageClass came, changed or went).
  void requeueClaimUsers();
  VolumeLookups volumeLookups() const;

  // --- volume binding (scheduler/volume_binding.h) ---
  // The gang is placed and assumed, and `writes` bind its unbound claims: they are sent, then
  // the gang waits until every claim is bound before its pods are.
  void bindVolumes(GangAttempt attempt, GangPlacement placement,
                   std::optional<proto::ObjectReference> regarding, std::vector<VolumeWrite> writes);
  proto::asio::awaitable<void> sendVolumeWrites(GangKey key);
  // Gangs whose claims are all bound go on to bind their pods; those past the timeout fail.
  void checkVolumeBindings();
  // Withdraws the writes whose claims are still unbound and requeues the gang.
  void failVolumeBinding(const GangKey& key, const std::string& message);
  struct PendingVolumes {
    GangAttempt attempt;
    GangPlacement placement;
    std::optional<proto::ObjectReference> regarding;
    std::vector<VolumeWrite> writes;
    bool sent = false;
    absl::Time deadline;
    std::vector<bool> annotated;  // per write: its claim was seen with the selected node
  };
  std::map<GangKey, PendingVolumes> volume_bindings_;
  // The existing volumes those plans give to claims: offered to no other claim meanwhile.
  std::set<std::string, std::less<>> volumesInFlight() const;
  void scheduleOne(GangAttempt attempt);
  void reportUnschedulable(const GangAttempt& attempt, const Unschedulable& verdict);
  void onBound(const GangAttempt& attempt, const GangPlacement& placement, Binder::Result result);
  void updateGauges();

  // --- preemption (scheduler/preemption.h) ---
  // For a gang place() refused: waits on an earlier preemption's victims, or chooses victims and
  // evicts them, holding the freed room (nominatedNodeName). Says what it did in the verdict.
  void preempt(const GangAttempt& attempt, const GangRequest& request, Unschedulable* verdict);
  // Pods of priority below `priority` terminating or marked preempted on `nodes`.
  int drainingOn(const std::set<std::string>& nodes, int32_t priority) const;
  // Whether a PodDisruptionBudget would refuse evicting the unit's pods now.
  bool pdbRefuses(const GangKey& unit, const std::vector<UnitMember>& members) const;
  // Marks every pod (muster.dev/Preempted) and then evicts the marked ones. No mark, no eviction.
  void markAndEvict(std::vector<PodRef> unmarked, std::vector<PodRef> marked,
                    std::string message);
  // Gangs with a pod marked preempted that is not yet terminating (a refused eviction, a crash
  // between marks and evictions): every pod of the gang is marked and evicted.
  void finishPreemptions();
  // Clears the nominatedNodeName of the gang's members, and forgets its hold.
  void releaseHold(const GangAttempt& attempt);
  void releaseExpiredHolds();
  struct Hold {
    std::set<std::string> nodes;  // the victims' nodes and those the gang will use
    absl::Time until;
    std::vector<PodRef> nominated;
  };
  std::map<GangKey, Hold> holds_;                       // by preemptor
  absl::flat_hash_map<GangKey, absl::Time> preempted_at_;  // victims, for the cooldown
  std::set<GangKey> marked_units_;                     // to finish (finishPreemptions)
  absl::flat_hash_map<std::string, absl::Time> evict_sent_;  // pod key → last eviction sent

  const SchedulerConfig config_;
  proto::Clock clock_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  proto::EventRecorder& events_;

  proto::Informer<proto::Pod>& pods_;
  proto::Informer<proto::Node>& nodes_;
  // The x-k8s PodGroup CRD may not be installed: an API that is not served counts as empty.
  proto::Informer<proto::PodGroup>& pod_groups_;
  // Kubernetes' own PodGroups (scheduling.k8s.io/v1alpha2): served only with the GenericWorkload
  // feature gate, so an API that is not served counts as empty (ListWatchOptions::may_be_absent).
  proto::Informer<proto::WorkloadPodGroup>& workload_pod_groups_;
  // Not waited for: without the CRD or any agent, placement ignores GPU↔NIC alignment.
  proto::Informer<proto::NodeTopology>& topologies_;
  // Pods whose claims cannot be decided are not queued (claimProblem); a claim's, volume's or
  // StorageClass's change re-queues the pods using claims.
  proto::Informer<proto::PersistentVolumeClaim>& claims_;
  proto::Informer<proto::PersistentVolume>& volumes_;
  proto::Informer<proto::StorageClass>& storage_classes_;
  // Per node, how many volumes of each CSI driver it can attach (NodeVolumeLimits).
  proto::Informer<proto::CSINode>& csi_nodes_;
  // What pods without topology spread constraints spread by default (spreadDefaultsFor).
  proto::Informer<proto::Service>& services_;
  proto::Informer<proto::ReplicationController>& replication_controllers_;
  proto::Informer<proto::ReplicaSet>& replica_sets_;
  proto::Informer<proto::StatefulSet>& stateful_sets_;
  // Namespace labels, for inter-pod terms' namespaceSelector.
  proto::Informer<proto::Namespace>& namespaces_;
  // What preemption must not break.
  proto::Informer<proto::PodDisruptionBudget>& pdbs_;
  // Asked for only with tenancy.enabled (the CRD need not exist otherwise).
  proto::Informer<proto::Queue>* queues_ = nullptr;

  SchedulerApiPtr api_;
  Binder binder_;
  PodStatusWriter status_;

  // On strand_.
  ClusterCache cache_;
  std::map<std::string, std::shared_ptr<const proto::PodGroup>> groups_;  // "ns/name"
  std::map<std::string, std::shared_ptr<const proto::WorkloadPodGroup>> workload_groups_;
  std::map<std::string, std::shared_ptr<const proto::Namespace>, std::less<>> namespace_objects_;
  const proto::Labels* namespaceLabels(std::string_view name) const;
  // The PodGroupScheduled condition last sent per v1alpha2 PodGroup: "status reason message".
  std::map<std::string, std::string> workload_condition_sent_;
  SchedulingQueue queue_;
  tenancy::Tenancy tenancy_;
  bool queue_status_writing_ = false;  // writeQueueStatuses() is running
  PodGroupStatusUpdater group_status_;
  std::unique_ptr<proto::asio::steady_timer> wakeup_;
  // Pods refused for unbound claims before the claims were listed: told once they are.
  std::set<std::string> refused_before_claims_synced_;

  std::atomic<bool> started_{false};
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace muster::scheduler
