#include "scheduler/queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/log.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

constexpr absl::Duration kMaxInUnschedulable = absl::Minutes(5);

absl::Time creationOf(const proto::Pod& pod) {
  absl::Time t;
  std::string err;
  if (!pod.meta.creation_timestamp.empty() &&
      absl::ParseTime(absl::RFC3339_full, pod.meta.creation_timestamp, &t, &err)) {
    return t;
  }
  return absl::InfiniteFuture();
}

}  // namespace

bool isHeldBack(const proto::Pod& pod) {
  return pod.spec.node_name.empty() &&
         (pod.meta.deletion_timestamp.has_value() || !pod.spec.scheduling_gates.empty());
}

std::optional<Unschedulable> precheck(const GangAttempt& attempt) {
  if (attempt.spec.pod_group_missing) {
    Unschedulable u;
    u.waiting_for_members = true;
    u.message = absl::StrCat("gang ", attempt.key.toString(), " is waiting for its PodGroup ",
                             attempt.key.toString(), " (", av(podGroupApiOf(attempt.spec)),
                             ") to exist");
    return u;
  }
  int64_t existing = static_cast<int64_t>(attempt.members.size() + attempt.bound.size());
  if (existing < attempt.spec.min_member)
    return waitingForMembers(attempt.key, existing, attempt.spec.min_member);
  return std::nullopt;
}

SchedulingQueue::SchedulingQueue(const SchedulerConfig& config, Clock clock,
                                 PodGroupLookup pod_groups, ClaimCheck claim_check,
                                 VolumesOf volumes_of, SpreadDefaults spread_defaults)
    : config_(config),
      clock_(std::move(clock)),
      pod_groups_(std::move(pod_groups)),
      claim_check_(std::move(claim_check)),
      volumes_of_(std::move(volumes_of)),
      spread_defaults_(std::move(spread_defaults)) {}

absl::Duration SchedulingQueue::backoffFor(int failures) const {
  absl::Duration d = absl::Seconds(config_.queue_initial_backoff_seconds);
  absl::Duration max = absl::Seconds(config_.queue_max_backoff_seconds);
  for (int i = 1; i < failures && d < max; ++i) d *= 2;
  return std::min(d, max);
}

void SchedulingQueue::leaveState(Gang& gang) {
  switch (gang.state) {
    case State::kActive:
      activeErase(gang);
      break;
    case State::kBackoff:
      backoff_.erase({gang.backoff_until, gang.key});
      break;
    case State::kUnschedulable:
      unschedulable_.erase({gang.unschedulable_since, gang.key});
      timeout_due_.erase({gang.timeout_due_at, gang.key});
      break;
    case State::kWaiting:
      waiting_due_.erase({gang.waiting_due_at, gang.key});
      break;
    default:
      break;
  }
}

absl::Time SchedulingQueue::timeoutDue(const Gang& gang) const {
  if (gang.spec.schedule_timeout_seconds <= 0 || gang.timeout_reported) {
    return absl::InfiniteFuture();
  }
  return gang.first_seen + absl::Seconds(gang.spec.schedule_timeout_seconds);
}

absl::Time SchedulingQueue::waitingEventDue(const Gang& gang) const {
  return gang.first_seen + absl::Seconds(config_.queue_waiting_event_after_seconds);
}

absl::Time SchedulingQueue::waitingConditionDue(const Gang& gang) const {
  return gang.first_seen + absl::Seconds(config_.queue_waiting_condition_after_seconds);
}

absl::Time SchedulingQueue::waitingDue(const Gang& gang) const {
  absl::Time due = absl::InfiniteFuture();
  if (!gang.waiting_condition) due = waitingConditionDue(gang);
  if (!gang.waiting_reported) due = std::min(due, waitingEventDue(gang));
  return due;
}

