#pragma once

// The queue tree of queue-based tenancy: queues (teams, orgs) with a quota, an optional limit and
// an over-quota weight per resource, arranged under an implicit root that stands for the whole
// cluster. This file is pure data and arithmetic: it builds the tree from the declared specs and
// checks requests against limits; fair_share.h divides the cluster among the queues.
//
// Amounts are int64 milli-units of a resource named by its Kubernetes name ("nvidia.com/gpu",
// "cpu", "memory", "nvidia.com/gpu/model=H100"): 1 GPU = 1000, 1 cpu = 1000, 1 byte = 1000.
//
// Building never fails and never loops. Each queue that is declared wrongly is still placed
// somewhere (or, for a duplicate, left out), marked invalid in its Validity, and given a usable
// effective configuration:
//   - parent not found ("ParentNotFound"): attached to the root;
//   - on a parent cycle ("Cycle"): every queue on the cycle is attached to the root (queues that
//     merely hang below the cycle keep their parent);
//   - a name declared twice ("Duplicate"): the first declaration wins, later ones are not in the
//     tree (rejected() lists them); an empty name ("InvalidName") likewise;
//   - a negative quota or limit, or a weight that is not a positive finite number ("InvalidQuota"):
//     taken as 0 (the amounts) or 1.0 (the weight);
//   - a quota above the queue's own limit ("QuotaAboveLimit"): the effective quota is the limit;
//   - children whose quotas for a resource sum above the parent's own quota for it, where the
//     parent declares that resource ("ChildrenOverQuota", on the parent): the children's
//     effective quotas are scaled down proportionally (rounded down) to fit the parent's effective
//     quota; applied top down, so a scaled parent passes its scaling on.
// A queue with several problems keeps the reason of the first one found (in the order above) and
// its message lists them all, separated by "; ".
//
// The root is index 0 with the name "". It has no quota or limit of its own: its quota for a
// resource is the cluster's capacity, given to fair_share.h, not stored here.
//
// Immutable once built; safe to read from any thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace muster::scheduler::tenancy {

// What a queue declares for one resource.
struct ResourceQuota {
  int64_t quota = 0;             // guaranteed amount, milli-units
  std::optional<int64_t> limit;  // the most it may hold; none = unlimited
  double over_quota_weight = 1.0;  // its weight when what is left over is divided
};

// One declared queue.
struct QueueSpec {
  std::string name;
  std::string parent;  // "" = a child of the root
  std::map<std::string, ResourceQuota> resources;
};

// Whether a queue was declared correctly; reason is a CamelCase word for conditions, message is
// written for a person. Both are empty for a valid queue.
struct Validity {
  bool valid = true;
  std::string reason;
  std::string message;
};

// Amounts per resource name (milli-units); a missing name is 0.
using Amounts = absl::flat_hash_map<std::string, int64_t>;
// Amounts per queue, indexed by QueueTree index. It may be shorter than the tree: a missing queue
// has nothing. Whether it holds a queue's own amount or its subtree's total is said where used.
using Usage = std::vector<Amounts>;

class QueueTree {
 public:
  static constexpr size_t kRoot = 0;
  // parent() of the root.
  static constexpr size_t kNoQueue = static_cast<size_t>(-1);

  // Builds the tree from the declared queues, in any order. Never fails (see the top comment).
  static QueueTree build(std::vector<QueueSpec> specs);

  // Queues in the tree, the root included. Indexes are 0 (the root), then the accepted specs in
  // their declaration order. Every accessor below expects an index < size().
  size_t size() const { return nodes_.size(); }
  // The index of the queue called `name` ("" is the root); none if no such queue is in the tree.
  std::optional<size_t> find(std::string_view name) const;
  const std::string& name(size_t i) const { return nodes_[i].name; }
  // The queue's parent as the tree has it (the root for an orphan or a queue on a cycle);
  // kNoQueue for the root.
  size_t parent(size_t i) const { return nodes_[i].parent; }
  // Children in name order.
  const std::vector<size_t>& children(size_t i) const { return nodes_[i].children; }
  // 0 for the root, 1 for its children, and so on.
  int depth(size_t i) const { return nodes_[i].depth; }
  // The path from i up to the root: i, its parent, ..., the root's child (empty for the root).
  std::vector<size_t> ancestors(size_t i) const;
  // The deepest queue that is an ancestor of both (or one of them itself).
  size_t lowestCommonAncestor(size_t a, size_t b) const;
  // Every queue, parents before their children (the root first, then breadth first, children
  // in name order).
  const std::vector<size_t>& topDown() const { return top_down_; }

  const Validity& validity(size_t i) const { return nodes_[i].validity; }
  // Declarations that are not in the tree (duplicates, empty names), in declaration order.
  const std::vector<std::pair<QueueSpec, Validity>>& rejected() const { return rejected_; }

  // The queue's resources as declared (empty for the root).
  const std::map<std::string, ResourceQuota>& declared(size_t i) const {
    return nodes_[i].declared;
  }
  // The queue's settings for `resource` after the corrections in the top comment; nullptr where
  // it does not declare the resource (then: quota 0, no limit, weight 1.0).
  const ResourceQuota* effective(size_t i, std::string_view resource) const;
  // effective()'s quota, 0 where the resource is not declared (and for the root, whose quota is
  // the cluster's capacity).
  int64_t effectiveQuota(size_t i, std::string_view resource) const;
  // effective()'s limit; none (unlimited) where not declared and for the root.
  std::optional<int64_t> limit(size_t i, std::string_view resource) const;
  // effective()'s over-quota weight, 1.0 where not declared.
  double weight(size_t i, std::string_view resource) const;

 private:
  struct Node {
    std::string name;
    size_t parent = kNoQueue;
    std::vector<size_t> children;
    int depth = 0;
    Validity validity;
    std::map<std::string, ResourceQuota> declared;
    std::map<std::string, ResourceQuota, std::less<>> effective;
  };

  void addProblem(size_t i, std::string_view reason, std::string_view message);

  std::vector<Node> nodes_;
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<size_t> top_down_;
  std::vector<std::pair<QueueSpec, Validity>> rejected_;
};

// Per queue, the total of `own` over its subtree (itself and every descendant). The result has
// one entry per queue of the tree; entries of `own` beyond the tree are ignored.
Usage subtreeTotals(const QueueTree& tree, const Usage& own);

// Whether `queue` may take `request` more: true if, for every queue on the path from `queue` up to
// the root (the root has no limit) and every resource of `request`, allocated + request stays at
// or below the queue's limit where it declares one. `allocated` holds subtree totals (see
// subtreeTotals). When false, names the first queue from the bottom, and the first resource of it
// in name order, that would go over; the out-parameters may be null and are left alone on true.
bool withinLimits(const QueueTree& tree, size_t queue, const Usage& allocated,
                  const Amounts& request, std::string* blocking_queue,
                  std::string* blocking_resource);

}  // namespace muster::scheduler::tenancy
