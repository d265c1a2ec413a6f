#pragma once

// A gang's members in groups (placement stage 1, kube-scheduler's PreFilter, with gang_shape.h):
// members with equal requests and node constraints (and the same standing in the gang's inter-pod
// analysis) form one group, biggest members first; then how the groups relate (required
// affinity one needs of another, anti-affinity between them, members that must share a domain,
// spreads that count each other) and the order a fill places them in.
//
// Inputs: the gang's request, its inter-pod analysis (scheduler/interpod.h GangInterPod), the
// cache, the options, the device resources and whether GPU↔NIC alignment is required. Output: a
// PreparedGang, immutable while the gang is placed; `unsupported` says why no order of the
// members satisfies their terms (the gang is then refused with it).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/cache.h"
#include "scheduler/interpod.h"
#include "scheduler/placement.h"
#include "scheduler/placement/gang_shape.h"
#include "scheduler/spread.h"

namespace muster::scheduler::placement {

struct GangGroup : GroupShape {
  std::vector<int> members;  // indices into GangRequest::members
  int64_t count = 0;         // members.size()
  // Some DoNotSchedule constraint counts other members of the gang (spread->gang()), or its
  // members' anti-affinity allows one per domain of a key: the group is placed by spread_fill.h,
  // after the groups it may count, by these (a key other than the host's first).
  bool gang_spread = false;
  std::vector<GangSpread> gang_constraints;
  // Required inter-pod terms toward members of other groups (scheduler/interpod.h): the groups
  // whose members its affinity needs in its domains (placed before it; `inter` defers its
  // affinity to the fill), the groups whose domains of a key it may not share (either side's
  // anti-affinity), and the level of the one domain its members share (self-affinity only they
  // satisfy; -1: none).
  std::vector<size_t> needs;
  std::vector<size_t> needed_by;  // the groups whose `needs` hold this one
  std::vector<std::pair<size_t, std::string>> excludes;
  int together_level = -1;
};

struct PreparedGang {
  std::vector<GangGroup> groups;  // biggest members first; groups[0] is the main group
  std::vector<size_t> fill_order;  // the groups in the order a fill places them
  std::vector<size_t> alt_order;   // another order to try when that fails (empty: none)
  bool gang_terms = false;         // some group has needs, excludes or together_level
  std::string unsupported;         // no order satisfies the members' terms: why
  ResourceId dominant = kCpu;      // the main group's dominant resource
  int64_t total_count = 0;
};

PreparedGang prepareGang(const GangRequest& request, const GangInterPod& inter,
                         const ClusterCache& cache, const PlacementOptions& options,
                         const DeviceResources& devices, bool align_required);

}  // namespace muster::scheduler::placement
