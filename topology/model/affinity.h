#pragma once

// GPU↔RDMA NIC affinity inside one node: the questions the scheduler asks when it prefers nodes
// where a pod's GPUs and NICs can be close, and the choice rdma-conf makes for a pod.
//
// A pod asking for g GPUs and r NICs (both > 0) is *aligned at* a level (a GroupKind: deepest PCIe
// switch, root port, host bridge, NUMA node, package, node) when g free GPUs and r free NICs can be
// chosen such that every chosen GPU has a chosen NIC in the same group of that level, and every
// chosen NIC a chosen GPU. One group holding all of them is the special case fitsInOneGroup().
// Devices outside every group of a level (a GPU with no PCI bridge above it, a NIC of unknown
// NUMA node) cannot be aligned at that level.
//
// Cost: the groups of a node are few (typically ≤ 8 per level); alignedAt() is a small dynamic
// program over them, O(groups × min(g, r) × g). DeviceLocality is immutable after construction
// and safe to share between threads.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/model/topology.h"

namespace muster::topology {

struct DeviceRequest {
  int32_t gpus = 0;
  int32_t rdma_nics = 0;
};

// The tightest level at which a request can be served, best first; the first six mirror GroupKind.
enum class Alignment {
  kPCIeSwitch,     // every GPU has a NIC behind the same deepest PCIe switch (PIX)
  kPCIeHierarchy,  // ... under the same root port (PXB: NCCL still uses GPUDirect RDMA)
  kHostBridge,     // ... under the same host bridge (PHB)
  kNUMANode,       // ... near a common NUMA node
  kPackage,        // ... on the same socket
  kNode,           // enough free devices, but not pairable closer than the node
  kNotApplicable,  // the request has no GPUs or no NICs: nothing to align; enough devices free
  kInsufficient,   // fewer free GPUs or NICs than requested
};
std::string_view alignmentName(Alignment alignment);  // "PCIeSwitch", "NUMANode", ...
inline Alignment alignmentOf(GroupKind kind) { return static_cast<Alignment>(kind); }

// A concrete choice of devices.
struct DeviceSelection {
  Alignment alignment = Alignment::kInsufficient;
  std::vector<int32_t> gpus;
  std::vector<std::string> rdma_nics;
};

class DeviceLocality {
 public:
  explicit DeviceLocality(const Topology& topology);

  // `free` == nullptr means every device is free (or, for the scheduler, that it does not know
  // which devices are taken and asks about the node's shape). Names not in the topology are
  // ignored.
  Alignment bestAlignment(const DeviceRequest& request, const FreeDevices* free = nullptr) const;
  bool alignedAt(GroupKind level, const DeviceRequest& request,
                 const FreeDevices* free = nullptr) const;
  // All requested GPUs and NICs inside one group of `level`.
  bool fitsInOneGroup(GroupKind level, const DeviceRequest& request,
                      const FreeDevices* free = nullptr) const;
  // Devices for the request at its best alignment, using as few groups as possible; nullopt when
  // kInsufficient.
  std::optional<DeviceSelection> select(const DeviceRequest& request,
                                        const FreeDevices* free = nullptr) const;

  // How many GPUs of the node have at least one NIC in the same group of `level` (its shape:
  // what the scheduler can show or score without a request).
  int32_t pairedGpus(GroupKind level) const;

 private:
  struct Group {
    std::vector<int32_t> gpus;
    std::vector<std::string> rdma_nics;
  };
  // Groups of one level, restricted to `free`, with at least one GPU and one NIC.
  std::vector<Group> pairableGroups(GroupKind level, const FreeDevices* free) const;
  std::optional<DeviceSelection> selectAt(GroupKind level, const DeviceRequest& request,
                                          const FreeDevices* free) const;
  int32_t freeGpus(const FreeDevices* free) const;
  int32_t freeNics(const FreeDevices* free) const;

  std::vector<int32_t> gpus_;
  std::vector<std::string> nics_;
  std::vector<Group> levels_[kGroupKinds];  // indexed by GroupKind
};

}  // namespace muster::topology