void SchedulingQueue::setState(Gang& gang, State state) {
  leaveState(gang);
  gang.state = state;
  switch (state) {
    case State::kActive:
      activeInsert(gang);
      break;
    case State::kBackoff:
      backoff_.insert({gang.backoff_until, gang.key});
      break;
    case State::kUnschedulable:
      unschedulable_.insert({gang.unschedulable_since, gang.key});
      gang.timeout_due_at = timeoutDue(gang);
      if (gang.timeout_due_at != absl::InfiniteFuture()) {
        timeout_due_.insert({gang.timeout_due_at, gang.key});
      }
      break;
    case State::kWaiting:
      gang.waiting_due_at = waitingDue(gang);
      if (gang.waiting_due_at != absl::InfiniteFuture()) {
        waiting_due_.insert({gang.waiting_due_at, gang.key});
      }
      break;
    default:
      break;
  }
}

void SchedulingQueue::refreshPriority(Gang& gang) {
  int32_t p = std::numeric_limits<int32_t>::min();
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [key, pod] : gang.pending) {
    p = std::max(p, pod->priority);
    oldest = std::min(oldest, creationOf(pod->pod()));
  }
  if (gang.pending.empty()) p = 0;
  std::string tenant = gang.tenant;
  if (tenant_of_ && !gang.pending.empty()) tenant = tenant_of_(gang.pending.begin()->second->pod());
  if (p == gang.priority && oldest == gang.oldest_creation && tenant == gang.tenant) return;
  bool active = gang.state == State::kActive;
  if (active) activeErase(gang);
  gang.priority = p;
  gang.oldest_creation = oldest;
  gang.tenant = std::move(tenant);
  if (active) activeInsert(gang);
}

void SchedulingQueue::activeInsert(const Gang& gang) {
  if (active_[gang.tenant].insert(gang.order_key()).second) ++active_count_;
}

void SchedulingQueue::activeErase(const Gang& gang) {
  auto it = active_.find(gang.tenant);
  if (it == active_.end()) return;
  active_count_ -= it->second.erase(gang.order_key());
  if (it->second.empty()) active_.erase(it);
}

void SchedulingQueue::activateOrBackoff(Gang& gang, absl::Time now) {
  setState(gang, now < gang.backoff_until ? State::kBackoff : State::kActive);
}

// The gang changed in a way that may let it be tried (a new member, a changed member, its
// PodGroup): waiting and unschedulable gangs move on; in-flight and active ones stay.
void SchedulingQueue::requeueChanged(Gang& gang) {
  switch (gang.state) {
    case State::kWaiting:
    case State::kDone:
      setState(gang, State::kActive);
      break;
    case State::kUnschedulable:
      activateOrBackoff(gang, clock_());
      break;
    default:
      break;
  }
}

