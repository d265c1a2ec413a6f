#include "scheduler/spread.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

constexpr char kDoNotSchedule[] = "DoNotSchedule";
constexpr char kScheduleAnyway[] = "ScheduleAnyway";

bool isEmpty(const proto::LabelSelector& s) {
  return s.match_labels.empty() && s.match_expressions.empty();
}

const std::string* labelOf(const NodeInfo& node, const std::string& key) {
  auto it = node.labels().find(key);
  return it == node.labels().end() ? nullptr : &it->second;
}

// Whether `node` counts for constraint `c` of `pod` (its node inclusion policies).
bool included(const proto::TopologySpreadConstraint& c, const PodInfo& pod, const NodeInfo& node) {
  if (c.node_affinity_policy != "Ignore" && !filterNodeAffinity(pod, node).ok()) return false;
  if (c.node_taints_policy == "Honor" &&
      proto::findUntoleratedTaint(node.taints, pod.pod().spec.tolerations) != nullptr)
    return false;
  return true;
}

struct Counted {
  const proto::TopologySpreadConstraint* c;
  std::optional<proto::LabelSelector> selector;
  absl::flat_hash_map<std::string, int64_t> counts;
  std::vector<uint8_t> eligible;  // by NodeId
};

// Counts per eligible domain for each constraint of `pod` with `when`; `all_keys`: a node must
// carry every one of these constraints' keys to be eligible (the filter's rule).
std::vector<Counted> count(const PodInfo& pod, const ClusterCache& cache, std::string_view when,
                           bool all_keys) {
  std::vector<Counted> out;
  for (const auto& c : pod.pod().spec.topology_spread_constraints) {
    if (c.when_unsatisfiable != when) continue;
    out.push_back({&c, spreadSelector(c, pod.pod().meta.labels), {}, {}});
  }
  if (out.empty()) return out;
  for (Counted& k : out) k.eligible.assign(cache.slotCount(), 0);
  for (NodeId id : cache.topology().order) {
    const NodeInfo& node = cache.node(id);
    if (all_keys && std::any_of(out.begin(), out.end(), [&](const Counted& k) {
          return labelOf(node, k.c->topology_key) == nullptr;
        }))
      continue;
    for (Counted& k : out) {
      const std::string* v = labelOf(node, k.c->topology_key);
      if (v == nullptr || !included(*k.c, pod, node)) continue;
      k.eligible[id] = 1;
      k.counts.try_emplace(*v, 0);
    }
  }
  const std::string& ns = pod.pod().meta.namespace_;
  cache.forEachPlacedPod([&](const PlacedPod& placed, NodeId id) {
    if (placed.terminating || placed.namespace_ != ns) return;
    for (Counted& k : out) {
      if (!k.selector || isEmpty(*k.selector) || !k.eligible[id]) continue;
      if (!k.selector->matches(placed.labels)) continue;
      ++k.counts[*labelOf(cache.node(id), k.c->topology_key)];
    }
  });
  return out;
}

void appendSelector(std::string* out, const std::optional<proto::LabelSelector>& s) {
  absl::StrAppend(out, s ? s->canonical() : "-");
}

}  // namespace

std::optional<proto::LabelSelector> spreadSelector(const proto::TopologySpreadConstraint& c,
                                                   const proto::Labels& pod_labels) {
  if (!c.label_selector) return std::nullopt;
  proto::LabelSelector s = *c.label_selector;
  for (const std::string& key : c.match_label_keys) {
    auto it = pod_labels.find(key);
    if (it != pod_labels.end()) s.match_expressions.push_back({key, "In", {it->second}});
  }
  return s;
}

