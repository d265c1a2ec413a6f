#pragma once

// Discovery of the node's GPUs, RDMA NICs and their PCIe/NUMA locality with hwloc 2.9, completed
// with port facts from a VerbsProvider chain. Never linked into the scheduler.

#include <map>
#include <string>
#include <string_view>
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
  // Where the NVIDIA driver's /proc is ("/proc" on the live machine, "" = not read): its
  // driver/nvidia/gpus/<bus>/information gives each GPU's model and UUID when hwloc has no NVML.
  std::string proc_root;
};

// From <proc_root>/driver/nvidia/gpus/<bus id>/information, by normalized bus id.
struct NvidiaDriverGpu {
  std::string model;  // "NVIDIA H200"
  std::string uuid;   // "GPU-c52dbede-…"
};
using NvidiaDriverInfo = std::map<std::string, NvidiaDriverGpu>;
NvidiaDriverInfo readNvidiaDriverInfo(const std::string& proc_root);

// A PCI address as hwloc and the CRD write it, "0000:04:00.0": lower case, a 4-digit domain
// (nvidia-smi and /proc/driver/nvidia write "00000000:04:00.0").
std::string normalizePciAddress(std::string_view text);

// Loads the topology and extracts:
// - NUMA nodes (OS index, cpuset as a Linux list, local memory);
// - GPUs: PCI devices of NVIDIA (0x10de) or AMD (0x1002) of a display class (0x03xx) or
//   processing accelerator (0x1200); an AMD VGA only with a compute OS device. Index from NVML
//   (nvmlN) when every NVIDIA GPU has one, else CUDA (cudaN), else PCI bus order; AMD: ROCm SMI
//   (rsmiN), else bus order. Model and UUID from those OS devices, else the NVIDIA driver's /proc
//   entry (proc_root), else the PCI device name;
// - RDMA NICs: OpenFabrics OS devices (mlx5_0, rdmap0s6) with their PCI parent, network
//   interfaces, ports, and their kind (InfiniBand, RoCE, EFA, iWARP);
// - locality (Place): NUMA set from the nearest non-I/O ancestor's nodeset (unknown when it spans
//   packages), package, host bridge, and the PCI bridge chain (PIX switch, PXB root port), then
//   computeGroups().
// Returns an error only when hwloc cannot load at all; anything partial becomes a warning in
// Topology::warnings (also logged).
absl::StatusOr<Topology> discover(const DiscoveryOptions& options);

// "2.9.0" from the library in use.
std::string hwlocVersion();

}  // namespace muster::topology
