#include "scheduler/cmd/config.h"

#include "absl/strings/str_cat.h"
#include "proto/config_reader.h"

namespace muster::cmd {

namespace {

using proto::config::bad;
using proto::config::boolInto;
using proto::config::doubleInto;
using proto::config::intInto;
using proto::config::mapInto;
using proto::config::positive;
using proto::config::stringInto;

proto::config::Keys processKeys(ProcessConfig* c) {
  LeaderElectionConfig* le = &c->leader_election;
  return {
      {"client", mapInto({{"qps", doubleInto(&c->client_qps)},
                          {"burst", intInto(&c->client_burst)}})},
      {"metricsBindAddress", stringInto(&c->metrics_bind_address)},
      {"leaderElection", mapInto({{"enabled", boolInto(&le->enabled)},
                                  {"leaseName", stringInto(&le->lease_name)},
                                  {"leaseNamespace", stringInto(&le->lease_namespace)},
                                  {"leaseDurationSeconds", intInto(&le->lease_duration_seconds)},
                                  {"renewDeadlineSeconds", intInto(&le->renew_deadline_seconds)},
                                  {"retryPeriodSeconds", intInto(&le->retry_period_seconds)}})},
      {"events", mapInto({{"maxPerGangPerMinute",
                           intInto(&c->events_max_per_object_per_minute)}})},
  };
}

}  // namespace

absl::Status validateProcessConfig(const ProcessConfig& c) {
  if (absl::Status s = scheduler::validateConfig(c.scheduler); !s.ok()) return s;
  if (absl::Status s = jobengine::validateJobEngineConfig(c.job_engine); !s.ok()) return s;
  if (!(c.client_qps >= 0)) return bad("client.qps", "must not be negative");
  if (absl::Status s = proto::config::nonNegative("client.burst", c.client_burst); !s.ok())
    return s;
  if (absl::Status s = proto::config::validateAddress("metricsBindAddress", c.metrics_bind_address);
      !s.ok())
    return s;
  const LeaderElectionConfig& le = c.leader_election;
  if (le.enabled) {
    if (le.lease_name.empty()) return bad("leaderElection.leaseName", "must not be empty");
    if (le.lease_namespace.empty()) return bad("leaderElection.leaseNamespace", "must not be empty");
  }
  if (absl::Status s = positive("leaderElection.leaseDurationSeconds", le.lease_duration_seconds);
      !s.ok())
    return s;
  if (absl::Status s = positive("leaderElection.renewDeadlineSeconds", le.renew_deadline_seconds);
      !s.ok())
    return s;
  if (absl::Status s = positive("leaderElection.retryPeriodSeconds", le.retry_period_seconds);
      !s.ok())
    return s;
  if (le.lease_duration_seconds <= le.renew_deadline_seconds) {
    return bad("leaderElection.leaseDurationSeconds",
               absl::StrCat("must be greater than renewDeadlineSeconds (", le.renew_deadline_seconds,
                            "), got ", le.lease_duration_seconds));
  }
  if (le.renew_deadline_seconds <= le.retry_period_seconds) {
    return bad("leaderElection.renewDeadlineSeconds",
               absl::StrCat("must be greater than retryPeriodSeconds (", le.retry_period_seconds,
                            "), got ", le.renew_deadline_seconds));
  }
  if (absl::Status s = positive("events.maxPerGangPerMinute", c.events_max_per_object_per_minute);
      !s.ok())
    return s;
  return absl::OkStatus();
}

absl::StatusOr<ProcessConfig> parseProcessConfig(std::string_view yaml) {
  ProcessConfig config;
  proto::config::Keys keys = processKeys(&config);
  for (auto& k : scheduler::schedulerConfigKeys(&config.scheduler)) keys.push_back(std::move(k));
  for (auto& k : jobengine::jobEngineConfigKeys(&config.job_engine)) keys.push_back(std::move(k));
  if (absl::Status s = proto::config::readDocument(yaml, keys); !s.ok()) return s;
  if (absl::Status s = validateProcessConfig(config); !s.ok()) return s;
  return config;
}

absl::StatusOr<ProcessConfig> loadProcessConfig(const std::string& path) {
  absl::StatusOr<std::string> text = proto::config::readFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<ProcessConfig> config = parseProcessConfig(*text);
  if (!config.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  return config;
}

}  // namespace muster::cmd
