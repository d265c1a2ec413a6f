#include "scheduler/cache.h"
#include "scheduler/strings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/log.h"
#include "proto/vocabulary.h"

namespace muster::scheduler {
namespace {

Resources clampedFree(const NodeInfo& n) {
  Resources f;
  for (int i = 0; i < kMaxResources; ++i) {
    int64_t v = saturatingSub(n.allocatable.v[i], n.requested.v[i]);
    f.v[i] = v > 0 ? v : 0;
  }
  return f;
}

bool sameTopologyLabels(const std::vector<std::string>& levels, const proto::Labels& a,
                        const proto::Labels& b) {
  for (const std::string& key : levels) {
    auto ia = a.find(key);
    auto ib = b.find(key);
    bool ha = ia != a.end();
    bool hb = ib != b.end();
    if (ha != hb || (ha && ia->second != ib->second)) return false;
  }
  return true;
}

// The requests a bound pod holds on its node. Names no node has advertised are not held anywhere
// (*unadvertised says there were some).
Resources requestsForAccounting(const proto::Pod& pod, bool* unadvertised) {
  std::vector<std::string> names;
  absl::StatusOr<Resources> r = podRequests(pod, &names);
  *unadvertised = !names.empty();
  if (r.ok()) {
    (*r)[kUnadvertised] = 0;
    return *r;
  }
  MUSTER_LOG_WARNING("Cannot account all of a pod's requests", "pod", podKey(pod), "err",
                     r.status().message());
  Resources only_count;
  only_count[kPods] = 1;
  return only_count;
}

// When the pod started running: status.startTime, else its creation (InfinitePast: neither parses).
absl::Time startOf(const proto::Pod& pod) {
  absl::Time t;
  std::string err;
  for (const std::string* s : {&pod.status.start_time, &pod.meta.creation_timestamp}) {
    if (!s->empty() && absl::ParseTime(absl::RFC3339_full, *s, &t, &err)) return t;
  }
  return absl::InfinitePast();
}

}  // namespace

bool markedPreempted(const proto::Pod& pod) {
  const proto::PodCondition* c = pod.findCondition(proto::vocabulary::kPreemptedCondition);
  return c != nullptr && c->status == "True";
}

ClusterCache::ClusterCache(std::vector<std::string> topology_levels)
    : levels_(std::move(topology_levels)) {
  if (levels_.size() > static_cast<size_t>(kMaxTopologyLevels)) levels_.resize(kMaxTopologyLevels);
  if (std::optional<ResourceId> gpu = internResource(proto::vocabulary::kGpuResource)) gpu_ = *gpu;
  if (std::optional<ResourceId> rdma = internResource(proto::vocabulary::kRdmaResource)) rdma_ = *rdma;
}

namespace {
int gpuBucket(int64_t free) { return static_cast<int>(std::clamp<int64_t>(free, 0, kGpuBuckets - 1)); }
void addToBucket(Domain& d, int bucket, int sign) {
  uint32_t& n = d.gpu_nodes[bucket];
  n = sign > 0 ? n + 1 : n - 1;
  if (n > 0) d.gpu_mask |= uint64_t{1} << bucket;
  else d.gpu_mask &= ~(uint64_t{1} << bucket);
}
}  // namespace

void ClusterCache::moveGpuBucket(NodeId id, const Resources& before, const Resources& after) const {
  topology_.free_gpus[topology_.position[id]] = after[gpu_];
  const int from = gpuBucket(before[gpu_]), to = gpuBucket(after[gpu_]);
  if (from == to) return;
  const auto& domains = topology_.domain[id];
  for (size_t l = 0; l < levels_.size(); ++l) {
    Domain& d = topology_.levels[l][domains[l]];
    addToBucket(d, from, -1);
    addToBucket(d, to, +1);
  }
}

NodeId ClusterCache::slotFor(std::string_view name) {
  auto it = node_ids_.find(av(name));
  if (it != node_ids_.end()) return it->second;
  NodeId id;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
    nodes_[id] = NodeInfo{};
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[id].name = std::string(name);
  if (auto d = devices_.find(av(name)); d != devices_.end()) nodes_[id].devices = d->second;
  if (auto l = volume_limits_.find(av(name)); l != volume_limits_.end())
    nodes_[id].volume_limits = l->second;
  node_ids_.emplace(std::string(name), id);
  return id;
}

void ClusterCache::setNodeDevices(std::string_view node,
                                  std::shared_ptr<const NodeDevices> devices) {
  if (devices) {
    std::weak_ptr<const NodeDevices>& shared = shapes_[devices->shapeKey()];
    if (auto existing = shared.lock()) {
      devices = std::move(existing);
    } else {
      shared = devices;
    }
    if (shapes_.size() > 2 * devices_.size() + 64) {
      absl::erase_if(shapes_, [](const auto& entry) { return entry.second.expired(); });
    }
  }
  if (auto it = node_ids_.find(av(node)); it != node_ids_.end()) nodes_[it->second].devices = devices;
  if (devices) {
    devices_[std::string(node)] = std::move(devices);
  } else {
    devices_.erase(av(node));
  }
  ++generation_;
}

void ClusterCache::releaseSlotIfUnused(NodeId id) {
  NodeInfo& n = nodes_[id];
  if (n.present || n.requested[kPods] > 0 || !n.nominated.empty()) return;
  node_ids_.erase(n.name);
  n = NodeInfo{};
  free_slots_.push_back(id);
}

void ClusterCache::upsertNode(std::shared_ptr<const proto::Node> shared) {
  const proto::Node& node = *shared;
  NodeId id = slotFor(node.meta.name);
  NodeInfo& n = nodes_[id];
  bool was_present = n.present;
  if (!was_present || !sameTopologyLabels(levels_, n.labels(), node.meta.labels)) {
    topology_dirty_ = true;
  }
  Resources before = clampedFree(n);
  n.shared_labels = std::shared_ptr<const proto::Labels>(std::move(shared), &node.meta.labels);
  n.taints = node.spec.taints;
  n.unschedulable = node.spec.unschedulable;
  n.ready = node.isReady();
  n.allocatable = nodeAllocatable(node);
  if (!was_present) ++present_count_;
  n.present = true;
  if (!topology_dirty_) {
    Resources after = clampedFree(n);
    moveGpuBucket(id, before, after);
    after -= before;
    const auto& domains = topology_.domain[id];
    for (size_t l = 0; l < levels_.size(); ++l) topology_.levels[l][domains[l]].free += after;
  }
  ++generation_;
  reaccountUnadvertised();
}

void ClusterCache::removeNode(std::string_view name) {
  auto it = node_ids_.find(av(name));
  if (it == node_ids_.end() || !nodes_[it->second].present) return;
  NodeId id = it->second;
  NodeInfo& n = nodes_[id];
  n.present = false;
  n.allocatable = Resources{};
  n.shared_labels.reset();
  n.taints.clear();
  --present_count_;
  topology_dirty_ = true;
  ++generation_;
  releaseSlotIfUnused(id);
}

void ClusterCache::account(NodeId id, const Resources& requests,
                           const std::vector<HostPort>& ports, int sign, int64_t shared_gpus) {
  NodeInfo& n = nodes_[id];
  bool track = !topology_dirty_ && n.present;
  Resources before;
  if (track) before = clampedFree(n);
  n.requested[gpu_] = sign > 0 ? saturatingAdd(n.requested[gpu_], shared_gpus)
                               : saturatingSub(n.requested[gpu_], shared_gpus);
  if (sign > 0) {
    n.requested += requests;
    n.used_ports.insert(n.used_ports.end(), ports.begin(), ports.end());
  } else {
    n.requested -= requests;
    for (const HostPort& p : ports) {
      auto pos = std::find(n.used_ports.begin(), n.used_ports.end(), p);
      if (pos != n.used_ports.end()) n.used_ports.erase(pos);
    }
  }
  if (track) {
    Resources after = clampedFree(n);
    moveGpuBucket(id, before, after);
    after -= before;
    const auto& domains = topology_.domain[id];
    for (size_t l = 0; l < levels_.size(); ++l) topology_.levels[l][domains[l]].free += after;
  }
  ++generation_;
}

void ClusterCache::unnominate(const std::string& key) {
  auto it = nominated_.find(key);
  if (it == nominated_.end()) return;
  auto& list = nodes_[it->second].nominated;
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const NodeInfo::Nominated& n) { return n.pod == key; }),
             list.end());
  releaseSlotIfUnused(it->second);
  nominated_.erase(it);
  ++generation_;
}

