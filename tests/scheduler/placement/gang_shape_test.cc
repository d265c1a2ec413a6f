// A group's shape (scheduler/placement/gang_shape.h) on its own: one pod and the cache in, what
// the per-node checks of its group need out.
#include "scheduler/placement/gang_shape.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler::placement {
namespace {
using testing::node;
using testing::pod;

TEST_CASE("a group's shape holds its non-zero requests and which checks its pods need",
          "[placement-shape]") {
  ClusterCache cache({});
  cache.addNode(node("a").gpus(8).resource("preferred.jp/rdma", "4"));
  const PodInfoPtr p = pod("w0").cpu("4").gpus(2).request("preferred.jp/rdma", "1").info();
  const DeviceResources devices = DeviceResources::find();
  const GroupShape g = shapeOf(*p, cache, PlacementOptions{}, devices, false, false);
  CHECK(g.rep == p.get());
  int nonzero = 0;
  for (int i = 0; i < kMaxResources; ++i) nonzero += p->requests.v[i] > 0 ? 1 : 0;
  REQUIRE(g.req.n == nonzero);
  for (int i = 0; i < g.req.n; ++i) CHECK(g.req.amounts[i] == p->requests[g.req.ids[i]]);
  CHECK(g.dev.gpus == 2);
  CHECK(g.dev.rdma_nics == 1);
  // No node publishes a NodeTopology: alignment is nothing to prefer, unless it is required.
  CHECK_FALSE(g.align);
  CHECK(shapeOf(*p, cache, PlacementOptions{}, devices, false, true).align);
  CHECK(g.fast_static);
  CHECK_FALSE(g.has_ports);
  CHECK_FALSE(g.one_per_node);
  CHECK_FALSE(g.prefers);
  CHECK_FALSE(g.inter.has_value());
  CHECK_FALSE(g.csi);

  const PodInfoPtr q = pod("w1").cpu("1").hostPort(80).nodeSelector("zone", "z1").info();
  const GroupShape h = shapeOf(*q, cache, PlacementOptions{}, devices, true, false);
  CHECK(h.has_ports);
  CHECK_FALSE(h.fast_static);
  CHECK(h.one_per_node);
}

TEST_CASE("GPUs of both vendors count as GPUs", "[placement-shape]") {
  ClusterCache cache({});
  cache.addNode(node("nv").gpus(8));
  cache.addNode(node("amd").resource("amd.com/gpu", "8"));
  const DeviceResources devices = DeviceResources::find();
  REQUIRE(devices.gpu.has_value());
  REQUIRE(devices.amd_gpu.has_value());
  Resources r;
  r.v[*devices.gpu] = 2;
  r.v[*devices.amd_gpu] = 3;
  CHECK(devices.gpusIn(r) == 5);
}

TEST_CASE("a preferred node affinity makes the group rank nodes", "[placement-shape]") {
  ClusterCache cache({});
  cache.addNode(node("a"));
  const PodInfoPtr p = pod("w0").cpu("1").preferredAffinity(10, testing::term("zone", "In", {"z1"})).info();
  CHECK(shapeOf(*p, cache, PlacementOptions{}, DeviceResources::find(), false, false).prefers);
}

}  // namespace
}  // namespace muster::scheduler::placement
