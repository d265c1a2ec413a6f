#pragma once

// ClusterCache: the scheduler's one consistent view of nodes and of what is placed on them,
// updated incrementally from informer events — there is no per-cycle copy.
//
// - Nodes: allocatable, labels, taints, unschedulable, readiness, and the topology domain of the
//   node at every configured level.
// - Per node: the requests and host ports of EVERY pod bound to it, whichever scheduler bound it.
//   Succeeded/Failed pods do not count; pods with a deletionTimestamp count until they are gone.
//   Pods bound to a node the cache has not seen yet are kept and count once the node appears.
// - Nominated pods: a pending pod with status.nominatedNodeName (set by another scheduler) is held
//   on that node apart (NodeInfo::nominated), not accounted: placement keeps its room from pods
//   of equal or lower priority.
// - Assumed pods: assume(pod, node) accounts a pod on a node before its Binding is confirmed;
//   forget(pod) undoes it; the informer's update showing the pod on that node confirms it.
// - The topology index: present nodes ordered so that every domain at every level is one
//   contiguous range of `Topology::order`, with each domain's free resources summed and kept
//   current incrementally (placement prunes whole domains by these sums). It is rebuilt lazily,
//   on the next topology() call, after a node is added or removed or a topology label changes.
// - Device layouts: the NodeDevices of each node that published a NodeTopology (kept by node name,
//   so one may arrive before its node).
//
// Not thread-safe: the scheduler calls every method from one strand (topology() mutates the lazily
// rebuilt index even though it is const).

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/objects.h"
#include "scheduler/config.h"
#include "scheduler/fragmentation.h"
#include "scheduler/devices.h"
#include "scheduler/gang.h"
#include "scheduler/pod_info.h"
#include "scheduler/resources.h"

namespace muster::scheduler {

using NodeId = uint32_t;


// What inter-pod affinity (scheduler/interpod.h) needs of a placed pod.
struct PlacedPod {
  std::string namespace_;
  proto::Labels labels;
  bool terminating = false;  // deletionTimestamp set (topology spread does not count it)
  std::vector<std::string> claims;  // PersistentVolumeClaims its volumes use
  std::vector<std::string> inline_csi_drivers;  // the CSI driver of each inline volume
  std::vector<proto::PodAffinityTerm> required_anti_affinity;
  // What makes other pods prefer or avoid this one's domains (the scoring's symmetry).
  std::vector<proto::PodAffinityTerm> required_affinity;
  std::vector<proto::WeightedPodAffinityTerm> preferred_affinity;
  std::vector<proto::WeightedPodAffinityTerm> preferred_anti_affinity;
  std::vector<std::string> gpu_models;  // requiredGpuModels
  // What preemption (scheduler/preemption.h) needs: the pod's priority, the gang it belongs to
  // (gangKeyOf), when it started running (status.startTime, else its creation), and whether
  // Muster has already marked it preempted (the muster.dev/Preempted condition).
  int32_t priority = 0;
  GangKey unit;
  absl::Time started = absl::InfinitePast();
  bool preempted = false;
  bool anyTerm() const {
    return !required_anti_affinity.empty() || !required_affinity.empty() ||
           !preferred_affinity.empty() || !preferred_anti_affinity.empty();
  }
};

// The pod carries muster.dev/Preempted=True: Muster is evicting its gang.
bool markedPreempted(const proto::Pod& pod);

// One placed pod of a gang, as the cache's per-gang index keeps it (for preemption).
struct UnitMember {
  std::string pod;  // "namespace/name"
  NodeId node = 0;
  int32_t priority = 0;
  absl::Time started = absl::InfinitePast();
  std::shared_ptr<const Resources> requests;  // never null; the cache's own (not a copy)
  // Assumed (its bind in flight), terminating, or already marked preempted: the gang is not a
  // candidate victim.
  bool busy = false;
  bool terminating = false;  // deletionTimestamp set
  bool preempted = false;    // marked muster.dev/Preempted: its whole gang is being evicted
};

// CSI driver → how many of its volumes a node can attach (CSINode allocatable.count).
using VolumeLimits = absl::flat_hash_map<std::string, int64_t>;
// The CSI driver that attaches a claim's volume ("" when none or unknown): its volume's, or its
// class's provisioner while it is unbound.
using ClaimDriver = std::function<std::string(std::string_view ns, std::string_view claim)>;

inline const proto::Labels kNoLabels;

struct NodeInfo {
  std::string name;
  bool present = false;  // the Node object is known (false: only pods bound to it are)
  // The Node's labels, shared with the informer's store (a pointer into its Node, owning it);
  // null for a node known only by the pods bound to it.
  std::shared_ptr<const proto::Labels> shared_labels;
  const proto::Labels& labels() const { return shared_labels ? *shared_labels : kNoLabels; }
  std::vector<proto::Taint> taints;
  bool unschedulable = false;  // spec.unschedulable (cordoned)
  bool ready = false;          // the Ready condition is True
  Resources allocatable;
  Resources requested;  // bound and assumed pods; requested[kPods] is their number
  std::vector<HostPort> used_ports;
  // Pending pods another scheduler has nominated to this node (status.nominatedNodeName): their
  // room is held from pods of equal or lower priority, as kube-scheduler holds it.
  struct Nominated {
    std::string pod;  // "namespace/name"
    int32_t priority = 0;
    Resources requests;
  };
  std::vector<Nominated> nominated;
  // The requests of the pods nominated here with priority >= `priority`, other than `except(pod)`.
  template <class Except>
  Resources nominatedFor(int32_t priority, Except&& except) const {
    Resources sum;
    for (const Nominated& n : nominated)
      if (n.priority >= priority && !except(n.pod)) sum += n.requests;
    return sum;
  }
  // The node's GPU/RDMA NIC layout from its NodeTopology; null when none is published.
  std::shared_ptr<const NodeDevices> devices;
  // Volumes of the placed pods: "namespace/claim" → pods using it; CSI driver → inline volumes.
  absl::flat_hash_map<std::string, int32_t> claims;
  absl::flat_hash_map<std::string, int32_t> inline_csi;
  // How many volumes of each CSI driver the node can attach (its CSINode); null when unknown.
  std::shared_ptr<const VolumeLimits> volume_limits;
  // The node's GPUs that pods asking for a fraction of one (muster.dev/gpu-fraction) share: by
  // index, the thousandths they hold and how many they are. While any pod shares it, a GPU counts
  // as one whole nvidia.com/gpu in `requested`, so pods asking for whole GPUs never get it.
  struct GpuShare {
    int32_t index = 0;
    int64_t used = 0;  // thousandths (more than 1000 only when pods bound by others say so)
    int32_t pods = 0;
  };
  std::vector<GpuShare> gpu_shares;

