#include "bench/sim/fgd.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace muster::bench {

FgdScorer::FgdScorer(const std::vector<SimJob>& jobs, size_t max_classes) {
  std::map<std::tuple<int64_t, int64_t, int, int64_t>, double> counts;
  for (const SimJob& j : jobs) {
    const bool fraction = j.gpus_per_pod == 1 && j.gpu_milli < 1000;
    counts[{j.cpu_milli_per_pod, j.memory_mib_per_pod * 1024 * 1024, fraction ? 0 : j.gpus_per_pod,
            fraction ? j.gpu_milli : 0}] += j.pods;
  }
  for (const auto& [k, c] : counts)
    classes_.push_back(Class{std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), c});
  std::sort(classes_.begin(), classes_.end(), [](const Class& a, const Class& b) { return a.weight > b.weight; });
  if (classes_.size() > max_classes) classes_.resize(max_classes);
  double total = 0;
  for (const Class& c : classes_) total += c.weight;
  for (Class& c : classes_) c.weight /= total > 0 ? total : 1;
}

FgdScorer::State FgdScorer::stateOf(const scheduler::NodeInfo& n, scheduler::ResourceId gpu) {
  State s;
  s.cpu = n.freeOf(scheduler::kCpu);
  s.memory = n.freeOf(scheduler::kMemory);
  for (int64_t k = 0; k < n.freeOf(gpu); ++k) s.free.push_back(1000);
  for (const scheduler::NodeInfo::GpuShare& share : n.gpu_shares)
    s.free.push_back(std::max<int64_t>(0, 1000 - share.used));
  return s;
}

double FgdScorer::fragmentation(const State& s) const {
  int64_t total = 0, whole = 0, largest = 0;
  for (int64_t f : s.free) {
    total += f;
    if (f >= 1000) ++whole;
    largest = std::max(largest, f);
  }
  if (total == 0) return 0;
  double sum = 0;
  for (const Class& c : classes_) {
    int64_t frag = total;
    const bool host = s.cpu >= c.cpu && s.memory >= c.memory;
    if (host && c.milli > 0 && largest >= c.milli) {
      frag = 0;
      for (int64_t f : s.free)
        if (f < c.milli) frag += f;
    } else if (host && c.milli == 0 && c.gpus > 0 && whole >= c.gpus) {
      frag = 0;
      for (int64_t f : s.free)
        if (f < 1000) frag += f;
    }
    sum += c.weight * static_cast<double>(frag);
  }
  return sum;
}

}  // namespace muster::bench
