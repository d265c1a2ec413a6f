#pragma once

// A group whose members' DoNotSchedule topology spread (or anti-affinity among them, one per
// domain of a key) counts other members of the gang, into one unit (part of the fill): per domain
// of the constraint's key as planGangSpread (scheduler/spread.h) says, then per node the tightest /
// most room rule, counting the members of the groups placed before it in this fill.
//
// Inputs: the group's shape, its gang constraints (primary first; a second one is the host's,
// which caps and floors each node) and member count, its capacity by position, the members of
// earlier groups the constraints count by position, the unit's positions [begin, end), the units
// and the gang's dominant resource. Output: how many of its pods fit (all: `out` filled with
// (position, pods), sorted by position); `out` null only asks.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "scheduler/placement/domains.h"
#include "scheduler/placement/gang_shape.h"
#include "scheduler/spread.h"

namespace muster::scheduler::placement {

int64_t spreadInto(const GroupShape& g, const std::vector<GangSpread>& gang, int64_t count,
                   const std::vector<int32_t>& capacity,
                   const absl::flat_hash_map<uint32_t, int64_t>& counted_primary,
                   const absl::flat_hash_map<uint32_t, int64_t>& counted_host, uint32_t begin,
                   uint32_t end, const Units& units, ResourceId dominant,
                   std::vector<std::pair<uint32_t, int64_t>>* out);

}  // namespace muster::scheduler::placement
