#pragma once

// Discovery of the node's GPUs, RDMA NICs and their PCIe/NUMA locality with hwloc 2.9, completed
// with port facts from a VerbsProvider chain. Never linked into the scheduler.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/discovery/verbs.h"
#include "topology/model/topology.h"

namespace muster::topology {

struct DiscoveryOptions {
  // An hwloc XML export to load instead of the live machine (tests, `--hwloc-xml`).
  std::string hwloc_xml;
  // Port facts: asked in order; the first that knows a device wins for that device. Facts no
  // provider knows come from what hwloc recorded (Port<N>State, Port<N>GID0, NodeGUID), else stay
  // unknown with a warning. Empty: hwloc's facts only.
  std::vector<VerbsProvider*> providers;
};

// Loads the topology and extracts:
// - NUMA nodes (OS index, cpuset as a Linux list, local memory);
// - GPUs: PCI devices of vendor 0x10de with class 0x0302 (3D) or 0x0300 (VGA); index from their
//   NVML OS device (nvmlN) when every GPU has one, else CUDA (cudaN), else PCI bus order; model
//   and UUID from the NVML/CUDA OS devices when present, else the PCI device name;
// - RDMA NICs: OpenFabrics OS devices (mlx5_0) with their PCI parent, network interfaces, ports;
// - locality: NUMA node from the nearest non-I/O ancestor's nodeset (when it is exactly one node),
//   PCIe switch = the upstream port of the switch the device is behind (the PCI bridge just below
//   the root port), then computeGroups().
// Returns an error only when hwloc cannot load at all; anything partial becomes a warning in
// Topology::warnings (also logged).
absl::StatusOr<Topology> discover(const DiscoveryOptions& options);

// "2.9.0" from the library in use.
std::string hwlocVersion();

}  // namespace muster::topology