void ClusterCache::upsertPod(const proto::Pod& pod) {
  std::string key = podKey(pod);
  auto it = pods_.find(key);
  unnominate(key);
  if (pod.spec.node_name.empty()) {
    // Still pending. An assumed pod stays assumed until its bind shows or it is forgotten.
    if (it != pods_.end() && !it->second.assumed) removePod(key);
    // Nominated by a scheduler (status.nominatedNodeName): its room is held on that node.
    if (!pod.status.nominated_node_name.empty() && !isTerminal(pod) &&
        !pod.meta.deletion_timestamp) {
      bool unadvertised = false;
      NodeId id = slotFor(pod.status.nominated_node_name);
      nodes_[id].nominated.push_back({key, pod.spec.priority.value_or(0),
                                      requestsForAccounting(pod, &unadvertised)});
      nominated_.emplace(std::move(key), id);
      ++generation_;
    }
    return;
  }
  if (isTerminal(pod)) {
    if (it != pods_.end()) removePod(key);
    return;
  }
  bool unadvertised = false;
  Resources requests = requestsForAccounting(pod, &unadvertised);
  std::vector<HostPort> ports = hostPortsOf(pod);
  // A fraction of a GPU, and the GPU the scheduler gave it (a pod bound without one gets one here).
  absl::StatusOr<int32_t> fraction = gpuFractionMilli(pod);
  const int32_t milli = fraction.ok() ? *fraction : 0;
  const int32_t index = milli > 0 ? gpuIndexOf(pod).value_or(-1) : -1;  // -1: none written
  if (it != pods_.end()) {
    CachedPod& cached = it->second;
    if (nodes_[cached.node].name == pod.spec.node_name && *cached.requests == requests &&
        cached.ports == ports && cached.gpu_milli == milli &&
        (index < 0 || index == cached.gpu_index)) {
      const bool was_assumed = cached.assumed;
      if (cached.assumed) MUSTER_LOG_INFO(4, "Assumed pod confirmed", "pod", key);
      cached.assumed = false;
      // Labels may change on a running pod; anti-affinity terms cannot.
      if (cached.placed->labels != pod.meta.labels ||
          cached.placed->terminating != pod.meta.deletion_timestamp.has_value() ||
          cached.placed->preempted != markedPreempted(pod) ||
          cached.placed->started != startOf(pod) ||
          cached.placed->priority != pod.spec.priority.value_or(0) ||
          !(cached.placed->unit == gangKeyOf(pod))) {
        countClaims(*cached.placed, cached.node, -1);
        unindexUnit(key, cached.placed->unit);
        cached.placed = placedOf(pod);
        countClaims(*cached.placed, cached.node, +1);
        indexUnit(key, cached);
      } else if (was_assumed) {
        indexUnit(key, cached);
      }
      return;
    }
    removePod(key);
  }
  NodeId id = slotFor(pod.spec.node_name);
  CachedPod cached{id, std::make_shared<const Resources>(requests), std::move(ports), false,
                   unadvertised ? std::make_shared<const proto::Pod>(pod) : nullptr, placedOf(pod),
                   milli, index};
  account(id, requests, cached.ports, +1, shareGpu(cached, +1));
  insertPod(std::move(key), std::move(cached));
}

