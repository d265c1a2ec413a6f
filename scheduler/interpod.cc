#include "scheduler/interpod.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

const proto::PodAffinity* affinityOf(const proto::Pod& pod) {
  return pod.spec.affinity ? &pod.spec.affinity->pod_affinity : nullptr;
}
const proto::PodAffinity* antiAffinityOf(const proto::Pod& pod) {
  return pod.spec.affinity ? &pod.spec.affinity->pod_anti_affinity : nullptr;
}
const std::vector<proto::PodAffinityTerm>& requiredAffinity(const proto::Pod& pod) {
  static const std::vector<proto::PodAffinityTerm> kNone;
  const proto::PodAffinity* a = affinityOf(pod);
  return a ? a->required : kNone;
}
const std::vector<proto::PodAffinityTerm>& requiredAntiAffinity(const proto::Pod& pod) {
  static const std::vector<proto::PodAffinityTerm> kNone;
  const proto::PodAffinity* a = antiAffinityOf(pod);
  return a ? a->required : kNone;
}

bool isEverything(const proto::LabelSelector& s) {
  return s.match_labels.empty() && s.match_expressions.empty();
}

bool namespaceSelected(const proto::PodAffinityTerm& term, std::string_view owner_namespace,
                       std::string_view pod_namespace, const NamespaceLabels& namespace_labels) {
  if (term.namespaces.empty() && !term.namespace_selector) return pod_namespace == owner_namespace;
  for (const std::string& ns : term.namespaces)
    if (ns == pod_namespace) return true;
  if (!term.namespace_selector) return false;
  if (isEverything(*term.namespace_selector)) return true;
  if (!namespace_labels) return false;
  const proto::Labels* labels = namespace_labels(pod_namespace);
  return labels != nullptr && term.namespace_selector->matches(*labels);
}

const std::string* labelOf(const NodeInfo& node, const std::string& key) {
  auto it = node.labels().find(key);
  return it == node.labels().end() ? nullptr : &it->second;
}

void appendSelector(std::string* out, const std::optional<proto::LabelSelector>& s) {
  absl::StrAppend(out, s ? s->canonical() : "-");
}

// A term as text, with the namespace it is relative to: equal for terms that select the same pods.
std::string fingerprint(const proto::PodAffinityTerm& t, std::string_view owner_namespace) {
  std::string s = absl::StrCat(av(owner_namespace), "|", t.topology_key, "|");
  appendSelector(&s, t.label_selector);
  absl::StrAppend(&s, "|");
  for (const std::string& ns : t.namespaces) absl::StrAppend(&s, ns, "\x1e");
  absl::StrAppend(&s, "|");
  appendSelector(&s, t.namespace_selector);
  return s;
}

// Every node with label `inner` has `outer`, and nodes sharing a value of `inner` share one of
// `outer`: at most one member per `outer` domain is then at most one per `inner` domain too.
bool nestsIn(const ClusterCache& cache, const std::string& inner, const std::string& outer) {
  absl::flat_hash_map<std::string_view, std::string_view> parent;
  for (NodeId id : cache.topology().order) {
    const NodeInfo& n = cache.node(id);
    auto in = n.labels().find(inner);
    if (in == n.labels().end()) continue;
    auto out = n.labels().find(outer);
    if (out == n.labels().end()) return false;
    auto [it, added] = parent.try_emplace(in->second, out->second);
    if (!added && it->second != out->second) return false;
  }
  return true;
}

}  // namespace

int levelOfKey(const std::vector<std::string>& levels, const std::string& key) {
  for (size_t i = 0; i < levels.size(); ++i)
    if (levels[i] == key) return static_cast<int>(i);
  if (key == proto::vocabulary::kHostnameLabel) return static_cast<int>(levels.size());
  return -1;
}

bool matchesAllAffinity(const proto::Pod& owner, const proto::Pod& other,
                        const NamespaceLabels& namespace_labels) {
  const auto& affinity = requiredAffinity(owner);
  return !affinity.empty() &&
         std::all_of(affinity.begin(), affinity.end(), [&](const proto::PodAffinityTerm& t) {
           return termSelects(t, owner.meta.namespace_, other.meta.namespace_, other.meta.labels,
                              namespace_labels);
         });
}