std::optional<SpreadFilter> SpreadFilter::prepare(const PodInfo& pod, const ClusterCache& cache,
                                                  uint32_t gang_mask) {
  std::vector<Counted> counted = count(pod, cache, kDoNotSchedule, true);
  if (counted.empty()) return std::nullopt;
  SpreadFilter f;
  const auto& all = pod.pod().spec.topology_spread_constraints;
  for (Counted& k : counted) {
    Constraint c;
    c.key = k.c->topology_key;
    c.max_skew = k.c->max_skew;
    c.min_domains = k.c->min_domains.value_or(1);
    c.self = k.selector && k.selector->matches(pod.pod().meta.labels) ? 1 : 0;
    c.counts = std::move(k.counts);
    c.min = std::numeric_limits<int64_t>::max();
    for (const auto& [value, n] : c.counts) c.min = std::min(c.min, n);
    const bool can_raise =
        !c.counts.empty() && static_cast<int64_t>(c.counts.size()) >= c.min_domains;
    if (!can_raise) c.min = 0;
    const auto index = static_cast<size_t>(k.c - all.data());
    c.gang = index < 32 && (gang_mask >> index & 1) != 0 && k.selector;
    if (c.gang) {
      GangSpread g;
      g.key = c.key;
      g.max_skew = c.max_skew;
      g.can_raise = can_raise;
      g.min = c.min;
      g.counts = c.counts;
      for (const auto& [value, n] : g.counts) g.sorted.push_back(n);
      std::sort(g.sorted.begin(), g.sorted.end());
      g.selector = *k.selector;
      g.namespace_ = pod.pod().meta.namespace_;
      // The host's constraint goes last: it is the per-node cap when another key is spread too.
      if (g.key == proto::vocabulary::kHostnameLabel) f.gang_.push_back(std::move(g));
      else f.gang_.insert(f.gang_.begin(), std::move(g));
    }
    f.constraints_.push_back(std::move(c));
  }
  return f;
}

Status SpreadFilter::check(const NodeInfo& node) const {
  for (const Constraint& c : constraints_) {
    if (labelOf(node, c.key) == nullptr) return Status::unresolvable(std::string(kReasonSpreadLabel));
  }
  for (const Constraint& c : constraints_) {
    if (c.gang) continue;
    auto it = c.counts.find(*labelOf(node, c.key));
    int64_t here = it == c.counts.end() ? 0 : it->second;
    if (here + c.self - c.min > c.max_skew) return Status::unschedulable(std::string(kReasonSpread));
  }
  return Status::success();
}

int64_t planGangSpread(const GangSpread& c, std::vector<DomainRoom>& domains, int64_t need) {
  // Raising the minimum to m puts max(0, m - c(d)) members in every eligible domain below it, and
  // lets a domain hold up to m + maxSkew. The first only grows with m: stop at the first m whose
  // lower bounds cannot be met (an eligible domain below m outside the unit, or without the room).
  // A domain's floor (members it must take for another constraint) may need a higher m.
  struct Bounds {
    int64_t lo;
    int64_t hi;
  };
  std::vector<Bounds> bounds(domains.size());
  int64_t best = 0;
  // Members of other groups placed before count too: they can have raised the minimum already.
  int64_t placed = 0;
  for (const DomainRoom& d : domains) placed += d.placed;
  const int64_t last = c.can_raise ? c.min + need + placed : c.min;
  for (int64_t m = c.min; m <= last; ++m) {
    const auto below = std::lower_bound(c.sorted.begin(), c.sorted.end(), m) - c.sorted.begin();
    int64_t outside_below = below;
    int64_t sum_lo = 0;
    int64_t sum_hi = 0;
    bool fatal = false;     // no higher m can do either
    bool feasible = true;   // this m can
    for (size_t i = 0; i < domains.size(); ++i) {
      const DomainRoom& d = domains[i];
      auto it = c.counts.find(d.value);
      if (it == c.counts.end()) {  // not an eligible domain: none of its nodes takes a member
        bounds[i] = {0, 0};
        fatal |= d.floor > 0;
        continue;
      }
      if (it->second < m) --outside_below;
      const int64_t have = it->second + d.placed;
      const int64_t lo = std::max<int64_t>(d.floor, m - have);
      const int64_t hi = std::min<int64_t>(d.room, std::max<int64_t>(0, m + c.max_skew - have));
      fatal |= lo > d.room;
      feasible &= lo <= hi;
      bounds[i] = {lo, hi};
      sum_lo += lo;
      sum_hi += hi;
    }
    if (fatal || outside_below > 0 || sum_lo > need) break;
    if (!feasible) continue;
    best = std::max(best, std::min(sum_hi, need));
    if (sum_hi < need) continue;
    std::vector<size_t> order(domains.size());
    for (size_t i = 0; i < order.size(); ++i) {
      order[i] = i;
      domains[i].take = bounds[i].lo;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return bounds[x].hi - bounds[x].lo > bounds[y].hi - bounds[y].lo;
    });
    int64_t left = need - sum_lo;
    for (size_t i : order) {
      const int64_t more = std::min(left, bounds[i].hi - bounds[i].lo);
      domains[i].take += more;
      left -= more;
    }
    return need;
  }
  return best;
}