  int64_t freeOf(ResourceId id) const { return saturatingSub(allocatable[id], requested[id]); }
  Resources free() const {
    Resources f = allocatable;
    f -= requested;
    return f;
  }
};

// How many more pods asking for `milli` thousandths of a GPU each the node's GPUs can take: on its
// shared GPUs, then on its free whole GPUs (`gpu` is nvidia.com/gpu's id) less `taken` of them.
int64_t fractionRoom(const NodeInfo& n, ResourceId gpu, int32_t milli, int64_t taken = 0);
// The GPU the next pod asking for `milli` gets on the node: the shared GPU it leaves the least
// room on (best fit), else a GPU of its own (*opens true): the lowest index no pod shares. The
// thousandths it leaves free on that GPU go to *left.
int32_t chooseGpu(const NodeInfo& n, int32_t milli, int32_t* left = nullptr, bool* opens = nullptr);

// A topology domain: nodes sharing the label values of levels 0..level. Nodes without the label at
// a level are grouped into a domain whose value is "" (they belong to no real domain there).
// Free GPUs (nvidia.com/gpu) per node are indexed per domain: how many of its nodes have each
// count free (kGpuBuckets - 1 or more in the last bucket) and a bit per non-empty bucket. A search
// reads from the mask, in O(1), whether any node of the domain has enough GPUs for a pod, and the
// fewest a fitting node has free: placement skips domains where no node fits, or where none could
// beat the node it already has (same result as visiting every node).
inline constexpr int kGpuBuckets = 64;

struct Domain {
  int level = 0;
  std::string value;
  int32_t parent = -1;        // index into Topology::levels[level - 1]; -1 at level 0
  uint32_t begin = 0;         // [begin, end) positions in Topology::order
  uint32_t end = 0;
  uint32_t child_begin = 0;   // [child_begin, child_end) indices into levels[level + 1]
  uint32_t child_end = 0;
  Resources free;             // sum over its nodes of max(0, allocatable - requested)
  std::array<uint32_t, kGpuBuckets> gpu_nodes{};  // nodes by free GPUs (the last: that or more)
  uint64_t gpu_mask = 0;                           // bit b: gpu_nodes[b] > 0
  // Bit b set for the buckets holding at least `want` free GPUs.
  static uint64_t atLeast(int64_t want) {
    if (want <= 0) return ~uint64_t{0};
    if (want >= kGpuBuckets - 1) return uint64_t{1} << (kGpuBuckets - 1);
    return ~uint64_t{0} << want;
  }
};

struct Topology {
  std::vector<NodeId> order;                // present nodes, grouped by domain path, then name
  std::vector<std::vector<Domain>> levels;  // one vector per configured level, top to bottom
  // By NodeId (present nodes only): the position in `order`, and the domain index at each level.
  std::vector<uint32_t> position;
  std::vector<std::array<int32_t, kMaxTopologyLevels>> domain;
  // By position: the node's free GPUs (the index's resource, at least 0), side by side so that a
  // search reads them without touching each NodeInfo.
  std::vector<int64_t> free_gpus;
};

class ClusterCache {
 public:
  explicit ClusterCache(std::vector<std::string> topology_levels);

