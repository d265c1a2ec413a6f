#pragma once

// Resource amounts as the scheduler compares them, computed exactly as kube-scheduler's
// NodeResourcesFit does (k8s.io/component-helpers/resource PodRequests):
//
//   request[r] = max(sum over containers of requests[r], max over init containers of requests[r])
//                + overhead[r]
//
// cpu is held in millicores, memory and ephemeral-storage in bytes, every other resource
// (nvidia.com/gpu, preferred.jp/rdma, hugepages-2Mi, any extended name) by its integer value,
// rounded up as Quantity::value() does. "pods" is 1 for every pod; the node share (kNodeShare)
// is 1, kNodeShares for an exclusive pod, 0 for a DaemonSet's.
//
// Where a container sets a limit but no request for a resource, the request is the limit (the API
// server's defaulting does this before the scheduler sees the pod; we repeat it for robustness).
//
// Not supported: restartable init containers (sidecars, restartPolicy: Always) are counted like
// ordinary init containers, because proto::Container does not carry restartPolicy. A sidecar's
// request therefore counts in the max rule, not in the sum.
//
// Representation: resource names are interned once into small ids (process-wide, append-only,
// thread-safe); amounts are a fixed array indexed by id, so the hot path never touches a map.

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/objects.h"

namespace muster::scheduler {

using ResourceId = uint8_t;
// The most distinct resource names the scheduler tracks. Only nodes add names (their
// status.allocatable): a pod's requests never do, so pods cannot fill the table. A node
// advertising names beyond it is accounted for the first kMaxResources only (and a warning says
// so); a pod requesting a name no node has advertised fits nowhere (kUnadvertised).
inline constexpr int kMaxResources = 48;

inline constexpr ResourceId kCpu = 0;
inline constexpr ResourceId kMemory = 1;
inline constexpr ResourceId kEphemeralStorage = 2;
inline constexpr ResourceId kPods = 3;
// Node exclusivity as a resource, so that every rule that places resources places it too: each
// node has kNodeShares of it; every pod but a DaemonSet's takes one share, a pod asking for a
// node to itself (muster.dev/exclusive: "true") takes all of them. Such a pod fits only on a
// node without other pods, and nothing fits beside it. Never named in messages as a resource.
inline constexpr ResourceId kNodeShare = 4;
inline constexpr int64_t kNodeShares = 1000000;
// "Some resource no node advertises": a pod requesting one takes 1, every node has 0, so the pod
// fits nowhere; its PodInfo names the resources (kube-scheduler says "Insufficient <name>" for
// them too). Never named in messages as a resource.
inline constexpr ResourceId kUnadvertised = 5;
// The first id of the other (extended and named) resources.
inline constexpr ResourceId kFirstNamed = 6;

// The id of `name`, interning it on first use; nullopt when the table is full. Only for names a
// node advertises (and tests).
std::optional<ResourceId> internResource(std::string_view name);
// The id of `name` if it was interned.
std::optional<ResourceId> findResource(std::string_view name);
// The name of an interned id.
const std::string& resourceName(ResourceId id);
// How many ids are interned (ids are 0..resourceCount()-1).
int resourceCount();

// a + b, a - b, a * b, saturating at the int64 limits instead of overflowing.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
inline int64_t saturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) == (b < 0) ? std::numeric_limits<int64_t>::max()
                            : std::numeric_limits<int64_t>::min();
}

// A vector of amounts indexed by ResourceId. Plain value, 8 * kMaxResources bytes.
// Arithmetic saturates: sums over many nodes or pods (a topology domain's free resources, a
// node's requested ones) of amounts near the int64 limit stay at the limit instead of wrapping
// around to small or negative numbers. A pod's own requests never get there (podRequests).
struct Resources {
  std::array<int64_t, kMaxResources> v{};

  int64_t& operator[](ResourceId id) { return v[id]; }
  int64_t operator[](ResourceId id) const { return v[id]; }
  Resources& operator+=(const Resources& o) {
    for (int i = 0; i < kMaxResources; ++i) v[i] = saturatingAdd(v[i], o.v[i]);
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    for (int i = 0; i < kMaxResources; ++i) v[i] = saturatingSub(v[i], o.v[i]);
    return *this;
  }
  // this * n
  Resources times(int64_t n) const {
    Resources r;
    for (int i = 0; i < kMaxResources; ++i) r.v[i] = saturatingMul(v[i], n);
    return r;
  }
  bool isZero() const {
    for (int64_t x : v)
      if (x != 0) return false;
    return true;
  }
  friend bool operator==(const Resources&, const Resources&) = default;
};

// Every requested amount (> 0) is at most what is free.
inline bool fitsIn(const Resources& request, const Resources& free) {
  bool ok = true;
  for (int i = 0; i < kMaxResources; ++i) ok &= request.v[i] <= 0 || request.v[i] <= free.v[i];
  return ok;
}

// How many copies of `request` fit in `free`, at most `limit`. A request of nothing at all is
// bounded by `limit` only (every real pod requests "pods": 1).
int64_t capacityFor(const Resources& request, const Resources& free, int64_t limit);

// The largest amount of one resource a pod may request in total: the int64 limit less the headroom
// that keeps a node's requested sum of a few such pods exact (2^62, e.g. 4 EiB of memory or 4.6e15
// cores in millicores - far beyond any machine).
inline constexpr int64_t kMaxPodRequest = int64_t{1} << 62;

// The pod's requests as NodeResourcesFit computes them (see the file comment). A resource no node
// has advertised (not interned) is not interned: the pod takes 1 of kUnadvertised and its name is
// appended to *unadvertised (sorted, without duplicates) when given. InvalidArgument when it
// requests a negative amount
// (the API server's validation refuses those), or requests more than kMaxPodRequest of one
// resource in total (two containers asking for 8Ei of memory each): such a pod is refused with a
// message, never accounted with a sum that wrapped around.
absl::StatusOr<Resources> podRequests(const proto::Pod& pod,
                                      std::vector<std::string>* unadvertised = nullptr);

// The node's status.allocatable. Names beyond the intern table's capacity are ignored; negative
// amounts count as 0.
Resources nodeAllocatable(const proto::Node& node);

// One amount in the unit people read: "8", "1500m" (cpu), "64Gi" (memory when exact).
std::string formatAmount(ResourceId id, int64_t amount);
// "8 nvidia.com/gpu, 1 preferred.jp/rdma, 16 cpu, 64Gi memory": extended resources first, then
// cpu, memory, ephemeral-storage; "pods" and zero amounts are left out. "nothing" when empty.
std::string formatResources(const Resources& r);
// The resource that matters most for reporting and tie-breaks: the first requested resource with
// a vendor prefix (nvidia.com/gpu, preferred.jp/rdma),
// else cpu, else memory.
ResourceId dominantResource(const Resources& request);

}  // namespace muster::scheduler
