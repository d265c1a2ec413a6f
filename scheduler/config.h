#pragma once

// The scheduler's part of muster-scheduler's configuration file (YAML; the process's own keys -
// leader election, metrics, client, events, the job engine - are read by scheduler/cmd/). Every
// key is optional; unknown keys are an error. Example with every key at its default:
//
//   schedulerNames: [muster-scheduler]     # pods whose spec.schedulerName is one of these
//   topologyLevels: []                     # node label keys, top to bottom, e.g.
//                                          #   [muster.dev/block, muster.dev/spine, muster.dev/rack]
//                                          # the host (kubernetes.io/hostname) is implicit below
//   singlePodStrategy: pack                # pack | spread, for gangs of one pod
//   gang:
//     defaultScheduleTimeoutSeconds: 0     # 0: a gang waits for its members forever
//   queue:
//     reservationAfterSeconds: 300         # a gang waiting this long gets a node reservation
//     initialBackoffSeconds: 1             # per-gang retry backoff, doubling ...
//     maxBackoffSeconds: 60                # ... up to this
//     waitingEventAfterSeconds: 60         # a gang still short of members this long gets a
//                                          #   Warning Event saying how many exist
//     waitingConditionAfterSeconds: 5      # ... and, this long, a PodScheduled condition on its
//                                          #   pods (0: at once); members still arriving cost
//                                          #   no status writes before that
//   preemption:
//     enabled: true                        # a gang that does not fit may evict whole gangs of
//                                          #   strictly lower priority (scheduler/preemption.h)
//     protectedPriority: 1000000000        # pods at or above this priority are never victims
//                                          #   (1e9: every user PriorityClass below it can be;
//                                          #   system-cluster-critical and -node-critical never)
//     minRuntime: []                       # [{priority: P, seconds: S}]: a pod of priority P or
//                                          #   more (up to the next band) runs S seconds before
//                                          #   it may be preempted
//     victimCooldownSeconds: 600           # a gang preempted once is not chosen again this long
//     nominationTimeoutSeconds: 300        # the preemptor's hold on the freed room (its pods'
//                                          #   nominatedNodeName) is released after this
//   volumeBinding:
//     timeoutSeconds: 600                  # a gang's WaitForFirstConsumer claims must be bound
//                                          #   (provisioned) this soon after Muster asked, or the
//                                          #   request is withdrawn and the gang tried again
//   podTopologySpread:                     # for pods without topologySpreadConstraints, as
//                                          #   kube-scheduler's PodTopologySpreadArgs:
//     defaultingType: System               # System: ScheduleAnyway, maxSkew 3 per host and 5 per
//                                          #   topology.kubernetes.io/zone; List: the list below
//     defaultConstraints: []               # [{maxSkew, topologyKey, whenUnsatisfiable}] (List only;
//                                          #   [] with List: no defaults). Either way the pods
//                                          #   counted are those the Services, ReplicationController,
//                                          #   ReplicaSet or StatefulSet selecting the pod select;
//                                          #   a pod selected by none gets no defaults
//   tenancy:                               # queues.muster.dev (scheduler/tenancy/README.md)
//     enabled: false                       # off: no queue is read, behaviour is single-tenant
//     defaultQueue: default                # the queue of a pod whose labels and namespace
//                                          #   name none ("": such pods are in no queue)
//     usageHalfLife: 168h                  # decay of queues' usage (Slurm's
//                                          #   PriorityDecayHalfLife; h, m, s; 0: no decay)
//     statusIntervalSeconds: 10            # a Queue's status is written at most this often

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config_reader.h"
#include "proto/vocabulary.h"