std::vector<std::string> exclusionKeys(const proto::Pod& a, const proto::Pod& b,
                                       const NamespaceLabels& namespace_labels) {
  std::vector<std::string> keys;
  auto add = [&](const proto::Pod& owner, const proto::Pod& other) {
    for (const auto& t : requiredAntiAffinity(owner)) {
      if (!termSelects(t, owner.meta.namespace_, other.meta.namespace_, other.meta.labels,
                       namespace_labels))
        continue;
      if (std::find(keys.begin(), keys.end(), t.topology_key) == keys.end())
        keys.push_back(t.topology_key);
    }
  };
  add(a, b);
  add(b, a);
  return keys;
}

bool termSelects(const proto::PodAffinityTerm& term, std::string_view owner_namespace,
                 std::string_view pod_namespace, const proto::Labels& labels,
                 const NamespaceLabels& namespace_labels) {
  return term.label_selector && term.label_selector->matches(labels) &&
         namespaceSelected(term, owner_namespace, pod_namespace, namespace_labels);
}

std::string interPodSignature(const proto::Pod& pod) {
  std::string s;
  for (const auto& t : requiredAffinity(pod)) absl::StrAppend(&s, "a[", fingerprint(t, pod.meta.namespace_), "]");
  for (const auto& t : requiredAntiAffinity(pod)) absl::StrAppend(&s, "x[", fingerprint(t, pod.meta.namespace_), "]");
  if (const proto::PodAffinity* a = affinityOf(pod)) {
    for (const auto& w : a->preferred)
      absl::StrAppend(&s, "p", w.weight, "[", fingerprint(w.term, pod.meta.namespace_), "]");
  }
  if (const proto::PodAffinity* a = antiAffinityOf(pod)) {
    for (const auto& w : a->preferred)
      absl::StrAppend(&s, "q", w.weight, "[", fingerprint(w.term, pod.meta.namespace_), "]");
  }
  return s;
}

bool hasRequiredInterPodTerms(const proto::Pod& pod) {
  return !requiredAffinity(pod).empty() || !requiredAntiAffinity(pod).empty();
}

std::optional<InterPodFilter> InterPodFilter::prepare(const proto::Pod& pod,
                                                      const ClusterCache& cache,
                                                      const NamespaceLabels& namespace_labels) {
  const auto& affinity = requiredAffinity(pod);
  const auto& anti = requiredAntiAffinity(pod);
  InterPodFilter f;
  const std::string& ns = pod.meta.namespace_;
  cache.forEachPodWithRequiredAntiAffinity([&](const PlacedPod& placed, NodeId id) {
    const NodeInfo& node = cache.node(id);
    if (!node.present) return;
    for (const proto::PodAffinityTerm& t : placed.required_anti_affinity) {
      if (!termSelects(t, placed.namespace_, ns, pod.meta.labels, namespace_labels)) continue;
      if (const std::string* v = labelOf(node, t.topology_key))
        f.existing_anti_.emplace(t.topology_key, *v);
    }
  });
  if (affinity.empty() && anti.empty() && f.existing_anti_.empty()) return std::nullopt;
  for (const auto& t : affinity) f.affinity_keys_.push_back(t.topology_key);
  for (const auto& t : anti) f.anti_keys_.push_back(t.topology_key);
  if (!affinity.empty() || !anti.empty()) {
    cache.forEachPlacedPod([&](const PlacedPod& placed, NodeId id) {
      const NodeInfo& node = cache.node(id);
      if (!node.present) return;
      if (!affinity.empty() &&
          std::all_of(affinity.begin(), affinity.end(), [&](const proto::PodAffinityTerm& t) {
            return termSelects(t, ns, placed.namespace_, placed.labels, namespace_labels);
          })) {
        for (const auto& t : affinity)
          if (const std::string* v = labelOf(node, t.topology_key))
            f.affinity_pairs_.emplace(t.topology_key, *v);
      }
      for (const auto& t : anti) {
        if (!termSelects(t, ns, placed.namespace_, placed.labels, namespace_labels)) continue;
        if (const std::string* v = labelOf(node, t.topology_key))
          f.anti_pairs_.emplace(t.topology_key, *v);
      }
    });
  }
  f.first_of_group_ =
      !affinity.empty() && f.affinity_pairs_.empty() &&
      std::all_of(affinity.begin(), affinity.end(), [&](const proto::PodAffinityTerm& t) {
        return termSelects(t, ns, ns, pod.meta.labels, namespace_labels);
      });
  return f;
}

