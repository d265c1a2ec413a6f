#include "scheduler/tenancy/tenancy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/codec.h"
#include "proto/vocabulary.h"

namespace muster::scheduler::tenancy {

namespace {

constexpr std::string_view kValidCondition = "Valid";

bool isGpu(std::string_view resource) { return absl::EndsWith(proto::av(resource), "/gpu"); }

double ratio(int64_t allocated, int64_t share) {
  if (allocated <= 0) return 0;
  if (share <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(allocated) / static_cast<double>(share);
}

// Equal but for usage and the conditions' transition times (what a usage-only write changes).
bool sameButUsage(const proto::QueueStatus& a, const proto::QueueStatus& b) {
  if (a.observed_generation != b.observed_generation || a.pending_gangs != b.pending_gangs ||
      a.resources.size() != b.resources.size() || a.conditions.size() != b.conditions.size())
    return false;
  for (auto ia = a.resources.begin(), ib = b.resources.begin(); ia != a.resources.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.allocated != ib->second.allocated ||
        ia->second.fair_share != ib->second.fair_share)
      return false;
  }
  for (size_t i = 0; i < a.conditions.size(); ++i) {
    const proto::Condition& x = a.conditions[i];
    const proto::Condition& y = b.conditions[i];
    if (x.type != y.type || x.status != y.status || x.reason != y.reason || x.message != y.message)
      return false;
  }
  return a.summary.gpu_quota == b.summary.gpu_quota && a.summary.gpu_limit == b.summary.gpu_limit &&
         a.summary.gpu_fair_share == b.summary.gpu_fair_share &&
         a.summary.gpu_allocated == b.summary.gpu_allocated;
}

bool sameUsage(const proto::QueueStatus& a, const proto::QueueStatus& b) {
  for (const auto& [name, r] : a.resources) {
    auto it = b.resources.find(name);
    const double other = it == b.resources.end() ? 0 : it->second.usage;
    // A write for less than 1% of change is not worth its request.
    if (std::abs(r.usage - other) > 0.01 * std::max(std::abs(r.usage), std::abs(other))) return false;
  }
  return true;
}

}  // namespace

bool countedInBytes(std::string_view resource) {
  return resource == "memory" || resource == "ephemeral-storage" ||
         absl::StartsWith(proto::av(resource), "hugepages-");
}

int64_t unitsOf(std::string_view resource, const proto::Quantity& amount) {
  return countedInBytes(resource) ? amount.value() : amount.milliValue();
}

std::string formatUnits(std::string_view resource, int64_t units) {
  if (countedInBytes(resource))
    return proto::Quantity::fromValue(units, units % 1024 == 0 && units != 0
                                                  ? proto::Quantity::Format::kBinarySI
                                                  : proto::Quantity::Format::kDecimalSI)
        .toString();
  return proto::Quantity::fromMilli(units).toString();
}

Tenancy::Tenancy(const SchedulerConfig& config, NamespaceLabels namespace_labels)
    : enabled_(config.tenancy_enabled),
      default_queue_(config.tenancy_default_queue),
      half_life_(absl::Seconds(config.tenancy_usage_half_life_seconds)),
      status_interval_(absl::Seconds(config.tenancy_status_interval_seconds)),
      namespace_labels_(std::move(namespace_labels)),
      tree_(QueueTree::build({})) {
  rebuild();
}

// --- queues ---------------------------------------------------------------------------------

void Tenancy::setQueue(std::shared_ptr<const proto::Queue> queue) {
  const std::string name = queue->meta.name;
  if (!written_.contains(name)) {
    // What the object already says is what was last written (by us, or the leader before us):
    // no write until something changes, and the decayed usage goes on from there.
    Written& w = written_[name];
    w.status = queue->status;
    absl::Time at;
    std::string err;
    const bool dated = absl::ParseTime(absl::RFC3339_full, queue->status.usage_updated_at, &at, &err);
    for (const auto& [resource, r] : queue->status.resources)
      if (std::isfinite(r.usage) && r.usage > 0)
        seeded_[absl::StrCat(name, "/", resource)] = r.usage;
    if (dated) w.usage_at = at;
  }
  queues_[name] = std::move(queue);
  rebuild();
}

void Tenancy::removeQueue(std::string_view name) {
  queues_.erase(std::string(name));
  written_.erase(std::string(name));
  rebuild();
}

void Tenancy::rebuild() {
  std::vector<QueueSpec> specs;
  specs.reserve(queues_.size());
  std::set<std::string> names{proto::vocabulary::kGpuResource};
  for (const auto& [name, q] : queues_) {
    QueueSpec spec;
    spec.name = name;
    spec.parent = q->spec.parent;
    for (const auto& [resource, r] : q->spec.resources) {
      ResourceQuota rq;
      if (r.quota) rq.quota = unitsOf(resource, *r.quota);
      if (r.limit) rq.limit = unitsOf(resource, *r.limit);
      rq.over_quota_weight = r.over_quota_weight;
      spec.resources.emplace(resource, rq);
      names.insert(resource);
    }
    specs.push_back(std::move(spec));
  }
  // Declaration order decides which of two equal names wins; the informer's order is arbitrary,
  // so sort by name (names are unique in the API anyway).
  std::sort(specs.begin(), specs.end(), [](const QueueSpec& a, const QueueSpec& b) { return a.name < b.name; });
  tree_ = QueueTree::build(std::move(specs));
  resource_names_.assign(names.begin(), names.end());
  subtree_.assign(tree_.size(), Held{});
  going_.assign(tree_.size(), Held{});
  auto sum = [this](const absl::flat_hash_map<std::string, Held>& own, std::vector<Held>& out) {
    for (const auto& [queue, held] : own) {
      std::optional<size_t> i = tree_.find(queue);
      if (!i || queue.empty()) continue;
      for (size_t a : tree_.ancestors(*i)) {
        out[a].requests += held.requests;
        out[a].gpu_milli = saturatingAdd(out[a].gpu_milli, held.gpu_milli);
      }
    }
  };
  sum(own_, subtree_);
  sum(own_going_, going_);
  tree_dirty_ = true;
}

// --- membership and accounting -----------------------------------------------------------------

std::string Tenancy::queueOf(std::string_view pod_namespace, const proto::Labels& labels) const {
  if (auto it = labels.find(proto::vocabulary::kQueueLabel); it != labels.end()) return it->second;
  if (namespace_labels_) {
    if (const proto::Labels* ns = namespace_labels_(pod_namespace)) {
      if (auto it = ns->find(proto::vocabulary::kQueueLabel); it != ns->end()) return it->second;
    }
  }
  return default_queue_;
}

void Tenancy::add(const std::string& queue, const PodRecord& record, int sign) {
  Held delta;
  for (const auto& [id, amount] : record.amounts) delta.requests[id] = amount;
  delta.gpu_milli = record.gpu_milli;
  auto apply = [&](Held& h) {
    if (sign > 0) {
      h.requests += delta.requests;
      h.gpu_milli = saturatingAdd(h.gpu_milli, delta.gpu_milli);
    } else {
      h.requests -= delta.requests;
      h.gpu_milli = saturatingSub(h.gpu_milli, delta.gpu_milli);
    }
  };
  auto update = [&](absl::flat_hash_map<std::string, Held>& own, std::vector<Held>& tree) {
    auto it = own.try_emplace(queue).first;
    apply(it->second);
    if (it->second.requests.isZero() && it->second.gpu_milli == 0) own.erase(it);
    if (std::optional<size_t> i = tree_.find(queue); i && !queue.empty())
      for (size_t a : tree_.ancestors(*i)) apply(tree[a]);
  };
  update(own_, subtree_);
  if (record.going) update(own_going_, going_);
  demand_dirty_ = true;
}

void Tenancy::markGoing(std::string_view pod_key) {
  if (!enabled_) return;
  auto it = pods_.find(proto::av(pod_key));
  if (it == pods_.end() || it->second.going) return;
  // Out with the pod as it was counted, in again as going.
  add(it->second.queue, it->second, -1);
  it->second.going = true;
  add(it->second.queue, it->second, +1);
}

Tenancy::Held Tenancy::staying(size_t index) const {
  Held h = subtree_[index];
  h.requests -= going_[index].requests;
  h.gpu_milli = saturatingSub(h.gpu_milli, going_[index].gpu_milli);
  return h;
}

void Tenancy::observe(std::string_view key, const PlacedPod& placed, const Resources& requests,
                      int32_t gpu_milli, int sign) {
  if (!enabled_) return;
  if (sign < 0) {
    auto it = pods_.find(proto::av(key));
    if (it == pods_.end()) return;
    add(it->second.queue, it->second, -1);
    if (!it->second.by_label) {
      auto ns = by_namespace_.find(placed.namespace_);
      if (ns != by_namespace_.end()) {
        ns->second.erase(it->first);
        if (ns->second.empty()) by_namespace_.erase(ns);
      }
    }
    pods_.erase(it);
    return;
  }
  PodRecord record;
  record.by_label = placed.labels.contains(proto::vocabulary::kQueueLabel);
  record.going = placed.preempted || placed.terminating;
  record.queue = queueOf(placed.namespace_, placed.labels);
  for (int id = 0; id < kMaxResources; ++id) {
    if (id == kPods || id == kNodeShare || id == kUnadvertised || requests.v[id] == 0) continue;
    record.amounts.emplace_back(static_cast<ResourceId>(id), requests.v[id]);
  }
  record.gpu_milli = gpu_milli;
  auto [it, inserted] = pods_.try_emplace(std::string(key), std::move(record));
  if (!inserted) return;  // already counted (cannot happen: the cache removes before it adds)
  if (!it->second.by_label) by_namespace_[placed.namespace_].insert(it->first);
  add(it->second.queue, it->second, +1);
}

void Tenancy::onNamespace(std::string_view name) {
  if (!enabled_) return;
  auto ns = by_namespace_.find(proto::av(name));
  if (ns == by_namespace_.end()) return;
  const std::string queue = queueOf(name, proto::Labels{});
  for (const std::string& key : ns->second) {
    PodRecord& record = pods_.at(key);
    if (record.queue == queue) continue;
    add(record.queue, record, -1);
    record.queue = queue;
    add(record.queue, record, +1);
  }
}

int64_t Tenancy::unitsIn(const Held& held, std::string_view resource) const {
  std::optional<ResourceId> id = findResource(resource);
  int64_t units = 0;
  if (id) {
    const int64_t raw = held.requests[*id];
    units = *id == kCpu || countedInBytes(resource) ? raw : saturatingMul(raw, 1000);
  }
  if (resource == proto::vocabulary::kGpuResource) units = saturatingAdd(units, held.gpu_milli);
  return units;
}

Amounts Tenancy::amountsOf(const Held& held) const {
  Amounts out;
  for (const std::string& r : resource_names_)
    if (int64_t u = unitsIn(held, r); u != 0) out[r] = u;
  return out;
}

int64_t Tenancy::allocated(std::string_view queue, std::string_view resource) const {
  std::optional<size_t> i = tree_.find(queue);
  if (!i || queue.empty()) return 0;
  return unitsIn(subtree_[*i], resource);
}

// --- admission and ordering ----------------------------------------------------------------------

std::optional<Refusal> Tenancy::refuses(std::string_view queue, const Request& request) const {
  if (!enabled_ || queue.empty()) return std::nullopt;
  std::optional<size_t> index = tree_.find(queue);
  // Without a Queue of the default's name, the default is no queue at all: a cluster that turns
  // tenancy on before it declares queues schedules as before.
  if (!index && queue == default_queue_) return std::nullopt;
  if (!index) {
    Refusal r;
    r.kind = Refusal::Kind::kNoSuchQueue;
    r.queue = std::string(queue);
    r.message = absl::StrCat("queue \"", proto::av(queue),
                             "\" ", proto::vocabulary::kNoSuchQueueMessage,
                             "; the gang waits until it does");
    return r;
  }
  const Held asked{request.requests, request.gpu_milli};
  for (size_t a : tree_.ancestors(*index)) {
    for (const auto& [resource, declared] : tree_.declared(a)) {
      std::optional<int64_t> limit = tree_.limit(a, resource);
      const int64_t want = unitsIn(asked, resource);
      if (!limit || want <= 0) continue;
      const int64_t have = unitsIn(subtree_[a], resource);
      if (saturatingAdd(have, want) <= *limit) continue;
      Refusal r;
      r.kind = Refusal::Kind::kLimit;
      r.queue = tree_.name(a);
      r.resource = resource;
      r.message = absl::StrCat(
          proto::vocabulary::kWaitingForQuotaMessage, "queue \"", r.queue, "\"", a == *index ? "" : absl::StrCat(" (above queue \"", proto::av(queue), "\")"),
          " holds ", formatUnits(resource, have), " ", resource, " of its limit of ",
          formatUnits(resource, *limit), ", and this gang asks for ", formatUnits(resource, want));
      return r;
    }
  }
  return std::nullopt;
}

double Tenancy::dominantShare(size_t index, const Held& delta, int sign) const {
  if (!fair_valid_) return 0;
  double dominant = 0;
  for (const std::string& r : fair_.resources()) {
    // Only a queue's own resources rank it: a resource it never declared has a share only by
    // what was left over, and would let cpu or memory decide a GPU cluster's order.
    if (!tree_.effective(index, r) && r != proto::vocabulary::kGpuResource) continue;
    int64_t held = unitsIn(staying(index), r);
    const int64_t d = unitsIn(delta, r);
    held = sign > 0 ? saturatingAdd(held, d) : saturatingSub(held, d);
    dominant = std::max(dominant, ratio(held, fair_.share(index, r)));
  }
  return dominant;
}

std::vector<double> Tenancy::rank(std::string_view queue) const {
  std::optional<size_t> index = tree_.find(queue);
  if (!index || queue.empty()) return {std::numeric_limits<double>::infinity()};
  std::vector<size_t> path = tree_.ancestors(*index);
  std::vector<double> key;
  key.reserve(path.size());
  for (auto it = path.rbegin(); it != path.rend(); ++it) key.push_back(dominantShare(*it, Held{}, +1));
  return key;
}

// --- reclaim and preemption -------------------------------------------------------------------------

std::string_view Tenancy::queueOfPod(std::string_view pod_key) const {
  auto it = pods_.find(proto::av(pod_key));
  return it == pods_.end() ? std::string_view() : std::string_view(it->second.queue);
}

int64_t Tenancy::podUnits(std::string_view pod_key, std::string_view resource) const {
  auto it = pods_.find(proto::av(pod_key));
  if (it == pods_.end()) return 0;
  Held held;
  for (const auto& [id, a] : it->second.amounts) held.requests[id] = a;
  held.gpu_milli = it->second.gpu_milli;
  return unitsIn(held, resource);
}

bool Tenancy::belowFairShare(std::string_view queue) const {
  std::optional<size_t> index = tree_.find(queue);
  if (!enabled_ || !fair_valid_ || !index || queue.empty()) return false;
  return dominantShare(*index, Held{}, +1) < 1.0;
}

int64_t Tenancy::floorOf(size_t index, std::string_view resource, bool reclaim) const {
  int64_t floor = tree_.effectiveQuota(index, resource);
  if (reclaim && fair_valid_) floor = std::max(floor, fair_.share(index, resource));
  return floor;
}

bool Tenancy::mayReclaimFrom(std::string_view taker, std::string_view victim) const {
  std::optional<size_t> t = tree_.find(taker);
  std::optional<size_t> v = tree_.find(victim);
  if (!enabled_ || !fair_valid_ || !t || !v || taker.empty() || victim.empty() || *t == *v) return false;
  const size_t lca = tree_.lowestCommonAncestor(*t, *v);
  if (lca == *t || lca == *v) return false;
  const Held held = staying(*v);
  for (const std::string& r : resource_names_)
    if (unitsIn(held, r) > floorOf(*v, r, true)) return true;
  return false;
}

bool Tenancy::victimsAllowed(std::string_view taker, const Request& request,
                             const std::vector<std::vector<std::string>>& units, bool reclaim) const {
  if (!enabled_) return true;
  const std::optional<size_t> found = taker.empty() ? std::nullopt : tree_.find(taker);
  const bool has_taker = found.has_value();
  const size_t t = found.value_or(QueueTree::kRoot);
  if (reclaim && !has_taker) return false;
  // What each queue gives up (its subtree's share of the victims), below the common ancestor.
  std::map<size_t, Held> removed;
  std::set<std::pair<size_t, size_t>> sides;  // (taker's side, victim's side) at each LCA
  for (const std::vector<std::string>& pods : units) {
    for (const std::string& key : pods) {
      auto it = pods_.find(key);
      if (it == pods_.end() || it->second.going) continue;  // already counted out
      std::optional<size_t> v = it->second.queue.empty() ? std::nullopt : tree_.find(it->second.queue);
      if (!v) continue;
      const size_t lca = has_taker ? tree_.lowestCommonAncestor(t, *v) : QueueTree::kRoot;
      Held amount;
      for (const auto& [id, a] : it->second.amounts) amount.requests[id] = a;
      amount.gpu_milli = it->second.gpu_milli;
      size_t victim_side = *v;
      for (size_t a : tree_.ancestors(*v)) {
        if (a == lca) break;
        Held& h = removed[a];
        h.requests += amount.requests;
        h.gpu_milli = saturatingAdd(h.gpu_milli, amount.gpu_milli);
        victim_side = a;
      }
      if (has_taker && victim_side != lca) {
        size_t taker_side = t;
        for (size_t a : tree_.ancestors(t)) {
          if (a == lca) break;
          taker_side = a;
        }
        if (taker_side != lca) sides.emplace(taker_side, victim_side);
      }
    }
  }
  for (const auto& [index, held] : removed) {
    const Held before = staying(index);
    for (const std::string& r : resource_names_) {
      const int64_t taken = unitsIn(held, r);
      if (taken <= 0) continue;
      if (saturatingSub(unitsIn(before, r), taken) < floorOf(index, r, reclaim)) return false;
    }
  }
  if (reclaim) {
    const Held asked{request.requests, request.gpu_milli};
    for (const auto& [taker_side, victim_side] : sides) {
      const Held& gone = removed[victim_side];
      if (dominantShare(taker_side, asked, +1) > dominantShare(victim_side, gone, -1)) return false;
    }
  }
  return true;
}

// --- fair share ----------------------------------------------------------------------------------

void Tenancy::refresh(absl::Time now, const ClusterCache& cache,
                      const std::vector<std::pair<std::string, Request>>& pending,
                      bool now_if_changed) {
  if (!enabled_) return;
  if (!refreshDue(now, now_if_changed)) return;
  tree_dirty_ = false;
  demand_dirty_ = false;
  refreshed_at_ = now;

  // Usage: decay what was, add what each queue held since (its own pods, not its children's).
  DecayedUsage usage(tree_.size());
  const absl::Duration elapsed = usage_at_ == absl::InfinitePast() ? absl::ZeroDuration() : now - usage_at_;
  for (size_t i = 1; i < tree_.size(); ++i) {
    const std::string& name = tree_.name(i);
    auto own = own_.find(name);
    for (const std::string& r : resource_names_) {
      const std::string key = absl::StrCat(name, "/", r);
      double u = 0;
      if (auto s = seeded_.find(key); s != seeded_.end()) u = s->second;
      u = decay(u, elapsed, half_life_);
      if (own != own_.end()) u += static_cast<double>(unitsIn(own->second, r)) * absl::ToDoubleSeconds(elapsed);
      if (u > 0) {
        seeded_[key] = u;
        usage[i][r] = u;
      } else {
        seeded_.erase(key);
      }
    }
  }
  usage_at_ = now;

  FairShareInput input;
  Held capacity;
  for (size_t id = 0; id < cache.slotCount(); ++id) {
    const NodeInfo& n = cache.node(static_cast<NodeId>(id));
    if (n.present && !n.unschedulable) capacity.requests += n.allocatable;
  }
  for (const std::string& r : resource_names_) input.capacity[r] = unitsIn(capacity, r);
  input.demand.assign(tree_.size(), {});
  pending_gangs_.assign(tree_.size(), 0);
  std::vector<Held> demand(tree_.size());
  for (size_t i = 1; i < tree_.size(); ++i) {
    if (auto own = own_.find(tree_.name(i)); own != own_.end()) demand[i] = own->second;
  }
  for (const auto& [queue, request] : pending) {
    std::optional<size_t> i = tree_.find(queue);
    if (!i || queue.empty()) continue;
    demand[*i].requests += request.requests;
    demand[*i].gpu_milli = saturatingAdd(demand[*i].gpu_milli, request.gpu_milli);
    ++pending_gangs_[*i];
  }
  for (size_t i = 1; i < tree_.size(); ++i) input.demand[i] = amountsOf(demand[i]);
  input.usage = std::move(usage);
  FairShareOptions options;
  options.use_usage = half_life_ > absl::ZeroDuration();
  options.usage_horizon_seconds = absl::ToDoubleSeconds(half_life_) / std::log(2.0);
  fair_ = FairShare::compute(tree_, input, options);
  fair_valid_ = true;
}

int64_t Tenancy::fairShare(std::string_view queue, std::string_view resource) const {
  std::optional<size_t> i = tree_.find(queue);
  if (!i || !fair_valid_) return 0;
  return fair_.share(*i, resource);
}

int64_t Tenancy::pendingGangs(std::string_view queue) const {
  std::optional<size_t> i = tree_.find(queue);
  if (!i || *i >= pending_gangs_.size()) return 0;
  return pending_gangs_[*i];
}

// --- status ---------------------------------------------------------------------------------------

proto::QueueStatus Tenancy::statusOf(size_t index, absl::Time now) const {
  const std::string& name = tree_.name(index);
  proto::QueueStatus st;
  auto q = queues_.find(name);
  if (q != queues_.end()) st.observed_generation = q->second->meta.generation;
  st.pending_gangs = index < pending_gangs_.size() ? pending_gangs_[index] : 0;
  int64_t gpu_quota = 0, gpu_limit = 0, gpu_share = 0, gpu_allocated = 0;
  bool any_gpu = false, every_gpu_limited = true;
  for (const std::string& r : resource_names_) {
    const ResourceQuota* declared = tree_.effective(index, r);
    const int64_t allocated = unitsIn(subtree_[index], r);
    const int64_t share = fair_valid_ ? fair_.share(index, r) : 0;
    if (!declared && allocated == 0) continue;
    proto::QueueResourceStatus& rs = st.resources[r];
    rs.allocated = formatUnits(r, allocated);
    rs.fair_share = formatUnits(r, share);
    if (auto u = seeded_.find(absl::StrCat(name, "/", r)); u != seeded_.end()) rs.usage = u->second;
    if (isGpu(r)) {
      any_gpu = true;
      gpu_allocated += allocated;
      gpu_share += share;
      if (declared) {
        gpu_quota += declared->quota;
        if (declared->limit) gpu_limit += *declared->limit;
        else every_gpu_limited = false;
      } else {
        every_gpu_limited = false;
      }
    }
  }
  if (any_gpu) {
    st.summary.gpu_quota = formatUnits("", gpu_quota);
    st.summary.gpu_limit = every_gpu_limited ? formatUnits("", gpu_limit) : "none";
    st.summary.gpu_fair_share = formatUnits("", gpu_share);
    st.summary.gpu_allocated = formatUnits("", gpu_allocated);
  }
  if (usage_at_ != absl::InfinitePast()) st.usage_updated_at = proto::rfc3339(usage_at_);
  const Validity& v = tree_.validity(index);
  proto::Condition c;
  c.type = std::string(kValidCondition);
  c.status = v.valid ? "True" : "False";
  c.reason = v.valid ? "Valid" : v.reason;
  c.message = v.valid ? "" : v.message;
  c.last_transition_time = proto::rfc3339(now);
  if (auto w = written_.find(name); w != written_.end()) {
    for (const proto::Condition& old : w->second.status.conditions)
      if (old.type == c.type && old.status == c.status) c.last_transition_time = old.last_transition_time;
  }
  st.conditions.push_back(std::move(c));
  return st;
}

std::vector<std::pair<std::string, proto::QueueStatus>> Tenancy::dueStatuses(absl::Time now,
                                                                            size_t per_second) {
  std::vector<std::pair<std::string, proto::QueueStatus>> out;
  if (!enabled_ || !fair_valid_) return out;
  // A sliding second: refreshes before reclaims come many times a second, and each would
  // otherwise start a full batch of its own.
  while (!handed_out_.empty() && now - handed_out_.front() >= absl::Seconds(1)) handed_out_.pop_front();
  if (handed_out_.size() >= per_second) return out;
  const size_t budget = per_second - handed_out_.size();
  struct Due {
    bool usage_only;
    absl::Time last;
    size_t index;
  };
  std::vector<Due> due;
  for (size_t i = 1; i < tree_.size(); ++i) {
    const std::string& name = tree_.name(i);
    if (!queues_.contains(name)) continue;
    const Written& w = written_[name];
    proto::QueueStatus st = statusOf(i, now);
    if (!sameButUsage(st, w.status)) {
      if (now - w.at >= status_interval_) due.push_back({false, w.at, i});
    } else if (!sameUsage(st, w.status) && now - w.usage_at >= kUsageWriteInterval) {
      due.push_back({true, w.usage_at, i});
    }
  }
  std::sort(due.begin(), due.end(), [](const Due& a, const Due& b) {
    return std::tie(a.usage_only, a.last, a.index) < std::tie(b.usage_only, b.last, b.index);
  });
  for (const Due& d : due) {
    if (out.size() >= budget) break;
    const std::string& name = tree_.name(d.index);
    Written& w = written_[name];
    w.status = statusOf(d.index, now);
    w.at = now;
    w.usage_at = now;
    out.emplace_back(name, w.status);
    handed_out_.push_back(now);
  }
  return out;
}

}  // namespace muster::scheduler::tenancy

namespace muster::scheduler::tenancy {

void Tenancy::writeFailed(std::string_view queue) {
  auto it = written_.find(proto::av(queue));
  if (it == written_.end()) return;
  it->second.status = proto::QueueStatus{};
  it->second.at = absl::InfinitePast();
  it->second.usage_at = absl::InfinitePast();
}

}  // namespace muster::scheduler::tenancy
