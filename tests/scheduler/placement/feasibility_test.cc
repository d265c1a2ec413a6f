// Per-node feasibility (scheduler/placement/feasibility.h) on its own: a group's shape and a
// cache in, per-node capacities out, without the fill or the search.
#include "scheduler/placement/feasibility.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::node;
using testing::pod;

GangRequest gangOf(const std::vector<PodInfoPtr>& members) {
  GangRequest r;
  r.key = GangKey{"ml", "g", false};
  r.members = members;
  r.min_member = static_cast<int32_t>(members.size());
  return r;
}

GroupShape shape(const PodInfo& p, const ClusterCache& cache, bool one_per_node = false) {
  return shapeOf(p, cache, PlacementOptions{}, DeviceResources::find(), one_per_node, false);
}

NodeId id(const ClusterCache& cache, const std::string& name) { return *cache.findNode(name); }

TEST_CASE("a node takes as many of a group's pods as its free room holds, less what the fill put there",
          "[placement-feasibility]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(8));
  const PodInfoPtr p = pod("w0").gpus(2).info();
  const GangRequest r = gangOf({p});
  const NodeFeasibility f(cache, r, DeviceResources::find());
  const GroupShape g = shape(*p, cache);
  CHECK(f.capacity(g, id(cache, "a")) == 4);
  CHECK(f.fitsOne(g, id(cache, "a")));

  Resources extra;
  extra.v[*findResource("nvidia.com/gpu")] = 5;
  CHECK(f.capacity(g, id(cache, "a"), &extra) == 1);

  REQUIRE(cache.assume(*pod("other").gpus(7).info(), "a").ok());
  CHECK(f.capacity(g, id(cache, "a")) == 0);
  CHECK_FALSE(f.fitsOne(g, id(cache, "a")));
}

TEST_CASE("a node reserved for another gang takes none, while the feasibility lives",
          "[placement-feasibility]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(8));
  cache.addNode(node("b").gpus(8));
  const PodInfoPtr p = pod("w0").gpus(8).info();
  GangRequest r = gangOf({p});
  r.blocked_nodes = {"a", "gone"};  // a name no node has is ignored
  const GroupShape g = shape(*p, cache);
  {
    const NodeFeasibility f(cache, r, DeviceResources::find());
    CHECK(f.anyBlocked());
    CHECK(f.blocked(id(cache, "a")));
    CHECK_FALSE(f.blocked(id(cache, "b")));
    CHECK(f.capacity(g, id(cache, "a")) == 0);
    CHECK_FALSE(f.fitsOne(g, id(cache, "a")));
    CHECK(f.capacity(g, id(cache, "b")) == 1);
  }
  // The flags are the thread's scratch: a later gang that reserves nothing sees none.
  const NodeFeasibility later(cache, gangOf({p}), DeviceResources::find());
  CHECK_FALSE(later.blocked(id(cache, "a")));
  CHECK(later.capacity(g, id(cache, "a")) == 1);
}

TEST_CASE("host ports allow one pod per node, and a port the fill took there allows none",
          "[placement-feasibility]") {
  ClusterCache cache({});
  cache.addNode(node("a"));
  const PodInfoPtr p = pod("w0").cpu("1").hostPort(8080).info();
  const NodeFeasibility f(cache, gangOf({p}), DeviceResources::find());
  const GroupShape g = shape(*p, cache);
  CHECK(f.capacity(g, id(cache, "a")) == 1);
  const std::vector<HostPort> taken = p->host_ports;
  CHECK(f.capacity(g, id(cache, "a"), nullptr, &taken) == 0);

  // Without ports, one per node only where the gang's analysis asks it.
  const PodInfoPtr q = pod("w1").cpu("1").info();
  CHECK(f.capacity(shape(*q, cache), id(cache, "a")) == 64);
  CHECK(f.capacity(shape(*q, cache, /*one_per_node=*/true), id(cache, "a")) == 1);
}

TEST_CASE("with a required level, a node without its label takes none", "[placement-feasibility]") {
  ClusterCache cache({testing::kRack});
  cache.addNode(node("racked").gpus(8).rack("r1"));
  cache.addNode(node("loose").gpus(8));
  const PodInfoPtr p = pod("w0").gpus(1).info();
  GangRequest r = gangOf({p});
  r.required_level = 0;
  const NodeFeasibility f(cache, r, DeviceResources::find());
  const GroupShape g = shape(*p, cache);
  CHECK(f.lacksRequiredLabel(id(cache, "loose")));
  CHECK(f.capacity(g, id(cache, "loose")) == 0);
  CHECK_FALSE(f.lacksRequiredLabel(id(cache, "racked")));
  CHECK(f.capacity(g, id(cache, "racked")) == 8);
}

TEST_CASE("room held for a nominated pod of higher priority is not the gang's, its own member's is",
          "[placement-feasibility]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(8));
  cache.addPod(pod("vip").gpus(8).priority(1000).nominatedTo("a"));
  const PodInfoPtr low = pod("w0").gpus(8).info();
  {
    const NodeFeasibility f(cache, gangOf({low}), DeviceResources::find());
    const GroupShape g = shape(*low, cache);
    CHECK(f.heldFor(g, cache.node(id(cache, "a")))[*findResource("nvidia.com/gpu")] == 8);
    CHECK(f.capacity(g, id(cache, "a")) == 0);
    CHECK_FALSE(f.fitsOne(g, id(cache, "a")));
  }
  const PodInfoPtr vip = pod("vip").gpus(8).priority(1000).nominatedTo("a").info();
  const NodeFeasibility own(cache, gangOf({vip}), DeviceResources::find());
  CHECK(own.capacity(shape(*vip, cache), id(cache, "a")) == 1);
}

}  // namespace
}  // namespace muster::scheduler::placement
