#include "scheduler/scheduler.h"

#include "scheduler/spread.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "proto/codec.h"
#include "proto/concurrently.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/vocabulary.h"
#include "scheduler/pod_info.h"
#include "scheduler/spread.h"
#include "scheduler/strings.h"
#include "scheduler/tenancy/reclaim.h"

namespace muster::scheduler {
namespace asio = proto::asio;
using proto::Node;
using proto::Pod;
using proto::PodGroup;

namespace {

// The index of the PodDisruptionBudget informer by namespace.
constexpr char kBudgetsByNamespaceIndex[] = "scheduler:namespace";
constexpr char kServicesByNamespaceIndex[] = "scheduler:namespace";
// How long a sent eviction of a preempted pod is waited on before it is sent again.
constexpr absl::Duration kEvictionRetry = absl::Seconds(10);
// Marks and evictions of one preemption in flight at once. One at a time, a 250-pod reclaim took
// longer than kEvictionRetry to send, so most victims were evicted twice and it waited for it.
constexpr size_t kPreemptionRequestsInFlight = 32;

// The index of the shared pod informer that files pods under their PodGroup ("ns/name").
constexpr char kPodsByPodGroupIndex[] = "scheduler:podgroup";
// ... and under the PersistentVolumeClaims their volumes use ("ns/claim").
constexpr char kPodsByClaimIndex[] = "scheduler:claim";
// ... and, when pending and using any claim, under "".
constexpr char kPodsWithClaimsIndex[] = "scheduler:with-claims";

struct Metrics {
  metrics::Family<metrics::Counter>& attempts = metrics::defaultRegistry().counter(
      "scheduler_schedule_attempts_total",
      "Gang scheduling attempts by result (scheduled, unschedulable, error).", {"result"});
  metrics::Family<metrics::Histogram>& attempt_duration = metrics::defaultRegistry().histogram(
      "scheduler_scheduling_attempt_duration_seconds",
      "Time to decide one gang (filter, topology search, assume), by result.",
      metrics::exponentialBuckets(0.0001, 2, 16), {"result"});
  metrics::Histogram& gang_latency =
      metrics::defaultRegistry()
          .histogram("muster_gang_placement_duration_seconds",
                     "From the creation of a gang's newest member to all members bound.",
                     metrics::exponentialBuckets(0.01, 2, 16))
          .with();
  metrics::Family<metrics::Gauge>& pending = metrics::defaultRegistry().gauge(
      "scheduler_pending_pods", "Pods waiting to be scheduled, by queue.", {"queue"});
  metrics::Counter& preemption_attempts =
      metrics::defaultRegistry()
          .counter("scheduler_preemption_attempts_total",
                   "Victim searches for gangs that did not fit (kube-scheduler's name).")
          .with();
  metrics::Histogram& preemption_victims =
      metrics::defaultRegistry()
          .histogram("scheduler_preemption_victims", "Pods evicted per preemption.",
                     metrics::exponentialBuckets(1, 2, 12))
          .with();
  metrics::Histogram& preemption_duration =
      metrics::defaultRegistry()
          .histogram("muster_preemption_decision_duration_seconds",
                     "Time to choose the victims of one preemption (or find there are none).",
                     metrics::exponentialBuckets(0.0001, 2, 16))
          .with();
};

Metrics& m() {
  static Metrics* metrics = new Metrics();
  return *metrics;
}

bool nodeChangedForScheduling(const Node& a, const Node& b) {
  if (a.spec.unschedulable != b.spec.unschedulable || a.isReady() != b.isReady()) return true;
  if (a.meta.labels != b.meta.labels || a.status.allocatable != b.status.allocatable) return true;
  if (a.spec.taints.size() != b.spec.taints.size()) return true;
  for (size_t i = 0; i < a.spec.taints.size(); ++i) {
    const auto& x = a.spec.taints[i];
    const auto& y = b.spec.taints[i];
    if (x.key != y.key || x.value != y.value || x.effect != y.effect) return true;
  }
  return false;
}

// Both PodGroup APIs are optional: the x-k8s CRD may not be installed, Kubernetes' own is alpha.
proto::ListWatchOptions mayBeAbsent() {
  proto::ListWatchOptions options;
  options.may_be_absent = true;
  return options;
}

absl::Time creationTime(const Pod& pod) {
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, pod.meta.creation_timestamp, &t, &err)) return t;
  return absl::InfinitePast();
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config, proto::InformerFactory& informers,
                     SchedulerApiPtr api, proto::EventRecorder& events,
                     asio::any_io_executor executor, proto::Clock clock)
    : config_(std::move(config)),
      clock_(std::move(clock)),
      strand_(asio::make_strand(executor)),
      events_(events),
      pods_(informers.informer<Pod>(proto::resources::kPods)),
      nodes_(informers.informer<Node>(proto::resources::kNodes)),
      pod_groups_(informers.informer<PodGroup>(proto::resources::kPodGroups, mayBeAbsent())),
      workload_pod_groups_(informers.informer<proto::WorkloadPodGroup>(
          proto::resources::kWorkloadPodGroups, mayBeAbsent())),
      topologies_(informers.informer<proto::NodeTopology>(proto::resources::kNodeTopologies)),
      claims_(informers.informer<proto::PersistentVolumeClaim>(
          proto::resources::kPersistentVolumeClaims)),
      volumes_(informers.informer<proto::PersistentVolume>(proto::resources::kPersistentVolumes)),
      storage_classes_(
          informers.informer<proto::StorageClass>(proto::resources::kStorageClasses)),
      csi_nodes_(informers.informer<proto::CSINode>(proto::resources::kCSINodes)),
      services_(informers.informer<proto::Service>(proto::resources::kServices)),
      replication_controllers_(informers.informer<proto::ReplicationController>(
          proto::resources::kReplicationControllers)),
      replica_sets_(informers.informer<proto::ReplicaSet>(proto::resources::kReplicaSets)),
      stateful_sets_(informers.informer<proto::StatefulSet>(proto::resources::kStatefulSets)),
      namespaces_(informers.informer<proto::Namespace>(proto::resources::kNamespaces)),
      pdbs_(informers.informer<proto::PodDisruptionBudget>(proto::resources::kPodDisruptionBudgets)),
      api_(api),
      binder_(api, strand_, events_, clock_, config_.scheduled_events_per_pod, config_.binds_in_flight),
      status_(api, executor, clock_),
      cache_(config_.topology_levels),
      queue_(config_, clock_,
             [this](std::string_view ns, std::string_view name) -> const PodGroup* {
               auto it = groups_.find(proto::objectKey(ns, name));
               return it == groups_.end() ? nullptr : it->second.get();
             },
             [this](const Pod& pod) { return claimProblem(pod, volumeLookups()); },
             [this](const Pod& pod) {
               return volumeConstraints(pod, volumeLookups(), volumesInFlight());
             },
             [this](const Pod& pod) { return spreadDefaultsFor(pod); }),
      tenancy_(config_, [this](std::string_view ns) { return namespaceLabels(ns); }),
      group_status_(api, strand_, clock_, [this](const std::string& group_key) {
        return pods_.byIndex(kPodsByPodGroupIndex, group_key);
      }) {
  queue_.setNamespaceLabels([this](std::string_view ns) { return namespaceLabels(ns); });
  queue_.setWorkloadPodGroups(
      [this](std::string_view ns, std::string_view name) -> const proto::WorkloadPodGroup* {
        auto it = workload_groups_.find(proto::objectKey(ns, name));
        return it == workload_groups_.end() ? nullptr : it->second.get();
      });
  for (const char* q : {"active", "backoff", "unschedulable", "waiting"}) m().pending.with({q});
  for (const char* r : {"scheduled", "unschedulable", "error"}) m().attempts.with({r});
  pods_.addIndex(kPodsByPodGroupIndex, [](const Pod& p) {
    auto it = p.meta.labels.find(proto::vocabulary::kPodGroupLabel);
    if (it == p.meta.labels.end()) return std::vector<std::string>{};
    return std::vector<std::string>{proto::objectKey(p.meta.namespace_, it->second)};
  });
  pdbs_.addIndex(kBudgetsByNamespaceIndex, [](const proto::PodDisruptionBudget& b) {
    return std::vector<std::string>{b.meta.namespace_};
  });
  services_.addIndex(kServicesByNamespaceIndex, [](const proto::Service& s) {
    if (s.selector.empty()) return std::vector<std::string>{};
    return std::vector<std::string>{s.meta.namespace_};
  });
  pods_.addIndex(kPodsByClaimIndex, [](const Pod& p) {
    std::vector<std::string> keys;
    if (!p.spec.node_name.empty()) return keys;
    for (const std::string& claim : p.spec.pvc_claim_names)
      keys.push_back(proto::objectKey(p.meta.namespace_, claim));
    return keys;
  });
  pods_.addIndex(kPodsWithClaimsIndex, [](const Pod& p) {
    if (!p.spec.node_name.empty() || p.spec.pvc_claim_names.empty()) return std::vector<std::string>{};
    return std::vector<std::string>{""};
  });
  pods_.addHandlers({
      [this](const auto& p) { asio::post(strand_, [this, p] { onPodAdd(p); }); },
      [this](const auto& o, const auto& p) {
        asio::post(strand_, [this, o, p] { onPodUpdate(o, p); });
      },
      [this](const auto& p) { asio::post(strand_, [this, p] { onPodDelete(p); }); },
  });
  nodes_.addHandlers({
      [this](const auto& n) { asio::post(strand_, [this, n] { onNode(nullptr, n); }); },
      [this](const auto& o, const auto& n) { asio::post(strand_, [this, o, n] { onNode(o, n); }); },
      [this](const auto& n) {
        asio::post(strand_, [this, n] {
          cache_.removeNode(*n);
          kick();
        });
      },
  });
  pod_groups_.addHandlers({
      [this](const auto& g) { asio::post(strand_, [this, g] { onPodGroup(g, false); }); },
      [this](const auto&, const auto& g) { asio::post(strand_, [this, g] { onPodGroup(g, false); }); },
      [this](const auto& g) { asio::post(strand_, [this, g] { onPodGroup(g, true); }); },
  });
  workload_pod_groups_.addHandlers({
      [this](const auto& g) { asio::post(strand_, [this, g] { onWorkloadPodGroup(g, false); }); },
      [this](const auto&, const auto& g) {
        asio::post(strand_, [this, g] { onWorkloadPodGroup(g, false); });
      },
      [this](const auto& g) { asio::post(strand_, [this, g] { onWorkloadPodGroup(g, true); }); },
  });
  auto on_namespace = [this](const std::shared_ptr<const proto::Namespace>& n, bool gone) {
    asio::post(strand_, [this, n, gone] {
      if (gone) namespace_objects_.erase(n->meta.name);
      else namespace_objects_[n->meta.name] = n;
      tenancy_.onNamespace(n->meta.name);
      // A namespace's labels may let a pod with a namespaceSelector term fit (or not) now.
      queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
      kick();
    });
  };
  namespaces_.addHandlers({[on_namespace](const auto& n) { on_namespace(n, false); },
                           [on_namespace](const auto&, const auto& n) { on_namespace(n, false); },
                           [on_namespace](const auto& n) { on_namespace(n, true); }});
  auto on_claim = [this](const std::shared_ptr<const proto::PersistentVolumeClaim>& c) {
    asio::post(strand_, [this, c] { onClaim(*c); });
  };
  claims_.addHandlers({on_claim, [on_claim](const auto&, const auto& c) { on_claim(c); }, on_claim});
  auto on_volume = [this](const std::shared_ptr<const proto::PersistentVolume>& v) {
    asio::post(strand_, [this, v] { onVolume(*v); });
  };
  volumes_.addHandlers(
      {on_volume, [on_volume](const auto&, const auto& v) { on_volume(v); }, on_volume});
  auto on_class = [this](const auto&) {
    asio::post(strand_, [this] {
      requeueClaimUsers();
      kick();
    });
  };
  storage_classes_.addHandlers(
      {on_class, [on_class](const auto&, const auto& c) { on_class(c); }, on_class});
  auto on_csi_node = [this](const std::shared_ptr<const proto::CSINode>& n, bool deleted) {
    asio::post(strand_, [this, n, deleted] { onCSINode(*n, deleted); });
  };
  csi_nodes_.addHandlers({[on_csi_node](const auto& n) { on_csi_node(n, false); },
                          [on_csi_node](const auto&, const auto& n) { on_csi_node(n, false); },
                          [on_csi_node](const auto& n) { on_csi_node(n, true); }});
  cache_.setClaimDriver([this](std::string_view ns, std::string_view name) -> std::string {
    std::shared_ptr<const proto::PersistentVolumeClaim> claim = claims_.get(ns, name);
    return claim ? claimCsiDriver(*claim, volumeLookups()) : "";
  });
  topologies_.addHandlers({
      [this](const auto& t) { asio::post(strand_, [this, t] { onNodeTopology(t, false); }); },
      [this](const auto&, const auto& t) {
        asio::post(strand_, [this, t] { onNodeTopology(t, false); });
      },
      [this](const auto& t) { asio::post(strand_, [this, t] { onNodeTopology(t, true); }); },
  });
  if (tenancy_.enabled()) {
    queues_ = &informers.informer<proto::Queue>(proto::resources::kQueues);
    queues_->addHandlers({
        [this](const auto& q) { asio::post(strand_, [this, q] { onQueue(q, false); }); },
        [this](const auto&, const auto& q) { asio::post(strand_, [this, q] { onQueue(q, false); }); },
        [this](const auto& q) { asio::post(strand_, [this, q] { onQueue(q, true); }); },
    });
    cache_.setPodObserver([this](std::string_view key, const PlacedPod& placed,
                                 const Resources& requests, int32_t gpu_milli, int sign) {
      tenancy_.observe(key, placed, requests, gpu_milli, sign);
    });
    queue_.setTenancy([this](const Pod& pod) { return tenancy_.queueOf(pod); },
                      [this](std::string_view queue) { return tenancy_.rank(queue); });
  }
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
  if (started_.exchange(true)) return;
  asio::co_spawn(strand_, loop(), proto::dieOnException("scheduling loop"));
}

