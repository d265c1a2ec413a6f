#pragma once

// Which of the node's devices pods hold, as the kubelet's pod-resources API tells it, mapped onto
// the topology: the free devices the agent publishes as NodeTopology spec.allocatable. Pure C++;
// the gRPC client behind DeviceAllocationSource lives in topology/podresources (linked only into
// muster-topology), so everything here is tested without a kubelet.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/objects.h"
#include "topology/model/topology.h"

namespace muster::topology {

inline constexpr std::string_view kDefaultPodResourcesSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";
inline constexpr std::string_view kDefaultGpuResource = proto::kGpuResource;
inline constexpr std::string_view kDefaultRdmaResource = proto::kRdmaResource;

// The device ids of one extended resource as its device plugin names them: "GPU-8e3f…" or "0"
// (NVIDIA), "mlx5_0" or "0000:3b:00.0" (RDMA and SR-IOV plugins), or anything opaque.
struct ResourceDevices {
  std::string resource_name;
  std::vector<std::string> device_ids;
  bool operator==(const ResourceDevices&) const = default;
};

struct DeviceAllocations {
  // Held by the containers of the pods on the node (List), one entry per container and resource.
  std::vector<ResourceDevices> allocated;
  // What the kubelet can hand out at all (GetAllocatableResources); nullopt when the kubelet does
  // not serve that call (before 1.23, or its feature gate off).
  std::optional<std::vector<ResourceDevices>> allocatable;
};

// Where the agent learns which devices pods hold: the kubelet's pod-resources API in
// production, a fake in tests.
class DeviceAllocationSource {
 public:
  virtual ~DeviceAllocationSource() = default;
  // Reads the allocations now (blocking, bounded by the implementation's deadline). An error
  // says, for a person, why they cannot be seen (the socket is missing, the kubelet does not
  // answer); the caller then publishes no free devices.
  virtual absl::StatusOr<DeviceAllocations> read() = 0;
};
using DeviceAllocationSourcePtr = std::unique_ptr<DeviceAllocationSource>;

// How device ids name the topology's devices.
struct DeviceMapping {
  std::string gpu_resource = std::string(kDefaultGpuResource);
  std::string rdma_resource = std::string(kDefaultRdmaResource);
  // GPU UUID -> PCI address, from /proc/driver/nvidia/gpus/*/information (readNvidiaProcGpus):
  // how a "GPU-…" id finds a GPU that hwloc discovered without its UUID.
  std::map<std::string, std::string> gpu_uuid_to_bus;
};

// The GPU (Gpu::index) a device id names: by UUID, else by index (an id of digits, the NVIDIA
// plugin's deviceIDStrategy=index), else by the UUID's PCI address in gpu_uuid_to_bus.
std::optional<int32_t> mapGpuId(const Topology& topology, std::string_view id,
                                const std::map<std::string, std::string>& gpu_uuid_to_bus);
// The RDMA NIC (RdmaNic::name) a device id names: by ibverbs name, else by PCI address.
std::optional<std::string> mapRdmaId(const Topology& topology, std::string_view id);

// The free devices: those of the topology no container holds, and, for a resource the kubelet
// reports as allocatable, only those it reports. A kind with a device id that names none of the
// topology's devices is not known (FreeDevices::gpus_known / rdma_nics_known false, its list
// every device of that kind), and `notes` says which id and why. nullopt when neither kind is
// known. Lists follow the topology's order (GPUs by index, NICs by name).
std::optional<FreeDevices> freeDevices(const Topology& topology,
                                       const DeviceAllocations& allocations,
                                       const DeviceMapping& mapping,
                                       std::vector<std::string>* notes);

}  // namespace muster::topology