absl::Status SchedulingQueue::addOrUpdatePod(std::shared_ptr<const proto::Pod> shared) {
  const proto::Pod& pod = *shared;
  std::string key = podKey(pod);
  if (isTerminal(pod) || isHeldBack(pod)) {
    removePod(key);
    return absl::OkStatus();
  }
  absl::StatusOr<GangSpec> spec = gangSpecOf(pod, pod_groups_, config_, workload_pod_groups_);
  if (!spec.ok()) {
    removePod(key);
    return spec.status();
  }
  if (pod.spec.node_name.empty()) {
    std::vector<std::string> missing = unsupported(pod);
    if (!missing.empty()) {
      removePod(key);
      return absl::UnimplementedError(absl::StrCat(
          "pod ", key, " uses what muster-scheduler does not implement: ",
          absl::StrJoin(missing, ", "), "; it stays pending"));
    }
    if (std::string why = claim_check_ ? claim_check_(pod) : std::string(); !why.empty()) {
      removePod(key);
      return absl::FailedPreconditionError(why);
    }
  }
  // A pod whose gang changed leaves the old one.
  if (auto it = pod_gang_.find(key); it != pod_gang_.end() && !(it->second == spec->key)) {
    removePod(key);
  }
  auto [git, inserted] = gangs_.try_emplace(spec->key);
  Gang& gang = git->second;
  absl::Time now = clock_();
  if (inserted) {
    gang.key = spec->key;
    gang.spec = *spec;
    gang.first_seen = now;
    gang.state = State::kWaiting;
  }
  bool spec_changed = !(gang.spec == *spec);
  gang.spec = *spec;
  pod_gang_[key] = spec->key;

  if (!pod.spec.node_name.empty()) {
    gang.pending.erase(key);
    if (spec->key.single_pod) {
      leaveState(gang);
      gangs_.erase(spec->key);
      pod_gang_.erase(key);
      reservations_.erase(spec->key);
      return absl::OkStatus();
    }
    BoundMember& b = gang.bound[key];
    b.node = pod.spec.node_name;
    b.pod.reset();  // seen bound: there is no bind left to fail, and the pending pod can go
    refreshPriority(gang);
    return absl::OkStatus();
  }
  if (auto b = gang.bound.find(key); b != gang.bound.end()) {
    // Placed by us and not yet seen bound: the informer is behind the Binding.
    if (b->second.pod) return absl::OkStatus();
    gang.bound.erase(b);  // cannot happen for a real pod (nodeName is never cleared)
  }
  std::vector<VolumeConstraint> volumes =
      volumes_of_ ? volumes_of_(pod) : std::vector<VolumeConstraint>{};
  std::vector<proto::TopologySpreadConstraint> defaults;
  if (spread_defaults_ && pod.spec.topology_spread_constraints.empty()) defaults = spread_defaults_(pod);
  absl::StatusOr<PodInfoPtr> info;
  if (defaults.empty()) {
    info = makePodInfo(shared, std::move(volumes));
  } else {
    proto::Pod with_defaults = pod;
    with_defaults.spec.topology_spread_constraints = std::move(defaults);
    with_defaults.spec.has_topology_spread_constraints = true;
    info = makePodInfo(std::move(with_defaults), std::move(volumes));
  }
  if (!info.ok()) {
    gang.pending.erase(key);
    pod_gang_.erase(key);
    eraseGangIfEmpty(spec->key);
    return info.status();
  }
  auto existing = gang.pending.find(key);
  bool changed = existing == gang.pending.end() ||
                 existing->second->constraint_signature != (*info)->constraint_signature ||
                 existing->second->priority != (*info)->priority;
  gang.pending[key] = *info;
  refreshPriority(gang);
  if (changed || spec_changed || inserted) requeueChanged(gang);
  return absl::OkStatus();
}

void SchedulingQueue::eraseGangIfEmpty(const GangKey& key) {
  auto it = gangs_.find(key);
  if (it == gangs_.end()) return;
  Gang& gang = it->second;
  if (!gang.pending.empty() || !gang.bound.empty()) return;
  if (gang.state == State::kInFlight) {
    // pop()'s caller still holds the attempt; reportPlaced / reportUnschedulable finish it.
    return;
  }
  leaveState(gang);
  reservations_.erase(key);
  gangs_.erase(it);
}

void SchedulingQueue::removePod(std::string_view pod_key) {
  auto it = pod_gang_.find(av(pod_key));
  if (it == pod_gang_.end()) return;
  GangKey key = it->second;
  pod_gang_.erase(it);
  auto g = gangs_.find(key);
  if (g == gangs_.end()) return;
  Gang& gang = g->second;
  std::string k(pod_key);
  gang.pending.erase(k);
  gang.bound.erase(k);
  refreshPriority(gang);
  eraseGangIfEmpty(key);
}

