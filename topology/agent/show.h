#pragma once

// `muster-topology show`: the node's topology for a person.

#include <string>

#include "topology/model/topology.h"

namespace muster::topology {

// NUMA nodes, GPUs, RDMA NICs with ports, locality groups, the best GPU↔NIC pairing per GPU, and
// warnings, as aligned text tables.
std::string formatTable(const Topology& topology);

}  // namespace muster::topology