namespace muster::scheduler {

// The most configured topology levels (the host level is extra).
inline constexpr int kMaxTopologyLevels = 8;
// The implicit bottom level's key, accepted in the topology annotations.
inline constexpr std::string_view kHostnameLevel = proto::vocabulary::kHostnameLabel;

enum class SinglePodStrategy { kPack, kSpread };

struct SchedulerConfig {
  std::vector<std::string> scheduler_names{"muster-scheduler"};
  std::vector<std::string> topology_levels;
  SinglePodStrategy single_pod_strategy = SinglePodStrategy::kPack;
  int64_t gang_default_schedule_timeout_seconds = 0;
  int64_t queue_reservation_after_seconds = 300;
  int64_t queue_initial_backoff_seconds = 1;
  int64_t queue_max_backoff_seconds = 60;
  int64_t queue_waiting_event_after_seconds = 60;
  int64_t queue_waiting_condition_after_seconds = 5;
  bool preemption_enabled = true;
  int64_t preemption_protected_priority = 1000000000;
  struct MinRuntimeBand {
    int64_t priority = 0;
    int64_t seconds = 0;
    friend bool operator==(const MinRuntimeBand&, const MinRuntimeBand&) = default;
  };
  std::vector<MinRuntimeBand> preemption_min_runtime;  // sorted by priority, ascending
  int64_t preemption_victim_cooldown_seconds = 600;
  int64_t preemption_nomination_timeout_seconds = 300;
  int64_t volume_binding_timeout_seconds = 600;
  bool tenancy_enabled = false;
  std::string tenancy_default_queue = "default";
  int64_t tenancy_usage_half_life_seconds = 7 * 24 * 3600;
  int64_t tenancy_status_interval_seconds = 10;
  enum class SpreadDefaulting { kSystem, kList };
  SpreadDefaulting spread_defaulting = SpreadDefaulting::kSystem;
  struct DefaultSpread {
    int32_t max_skew = 1;
    std::string topology_key;
    std::string when_unsatisfiable;
    friend bool operator==(const DefaultSpread&, const DefaultSpread&) = default;
  };
  std::vector<DefaultSpread> default_spread_constraints;  // with kList
  // The constraints a pod without its own gets (before its selector is known): kube-scheduler's
  // system defaults, or the configured list.
  std::vector<DefaultSpread> defaultSpread() const;
  // events.scheduled (the process's events key, scheduler/cmd/config.h): false ("gang") writes
  // one Scheduled Event per bound gang, true ("pod") one per bound pod as kube-scheduler does.
  // Single pods get theirs either way.
  bool scheduled_events_per_pod = false;
  // Bindings sent at once (the rest wait in the binder's queue, a few bytes each, not a request
  // and its coroutines each): the command sets it to 4 × client.maxConnections (256 by default:
  // a 256-pod gang still goes out at once, and every connection stays busy). Not a config key of
  // its own.
  int binds_in_flight = 256;
  // The minimum runtime of a pod of `priority` before it may be preempted.
  int64_t minRuntimeSeconds(int64_t priority) const;

  // The index of a topology level key: 0..topology_levels.size()-1 for configured levels,
  // topology_levels.size() for kubernetes.io/hostname, -1 for anything else.
  int levelIndex(std::string_view key) const;
  // The number of levels including the host: topology_levels.size() + 1.
  int levelCount() const { return static_cast<int>(topology_levels.size()) + 1; }
  // The key of level `index` (kubernetes.io/hostname for the host level).
  std::string_view levelKey(int index) const;
  bool handlesSchedulerName(std::string_view name) const;
};

// The top-level keys the scheduler owns, reading into *config (for the process's config file).
proto::config::Keys schedulerConfigKeys(SchedulerConfig* config);

// Parses and validates YAML text holding only the scheduler's keys. InvalidArgument naming the key and what is wrong
// ("queue.maxBackoffSeconds: must be a positive integer, got \"-1\"").
absl::StatusOr<SchedulerConfig> parseConfig(std::string_view yaml);
// Reads and parses a file; NotFound / InvalidArgument name the path.
absl::StatusOr<SchedulerConfig> loadConfig(const std::string& path);
// The checks parseConfig runs, for a config built in code.
absl::Status validateConfig(const SchedulerConfig& config);

}  // namespace muster::scheduler