std::shared_ptr<const PlacedPod> ClusterCache::placedOf(const proto::Pod& pod) {
  auto placed = std::make_shared<PlacedPod>();
  placed->namespace_ = pod.meta.namespace_;
  placed->labels = pod.meta.labels;
  placed->terminating = pod.meta.deletion_timestamp.has_value();
  placed->claims = pod.spec.pvc_claim_names;
  placed->inline_csi_drivers = pod.spec.inline_csi_drivers;
  placed->priority = pod.spec.priority.value_or(0);
  placed->unit = gangKeyOf(pod);
  placed->started = startOf(pod);
  placed->preempted = markedPreempted(pod);
  placed->gpu_models = requiredGpuModels(pod);
  if (pod.spec.affinity) {
    placed->required_anti_affinity = pod.spec.affinity->pod_anti_affinity.required;
    placed->required_affinity = pod.spec.affinity->pod_affinity.required;
    placed->preferred_affinity = pod.spec.affinity->pod_affinity.preferred;
    placed->preferred_anti_affinity = pod.spec.affinity->pod_anti_affinity.preferred;
  }
  return placed;
}

absl::Status ClusterCache::suspend(std::string_view pod_key) {
  auto it = pods_.find(av(pod_key));
  if (it == pods_.end()) return absl::NotFoundError(absl::StrCat("suspend ", av(pod_key), ": not placed"));
  CachedPod& cached = it->second;
  account(cached.node, *cached.requests, cached.ports, -1, shareGpu(cached, -1));
  countClaims(*cached.placed, cached.node, -1);
  countWorkload(it->first, *cached.placed, *cached.requests, cached.gpu_milli, -1,
                /*simulation=*/true);
  with_anti_affinity_.erase(it->first);
  with_terms_.erase(it->first);
  suspended_.emplace(it->first, std::move(cached));
  pods_.erase(it);
  return absl::OkStatus();
}

