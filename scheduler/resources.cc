#include "scheduler/resources.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

struct InternTable {
  std::array<std::string, kMaxResources> names{"cpu", "memory", "ephemeral-storage", "pods",
                                               proto::vocabulary::kExclusiveAnnotation};
  std::atomic<int> count{5};
  std::mutex mutex;  // serialises writers; readers see names[i] for i < count (release/acquire)
};

InternTable& table() {
  static InternTable* t = new InternTable();
  return *t;
}

std::optional<ResourceId> findIn(const InternTable& t, int count, std::string_view name) {
  for (int i = 0; i < count; ++i) {
    if (t.names[i] == name) return static_cast<ResourceId>(i);
  }
  return std::nullopt;
}

int64_t amountOf(ResourceId id, const proto::Quantity& q) {
  return id == kCpu ? q.milliValue() : q.value();
}

// `name` of `what` ("container main", "pod overhead"): a negative amount, or a sum beyond
// kMaxPodRequest, as an error that says so.
absl::Status badAmount(std::string_view what, std::string_view name, const proto::Quantity& q,
                       bool negative) {
  if (negative) {
    return absl::InvalidArgumentError(strCat(what, " requests ", q.toString(), " of ", name,
                                             ": resource requests must not be negative"));
  }
  return absl::InvalidArgumentError(strCat(
      what, " requests ", q.toString(), " of ", name, ", which takes the pod's total over the ",
      formatAmount(*findResource(name), kMaxPodRequest), " of one resource the scheduler can count"));
}

// *total += amount, or an error when amount is negative or the sum exceeds kMaxPodRequest.
absl::Status addAmount(std::string_view what, std::string_view name, const proto::Quantity& q,
                       int64_t amount, int64_t* total) {
  if (amount < 0) return badAmount(what, name, q, /*negative=*/true);
  if (amount > kMaxPodRequest - *total) return badAmount(what, name, q, /*negative=*/false);
  *total += amount;
  return absl::OkStatus();
}

