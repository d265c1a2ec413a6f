#pragma once

// `muster-topology agent`: publishes the node's NodeTopology (named after the node) and a few
// node labels, and keeps them current. Writes happen only when the facts changed.

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/client.h"
#include "proto/nodetopology.h"
#include "topology/model/topology.h"

namespace muster::topology {

inline constexpr std::string_view kAgentVersion = "muster-topology v0.1.0";

// Node labels the agent owns.
inline constexpr std::string_view kLabelGpuCount = "muster.dev/gpu.count";
inline constexpr std::string_view kLabelGpuModel = "muster.dev/gpu.model";
inline constexpr std::string_view kLabelRdmaCount = "muster.dev/rdma.count";
inline constexpr std::string_view kLabelRdmaLinkLayer = "muster.dev/rdma.link-layer";

// The labels for `topology`; nullopt = the label must be absent (no GPU model without GPUs).
std::map<std::string, std::optional<std::string>> nodeLabels(const Topology& topology);
// A label value from free text: characters outside [A-Za-z0-9._-] become '-', at most 63, begins
// and ends alphanumeric ("Tesla P100-PCIE-16GB" -> "Tesla-P100-PCIE-16GB").
std::string labelValue(std::string_view text);

// The Discovered condition for a topology ("True", reason "Discovered", counts in the message).
proto::Condition discoveredCondition(const Topology& topology);

struct PublishResult {
  bool created = false;
  bool spec_updated = false;
  bool status_updated = false;
  bool labels_updated = false;
};

// Creates or updates NodeTopology/<node_name> and the Node's labels through `client` (blocking
// calls: must not run on the client's executor thread). `now` is RFC 3339, for discoveredAt and
// the condition's lastTransitionTime when they change.
absl::StatusOr<PublishResult> publish(proto::Client& client, const Topology& topology,
                                      std::string_view node_name, std::string_view now);

// RFC 3339 UTC, seconds precision ("2026-01-15T09:30:00Z").
std::string nowRfc3339();

}  // namespace muster::topology
