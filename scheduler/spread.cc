#include "scheduler/spread.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

constexpr char kDoNotSchedule[] = "DoNotSchedule";
constexpr char kScheduleAnyway[] = "ScheduleAnyway";

bool isEmpty(const proto::LabelSelector& s) {
  return s.match_labels.empty() && s.match_expressions.empty();
}

const std::string* labelOf(const NodeInfo& node, const std::string& key) {
  auto it = node.labels.find(key);
  return it == node.labels.end() ? nullptr : &it->second;
}

// Whether `node` counts for constraint `c` of `pod` (its node inclusion policies).
bool included(const proto::TopologySpreadConstraint& c, const PodInfo& pod, const NodeInfo& node) {
  if (c.node_affinity_policy != "Ignore" && !filterNodeAffinity(pod, node).ok()) return false;
  if (c.node_taints_policy == "Honor" &&
      proto::findUntoleratedTaint(node.taints, pod.pod.spec.tolerations) != nullptr)
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
  for (const auto& c : pod.pod.spec.topology_spread_constraints) {
    if (c.when_unsatisfiable != when) continue;
    out.push_back({&c, spreadSelector(c, pod.pod.meta.labels), {}, {}});
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
  const std::string& ns = pod.pod.meta.namespace_;
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

std::optional<SpreadFilter> SpreadFilter::prepare(const PodInfo& pod, const ClusterCache& cache) {
  std::vector<Counted> counted = count(pod, cache, kDoNotSchedule, true);
  if (counted.empty()) return std::nullopt;
  SpreadFilter f;
  for (Counted& k : counted) {
    Constraint c;
    c.key = k.c->topology_key;
    c.max_skew = k.c->max_skew;
    c.min_domains = k.c->min_domains.value_or(1);
    c.self = k.selector && k.selector->matches(pod.pod.meta.labels) ? 1 : 0;
    c.counts = std::move(k.counts);
    c.min = std::numeric_limits<int64_t>::max();
    for (const auto& [value, n] : c.counts) c.min = std::min(c.min, n);
    if (c.counts.empty() || static_cast<int64_t>(c.counts.size()) < c.min_domains) c.min = 0;
    f.constraints_.push_back(std::move(c));
  }
  return f;
}

Status SpreadFilter::check(const NodeInfo& node) const {
  for (const Constraint& c : constraints_) {
    if (labelOf(node, c.key) == nullptr) return Status::unresolvable(std::string(kReasonSpreadLabel));
  }
  for (const Constraint& c : constraints_) {
    auto it = c.counts.find(*labelOf(node, c.key));
    int64_t here = it == c.counts.end() ? 0 : it->second;
    if (here + c.self - c.min > c.max_skew) return Status::unschedulable(std::string(kReasonSpread));
  }
  return Status::success();
}

std::optional<SpreadScore> SpreadScore::prepare(const PodInfo& pod, const ClusterCache& cache) {
  std::vector<Counted> counted = count(pod, cache, kScheduleAnyway, false);
  if (counted.empty()) return std::nullopt;
  SpreadScore s;
  for (Counted& k : counted) {
    Constraint c;
    c.key = k.c->topology_key;
    c.weight = std::log(static_cast<double>(k.counts.size()) + 2);
    c.counts = std::move(k.counts);
    s.constraints_.push_back(std::move(c));
  }
  return s;
}

int64_t SpreadScore::score(const NodeInfo& node) const {
  double sum = 0;
  for (const Constraint& c : constraints_) {
    const std::string* v = labelOf(node, c.key);
    if (v == nullptr) return -(int64_t{1} << 40);  // kube-scheduler scores such a node 0
    auto it = c.counts.find(*v);
    sum += static_cast<double>(it == c.counts.end() ? 0 : it->second) * c.weight;
  }
  return -static_cast<int64_t>(std::llround(sum * 1000));
}

std::string spreadAmongMembers(const std::vector<PodInfoPtr>& members) {
  if (members.size() < 2) return "";
  for (size_t i = 0; i < members.size(); ++i) {
    const proto::Pod& p = members[i]->pod;
    for (const auto& c : p.spec.topology_spread_constraints) {
      if (c.when_unsatisfiable != kDoNotSchedule) continue;
      std::optional<proto::LabelSelector> s = spreadSelector(c, p.meta.labels);
      if (!s || isEmpty(*s)) continue;
      for (size_t j = 0; j < members.size(); ++j) {
        if (j == i || members[j]->pod.meta.namespace_ != p.meta.namespace_) continue;
        if (s->matches(members[j]->pod.meta.labels)) {
          return absl::StrCat("pod ", members[i]->key, " has a DoNotSchedule topology spread "
                              "constraint on ", c.topology_key, " that counts member ",
                              members[j]->key, " of its own gang; Muster does not spread a gang's "
                              "members over domains yet");
        }
      }
    }
  }
  return "";
}

std::string spreadSignature(const proto::Pod& pod) {
  std::string s;
  for (const auto& c : pod.spec.topology_spread_constraints) {
    std::optional<proto::LabelSelector> sel = spreadSelector(c, pod.meta.labels);
    absl::StrAppend(&s, "[", c.max_skew, "|", c.topology_key, "|", c.when_unsatisfiable, "|",
                    c.min_domains.value_or(1), "|", c.node_affinity_policy, "|",
                    c.node_taints_policy, "|");
    appendSelector(&s, sel);
    absl::StrAppend(&s, sel && sel->matches(pod.meta.labels) ? "|self]" : "]");
  }
  return s;
}

}  // namespace muster::scheduler