absl::Status ClusterCache::resume(std::string_view pod_key) {
  auto it = suspended_.find(av(pod_key));
  if (it == suspended_.end())
    return absl::NotFoundError(absl::StrCat("resume ", av(pod_key), ": not suspended"));
  CachedPod cached = std::move(it->second);
  std::string key = it->first;
  suspended_.erase(it);
  account(cached.node, *cached.requests, cached.ports, +1, shareGpu(cached, +1));
  insertPod(std::move(key), std::move(cached), /*index_unit=*/false);
  return absl::OkStatus();
}

void ClusterCache::countWorkload(std::string_view key, const PlacedPod& placed,
                                 const Resources& requests, int32_t gpu_milli, int sign,
                                 bool simulation) {
  if (pod_observer_ && !simulation) pod_observer_(key, placed, requests, gpu_milli, sign);
  if (requests[gpu_] > 0 || gpu_milli > 0)
    profile_.count(PodShape{requests[kCpu], requests[kMemory], requests[gpu_], gpu_milli, requests[rdma_]},
                   sign);
  if (placed.gpu_models.empty() || (requests[gpu_] <= 0 && gpu_milli <= 0)) return;
  const int64_t thousandths = requests[gpu_] > 0 ? saturatingMul(requests[gpu_], 1000) : gpu_milli;
  const int64_t share = thousandths / static_cast<int64_t>(placed.gpu_models.size());
  for (const std::string& model : placed.gpu_models) {
    auto it = model_demand_.try_emplace(model, 0).first;
    it->second = sign > 0 ? saturatingAdd(it->second, share) : saturatingSub(it->second, share);
    if (it->second <= 0) model_demand_.erase(it);
  }
}

int64_t ClusterCache::modelScarcity(const NodeInfo& n) const {
  if (model_demand_.empty()) return 0;
  for (const char* key : {proto::vocabulary::kLabelGpuModel, proto::vocabulary::kLabelGpuProduct}) {
    auto label = n.labels().find(key);
    if (label == n.labels().end()) continue;
    auto demand = model_demand_.find(label->second);
    if (demand == model_demand_.end()) return 0;
    (void)topology();  // model_supply_ is counted with it
    auto supply = model_supply_.find(label->second);
    return supply == model_supply_.end() || supply->second <= 0 ? demand->second
                                                                : demand->second / supply->second;
  }
  return 0;
}

