#pragma once

// RDMA device and port facts (state, link layer, rate, GUIDs) behind one small interface, so that
// discovery and rdma-conf can be tested without hardware. Two implementations: libibverbs (the
// truth on a node whose /dev/infiniband is reachable) and a reader of /sys/class/infiniband under
// a configurable root (works in any container that sees sysfs, and on captured trees in tests).
// libibverbs' ibv_query_port goes through ioctls on /dev/infiniband/*, so it cannot be pointed at
// a captured tree: that is what the sysfs reader is for.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/model/topology.h"

namespace muster::topology {

struct RdmaDeviceInfo {
  std::string name;       // "mlx5_0", "qib0"
  std::string bus_id;     // PCI address of the adapter (function), "" when not a PCI device
  std::string node_guid;  // "0011:7500:0077:cfc8"
  std::string model;      // hca_type / board id when known
  int32_t numa_node = -1; // from the PCI device's numa_node, when the provider knows it
  std::vector<std::string> net_devices;
  std::vector<RdmaPort> ports;
  // What the provider can tell beyond the ports: EFA (driver "efa"), iWARP (transport); else
  // kUnknown (discovery decides from the link layer).
  NicKind kind = NicKind::kUnknown;
};

// Contract: devices() lists every RDMA device the provider can see, with whatever it could learn
// about each; a device it sees but cannot query is still listed (with fewer facts). An error means
// the provider cannot see any device at all (no library, no /sys/class/infiniband, no permission):
// callers fall back to the next provider, never crash.
class VerbsProvider {
 public:
  virtual ~VerbsProvider() = default;
  virtual std::string name() const = 0;  // "libibverbs", "sysfs:/sys"
  virtual absl::StatusOr<std::vector<RdmaDeviceInfo>> devices() = 0;
};
using VerbsProviderPtr = std::unique_ptr<VerbsProvider>;

// libibverbs: ibv_get_device_list, ibv_open_device, ibv_query_port, ibv_query_gid_table.
VerbsProviderPtr makeIbverbsProvider();
// <sysfs_root>/class/infiniband/<dev>/{node_guid,node_type,hca_type,device,device/driver,
// ports/<n>/{state,link_layer,rate,gids/0,gid_attrs/types/<i>}}; sysfs_root stands in for "/sys".
VerbsProviderPtr makeSysfsProvider(std::string sysfs_root);

// The sysfs reader's parsers, exposed for tests.
// "4: ACTIVE" -> "ACTIVE".
std::string parsePortState(std::string_view text);
// "40 Gb/sec (4X QDR)" -> 40; "2.5 Gb/sec (1X SDR)" -> 2.5; unparsable -> 0.
double parseRateGbps(std::string_view text);

}  // namespace muster::topology
