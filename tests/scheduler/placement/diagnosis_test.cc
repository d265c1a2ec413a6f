// Why nodes refuse a gang (scheduler/placement/diagnosis.h) on its own.
#include "scheduler/placement/diagnosis.h"

#include <catch2/catch.hpp>

#include "proto/vocabulary.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::node;
using testing::pod;

TEST_CASE("each node's first refusal is counted in kube-scheduler's words, with cordoned, not ready "
          "and reserved nodes",
          "[placement-diagnosis]") {
  ClusterCache cache({});
  cache.addNode(node("ok").gpus(8));
  cache.addNode(node("small").gpus(4));
  cache.addNode(node("cordoned").gpus(8).cordoned());
  cache.addNode(node("down").gpus(8).notReady());
  cache.addNode(node("reserved").gpus(8));
  GangRequest r;
  r.key = GangKey{"ml", "g", false};
  r.members = {pod("w0").gpus(8).info(), pod("w1").gpus(8).info()};
  r.blocked_nodes = {"reserved"};
  const NodeFeasibility feasible(cache, r, DeviceResources::find());
  const GroupShape main =
      shapeOf(*r.members[0], cache, PlacementOptions{}, DeviceResources::find(), false, false);
  const NodeRefusals refusals = refusalsOf(main, cache, feasible, -1);
  CHECK(refusals.cordoned == 1);
  CHECK(refusals.not_ready == 1);
  CHECK(refusals.blocked == 1);
  CHECK(refusals.diag.total() == 5);
  CHECK(refusals.diag.available() == 1);
  const auto& reasons = refusals.diag.reasons();
  CHECK(reasons.at("Insufficient nvidia.com/gpu") == 1);
  CHECK(reasons.at(proto::vocabulary::kReservedForAnotherGangReason) == 1);
  CHECK(reasons.size() == 4);  // and the cordoned and the not-ready node's reasons
}

TEST_CASE("with a required level, a node without its label is refused for it", "[placement-diagnosis]") {
  ClusterCache cache({testing::kRack});
  cache.addNode(node("racked").gpus(8).rack("r1"));
  cache.addNode(node("loose").gpus(8));
  GangRequest r;
  r.members = {pod("w0").gpus(8).info()};
  r.required_level = 0;
  const NodeFeasibility feasible(cache, r, DeviceResources::find());
  const GroupShape main =
      shapeOf(*r.members[0], cache, PlacementOptions{}, DeviceResources::find(), false, false);
  const NodeRefusals refusals = refusalsOf(main, cache, feasible, 0);
  CHECK(refusals.diag.available() == 1);
  CHECK(refusals.diag.reasons().at("node(s) had no muster.dev/rack label") == 1);
}

}  // namespace
}  // namespace muster::scheduler::placement
