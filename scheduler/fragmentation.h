#pragma once

// What a placement leaves usable: the fragmentation measure of FGD (Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
// ATC '23), over the shapes of the GPU pods the cluster runs.
//
// - The workload: the shapes (CPU, memory, whole GPUs, fraction of one GPU, RDMA NICs) of the GPU
//   pods the cache accounts, each weighted by how many such pods there are; the most common ones.
//   A shape fits only where its CPU, memory and NICs are free, so the measure is scarcity-aware
//   too: a pod that needs no NIC or little memory raises the fragmentation of the nodes whose NICs
//   or memory the shapes need, and lowers nothing it could not use anyway elsewhere.
// - A node's fragmentation for one shape: the free GPU capacity (thousandths) that pods of that
//   shape could not use there. For k whole GPUs, as FGD: all of it when one such pod does not fit
//   (CPU, memory or GPUs short), else the partly used GPUs' free thousandths. For a fraction d,
//   which fills a GPU several pods at a time, two measures added: what is left once as many such
//   pods as the node's GPUs (each GPU's free thousandths ÷ d), CPU and memory take are placed,
//   and (FGD's) the free thousandths of the GPUs with less than d free, which no such pod can use
//   whatever else comes (all of it where none fits). On the Alibaba trace (bench/README.md, seed 1,
//   `gpu_milli` units) the first alone placed 95.6 / 97.5 % of the GPUs on the default and
//   multigpu50 files, FGD's alone 95.1 / 97.4 %, their sum 95.7 / 97.6 %, and more on each of six
//   seeds than the first alone.
// - A prior: the shapes count one pod asking for one whole GPU more than the cluster has seen.
//   A profile of a few pods says little of what comes next; without the prior, on a node whose
//   pods so far asked for half a GPU, a 0.3 would rather break the empty GPU (leaving 0.7, room for
//   a half) than leave 0.2 beside the half, and a later 0.6 + 0.4 would no longer fit. Against the
//   thousands of pods of a real profile it weighs nothing (the trace's figures are the same).
// - The node's fragmentation: the weighted sum over the shapes. Placement prefers the node whose
//   fragmentation a pod raises least, so GPUs are not stranded behind exhausted CPU or memory and
//   big pods keep whole nodes (placement/scoring.h and single_pod.h say where it applies).
//
// Exact integer arithmetic: weights are pod counts, so equal choices compare equal.

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "scheduler/resources.h"

namespace muster::scheduler {

struct NodeInfo;

struct PodShape {
  int64_t cpu = 0;     // millicores
  int64_t memory = 0;  // bytes
  int64_t gpus = 0;    // whole GPUs
  int32_t milli = 0;   // thousandths of one GPU (0: none)
  int64_t rdma = 0;    // RDMA NICs (preferred.jp/rdma)
  bool operator==(const PodShape&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const PodShape& s) {
    return H::combine(std::move(h), s.cpu, s.memory, s.gpus, s.milli, s.rdma);
  }
};

class WorkloadProfile {
 public:
  // At most this many shapes count, the most common (FGD's simulator keeps those covering 95 % of
  // the pods: 53-59 shapes on the Alibaba trace).
  static constexpr size_t kMaxClasses = 64;
  struct Class {
    PodShape shape;
    int64_t weight = 0;  // pods of this shape
  };
  // A pod of this shape accounted (+1) or no longer (-1).
  void count(const PodShape& shape, int sign);
  bool empty() const { return total_ <= 0; }
  // The prior's shape (see above): one whole GPU, no CPU, memory or NIC.
  static constexpr PodShape kPrior{.gpus = 1};
  // The most common shapes, and the prior's (its weight one more than the pods of that shape),
  // recounted once the pods have changed by 1/32 since the last count.
  const std::vector<Class>& classes() const;

 private:
  absl::flat_hash_map<PodShape, int64_t> counts_;
  int64_t total_ = 0;
  mutable std::vector<Class> top_;
  mutable int64_t changes_ = 0;  // since top_ was counted
  mutable bool counted_ = false;
};

// What a node has free for GPU pods: CPU, memory, RDMA NICs, its whole free GPUs, and the free
// thousandths of each GPU that pods share (in NodeInfo::gpu_shares order).
struct NodeSlack {
  int64_t cpu = 0;
  int64_t memory = 0;
  int64_t rdma = 0;
  int64_t whole = 0;
  absl::InlinedVector<int64_t, 8> shared;
};
NodeSlack slackOf(const NodeInfo& n, ResourceId gpu, ResourceId rdma);
// The node's free GPU capacity in thousandths: its whole free GPUs and what its shared GPUs have left.
int64_t freeThousandths(const NodeInfo& n, ResourceId gpu);

// The node's fragmentation for the shapes, weighted (0 on a node without free GPU capacity).
int64_t fragmentation(const NodeSlack& s, const std::vector<WorkloadProfile::Class>& classes);

// How much a pod raises the node's fragmentation: it takes `requests` (its whole GPUs from the
// free ones) and, when `milli` > 0, `milli` thousandths of GPU `gpu_index` (a shared one, or one of
// the node's free GPUs when no pod shares that index yet).
int64_t fragmentationDelta(const NodeInfo& n, ResourceId gpu, ResourceId rdma, const Resources& requests,
                           int32_t milli, int32_t gpu_index,
                           const std::vector<WorkloadProfile::Class>& classes);

}  // namespace muster::scheduler
