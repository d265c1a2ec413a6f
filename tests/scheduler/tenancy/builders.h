#pragma once

// Builders for the tenancy tests: queue("t1", "org1").gpu(gpus(20), std::nullopt, 3.0) reads as
// queue t1 under org1 with 20 GPUs guaranteed, no limit, over-quota weight 3.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "scheduler/tenancy/queue_tree.h"

namespace muster::scheduler::tenancy::testing {

inline constexpr char kGpu[] = "nvidia.com/gpu";
inline constexpr char kCpu[] = "cpu";

inline int64_t gpus(int64_t n) { return n * 1000; }

struct QueueBuilder {
  QueueSpec spec;
  QueueBuilder& quota(const std::string& resource, int64_t amount,
                      std::optional<int64_t> limit = std::nullopt, double weight = 1.0) {
    spec.resources[resource] = ResourceQuota{amount, limit, weight};
    return *this;
  }
  QueueBuilder& gpu(int64_t amount, std::optional<int64_t> limit = std::nullopt,
                    double weight = 1.0) {
    return quota(kGpu, amount, limit, weight);
  }
  operator QueueSpec() const { return spec; }  // NOLINT(google-explicit-constructor)
};
inline QueueBuilder queue(std::string name, std::string parent = "") {
  return QueueBuilder{QueueSpec{std::move(name), std::move(parent), {}}};
}

}  // namespace muster::scheduler::tenancy::testing
