#include "scheduler/placement/gang_shape.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/vocabulary.h"

namespace muster::scheduler::placement {

SparseRequest sparse(const Resources& r) {
  SparseRequest s;
  for (int i = 0; i < kMaxResources; ++i) {
    if (r.v[i] > 0) {
      s.ids[s.n] = static_cast<ResourceId>(i);
      s.amounts[s.n] = r.v[i];
      ++s.n;
    }
  }
  return s;
}

DeviceResources DeviceResources::find() {
  return {findResource(proto::vocabulary::kGpuResource),
          findResource(proto::vocabulary::kAmdGpuResource),
          findResource(proto::vocabulary::kRdmaResource)};
}

GroupShape shapeOf(const PodInfo& p, const ClusterCache& cache, const PlacementOptions& options,
                   const DeviceResources& devices, bool one_per_node, bool align_required) {
  GroupShape g;
  g.rep = &p;
  if (hasRequiredInterPodTerms(p.pod()) || cache.anyPodWithRequiredAntiAffinity())
    g.inter = InterPodFilter::prepare(p.pod(), cache, options.namespace_labels);
  g.one_per_node = one_per_node;
  g.pod_score = InterPodScore::prepare(p.pod(), cache, options.namespace_labels);
  if (p.pod().spec.has_topology_spread_constraints) {
    g.spread = SpreadFilter::prepare(p, cache);
    g.spread_score = SpreadScore::prepare(p, cache);
  }
  g.prefers = p.has_preferred_affinity || g.pod_score.has_value() || g.spread_score.has_value();
  for (const VolumeConstraint& v : p.volumes) {
    if (v.read_write_once_pod &&
        cache.claimUsers(absl::StrCat(p.pod().meta.namespace_, "/", v.claim)) > 0)
      g.rwop_conflict = true;
  }
  g.claims_to_bind = std::any_of(p.volumes.begin(), p.volumes.end(),
                                 [](const VolumeConstraint& v) { return v.to_bind; });
  g.csi = !p.pod().spec.inline_csi_drivers.empty() ||
          std::any_of(p.volumes.begin(), p.volumes.end(),
                      [](const VolumeConstraint& v) { return !v.csi_driver.empty(); });
  g.req = sparse(p.requests);
  g.has_ports = !p.host_ports.empty();
  g.fast_static = !p.has_node_selector && p.pod().spec.node_name.empty();
  g.dev.gpus = static_cast<int32_t>(std::min<int64_t>(devices.gpusIn(p.requests), INT32_MAX));
  g.dev.rdma_nics = devices.rdma ? static_cast<int32_t>(p.requests[*devices.rdma]) : 0;
  // Without any NodeTopology in the cluster there is nothing to prefer (and nothing to pay);
  // required alignment still refuses every node.
  g.align = g.dev.gpus > 0 && g.dev.rdma_nics > 0 && (cache.nodesWithDevices() > 0 || align_required);
  return g;
}

}  // namespace muster::scheduler::placement