void ClusterCache::countClaims(const PlacedPod& placed, NodeId node, int sign) {
  NodeInfo& n = nodes_[node];
  for (const std::string& claim : placed.claims) {
    const std::string key = absl::StrCat(placed.namespace_, "/", claim);
    if ((claim_users_[key] += sign) <= 0) claim_users_.erase(key);
    if ((n.claims[key] += sign) <= 0) n.claims.erase(key);
  }
  for (const std::string& driver : placed.inline_csi_drivers)
    if ((n.inline_csi[driver] += sign) <= 0) n.inline_csi.erase(driver);
}

void ClusterCache::setVolumeLimits(std::string_view node,
                                   std::shared_ptr<const VolumeLimits> limits) {
  if (auto it = node_ids_.find(av(node)); it != node_ids_.end())
    nodes_[it->second].volume_limits = limits;
  if (limits) {
    volume_limits_[std::string(node)] = std::move(limits);
  } else {
    volume_limits_.erase(av(node));
  }
  ++generation_;
}

int64_t ClusterCache::attachedVolumes(const NodeInfo& node, std::string_view driver) const {
  int64_t n = 0;
  if (auto it = node.inline_csi.find(av(driver)); it != node.inline_csi.end()) n += it->second;
  if (!claim_driver_) return n;
  for (const auto& [claim, users] : node.claims) {
    const size_t slash = claim.find('/');
    if (claim_driver_(std::string_view(claim).substr(0, slash),
                      std::string_view(claim).substr(slash + 1)) == driver)
      ++n;
  }
  return n;
}

void ClusterCache::indexUnit(const std::string& key, const CachedPod& cached) {
  std::vector<UnitMember>& members = units_[cached.placed->unit];
  auto it = std::find_if(members.begin(), members.end(),
                         [&](const UnitMember& m) { return m.pod == key; });
  if (it == members.end()) {
    UnitMember m;
    m.pod = key;
    it = members.insert(members.end(), std::move(m));
  }
  it->node = cached.node;
  it->priority = cached.placed->priority;
  it->started = cached.placed->started;
  it->requests = cached.requests;
  it->busy = cached.assumed || cached.placed->terminating || cached.placed->preempted;
  it->terminating = cached.placed->terminating;
  it->preempted = cached.placed->preempted;
}

void ClusterCache::unindexUnit(const std::string& key, const GangKey& unit) {
  auto it = units_.find(unit);
  if (it == units_.end()) return;
  std::erase_if(it->second, [&](const UnitMember& m) { return m.pod == key; });
  if (it->second.empty()) units_.erase(it);
}

void ClusterCache::insertPod(std::string key, CachedPod cached, bool index_unit) {
  if (index_unit) indexUnit(key, cached);
  countClaims(*cached.placed, cached.node, +1);
  countWorkload(key, *cached.placed, *cached.requests, cached.gpu_milli, +1,
                /*simulation=*/!index_unit);
  if (!cached.placed->required_anti_affinity.empty()) with_anti_affinity_.insert(key);
  if (cached.placed->anyTerm()) with_terms_.insert(key);
  pods_.emplace(std::move(key), std::move(cached));
}

void ClusterCache::reaccountUnadvertised() {
  const int count = resourceCount();
  if (count == resource_count_seen_) return;
  resource_count_seen_ = count;
  std::vector<std::shared_ptr<const proto::Pod>> again;
  for (const auto& [key, cached] : pods_) {
    if (cached.unadvertised) again.push_back(cached.unadvertised);
  }
  for (const auto& pod : again) upsertPod(*pod);
}

void ClusterCache::removePod(std::string_view pod_key) {
  unnominate(std::string(pod_key));
  auto it = pods_.find(av(pod_key));
  if (it == pods_.end()) return;
  NodeId id = it->second.node;
  account(id, *it->second.requests, it->second.ports, -1, shareGpu(it->second, -1));
  countClaims(*it->second.placed, id, -1);
  countWorkload(it->first, *it->second.placed, *it->second.requests, it->second.gpu_milli, -1);
  unindexUnit(it->first, it->second.placed->unit);
  with_anti_affinity_.erase(it->first);
  with_terms_.erase(it->first);
  pods_.erase(it);
  releaseSlotIfUnused(id);
}

