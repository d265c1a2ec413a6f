#include "scheduler/tenancy/queue_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace muster::scheduler::tenancy {
namespace {

// Debian's abseil has its own absl::string_view, which a std::string_view does not convert to.
absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The queue's effective settings for one resource, with the problems of its own declaration
// (InvalidQuota, QuotaAboveLimit) corrected; `problems` gets (reason, message) for each.
ResourceQuota correctOwn(const std::string& resource, const ResourceQuota& declared,
                         std::vector<std::pair<std::string, std::string>>* problems) {
  ResourceQuota q = declared;
  if (q.quota < 0) {
    problems->emplace_back("InvalidQuota", absl::StrCat(resource, " quota ", q.quota,
                                                        " is negative; 0 is used"));
    q.quota = 0;
  }
  if (q.limit && *q.limit < 0) {
    problems->emplace_back("InvalidQuota", absl::StrCat(resource, " limit ", *q.limit,
                                                        " is negative; 0 is used"));
    q.limit = 0;
  }
  if (!std::isfinite(q.over_quota_weight) || q.over_quota_weight <= 0) {
    problems->emplace_back("InvalidQuota",
                           absl::StrCat(resource, " over-quota weight ", q.over_quota_weight,
                                        " is not a positive number; 1 is used"));
    q.over_quota_weight = 1.0;
  }
  if (q.limit && q.quota > *q.limit) {
    problems->emplace_back("QuotaAboveLimit",
                           absl::StrCat(resource, " quota ", q.quota, " is above its limit ",
                                        *q.limit, "; the limit is used as its quota"));
    q.quota = *q.limit;
  }
  return q;
}

}  // namespace

void QueueTree::addProblem(size_t i, std::string_view reason, std::string_view message) {
  Validity& v = nodes_[i].validity;
  if (v.valid) {
    v.valid = false;
    v.reason = std::string(reason);
    v.message = std::string(message);
  } else {
    absl::StrAppend(&v.message, "; ", av(message));
  }
}

QueueTree QueueTree::build(std::vector<QueueSpec> specs) {
  QueueTree tree;
  tree.nodes_.emplace_back();  // the root
  tree.index_[""] = kRoot;
  std::vector<std::string> parent_names(1);
  for (QueueSpec& spec : specs) {
    if (spec.name.empty()) {
      tree.rejected_.emplace_back(std::move(spec),
                                  Validity{false, "InvalidName", "the queue has no name"});
      continue;
    }
    if (tree.index_.contains(spec.name)) {
      std::string message =
          absl::StrCat("queue ", spec.name, " is declared more than once; the first one is used");
      tree.rejected_.emplace_back(std::move(spec),
                                  Validity{false, "Duplicate", std::move(message)});
      continue;
    }
    tree.index_[spec.name] = tree.nodes_.size();
    Node& node = tree.nodes_.emplace_back();
    node.name = std::move(spec.name);
    node.declared = std::move(spec.resources);
    parent_names.push_back(std::move(spec.parent));
  }
  const size_t n = tree.nodes_.size();

  // Parents by name; a missing one means the root.
  for (size_t i = 1; i < n; ++i) {
    auto it = tree.index_.find(parent_names[i]);
    if (it == tree.index_.end()) {
      tree.nodes_[i].parent = kRoot;
      tree.addProblem(i, "ParentNotFound",
                      absl::StrCat("parent queue ", parent_names[i],
                                   " does not exist; the queue is attached to the root"));
    } else {
      tree.nodes_[i].parent = it->second;
    }
  }

  // Cycles: walk up from each queue not seen yet; a walk that meets itself found a cycle. Each
  // queue is walked over once (state: 0 not seen, 1 on the current walk, 2 done).
  std::vector<uint8_t> state(n, 0);
  state[kRoot] = 2;
  std::vector<size_t> walk;
  for (size_t start = 1; start < n; ++start) {
    walk.clear();
    size_t q = start;
    while (state[q] == 0) {
      state[q] = 1;
      walk.push_back(q);
      q = tree.nodes_[q].parent;
    }
    if (state[q] == 1) {
      // q is on the current walk: the cycle is the walk from q to its end.
      auto first = std::find(walk.begin(), walk.end(), q);
      std::vector<size_t> cycle(first, walk.end());
      for (size_t k = 0; k < cycle.size(); ++k) {
        std::vector<std::string> names;
        for (size_t m = 0; m <= cycle.size(); ++m) {
          names.push_back(tree.nodes_[cycle[(k + m) % cycle.size()]].name);
        }
        tree.addProblem(cycle[k], "Cycle",
                        absl::StrCat("the queue is on a parent cycle (",
                                     absl::StrJoin(names, " -> "),
                                     "); it is attached to the root"));
      }
      for (size_t c : cycle) tree.nodes_[c].parent = kRoot;
    }
    for (size_t w : walk) state[w] = 2;
  }

  for (size_t i = 1; i < n; ++i) tree.nodes_[tree.nodes_[i].parent].children.push_back(i);
  for (Node& node : tree.nodes_) {
    std::sort(node.children.begin(), node.children.end(), [&tree](size_t a, size_t b) {
      return tree.nodes_[a].name < tree.nodes_[b].name;
    });
  }
  tree.top_down_.reserve(n);
  tree.top_down_.push_back(kRoot);
  for (size_t k = 0; k < tree.top_down_.size(); ++k) {
    const size_t p = tree.top_down_[k];
    for (size_t c : tree.nodes_[p].children) {
      tree.nodes_[c].depth = tree.nodes_[p].depth + 1;
      tree.top_down_.push_back(c);
    }
  }

  // Each queue's own declaration.
  std::vector<std::pair<std::string, std::string>> problems;
  for (size_t i = 1; i < n; ++i) {
    problems.clear();
    for (const auto& [resource, declared] : tree.nodes_[i].declared) {
      tree.nodes_[i].effective.emplace(resource, correctOwn(resource, declared, &problems));
    }
    for (const auto& [reason, message] : problems) tree.addProblem(i, reason, message);
  }

  // Children over their parent's quota, top down so that a parent's scaled quota is what its
  // children must fit in.
  for (size_t p : tree.top_down_) {
    Node& parent = tree.nodes_[p];
    for (const auto& [resource, own] : parent.effective) {
      absl::int128 sum = 0;
      for (size_t c : parent.children) {
        if (const ResourceQuota* q = tree.effective(c, resource)) sum += q->quota;
      }
      if (sum <= own.quota) continue;
      const int64_t shown = sum > std::numeric_limits<int64_t>::max()
                                ? std::numeric_limits<int64_t>::max()
                                : static_cast<int64_t>(sum);
      std::string message = absl::StrCat("the children's ", resource, " quotas sum to ", shown,
                                         ", above its quota ", own.quota);
      const auto declared = parent.declared.find(resource);
      if (declared != parent.declared.end() && declared->second.quota != own.quota) {
        absl::StrAppend(&message, " (corrected from ", declared->second.quota, ")");
      }
      absl::StrAppend(&message, "; their quotas are scaled down to fit");
      tree.addProblem(p, "ChildrenOverQuota", message);
      for (size_t c : parent.children) {
        auto it = tree.nodes_[c].effective.find(resource);
        if (it == tree.nodes_[c].effective.end()) continue;
        it->second.quota = static_cast<int64_t>(absl::int128(it->second.quota) * own.quota / sum);
      }
    }
  }
  return tree;
}