// A container's effective requests: requests, with limits standing in for absent requests.
absl::Status addContainer(const proto::Container& c, Resources* out, bool take_max) {
  const std::string what = absl::StrCat("container ", c.name);
  auto apply = [&](const std::string& name, const proto::Quantity& q) -> absl::Status {
    std::optional<ResourceId> id = internResource(name);
    if (!id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "container ", c.name, " requests resource ", name, ", but the scheduler tracks at most ",
          kMaxResources, " distinct resource names"));
    }
    // Neither "pods" nor the node share is a container resource.
    if (*id == kPods || *id == kNodeShare) return absl::OkStatus();
    int64_t amount = amountOf(*id, q);
    if (take_max) {
      if (amount < 0) return badAmount(what, name, q, /*negative=*/true);
      if (amount > kMaxPodRequest) return badAmount(what, name, q, /*negative=*/false);
      (*out)[*id] = std::max((*out)[*id], amount);
      return absl::OkStatus();
    }
    return addAmount(what, name, q, amount, &(*out)[*id]);
  };
  for (const auto& [name, q] : c.resources.requests) {
    if (absl::Status s = apply(name, q); !s.ok()) return s;
  }
  for (const auto& [name, q] : c.resources.limits) {
    if (c.resources.requests.count(name)) continue;
    if (absl::Status s = apply(name, q); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<ResourceId> internResource(std::string_view name) {
  InternTable& t = table();
  if (auto id = findIn(t, t.count.load(std::memory_order_acquire), name)) return id;
  std::lock_guard<std::mutex> lock(t.mutex);
  int count = t.count.load(std::memory_order_relaxed);
  if (auto id = findIn(t, count, name)) return id;
  if (count >= kMaxResources) return std::nullopt;
  t.names[count] = std::string(name);
  t.count.store(count + 1, std::memory_order_release);
  return static_cast<ResourceId>(count);
}

std::optional<ResourceId> findResource(std::string_view name) {
  InternTable& t = table();
  return findIn(t, t.count.load(std::memory_order_acquire), name);
}

const std::string& resourceName(ResourceId id) { return table().names[id]; }

int resourceCount() { return table().count.load(std::memory_order_acquire); }

int64_t capacityFor(const Resources& request, const Resources& free, int64_t limit) {
  int64_t cap = limit;
  for (int i = 0; i < kMaxResources; ++i) {
    int64_t req = request.v[i];
    if (req <= 0) continue;
    int64_t f = free.v[i];
    if (f < req) return 0;
    int64_t n = f / req;
    if (n < cap) cap = n;
  }
  return cap;
}

absl::StatusOr<Resources> podRequests(const proto::Pod& pod) {
  Resources sum;
  for (const proto::Container& c : pod.spec.containers) {
    if (absl::Status s = addContainer(c, &sum, false); !s.ok()) return s;
  }
  Resources init_max;
  for (const proto::Container& c : pod.spec.init_containers) {
    Resources one;
    if (absl::Status s = addContainer(c, &one, false); !s.ok()) return s;
    for (int i = 0; i < kMaxResources; ++i) init_max.v[i] = std::max(init_max.v[i], one.v[i]);
  }
  for (int i = 0; i < kMaxResources; ++i) sum.v[i] = std::max(sum.v[i], init_max.v[i]);
  for (const auto& [name, q] : pod.spec.overhead) {
    std::optional<ResourceId> id = internResource(name);
    if (!id) {
      return absl::InvalidArgumentError(absl::StrCat("pod overhead names resource ", name,
                                                     ", but the scheduler tracks at most ",
                                                     kMaxResources, " distinct resource names"));
    }
    if (*id == kPods || *id == kNodeShare) continue;
    if (absl::Status s = addAmount("pod overhead", name, q, amountOf(*id, q), &sum[*id]); !s.ok()) {
      return s;
    }
  }
  sum[kPods] = 1;
  const proto::OwnerReference* owner = pod.meta.controllerRef();
  if (owner != nullptr && owner->kind == "DaemonSet") {
    sum[kNodeShare] = 0;
  } else if (auto it = pod.meta.annotations.find(proto::vocabulary::kExclusiveAnnotation);
             it != pod.meta.annotations.end() && it->second == "true") {
    sum[kNodeShare] = kNodeShares;
  } else {
    sum[kNodeShare] = 1;
  }
  return sum;
}

Resources nodeAllocatable(const proto::Node& node) {
  Resources r;
  for (const auto& [name, q] : node.status.allocatable) {
    std::optional<ResourceId> id = internResource(name);
    if (!id || *id == kNodeShare) continue;
    r[*id] = std::max<int64_t>(amountOf(*id, q), 0);
  }
  r[kNodeShare] = kNodeShares;
  return r;
}

std::string formatAmount(ResourceId id, int64_t amount) {
  if (id == kCpu) return proto::Quantity::fromMilli(amount).toString();
  if (id == kMemory || id == kEphemeralStorage) {
    return proto::Quantity::fromValue(amount, proto::Quantity::Format::kBinarySI).toString();
  }
  return absl::StrCat(amount);
}

std::string formatResources(const Resources& r) {
  std::vector<std::string> parts;
  int n = resourceCount();
  for (int i = kFirstNamed; i < n; ++i) {
    if (r.v[i] > 0) {
      parts.push_back(absl::StrCat(formatAmount(static_cast<ResourceId>(i), r.v[i]), " ",
                                   resourceName(static_cast<ResourceId>(i))));
    }
  }
  for (ResourceId id : {kCpu, kMemory, kEphemeralStorage}) {
    if (r[id] > 0) parts.push_back(absl::StrCat(formatAmount(id, r[id]), " ", resourceName(id)));
  }
  if (parts.empty()) return "nothing";
  return absl::StrJoin(parts, ", ");
}

ResourceId dominantResource(const Resources& request) {
  int n = resourceCount();
  for (int i = kFirstNamed; i < n; ++i) {
    if (request.v[i] > 0 && resourceName(static_cast<ResourceId>(i)).find('/') != std::string::npos) {
      return static_cast<ResourceId>(i);
    }
  }
  if (request[kCpu] > 0) return kCpu;
  if (request[kMemory] > 0) return kMemory;
  return kPods;
}

}  // namespace muster::scheduler
