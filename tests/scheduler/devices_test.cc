// GPU↔RDMA NIC alignment in the scheduler: NodeDevices' estimate of what is still alignable on a
// node, and placement preferring (or requiring) nodes where a pod's GPUs and NICs are close.
#include "scheduler/devices.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "scheduler/gang.h"
#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"
#include "tests/topology/builders.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;
using topology::DeviceRequest;
using topology::testing::TopologyBuilder;

std::shared_ptr<const NodeDevices> devices(topology::Topology t) {
  return std::make_shared<const NodeDevices>(std::move(t));
}

// 4 PCIe switches with 2 GPUs and 1 NIC each, two per NUMA node (a DGX-like 8-GPU node).
topology::Topology switches(int count = 4) {
  TopologyBuilder b;
  for (int s = 0; s < count; ++s) {
    std::string sw = "sw" + std::to_string(s);
    b.gpu(2 * s, sw, s * 2 / count).gpu(2 * s + 1, sw, s * 2 / count);
    b.nic("mlx5_" + std::to_string(s), sw, s * 2 / count);
  }
  return b.build();
}

// 4 GPUs and 4 NICs, two of each per NUMA node, no shared PCIe switch (like coral-lassen.xml).
topology::Topology numaOnly() {
  return TopologyBuilder()
      .gpu(0, "g0", 0).gpu(1, "g1", 0).gpu(2, "g2", 1).gpu(3, "g3", 1)
      .nic("mlx5_0", "", 0).nic("mlx5_1", "", 0).nic("mlx5_2", "", 1).nic("mlx5_3", "", 1)
      .build();
}

// GPUs on NUMA node 0, NICs on NUMA node 1: nothing can be aligned.
topology::Topology split() {
  return TopologyBuilder()
      .gpu(0, "", 0).gpu(1, "", 0).gpu(2, "", 0).gpu(3, "", 0)
      .nic("mlx5_0", "", 1).nic("mlx5_1", "", 1).nic("mlx5_2", "", 1).nic("mlx5_3", "", 1)
      .build();
}

TEST_CASE("aligned capacity counts the pods that can still get a GPU and a NIC close together",
          "[devices]") {
  const DeviceRequest one{1, 1};
  CHECK(devices(switches())->alignedCapacity(one, 0, 0) == AlignedCapacity{4, 4, 4});
  CHECK(devices(numaOnly())->alignedCapacity(one, 0, 0) == AlignedCapacity{0, 4, 0});
  CHECK(devices(split())->alignedCapacity(one, 0, 0) == AlignedCapacity{0, 0, 0});
  // 2 GPUs + 1 NIC per pod: one switch each.
  CHECK(devices(switches())->alignedCapacity(DeviceRequest{2, 1}, 0, 0) == AlignedCapacity{4, 4, 4});
  // 4 GPUs + 2 NICs: two whole switches, each GPU with the NIC on its own switch.
  CHECK(devices(switches())->alignedCapacity(DeviceRequest{4, 2}, 0, 0) == AlignedCapacity{2, 2, 2});
  // 3 GPUs + 1 NIC: no switch has 3 GPUs; one NUMA node has 4 GPUs and 2 NICs.
  CHECK(devices(switches())->alignedCapacity(DeviceRequest{3, 1}, 0, 0) == AlignedCapacity{0, 2, 0});
  // Requests with no NIC (or no GPU) have nothing to align.
  CHECK(devices(switches())->alignedCapacity(DeviceRequest{1, 0}, 0, 0) == AlignedCapacity{});
}

// topology::testing::tray(): nested() has mlx5_0 beside GPUs 0/1 (PIX) and mlx5_1 at PXB only;
// shallow() has no NIC sharing an inner switch with a GPU.
topology::Topology nested() { return topology::testing::tray("swA"); }
topology::Topology shallow() { return topology::testing::tray("swD"); }

