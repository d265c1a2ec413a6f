#include "scheduler/scheduler.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/codec.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "scheduler/pod_info.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace asio = proto::asio;
using proto::Node;
using proto::Pod;
using proto::PodGroup;

namespace {

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
  metrics::Family<metrics::Counter>& binds = metrics::defaultRegistry().counter(
      "muster_binds_total", "Pod bindings by result (success, error).", {"result"});
  metrics::Counter& evictions = metrics::defaultRegistry()
                                    .counter("muster_gang_evictions_total",
                                             "Bound gang members evicted because the rest of "
                                             "their gang could not join them.")
                                    .with();
  metrics::Family<metrics::Counter>& relists = metrics::defaultRegistry().counter(
      "muster_informer_relists_total", "Informer relists forced by 410 Gone.", {"resource"});
  metrics::Family<metrics::Counter>& watch_errors = metrics::defaultRegistry().counter(
      "muster_informer_watch_errors_total", "Watches that ended in an error.", {"resource"});
};

Metrics& m() {
  static Metrics* metrics = new Metrics();
  return *metrics;
}

bool terminal(const Pod& pod) { return isTerminal(pod); }

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

template <class T>
std::unique_ptr<proto::Informer<T>> makeInformer(const std::shared_ptr<proto::Client>& client,
                                                 const proto::Resource& resource,
                                                 asio::any_io_executor executor) {
  proto::ReflectorOptions options;
  options.name = resource.plural;
  return std::make_unique<proto::Informer<T>>(
      proto::makeClientListerWatcher(client, resource), executor, options);
}

absl::Time creationTime(const Pod& pod) {
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, pod.meta.creation_timestamp, &t, &err)) return t;
  return absl::InfinitePast();
}

}  // namespace

struct Scheduler::BindBatch {
  GangAttempt attempt;
  GangPlacement placement;
  size_t remaining = 0;
  std::vector<std::string> failed;
  std::vector<std::string> errors;
};

Scheduler::Scheduler(std::shared_ptr<proto::Client> client, SchedulerConfig config,
                     asio::any_io_executor executor, std::string identity)
    : client_(std::move(client)),
      config_(std::move(config)),
      identity_(std::move(identity)),
      executor_(executor),
      strand_(asio::make_strand(executor)),
      recorder_(client_, executor,
                RecorderOptions{"muster-scheduler", identity_, 20, 100,
                                static_cast<int>(config_.events_max_per_gang_per_minute)}),
      cache_(config_.topology_levels),
      queue_(config_, [] { return absl::Now(); },
             [this](std::string_view ns, std::string_view name) -> const PodGroup* {
               auto it = groups_.find(proto::objectKey(ns, name));
               return it == groups_.end() ? nullptr : it->second.get();
             }) {
  for (const char* q : {"active", "backoff", "unschedulable", "waiting"}) m().pending.with({q});
  for (const char* r : {"scheduled", "unschedulable", "error"}) m().attempts.with({r});
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
  pods_ = makeInformer<Pod>(client_, proto::resources::kPods, executor_);
  nodes_ = makeInformer<Node>(client_, proto::resources::kNodes, executor_);
  pod_groups_ = makeInformer<PodGroup>(client_, proto::resources::kPodGroups, executor_);
  topologies_ = makeInformer<proto::NodeTopology>(client_, proto::resources::kNodeTopologies,
                                                  executor_);
  pods_->addIndex("podgroup", [](const Pod& p) {
    auto it = p.meta.labels.find(kPodGroupLabel);
    if (it == p.meta.labels.end()) return std::vector<std::string>{};
    return std::vector<std::string>{proto::objectKey(p.meta.namespace_, it->second)};
  });
  pods_->addHandlers({
      [this](const auto& p) { asio::post(strand_, [this, p] { onPodAdd(p); }); },
      [this](const auto& o, const auto& p) {
        asio::post(strand_, [this, o, p] { onPodUpdate(o, p); });
      },
      [this](const auto& p) { asio::post(strand_, [this, p] { onPodDelete(p); }); },
  });
  nodes_->addHandlers({
      [this](const auto& n) { asio::post(strand_, [this, n] { onNode(nullptr, n); }); },
      [this](const auto& o, const auto& n) { asio::post(strand_, [this, o, n] { onNode(o, n); }); },
      [this](const auto& n) {
        asio::post(strand_, [this, n] {
          cache_.removeNode(*n);
          kick();
        });
      },
  });
  pod_groups_->addHandlers({
      [this](const auto& g) { asio::post(strand_, [this, g] { onPodGroup(g, false); }); },
      [this](const auto&, const auto& g) { asio::post(strand_, [this, g] { onPodGroup(g, false); }); },
      [this](const auto& g) { asio::post(strand_, [this, g] { onPodGroup(g, true); }); },
  });
  topologies_->addHandlers({
      [this](const auto& t) { asio::post(strand_, [this, t] { onNodeTopology(t, false); }); },
      [this](const auto&, const auto& t) {
        asio::post(strand_, [this, t] { onNodeTopology(t, false); });
      },
      [this](const auto& t) { asio::post(strand_, [this, t] { onNodeTopology(t, true); }); },
  });
  nodes_->start();
  pod_groups_->start();
  topologies_->start();
  pods_->start();
  asio::co_spawn(strand_, loop(), asio::detached);
  asio::co_spawn(strand_, housekeeping(), asio::detached);
}

