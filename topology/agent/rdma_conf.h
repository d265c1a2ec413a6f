#pragma once

// `muster-topology rdma-conf`: inside a pod, picks the RDMA NICs closest to the GPUs the pod was
// given and writes shell-sourceable NCCL and UCX settings for them. Sourcing never overrides a
// value the pod's own environment already sets:
//
//   [ -n "${NCCL_IB_HCA:-}" ] || NCCL_IB_HCA='mlx5_0:1'
//   export NCCL_IB_HCA
//
// (POSIX sh and bash alike, also under `set -eu`; values single-quoted.)
//
// Nothing from the pod's environment can run when the files are sourced: values are single-quoted
// (every byte is data inside single quotes; the sources are C strings, so there is no NUL), and
// the comment lines, which quote the env as written ("# note: MUSTER_RDMA_DEVICES: x not found"),
// have every control character escaped (\n as \x0a, a backslash as \\), so no newline ends a
// comment early.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "topology/model/topology.h"

namespace muster::topology {

struct RdmaConfInput {
  // The node's layout as seen from the pod (hwloc reads the host's sysfs; fixtures in tests).
  Topology topology;
  // The pod's environment: NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES /
  // HIP_VISIBLE_DEVICES (GPUs, by index, full or prefix UUID, MIG UUID, or PCI address), MUSTER_RDMA_DEVICES (RDMA device names, comma-separated) or the SR-IOV device
  // plugin's PCIDEVICE_<RESOURCE>=<pci addresses>. Without an RDMA selection every NIC of the
  // topology is the pod's (the RDMA shared device plugin exposes all of them).
  std::map<std::string, std::string> env;
  // GPU UUID -> PCI address, from /proc/driver/nvidia/gpus/*/information (only the pod's GPUs
  // are there when the NVIDIA container toolkit set the pod up).
  std::map<std::string, std::string> gpu_uuid_to_bus;
  // PCI addresses under /proc/driver/nvidia/gpus: the pod's GPUs when no variable names them.
  std::vector<std::string> proc_gpu_bus_ids;
  // The pod's primary interface (default route), for NCCL_SOCKET_IFNAME; "" = exclude lo,docker.
  std::string socket_ifname;
};

struct RdmaConf {
  std::vector<int32_t> gpus;          // the pod's GPUs (topology indexes)
  std::vector<std::string> hcas;      // "mlx5_0:1", in NIC name order
  std::optional<int32_t> gid_index;   // RoCE only
  bool roce = false;
  bool efa = false;                   // the NICs are EFA: libfabric settings, no IB ones
  std::vector<std::string> efa_devices;
  std::vector<std::string> notes;     // why a choice was made or something was skipped
  std::string nccl;                   // file contents
  std::string ucx;
};

absl::StatusOr<RdmaConf> buildRdmaConf(const RdmaConfInput& input);

// 'value' with embedded single quotes as '\''.
std::string shellQuote(std::string_view value);
// One comment line, "# <text>\n", with control characters written as \xNN and '\' as "\\".
std::string shellComment(std::string_view text);
// The two lines that set NAME unless the environment already has a non-empty value.
std::string shellDefault(std::string_view name, std::string_view value);

// A PCI address as hwloc and the CRD write it, "0000:04:00.0": lower case, a 4-digit domain
// (nvidia-smi and /proc/driver/nvidia write "00000000:04:00.0").
std::string normalizeBusId(std::string bus_id);

// Readers for the in-pod sources; a missing directory or file is no data, not an error.
std::map<std::string, std::string> readNvidiaProcGpus(const std::string& proc_root,
                                                      std::vector<std::string>* bus_ids);
std::string defaultRouteInterface(const std::string& proc_root);

// Writes `text` to `path` through a temporary file and rename, creating parent directories.
absl::Status writeFileAtomically(const std::string& path, std::string_view text);

}  // namespace muster::topology
