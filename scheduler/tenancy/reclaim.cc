#include "scheduler/tenancy/reclaim.h"

#include <utility>
#include <vector>

namespace muster::scheduler::tenancy {

void withReclaimHooks(PreemptionRequest& preemption, const Tenancy& tenancy, std::string queue,
                      Request asked, bool reclaim) {
  if (reclaim) {
    preemption.eligible = [&tenancy, queue](const GangKey&, const std::vector<UnitMember>& members,
                                            int32_t) {
      return !members.empty() && tenancy.mayReclaimFrom(queue, tenancy.queueOfPod(members.front().pod));
    };
  }
  preemption.allowed = [&tenancy, queue = std::move(queue), asked = std::move(asked),
                        reclaim](const std::vector<const std::vector<UnitMember>*>& units) {
    std::vector<std::vector<std::string>> pods;
    pods.reserve(units.size());
    for (const auto* members : units) {
      pods.emplace_back();
      for (const UnitMember& m : *members) pods.back().push_back(m.pod);
    }
    return tenancy.victimsAllowed(queue, asked, pods, reclaim);
  };
}

}  // namespace muster::scheduler::tenancy
