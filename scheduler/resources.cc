#include "scheduler/resources.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/log.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

struct InternTable {
  // "<unadvertised>" cannot be a Kubernetes resource name, so no node or pod ever names it.
  std::array<std::string, kMaxResources> names{"cpu", "memory", "ephemeral-storage", "pods",
                                               proto::vocabulary::kExclusiveAnnotation,
                                               "<unadvertised>"};
  std::atomic<int> count{kFirstNamed};
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

// kMaxPodRequest in the unit of `name`.
std::string limitText(std::string_view name) {
  std::optional<ResourceId> id = findResource(name);
  return id ? formatAmount(*id, kMaxPodRequest) : absl::StrCat(kMaxPodRequest);
}

// Once per name (for the first 64 names): a node advertises a resource the table has no room for.
void warnTableFull(std::string_view node, std::string_view name) {
  static std::mutex mutex;
  static auto* warned = new std::set<std::string, std::less<>>();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (warned->size() >= 64 || !warned->insert(std::string(name)).second) return;
  }
  MUSTER_LOG_WARNING("node advertises more distinct resources than the scheduler tracks; this one is "
                     "not accounted and pods requesting it fit nowhere",
                     "node", node, "resource", name, "limit", kMaxResources);
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
      limitText(name), " of one resource the scheduler can count"));
}

// *total += amount, or an error when amount is negative or the sum exceeds kMaxPodRequest.
absl::Status addAmount(std::string_view what, std::string_view name, const proto::Quantity& q,
                       int64_t amount, int64_t* total) {
  if (amount < 0) return badAmount(what, name, q, /*negative=*/true);
  if (amount > kMaxPodRequest - *total) return badAmount(what, name, q, /*negative=*/false);
  *total += amount;
  return absl::OkStatus();
}

// Where a pod's requests go: the amounts, and the names no node has advertised.
struct RequestSink {
  Resources* out;
  std::vector<std::string>* unadvertised;  // may be null
  bool* any_unadvertised;

  // The id `name` is accounted under, or nullopt for "pods" and the node share (no container
  // resource) and for a name no node has advertised (recorded).
  std::optional<ResourceId> idOf(const std::string& name) {
    std::optional<ResourceId> id = findResource(name);
    if (!id) {
      *any_unadvertised = true;
      if (unadvertised != nullptr) {
        auto at = std::lower_bound(unadvertised->begin(), unadvertised->end(), name);
        if (at == unadvertised->end() || *at != name) unadvertised->insert(at, name);
      }
      return std::nullopt;
    }
    if (*id == kPods || *id == kNodeShare || *id == kUnadvertised) return std::nullopt;
    return id;
  }
};

// The amount of `q` in the unit of `name` (millicores for cpu; interned or not).
int64_t amountOfName(std::string_view name, const proto::Quantity& q) {
  return name == "cpu" ? q.milliValue() : q.value();
}

// A container's effective requests: requests, with limits standing in for absent requests.
absl::Status addContainer(const proto::Container& c, RequestSink& sink, Resources* out,
                          bool take_max) {
  const std::string what = absl::StrCat("container ", c.name);
  auto apply = [&](const std::string& name, const proto::Quantity& q) -> absl::Status {
    const int64_t amount = amountOfName(name, q);
    if (amount < 0) return badAmount(what, name, q, /*negative=*/true);
    if (amount > kMaxPodRequest) return badAmount(what, name, q, /*negative=*/false);
    if (amount == 0) return absl::OkStatus();  // asking for none of a resource is no request
    std::optional<ResourceId> id = sink.idOf(name);
    if (!id) return absl::OkStatus();
    if (take_max) {
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

absl::StatusOr<Resources> podRequests(const proto::Pod& pod,
                                      std::vector<std::string>* unadvertised) {
  if (unadvertised != nullptr) unadvertised->clear();
  bool any_unadvertised = false;
  Resources sum;
  RequestSink sink{&sum, unadvertised, &any_unadvertised};
  for (const proto::Container& c : pod.spec.containers) {
    if (absl::Status s = addContainer(c, sink, &sum, false); !s.ok()) return s;
  }
  // Init containers run one after another, each beside the sidecars (init containers with
  // restartPolicy Always) started before it; the sidecars then keep running beside the app
  // containers. So the pod needs the larger of apps + all sidecars and its most demanding init
  // step (kube-scheduler's and the kubelet's rule, KEP-753).
  Resources sidecars;
  Resources init_max;
  for (const proto::Container& c : pod.spec.init_containers) {
    Resources step;
    if (c.isSidecar()) {
      if (absl::Status s = addContainer(c, sink, &sidecars, false); !s.ok()) return s;
      step = sidecars;
    } else {
      if (absl::Status s = addContainer(c, sink, &step, false); !s.ok()) return s;
      step += sidecars;
    }
    for (int i = 0; i < kMaxResources; ++i) init_max.v[i] = std::max(init_max.v[i], step.v[i]);
  }
  sum += sidecars;
  for (int i = 0; i < kMaxResources; ++i) {
    sum.v[i] = std::max(sum.v[i], init_max.v[i]);
    if (sum.v[i] > kMaxPodRequest) {
      const std::string& name = resourceName(static_cast<ResourceId>(i));
      return absl::InvalidArgumentError(
          strCat("the pod's containers and sidecars together request more than the ",
                 limitText(name), " of ", name, " the scheduler can count"));
    }
  }
  for (const auto& [name, q] : pod.spec.overhead) {
    const int64_t amount = amountOfName(name, q);
    if (amount == 0) continue;
    std::optional<ResourceId> id = sink.idOf(name);
    if (!id) {
      if (amount < 0) return badAmount("pod overhead", name, q, /*negative=*/true);
      if (amount > kMaxPodRequest) return badAmount("pod overhead", name, q, /*negative=*/false);
      continue;
    }
    if (absl::Status s = addAmount("pod overhead", name, q, amount, &sum[*id]); !s.ok()) {
      return s;
    }
  }
  sum[kUnadvertised] = any_unadvertised ? 1 : 0;
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
    if (!id) {
      warnTableFull(node.meta.name, name);
      continue;
    }
    if (*id == kNodeShare || *id == kUnadvertised) continue;
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