void Scheduler::stop() {
  if (stopping_.exchange(true)) return;
  ready_ = false;
  if (pods_) pods_->stop();
  if (nodes_) nodes_->stop();
  if (pod_groups_) pod_groups_->stop();
  if (topologies_) topologies_->stop();
  asio::post(strand_, [this] { kick(); });
}

void Scheduler::kick() {
  if (wakeup_) wakeup_->cancel();
}

// --- informer events ------------------------------------------------------------------------

void Scheduler::queuePod(const Pod& pod) {
  if (!config_.handlesSchedulerName(pod.spec.scheduler_name)) return;
  std::string key = podKey(pod);
  // Bound by us, and the informer has not shown the binding yet.
  if (pod.spec.node_name.empty() && cache_.isAssumed(key)) return;
  absl::Status status = queue_.addOrUpdatePod(pod);
  if (!status.ok() && pod.spec.node_name.empty() && !pod.meta.deletion_timestamp) {
    std::string message(status.message());
    recorder_.event(pod, "Warning", "FailedScheduling", message);
    recorder_.unschedulable(pod, message);
    MUSTER_LOG_INFO(2, "Pod not queued", "pod", key, "reason", message);
  }
}

void Scheduler::onPodAdd(const std::shared_ptr<const Pod>& pod) {
  cache_.addPod(*pod);
  queuePod(*pod);
  kick();
}

void Scheduler::onPodUpdate(const std::shared_ptr<const Pod>& old_pod,
                            const std::shared_ptr<const Pod>& pod) {
  cache_.updatePod(*pod);
  if (!pod->spec.node_name.empty() && !terminal(*old_pod) && terminal(*pod))
    queue_.onClusterEvent(ClusterEvent::kPodTerminated);
  queuePod(*pod);
  kick();
}

void Scheduler::onPodDelete(const std::shared_ptr<const Pod>& pod) {
  std::string key = podKey(*pod);
  if (cache_.isAssumed(key)) (void)cache_.forget(key);
  cache_.removePod(*pod);
  if (config_.handlesSchedulerName(pod->spec.scheduler_name)) queue_.removePod(key);
  if (!pod->spec.node_name.empty()) queue_.onClusterEvent(ClusterEvent::kPodDeleted);
  kick();
}

void Scheduler::onNode(const std::shared_ptr<const Node>& old_node,
                       const std::shared_ptr<const Node>& node) {
  if (!old_node) {
    cache_.addNode(*node);
    queue_.onClusterEvent(ClusterEvent::kNodeAdded);
  } else {
    cache_.updateNode(*node);
    if (nodeChangedForScheduling(*old_node, *node)) queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
  }
  kick();
}

void Scheduler::onPodGroup(const std::shared_ptr<const PodGroup>& group, bool deleted) {
  std::string key = proto::objectKey(*group);
  if (deleted) {
    groups_.erase(key);
    group_status_written_.erase(key);
  } else {
    groups_[key] = group;
  }
  queue_.onPodGroup(group->meta.namespace_, group->meta.name);
  kick();
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
  cache_.setNodeDevices(node, std::move(devices));
  queue_.onClusterEvent(ClusterEvent::kNodeUpdated);
  kick();
}

// --- the loop -----------------------------------------------------------------------------------

