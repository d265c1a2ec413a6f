#include "scheduler/config.h"
#include "scheduler/strings.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/selector.h"

namespace muster::scheduler {
namespace {

absl::Status bad(std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(av(key), ": ", av(what)));
}

std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return absl::StrCat("\"", n.Scalar(), "\"");
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "null";
}

absl::Status readInt(const YAML::Node& n, std::string_view key, int64_t* out) {
  if (!n.IsScalar() || !proto::parseInt64(n.Scalar(), out)) {
    return bad(key, absl::StrCat("must be an integer, got ", describe(n)));
  }
  return absl::OkStatus();
}

absl::Status readDouble(const YAML::Node& n, std::string_view key, double* out) {
  if (!n.IsScalar() || !absl::SimpleAtod(n.Scalar(), out)) {
    return bad(key, absl::StrCat("must be a number, got ", describe(n)));
  }
  return absl::OkStatus();
}

absl::Status readBool(const YAML::Node& n, std::string_view key, bool* out) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") {
      *out = true;
      return absl::OkStatus();
    }
    if (s == "false" || s == "False" || s == "FALSE") {
      *out = false;
      return absl::OkStatus();
    }
  }
  return bad(key, absl::StrCat("must be true or false, got ", describe(n)));
}

absl::Status readString(const YAML::Node& n, std::string_view key, std::string* out) {
  if (!n.IsScalar()) return bad(key, absl::StrCat("must be a string, got ", describe(n)));
  *out = n.Scalar();
  return absl::OkStatus();
}

absl::Status readStrings(const YAML::Node& n, std::string_view key, std::vector<std::string>* out) {
  if (!n.IsSequence()) return bad(key, absl::StrCat("must be a list of strings, got ", describe(n)));
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    if (absl::Status st = readString(n[i], absl::StrCat(av(key), "[", i, "]"), &s); !st.ok()) return st;
    out->push_back(std::move(s));
  }
  return absl::OkStatus();
}

using Reader = std::function<absl::Status(const YAML::Node&, const std::string& key)>;

// Visits each key of a mapping with the reader registered for it; unknown keys are an error.
absl::Status readMap(const YAML::Node& n, const std::string& prefix,
                     const std::vector<std::pair<std::string, Reader>>& readers) {
  std::string where = prefix.empty() ? "config" : prefix;
  if (n.IsNull()) return absl::OkStatus();
  if (!n.IsMap()) return bad(where, absl::StrCat("must be a mapping, got ", describe(n)));
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return bad(where, "keys must be strings");
    const std::string& name = it->first.Scalar();
    std::string key = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
    bool found = false;
    for (const auto& [known, reader] : readers) {
      if (known != name) continue;
      found = true;
      if (absl::Status s = reader(it->second, key); !s.ok()) return s;
      break;
    }
    if (!found) {
      std::vector<std::string> names;
      for (const auto& r : readers) names.push_back(r.first);
      return bad(key, absl::StrCat("unknown key (known keys here: ", absl::StrJoin(names, ", "),
                                   ")"));
    }
  }
  return absl::OkStatus();
}

Reader intInto(int64_t* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readInt(n, key, out); };
}
Reader boolInto(bool* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readBool(n, key, out); };
}
Reader stringInto(std::string* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readString(n, key, out); };
}

absl::Status parseInto(const YAML::Node& root, SchedulerConfig* c) {
  LeaderElectionConfig* le = &c->leader_election;
  return readMap(
      root, "",
      {
          {"schedulerNames",
           [c](const YAML::Node& n, const std::string& key) {
             return readStrings(n, key, &c->scheduler_names);
           }},
          {"topologyLevels",
           [c](const YAML::Node& n, const std::string& key) {
             return readStrings(n, key, &c->topology_levels);
           }},
          {"singlePodStrategy",
           [c](const YAML::Node& n, const std::string& key) -> absl::Status {
             std::string s;
             if (absl::Status st = readString(n, key, &s); !st.ok()) return st;
             if (s == "pack") {
               c->single_pod_strategy = SinglePodStrategy::kPack;
             } else if (s == "spread") {
               c->single_pod_strategy = SinglePodStrategy::kSpread;
             } else {
               return bad(key, absl::StrCat("must be pack or spread, got \"", s, "\""));
             }
             return absl::OkStatus();
           }},
          {"gang",
           [c](const YAML::Node& n, const std::string& key) {
             return readMap(n, key, {{"defaultScheduleTimeoutSeconds",
                                      intInto(&c->gang_default_schedule_timeout_seconds)}});
           }},
          {"queue",
           [c](const YAML::Node& n, const std::string& key) {
             return readMap(n, key,
                            {{"reservationAfterSeconds", intInto(&c->queue_reservation_after_seconds)},
                             {"initialBackoffSeconds", intInto(&c->queue_initial_backoff_seconds)},
                             {"maxBackoffSeconds", intInto(&c->queue_max_backoff_seconds)}});
           }},
          {"client",
           [c](const YAML::Node& n, const std::string& key) {
             return readMap(n, key,
                            {{"qps",
                              [c](const YAML::Node& v, const std::string& k) {
                                return readDouble(v, k, &c->client_qps);
                              }},
                             {"burst", intInto(&c->client_burst)}});
           }},
          {"metricsBindAddress", stringInto(&c->metrics_bind_address)},
          {"leaderElection",
           [le](const YAML::Node& n, const std::string& key) {
             return readMap(n, key,
                            {{"enabled", boolInto(&le->enabled)},
                             {"leaseName", stringInto(&le->lease_name)},
                             {"leaseNamespace", stringInto(&le->lease_namespace)},
                             {"leaseDurationSeconds", intInto(&le->lease_duration_seconds)},
                             {"renewDeadlineSeconds", intInto(&le->renew_deadline_seconds)},
                             {"retryPeriodSeconds", intInto(&le->retry_period_seconds)}});
           }},
          {"jobEngine",
           [c](const YAML::Node& n, const std::string& key) {
             return readMap(n, key, {{"enabled", boolInto(&c->job_engine_enabled)}});
           }},
          {"events",
           [c](const YAML::Node& n, const std::string& key) {
             return readMap(n, key,
                            {{"maxPerGangPerMinute", intInto(&c->events_max_per_gang_per_minute)}});
           }},
      });
}