TEST_CASE("behind the deepest switch (PIX) is told from under one root port (PXB)", "[devices]") {
  const DeviceRequest one{1, 1};
  // First pod: GPU 0 + mlx5_0 (PIX); second: a GPU + mlx5_1 (PXB); no NIC left after that.
  CHECK(devices(nested())->alignedCapacity(one, 0, 0) == AlignedCapacity{2, 2, 1});
  CHECK(devices(shallow())->alignedCapacity(one, 0, 0) == AlignedCapacity{2, 2, 0});
  // Two GPUs and one NIC: swA with mlx5_0 is PIX; then swB's GPUs reach mlx5_1 only at PXB.
  CHECK(devices(nested())->alignedCapacity(DeviceRequest{2, 1}, 0, 0) == AlignedCapacity{2, 2, 1});
}

TEST_CASE("a device near two NUMA nodes is aligned with a NIC on either", "[devices]") {
  // HBM in flat mode: NUMA node 2 is node 0's HBM; the GPU is near both, the NIC near 2 only (an
  // export can show either). Without sets the GPU had no NUMA node and nothing aligned.
  topology::Topology t = TopologyBuilder()
                             .gpu(0, "", 0).near({0, 2})
                             .nic("mlx5_0", "", 2).near({2})
                             .gpu(1, "", 1).near({1, 3})
                             .build();
  CHECK(devices(t)->alignedCapacity(DeviceRequest{1, 1}, 0, 0) == AlignedCapacity{0, 1, 0});
  CHECK(topology::pathBetween(t, 0, "mlx5_0") == topology::GroupKind::kNUMANode);
  CHECK(topology::pathBetween(t, 1, "mlx5_0") == topology::GroupKind::kNode);
}

TEST_CASE("devices in use are taken out as the kubelet would allocate them", "[devices]") {
  const DeviceRequest one{1, 1};
  auto d = devices(switches());
  // 2 GPUs + 1 NIC in use: one whole switch gone.
  CHECK(d->alignedCapacity(one, 2, 1) == AlignedCapacity{3, 3, 3});
  // 8 GPUs in use, no NICs: nothing left for a GPU pod.
  CHECK(d->alignedCapacity(one, 8, 0) == AlignedCapacity{0, 0, 0});
  // More in use than the node has (a stale NodeTopology): nothing is alignable, no crash.
  CHECK(d->alignedCapacity(one, 9, 9) == AlignedCapacity{0, 0, 0});
  // The memo gives the same answers again.
  CHECK(d->alignedCapacity(one, 2, 1) == AlignedCapacity{3, 3, 3});
}

TEST_CASE("published free devices are the truth, less what pods the agent has not seen hold",
          "[devices]") {
  topology::Topology t = switches();
  // The agent saw GPUs 0,1 and mlx5_0 allocated: switch sw0 is gone.
  t.allocatable = topology::FreeDevices{{2, 3, 4, 5, 6, 7}, {"mlx5_1", "mlx5_2", "mlx5_3"}};
  auto d = devices(t);
  CHECK(d->publishesFreeDevices());
  CHECK(d->alignedCapacity(DeviceRequest{1, 1}, 2, 1) == AlignedCapacity{3, 3, 3});
  // The scheduler has since bound 2 more GPUs and 1 more NIC there: another switch goes.
  CHECK(d->alignedCapacity(DeviceRequest{1, 1}, 4, 2) == AlignedCapacity{2, 2, 2});
  // The agent knows of fewer in use than the scheduler's count suggests... and of more: its list
  // wins (a pod the scheduler does not count still holds its devices).
  CHECK(d->alignedCapacity(DeviceRequest{1, 1}, 0, 0) == AlignedCapacity{3, 3, 3});
}

TEST_CASE("a NIC whose ports are all down is not offered", "[devices]") {
  topology::Topology t = TopologyBuilder()
                             .gpu(0, "sw0", 0).nic("mlx5_0", "sw0", 0, topology::LinkLayer::kInfiniBand, "DOWN")
                             .gpu(1, "sw1", 0).nic("mlx5_1", "sw1", 0)
                             .build();
  auto d = devices(t);
  CHECK(d->nicCount() == 1);
  CHECK(d->alignedCapacity(DeviceRequest{1, 1}, 0, 0) == AlignedCapacity{1, 1, 1});
}

