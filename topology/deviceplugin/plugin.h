#pragma once

// `muster-topology device-plugin`: a node's GPUs and RDMA NICs served to the kubelet through its
// device plugin API (api.proto), each device with its NUMA node as the topology hint, so that the
// kubelet's device manager (and its Topology Manager) choose and hand out the devices.
//
// Fake devices only (--fake): what discovery finds (usually an hwloc export, --hwloc-xml) is
// advertised, and Allocate hands out no device file, only the environment a container reads to
// know its devices (NVIDIA_VISIBLE_DEVICES for GPUs, MUSTER_RDMA_DEVICES for NICs) and, with an
// export, the export itself, mounted read-only, with HWLOC_XMLFILE naming it, so that tools in the
// pod (muster-topology rdma-conf) see the same machine. For test clusters (tests/cluster,
// --real-nodes), never for a production node.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "topology/model/topology.h"

namespace muster::topology::deviceplugin {

inline constexpr char kApiVersion[] = "v1beta1";
// Where the export is mounted in containers that get a device.
inline constexpr char kFakeTopologyPath[] = "/etc/muster/fake-topology.xml";

struct Device {
  std::string id;
  int32_t numa_node = -1;  // the topology hint; -1: none
  bool operator==(const Device&) const = default;
};

struct Resource {
  std::string name;                         // "nvidia.com/gpu"
  std::vector<Device> devices;
  std::string ids_env;                      // lists the allocated ids, comma-separated
  std::map<std::string, std::string> envs;  // added to every allocation
  struct Mount {
    std::string host_path, container_path;  // read-only
    bool operator==(const Mount&) const = default;
  };
  std::vector<Mount> mounts;
};

// The devices of a discovered topology: GPUs by UUID (their index where there is none), NICs by
// ibverbs name, each with its NUMA node. With host_numa_nodes non-empty (--fold-numa, for an
// export of a bigger machine than this one), the export's NUMA nodes, in order, are mapped onto
// this machine's in turn, so that the kubelet's Topology Manager, which knows only this machine's
// nodes, can satisfy the hints.
std::vector<Device> gpuDevices(const Topology& t, const std::vector<int32_t>& host_numa_nodes);
std::vector<Device> nicDevices(const Topology& t, const std::vector<int32_t>& host_numa_nodes);

// The NUMA nodes this machine has, from <sysfs_root>/devices/system/node/node<N>.
std::vector<int32_t> hostNumaNodes(const std::string& sysfs_root);

// What Allocate answers for one container given these device ids.
struct Allocation {
  std::map<std::string, std::string> envs;
  std::vector<Resource::Mount> mounts;
};
Allocation allocationFor(const Resource& r, const std::vector<std::string>& ids);

// One resource's plugin: a gRPC server on <kubelet root dir>/plugins_registry/<socketName()>
// serving both the DevicePlugin service and the plugin registration service, through which the
// kubelet's plugin watcher finds it (and finds it again after the kubelet restarts).
class Plugin {
 public:
  Plugin(std::string kubelet_dir, Resource resource);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Listens on the socket (replacing a stale file). Unavailable while the kubelet has not made
  // its plugins_registry directory. Call again when needsRestart() (the socket was removed).
  absl::Status start();
  bool needsRestart() const;
  void stop();

  // What the kubelet last said of the registration (NotifyRegistrationStatus): nullopt before it
  // said anything, else "" when registered, or its error.
  std::optional<std::string> registration() const;

  std::string socketPath() const { return dir_ + "/plugins_registry/" + socketName(); }
  std::string socketName() const;
  const Resource& resource() const { return resource_; }

 private:
  class Service;
  class RegistrationService;
  std::string dir_;
  Resource resource_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<RegistrationService> registration_;
  struct ServerHolder;
  std::unique_ptr<ServerHolder> server_;
};

}  // namespace muster::topology::deviceplugin
