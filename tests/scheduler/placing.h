#pragma once

// Placing in unit tests as the scheduler does.

#include <catch2/catch.hpp>
#include <string>
#include <variant>

#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler::testing {

// The placement; the test fails with the reason when it was refused.
inline GangPlacement placed(const PlacementResult& r) {
  if (const Unschedulable* u = std::get_if<Unschedulable>(&r)) FAIL("unschedulable: " << u->message);
  return std::get<GangPlacement>(r);
}

// Places a lone pod and accounts it on the node (and, for a fraction, the GPU) placement chose, as
// the scheduler does: the node, or "unschedulable: " and the reason.
inline std::string placeLone(ClusterCache& cache, PodBuilder b) {
  GangRequest r;
  r.key = GangKey{"ml", "lone", true};
  r.members.push_back(b.info());
  PlacementResult result = place(r, cache);
  if (const Unschedulable* u = std::get_if<Unschedulable>(&result)) return "unschedulable: " + u->message;
  const Assignment& a = std::get<GangPlacement>(result).assignments[0];
  REQUIRE(cache.assume(*r.members[0], a.node, a.gpu_index).ok());
  return a.node;
}

}  // namespace muster::scheduler::testing
