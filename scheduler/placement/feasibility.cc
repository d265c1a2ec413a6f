#include "scheduler/placement/feasibility.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "scheduler/filter.h"

namespace muster::scheduler::placement {
namespace {

// Nodes reserved for other gangs, by NodeId: set while a NodeFeasibility lives on this thread,
// reused across calls (no allocation per placement).
thread_local std::vector<uint8_t> tls_blocked;

void addVolume(std::vector<DriverVolumes>& out, std::string_view driver, bool own) {
  auto it = std::find_if(out.begin(), out.end(), [&](const DriverVolumes& d) { return d.driver == driver; });
  if (it == out.end()) it = out.insert(out.end(), DriverVolumes{std::string(driver), 0, 0});
  ++(own ? it->own : it->shared);
}

}  // namespace

// For each claim to bind that the class cannot provision on this node, the candidate volumes the
// node reaches, shared among the pod's claims with the same candidates. Candidates without node
// affinity are counted on every node (their sharing across nodes is checked when the gang's
// volumes are planned).
int64_t staticVolumeRoom(const PodInfo& pod, const NodeInfo& n) {
  int64_t room = std::numeric_limits<int64_t>::max();
  std::map<const std::vector<CandidateVolume>*, int64_t> reach, claims;
  for (const VolumeConstraint& v : pod.volumes) {
    if (!v.to_bind) continue;
    if (canProvisionOn(v, n.labels(), n.name)) continue;
    // Claims with equal candidate lists share them: key by the first such list seen.
    auto same = [](const std::vector<CandidateVolume>& a, const std::vector<CandidateVolume>& b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                        [](const CandidateVolume& x, const CandidateVolume& y) { return x.name == y.name; });
    };
    const std::vector<CandidateVolume>* key = &v.candidates;
    for (const auto& [k, _] : claims)
      if (same(*k, v.candidates)) key = k;
    if (!reach.contains(key)) {
      int64_t r = 0;
      for (const CandidateVolume& c : v.candidates)
        if (!c.node_affinity || c.node_affinity->matches(n.labels(), n.name)) ++r;
      reach[key] = r;
    }
    ++claims[key];
  }
  for (const auto& [key, k] : claims) room = std::min(room, reach[key] / k);
  return room;
}

std::vector<DriverVolumes> newVolumes(const PodInfo& pod, const NodeInfo& n,
                                      absl::flat_hash_set<std::string>* shared_keys) {
  std::vector<DriverVolumes> out;
  for (const VolumeConstraint& v : pod.volumes) {
    if (v.csi_driver.empty() || !n.volume_limits->contains(v.csi_driver)) continue;
    if (v.to_bind) {
      addVolume(out, v.csi_driver, true);
      continue;
    }
    std::string key = absl::StrCat(pod.pod().meta.namespace_, "/", v.claim);
    if (n.claims.contains(key)) continue;
    if (shared_keys != nullptr && !shared_keys->insert(std::move(key)).second) continue;
    addVolume(out, v.csi_driver, false);
  }
  for (const std::string& driver : pod.pod().spec.inline_csi_drivers)
    if (n.volume_limits->contains(driver)) addVolume(out, driver, true);
  return out;
}

NodeFeasibility::NodeFeasibility(const ClusterCache& cache, const GangRequest& request,
                                 const DeviceResources& devices)
    : cache_(cache),
      topo_(cache.topology()),
      levels_(static_cast<int>(cache.levels().size())),
      required_level_(request.required_level),
      align_required_(request.gpu_nic_affinity == GpuNicAffinity::kRequired),
      devices_(devices) {
  if (cache_.anyNominated())
    for (const PodInfoPtr& m : request.members) member_keys_.insert(m->key);
  if (request.blocked_nodes.empty()) return;
  if (tls_blocked.size() < cache_.slotCount()) tls_blocked.resize(cache_.slotCount(), 0);
  for (const std::string& name : request.blocked_nodes) {
    if (std::optional<NodeId> id = cache_.findNode(name)) {
      tls_blocked[*id] = 1;
      blocked_ids_.push_back(*id);
    }
  }
}

NodeFeasibility::~NodeFeasibility() {
  for (NodeId id : blocked_ids_) tls_blocked[id] = 0;
}

bool NodeFeasibility::blocked(NodeId id) const { return !blocked_ids_.empty() && tls_blocked[id]; }

bool NodeFeasibility::lacksRequiredLabel(NodeId id) const {
  int r = required_level_;
  if (r < 0 || r >= levels_) return false;
  return topo_.levels[r][topo_.domain[id][r]].value.empty();
}

Resources NodeFeasibility::heldFor(const GroupShape& g, const NodeInfo& n) const {
  return n.nominatedFor(g.rep->priority,
                        [&](const std::string& pod) { return member_keys_.contains(pod); });
}