Status InterPodFilter::check(const NodeInfo& node) const {
  bool pods_exist = true;
  for (const std::string& key : affinity_keys_) {
    const std::string* v = labelOf(node, key);
    if (v == nullptr) return Status::unresolvable(std::string(kReasonPodAffinity));
    if (!affinity_pairs_.contains(Pair(key, *v))) pods_exist = false;
  }
  if (!pods_exist && !first_of_group_ && !defer_affinity_)
    return Status::unresolvable(std::string(kReasonPodAffinity));
  if (!anti_pairs_.empty()) {
    for (const std::string& key : anti_keys_) {
      const std::string* v = labelOf(node, key);
      if (v != nullptr && anti_pairs_.contains(Pair(key, *v)))
        return Status::unschedulable(std::string(kReasonPodAntiAffinity));
    }
  }
  for (const auto& [key, value] : existing_anti_) {
    const std::string* v = labelOf(node, key);
    if (v != nullptr && *v == value)
      return Status::unschedulable(std::string(kReasonExistingAntiAffinity));
  }
  return Status::success();
}

std::optional<InterPodScore> InterPodScore::prepare(const proto::Pod& pod, const ClusterCache& cache,
                                                    const NamespaceLabels& namespace_labels) {
  const proto::PodAffinity* affinity = affinityOf(pod);
  const proto::PodAffinity* anti = antiAffinityOf(pod);
  const bool own = (affinity && !affinity->preferred.empty()) || (anti && !anti->preferred.empty());
  if (!own && !cache.anyPodWithInterPodTerms()) return std::nullopt;
  InterPodScore out;
  const std::string& ns = pod.meta.namespace_;
  auto add = [&](const proto::PodAffinityTerm& t, const NodeInfo& node, int64_t weight) {
    if (const std::string* v = labelOf(node, t.topology_key)) out.pairs_[{t.topology_key, *v}] += weight;
  };
  auto visit = [&](const PlacedPod& placed, NodeId id) {
    const NodeInfo& node = cache.node(id);
    if (!node.present) return;
    if (own) {
      for (const auto& w : affinity->preferred)
        if (termSelects(w.term, ns, placed.namespace_, placed.labels, namespace_labels))
          add(w.term, node, w.weight);
      for (const auto& w : anti->preferred)
        if (termSelects(w.term, ns, placed.namespace_, placed.labels, namespace_labels))
          add(w.term, node, -static_cast<int64_t>(w.weight));
    }
    // The placed pod's terms that select this one (kube-scheduler's hardPodAffinityWeight: 1).
    for (const auto& t : placed.required_affinity)
      if (termSelects(t, placed.namespace_, ns, pod.meta.labels, namespace_labels)) add(t, node, 1);
    for (const auto& w : placed.preferred_affinity)
      if (termSelects(w.term, placed.namespace_, ns, pod.meta.labels, namespace_labels))
        add(w.term, node, w.weight);
    for (const auto& w : placed.preferred_anti_affinity)
      if (termSelects(w.term, placed.namespace_, ns, pod.meta.labels, namespace_labels))
        add(w.term, node, -static_cast<int64_t>(w.weight));
  };
  if (own) cache.forEachPlacedPod(visit);
  else cache.forEachPodWithInterPodTerms(visit);
  for (auto it = out.pairs_.begin(); it != out.pairs_.end();) {
    if (it->second == 0) out.pairs_.erase(it++);
    else ++it;
  }
  if (out.pairs_.empty()) return std::nullopt;
  return out;
}

bool InterPodFilter::affinityMet(const NodeInfo& node, const absl::flat_hash_set<Pair>& more) const {
  for (const std::string& key : affinity_keys_) {
    const std::string* v = labelOf(node, key);
    if (v == nullptr) return false;
    Pair pair(key, *v);
    if (!affinity_pairs_.contains(pair) && !more.contains(pair)) return false;
  }
  return true;
}

int64_t InterPodScore::score(const NodeInfo& node) const {
  int64_t sum = 0;
  if (pairs_.size() < node.labels().size()) {
    for (const auto& [pair, weight] : pairs_) {
      const std::string* v = labelOf(node, pair.first);
      if (v != nullptr && *v == pair.second) sum += weight;
    }
  } else {
    for (const auto& [k, v] : node.labels()) {
      auto it = pairs_.find(std::make_pair(k, v));
      if (it != pairs_.end()) sum += it->second;
    }
  }
  return sum;
}

