#include "scheduler/placement/diagnosis.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "proto/vocabulary.h"

namespace muster::scheduler::placement {

NodeRefusals refusalsOf(const GroupShape& main, const ClusterCache& cache,
                        const NodeFeasibility& feasible, int required_level) {
  NodeRefusals out;
  const int levels = static_cast<int>(cache.levels().size());
  std::string missing_label_reason;
  if (required_level >= 0 && required_level < levels) {
    missing_label_reason = absl::StrCat("node(s) had no ", cache.levels()[required_level], " label");
  }
  for (NodeId id : cache.topology().order) {
    const NodeInfo& n = cache.node(id);
    if (n.unschedulable) ++out.cordoned;
    if (!n.ready) ++out.not_ready;
    if (feasible.blocked(id)) {
      ++out.blocked;
      out.diag.add(Status::unschedulable(proto::vocabulary::kReservedForAnotherGangReason));
      continue;
    }
    Status s = filterNode(*main.rep, n);
    if (s.ok() && feasible.lacksRequiredLabel(id)) s = Status::unresolvable(missing_label_reason);
    if (s.ok() && main.inter) s = main.inter->check(n);
    if (s.ok() && main.rwop_conflict) s = Status::unschedulable(std::string(kReasonReadWriteOncePod));
    if (s.ok() && main.spread) s = main.spread->check(n);
    if (s.ok() && main.csi && n.volume_limits && feasible.volumeLimitRoom(*main.rep, n) < 1)
      s = Status::unschedulable(std::string(kReasonVolumeLimits));
    if (s.ok() && !n.nominated.empty()) s = filterNodeResourcesFit(*main.rep, n, feasible.heldFor(main, n));
    if (s.ok() && main.align && feasible.alignRequired() && feasible.alignedOn(main, n, nullptr).numa < 1) {
      s = n.devices ? Status::unschedulable(
                          "node(s) had no free GPU and RDMA NIC on one PCIe switch or NUMA node "
                          "(muster.dev/gpu-nic-affinity: required)")
                    : Status::unresolvable(
                          "node(s) had no NodeTopology, which muster.dev/gpu-nic-affinity: "
                          "required needs");
    }
    out.diag.add(s);
  }
  return out;
}

}  // namespace muster::scheduler::placement