void SchedulingQueue::onPodGroup(std::string_view pod_namespace, std::string_view name) {
  GangKey key{std::string(pod_namespace), std::string(name), false};
  auto it = gangs_.find(key);
  if (it == gangs_.end()) return;
  Gang& gang = it->second;
  const PodInfoPtr* any = nullptr;
  if (!gang.pending.empty()) any = &gang.pending.begin()->second;
  if (any == nullptr) return;
  absl::StatusOr<GangSpec> spec = gangSpecOf((*any)->pod(), pod_groups_, config_, workload_pod_groups_);
  if (!spec.ok()) {
    MUSTER_LOG_WARNING("PodGroup makes its gang invalid", "gang", key.toString(), "err",
                       spec.status().message());
    return;
  }
  if (!(spec->key == key)) {
    // The PodGroup now places its pods one by one (a v1alpha2 basic policy): each leaves the gang.
    std::vector<std::shared_ptr<const proto::Pod>> pods;
    for (const auto& [pod_key, info] : gang.pending) pods.push_back(info->shared_pod);
    for (std::shared_ptr<const proto::Pod>& pod : pods) (void)addOrUpdatePod(std::move(pod));
    return;
  }
  if (!(gang.spec == *spec)) {
    gang.spec = *spec;
    requeueChanged(gang);
  }
}

void SchedulingQueue::onClusterEvent(ClusterEvent) {
  absl::Time now = clock_();
  std::vector<GangKey> moved;
  for (const auto& [since, key] : unschedulable_) moved.push_back(key);
  for (const GangKey& key : moved) activateOrBackoff(gangs_.at(key), now);
}

void SchedulingQueue::flush(absl::Time now) {
  while (!backoff_.empty() && backoff_.begin()->first <= now) {
    GangKey key = backoff_.begin()->second;
    setState(gangs_.at(key), State::kActive);
  }
  while (!unschedulable_.empty() && unschedulable_.begin()->first + kMaxInUnschedulable <= now) {
    GangKey key = unschedulable_.begin()->second;
    activateOrBackoff(gangs_.at(key), now);
  }
  while (!timeout_due_.empty() && timeout_due_.begin()->first <= now) {
    activateOrBackoff(gangs_.at(timeout_due_.begin()->second), now);
  }
  while (!waiting_due_.empty() && waiting_due_.begin()->first <= now) {
    Gang& gang = gangs_.at(waiting_due_.begin()->second);
    if (now >= waitingConditionDue(gang)) gang.waiting_condition = true;
    if (!gang.waiting_reported && now >= waitingEventDue(gang)) {
      gang.waiting_reported = true;
      gang.report_waiting = true;
    }
    setState(gang, State::kActive);
  }
}

std::optional<GangAttempt> SchedulingQueue::pop() {
  absl::Time now = clock_();
  flush(now);
  if (active_.empty()) return std::nullopt;
  // The queue furthest below its fair share first (one queue without tenancy).
  auto chosen = active_.begin();
  if (rank_ && active_.size() > 1) {
    std::vector<double> best = rank_(chosen->first);
    for (auto it = std::next(active_.begin()); it != active_.end(); ++it) {
      std::vector<double> r = rank_(it->first);
      if (r < best) {
        best = std::move(r);
        chosen = it;
      }
    }
  }
  GangKey key = std::get<2>(*chosen->second.begin());
  Gang& gang = gangs_.at(key);
  setState(gang, State::kInFlight);
  GangAttempt a;
  a.key = key;
  a.spec = gang.spec;
  a.priority = gang.priority;
  a.failures = gang.failures;
  a.members.reserve(gang.pending.size());
  for (auto& [k, pod] : gang.pending) {
    // A member asked for resources no node advertised; a node may have brought them since.
    if (!pod->unadvertised.empty() && pod->resource_count != resourceCount()) {
      if (absl::StatusOr<PodInfoPtr> again = makePodInfo(pod->shared_pod, pod->volumes); again.ok())
        pod = *again;
    }
    a.members.push_back(pod);
  }
  for (const auto& [k, b] : gang.bound) a.bound.emplace_back(k, b.node);
  a.timed_out = !gang.timeout_reported && gang.spec.schedule_timeout_seconds > 0 &&
                now - gang.first_seen >= absl::Seconds(gang.spec.schedule_timeout_seconds);
  if (a.timed_out) gang.timeout_reported = true;
  a.report_waiting = std::exchange(gang.report_waiting, false);
  if (!gang.waiting_reported && now >= waitingEventDue(gang)) {
    gang.waiting_reported = true;
    a.report_waiting = true;
  }
  if (now >= waitingConditionDue(gang)) gang.waiting_condition = true;
  a.report_waiting_condition = gang.waiting_condition || a.report_waiting;
  return a;
}