absl::Status positive(std::string_view key, int64_t v) {
  if (v <= 0) return bad(key, absl::StrCat("must be positive, got ", v));
  return absl::OkStatus();
}

absl::Status nonNegative(std::string_view key, int64_t v) {
  if (v < 0) return bad(key, absl::StrCat("must not be negative, got ", v));
  return absl::OkStatus();
}

// host:port with a numeric port 0..65535 (0: any free port; an IPv6 host in brackets).
absl::Status validateAddress(std::string_view key, const std::string& address) {
  size_t colon = address.rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos ||
      !proto::parseInt64(std::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return bad(key, absl::StrCat("must be host:port with a port in 0..65535, got \"", address,
                                 "\""));
  }
  return absl::OkStatus();
}

}  // namespace

int SchedulerConfig::levelIndex(std::string_view key) const {
  for (size_t i = 0; i < topology_levels.size(); ++i) {
    if (topology_levels[i] == key) return static_cast<int>(i);
  }
  if (key == kHostnameLevel) return static_cast<int>(topology_levels.size());
  return -1;
}

std::string_view SchedulerConfig::levelKey(int index) const {
  if (index >= 0 && index < static_cast<int>(topology_levels.size())) return topology_levels[index];
  return kHostnameLevel;
}

bool SchedulerConfig::handlesSchedulerName(std::string_view name) const {
  for (const std::string& n : scheduler_names) {
    if (n == name) return true;
  }
  return false;
}

absl::Status validateConfig(const SchedulerConfig& c) {
  if (c.scheduler_names.empty()) return bad("schedulerNames", "must name at least one scheduler");
  std::set<std::string> seen;
  for (size_t i = 0; i < c.scheduler_names.size(); ++i) {
    const std::string& n = c.scheduler_names[i];
    std::string key = absl::StrCat("schedulerNames[", i, "]");
    if (n.empty()) return bad(key, "must not be empty");
    if (!seen.insert(n).second) return bad(key, absl::StrCat("\"", n, "\" is listed twice"));
  }
  if (c.topology_levels.size() > static_cast<size_t>(kMaxTopologyLevels)) {
    return bad("topologyLevels", absl::StrCat("at most ", kMaxTopologyLevels, " levels, got ",
                                              c.topology_levels.size()));
  }
  seen.clear();
  for (size_t i = 0; i < c.topology_levels.size(); ++i) {
    const std::string& l = c.topology_levels[i];
    std::string key = absl::StrCat("topologyLevels[", i, "]");
    if (l.empty()) return bad(key, "must be a node label key, got an empty string");
    if (l == kHostnameLevel) {
      return bad(key, absl::StrCat(av(kHostnameLevel),
                                   " is the implicit bottom level; list only the levels above it"));
    }
    if (!seen.insert(l).second) return bad(key, absl::StrCat("\"", l, "\" is listed twice"));
  }
  if (absl::Status s = nonNegative("gang.defaultScheduleTimeoutSeconds",
                                   c.gang_default_schedule_timeout_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = positive("queue.reservationAfterSeconds", c.queue_reservation_after_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = positive("queue.initialBackoffSeconds", c.queue_initial_backoff_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = positive("queue.maxBackoffSeconds", c.queue_max_backoff_seconds); !s.ok()) {
    return s;
  }
  if (c.queue_max_backoff_seconds < c.queue_initial_backoff_seconds) {
    return bad("queue.maxBackoffSeconds",
               absl::StrCat("must be at least queue.initialBackoffSeconds (",
                            c.queue_initial_backoff_seconds, "), got ", c.queue_max_backoff_seconds));
  }
  if (!(c.client_qps >= 0)) return bad("client.qps", "must not be negative");
  if (absl::Status s = nonNegative("client.burst", c.client_burst); !s.ok()) return s;
  if (absl::Status s = validateAddress("metricsBindAddress", c.metrics_bind_address); !s.ok()) {
    return s;
  }
  const LeaderElectionConfig& le = c.leader_election;
  if (le.enabled) {
    if (le.lease_name.empty()) return bad("leaderElection.leaseName", "must not be empty");
    if (le.lease_namespace.empty()) return bad("leaderElection.leaseNamespace", "must not be empty");
  }
  if (absl::Status s = positive("leaderElection.leaseDurationSeconds", le.lease_duration_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = positive("leaderElection.renewDeadlineSeconds", le.renew_deadline_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = positive("leaderElection.retryPeriodSeconds", le.retry_period_seconds);
      !s.ok()) {
    return s;
  }
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
  if (absl::Status s = positive("events.maxPerGangPerMinute", c.events_max_per_gang_per_minute);
      !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<SchedulerConfig> parseConfig(std::string_view yaml) {
  SchedulerConfig config;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (absl::Status s = parseInto(root, &config); !s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config is not valid YAML: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config could not be read: ", e.what()));
  }
  if (absl::Status s = validateConfig(config); !s.ok()) return s;
  return config;
}

absl::StatusOr<SchedulerConfig> loadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<SchedulerConfig> config = parseConfig(text.str());
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace muster::scheduler