  // Informer events. add and update are the same upsert.
  // The cache keeps the Node's labels (shared, not copied).
  void addNode(std::shared_ptr<const proto::Node> node) { upsertNode(std::move(node)); }
  void updateNode(std::shared_ptr<const proto::Node> node) { upsertNode(std::move(node)); }
  void addNode(const proto::Node& node) { upsertNode(std::make_shared<const proto::Node>(node)); }
  void updateNode(const proto::Node& node) { upsertNode(std::make_shared<const proto::Node>(node)); }
  void removeNode(const proto::Node& node) { removeNode(node.meta.name); }
  void removeNode(std::string_view name);
  void addPod(const proto::Pod& pod) { upsertPod(pod); }
  void updatePod(const proto::Pod& pod) { upsertPod(pod); }
  void removePod(const proto::Pod& pod) { removePod(podKey(pod)); }
  void removePod(std::string_view pod_key);
  // The node's device layout (null: it has none, e.g. its NodeTopology was deleted). Layouts
  // with the same NodeDevices::shapeKey() are shared between nodes.
  void setNodeDevices(std::string_view node, std::shared_ptr<const NodeDevices> devices);
  // CSI volume limits (scheduler/volume_binding.h): the node's CSINode, and how claims resolve to
  // drivers. A node attaches a claim once however many of its pods use it.
  void setVolumeLimits(std::string_view node, std::shared_ptr<const VolumeLimits> limits);
  void setClaimDriver(ClaimDriver f) { claim_driver_ = std::move(f); }
  const ClaimDriver& claimDriver() const { return claim_driver_; }
  // Told of every pod the cache starts (sign +1) or stops (-1) accounting on a node: bound,
  // assumed, forgotten, removed - not suspended or resumed for a simulation, which the observer
  // must not mistake for pods leaving; with the pod's requests and the thousandths of a shared
  // GPU it holds. Tenancy's per-queue accounting.
  using PodObserver = std::function<void(std::string_view key, const PlacedPod& placed,
                                         const Resources& requests, int32_t gpu_milli, int sign)>;
  void setPodObserver(PodObserver f) { pod_observer_ = std::move(f); }
  // Distinct volumes of `driver` attached for the node's placed pods.
  int64_t attachedVolumes(const NodeInfo& node, std::string_view driver) const;
  // How many nodes (present or not) have a device layout.
  size_t nodesWithDevices() const { return devices_.size(); }

  // Accounts `pod` on `node` ahead of the Binding. NotFound when the node is unknown;
  // AlreadyExists when the pod is already on a node. A pod asking for a fraction of a GPU gets
  // `gpu_index` (-1: the cache chooses, chooseGpu).
  absl::Status assume(const PodInfo& pod, std::string_view node, int32_t gpu_index = -1);
  // Undoes assume. FailedPrecondition when the pod is not assumed (e.g. already confirmed).
  absl::Status forget(std::string_view pod_key);
  bool isAssumed(std::string_view pod_key) const;
  // The node a pod is bound or assumed to, if the cache accounts it.
  std::optional<std::string_view> nodeOfPod(std::string_view pod_key) const;
  // The GPU index an accounted pod asking for a fraction of a GPU holds (muster.dev/gpu-index, or
  // the one assume() chose); nullopt for other pods.
  std::optional<int32_t> sharedGpuOf(std::string_view pod_key) const;

