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
//   which fills a GPU several pods at a time: what is left once as many such pods as the node's
//   GPUs (each GPU's free thousandths ÷ d), CPU and memory take are placed. (FGD counts the GPUs
//   with less than d free, as if one pod came; on the Alibaba trace, bench/README.md, counting
//   them all placed 0.5 points more of the GPUs on its default file, 95.6 against 95.1 %.)
// - The node's fragmentation: the weighted sum over the shapes. Placement prefers the node whose
//   fragmentation a pod raises least, so GPUs are not stranded behind exhausted CPU or memory and
//   big pods keep whole nodes (placement.cc says where it applies).
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
  // The most common shapes, recounted once the pods have changed by 1/32 since the last count.
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
