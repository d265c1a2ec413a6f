#pragma once

// The kubelet's pod-resources API (k8s.io/kubelet/pkg/apis/podresources/v1) over its unix socket,
// as the agent's DeviceAllocationSource: List (what each container holds) and
// GetAllocatableResources (what the kubelet can hand out). gRPC and protobuf are linked only
// here and into muster-topology, never into the scheduler.

#include <chrono>
#include <string>

#include "topology/agent/allocation.h"

namespace muster::topology {

struct PodResourcesOptions {
  std::string socket_path = std::string(kDefaultPodResourcesSocket);
  std::chrono::milliseconds timeout{10000};  // per call
};

// Connects lazily, on the first read(), and keeps the channel (gRPC reconnects by itself when the
// kubelet restarts). read() fails with a message for a person when the socket is missing, is not
// a socket, cannot be opened (it is root's) or the kubelet does not answer; a kubelet without
// GetAllocatableResources (Unimplemented) gives DeviceAllocations::allocatable = nullopt.
DeviceAllocationSourcePtr makePodResourcesClient(PodResourcesOptions options);

}  // namespace muster::topology