  // Present nodes only.
  std::optional<NodeId> findNode(std::string_view name) const;
  const NodeInfo& node(NodeId id) const { return nodes_[id]; }
  // Slots, including absent nodes and free slots; check NodeInfo::present.
  size_t slotCount() const { return nodes_.size(); }
  size_t nodeCount() const { return present_count_; }
  size_t podCount() const { return pods_.size(); }
  const std::vector<std::string>& levels() const { return levels_; }
  // The topology index, rebuilt first when nodes or their topology labels changed.
  const Topology& topology() const;
  // Changes whenever anything that could make a pod fit changes (for tests and caching).
  uint64_t generation() const { return generation_; }

  // Every pod the cache accounts, with what preemption weighs:
  // f(std::string_view key, const PlacedPod&, NodeId, const Resources& requests, bool assumed).
  template <class F>
  void forEachPlacedPodEntry(F&& f) const {
    for (const auto& [key, cached] : pods_)
      f(std::string_view(key), *cached.placed, cached.node, *cached.requests, cached.assumed);
  }
  // Every gang (gangKeyOf) with placed pods, and those pods: f(const GangKey&,
  // const std::vector<UnitMember>&). Kept incrementally; suspend() does not change it.
  template <class F>
  void forEachUnit(F&& f) const {
    for (const auto& [key, members] : units_) f(key, members);
  }
  // Takes a placed pod out of the accounting for a simulation (preemption's "what if these pods
  // were gone"), keeping its node slot; resume() puts it back exactly. NotFound when the pod is
  // not placed (or already suspended). The scheduler resumes before anything else touches the
  // cache (both on its strand).
  absl::Status suspend(std::string_view pod_key);
  absl::Status resume(std::string_view pod_key);
  // Every pod the cache accounts on a node (bound or assumed), with its node: f(PlacedPod, NodeId).
  template <class F>
  void forEachPlacedPod(F&& f) const {
    for (const auto& [key, cached] : pods_) f(*cached.placed, cached.node);
  }
  // Only those with required anti-affinity terms (usually few).
  template <class F>
  void forEachPodWithRequiredAntiAffinity(F&& f) const {
    for (const std::string& key : with_anti_affinity_) {
      const CachedPod& cached = pods_.at(key);
      f(*cached.placed, cached.node);
    }
  }
  bool anyPodWithRequiredAntiAffinity() const { return !with_anti_affinity_.empty(); }
  // Those with any inter-pod term (required or preferred, affinity or anti-affinity).
  template <class F>
  void forEachPodWithInterPodTerms(F&& f) const {
    for (const std::string& key : with_terms_) {
      const CachedPod& cached = pods_.at(key);
      f(*cached.placed, cached.node);
    }
  }
  bool anyPodWithInterPodTerms() const { return !with_terms_.empty(); }
  // How many placed pods use the PersistentVolumeClaim "namespace/claim".
  int claimUsers(std::string_view claim_key) const {
    auto it = claim_users_.find(std::string(claim_key));
    return it == claim_users_.end() ? 0 : it->second;
  }
  // Whether any pending pod is nominated to a node (NodeInfo::nominated).
  bool anyNominated() const { return !nominated_.empty(); }

 private:
  struct CachedPod {
    NodeId node = 0;
    // Shared with the pod's UnitMember (a Resources is 384 bytes, mostly zeros).
    std::shared_ptr<const Resources> requests;  // never null
    std::vector<HostPort> ports;
    bool assumed = false;
    // Kept only for a pod requesting a resource no node had advertised when it was accounted
    // (bound before its node was seen): accounted again once new names are interned.
    std::shared_ptr<const proto::Pod> unadvertised;
    std::shared_ptr<const PlacedPod> placed;  // never null
    // A fraction of a GPU (thousandths; 0: none) and the index of the GPU holding it (-1: not
    // chosen yet: shareGpu chooses).
    int32_t gpu_milli = 0;
    int32_t gpu_index = -1;
  };
  // Takes (sign > 0) or gives back the pod's share of its GPU on its node; how many whole GPUs
  // that opened or closed (0 or 1), to account with its requests.
  int64_t shareGpu(CachedPod& cached, int sign);
  static std::shared_ptr<const PlacedPod> placedOf(const proto::Pod& pod);
  // `index_unit` false: only resume() puts back a pod its gang's index still holds.
  void insertPod(std::string key, CachedPod cached, bool index_unit = true);
  void indexUnit(const std::string& key, const CachedPod& cached);
  void unindexUnit(const std::string& key, const GangKey& unit);