absl::Status ClusterCache::assume(const PodInfo& pod, std::string_view node, int32_t gpu_index) {
  std::optional<NodeId> id = findNode(node);
  if (!id) return absl::NotFoundError(absl::StrCat("assume ", pod.key, ": node ", av(node), " is unknown"));
  auto it = pods_.find(pod.key);
  if (it != pods_.end()) {
    return absl::AlreadyExistsError(absl::StrCat("assume ", pod.key, ": already on node ",
                                                 nodes_[it->second.node].name));
  }
  CachedPod cached{*id, std::make_shared<const Resources>(pod.requests), pod.host_ports, true, nullptr, placedOf(pod.pod()), pod.gpu_milli,
                   pod.gpu_milli > 0 ? gpu_index : -1};
  account(*id, pod.requests, pod.host_ports, +1, shareGpu(cached, +1));
  insertPod(pod.key, std::move(cached));
  return absl::OkStatus();
}

absl::Status ClusterCache::forget(std::string_view pod_key) {
  auto it = pods_.find(av(pod_key));
  if (it == pods_.end() || !it->second.assumed) {
    return absl::FailedPreconditionError(absl::StrCat("forget ", av(pod_key), ": not assumed"));
  }
  removePod(pod_key);
  return absl::OkStatus();
}

std::optional<int32_t> ClusterCache::sharedGpuOf(std::string_view pod_key) const {
  auto it = pods_.find(av(pod_key));
  if (it == pods_.end() || it->second.gpu_milli <= 0) return std::nullopt;
  return it->second.gpu_index;
}

int64_t ClusterCache::shareGpu(CachedPod& cached, int sign) {
  if (cached.gpu_milli <= 0) return 0;
  std::vector<NodeInfo::GpuShare>& shares = nodes_[cached.node].gpu_shares;
  if (sign > 0 && cached.gpu_index < 0) cached.gpu_index = chooseGpu(nodes_[cached.node], cached.gpu_milli);
  auto s = std::find_if(shares.begin(), shares.end(),
                        [&](const NodeInfo::GpuShare& x) { return x.index == cached.gpu_index; });
  if (sign > 0) {
    const bool opens = s == shares.end();
    if (opens) s = shares.insert(shares.end(), NodeInfo::GpuShare{cached.gpu_index, 0, 0});
    s->used += cached.gpu_milli;
    ++s->pods;
    return opens ? 1 : 0;
  }
  if (s == shares.end()) return 0;
  s->used -= cached.gpu_milli;
  if (--s->pods > 0) return 0;
  shares.erase(s);
  return 1;
}

int64_t fractionRoom(const NodeInfo& n, ResourceId gpu, int32_t milli, int64_t taken) {
  if (milli <= 0) return 0;
  int64_t room = 0;
  for (const NodeInfo::GpuShare& s : n.gpu_shares) room += std::max<int64_t>(0, 1000 - s.used) / milli;
  const int64_t whole = saturatingSub(n.freeOf(gpu), taken);
  if (whole > 0) room = saturatingAdd(room, saturatingMul(whole, 1000 / milli));
  return room;
}

int32_t chooseGpu(const NodeInfo& n, int32_t milli, int32_t* left, bool* opens) {
  const NodeInfo::GpuShare* best = nullptr;
  for (const NodeInfo::GpuShare& s : n.gpu_shares)
    if (s.used + milli <= 1000 && (!best || s.used > best->used)) best = &s;
  if (opens) *opens = best == nullptr;
  if (best) {
    if (left) *left = static_cast<int32_t>(1000 - best->used - milli);
    return best->index;
  }
  if (left) *left = 1000 - milli;
  int32_t index = 0;
  while (std::any_of(n.gpu_shares.begin(), n.gpu_shares.end(),
                     [&](const NodeInfo::GpuShare& s) { return s.index == index; }))
    ++index;
  return index;
}

