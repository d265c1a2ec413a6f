#pragma once

// Tenancy: what the scheduler knows about queues.muster.dev at run time, on top of the pure
// arithmetic of queue_tree.h and fair_share.h.
//
// - Queues: the Queue objects the informer holds, as a QueueTree (rebuilt when one changes).
// - Membership: a pod is in the queue its label muster.dev/queue names, else the one its
//   namespace's label muster.dev/queue names, else tenancy.defaultQueue ("" = none). Pods of
//   every scheduler count, so a queue's allocation includes what other schedulers placed.
// - Allocation: kept incrementally from the cache's PodObserver, per queue and per subtree (a
//   pod counts in the queue it was in when it was placed, until it leaves the node).
// - Limits: refuses() says whether a gang would take a queue on its path to the root above a
//   limit, or names a queue that does not exist.
// - Fair share: refresh() recomputes it (at most once a second, or when queues change) from the
//   cluster's capacity, each queue's demand (allocated + pending gangs) and its decayed usage;
//   rank() orders queues by how far each is below it, hierarchically: the path from the root's
//   child down to the queue, each level's dominant share allocated ÷ fair share.
// - Status: dueStatuses() hands out the Queue status writes that are due, at a bounded rate.
//
// Units: cpu in millicores, memory, ephemeral-storage and hugepages-* in bytes, every other
// resource in thousandths (so a GPU is 1000 and a pod with muster.dev/gpu-fraction 250m counts
// 250 of nvidia.com/gpu).
//
// Not thread-safe: the scheduler's strand only.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "proto/queue.h"
#include "proto/strings.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/resources.h"
#include "scheduler/tenancy/fair_share.h"
#include "scheduler/tenancy/queue_tree.h"

namespace muster::scheduler::tenancy {

// Whether `resource` is counted in whole units (bytes) rather than thousandths.
bool countedInBytes(std::string_view resource);
// A quantity of `resource` in tenancy units (the file comment).
int64_t unitsOf(std::string_view resource, const proto::Quantity& amount);
// Tenancy units of `resource` as a quantity string ("8", "500m", "64Gi").
std::string formatUnits(std::string_view resource, int64_t units);

// What a gang asks for, in scheduler units (Resources) plus thousandths of shared GPUs.
struct Request {
  Resources requests;
  int64_t gpu_milli = 0;
  Request& operator+=(const Request& o) {
    requests += o.requests;
    gpu_milli = saturatingAdd(gpu_milli, o.gpu_milli);
    return *this;
  }
};

// Why a gang of a queue cannot be placed now, for its Events and condition.
struct Refusal {
  enum class Kind { kNoSuchQueue, kLimit };
  Kind kind = Kind::kLimit;
  std::string queue;     // the queue that refuses (the gang's own, or an ancestor)
  std::string resource;  // kLimit: the resource over its limit
  std::string message;
};

class Tenancy {
 public:
  using NamespaceLabels = std::function<const proto::Labels*(std::string_view)>;
  Tenancy(const SchedulerConfig& config, NamespaceLabels namespace_labels);

  bool enabled() const { return enabled_; }

  // --- queues (the informer's handlers) ---
  void setQueue(std::shared_ptr<const proto::Queue> queue);
  void removeQueue(std::string_view name);
  const QueueTree& tree() const { return tree_; }

  // --- membership and accounting ---
  // The queue of a pod with these labels in this namespace ("" = none).
  std::string queueOf(std::string_view pod_namespace, const proto::Labels& labels) const;
  std::string queueOf(const proto::Pod& pod) const {
    return queueOf(pod.meta.namespace_, pod.meta.labels);
  }
  // ClusterCache::PodObserver.
  void observe(std::string_view key, const PlacedPod& placed, const Resources& requests,
               int32_t gpu_milli, int sign);
  // The namespace's labels may have changed: its placed pods that are in a queue by their
  // namespace (not by their own label) move to the queue it names now.
  void onNamespace(std::string_view name);
  // What the queue's subtree holds of `resource`, in tenancy units (0 for an unknown queue).
  int64_t allocated(std::string_view queue, std::string_view resource) const;

  // --- admission and ordering ---
  // Why a gang of `queue` asking for `request` may not be placed now, or nullopt.
  std::optional<Refusal> refuses(std::string_view queue, const Request& request) const;
  // The queue's place in the cross-queue order: each level's dominant share on the path from the
  // root's child down to the queue (compared lexicographically; lower goes first). Queues that
  // are not in the tree sort last.
  std::vector<double> rank(std::string_view queue) const;

  // --- reclaim and preemption ---
  // The queue an accounted pod counts in ("" when none or not accounted).
  std::string_view queueOfPod(std::string_view pod_key) const;
  // The pod is on its way out (marked preempted or reclaimed, or being deleted): reclaim and the
  // fair-share order count its queue without it from now (limits still count it until it is
  // gone). Also taken from the pod itself when it is first accounted (after a restart).
  void markGoing(std::string_view pod_key);
  // What an accounted pod holds of `resource`, in tenancy units (0 when not accounted).
  int64_t podUnits(std::string_view pod_key, std::string_view resource) const;
  // Whether the queue's subtree holds less than its fair share (its dominant share is below 1):
  // then a gang of it that does not fit may reclaim.
  bool belowFairShare(std::string_view queue) const;
  // Whether a gang of `taker` may reclaim from a unit whose pods count in `victim`: another queue
  // in the tree, neither above the other, that holds more than its floor (quota, and fair share).
  bool mayReclaimFrom(std::string_view taker, std::string_view victim) const;
  // Whether taking the pods of `units` away keeps every queue on a victim's path, up to its lowest
  // common ancestor with `taker`, at or above its floor in every resource it gives up: its quota,
  // and with `reclaim` its fair share too. With `reclaim`, also that afterwards `taker`'s side of
  // each such ancestor, holding `request` more, is no further above its fair share (dominant
  // share) than the victim's side: no reclaim that the victim could take back (no oscillation).
  // Pods in no queue of the tree are bound by nothing.
  bool victimsAllowed(std::string_view taker, const Request& request,
                      const std::vector<std::vector<std::string>>& units, bool reclaim) const;