  void upsertNode(std::shared_ptr<const proto::Node> node);
  void upsertPod(const proto::Pod& pod);
  // Accounts again the pods that requested names no node had advertised, once more are interned.
  void reaccountUnadvertised();
  NodeId slotFor(std::string_view name);
  void releaseSlotIfUnused(NodeId id);
  // `shared_gpus`: whole GPUs that pods' fractions opened (sign > 0) or closed (shareGpu).
  void account(NodeId id, const Resources& requests, const std::vector<HostPort>& ports, int sign,
               int64_t shared_gpus = 0);
  void rebuildTopology() const;
  // Moves node `id` from the GPU bucket of `before` free to that of `after` in its domains.
  void moveGpuBucket(NodeId id, const Resources& before, const Resources& after) const;

  std::vector<std::string> levels_;
  std::vector<NodeInfo> nodes_;
  std::vector<NodeId> free_slots_;
  absl::flat_hash_map<std::string, NodeId> node_ids_;
  // Node maps: a CachedPod is some 500 bytes, and a flat map's empty slots (up to half of them
  // after it grows) would hold as much again.
  absl::node_hash_map<std::string, CachedPod> pods_;
  absl::flat_hash_set<std::string> with_anti_affinity_;  // keys of pods_ with such terms
  absl::flat_hash_set<std::string> with_terms_;          // ... with any inter-pod term
  absl::flat_hash_map<std::string, NodeId> nominated_;     // pending pod → node it is nominated to
  absl::node_hash_map<std::string, CachedPod> suspended_;  // suspend()ed pods, by key
  absl::flat_hash_map<GangKey, std::vector<UnitMember>> units_;  // placed pods by gang
  absl::flat_hash_map<std::string, int> claim_users_;      // "ns/claim" → placed pods using it
  void countClaims(const PlacedPod& placed, NodeId node, int sign);
  void unnominate(const std::string& key);
  absl::flat_hash_map<std::string, std::shared_ptr<const NodeDevices>> devices_;
  absl::flat_hash_map<std::string, std::shared_ptr<const VolumeLimits>> volume_limits_;
  ClaimDriver claim_driver_;
  PodObserver pod_observer_;
  absl::flat_hash_map<std::string, std::weak_ptr<const NodeDevices>> shapes_;  // by shapeKey()
  size_t present_count_ = 0;
  uint64_t generation_ = 0;
  int resource_count_seen_ = 0;  // resourceCount() when unadvertised pods were last re-accounted
  mutable Topology topology_;
  mutable bool topology_dirty_ = true;
  ResourceId gpu_ = kCpu;   // nvidia.com/gpu (interned at construction)
  ResourceId rdma_ = kCpu;  // preferred.jp/rdma (interned at construction)
  // modelScarcity: GPUs (thousandths) held by pods restricted to each model, and the GPUs of the
  // present nodes of each model (counted when the topology is rebuilt).
  absl::flat_hash_map<std::string, int64_t> model_demand_;
  mutable absl::flat_hash_map<std::string, int64_t> model_supply_;
  // The pod in or out of modelScarcity's demand and of the workload profile.
  // `simulation`: suspend() or resume(), which the PodObserver is not told of.
  void countWorkload(std::string_view key, const PlacedPod& placed, const Resources& requests,
                     int32_t gpu_milli, int sign, bool simulation = false);
  WorkloadProfile profile_;  // the accounted pods that ask for GPUs
 public:
  // The resource the domains' GPU index counts.
  ResourceId gpuResource() const { return gpu_; }
  ResourceId rdmaResource() const { return rdma_; }
  // The shapes of the accounted pods that ask for GPUs (whole or a fraction): the workload whose
  // fragmentation placement keeps low (scheduler/fragmentation.h).
  const WorkloadProfile& workloadProfile() const { return profile_; }
  // How much of a GPU model's GPUs the accounted pods restricted to it hold, in thousandths (a pod
  // accepting k models counts 1/k on each): 0 for a node without a model label (muster.dev/
  // gpu.model or nvidia.com/gpu.product) or of a model no pod requires. Single pods that accept
  // any model leave the scarcest models to those that need them (placement/scoring.h, single_pod.h).
  int64_t modelScarcity(const NodeInfo& n) const;
  bool anyModelDemand() const { return !model_demand_.empty(); }
};

}  // namespace muster::scheduler