asio::awaitable<void> Scheduler::loop() {
  wakeup_ = std::make_unique<asio::steady_timer>(strand_);
  while (!stopping_ && !(pods_->hasSynced() && nodes_->hasSynced())) {
    wakeup_->expires_after(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    co_await wakeup_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  // NodeTopologies are worth a short wait (placing without them ignores GPU↔NIC alignment), but
  // not a hang: the CRD may not be installed, or no agent runs.
  const auto topology_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!stopping_ && !topologies_->hasSynced() &&
         std::chrono::steady_clock::now() < topology_deadline) {
    wakeup_->expires_after(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    co_await wakeup_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (stopping_) co_return;
  if (!topologies_->hasSynced()) {
    MUSTER_LOG_WARNING("NodeTopologies not listed yet (is the CRD installed and may the scheduler "
                       "list them?); placing without GPU-NIC alignment until they are");
  }
  // The informers posted their first lists' events to this strand before they reported synced;
  // let those run (the strand is FIFO) so the cache holds every node, pod and topology first.
  co_await asio::post(strand_, asio::use_awaitable);
  ready_ = true;
  MUSTER_LOG_INFO(1, "Caches synced, scheduling", "nodes", cache_.nodeCount(), "pods",
                  cache_.podCount());
  while (!stopping_) {
    std::optional<GangAttempt> attempt = queue_.pop();
    if (!attempt) {
      updateGauges();
      auto wake = queue_.nextWakeup();
      auto wait = wake ? std::max(absl::ZeroDuration(), *wake - absl::Now()) : absl::Hours(1);
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

asio::awaitable<void> Scheduler::housekeeping() {
  asio::steady_timer timer(strand_);
  while (!stopping_) {
    timer.expires_after(std::chrono::seconds(1));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_ || !ready_) continue;
    syncPodGroupStatus();
    updateGauges();
    auto count = [](auto& family, const std::string& resource, uint64_t now, uint64_t& seen) {
      if (now > seen) family.with({resource}).inc(static_cast<double>(now - seen));
      seen = now;
    };
    auto ps = pods_->stats(), ns = nodes_->stats();
    count(m().relists, "pods", ps.relists_gone, seen_pod_stats_.relists_gone);
    count(m().relists, "nodes", ns.relists_gone, seen_node_stats_.relists_gone);
    count(m().watch_errors, "pods", ps.watch_errors, seen_pod_stats_.watch_errors);
    count(m().watch_errors, "nodes", ns.watch_errors, seen_node_stats_.watch_errors);
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
    observe("unschedulable");
    reportUnschedulable(attempt, *verdict);
    return;
  }
  GangRequest request = queue_.buildRequest(attempt);
  PlacementResult result = place(request, cache_, PlacementOptions{config_.single_pod_strategy});
  if (auto* verdict = std::get_if<Unschedulable>(&result)) {
    observe("unschedulable");
    reportUnschedulable(attempt, *verdict);
    if (verdict->evict_bound_members) evictBoundMembers(attempt, verdict->message);
    return;
  }
  auto& placement = std::get<GangPlacement>(result);
  for (size_t i = 0; i < placement.assignments.size(); ++i) {
    absl::Status assumed = cache_.assume(*attempt.members[i], placement.assignments[i].node);
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
  }
  queue_.reportPlaced(attempt, placement);
  observe("scheduled");
  MUSTER_LOG_INFO(2, "Gang placed", "gang", attempt.key.toString(), "pods",
                  placement.assignments.size(), "domain", placement.describe(), "gpuNicPods",
                  placement.gpu_nic_pods, "alignedPCIeSwitch", placement.gpu_nic_pcie,
                  "alignedNUMANode", placement.gpu_nic_numa);
  bindGang(attempt, placement);
}

void Scheduler::reportUnschedulable(const GangAttempt& attempt, const Unschedulable& verdict) {
  MUSTER_LOG_INFO(3, "Gang unschedulable", "gang", attempt.key.toString(), "reason",
                  verdict.message);
  if (verdict.waiting_for_members) {
    // Members are still being created: one stable condition per pod, no Events, so a gang of
    // n pods costs n writes rather than n per arriving member.
    std::string message = absl::StrCat("gang ", attempt.key.toString(),
                                       " is waiting for its members: it is placed once ",
                                       attempt.spec.min_member, " pods exist");
    for (const auto& member : attempt.members) recorder_.unschedulable(member->pod, message);
    queue_.reportUnschedulable(attempt, verdict, cache_);
    return;
  }
  // Every member gets the condition; the Event goes to the first few members only (the
  // recorder also rate-limits per pod and overall), so a 1,000-pod gang is one burst of five.
  constexpr size_t kEventsPerAttempt = 5;
  for (size_t i = 0; i < attempt.members.size(); ++i) {
    recorder_.unschedulable(attempt.members[i]->pod, verdict.message);
    if (i < kEventsPerAttempt)
      recorder_.event(attempt.members[i]->pod, "Warning", "FailedScheduling", verdict.message);
  }
  if (attempt.timed_out && !attempt.members.empty()) {
    recorder_.event(attempt.members.front()->pod, "Warning", "GangScheduleTimeout",
                    absl::StrCat("gang ", attempt.key.toString(), " has waited longer than its ",
                                 attempt.spec.schedule_timeout_seconds,
                                 "s schedule timeout: ", verdict.message));
  }
  queue_.reportUnschedulable(attempt, verdict, cache_);
}

// --- binding ------------------------------------------------------------------------------------

void Scheduler::bindGang(const GangAttempt& attempt, const GangPlacement& placement) {
  auto batch = std::make_shared<BindBatch>();
  batch->attempt = attempt;
  batch->placement = placement;
  batch->remaining = placement.assignments.size();
  for (size_t i = 0; i < placement.assignments.size(); ++i) {
    asio::co_spawn(strand_, [this, batch, i]() -> asio::awaitable<void> {
      const Pod& pod = batch->attempt.members[i]->pod;
      const std::string& node = batch->placement.assignments[i].node;
      absl::Status status = stopping_ ? absl::CancelledError("scheduler stopping")
                                      : co_await client_->bind(pod.meta.namespace_, pod.meta.name,
                                                               pod.meta.uid, node);
      // An earlier life of this scheduler (or a retried request) already bound it there.
      if (proto::isConflict(status) &&
          std::string(status.message()).find("\"" + node + "\"") != std::string::npos)
        status = absl::OkStatus();
      co_await asio::post(strand_, asio::use_awaitable);
      onBound(batch, i, std::move(status));
    }, asio::detached);
  }
}

void Scheduler::onBound(const std::shared_ptr<BindBatch>& batch, size_t index,
                        absl::Status status) {
  const Pod& pod = batch->attempt.members[index]->pod;
  const std::string& node = batch->placement.assignments[index].node;
  std::string key = batch->attempt.members[index]->key;
  if (status.ok()) {
    m().binds.with({"success"}).inc();
    MUSTER_LOG_INFO(2, "Bound pod", "pod", key, "node", node, "gang",
                    batch->attempt.key.toString());
    recorder_.event(pod, "Normal", "Scheduled",
                    absl::StrCat("Successfully assigned ", key, " to ", node));
  } else {
    m().binds.with({"error"}).inc();
    MUSTER_LOG_WARNING("Bind failed", "pod", key, "node", node, "error", status.ToString());
    batch->failed.push_back(key);
    batch->errors.push_back(std::string(status.message()));
    if (cache_.isAssumed(key)) (void)cache_.forget(key);
  }
  if (--batch->remaining > 0) return;
  if (batch->failed.empty()) {
    absl::Time newest = absl::InfinitePast();
    for (const auto& member : batch->attempt.members)
      newest = std::max(newest, creationTime(member->pod));
    if (newest != absl::InfinitePast())
      m().gang_latency.observe(absl::ToDoubleSeconds(absl::Now() - newest));
    MUSTER_LOG_INFO(2, "Gang bound", "gang", batch->attempt.key.toString(), "pods",
                    batch->placement.assignments.size(), "domain", batch->placement.describe());
    return;
  }
  // Some members are bound, some not. The failed ones go back to the queue; their next
  // placement must join the bound ones (or those are evicted then).
  std::string message = absl::StrCat("binding ", batch->failed.size(), " of ",
                                     batch->placement.assignments.size(), " pods of gang ",
                                     batch->attempt.key.toString(), " failed: ",
                                     batch->errors.front());
  for (size_t i = 0; i < batch->attempt.members.size(); ++i) {
    const auto& member = batch->attempt.members[i];
    if (std::find(batch->failed.begin(), batch->failed.end(), member->key) != batch->failed.end())
      recorder_.event(member->pod, "Warning", "FailedScheduling", message);
  }
  queue_.reportBindFailed(batch->attempt.key, batch->failed);
  kick();
}

void Scheduler::evictBoundMembers(const GangAttempt& attempt, const std::string& why) {
  for (const auto& [pod_key, node] : attempt.bound) {
    auto slash = pod_key.find('/');
    std::string ns = pod_key.substr(0, slash), name = pod_key.substr(slash + 1);
    auto pod = pods_->get(ns, name);
    if (!pod || pod->meta.deletion_timestamp) continue;
    if (pod->meta.controllerRef() == nullptr) {
      std::string message = absl::StrCat(
          "pod is bound to ", node, " but the rest of gang ", attempt.key.toString(),
          " cannot be placed with it (", why,
          "); it has no controller to recreate it, so Muster does not evict it: delete it to let "
          "the gang be scheduled again");
      recorder_.event(*pod, "Warning", "GangPartlyBound", message);
      MUSTER_LOG_WARNING("Gang partly bound, member has no owner", "pod", pod_key, "gang",
                         attempt.key.toString());
      continue;
    }
    m().evictions.inc();
    MUSTER_LOG_INFO(2, "Evicting bound gang member", "pod", pod_key, "node", node, "gang",
                    attempt.key.toString());
    recorder_.event(*pod, "Warning", "GangEvicted",
                    absl::StrCat("evicted: the rest of gang ", attempt.key.toString(),
                                 " cannot be placed with it (", why, ")"));
    // First mark the pod as rolled back by Muster itself (the job engine does not count such a
    // pod as a failure), through pods/status which the scheduler may already patch; then evict.
    // No marker, no eviction.
    proto::PodCondition rollback;
    rollback.type = proto::vocabulary::kGangRollbackCondition;
    rollback.status = "True";
    rollback.reason = proto::vocabulary::kGangRollbackReason;
    rollback.message = absl::StrCat("the rest of gang ", attempt.key.toString(),
                                    " cannot be placed with this pod");
    rollback.last_transition_time = rfc3339Now();
    proto::Request mark;
    mark.verb = proto::Verb::kPatch;
    mark.path = proto::resources::kPods.objectPath(ns, name, "status");
    mark.content_type = std::string(proto::contentType(proto::PatchType::kStrategicMerge));
    mark.body = proto::podConditionPatch(rollback);
    proto::Request evict;
    evict.verb = proto::Verb::kPost;
    evict.path = proto::resources::kPods.objectPath(ns, name, "eviction");
    evict.body = proto::evictionBody(ns, name);
    asio::co_spawn(strand_, [client = client_, mark = std::move(mark), evict = std::move(evict),
                             pod_key]() -> asio::awaitable<void> {
      auto marked = co_await client->call(mark);
      if (!marked.ok()) {
        if (!proto::isNotFound(marked.status()))
          MUSTER_LOG_WARNING("Cannot mark pod for eviction", "pod", pod_key, "error",
                             marked.status().ToString());
        co_return;
      }
      auto result = co_await client->call(evict);
      if (!result.ok() && !proto::isNotFound(result.status()))
        MUSTER_LOG_WARNING("Eviction refused", "pod", pod_key, "error", result.status().ToString());
    }, asio::detached);
  }
}

// --- PodGroup status ----------------------------------------------------------------------------

void Scheduler::syncPodGroupStatus() {
  for (const auto& [key, group] : groups_) {
    proto::PodGroupStatus status;
    int pending = 0;
    for (const auto& pod : pods_->byIndex("podgroup", key)) {
      if (pod->status.phase == "Succeeded") ++status.succeeded;
      else if (pod->status.phase == "Failed") ++status.failed;
      else if (pod->status.phase == "Running") ++status.running;
      if (!pod->spec.node_name.empty() && !terminal(*pod)) ++status.scheduled;
      if (pod->spec.node_name.empty()) ++pending;
    }
    const int32_t min_member = std::max<int32_t>(1, group->spec.min_member);
    if (status.running + status.succeeded >= min_member && status.running > 0) status.phase = "Running";
    else if (status.succeeded >= min_member && status.running == 0) status.phase = "Finished";
    else if (status.failed > 0 && status.running + status.scheduled < min_member) status.phase = "Failed";
    else if (status.scheduled >= min_member) status.phase = "Scheduled";
    else if (status.scheduled > 0) status.phase = "Scheduling";
    else status.phase = "Pending";
    status.schedule_start_time = group->status.schedule_start_time;
    status.occupied_by = group->status.occupied_by;
    const auto& cur = group->status;
    if (cur.phase == status.phase && cur.scheduled == status.scheduled &&
        cur.running == status.running && cur.succeeded == status.succeeded &&
        cur.failed == status.failed)
      continue;
    auto written = group_status_written_.find(key);
    if (written != group_status_written_.end() && written->second.phase == status.phase &&
        written->second.scheduled == status.scheduled && written->second.running == status.running &&
        written->second.succeeded == status.succeeded && written->second.failed == status.failed)
      continue;  // already sent; the informer has not caught up
    if (status.schedule_start_time.empty()) status.schedule_start_time = rfc3339Now();
    group_status_written_[key] = status;
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPodGroups.objectPath(group->meta.namespace_, group->meta.name,
                                                       "status");
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::statusPatch(status);
    asio::co_spawn(strand_, [this, req = std::move(req), key]() -> asio::awaitable<void> {
      auto result = co_await client_->call(req);
      if (!result.ok()) {
        MUSTER_LOG_WARNING("PodGroup status update refused", "podgroup", key, "error",
                           result.status().ToString());
        group_status_written_.erase(key);
      }
    }, asio::detached);
  }
}

}  // namespace muster::scheduler