bool ClusterCache::isAssumed(std::string_view pod_key) const {
  auto it = pods_.find(av(pod_key));
  return it != pods_.end() && it->second.assumed;
}

std::optional<std::string_view> ClusterCache::nodeOfPod(std::string_view pod_key) const {
  auto it = pods_.find(av(pod_key));
  if (it == pods_.end()) return std::nullopt;
  return std::string_view(nodes_[it->second.node].name);
}

std::optional<NodeId> ClusterCache::findNode(std::string_view name) const {
  auto it = node_ids_.find(av(name));
  if (it == node_ids_.end() || !nodes_[it->second].present) return std::nullopt;
  return it->second;
}

const Topology& ClusterCache::topology() const {
  if (topology_dirty_) rebuildTopology();
  return topology_;
}

void ClusterCache::rebuildTopology() const {
  const size_t levels = levels_.size();
  Topology t;
  t.levels.resize(levels);
  t.position.assign(nodes_.size(), 0);
  t.domain.assign(nodes_.size(), {});
  // Each present node's label value per level ("" when absent), as views into its labels.
  std::vector<std::array<std::string_view, kMaxTopologyLevels>> path(nodes_.size());
  t.order.reserve(present_count_);
  model_supply_.clear();
  for (NodeId id = 0; id < nodes_.size(); ++id) {
    const NodeInfo& n = nodes_[id];
    if (!n.present) continue;
    t.order.push_back(id);
    for (const char* key : {proto::vocabulary::kLabelGpuModel, proto::vocabulary::kLabelGpuProduct}) {
      if (auto m = n.labels().find(key); m != n.labels().end()) {
        int64_t& supply = model_supply_[m->second];
        supply = saturatingAdd(supply, n.allocatable[gpu_]);
        break;
      }
    }
    for (size_t l = 0; l < levels; ++l) {
      auto it = n.labels().find(levels_[l]);
      if (it != n.labels().end()) path[id][l] = it->second;
    }
  }
  std::sort(t.order.begin(), t.order.end(), [&](NodeId a, NodeId b) {
    for (size_t l = 0; l < levels; ++l) {
      if (path[a][l] != path[b][l]) return path[a][l] < path[b][l];
    }
    return nodes_[a].name < nodes_[b].name;
  });
  t.free_gpus.assign(t.order.size(), 0);
  for (uint32_t pos = 0; pos < t.order.size(); ++pos) {
    NodeId id = t.order[pos];
    t.position[id] = pos;
    Resources free = clampedFree(nodes_[id]);
    t.free_gpus[pos] = free[gpu_];
    bool new_above = pos == 0;
    for (size_t l = 0; l < levels; ++l) {
      NodeId prev = pos > 0 ? t.order[pos - 1] : id;
      bool starts = new_above || path[prev][l] != path[id][l];
      std::vector<Domain>& at = t.levels[l];
      if (starts) {
        Domain d;
        d.level = static_cast<int>(l);
        d.value = std::string(path[id][l]);
        d.parent = l == 0 ? -1 : static_cast<int32_t>(t.levels[l - 1].size() - 1);
        d.begin = pos;
        d.end = pos;
        at.push_back(std::move(d));
        if (l > 0) {
          Domain& parent = t.levels[l - 1].back();
          uint32_t idx = static_cast<uint32_t>(at.size() - 1);
          if (parent.child_end == parent.child_begin) parent.child_begin = idx;
          parent.child_end = idx + 1;
        }
        new_above = true;  // every level below starts a new domain too
      }
      Domain& d = at.back();
      d.end = pos + 1;
      d.free += free;
      addToBucket(d, gpuBucket(free[gpu_]), +1);
      t.domain[id][l] = static_cast<int32_t>(at.size() - 1);
    }
  }
  topology_ = std::move(t);
  topology_dirty_ = false;
}

}  // namespace muster::scheduler