TEST_CASE("nodes of one hardware layout share one NodeDevices, and its memo", "[devices]") {
  ClusterCache cache({testing::kRack});
  cache.addNode(node("a").gpus(8));
  cache.addNode(node("b").gpus(8));
  cache.addNode(node("c").gpus(4));
  topology::Topology one = switches();
  topology::Topology same = switches();
  same.gpus[0].uuid = "GPU-other";  // ids and models do not matter, only devices and groups
  same.gpus[0].bus_id = "0000:ff:00.0";
  cache.setNodeDevices("a", devices(one));
  cache.setNodeDevices("b", devices(same));
  cache.setNodeDevices("c", devices(numaOnly()));
  const auto& a = cache.node(*cache.findNode("a")).devices;
  CHECK(a == cache.node(*cache.findNode("b")).devices);
  CHECK(a != cache.node(*cache.findNode("c")).devices);
  // Published free devices are part of the shape.
  topology::Topology busy = switches();
  busy.allocatable = topology::FreeDevices{{2, 3, 4, 5, 6, 7}, {"mlx5_1", "mlx5_2", "mlx5_3"}};
  cache.setNodeDevices("b", devices(busy));
  CHECK(a != cache.node(*cache.findNode("b")).devices);
  CHECK(cache.node(*cache.findNode("b")).devices->alignedCapacity(DeviceRequest{1, 1}, 0, 0) ==
        AlignedCapacity{3, 3, 3});
}

TEST_CASE("the gpu-nic-affinity annotation is read from the pod or its PodGroup", "[devices]") {
  SchedulerConfig config;
  auto none = [](std::string_view, std::string_view) -> const proto::PodGroup* { return nullptr; };
  CHECK(gangSpecOf(pod("a").gang("g", 2), none, config)->gpu_nic_affinity ==
        GpuNicAffinity::kPreferred);
  CHECK(gangSpecOf(pod("a").gang("g", 2).annotation("muster.dev/gpu-nic-affinity", "required"),
                   none, config)
            ->gpu_nic_affinity == GpuNicAffinity::kRequired);
  absl::StatusOr<GangSpec> bad =
      gangSpecOf(pod("a").annotation("muster.dev/gpu-nic-affinity", "always"), none, config);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "annotation muster.dev/gpu-nic-affinity must be \"required\" or \"preferred\", got "
        "\"always\"");
  proto::PodGroup group;
  group.meta.name = "pg";
  group.meta.namespace_ = "ml";
  group.spec.min_member = 2;
  group.meta.annotations["muster.dev/gpu-nic-affinity"] = "required";
  auto lookup = [&](std::string_view, std::string_view) -> const proto::PodGroup* { return &group; };
  CHECK(gangSpecOf(pod("a").podGroup("pg"), lookup, config)->gpu_nic_affinity ==
        GpuNicAffinity::kRequired);
}

// --- placement ---------------------------------------------------------------------------------

const std::vector<std::string> kLevels{testing::kRack};

testing::PodBuilder member(const std::string& gang, int i, int size, int gpus = 1, int nics = 1) {
  return pod(gang + "-w" + std::to_string(i))
      .gpus(gpus)
      .request("preferred.jp/rdma", std::to_string(nics))
      .gang(gang, size);
}

GangRequest gangOf(const std::string& name, int size, GpuNicAffinity affinity,
                   int gpus = 1, int nics = 1) {
  GangRequest r;
  r.key = GangKey{"ml", name, false};
  r.min_member = size;
  r.gpu_nic_affinity = affinity;
  for (int i = 0; i < size; ++i) r.members.push_back(member(name, i, size, gpus, nics).info());
  return r;
}

std::map<std::string, int> perNode(const PlacementResult& result) {
  const auto* u = std::get_if<Unschedulable>(&result);
  if (u != nullptr) FAIL("unschedulable: " << u->message);
  std::map<std::string, int> out;
  for (const Assignment& a : std::get<GangPlacement>(result).assignments) ++out[a.node];
  return out;
}

void addNode(ClusterCache& cache, const std::string& name, int gpus, int nics,
             std::optional<topology::Topology> layout) {
  cache.addNode(node(name).gpus(gpus).resource("preferred.jp/rdma", std::to_string(nics)).rack("r0"));
  if (layout) cache.setNodeDevices(name, devices(*layout));
}

