#pragma once

// muster-scheduler's configuration file (YAML). Every key is optional; unknown keys are an error,
// so a typo never silently falls back to a default. Example with every key at its default:
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
//   client:
//     qps: 0                               # API client rate limit; 0: unlimited
//     burst: 0
//   metricsBindAddress: "0.0.0.0:10259"    # plain HTTP: /metrics, /healthz, /readyz
//   leaderElection:
//     enabled: true
//     leaseName: muster-scheduler
//     leaseNamespace: kube-system
//     leaseDurationSeconds: 15
//     renewDeadlineSeconds: 10
//     retryPeriodSeconds: 2
//   jobEngine:
//     enabled: true
//   events:
//     maxPerGangPerMinute: 10              # FailedScheduling events per gang per minute
//
// The metrics port is kube-scheduler's (10259) but served over plain HTTP, on all addresses so that
// Prometheus and the kubelet's probes reach it through the pod IP.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/vocabulary.h"

namespace muster::scheduler {

// The most configured topology levels (the host level is extra).
inline constexpr int kMaxTopologyLevels = 8;
// The implicit bottom level's key, accepted in the topology annotations.
inline constexpr std::string_view kHostnameLevel = proto::vocabulary::kHostnameLabel;

enum class SinglePodStrategy { kPack, kSpread };

struct LeaderElectionConfig {
  bool enabled = true;
  std::string lease_name = "muster-scheduler";
  std::string lease_namespace = "kube-system";
  int64_t lease_duration_seconds = 15;
  int64_t renew_deadline_seconds = 10;
  int64_t retry_period_seconds = 2;
};

struct SchedulerConfig {
  std::vector<std::string> scheduler_names{"muster-scheduler"};
  std::vector<std::string> topology_levels;
  SinglePodStrategy single_pod_strategy = SinglePodStrategy::kPack;
  int64_t gang_default_schedule_timeout_seconds = 0;
  int64_t queue_reservation_after_seconds = 300;
  int64_t queue_initial_backoff_seconds = 1;
  int64_t queue_max_backoff_seconds = 60;
  double client_qps = 0;
  int64_t client_burst = 0;
  std::string metrics_bind_address = "0.0.0.0:10259";
  LeaderElectionConfig leader_election;
  bool job_engine_enabled = true;
  int64_t events_max_per_gang_per_minute = 10;

  // The index of a topology level key: 0..topology_levels.size()-1 for configured levels,
  // topology_levels.size() for kubernetes.io/hostname, -1 for anything else.
  int levelIndex(std::string_view key) const;
  // The number of levels including the host: topology_levels.size() + 1.
  int levelCount() const { return static_cast<int>(topology_levels.size()) + 1; }
  // The key of level `index` (kubernetes.io/hostname for the host level).
  std::string_view levelKey(int index) const;
  bool handlesSchedulerName(std::string_view name) const;
};

// Parses and validates YAML text. InvalidArgument naming the key and what is wrong
// ("queue.maxBackoffSeconds: must be a positive integer, got \"-1\"").
absl::StatusOr<SchedulerConfig> parseConfig(std::string_view yaml);
// Reads and parses a file; NotFound / InvalidArgument name the path.
absl::StatusOr<SchedulerConfig> loadConfig(const std::string& path);
// The checks parseConfig runs, for a config built in code.
absl::Status validateConfig(const SchedulerConfig& config);

}  // namespace muster::scheduler
