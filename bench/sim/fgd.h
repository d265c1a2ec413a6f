#pragma once

// FGD, the fragmentation-gradient-descent policy of Weng et al., "Beware of Fragmentation"
// (USENIX ATC '23), as a baseline for the simulator, written from the paper's definitions:
//
// - The target workload is the stream's task classes (CPU, memory, GPUs, the fraction of one GPU),
//   each weighted by how often it arrives (the most frequent classes, renormalised).
// - A node's fragmentation for one class is the GPU capacity (in thousandths) the class cannot
//   use there: all its free GPU capacity when the class does not fit at all (CPU, memory, or GPUs
//   short; for a class asking for no GPU: always); otherwise the free capacity of the GPUs it
//   cannot use (for k whole GPUs: the partly used ones; for a fraction d: those with less than d
//   free). The node's fragmentation is the weighted sum over the classes.
// - A pod goes to the node, and for a fraction to the GPU, whose fragmentation it increases the
//   least (ties: the first in scan order).
//
// Only single pods; the simulator places gangs by best-fit under this policy.

#include <optional>
#include <vector>

#include "bench/sim/workload.h"
#include "scheduler/cache.h"

namespace muster::bench {

class FgdScorer {
 public:
  explicit FgdScorer(const std::vector<SimJob>& jobs, size_t max_classes = 64);

  struct Choice {
    scheduler::NodeId node = 0;
    int32_t gpu_index = -1;  // for a fraction: the GPU (an existing share or a new one)
  };
  // Among `scan` (present nodes), those `fits` accepts (static filters), the best node for `pod`.
  template <class Fits>
  std::optional<Choice> choose(const scheduler::PodInfo& pod, const scheduler::ClusterCache& cache,
                               scheduler::ResourceId gpu, const std::vector<scheduler::NodeId>& scan,
                               Fits&& fits) const;

 private:
  struct Class {
    int64_t cpu = 0, memory = 0;  // millicores, bytes
    int gpus = 0;                 // whole GPUs
    int64_t milli = 0;            // a fraction of one GPU (0: none)
    double weight = 0;
  };
  struct State {
    int64_t cpu = 0, memory = 0;
    std::vector<int64_t> free;  // per GPU, thousandths
  };
  double fragmentation(const State& s) const;
  static State stateOf(const scheduler::NodeInfo& n, scheduler::ResourceId gpu);
  std::vector<Class> classes_;
};

template <class Fits>
std::optional<FgdScorer::Choice> FgdScorer::choose(const scheduler::PodInfo& pod,
                                                   const scheduler::ClusterCache& cache,
                                                   scheduler::ResourceId gpu,
                                                   const std::vector<scheduler::NodeId>& scan,
                                                   Fits&& fits) const {
  const scheduler::Resources& r = pod.requests;
  std::optional<Choice> best;
  double best_delta = 0;
  for (scheduler::NodeId id : scan) {
    const scheduler::NodeInfo& n = cache.node(id);
    if (!scheduler::fitsIn(r, n.free()) || !fits(n)) continue;
    if (pod.gpu_milli > 0 && scheduler::fractionRoom(n, gpu, pod.gpu_milli) < 1) continue;
    State before = stateOf(n, gpu);
    const double f0 = fragmentation(before);
    State after = before;
    after.cpu -= r[scheduler::kCpu];
    after.memory -= r[scheduler::kMemory];
    auto consider = [&](const State& s, int32_t index) {
      const double delta = fragmentation(s) - f0;
      if (!best || delta < best_delta) {
        best = Choice{id, index};
        best_delta = delta;
      }
    };
    if (pod.gpu_milli <= 0) {
      // Whole GPUs come from the free ones (the first entries of State::free).
      for (int64_t k = 0; k < r[gpu]; ++k) after.free[static_cast<size_t>(k)] = 0;
      consider(after, -1);
      continue;
    }
    // A fraction: each shared GPU with room, and one free GPU (they are all alike).
    const size_t whole = static_cast<size_t>(std::max<int64_t>(0, n.freeOf(gpu)));
    for (size_t g = 0; g < after.free.size(); ++g) {
      if (after.free[g] < pod.gpu_milli || (g > 0 && g < whole)) continue;
      State s = after;
      s.free[g] -= pod.gpu_milli;
      int32_t index = -1;
      if (g >= whole) index = n.gpu_shares[g - whole].index;
      else index = scheduler::chooseGpu(n, 1000);  // a GPU of its own: the lowest index unshared
      consider(s, index);
    }
  }
  return best;
}

}  // namespace muster::bench