std::optional<size_t> QueueTree::find(std::string_view name) const {
  auto it = index_.find(av(name));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::vector<size_t> QueueTree::ancestors(size_t i) const {
  std::vector<size_t> path;
  path.reserve(nodes_[i].depth);
  for (; i != kRoot; i = nodes_[i].parent) path.push_back(i);
  return path;
}

size_t QueueTree::lowestCommonAncestor(size_t a, size_t b) const {
  while (nodes_[a].depth > nodes_[b].depth) a = nodes_[a].parent;
  while (nodes_[b].depth > nodes_[a].depth) b = nodes_[b].parent;
  while (a != b) {
    a = nodes_[a].parent;
    b = nodes_[b].parent;
  }
  return a;
}

const ResourceQuota* QueueTree::effective(size_t i, std::string_view resource) const {
  const auto& map = nodes_[i].effective;
  auto it = map.find(resource);
  return it == map.end() ? nullptr : &it->second;
}

int64_t QueueTree::effectiveQuota(size_t i, std::string_view resource) const {
  const ResourceQuota* q = effective(i, resource);
  return q ? q->quota : 0;
}

std::optional<int64_t> QueueTree::limit(size_t i, std::string_view resource) const {
  const ResourceQuota* q = effective(i, resource);
  return q ? q->limit : std::nullopt;
}

double QueueTree::weight(size_t i, std::string_view resource) const {
  const ResourceQuota* q = effective(i, resource);
  return q ? q->over_quota_weight : 1.0;
}

Usage subtreeTotals(const QueueTree& tree, const Usage& own) {
  Usage total(tree.size());
  for (size_t i = 0; i < tree.size() && i < own.size(); ++i) total[i] = own[i];
  const std::vector<size_t>& order = tree.topDown();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (*it == QueueTree::kRoot) continue;
    Amounts& parent = total[tree.parent(*it)];
    for (const auto& [resource, amount] : total[*it]) parent[resource] += amount;
  }
  return total;
}

bool withinLimits(const QueueTree& tree, size_t queue, const Usage& allocated,
                  const Amounts& request, std::string* blocking_queue,
                  std::string* blocking_resource) {
  std::vector<const std::string*> resources;
  resources.reserve(request.size());
  for (const auto& [resource, amount] : request) {
    if (amount > 0) resources.push_back(&resource);
  }
  std::sort(resources.begin(), resources.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  for (size_t q = queue; q != QueueTree::kRoot; q = tree.parent(q)) {
    for (const std::string* resource : resources) {
      const std::optional<int64_t> limit = tree.limit(q, *resource);
      if (!limit) continue;
      int64_t held = 0;
      if (q < allocated.size()) {
        auto it = allocated[q].find(*resource);
        if (it != allocated[q].end()) held = it->second;
      }
      if (held + request.at(*resource) <= *limit) continue;
      if (blocking_queue) *blocking_queue = tree.name(q);
      if (blocking_resource) *blocking_resource = *resource;
      return false;
    }
  }
  return true;
}

}  // namespace muster::scheduler::tenancy
