#include "scheduler/fragmentation.h"

#include <algorithm>
#include <tuple>

#include "scheduler/cache.h"

namespace muster::scheduler {

void WorkloadProfile::count(const PodShape& shape, int sign) {
  auto it = counts_.try_emplace(shape, 0).first;
  it->second += sign;
  if (it->second <= 0) counts_.erase(it);
  total_ += sign;
  ++changes_;
}

const std::vector<WorkloadProfile::Class>& WorkloadProfile::classes() const {
  if (counted_ && changes_ * 32 < std::max<int64_t>(total_, 32)) return top_;
  top_.clear();
  top_.reserve(counts_.size());
  for (const auto& [shape, pods] : counts_) top_.push_back(Class{shape, pods});
  auto order = [](const Class& a, const Class& b) {
    // Ties by shape, so the choice does not depend on the hash map's order.
    if (a.weight != b.weight) return a.weight > b.weight;
    return std::tie(a.shape.gpus, a.shape.milli, a.shape.cpu, a.shape.memory, a.shape.rdma) <
           std::tie(b.shape.gpus, b.shape.milli, b.shape.cpu, b.shape.memory, b.shape.rdma);
  };
  const size_t keep = std::min(top_.size(), kMaxClasses);
  std::partial_sort(top_.begin(), top_.begin() + static_cast<std::ptrdiff_t>(keep), top_.end(), order);
  top_.resize(keep);
  auto prior = std::find_if(top_.begin(), top_.end(), [](const Class& c) { return c.shape == kPrior; });
  if (prior != top_.end()) {
    ++prior->weight;
  } else {
    auto seen = counts_.find(kPrior);  // among the shapes left out
    top_.push_back(Class{kPrior, (seen == counts_.end() ? 0 : seen->second) + 1});
  }
  changes_ = 0;
  counted_ = true;
  return top_;
}

NodeSlack slackOf(const NodeInfo& n, ResourceId gpu, ResourceId rdma) {
  NodeSlack s;
  s.cpu = n.freeOf(kCpu);
  s.memory = n.freeOf(kMemory);
  s.rdma = n.freeOf(rdma);
  s.whole = std::max<int64_t>(0, n.freeOf(gpu));
  for (const NodeInfo::GpuShare& share : n.gpu_shares)
    s.shared.push_back(std::max<int64_t>(0, 1000 - share.used));
  return s;
}

int64_t freeThousandths(const NodeInfo& n, ResourceId gpu) {
  int64_t sum = saturatingMul(std::max<int64_t>(0, n.freeOf(gpu)), 1000);
  for (const NodeInfo::GpuShare& share : n.gpu_shares) sum += std::max<int64_t>(0, 1000 - share.used);
  return sum;
}

int64_t fragmentation(const NodeSlack& s, const std::vector<WorkloadProfile::Class>& classes) {
  int64_t partial = 0;
  for (int64_t f : s.shared) partial += f;
  const int64_t total = saturatingAdd(saturatingMul(s.whole, 1000), partial);
  if (total == 0) return 0;
  int64_t sum = 0;
  for (const WorkloadProfile::Class& c : classes) {
    const PodShape& p = c.shape;
    const bool host = s.cpu >= p.cpu && s.memory >= p.memory && s.rdma >= p.rdma;
    int64_t unusable = total;
    if (p.milli > 0) {
      // Fractions fill a GPU several at a time: what as many of them as the node's GPUs, CPU and
      // memory take leaves, plus (FGD's measure) the GPUs with less than one pod's share free,
      // which no pod of the shape can use whatever else comes: all of it where none fits.
      int64_t pods = saturatingMul(s.whole, 1000 / p.milli);
      int64_t slivers = 0;
      for (int64_t f : s.shared) {
        pods = saturatingAdd(pods, f / p.milli);
        if (f < p.milli) slivers += f;
      }
      if (p.cpu > 0) pods = std::min(pods, std::max<int64_t>(0, s.cpu) / p.cpu);
      if (p.memory > 0) pods = std::min(pods, std::max<int64_t>(0, s.memory) / p.memory);
      if (p.rdma > 0) pods = std::min(pods, std::max<int64_t>(0, s.rdma) / p.rdma);
      if (pods == 0) slivers = total;
      unusable = saturatingAdd(std::max<int64_t>(0, saturatingSub(total, saturatingMul(pods, p.milli))),
                               slivers);
    } else if (host && s.whole >= p.gpus) {
      unusable = partial;  // whole GPUs: the partly used ones
    }
    sum = saturatingAdd(sum, saturatingMul(c.weight, unusable));
  }
  return sum;
}

int64_t fragmentationDelta(const NodeInfo& n, ResourceId gpu, ResourceId rdma, const Resources& requests,
                           int32_t milli, int32_t gpu_index,
                           const std::vector<WorkloadProfile::Class>& classes) {
  NodeSlack before = slackOf(n, gpu, rdma);
  NodeSlack after = before;
  after.cpu = saturatingSub(after.cpu, requests[kCpu]);
  after.memory = saturatingSub(after.memory, requests[kMemory]);
  after.rdma = saturatingSub(after.rdma, requests[rdma]);
  after.whole = std::max<int64_t>(0, saturatingSub(after.whole, requests[gpu]));
  if (milli > 0) {
    auto share = std::find_if(n.gpu_shares.begin(), n.gpu_shares.end(),
                              [&](const NodeInfo::GpuShare& s) { return s.index == gpu_index; });
    if (share != n.gpu_shares.end()) {
      int64_t& f = after.shared[static_cast<size_t>(share - n.gpu_shares.begin())];
      f = std::max<int64_t>(0, f - milli);
    } else if (after.whole > 0) {
      --after.whole;
      after.shared.push_back(1000 - milli);
    }
  }
  return saturatingSub(fragmentation(after, classes), fragmentation(before, classes));
}

}  // namespace muster::scheduler