std::optional<SpreadScore> SpreadScore::prepare(const PodInfo& pod, const ClusterCache& cache) {
  std::vector<Counted> counted = count(pod, cache, kScheduleAnyway, false);
  if (counted.empty()) return std::nullopt;
  SpreadScore s;
  for (Counted& k : counted) {
    Constraint c;
    c.key = k.c->topology_key;
    c.weight = std::log(static_cast<double>(k.counts.size()) + 2);
    c.required = !k.c->system_default;
    c.counts = std::move(k.counts);
    s.constraints_.push_back(std::move(c));
  }
  return s;
}

int64_t SpreadScore::score(const NodeInfo& node) const {
  double sum = 0;
  for (const Constraint& c : constraints_) {
    const std::string* v = labelOf(node, c.key);
    if (v == nullptr) {
      if (!c.required) continue;
      return -(int64_t{1} << 40);  // kube-scheduler scores such a node 0
    }
    auto it = c.counts.find(*v);
    sum += static_cast<double>(it == c.counts.end() ? 0 : it->second) * c.weight;
  }
  return -static_cast<int64_t>(std::llround(sum * 1000));
}

std::string gangSpread(const std::vector<PodInfoPtr>& members,
                       const std::function<bool(size_t, size_t)>& same_group,
                       std::vector<uint32_t>* masks) {
  const size_t n = members.size();
  masks->assign(n, 0);
  if (n < 2) return "";
  std::vector<std::vector<size_t>> counted(n);  // the members each member's constraints count
  for (size_t i = 0; i < n; ++i) {
    const proto::Pod& p = members[i]->pod();
    int host = 0;
    int other = 0;
    const auto& constraints = p.spec.topology_spread_constraints;
    for (size_t ci = 0; ci < constraints.size(); ++ci) {
      const auto& c = constraints[ci];
      if (c.when_unsatisfiable != kDoNotSchedule) continue;
      std::optional<proto::LabelSelector> s = spreadSelector(c, p.meta.labels);
      if (!s || isEmpty(*s)) continue;
      std::vector<size_t> hit;
      for (size_t j = 0; j < n; ++j) {
        if (j != i && members[j]->pod().meta.namespace_ == p.meta.namespace_ &&
            s->matches(members[j]->pod().meta.labels))
          hit.push_back(j);
      }
      if (hit.empty()) continue;
      const std::string head =
          absl::StrCat("pod ", members[i]->key, " has a DoNotSchedule topology spread constraint on ",
                       c.topology_key, " that counts member ", members[hit[0]]->key,
                       " of its own gang");
      if (!s->matches(p.meta.labels)) {
        return absl::StrCat(head, " but not the pod itself; Muster spreads a gang's members only "
                                  "by constraints that count the pod too");
      }
      if (ci >= 32) return absl::StrCat(head, " as its 33rd or later constraint");
      ++(c.topology_key == proto::vocabulary::kHostnameLabel ? host : other);
      if (host > 1 || other > 1) {
        return absl::StrCat(head, ", and another on a key of the same kind; Muster spreads a "
                                  "gang's members over one key (and ", proto::vocabulary::kHostnameLabel,
                            ")");
      }
      (*masks)[i] |= uint32_t{1} << ci;
      counted[i].insert(counted[i].end(), hit.begin(), hit.end());
    }
  }
  // Members of other shapes that count each other are placed one group after the other, each
  // counting those before (placement/spread_fill.h): the skew holds at the end when their
  // constraints and the nodes they may use are the same. One-way counting is an order (the
  // counted first).
  std::vector<std::string> alike(n);
  auto alikeKey = [&](size_t i) -> const std::string& {
    if (!alike[i].empty()) return alike[i];
    const proto::Pod& p = members[i]->pod();
    const auto& constraints = p.spec.topology_spread_constraints;
    std::string& s = alike[i];
    absl::StrAppend(&s, p.meta.namespace_, "|");
    bool honor_affinity = false;
    bool honor_taints = false;
    for (size_t ci = 0; ci < constraints.size() && ci < 32; ++ci) {
      if (((*masks)[i] >> ci & 1) == 0) continue;
      const auto& c = constraints[ci];
      absl::StrAppend(&s, "[", c.max_skew, "|", c.topology_key, "|", c.min_domains.value_or(1), "|",
                      c.node_affinity_policy, "|", c.node_taints_policy, "|");
      appendSelector(&s, spreadSelector(c, p.meta.labels));
      absl::StrAppend(&s, "]");
      honor_affinity |= c.node_affinity_policy != "Ignore";
      honor_taints |= c.node_taints_policy == "Honor";
    }
    if (honor_affinity) absl::StrAppend(&s, "|a:", nodeAffinitySignature(p));
    if (honor_taints) {
      for (const proto::Toleration& t : p.spec.tolerations)
        absl::StrAppend(&s, "|t:", t.key, "\x1f", t.operator_, "\x1f", t.value, "\x1f", t.effect);
    }
    return s;
  };
  for (size_t i = 0; i < n; ++i) {
    for (size_t j : counted[i]) {
      if ((*masks)[j] == 0 || same_group(i, j)) continue;
      const bool mutual = std::find(counted[j].begin(), counted[j].end(), i) != counted[j].end();
      if (mutual && alikeKey(i) != alikeKey(j)) {
        return absl::StrCat("pod ", members[i]->key, " has a DoNotSchedule topology spread "
                            "constraint that counts member ", members[j]->key, " of its own gang, "
                            "which counts it too with other constraints or node constraints; "
                            "Muster spreads members of different shapes that count each other only "
                            "when their constraints and the nodes they may use are the same");
      }
    }
  }
  return "";
}