int64_t NodeFeasibility::volumeLimitRoom(const PodInfo& pod, const NodeInfo& n,
                                         const VolumesAdded* added) const {
  absl::flat_hash_set<std::string> shared_keys;
  if (added != nullptr) shared_keys = added->shared_keys;
  int64_t room = kUnlimited;
  for (const DriverVolumes& d : newVolumes(pod, n, &shared_keys)) {
    int64_t more = 0;
    if (added != nullptr)
      if (auto a = added->by_driver.find(d.driver); a != added->by_driver.end()) more = a->second;
    const int64_t free = n.volume_limits->at(d.driver) - cache_.attachedVolumes(n, d.driver) - more -
                         d.shared;
    if (free < d.own || free < 0) return 0;
    if (d.own > 0) room = std::min(room, free / d.own);
  }
  return room;
}

int32_t NodeFeasibility::capacity(const GroupShape& g, NodeId id, const Resources* extra,
                                  const std::vector<HostPort>* extra_ports) const {
  if (g.rwop_conflict) return 0;
  if (!blocked_ids_.empty() && tls_blocked[id]) return 0;
  const NodeInfo& n = cache_.node(id);
  if (!g.fast_static || n.unschedulable || !n.ready || !n.taints.empty()) {
    if (!filterStatic(*g.rep, n).ok()) return 0;
  }
  if (lacksRequiredLabel(id)) return 0;
  if (g.inter && !g.inter->check(n).ok()) return 0;
  if (g.spread && !g.spread->check(n).ok()) return 0;
  if (g.has_ports) {
    if (!filterNodePorts(*g.rep, n).ok()) return 0;
    if (extra_ports) {
      for (const HostPort& want : g.rep->host_ports) {
        for (const HostPort& used : *extra_ports) {
          if (conflicts(want, used)) return 0;
        }
      }
    }
  }
  if (!n.nominated.empty()) {
    thread_local Resources held;  // (not zeroed on every call: nodes with nominations are rare)
    held = heldFor(g, n);
    if (extra) held += *extra;
    extra = &held;
  }
  int64_t c = capacityOn(g.req, n, extra);
  if (c > 0 && g.rep->gpu_milli > 0)
    c = std::min(c, fractionRoom(n, cache_.gpuResource(), g.rep->gpu_milli,
                                 extra ? (*extra)[cache_.gpuResource()] : 0));
  if ((g.has_ports || g.one_per_node) && c > 1) c = 1;
  if (g.claims_to_bind && c > 1) c = std::min(c, staticVolumeRoom(*g.rep, n));
  if (g.csi && c > 0 && n.volume_limits) c = std::min(c, volumeLimitRoom(*g.rep, n));
  if (c > 0 && g.align && align_required_) c = std::min<int64_t>(c, alignedOn(g, n, extra).numa);
  return static_cast<int32_t>(c);
}

AlignedCapacity NodeFeasibility::alignedOn(const GroupShape& g, const NodeInfo& n,
                                           const Resources* extra) const {
  if (!g.align || !n.devices) return {};
  int64_t gpus = saturatingAdd(devices_.gpusIn(n.requested), extra ? devices_.gpusIn(*extra) : 0);
  int64_t nics = saturatingAdd(n.requested[*devices_.rdma], extra ? (*extra)[*devices_.rdma] : 0);
  return n.devices->alignedCapacity(g.dev, gpus, nics);
}

bool NodeFeasibility::fitsOne(const GroupShape& g, NodeId id) const {
  const NodeInfo& n = cache_.node(id);
  for (int i = 0; i < g.req.n; ++i) {
    ResourceId r = g.req.ids[i];
    if (n.freeOf(r) < g.req.amounts[i]) return false;
  }
  int64_t held_gpus = 0;
  if (!n.nominated.empty()) {
    Resources held = heldFor(g, n);
    for (int i = 0; i < g.req.n; ++i) {
      ResourceId r = g.req.ids[i];
      if (saturatingSub(n.freeOf(r), held[r]) < g.req.amounts[i]) return false;
    }
    held_gpus = held[cache_.gpuResource()];
  }
  if (g.rep->gpu_milli > 0 && fractionRoom(n, cache_.gpuResource(), g.rep->gpu_milli, held_gpus) < 1)
    return false;
  if (!blocked_ids_.empty() && tls_blocked[id]) return false;
  if (g.rwop_conflict) return false;
  if (!g.fast_static || n.unschedulable || !n.ready || !n.taints.empty()) {
    if (!filterStatic(*g.rep, n).ok()) return false;
  }
  if (lacksRequiredLabel(id)) return false;
  if (g.inter && !g.inter->check(n).ok()) return false;
  if (g.spread && !g.spread->check(n).ok()) return false;
  if (g.has_ports && !filterNodePorts(*g.rep, n).ok()) return false;
  if (g.align && align_required_ && alignedOn(g, n, nullptr).numa < 1) return false;
  if (g.csi && n.volume_limits && volumeLimitRoom(*g.rep, n) < 1) return false;
  return true;
}

}  // namespace muster::scheduler::placement