void Scheduler::stop() {
  if (stopping_.exchange(true)) return;
  ready_ = false;
  binder_.stop();
  asio::post(strand_, [this] {
    group_status_.stop();
    kick();
  });
}

void Scheduler::wake() {
  asio::post(strand_, [this] { kick(); });
}

void Scheduler::kick() {
  if (wakeup_) wakeup_->cancel();
}

// --- informer events ------------------------------------------------------------------------

void Scheduler::queuePod(const std::shared_ptr<const Pod>& shared) {
  const Pod& pod = *shared;
  if (!config_.handlesSchedulerName(pod.spec.scheduler_name)) return;
  std::string key = podKey(pod);
  // Bound by us, and the informer has not shown the binding yet.
  if (pod.spec.node_name.empty() && cache_.isAssumed(key)) return;
  absl::Status status = queue_.addOrUpdatePod(shared);
  if (!pod.spec.node_name.empty() || pod.meta.deletion_timestamp) return;
  if (!pod.spec.scheduling_gates.empty()) {
    status_.gated(pod);
    return;
  }
  if (status.ok()) return;
  if (!pod.spec.pvc_claim_names.empty() &&
      !(claims_.hasSynced() && volumes_.hasSynced() && storage_classes_.hasSynced())) {
    // Its claims may be bound but not listed yet; decided when they are (waitForCaches).
    refused_before_claims_synced_.insert(key);
    return;
  }
  std::string message(status.message());
  // Our own condition write comes back as an update: one Event per change, not two.
  if (PodStatusWriter::reflects(pod, proto::vocabulary::kUnschedulableReason, message)) return;
  events_.event(pod, "Warning", "FailedScheduling", message);
  status_.unschedulable(pod, message);
  MUSTER_LOG_INFO(2, "Pod not queued", "pod", key, "reason", message);
}

void Scheduler::onClaim(const proto::PersistentVolumeClaim& claim) {
  // Bound, unbound or gone: the pods using it are (re)decided.
  for (const auto& pod : pods_.byIndex(kPodsByClaimIndex, proto::objectKey(claim)))
    queuePod(pod);
  checkVolumeBindings();
  kick();
}