std::optional<proto::LabelSelector> defaultSelector(
    const proto::Pod& pod, const std::vector<std::shared_ptr<const proto::Service>>& services,
    const std::map<std::string, std::string>* rc, const proto::LabelSelector* workload) {
  proto::LabelSelector out;
  for (const auto& svc : services) {
    if (svc->meta.namespace_ != pod.meta.namespace_ || svc->selector.empty()) continue;
    proto::LabelSelector s;
    s.match_labels = svc->selector;
    if (!s.matches(pod.meta.labels)) continue;
    for (const auto& [k, v] : svc->selector) out.match_labels[k] = v;
  }
  if (rc != nullptr)
    for (const auto& [k, v] : *rc) out.match_labels[k] = v;
  if (workload != nullptr) {
    // Its requirements are added to the Services' (a key in both must satisfy both).
    for (const auto& [k, v] : workload->match_labels) out.match_expressions.push_back({k, "In", {v}});
    out.match_expressions.insert(out.match_expressions.end(), workload->match_expressions.begin(),
                                 workload->match_expressions.end());
  }
  if (isEmpty(out)) return std::nullopt;
  return out;
}

std::vector<proto::TopologySpreadConstraint> defaultSpreadConstraints(
    const SchedulerConfig& config, const proto::LabelSelector& selector) {
  std::vector<proto::TopologySpreadConstraint> out;
  for (const SchedulerConfig::DefaultSpread& d : config.defaultSpread()) {
    proto::TopologySpreadConstraint c;
    c.system_default = config.spread_defaulting == SchedulerConfig::SpreadDefaulting::kSystem;
    c.max_skew = d.max_skew;
    c.topology_key = d.topology_key;
    c.when_unsatisfiable = d.when_unsatisfiable;
    c.label_selector = selector;
    out.push_back(std::move(c));
  }
  return out;
}

std::string spreadSignature(const proto::Pod& pod) {
  std::string s;
  for (const auto& c : pod.spec.topology_spread_constraints) {
    std::optional<proto::LabelSelector> sel = spreadSelector(c, pod.meta.labels);
    absl::StrAppend(&s, "[", c.system_default ? "s" : "", c.max_skew, "|", c.topology_key, "|", c.when_unsatisfiable, "|",
                    c.min_domains.value_or(1), "|", c.node_affinity_policy, "|",
                    c.node_taints_policy, "|");
    appendSelector(&s, sel);
    absl::StrAppend(&s, sel && sel->matches(pod.meta.labels) ? "|self]" : "]");
  }
  return s;
}

}  // namespace muster::scheduler