GangInterPod analyzeGang(const std::vector<PodInfoPtr>& members, const ClusterCache& cache,
                         const std::vector<std::string>& levels,
                         const NamespaceLabels& namespace_labels) {
  GangInterPod out;
  const size_t n = members.size();
  out.one_per_node.assign(n, false);
  out.one_per_domain.assign(n, "");
  out.group_key.assign(n, "");
  out.whole_gang_affinity.assign(n, false);
  // The terms that can tell members apart: theirs, and the placed pods' anti-affinity.
  struct Term {
    const proto::PodAffinityTerm* term;
    std::string owner_namespace;
  };
  std::vector<Term> terms;
  absl::flat_hash_map<std::string, size_t> seen;
  auto add = [&](const proto::PodAffinityTerm& t, const std::string& owner) {
    if (seen.try_emplace(fingerprint(t, owner), terms.size()).second) terms.push_back({&t, owner});
  };
  for (const PodInfoPtr& m : members) {
    for (const auto& t : requiredAffinity(m->pod())) add(t, m->pod().meta.namespace_);
    for (const auto& t : requiredAntiAffinity(m->pod())) add(t, m->pod().meta.namespace_);
  }
  cache.forEachPodWithRequiredAntiAffinity([&](const PlacedPod& placed, NodeId) {
    for (const auto& t : placed.required_anti_affinity) add(t, placed.namespace_);
  });
  if (terms.empty()) return out;
  for (size_t i = 0; i < n; ++i) {
    const proto::Pod& p = members[i]->pod();
    std::string& key = out.group_key[i];
    key.reserve(terms.size());
    for (const Term& t : terms)
      key.push_back(termSelects(*t.term, t.owner_namespace, p.meta.namespace_, p.meta.labels,
                                namespace_labels) ? '1' : '0');
  }
  if (n < 2) return out;
  auto sameGroup = [&](size_t i, size_t j) {
    return members[i]->constraint_signature == members[j]->constraint_signature &&
           out.group_key[i] == out.group_key[j];
  };
  auto selected = [&](const proto::PodAffinityTerm& t, size_t owner, size_t j) {
    const proto::Pod& o = members[owner]->pod();
    const proto::Pod& p = members[j]->pod();
    return termSelects(t, o.meta.namespace_, p.meta.namespace_, p.meta.labels, namespace_labels);
  };
  for (size_t i = 0; i < n && out.unsupported.empty(); ++i) {
    const std::string name = members[i]->key;
    for (const auto& t : requiredAntiAffinity(members[i]->pod())) {
      std::vector<size_t> hit;
      for (size_t j = 0; j < n; ++j)
        if (j != i && selected(t, i, j)) hit.push_back(j);
      if (hit.empty()) continue;
      const bool host = t.topology_key == proto::vocabulary::kHostnameLabel;
      // Members of other groups it excludes are kept apart by the placement (exclusionKeys);
      // among its own group, one per domain.
      if (std::none_of(hit.begin(), hit.end(), [&](size_t j) { return sameGroup(i, j); })) continue;
      if (!host && !out.one_per_domain[i].empty() && out.one_per_domain[i] != t.topology_key) {
        // Nested domains (racks in zones): one per the outer domain is one per the inner too.
        if (nestsIn(cache, out.one_per_domain[i], t.topology_key)) {
          out.one_per_domain[i] = t.topology_key;
          continue;
        }
        if (nestsIn(cache, t.topology_key, out.one_per_domain[i])) continue;
        out.unsupported = absl::StrCat(
            "pod ", name, " has required anti-affinity to other members of its gang on both ",
            out.one_per_domain[i], " and ", t.topology_key,
            "; among members of one gang Muster supports it on one key (and ",
            proto::vocabulary::kHostnameLabel, "), or on keys whose domains nest");
        break;
      }
      // Per domain of another key: distributeSpread (nodes without the key take any number).
      if (host) out.one_per_node[i] = true;
      else out.one_per_domain[i] = t.topology_key;
    }
    if (!out.unsupported.empty()) break;
    const auto& affinity = requiredAffinity(members[i]->pod());
    out.whole_gang_affinity[i] = !affinity.empty();
    for (const auto& t : affinity) {
      size_t hits = 0;
      for (size_t j = 0; j < n; ++j)
        if (j != i && selected(t, i, j)) ++hits;
      if (hits != n - 1) {
        // Some members only: the placement's order and domains (placement/gang_groups.h, fill.h).
        out.whole_gang_affinity[i] = false;
        continue;
      }
      int level = levelOfKey(levels, t.topology_key);
      if (level < 0) {
        out.unsupported = absl::StrCat(
            "pod ", name, " has required affinity to the members of its gang on ",
            t.topology_key, ", which is not one of the scheduler's topology levels or ",
            proto::vocabulary::kHostnameLabel);
        break;
      }
      out.required_level = std::max(out.required_level, level);
    }
  }
  return out;
}

}  // namespace muster::scheduler