  // --- fair share ---
  // Recomputes fair shares when queues changed or at least a second has passed since the last
  // time, accruing decayed usage meanwhile. `pending(queue)` is the queue's pending demand: the
  // caller passes every pending gang's request by queue.
  void refresh(absl::Time now, const ClusterCache& cache,
               const std::vector<std::pair<std::string, Request>>& pending,
               bool now_if_changed = false);
  // When refresh() last recomputed (InfinitePast: never).
  absl::Time refreshedAt() const { return refreshed_at_; }
  // The queue's fair share of `resource` at the last refresh (tenancy units; 0 if unknown).
  int64_t fairShare(std::string_view queue, std::string_view resource) const;
  // Pending gangs per queue at the last refresh.
  int64_t pendingGangs(std::string_view queue) const;

  // --- status ---
  // The status writes due now: a queue whose status would change other than in usage, at most
  // once per tenancy.statusIntervalSeconds; one whose only change is its usage, at most once per
  // kUsageWriteInterval. Over all calls, at most `per_second` writes are handed out in any
  // second (the ones that waited longest first). Each returned status counts as written.
  static constexpr absl::Duration kUsageWriteInterval = absl::Minutes(5);
  std::vector<std::pair<std::string, proto::QueueStatus>> dueStatuses(absl::Time now,
                                                                      size_t per_second);
  // A write dueStatuses() handed out failed: it is due again.
  void writeFailed(std::string_view queue);
  // Whether refresh() would recompute now (cheap; the caller gathers pending demand only then):
  // queues changed, or a second passed; with `now_if_changed` (before a reclaim, which must not
  // act on shares computed before the demand it answers), also whenever demand or allocation
  // changed since the last time.
  bool refreshDue(absl::Time now, bool now_if_changed = false) const {
    return enabled_ && (tree_dirty_ || now - refreshed_at_ >= absl::Seconds(1) ||
                        (now_if_changed && demand_dirty_));
  }
  // Pending gangs came, changed or went (the scheduler's pod events).
  void noteDemandChanged() { demand_dirty_ = true; }
  // The resources tenancy reports (every one some queue declares, and nvidia.com/gpu).
  const std::vector<std::string>& resourceNames() const { return resource_names_; }
  // The declared Queue object, or null.
  const proto::Queue* queue(std::string_view name) const {
    auto it = queues_.find(proto::av(name));
    return it == queues_.end() ? nullptr : it->second.get();
  }

 private:
  struct PodRecord {
    std::string queue;
    bool by_label = false;  // the pod's own label named the queue
    bool going = false;     // markGoing
    std::vector<std::pair<ResourceId, int64_t>> amounts;  // non-zero requests
    int32_t gpu_milli = 0;
  };
  struct Held {
    Resources requests;
    int64_t gpu_milli = 0;
  };
  struct Written {
    proto::QueueStatus status;
    absl::Time at = absl::InfinitePast();
    absl::Time usage_at = absl::InfinitePast();
  };

  void rebuild();
  void add(const std::string& queue, const PodRecord& record, int sign);
  // The queue's subtree without its pods on their way out.
  Held staying(size_t index) const;
  int64_t unitsIn(const Held& held, std::string_view resource) const;
  Amounts amountsOf(const Held& held) const;
  proto::QueueStatus statusOf(size_t index, absl::Time now) const;
  // The largest allocated ÷ fair share over the queue's ranked resources (those it declares, and
  // nvidia.com/gpu), of its subtree holding `delta` more (sign +1) or less (-1).
  double dominantShare(size_t index, const Held& delta, int sign) const;
  // The floor of a queue in `resource` for victimsAllowed.
  int64_t floorOf(size_t index, std::string_view resource, bool reclaim) const;

  bool enabled_;
  std::string default_queue_;
  absl::Duration half_life_;
  absl::Duration status_interval_;
  NamespaceLabels namespace_labels_;

  absl::flat_hash_map<std::string, std::shared_ptr<const proto::Queue>> queues_;
  QueueTree tree_;
  bool tree_dirty_ = false;
  bool demand_dirty_ = true;  // noteDemandChanged, or an allocation changed
  // Every resource name some queue declares, and nvidia.com/gpu.
  std::vector<std::string> resource_names_;

  absl::flat_hash_map<std::string, PodRecord> pods_;
  // Pods in a queue by their namespace (or the default), by namespace: onNamespace's work.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> by_namespace_;
  absl::flat_hash_map<std::string, Held> own_;  // by queue name, also for unknown queues
  std::vector<Held> subtree_;                   // by tree index
  std::vector<Held> going_;                     // by tree index: the subtree's pods on their way out
  absl::flat_hash_map<std::string, Held> own_going_;  // by queue name

  FairShare fair_;
  bool fair_valid_ = false;
  absl::Time refreshed_at_ = absl::InfinitePast();
  absl::Time usage_at_ = absl::InfinitePast();
  DecayedUsage usage_;  // by tree index
  absl::flat_hash_map<std::string, double> seeded_;  // usage read from status, by "queue/resource"
  std::vector<int64_t> pending_gangs_;                 // by tree index
  absl::flat_hash_map<std::string, Written> written_;
  std::deque<absl::Time> handed_out_;  // when each write of the last second was handed out
};

}  // namespace muster::scheduler::tenancy