TEST_CASE("a gang that fits on one node goes to the node where it can be aligned", "[devices]") {
  ClusterCache cache(kLevels);
  addNode(cache, "a-plain", 8, 8, std::nullopt);  // first in order; no NodeTopology
  addNode(cache, "b-split", 8, 8, split());
  addNode(cache, "c-switches", 8, 8, switches());
  PlacementResult r = place(gangOf("g", 4, GpuNicAffinity::kPreferred), cache);
  CHECK(perNode(r) == std::map<std::string, int>{{"c-switches", 4}});
  const auto& p = std::get<GangPlacement>(r);
  CHECK(p.gpu_nic_pods == 4);
  CHECK(p.gpu_nic_pcie == 4);
  CHECK(p.gpu_nic_numa == 0);

  // The same gang without NICs has nothing to align: packing order decides (the first node).
  GangRequest no_nics = gangOf("h", 4, GpuNicAffinity::kPreferred, 1, 0);
  CHECK(perNode(place(no_nics, cache)) == std::map<std::string, int>{{"a-plain", 4}});
}

TEST_CASE("inside the rack, PCIe-switch-aligned room is used first, then NUMA, then the rest, on no more nodes than plain packing",
          "[devices]") {
  ClusterCache cache(kLevels);
  addNode(cache, "n0-plain", 4, 4, std::nullopt);
  addNode(cache, "n1-numa", 4, 4, numaOnly());
  addNode(cache, "n2-switch", 4, 2, switches(2));  // 2 switches: 2 GPUs + 1 NIC each
  // Without alignment the tightest/fullest rule would take n0-plain (4) and n2-switch (2).
  CHECK(perNode(place(gangOf("g", 6, GpuNicAffinity::kPreferred), cache)) ==
        std::map<std::string, int>{{"n1-numa", 4}, {"n2-switch", 2}});
  PlacementResult r = place(gangOf("g", 6, GpuNicAffinity::kPreferred), cache);
  CHECK(std::get<GangPlacement>(r).gpu_nic_pcie == 2);
  CHECK(std::get<GangPlacement>(r).gpu_nic_numa == 4);
  // 8 pods: all aligned would take 3 nodes where 2 suffice; fewer nodes wins, and between the
  // two 4-pod nodes alignment breaks the tie (n1-numa is taken first).
  CHECK(perNode(place(gangOf("g8", 8, GpuNicAffinity::kPreferred), cache)) ==
        std::map<std::string, int>{{"n0-plain", 4}, {"n1-numa", 4}});
}

TEST_CASE("required alignment counts only aligned room, says why, and follows what is free",
          "[devices]") {
  ClusterCache cache(kLevels);
  addNode(cache, "n0-plain", 4, 4, std::nullopt);
  addNode(cache, "n1-numa", 4, 4, numaOnly());
  addNode(cache, "n2-switch", 4, 2, switches(2));
  addNode(cache, "n3-split", 4, 4, split());

  PlacementResult seven = place(gangOf("big", 7, GpuNicAffinity::kRequired), cache);
  REQUIRE(std::holds_alternative<Unschedulable>(seven));
  const std::string message = std::get<Unschedulable>(seven).message;
  INFO(message);
  CHECK(message.find("the cluster can hold 6") != std::string::npos);
  CHECK(message.find("1 node(s) had no NodeTopology, which muster.dev/gpu-nic-affinity: required "
                     "needs") != std::string::npos);
  CHECK(message.find("1 node(s) had no free GPU and RDMA NIC on one PCIe switch or NUMA node") !=
        std::string::npos);
  // Preferred, the same 7 pods are placed, on as few nodes as the plain rule would use.
  CHECK(perNode(place(gangOf("big", 7, GpuNicAffinity::kPreferred), cache)) ==
        std::map<std::string, int>{{"n0-plain", 3}, {"n1-numa", 4}});

  GangRequest six = gangOf("six", 6, GpuNicAffinity::kRequired);
  PlacementResult r = place(six, cache);
  CHECK(perNode(r) == std::map<std::string, int>{{"n1-numa", 4}, {"n2-switch", 2}});
  const auto& p = std::get<GangPlacement>(r);
  for (size_t i = 0; i < p.assignments.size(); ++i) {
    REQUIRE(cache.assume(*six.members[i], p.assignments[i].node).ok());
  }
  // The aligned devices are now taken: a required pod waits, a preferred one goes elsewhere.
  CHECK(std::holds_alternative<Unschedulable>(place(gangOf("one", 1, GpuNicAffinity::kRequired), cache)));
  GangRequest single = gangOf("one", 1, GpuNicAffinity::kPreferred);
  single.key.single_pod = true;
  CHECK(perNode(place(single, cache)).size() == 1);
  // Freeing them (the pods go away) makes room again.
  for (const auto& m : six.members) REQUIRE(cache.forget(m->key).ok());
  CHECK(perNode(place(gangOf("one", 1, GpuNicAffinity::kRequired), cache)) ==
        std::map<std::string, int>{{"n2-switch", 1}});
}