void Scheduler::onVolume(const proto::PersistentVolume&) {
  // Its node affinity changed, it came, went or was bound: the pods using its claim, and those
  // whose claims wait for a volume, are decided again.
  requeueClaimUsers();
  checkVolumeBindings();
  kick();
}

void Scheduler::requeueClaimUsers() {
  for (const auto& pod : pods_.byIndex(kPodsWithClaimsIndex, "")) queuePod(pod);
}

std::set<std::string, std::less<>> Scheduler::volumesInFlight() const {
  std::set<std::string, std::less<>> out;
  for (const auto& [_, pending] : volume_bindings_)
    for (const VolumeWrite& w : pending.writes)
      if (!w.volume.empty()) out.insert(w.volume);
  return out;
}

VolumeLookups Scheduler::volumeLookups() const {
  return {
      [this](std::string_view ns, std::string_view name) { return claims_.get(ns, name); },
      [this](std::string_view name) { return storage_classes_.get("", name); },
      [this](std::string_view name) { return volumes_.get("", name); },
      [this] { return volumes_.list(); },
  };
}

void Scheduler::onPodAdd(const std::shared_ptr<const Pod>& pod) {
  tenancy_.noteDemandChanged();
  if (markedPreempted(*pod) && !pod->spec.node_name.empty() && !pod->meta.deletion_timestamp &&
      !isTerminal(*pod))
    marked_units_.insert(gangKeyOf(*pod));
  cache_.addPod(*pod);
  queuePod(pod);
  group_status_.onPod(*pod);
  kick();
}

void Scheduler::onPodUpdate(const std::shared_ptr<const Pod>& old_pod,
                            const std::shared_ptr<const Pod>& pod) {
  tenancy_.noteDemandChanged();
  if (markedPreempted(*pod) && !pod->spec.node_name.empty() && !pod->meta.deletion_timestamp &&
      !isTerminal(*pod))
    marked_units_.insert(gangKeyOf(*pod));
  cache_.updatePod(*pod);
  if (pod->meta.deletion_timestamp || markedPreempted(*pod)) tenancy_.markGoing(podKey(*pod));
  if (!pod->spec.node_name.empty() && !isTerminal(*old_pod) && isTerminal(*pod))
    queue_.onClusterEvent(ClusterEvent::kPodTerminated);
  queuePod(pod);
  group_status_.onPod(*pod);
  kick();
}

void Scheduler::onPodDelete(const std::shared_ptr<const Pod>& pod) {
  tenancy_.noteDemandChanged();
  std::string key = podKey(*pod);
  evict_sent_.erase(key);
  if (cache_.isAssumed(key)) (void)cache_.forget(key);
  cache_.removePod(*pod);
  if (config_.handlesSchedulerName(pod->spec.scheduler_name)) queue_.removePod(key);
  if (!pod->spec.node_name.empty()) queue_.onClusterEvent(ClusterEvent::kPodDeleted);
  group_status_.onPod(*pod);
  kick();
}

void Scheduler::onNode(const std::shared_ptr<const Node>& old_node,
                       const std::shared_ptr<const Node>& node) {
  if (!old_node) {
    cache_.addNode(node);
    queue_.onClusterEvent(ClusterEvent::kNodeAdded);
  } else {
    cache_.updateNode(node);
    if (nodeChangedForScheduling(*old_node, *node)) queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
  }
  kick();
}

void Scheduler::onPodGroup(const std::shared_ptr<const PodGroup>& group, bool deleted) {
  std::string key = proto::objectKey(*group);
  if (deleted) {
    groups_.erase(key);
  } else {
    groups_[key] = group;
  }
  group_status_.onPodGroup(group, deleted);
  queue_.onPodGroup(group->meta.namespace_, group->meta.name);
  kick();
}

void Scheduler::onWorkloadPodGroup(const std::shared_ptr<const proto::WorkloadPodGroup>& group,
                                   bool deleted) {
  std::string key = proto::objectKey(*group);
  if (deleted) {
    workload_groups_.erase(key);
    workload_condition_sent_.erase(key);
  } else {
    workload_groups_[key] = group;
  }
  queue_.onPodGroup(group->meta.namespace_, group->meta.name);
  kick();
}

const proto::Labels* Scheduler::namespaceLabels(std::string_view name) const {
  auto it = namespace_objects_.find(name);
  return it == namespace_objects_.end() ? nullptr : &it->second->meta.labels;
}

void Scheduler::setPodGroupScheduled(const GangAttempt& attempt, bool scheduled,
                                     std::string message) {
  if (attempt.spec.source != GangSource::kWorkloadPodGroup) return;
  const std::string key = proto::objectKey(attempt.key.namespace_, attempt.spec.workload_pod_group);
  auto it = workload_groups_.find(key);
  if (it == workload_groups_.end()) return;
  const proto::WorkloadPodGroup& group = *it->second;
  const proto::Condition* now = group.condition(proto::vocabulary::kPodGroupScheduledCondition);
  if (!scheduled && now != nullptr && now->status == "True") return;
  proto::Condition c;
  c.type = std::string(proto::vocabulary::kPodGroupScheduledCondition);
  c.status = scheduled ? "True" : "False";
  c.reason = scheduled ? "Scheduled" : "Unschedulable";
  c.message = std::move(message);
  const std::string summary = absl::StrCat(c.status, " ", c.reason, " ", c.message);
  if (now != nullptr && now->status == c.status && now->reason == c.reason &&
      now->message == c.message) {
    workload_condition_sent_[key] = summary;
    return;
  }
  auto [sent, inserted] = workload_condition_sent_.try_emplace(key, summary);
  if (!inserted && sent->second == summary) return;  // sent; the informer has not caught up
  sent->second = summary;
  c.last_transition_time = now != nullptr && now->status == c.status
                               ? now->last_transition_time
                               : proto::rfc3339(clock_());
  asio::co_spawn(
      strand_,
      [this, api = api_, ns = group.meta.namespace_, name = group.meta.name, c,
       generation = group.meta.generation, key, summary]() -> asio::awaitable<void> {
        absl::Status status = co_await api->setWorkloadPodGroupCondition(ns, name, c, generation);
        if (status.ok()) co_return;
        co_await asio::post(strand_, asio::use_awaitable);
        MUSTER_LOG_WARNING("PodGroup condition not written", "podGroup", key, "error",
                           status.ToString());
        // Written again on the next change.
        if (auto again = workload_condition_sent_.find(key);
            again != workload_condition_sent_.end() && again->second == summary)
          workload_condition_sent_.erase(again);
      },
      proto::dieOnException("PodGroup condition"));
}

void Scheduler::onNodeTopology(const std::shared_ptr<const proto::NodeTopology>& topology,
                               bool deleted) {
  // Named after its node (spec.nodeName repeats it; the agent writes both).
  const std::string& node =
      topology->spec.node_name.empty() ? topology->meta.name : topology->spec.node_name;
  std::shared_ptr<const NodeDevices> devices;
  if (!deleted) {
    absl::StatusOr<std::shared_ptr<const NodeDevices>> parsed =
        NodeDevices::fromNodeTopology(*topology);
    if (parsed.ok()) {
      devices = *std::move(parsed);
    } else {
      MUSTER_LOG_WARNING("NodeTopology ignored: the node is placed as if it had none", "node",
                         node, "error", parsed.status().ToString());
    }
  }
  const bool known = devices != nullptr;
  cache_.setNodeDevices(node, std::move(devices));
  MUSTER_LOG_INFO(2, "NodeTopology taken in", "node", node, "devices", known);
  queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
  kick();
}

