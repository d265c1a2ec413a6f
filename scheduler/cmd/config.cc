#include "scheduler/cmd/config.h"

#include "absl/strings/str_cat.h"
#include "proto/config_reader.h"

namespace muster::cmd {

namespace cfg = proto::config;

namespace {

cfg::Keys processKeys(ProcessConfig* c) {
  LeaderElectionConfig* le = &c->leader_election;
  return {
      {"client", cfg::mapInto({{"qps", cfg::doubleInto(&c->client_qps)},
                          {"burst", cfg::intInto(&c->client_burst)},
                          {"maxConnections", cfg::intInto(&c->client_max_connections)}})},
      {"metricsBindAddress", cfg::stringInto(&c->metrics_bind_address)},
      {"leaderElection", cfg::mapInto({{"enabled", cfg::boolInto(&le->enabled)},
                                  {"leaseName", cfg::stringInto(&le->lease_name)},
                                  {"leaseNamespace", cfg::stringInto(&le->lease_namespace)},
                                  {"leaseDurationSeconds", cfg::intInto(&le->lease_duration_seconds)},
                                  {"renewDeadlineSeconds", cfg::intInto(&le->renew_deadline_seconds)},
                                  {"retryPeriodSeconds", cfg::intInto(&le->retry_period_seconds)}})},
      {"events",
       cfg::mapInto({{"maxPerGangPerMinute", cfg::intInto(&c->events_max_per_object_per_minute)},
                     {"scheduled",
                      [c](const YAML::Node& n, const std::string& key) -> absl::Status {
                        std::string s;
                        if (absl::Status st = cfg::readString(n, key, &s); !st.ok()) return st;
                        if (s != "gang" && s != "pod")
                          return cfg::bad(key, absl::StrCat("must be gang or pod, got \"", s, "\""));
                        c->scheduler.scheduled_events_per_pod = s == "pod";
                        return absl::OkStatus();
                      }}})},
  };
}

}  // namespace

absl::Status validateProcessConfig(const ProcessConfig& c) {
  if (absl::Status s = scheduler::validateConfig(c.scheduler); !s.ok()) return s;
  if (absl::Status s = jobengine::validateJobEngineConfig(c.job_engine); !s.ok()) return s;
  if (!(c.client_qps >= 0)) return cfg::bad("client.qps", "must not be negative");
  if (absl::Status s = cfg::nonNegative("client.burst", c.client_burst); !s.ok())
    return s;
  if (absl::Status s = cfg::positive("client.maxConnections", c.client_max_connections); !s.ok())
    return s;
  if (c.client_max_connections > 1024)
    return cfg::bad("client.maxConnections",
                    absl::StrCat("must be at most 1024, got ", c.client_max_connections));
  if (absl::Status s = cfg::validateAddress("metricsBindAddress", c.metrics_bind_address);
      !s.ok())
    return s;
  const LeaderElectionConfig& le = c.leader_election;
  if (le.enabled) {
    if (le.lease_name.empty()) return cfg::bad("leaderElection.leaseName", "must not be empty");
    if (le.lease_namespace.empty()) return cfg::bad("leaderElection.leaseNamespace", "must not be empty");
  }
  if (absl::Status s = cfg::positive("leaderElection.leaseDurationSeconds", le.lease_duration_seconds);
      !s.ok())
    return s;
  if (absl::Status s = cfg::positive("leaderElection.renewDeadlineSeconds", le.renew_deadline_seconds);
      !s.ok())
    return s;
  if (absl::Status s = cfg::positive("leaderElection.retryPeriodSeconds", le.retry_period_seconds);
      !s.ok())
    return s;
  if (le.lease_duration_seconds <= le.renew_deadline_seconds) {
    return cfg::bad("leaderElection.leaseDurationSeconds",
               absl::StrCat("must be greater than renewDeadlineSeconds (", le.renew_deadline_seconds,
                            "), got ", le.lease_duration_seconds));
  }
  if (le.renew_deadline_seconds <= le.retry_period_seconds) {
    return cfg::bad("leaderElection.renewDeadlineSeconds",
               absl::StrCat("must be greater than retryPeriodSeconds (", le.retry_period_seconds,
                            "), got ", le.renew_deadline_seconds));
  }
  if (absl::Status s = cfg::positive("events.maxPerGangPerMinute", c.events_max_per_object_per_minute);
      !s.ok())
    return s;
  return absl::OkStatus();
}

absl::StatusOr<ProcessConfig> parseProcessConfig(std::string_view yaml) {
  ProcessConfig config;
  cfg::Keys keys = processKeys(&config);
  for (auto& k : scheduler::schedulerConfigKeys(&config.scheduler)) keys.push_back(std::move(k));
  for (auto& k : jobengine::jobEngineConfigKeys(&config.job_engine)) keys.push_back(std::move(k));
  if (absl::Status s = cfg::readDocument(yaml, keys); !s.ok()) return s;
  if (absl::Status s = validateProcessConfig(config); !s.ok()) return s;
  return config;
}

absl::StatusOr<ProcessConfig> loadProcessConfig(const std::string& path) {
  absl::StatusOr<std::string> text = cfg::readFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<ProcessConfig> config = parseProcessConfig(*text);
  if (!config.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  return config;
}

}  // namespace muster::cmd