TEST_CASE("without any NodeTopology, required alignment refuses every node and says why",
          "[devices]") {
  ClusterCache cache(kLevels);
  addNode(cache, "n0", 8, 8, std::nullopt);
  const Unschedulable u = std::get<Unschedulable>(place(gangOf("g", 2, GpuNicAffinity::kRequired), cache));
  CHECK(u.message.find("1 node(s) had no NodeTopology") != std::string::npos);
  CHECK(perNode(place(gangOf("g", 2, GpuNicAffinity::kPreferred), cache)) ==
        std::map<std::string, int>{{"n0", 2}});
}

TEST_CASE("a single pod ranks PCIe-switch alignment above packing", "[devices]") {
  ClusterCache cache(kLevels);
  addNode(cache, "a-numa", 4, 4, numaOnly());
  addNode(cache, "b-switch", 8, 4, switches());
  GangRequest r = gangOf("solo", 1, GpuNicAffinity::kPreferred);
  r.key.single_pod = true;
  // Packing alone would pick a-numa (fewer GPUs left); alignment picks b-switch.
  CHECK(perNode(place(r, cache)) == std::map<std::string, int>{{"b-switch", 1}});
}

TEST_CASE("a pod goes where its GPU and NIC share the deepest switch", "[devices]") {
  ClusterCache cache(kLevels);
  addNode(cache, "a-shallow", 4, 2, shallow());  // first in order
  addNode(cache, "b-nested", 4, 2, nested());
  GangRequest single = gangOf("one", 1, GpuNicAffinity::kPreferred);
  single.key.single_pod = true;
  PlacementResult r = place(single, cache);
  CHECK(perNode(r) == std::map<std::string, int>{{"b-nested", 1}});
  CHECK(std::get<GangPlacement>(r).gpu_nic_pix == 1);
  // A gang of two that fits on one node takes the node where more of it is PIX.
  CHECK(perNode(place(gangOf("two", 2, GpuNicAffinity::kPreferred), cache)) ==
        std::map<std::string, int>{{"b-nested", 2}});
}

TEST_CASE("amd.com/gpu requests are GPUs to the alignment", "[devices]") {
  ClusterCache cache(kLevels);
  cache.addNode(node("a-split").resource("amd.com/gpu", "4").resource("preferred.jp/rdma", "4").rack("r0"));
  cache.setNodeDevices("a-split", devices(split()));
  cache.addNode(node("b-switches").resource("amd.com/gpu", "8").resource("preferred.jp/rdma", "4").rack("r0"));
  cache.setNodeDevices("b-switches", devices(switches()));
  GangRequest r;
  r.key = GangKey{"ml", "amd", true};
  r.min_member = 1;
  r.members.push_back(
      pod("amd-0").request("amd.com/gpu", "1").request("preferred.jp/rdma", "1").info());
  PlacementResult placed = place(r, cache);
  CHECK(perNode(placed) == std::map<std::string, int>{{"b-switches", 1}});
  CHECK(std::get<GangPlacement>(placed).gpu_nic_pods == 1);
}

}  // namespace
}  // namespace muster::scheduler