std::vector<proto::TopologySpreadConstraint> Scheduler::spreadDefaultsFor(const Pod& pod) const {
  const std::map<std::string, std::string>* rc = nullptr;
  const proto::LabelSelector* workload = nullptr;
  std::shared_ptr<const proto::ReplicationController> owning_rc;
  std::shared_ptr<const proto::ReplicaSet> owning_rs;
  std::shared_ptr<const proto::StatefulSet> owning_ss;
  if (const proto::OwnerReference* owner = pod.meta.controllerRef()) {
    const std::string& ns = pod.meta.namespace_;
    if (owner->kind == "ReplicationController" && owner->api_version == "v1") {
      if ((owning_rc = replication_controllers_.get(ns, owner->name))) rc = &owning_rc->selector;
    } else if (owner->kind == "ReplicaSet" && owner->api_version == "apps/v1") {
      owning_rs = replica_sets_.get(ns, owner->name);
      if (owning_rs && owning_rs->selector) workload = &*owning_rs->selector;
    } else if (owner->kind == "StatefulSet" && owner->api_version == "apps/v1") {
      owning_ss = stateful_sets_.get(ns, owner->name);
      if (owning_ss && owning_ss->selector) workload = &*owning_ss->selector;
    }
  }
  std::optional<proto::LabelSelector> selector = defaultSelector(
      pod, services_.byIndex(kServicesByNamespaceIndex, pod.meta.namespace_), rc, workload);
  if (!selector) return {};
  return defaultSpreadConstraints(config_, *selector);
}

void Scheduler::onCSINode(const proto::CSINode& csi_node, bool deleted) {
  std::shared_ptr<VolumeLimits> limits;
  if (!deleted) {
    for (const proto::CSINode::Driver& d : csi_node.drivers) {
      if (!d.allocatable_count) continue;
      if (!limits) limits = std::make_shared<VolumeLimits>();
      (*limits)[d.name] = *d.allocatable_count;
    }
  }
  cache_.setVolumeLimits(csi_node.meta.name, std::move(limits));
  queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
  kick();
}

// --- the loop -----------------------------------------------------------------------------------

asio::awaitable<void> Scheduler::waitForCaches() {
  auto sleep = [this](std::chrono::milliseconds d) -> asio::awaitable<void> {
    wakeup_->expires_after(d);
    boost::system::error_code ec;
    co_await wakeup_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  };
  // PodGroups too (an API that is not served counts as listed): a gang whose PodGroup is merely
  // not listed yet must not be told that it does not exist.
  while (!stopping_ && !(pods_.hasSynced() && nodes_.hasSynced() && claims_.hasSynced() &&
                        volumes_.hasSynced() && storage_classes_.hasSynced() &&
                        csi_nodes_.hasSynced() && services_.hasSynced() &&
                        replication_controllers_.hasSynced() && replica_sets_.hasSynced() &&
                        stateful_sets_.hasSynced() && pod_groups_.hasSynced() &&
                        workload_pod_groups_.hasSynced() && namespaces_.hasSynced() &&
                        pdbs_.hasSynced() && (queues_ == nullptr || queues_->hasSynced())))
    co_await sleep(std::chrono::milliseconds(100));
  // NodeTopologies are worth a short wait (placing without them ignores GPU↔NIC alignment), but
  // not a hang: the CRD may not be installed, or no agent runs.
  const auto topology_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!stopping_ && !topologies_.hasSynced() &&
         std::chrono::steady_clock::now() < topology_deadline)
    co_await sleep(std::chrono::milliseconds(100));
  if (stopping_) co_return;
  if (!topologies_.hasSynced()) {
    MUSTER_LOG_WARNING("NodeTopologies not listed yet (is the CRD installed and may the scheduler "
                       "list them?); placing without GPU-NIC alignment until they are");
  }
  // The informers posted their first lists' events to this strand before they reported synced;
  // let those run (the strand is FIFO) so the cache holds every node, pod and topology first.
  co_await asio::post(strand_, asio::use_awaitable);
  for (const std::string& key : std::exchange(refused_before_claims_synced_, {})) {
    auto slash = key.find('/');
    if (auto pod = pods_.get(key.substr(0, slash), key.substr(slash + 1))) queuePod(pod);
  }
}