std::optional<absl::Time> SchedulingQueue::nextWakeup() const {
  if (!active_.empty()) return clock_();
  std::optional<absl::Time> t;
  if (!backoff_.empty()) t = backoff_.begin()->first;
  if (!unschedulable_.empty()) {
    absl::Time u = unschedulable_.begin()->first + kMaxInUnschedulable;
    if (!t || u < *t) t = u;
  }
  if (!waiting_due_.empty()) {
    absl::Time w = waiting_due_.begin()->first;
    if (!t || w < *t) t = w;
  }
  if (!timeout_due_.empty()) {
    absl::Time d = timeout_due_.begin()->first;
    if (!t || d < *t) t = d;
  }
  return t;
}

GangRequest SchedulingQueue::buildRequest(const GangAttempt& attempt) const {
  GangRequest r;
  r.key = attempt.key;
  r.members = attempt.members;
  r.bound = attempt.bound;
  r.min_member = attempt.spec.min_member;
  r.required_level = attempt.spec.required_level;
  r.preferred_level = attempt.spec.preferred_level;
  r.gpu_nic_affinity = attempt.spec.gpu_nic_affinity;
  for (const auto& [key, reservation] : reservations_) {
    if (key == attempt.key || reservation.priority < attempt.priority) continue;
    r.blocked_nodes.insert(r.blocked_nodes.end(), reservation.nodes.begin(),
                           reservation.nodes.end());
  }
  return r;
}

void SchedulingQueue::reportPlaced(const GangAttempt& attempt, const GangPlacement& placement) {
  auto it = gangs_.find(attempt.key);
  if (it == gangs_.end()) return;
  Gang& gang = it->second;
  for (const Assignment& a : placement.assignments) {
    auto p = gang.pending.find(a.pod_key);
    if (p == gang.pending.end()) continue;
    gang.bound[a.pod_key] = BoundMember{a.node, p->second};
    gang.pending.erase(p);
  }
  // failures stays until the binds succeed (reportBound): a gang whose binds keep failing backs
  // off longer each time, as one that does not fit does, instead of every second.
  gang.backoff_until = absl::InfinitePast();
  if (reservations_.erase(attempt.key) > 0) {
    MUSTER_LOG_INFO(2, "Gang reservation released", "gang", attempt.key.toString());
  }
  refreshPriority(gang);
  if (attempt.key.single_pod && gang.pending.empty()) {
    // A lone pod is done once placed; the informer's update needs no record.
    for (const auto& [k, b] : gang.bound) pod_gang_.erase(k);
    leaveState(gang);
    gangs_.erase(it);
    return;
  }
  setState(gang, gang.pending.empty() ? State::kDone : State::kActive);
  eraseGangIfEmpty(attempt.key);
}

