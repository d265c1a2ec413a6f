#pragma once

// muster-scheduler's configuration file (YAML): the process's own keys, read here, and the keys
// each component owns (the scheduler's: scheduler/config.h; the job engine's: jobengine/config.h),
// all in one mapping. Every key is optional; unknown keys are an error, so a typo never silently
// falls back to a default. The process's keys, at their defaults:
//
//   client:
//     qps: 0                               # API client rate limit; 0: unlimited
//     burst: 0
//     maxConnections: 64                   # keep-alive HTTPS connections for requests (binds,
//                                          #   patches, Events; watches have their own). HTTP/1.1:
//                                          #   one request in flight per connection
//   metricsBindAddress: "0.0.0.0:10259"    # plain HTTP: /metrics, /healthz, /readyz, /livez
//   leaderElection:
//     enabled: true
//     leaseName: muster-scheduler
//     leaseNamespace: kube-system
//     leaseDurationSeconds: 15
//     renewDeadlineSeconds: 10
//     retryPeriodSeconds: 2
//   events:
//     maxPerGangPerMinute: 10              # new Events per object per minute (repeats of one
//                                          # Event only raise its count)
//     scheduled: gang                      # gang: one Scheduled Event per bound gang (on its
//                                          #   PodGroup, else its first member), naming its size,
//                                          #   domain and nodes; pod: one per bound pod, as
//                                          #   kube-scheduler writes. Single pods get one either way
//
// The metrics port is kube-scheduler's (10259) but served over plain HTTP, on all addresses so that
// Prometheus and the kubelet's probes reach it through the pod IP.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "jobengine/config.h"
#include "scheduler/config.h"

namespace muster::cmd {

struct LeaderElectionConfig {
  bool enabled = true;
  std::string lease_name = "muster-scheduler";
  std::string lease_namespace = "kube-system";
  int64_t lease_duration_seconds = 15;
  int64_t renew_deadline_seconds = 10;
  int64_t retry_period_seconds = 2;
};

struct ProcessConfig {
  scheduler::SchedulerConfig scheduler;
  jobengine::JobEngineConfig job_engine;
  double client_qps = 0;
  int64_t client_burst = 0;
  int64_t client_max_connections = 64;
  std::string metrics_bind_address = "0.0.0.0:10259";
  LeaderElectionConfig leader_election;
  int64_t events_max_per_object_per_minute = 10;
};

// Parses and validates the whole file's text. InvalidArgument naming the key and what is wrong
// ("queue.maxBackoffSeconds: must be a positive integer, got \"-1\"").
absl::StatusOr<ProcessConfig> parseProcessConfig(std::string_view yaml);
// Reads and parses a file; NotFound / InvalidArgument name the path.
absl::StatusOr<ProcessConfig> loadProcessConfig(const std::string& path);
// The checks parseProcessConfig runs, for a config built in code (flags applied).
absl::Status validateProcessConfig(const ProcessConfig& config);

}  // namespace muster::cmd
