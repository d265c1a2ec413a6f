#include "scheduler/placement/domains.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/vocabulary.h"
#include "scheduler/strings.h"

namespace muster::scheduler::placement {

BoundScope BoundScope::resolve(const GangRequest& request, const ClusterCache& cache,
                               std::string* problem) {
  BoundScope scope;
  const Topology& topo = cache.topology();
  const int levels = static_cast<int>(cache.levels().size());
  scope.any_ = !request.bound.empty();
  scope.domain_.fill(-1);
  if (!scope.any_) return scope;
  std::vector<uint32_t> positions;
  for (const auto& [pod, node] : request.bound) {
    std::optional<NodeId> id = cache.findNode(node);
    if (!id) {
      *problem = absl::StrCat("its member ", pod, " is bound to node ", node,
                              ", which no longer exists");
      return scope;
    }
    positions.push_back(topo.position[*id]);
  }
  for (int l = 0; l < levels; ++l) {
    int32_t d = topo.domain[topo.order[positions[0]]][l];
    bool shared = !topo.levels[l][d].value.empty();
    for (uint32_t p : positions) shared &= topo.domain[topo.order[p]][l] == d;
    if (shared) scope.domain_[l] = d;
  }
  bool same_node = true;
  for (uint32_t p : positions) same_node &= p == positions[0];
  if (same_node) scope.domain_[levels] = static_cast<int32_t>(positions[0]);
  int r = request.required_level;
  if (r >= 0 && scope.domain_[r] < 0) {
    std::string key = r < levels ? cache.levels()[r] : std::string(kHostnameLevel);
    *problem = absl::StrCat("its ", request.bound.size(), " bound members are not within one ", key,
                            " domain, which ", av(proto::vocabulary::kTopologyRequiredAnnotation),
                            " requires");
  }
  return scope;
}

}  // namespace muster::scheduler::placement
