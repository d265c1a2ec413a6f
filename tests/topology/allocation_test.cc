// The agent's free devices: device ids from the kubelet's pod-resources API mapped onto the
// topology, the free lists they leave, and how they reach the NodeTopology.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "proto/nodetopology.h"
#include "tests/topology/builders.h"
#include "tests/topology/run.h"
#include "topology/agent/allocation.h"
#include "topology/agent/rdma_conf.h"
#include "topology/discovery/discovery.h"

namespace muster::topology {
namespace {

namespace fs = std::filesystem;
using testing::dgxLike;
using testing::TempDir;

// What the kubelet reports, written like the pods that hold the devices.
class Kubelet {
 public:
  Kubelet& holds(std::string resource, std::vector<std::string> ids) {
    a_.allocated.push_back({std::move(resource), std::move(ids)});
    return *this;
  }
  Kubelet& canAllocate(std::string resource, std::vector<std::string> ids) {
    if (!a_.allocatable) a_.allocatable.emplace();
    a_.allocatable->push_back({std::move(resource), std::move(ids)});
    return *this;
  }
  const DeviceAllocations& allocations() const { return a_; }

 private:
  DeviceAllocations a_;
};

// /proc/driver/nvidia/gpus/<bus id>/information as the NVIDIA driver writes it.
void writeNvidiaInformation(const std::string& proc, const std::string& bus,
                            const std::string& uuid) {
  const fs::path dir = fs::path(proc) / "driver" / "nvidia" / "gpus" / bus;
  fs::create_directories(dir);
  std::ofstream(dir / "information")
      << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 178\nGPU UUID: \t " << uuid
      << "\nVideo BIOS: \t 96.00.74.00.0d\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
         "DMA Mask: \t 0xfffffffffffff\nBus Location: \t "
      << bus << "\nDevice Minor: \t 0\nGPU Excluded:\t No\n";
}

TEST_CASE("GPU device ids are matched by UUID, then by index, then through /proc/driver/nvidia") {
  Topology t = dgxLike();
  t.gpus[3].uuid = "GPU-3a1b2c3d-0000-1111-2222-333344445555";
  std::map<std::string, std::string> none;
  CHECK(mapGpuId(t, "GPU-3a1b2c3d-0000-1111-2222-333344445555", none) == 3);
  CHECK(mapGpuId(t, "GPU-3A1B2C3D-0000-1111-2222-333344445555", none) == 3);
  CHECK(mapGpuId(t, "5", none) == 5);
  CHECK_FALSE(mapGpuId(t, "12", none).has_value());
  // By PCI address, in either spelling (AMD's device plugin, nvidia-smi).
  CHECK(mapGpuId(t, t.gpus[2].bus_id, none) == 2);
  CHECK(mapGpuId(t, "0000" + t.gpus[2].bus_id, none) == 2);
  CHECK_FALSE(mapGpuId(t, "0000:ee:00.0", none).has_value());

  // hwloc without NVML: the UUID is found in the driver's information file of the GPU's bus id.
  TempDir proc;
  writeNvidiaInformation(proc.path(), "0000:16:00.0", "GPU-66666666-aaaa-bbbb-cccc-dddddddddddd");
  const std::map<std::string, std::string> uuids = readNvidiaProcGpus(proc.path(), nullptr);
  CHECK(mapGpuId(t, "GPU-66666666-aaaa-bbbb-cccc-dddddddddddd", uuids) == 6);
  CHECK_FALSE(mapGpuId(t, "GPU-77777777-aaaa-bbbb-cccc-dddddddddddd", uuids).has_value());
  CHECK_FALSE(mapGpuId(t, "MIG-66666666-aaaa-bbbb-cccc-dddddddddddd", uuids).has_value());
  CHECK_FALSE(mapGpuId(t, "", uuids).has_value());
}

TEST_CASE("GPU UUIDs from NVML in a real hwloc export name their GPUs") {
  DiscoveryOptions options;
  options.hwloc_xml = std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/cts1-pascal.xml";
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  CHECK(mapGpuId(*t, "GPU-fa7cef9c-220f-b6d7-1bb6-ea1e99d3ad0a", {}) == 1);
  CHECK(mapRdmaId(*t, "0000:08:00.0") == "mlx5_0");
}

TEST_CASE("RDMA device ids are matched by ibverbs name, then by PCI address") {
  Topology t = dgxLike();
  CHECK(mapRdmaId(t, "mlx5_2") == "mlx5_2");
  CHECK(mapRdmaId(t, "0000:83:00.0") == "mlx5_3");
  CHECK(mapRdmaId(t, "00000000:83:00.0") == "mlx5_3");
  CHECK_FALSE(mapRdmaId(t, "0000:99:00.0").has_value());
  CHECK_FALSE(mapRdmaId(t, "hca_shared_devices_a_0").has_value());
}

TEST_CASE("free devices are the topology's devices that no container holds") {
  Topology t = dgxLike();
  t.gpus[0].uuid = "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd";
  Kubelet kubelet;
  kubelet.holds("nvidia.com/gpu", {"GPU-00000000-aaaa-bbbb-cccc-dddddddddddd", "1"})
      .holds("preferred.jp/rdma", {"mlx5_0"})
      .holds("nvidia.com/gpu", {"4"})
      .holds("preferred.jp/rdma", {"0000:84:00.0"})
      .holds("example.com/fpga", {"fpga0"});
  std::vector<std::string> notes;
  std::optional<FreeDevices> free = freeDevices(t, kubelet.allocations(), {}, &notes);
  REQUIRE(free);
  CHECK(notes.empty());
  CHECK(free->gpus == std::vector<int32_t>{2, 3, 5, 6, 7});
  CHECK(free->rdma_nics ==
        std::vector<std::string>{"mlx5_1", "mlx5_2", "mlx5_3", "mlx5_5", "mlx5_6", "mlx5_7"});
  CHECK(free->gpus_known);
  CHECK(free->rdma_nics_known);

  // Nothing held: everything is free.
  free = freeDevices(t, DeviceAllocations{}, {}, &notes);
  REQUIRE(free);
  CHECK(free->gpus.size() == 8);
  CHECK(free->rdma_nics.size() == 8);
}

TEST_CASE("devices the kubelet does not report as allocatable are not free") {
  Topology t = dgxLike();
  Kubelet kubelet;
  // GPU 7 failed its health check: the device plugin no longer offers it.
  kubelet.holds("nvidia.com/gpu", {"0"})
      .canAllocate("nvidia.com/gpu", {"0", "1", "2", "3", "4", "5", "6"});
  std::optional<FreeDevices> free = freeDevices(t, kubelet.allocations(), {}, nullptr);
  REQUIRE(free);
  CHECK(free->gpus == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  // The kubelet reports no RDMA resource: the NICs are restricted by nothing.
  CHECK(free->rdma_nics.size() == 8);
}

TEST_CASE("resource names are configurable") {
  Topology t = dgxLike();
  Kubelet kubelet;
  kubelet.holds("nvidia.com/gpu", {"0"}).holds("rdma/hca", {"mlx5_1"});
  DeviceMapping mapping;
  mapping.gpu_resource = "example.com/gpu";
  mapping.rdma_resource = "rdma/hca";
  std::optional<FreeDevices> free = freeDevices(t, kubelet.allocations(), mapping, nullptr);
  REQUIRE(free);
  CHECK(free->gpus.size() == 8);
  CHECK(free->rdma_nics ==
        std::vector<std::string>{"mlx5_0", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6",
                                 "mlx5_7"});
}

TEST_CASE("an id that names no device leaves that kind without a free list, with the reason") {
  Topology t = dgxLike();
  Kubelet kubelet;
  kubelet.holds("nvidia.com/gpu", {"2"})
      .holds("preferred.jp/rdma", {"mlx5_1", "4f9c2e", "b81d07", "c2a9e1", "d03f5b"});
  std::vector<std::string> notes;
  std::optional<FreeDevices> free = freeDevices(t, kubelet.allocations(), {}, &notes);
  REQUIRE(free);
  CHECK(free->gpus_known);
  CHECK(free->gpus == std::vector<int32_t>{0, 1, 3, 4, 5, 6, 7});
  CHECK_FALSE(free->rdma_nics_known);
  CHECK(free->rdma_nics.size() == 8);  // every NIC: a reader counting requests is not misled
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "preferred.jp/rdma device ids \"4f9c2e\", \"b81d07\", \"c2a9e1\" and 1 more name none of "
        "the node's RDMA NICs; free RDMA NICs not published");

  // In the NodeTopology: freeGpus only.
  Topology published = t;
  published.allocatable = free;
  proto::NodeTopology obj = toNodeTopology(published, "n1", "test", "2026-01-15T09:30:00Z");
  REQUIRE(obj.spec.allocatable);
  CHECK(obj.spec.allocatable->free_gpus == std::vector<int32_t>{0, 1, 3, 4, 5, 6, 7});
  CHECK_FALSE(obj.spec.allocatable->free_rdma_nics.has_value());
  const std::string json = proto::encode(obj);
  CHECK(json.find(R"("allocatable":{"freeGpus":[0,1,3,4,5,6,7]})") != std::string::npos);
  CHECK(proto::specPatch(obj.spec).find(
            R"("allocatable":{"freeGpus":[0,1,3,4,5,6,7],"freeRdmaNics":null})") !=
        std::string::npos);

  // Neither kind mappable: nothing is published.
  Kubelet opaque;
  opaque.holds("nvidia.com/gpu", {"MIG-1"}).holds("preferred.jp/rdma", {"x"});
  notes.clear();
  CHECK_FALSE(freeDevices(t, opaque.allocations(), {}, &notes).has_value());
  CHECK(notes.size() == 2);
}

TEST_CASE("an unmappable id among the allocatable devices also leaves that kind unpublished") {
  Topology t = dgxLike();
  Kubelet kubelet;
  kubelet.canAllocate("nvidia.com/gpu", {"0", "1", "GPU-not-on-this-node"});
  std::vector<std::string> notes;
  std::optional<FreeDevices> free = freeDevices(t, kubelet.allocations(), {}, &notes);
  REQUIRE(free);
  CHECK_FALSE(free->gpus_known);
  CHECK(free->rdma_nics_known);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("\"GPU-not-on-this-node\"") != std::string::npos);
}

}  // namespace
}  // namespace muster::topology