asio::awaitable<void> Scheduler::loop() {
  wakeup_ = std::make_unique<asio::steady_timer>(strand_);
  co_await waitForCaches();
  if (stopping_) co_return;
  ready_ = true;
  MUSTER_LOG_INFO(1, "Caches synced, scheduling", "nodes", cache_.nodeCount(), "pods",
                  cache_.podCount());
  auto gauges_updated = std::chrono::steady_clock::time_point{};
  while (!stopping_) {
    // At most once a second while busy (waitingCount() walks every gang), and whenever idle.
    if (auto now = std::chrono::steady_clock::now(); now - gauges_updated > std::chrono::seconds(1)) {
      updateGauges();
      releaseExpiredHolds();
      checkVolumeBindings();
      refreshTenancy();
      gauges_updated = now;
    }
    // A preemption a crash or a refused eviction left unfinished is finished first.
    finishPreemptions();
    std::optional<GangAttempt> attempt = queue_.pop();
    if (!attempt) {
      updateGauges();
      refreshTenancy();
      auto wake = queue_.nextWakeup();
      auto wait = wake ? std::max(absl::ZeroDuration(), *wake - clock_()) : absl::Hours(1);
      // Evictions to send again, holds to release.
      if (!marked_units_.empty() || !holds_.empty() || !volume_bindings_.empty())
        wait = std::min(wait, absl::Seconds(1));
      // Queue statuses to write, fair shares to keep current.
      if (tenancy_.enabled()) wait = std::min(wait, absl::Seconds(1));
      wakeup_->expires_after(absl::ToChronoMilliseconds(wait) + std::chrono::milliseconds(1));
      boost::system::error_code ec;
      co_await wakeup_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    scheduleOne(std::move(*attempt));
    // Let informer events and bind completions in between decisions.
    co_await asio::post(strand_, asio::use_awaitable);
  }
}

void Scheduler::updateGauges() {
  m().pending.with({"active"}).set(static_cast<double>(queue_.activeCount()));
  m().pending.with({"backoff"}).set(static_cast<double>(queue_.backoffCount()));
  m().pending.with({"unschedulable"}).set(static_cast<double>(queue_.unschedulableCount()));
  m().pending.with({"waiting"}).set(static_cast<double>(queue_.waitingCount()));
}

void Scheduler::scheduleOne(GangAttempt attempt) {
  auto started = std::chrono::steady_clock::now();
  auto observe = [&](const char* result) {
    m().attempts.with({result}).inc();
    m().attempt_duration.with({result}).observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  };
  if (auto verdict = precheck(attempt)) {
    // Not an attempt: the gang cannot be tried until its members (or PodGroup) exist.
    reportUnschedulable(attempt, *verdict);
    return;
  }
  if (auto verdict = tenancyRefusal(attempt)) {
    observe("unschedulable");
    reportUnschedulable(attempt, *verdict);
    return;
  }
  GangRequest request = queue_.buildRequest(attempt);
  PlacementOptions options;
  options.single_pod_strategy = config_.single_pod_strategy;
  options.namespace_labels = [this](std::string_view ns) { return namespaceLabels(ns); };
  PlacementResult result = place(request, cache_, options);
  const auto placed_at = std::chrono::steady_clock::now();
  if (auto* verdict = std::get_if<Unschedulable>(&result)) {
    observe("unschedulable");
    if (!verdict->waiting_for_members && !verdict->evict_bound_members)
      preempt(attempt, request, verdict);
    reportUnschedulable(attempt, *verdict);
    if (verdict->evict_bound_members)
      binder_.rollback(attempt, verdict->message, [this](std::string_view ns, std::string_view name) {
        return pods_.get(ns, name);
      });
    return;
  }
  auto& placement = std::get<GangPlacement>(result);
  for (size_t i = 0; i < placement.assignments.size(); ++i) {
    absl::Status assumed = cache_.assume(*attempt.members[i], placement.assignments[i].node,
                                         placement.assignments[i].gpu_index);
    if (!assumed.ok()) {
      // The placement was computed against this very cache, so this is a bug: undo and retry.
      for (size_t j = 0; j < i; ++j) (void)cache_.forget(attempt.members[j]->key);
      observe("error");
      MUSTER_LOG_ERROR("Assume failed, gang requeued", "gang", attempt.key.toString(), "error",
                       assumed.ToString());
      Unschedulable retry;
      retry.message = absl::StrCat("internal error: ", assumed.message());
      queue_.reportUnschedulable(attempt, retry, cache_);
      return;
    }
    placement.assignments[i].gpu_index = cache_.sharedGpuOf(attempt.members[i]->key).value_or(-1);
  }
  // Volumes for the claims that wait for their first consumer, decided for the whole gang before
  // anything is written.
  std::vector<std::string> nodes;
  for (const Assignment& a : placement.assignments) nodes.push_back(a.node);
  absl::StatusOr<std::vector<VolumeWrite>> writes =
      planVolumes(attempt.members, nodes, cache_, volumesInFlight());
  if (!writes.ok()) {
    for (const auto& member : attempt.members) (void)cache_.forget(member->key);
    observe("unschedulable");
    Unschedulable verdict;
    verdict.message = std::string(writes.status().message());
    reportUnschedulable(attempt, verdict);
    return;
  }
  queue_.reportPlaced(attempt, placement);
  observe("scheduled");
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  MUSTER_LOG_INFO(2, "Gang placed", "gang", attempt.key.toString(), "pods",
                  placement.assignments.size(), "placeMs", ms(placed_at - started), "assumeMs",
                  ms(std::chrono::steady_clock::now() - placed_at), "domain", placement.describe(), "gpuNicPods",
                  placement.gpu_nic_pods, "alignedPCIeSwitch", placement.gpu_nic_pix, "alignedPCIe", placement.gpu_nic_pcie,
                  "alignedNUMANode", placement.gpu_nic_numa);
  // The gang's Scheduled Event goes on its PodGroup when it has one.
  std::optional<proto::ObjectReference> regarding;
  if (attempt.spec.source == GangSource::kPodGroup) {
    auto it = groups_.find(proto::objectKey(attempt.key.namespace_, attempt.key.name));
    if (it != groups_.end()) regarding = proto::referenceTo(*it->second);
  } else if (attempt.spec.source == GangSource::kWorkloadPodGroup) {
    auto it = workload_groups_.find(proto::objectKey(attempt.key.namespace_, attempt.spec.workload_pod_group));
    if (it != workload_groups_.end()) regarding = proto::referenceTo(*it->second);
  }
  if (!writes->empty()) {
    bindVolumes(std::move(attempt), std::move(placement), std::move(regarding), std::move(*writes));
    return;
  }
  binder_.bind(attempt, placement, [this, attempt, placement](Binder::Result result) {
    onBound(attempt, placement, std::move(result));
  }, std::move(regarding));
}

// --- volume binding -----------------------------------------------------------------------------

void Scheduler::bindVolumes(GangAttempt attempt, GangPlacement placement,
                            std::optional<proto::ObjectReference> regarding,
                            std::vector<VolumeWrite> writes) {
  const GangKey key = attempt.key;
  MUSTER_LOG_INFO(2, "Binding the gang's volumes first", "gang", key.toString(), "claims",
                  writes.size());
  volume_bindings_[key] = PendingVolumes{
      std::move(attempt), std::move(placement), std::move(regarding), std::move(writes), false,
      clock_() + absl::Seconds(config_.volume_binding_timeout_seconds), {}};
  asio::co_spawn(strand_, sendVolumeWrites(key), proto::dieOnException("volume binding"));
}

asio::awaitable<void> Scheduler::sendVolumeWrites(GangKey key) {
  auto it = volume_bindings_.find(key);
  if (it == volume_bindings_.end()) co_return;
  const std::vector<VolumeWrite> writes = it->second.writes;
  for (const VolumeWrite& w : writes) {
    absl::Status status;
    if (w.volume.empty()) {
      status = co_await api_->setClaimSelectedNode(w.claim_namespace, w.claim, w.claim_uid, w.node);
    } else {
      status = co_await api_->setVolumeClaimRef(w.volume, w.claim_namespace, w.claim, w.claim_uid,
                                                w.volume_resource_version);
    }
    co_await asio::post(strand_, asio::use_awaitable);  // back on the strand
    if (stopping_ || !volume_bindings_.contains(key)) co_return;  // stopping, or timed out
    if (!status.ok()) {
      failVolumeBinding(key, absl::StrCat(w.volume.empty() ? "asking for a volume for"
                                                           : "binding PersistentVolume " + w.volume + " to",
                                          " claim ", w.claim_namespace, "/", w.claim,
                                          " failed: ", status.message()));
      co_return;
    }
  }
  volume_bindings_[key].sent = true;
  checkVolumeBindings();
}

void Scheduler::checkVolumeBindings() {
  std::vector<GangKey> ready, late;
  std::vector<std::pair<GangKey, std::string>> given_back;
  for (auto& [key, pending] : volume_bindings_) {
    if (!pending.sent) {
      if (clock_() >= pending.deadline) late.push_back(key);
      continue;
    }
    bool all_bound = true;
    pending.annotated.resize(pending.writes.size());
    for (size_t i = 0; i < pending.writes.size(); ++i) {
      const VolumeWrite& w = pending.writes[i];
      auto claim = claims_.get(w.claim_namespace, w.claim);
      if (claim == nullptr || !claim->isBound()) all_bound = false;
      if (claim == nullptr || claim->isBound() || !w.volume.empty()) continue;
      // A provisioner that cannot provision for the node takes the annotation away again
      // (asking the scheduler to choose again): no use waiting then.
      auto a = claim->meta.annotations.find(proto::vocabulary::kSelectedNodeAnnotation);
      const bool annotated = a != claim->meta.annotations.end() && a->second == w.node;
      if (annotated) pending.annotated[i] = true;
      else if (pending.annotated[i])
        given_back.emplace_back(key, proto::objectKey(w.claim_namespace, w.claim));
    }
    if (all_bound) ready.push_back(key);
    else if (clock_() >= pending.deadline) late.push_back(key);
  }
  for (const auto& [key, claim] : given_back) {
    if (!volume_bindings_.contains(key)) continue;
    failVolumeBinding(key, absl::StrCat("the provisioner of claim ", claim,
                                        " removed its volume.kubernetes.io/selected-node (it "
                                        "cannot provision there; see the claim's Events)"));
  }
  for (const GangKey& key : late) {
    if (!volume_bindings_.contains(key)) continue;
    failVolumeBinding(key, absl::StrCat("its PersistentVolumeClaims were not bound within ",
                                        config_.volume_binding_timeout_seconds,
                                        "s (volumeBinding.timeoutSeconds): is their provisioner running?"));
  }
  for (const GangKey& key : ready) {
    if (!volume_bindings_.contains(key)) continue;
    auto node = volume_bindings_.extract(key);
    PendingVolumes& p = node.mapped();
    // The volumes bound must be reachable from every member that uses them (a provisioned
    // volume's node affinity is only known now; members may share a claim).
    std::string conflict;
    for (size_t i = 0; i < p.attempt.members.size() && conflict.empty(); ++i) {
      const PodInfo& member = *p.attempt.members[i];
      const std::string& node_name = p.placement.assignments[i].node;
      std::optional<NodeId> id = cache_.findNode(node_name);
      for (const VolumeConstraint& v : member.volumes) {
        if (!v.to_bind) continue;
        auto claim = claims_.get(member.pod().meta.namespace_, v.claim);
        auto pv = claim ? volumes_.get("", claim->volume_name) : nullptr;
        if (pv && pv->node_affinity && id &&
            !pv->node_affinity->matches(cache_.node(*id).labels(), node_name)) {
          conflict = absl::StrCat("PersistentVolume ", pv->meta.name, " bound to claim ", v.claim,
                                  " cannot be reached from node ", node_name, " of pod ",
                                  member.key, ": ", std::string(kReasonVolumeNodeAffinity));
          break;
        }
      }
    }
    if (!conflict.empty()) {
      volume_bindings_.insert(std::move(node));
      failVolumeBinding(key, conflict);
      continue;
    }
    MUSTER_LOG_INFO(2, "Gang's volumes bound", "gang", key.toString(), "claims", p.writes.size());
    binder_.bind(p.attempt, p.placement,
                 [this, attempt = p.attempt, placement = p.placement](Binder::Result result) {
                   onBound(attempt, placement, std::move(result));
                 },
                 std::move(p.regarding));
  }
}

void Scheduler::failVolumeBinding(const GangKey& key, const std::string& message) {
  auto node = volume_bindings_.extract(key);
  if (node.empty()) return;
  PendingVolumes& p = node.mapped();
  MUSTER_LOG_WARNING("Gang's volume binding failed, withdrawing it", "gang", key.toString(),
                     "reason", message);
  // Withdraw what is not bound yet: a provisioner that has not started does not start, and an
  // existing volume is free for other claims again. A claim bound meanwhile stays bound (as
  // kube-scheduler leaves it): the gang's next placement follows its volume.
  std::vector<VolumeWrite> undo;
  for (const VolumeWrite& w : p.writes) {
    auto claim = claims_.get(w.claim_namespace, w.claim);
    if (claim == nullptr || claim->isBound()) continue;
    if (w.volume.empty()) {
      undo.push_back(w);
    } else if (auto pv = volumes_.get("", w.volume);
               pv && pv->claim_name == w.claim && pv->claim_namespace == w.claim_namespace &&
               pv->phase != "Bound") {
      VolumeWrite u = w;
      u.volume_resource_version = pv->meta.resource_version;
      undo.push_back(std::move(u));
    }
  }
  if (!undo.empty()) {
    asio::co_spawn(strand_, [api = api_, undo]() -> asio::awaitable<void> {
      for (const VolumeWrite& w : undo) {
        absl::Status s;
        if (w.volume.empty()) {
          s = co_await api->setClaimSelectedNode(w.claim_namespace, w.claim, w.claim_uid, "");
        } else {
          s = co_await api->setVolumeClaimRef(w.volume, "", "", "", w.volume_resource_version);
        }
        if (!s.ok())
          MUSTER_LOG_WARNING("Withdrawing a volume binding failed", "claim",
                             proto::objectKey(w.claim_namespace, w.claim), "error", s.ToString());
      }
    }, proto::dieOnException("volume binding withdrawal"));
  }
  // As a failed bind of every member: forgotten in the cache, requeued, an Event each.
  Binder::Result result;
  for (const auto& member : p.attempt.members)
    result.failed.push_back({member->key, absl::FailedPreconditionError(
                                              absl::StrCat("volume binding: ", message))});
  onBound(p.attempt, p.placement, std::move(result));
}

// Events per gang attempt: the first few members only.
constexpr size_t kEventsPerAttempt = 5;
// Attempts in a row whose binds fail before the gang's bound members are rolled back.
constexpr int kBindFailuresBeforeRollback = 3;

void Scheduler::reportUnschedulable(const GangAttempt& attempt, const Unschedulable& verdict) {
  MUSTER_LOG_INFO(3, "Gang unschedulable", "gang", attempt.key.toString(), "reason",
                  verdict.message);
  if (verdict.waiting_for_members) {
    // Members are still being created. For queue.waitingConditionAfterSeconds nothing is written
    // (a gang that completes meanwhile costs no status write at all, as kube-scheduler's gang
    // plugin holds such pods in PreEnqueue); then one stable condition per pod, no Events, so a
    // gang of n pods costs n writes rather than n per arriving member.
    // A missing PodGroup is said at once: nothing will arrive to make it less true.
    std::string message =
        attempt.spec.pod_group_missing
            ? verdict.message
            : absl::StrCat("gang ", attempt.key.toString(),
                           " is waiting for its members: it is placed once ", attempt.spec.min_member,
                           attempt.spec.min_member == 1 ? " pod exists" : " pods exist");
    if (attempt.spec.pod_group_missing || attempt.report_waiting_condition) {
      for (const auto& member : attempt.members) status_.unschedulable(member->pod(), message);
      if (!attempt.spec.pod_group_missing) setPodGroupScheduled(attempt, false, message);
    }
    if (attempt.report_waiting) {
      // Long enough that it is not just members still being created: say what is missing.
      std::string warning = absl::StrCat(
          verdict.message, "; still waiting ", config_.queue_waiting_event_after_seconds,
          "s after its first member was seen");
      for (size_t i = 0; i < attempt.members.size() && i < kEventsPerAttempt; ++i)
        events_.event(attempt.members[i]->pod(), "Warning", "FailedScheduling", warning);
    }
    queue_.reportUnschedulable(attempt, verdict, cache_);
    return;
  }
  // Every member gets the condition; the Event goes to the first few members only (the
  // recorder also rate-limits per pod and overall), so a 1,000-pod gang is one burst of five.
  for (size_t i = 0; i < attempt.members.size(); ++i) {
    status_.unschedulable(attempt.members[i]->pod(), verdict.message);
    if (i < kEventsPerAttempt)
      events_.event(attempt.members[i]->pod(), "Warning", "FailedScheduling", verdict.message);
  }
  setPodGroupScheduled(attempt, false, verdict.message);
  if (attempt.timed_out && !attempt.members.empty()) {
    events_.event(attempt.members.front()->pod(), "Warning", "GangScheduleTimeout",
                    absl::StrCat("gang ", attempt.key.toString(), " has waited longer than its ",
                                 attempt.spec.schedule_timeout_seconds,
                                 "s schedule timeout: ", verdict.message));
  }
  queue_.reportUnschedulable(attempt, verdict, cache_);
}

void Scheduler::onBound(const GangAttempt& attempt, const GangPlacement& placement,
                        Binder::Result result) {
  if (result.failed.empty()) {
    absl::Time newest = absl::InfinitePast();
    for (const auto& member : attempt.members) newest = std::max(newest, creationTime(member->pod()));
    if (newest != absl::InfinitePast())
      m().gang_latency.observe(absl::ToDoubleSeconds(clock_() - newest));
    MUSTER_LOG_INFO(2, "Gang bound", "gang", attempt.key.toString(), "pods",
                    placement.assignments.size(), "domain", placement.describe());
    setPodGroupScheduled(attempt, true,
                         absl::StrCat(placement.assignments.size() + attempt.bound.size(),
                                      " pods bound (", placement.describe(), ")"));
    holds_.erase(attempt.key);
    queue_.reportBound(attempt.key);
    return;
  }
  // Some members are bound, some not. The failed ones are forgotten in the cache and go back to
  // the queue; their next placement must join the bound ones (or those are rolled back then).
  std::vector<std::string> failed, requeue;
  for (const auto& f : result.failed) {
    if (cache_.isAssumed(f.pod_key)) (void)cache_.forget(f.pod_key);
    failed.push_back(f.pod_key);
    // Only pods that still exist unbound go back (a deleted one would never leave the queue).
    auto slash = f.pod_key.find('/');
    auto pod = pods_.get(f.pod_key.substr(0, slash), f.pod_key.substr(slash + 1));
    if (!proto::isNotFound(f.status) && pod && pod->spec.node_name.empty() && !isHeldBack(*pod))
      requeue.push_back(f.pod_key);
  }
  std::string message = absl::StrCat("binding ", failed.size(), " of ", placement.assignments.size(),
                                     " pods of gang ", attempt.key.toString(), " failed: ",
                                     result.failed.front().status.message());
  for (const auto& member : attempt.members) {
    if (std::find(failed.begin(), failed.end(), member->key) != failed.end())
      events_.event(member->pod(), "Warning", "FailedScheduling", message);
  }
  const int failures_in_a_row = queue_.reportBindFailed(attempt, requeue);
  // A bind that keeps failing (refused by a webhook or RBAC, a pod that cannot be bound) must not
  // hold the rest of the gang on its nodes for ever: after a few tries in a row the bound members
  // are rolled back like any gang that cannot be completed. A member that is gone (NotFound) is
  // not the bind's fault: its gang waits for a replacement.
  bool only_gone = std::all_of(result.failed.begin(), result.failed.end(),
                               [](const auto& f) { return proto::isNotFound(f.status); });
  GangAttempt holding = attempt;
  for (size_t i = 0; i < attempt.members.size(); ++i) {
    if (std::find(result.bound.begin(), result.bound.end(), attempt.members[i]->key) !=
        result.bound.end())
      holding.bound.emplace_back(attempt.members[i]->key, placement.assignments[i].node);
  }
  if (!only_gone && !holding.bound.empty() && failures_in_a_row >= kBindFailuresBeforeRollback) {
    MUSTER_LOG_WARNING("Gang binds keep failing, rolling back its bound members", "gang",
                       attempt.key.toString(), "failures", failures_in_a_row, "bound",
                       holding.bound.size());
    binder_.rollback(holding,
                     absl::StrCat("binding its other members failed ", failures_in_a_row,
                                  " times in a row: ", result.failed.front().status.message()),
                     [this](std::string_view ns, std::string_view name) {
                       return pods_.get(ns, name);
                     });
  }
  kick();
}

// --- preemption ---------------------------------------------------------------------------------

namespace {

proto::PodCondition preemptedCondition(std::string message, absl::Time now) {
  proto::PodCondition c;
  c.type = vocab::kPreemptedCondition;
  c.status = "True";
  c.reason = vocab::kPreemptedReason;
  c.message = std::move(message);
  c.last_transition_time = proto::rfc3339(now);
  return c;
}


}  // namespace

int Scheduler::drainingOn(const std::set<std::string>& nodes, int32_t priority) const {
  int n = 0;
  cache_.forEachPlacedPodEntry([&](std::string_view, const PlacedPod& placed, NodeId node,
                                   const Resources&, bool) {
    if ((placed.terminating || placed.preempted) && placed.priority < priority &&
        nodes.contains(cache_.node(node).name))
      ++n;
  });
  return n;
}

bool Scheduler::pdbRefuses(const GangKey& unit, const std::vector<UnitMember>& members) const {
  const std::string& ns = unit.namespace_;
  for (const auto& budget : pdbs_.byIndex(kBudgetsByNamespaceIndex, ns)) {
    if (!budget->selector) continue;
    int32_t matched = 0;
    for (const UnitMember& m : members) {
      auto pod = pods_.get(ns, std::string_view(m.pod).substr(ns.size() + 1));
      if (pod && budget->selector->matches(pod->meta.labels)) ++matched;
    }
    if (matched > 0 && matched > budget->disruptions_allowed) return true;
  }
  return false;
}

void Scheduler::preempt(const GangAttempt& attempt, const GangRequest& request,
                        Unschedulable* verdict) {
  if (!config_.preemption_enabled || !attempt.bound.empty() || attempt.members.empty()) return;
  for (const auto& member : attempt.members) {
    if (!mayPreempt(member->pod())) {
      absl::StrAppend(&verdict->message, " Not preempting: preemptionPolicy is Never.");
      return;
    }
  }
  const absl::Time now = clock_();
  // An earlier preemption for this gang: while its victims terminate, the freed room is held
  // (nominatedNodeName) and nothing more is preempted. Also after a restart of the scheduler: the
  // nominations are on the pods.
  std::set<std::string> nominated;
  for (const auto& member : attempt.members)
    if (!member->pod().status.nominated_node_name.empty())
      nominated.insert(member->pod().status.nominated_node_name);
  auto hold = holds_.find(attempt.key);
  if (hold != holds_.end()) nominated.insert(hold->second.nodes.begin(), hold->second.nodes.end());
  // Reclaim may take equal or higher priorities: with tenancy, every pod going counts.
  const int32_t drain_below =
      tenancy_.enabled() ? std::numeric_limits<int32_t>::max() : attempt.priority;
  if (!nominated.empty()) {
    const int draining = drainingOn(nominated, drain_below);
    if (hold == holds_.end()) {
      Hold h{nominated, now + absl::Seconds(config_.preemption_nomination_timeout_seconds), {}};
      for (const auto& member : attempt.members)
        if (!member->pod().status.nominated_node_name.empty()) h.nominated.push_back(PodRef::of(member->pod()));
      hold = holds_.emplace(attempt.key, std::move(h)).first;
    }
    if (draining > 0 && now < hold->second.until) {
      absl::StrAppend(&verdict->message, " Waiting for ", draining, draining == 1 ? " pod" : " pods",
                      " preempted for it to terminate on ", joinSome(nominated), ".");
      return;
    }
    // The victims are gone (or the hold ran out) and it still does not fit: the cluster changed
    // meanwhile. Choose again.
  }
  m().preemption_attempts.inc();
  PreemptionRequest p;
  p.priority = attempt.priority;
  p.now = now;
  p.protected_priority = config_.preemption_protected_priority;
  p.min_runtime_seconds = [this](int64_t priority) { return config_.minRuntimeSeconds(priority); };
  p.cooling_down = [this, now](const GangKey& key) {
    auto it = preempted_at_.find(key);
    return it != preempted_at_.end() &&
           now - it->second < absl::Seconds(config_.preemption_victim_cooldown_seconds);
  };
  p.pdb_refuses = [this](const GangKey& unit, const std::vector<UnitMember>& members) {
    return pdbRefuses(unit, members);
  };
  PlacementOptions options;
  options.single_pod_strategy = config_.single_pod_strategy;
  options.namespace_labels = [this](std::string_view ns) { return namespaceLabels(ns); };
  const auto started = std::chrono::steady_clock::now();
  // With tenancy: a gang of a queue below its fair share first reclaims borrowed work from queues
  // above theirs; otherwise (or when that finds nothing) priority preemption, which takes no
  // other queue's work within its quota.
  std::string reclaimer;
  PreemptionResult result = NoPreemption{};
  if (tenancy_.enabled()) {
    refreshTenancy(/*now_if_changed=*/true);
    const std::string queue = tenancy_.queueOf(attempt.members.front()->pod());
    tenancy::Request asked;
    for (const PodInfoPtr& member : attempt.members) asked += tenancy::Request{member->requests, member->gpu_milli};
    // The hooks (scheduler/tenancy/reclaim.h) hold tenancy_ by reference; choosePreemption uses
    // them synchronously, here.
    if (tenancy_.belowFairShare(queue)) {
      PreemptionRequest r = p;
      tenancy::withReclaimHooks(r, tenancy_, queue, asked, /*reclaim=*/true);
      result = choosePreemption(request, r, cache_, options);
      if (std::holds_alternative<PreemptionPlan>(result)) reclaimer = queue;
    }
    if (reclaimer.empty()) {
      tenancy::withReclaimHooks(p, tenancy_, queue, asked, /*reclaim=*/false);
      result = choosePreemption(request, p, cache_, options);
    }
  } else {
    result = choosePreemption(request, p, cache_, options);
  }
  m().preemption_duration.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (const auto* none = std::get_if<NoPreemption>(&result)) {
    MUSTER_LOG_INFO(2, "No preemption", "gang", attempt.key.toString(), "reason", none->message);
    if (!none->message.empty()) absl::StrAppend(&verdict->message, " ", none->message, ".");
    if (hold != holds_.end()) releaseHold(attempt);
    return;
  }
  const PreemptionPlan& plan = std::get<PreemptionPlan>(result);
  // Hold the room: each member nominated to the node the simulation gave it, the nodes it uses
  // (and its victims') watched for pods still terminating.
  Hold h;
  for (const std::string& n : plan.victimNodes()) h.nodes.insert(n);
  for (const Assignment& a : plan.placement.assignments) h.nodes.insert(a.node);
  h.until = now + absl::Seconds(config_.preemption_nomination_timeout_seconds);
  auto nominate = [&] {
    for (size_t i = 0; i < attempt.members.size() && i < plan.placement.assignments.size(); ++i) {
      const Pod& pod = attempt.members[i]->pod();
      const std::string& node = plan.placement.assignments[i].node;
      h.nominated.push_back(PodRef::of(pod));
      if (pod.status.nominated_node_name == node) continue;
      asio::co_spawn(strand_, [api = api_, ref = PodRef::of(pod), node]() -> asio::awaitable<void> {
        absl::Status s = co_await api->setNominatedNodeName(ref, node);
        if (!s.ok() && !proto::isNotFound(s))
          MUSTER_LOG_WARNING("nominatedNodeName not written", "pod", ref.key(), "error", s.ToString());
      }, proto::dieOnException("nominate"));
    }
    holds_[attempt.key] = std::move(h);
  };
  if (plan.victims.empty()) {
    // Pods preempted earlier (by this gang before a restart, or by a gang since gone) are
    // terminating where it fits: wait for them rather than choose more.
    const int draining = drainingOn(h.nodes, drain_below);
    MUSTER_LOG_INFO(2, "Waiting for preempted pods", "gang", attempt.key.toString(), "pods",
                    draining, "placement", plan.placement.describe());
    absl::StrAppend(&verdict->message, " Waiting for ", draining, draining == 1 ? " pod" : " pods",
                    " preempted earlier to terminate on ", joinSome(h.nodes), ".");
    nominate();
    return;
  }
  const std::string preemptor = attempt.key.toString();
  const std::string message =
      reclaimer.empty() ? absl::StrCat("Preempted by ", preemptor)
                        : absl::StrCat("Reclaimed by queue ", reclaimer, " for gang ", preemptor);
  std::vector<std::string> victim_names;
  std::vector<PodRef> victims;
  for (const VictimUnit& unit : plan.victims) {
    victim_names.push_back(absl::StrCat(unit.key.toString(), " (priority ", unit.priority, ", ",
                                        unit.pods.size(), unit.pods.size() == 1 ? " pod)" : " pods)"));
    preempted_at_[unit.key] = now;
    size_t told = 0;
    for (const std::string& key : unit.pods) {
      auto slash = key.find('/');
      auto pod = pods_.get(key.substr(0, slash), key.substr(slash + 1));
      if (!pod) continue;
      victims.push_back(PodRef::of(*pod));
      tenancy_.markGoing(key);
      evict_sent_[key] = now;
      if (told++ < kEventsPerAttempt)
        events_.event(*pod, "Warning", reclaimer.empty() ? "Preempted" : "Reclaimed", message);
    }
  }
  m().preemption_victims.observe(static_cast<double>(victims.size()));
  MUSTER_LOG_INFO(2, "Preempting", "gang", preemptor, "priority", attempt.priority, "victims",
                  absl::StrJoin(victim_names, ", "), "pods", victims.size(), "nodes",
                  absl::StrJoin(plan.victimNodes(), ","), "placement", plan.placement.describe(),
                  "simulations", plan.place_calls);
  if (!reclaimer.empty()) noteReclaim(reclaimer, plan);
  markAndEvict(std::move(victims), {}, message);
  nominate();
  const std::string what =
      absl::StrCat(reclaimer.empty() ? "Preempting " : "Reclaiming for queue " + reclaimer + ": ",
                   plan.describe());
  for (size_t i = 0; i < attempt.members.size() && i < kEventsPerAttempt; ++i)
    events_.event(attempt.members[i]->pod(), "Normal", "Preempting", what);
  absl::StrAppend(&verdict->message, " ", what, ".");
}

void Scheduler::markAndEvict(std::vector<PodRef> unmarked, std::vector<PodRef> marked,
                             std::string message) {
  if (unmarked.empty() && marked.empty()) return;
  asio::co_spawn(
      strand_,
      [this, api = api_, unmarked = std::move(unmarked), marked = std::move(marked),
       mark = preemptedCondition(std::move(message), clock_())]() mutable -> asio::awaitable<void> {
        // Every pod is marked before any is evicted, so a crash in between leaves marks (which
        // finishPreemptions completes) and never an unmarked gang partly evicted. Both named and
        // moved, never written in the call (proto/concurrently.h says why).
        auto mark_one = [&api, &mark, &marked](const PodRef& ref) -> asio::awaitable<void> {
          absl::Status s = co_await api->setPodCondition(ref, mark);
          if (s.ok()) {
            marked.push_back(ref);
          } else if (!proto::isNotFound(s) && !proto::isConflict(s)) {  // gone, or replaced
            MUSTER_LOG_WARNING("Cannot mark pod preempted", "pod", ref.key(), "error", s.ToString());
          }
        };
        co_await proto::forEachConcurrently(strand_, std::move(unmarked),
                                            kPreemptionRequestsInFlight, std::move(mark_one));
        if (stopping_) co_return;
        auto evict_one = [this, &api](const PodRef& ref) -> asio::awaitable<void> {
          if (stopping_) co_return;
          // The retry is counted from when the eviction went, not from when it was chosen.
          if (auto sent = evict_sent_.find(ref.key()); sent != evict_sent_.end())
            sent->second = clock_();
          absl::Status s = co_await api->evict(ref);
          if (!s.ok() && !proto::isNotFound(s) && !proto::isConflict(s))
            MUSTER_LOG_WARNING("Eviction of a preempted pod refused; sent again shortly", "pod",
                               ref.key(), "error", s.ToString());
        };
        co_await proto::forEachConcurrently(strand_, std::move(marked),
                                            kPreemptionRequestsInFlight, std::move(evict_one));
      },
      proto::dieOnException("preemption evictions"));
}

void Scheduler::finishPreemptions() {
  if (marked_units_.empty()) return;
  const absl::Time now = clock_();
  std::set<GangKey> units = std::exchange(marked_units_, {});
  struct Todo {
    std::vector<PodRef> unmarked, marked;
    std::string message;
    bool pending = false;  // pods still to wait for
  };
  std::map<GangKey, Todo> todo;
  cache_.forEachPlacedPodEntry([&](std::string_view key, const PlacedPod& placed, NodeId,
                                   const Resources&, bool) {
    if (!units.contains(placed.unit) || placed.terminating) return;
    Todo& t = todo[placed.unit];
    auto sent = evict_sent_.find(av(key));
    if (sent != evict_sent_.end() && now - sent->second < kEvictionRetry) {
      t.pending = true;
      return;
    }
    const std::string k(key);
    auto slash = k.find('/');
    auto pod = pods_.get(k.substr(0, slash), k.substr(slash + 1));
    if (!pod) return;
    if (const proto::PodCondition* c = pod->findCondition(vocab::kPreemptedCondition);
        c != nullptr && c->status == "True") {
      t.marked.push_back(PodRef::of(*pod));
      if (t.message.empty()) t.message = c->message;
    } else {
      t.unmarked.push_back(PodRef::of(*pod));
    }
    evict_sent_[k] = now;
    t.pending = true;
  });
  for (auto& [unit, t] : todo) {
    if (t.pending) marked_units_.insert(unit);
    if (t.unmarked.empty() && t.marked.empty()) continue;
    MUSTER_LOG_INFO(2, "Finishing a preemption", "gang", unit.toString(), "toMark",
                    t.unmarked.size(), "toEvict", t.unmarked.size() + t.marked.size());
    markAndEvict(std::move(t.unmarked), std::move(t.marked),
                 t.message.empty() ? std::string("Preempted") : std::move(t.message));
  }
}

void Scheduler::releaseHold(const GangAttempt& attempt) {
  auto it = holds_.find(attempt.key);
  if (it == holds_.end()) return;
  holds_.erase(it);
  for (const auto& member : attempt.members) {
    if (member->pod().status.nominated_node_name.empty()) continue;
    asio::co_spawn(strand_, [api = api_, ref = PodRef::of(member->pod())]() -> asio::awaitable<void> {
      absl::Status s = co_await api->setNominatedNodeName(ref, "");
      if (!s.ok() && !proto::isNotFound(s))
        MUSTER_LOG_WARNING("nominatedNodeName not cleared", "pod", ref.key(), "error", s.ToString());
    }, proto::dieOnException("clear nomination"));
  }
}

void Scheduler::releaseExpiredHolds() {
  const absl::Time now = clock_();
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (now < it->second.until) {
      ++it;
      continue;
    }
    MUSTER_LOG_INFO(2, "Preemption hold expired", "gang", it->first.toString());
    for (const PodRef& ref : it->second.nominated) {
      auto pod = pods_.get(ref.namespace_, ref.name);
      if (!pod || !pod->spec.node_name.empty() || pod->status.nominated_node_name.empty()) continue;
      asio::co_spawn(strand_, [api = api_, ref]() -> asio::awaitable<void> {
        absl::Status s = co_await api->setNominatedNodeName(ref, "");
        if (!s.ok() && !proto::isNotFound(s))
          MUSTER_LOG_WARNING("nominatedNodeName not cleared", "pod", ref.key(), "error", s.ToString());
      }, proto::dieOnException("clear nomination"));
    }
    it = holds_.erase(it);
  }
  // The cooldown needs only recent victims.
  absl::erase_if(preempted_at_, [&](const auto& entry) {
    return now - entry.second >= absl::Seconds(config_.preemption_victim_cooldown_seconds);
  });
}

}  // namespace muster::scheduler
