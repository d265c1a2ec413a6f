#pragma once

// `muster-topology agent`: publishes the node's NodeTopology (named after the node) and a few
// node labels, and keeps them current. Writes happen only when the facts changed. Where the
// kubelet's pod-resources API can be read, the NodeTopology also lists the devices no pod holds
// (spec.allocatable).

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/client.h"
#include "proto/nodetopology.h"
#include "topology/agent/allocation.h"
#include "topology/model/topology.h"

namespace muster::topology {

namespace vocab = proto::vocabulary;  // the names Muster uses on API objects

inline constexpr std::string_view kAgentVersion = "muster-topology v0.1.0";

// Node labels the agent owns.

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

// The agent's schedule, with discovery, the API writes, the kubelet and the clock as seams, so
// tests drive it one step at a time:
// - every `interval`: discover the topology and publish it (publish() writes only what changed);
// - with a DeviceAllocationSource, every `allocation_interval` as well: read which devices pods
//   hold and publish again only when the free devices changed, so a poll costs the API server
//   nothing. Without a source, or while it cannot be read, spec.allocatable is absent; a kind
//   whose device ids cannot be mapped has no free list (see freeDevices). The reason is logged
//   once, when it changes.
// A failed discovery or publish is retried after 1 s, doubling, at most `interval`.
// Not thread-safe: step() is called from one thread.
class AgentLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using DiscoverFn = std::function<absl::StatusOr<Topology>()>;
  using PublishFn = std::function<absl::StatusOr<PublishResult>(const Topology&)>;

  struct Options {
    std::chrono::seconds interval{60};
    std::chrono::seconds allocation_interval{5};
    DeviceMapping mapping;
    // Re-read at each discovery (readNvidiaProcGpus) into mapping.gpu_uuid_to_bus.
    std::string proc_root = "/proc";
    // Why there is no source, logged once (e.g. "--pod-resources-socket is empty").
    std::string no_source_reason = "the kubelet's pod-resources API is not read";
  };

  struct Step {
    absl::Status status;                 // the discovery's or the publish's error
    std::optional<PublishResult> result; // set when publish() ran and succeeded
    Clock::time_point next;              // when step() wants to run again
  };

  // `source` may be null: then nothing free is ever published.
  AgentLoop(Options options, DiscoverFn discover, PublishFn publish,
            DeviceAllocationSourcePtr source);

  // Does what is due at `now`.
  Step step(Clock::time_point now);

  // The last discovered topology (without allocatable); nullopt before the first discovery.
  const std::optional<Topology>& topology() const { return topology_; }
  // The free devices last read (what the last successful publish carried, unless it failed).
  const std::optional<FreeDevices>& currentFree() const { return free_; }
  // Why free devices are not (all) published; "" when they are.
  const std::string& allocationNote() const { return note_; }

 private:
  void readAllocations();

  Options options_;
  DiscoverFn discover_;
  PublishFn publish_;
  DeviceAllocationSourcePtr source_;
  std::optional<Topology> topology_;  // the last discovery, without allocatable
  std::optional<FreeDevices> free_;
  std::optional<FreeDevices> published_free_;
  bool dirty_ = true;  // nothing published yet, or the last publish failed
  bool noted_ = false;
  std::string note_;
  Clock::time_point next_discovery_{};
  Clock::time_point next_poll_{};
  std::chrono::seconds backoff_{1};
};

}  // namespace muster::topology