void SchedulingQueue::reportUnschedulable(const GangAttempt& attempt, const Unschedulable& verdict,
                                          const ClusterCache& cache) {
  auto it = gangs_.find(attempt.key);
  if (it == gangs_.end()) return;
  Gang& gang = it->second;
  absl::Time now = clock_();
  if (gang.pending.empty() && gang.bound.empty()) {
    leaveState(gang);
    reservations_.erase(attempt.key);
    gangs_.erase(it);
    return;
  }
  if (verdict.waiting_for_members) {
    setState(gang, State::kWaiting);
    return;
  }
  ++gang.failures;
  gang.backoff_until = now + backoffFor(gang.failures);
  gang.unschedulable_since = now;
  setState(gang, State::kUnschedulable);
  if (verdict.waiting_for_quota) {
    // Room held for a gang that may not run would only keep others off it.
    reservations_.erase(attempt.key);
    return;
  }

  if (now - gang.first_seen < absl::Seconds(config_.queue_reservation_after_seconds)) return;
  if (gang.pending.empty()) return;
  auto r = reservations_.find(attempt.key);
  if (r != reservations_.end()) {
    bool intact = true;
    for (const std::string& n : r->second.nodes) intact &= cache.findNode(n).has_value();
    if (intact) {
      r->second.priority = gang.priority;
      return;
    }
    reservations_.erase(r);
  }
  GangAttempt current = attempt;
  current.members.clear();
  for (const auto& [k, pod] : gang.pending) current.members.push_back(pod);
  current.priority = gang.priority;
  PlacementOptions options;
  options.namespace_labels = namespace_labels_;
  std::vector<std::string> nodes = planReservation(buildRequest(current), cache, options);
  if (nodes.empty()) return;
  MUSTER_LOG_INFO(2, "Gang reserved nodes", "gang", attempt.key.toString(), "nodes", nodes.size(),
                  "waited", absl::FormatDuration(now - gang.first_seen));
  reservations_[attempt.key] = Reservation{std::move(nodes), gang.priority};
}

void SchedulingQueue::reportBound(const GangKey& key) {
  if (auto it = gangs_.find(key); it != gangs_.end()) {
    it->second.bind_failures = 0;
    it->second.failures = 0;
  }
}

int SchedulingQueue::reportBindFailed(const GangAttempt& attempt,
                                      const std::vector<std::string>& pod_keys) {
  const GangKey& key = attempt.key;
  auto it = gangs_.find(key);
  if (it == gangs_.end() && key.single_pod && !pod_keys.empty()) {
    // reportPlaced forgot the lone pod; the informer shows no change that would bring it back.
    it = gangs_.try_emplace(key).first;
    Gang& gang = it->second;
    gang.key = key;
    gang.spec = attempt.spec;
    gang.first_seen = clock_();
    gang.failures = attempt.failures;
    gang.state = State::kDone;
    for (const PodInfoPtr& member : attempt.members) {
      if (std::find(pod_keys.begin(), pod_keys.end(), member->key) == pod_keys.end()) continue;
      gang.bound[member->key] = BoundMember{"", member};
      pod_gang_[member->key] = key;
    }
  }
  if (it == gangs_.end()) return 0;
  Gang& gang = it->second;
  const int bind_failures = ++gang.bind_failures;
  for (const std::string& k : pod_keys) {
    auto b = gang.bound.find(k);
    if (b == gang.bound.end()) continue;
    if (b->second.pod) gang.pending[k] = b->second.pod;
    gang.bound.erase(b);
  }
  absl::Time now = clock_();
  ++gang.failures;
  gang.backoff_until = now + backoffFor(gang.failures);
  gang.unschedulable_since = now;
  refreshPriority(gang);
  if (gang.pending.empty()) {
    eraseGangIfEmpty(key);
    return bind_failures;
  }
  setState(gang, State::kBackoff);
  return bind_failures;
}

size_t SchedulingQueue::waitingCount() const {
  size_t n = 0;
  for (const auto& [key, gang] : gangs_) n += gang.state == State::kWaiting;
  return n;
}

size_t SchedulingQueue::pendingPodCount() const {
  size_t n = 0;
  for (const auto& [key, gang] : gangs_) n += gang.pending.size();
  return n;
}

const std::vector<std::string>* SchedulingQueue::reservationOf(const GangKey& key) const {
  auto it = reservations_.find(key);
  return it == reservations_.end() ? nullptr : &it->second.nodes;
}

}  // namespace muster::scheduler
