#include "scheduler/config.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "scheduler/strings.h"

namespace muster::scheduler {

namespace cfg = proto::config;


namespace {

// preemption.minRuntime: a list of {priority, seconds}, kept sorted by priority.
cfg::Reader minRuntimeInto(std::vector<SchedulerConfig::MinRuntimeBand>* out) {
  return [out](const YAML::Node& n, const std::string& key) -> absl::Status {
    out->clear();
    if (n.IsNull()) return absl::OkStatus();
    if (!n.IsSequence())
      return cfg::bad(key, absl::StrCat("must be a list of {priority, seconds}, got ", cfg::describe(n)));
    for (size_t i = 0; i < n.size(); ++i) {
      SchedulerConfig::MinRuntimeBand band;
      const std::string at = absl::StrCat(key, "[", i, "]");
      if (absl::Status s = cfg::readMap(n[i], at,
                                        {{"priority", cfg::intInto(&band.priority)},
                                         {"seconds", cfg::intInto(&band.seconds)}});
          !s.ok()) {
        return s;
      }
      out->push_back(band);
    }
    std::sort(out->begin(), out->end(),
              [](const auto& a, const auto& b) { return a.priority < b.priority; });
    return absl::OkStatus();
  };
}

// podTopologySpread.defaultConstraints: a list of {maxSkew, topologyKey, whenUnsatisfiable}.
cfg::Reader defaultSpreadInto(std::vector<SchedulerConfig::DefaultSpread>* out) {
  return [out](const YAML::Node& n, const std::string& key) -> absl::Status {
    out->clear();
    if (n.IsNull()) return absl::OkStatus();
    if (!n.IsSequence()) {
      return cfg::bad(key, absl::StrCat("must be a list of {maxSkew, topologyKey, whenUnsatisfiable}, got ",
                                        cfg::describe(n)));
    }
    for (size_t i = 0; i < n.size(); ++i) {
      SchedulerConfig::DefaultSpread c;
      int64_t skew = 0;
      const std::string at = absl::StrCat(key, "[", i, "]");
      if (absl::Status s = cfg::readMap(n[i], at,
                                        {{"maxSkew", cfg::intInto(&skew)},
                                         {"topologyKey", cfg::stringInto(&c.topology_key)},
                                         {"whenUnsatisfiable", cfg::stringInto(&c.when_unsatisfiable)}});
          !s.ok()) {
        return s;
      }
      if (skew < 1 || skew > INT32_MAX)
        return cfg::bad(at + ".maxSkew", absl::StrCat("must be a positive integer, got ", skew));
      if (c.topology_key.empty()) return cfg::bad(at + ".topologyKey", "must be set");
      if (c.when_unsatisfiable != "DoNotSchedule" && c.when_unsatisfiable != "ScheduleAnyway") {
        return cfg::bad(at + ".whenUnsatisfiable",
                        absl::StrCat("must be DoNotSchedule or ScheduleAnyway, got \"",
                                     c.when_unsatisfiable, "\""));
      }
      c.max_skew = static_cast<int32_t>(skew);
      out->push_back(std::move(c));
    }
    return absl::OkStatus();
  };
}

}  // namespace

std::vector<SchedulerConfig::DefaultSpread> SchedulerConfig::defaultSpread() const {
  if (spread_defaulting == SpreadDefaulting::kList) return default_spread_constraints;
  return {{3, std::string(proto::vocabulary::kHostnameLabel), "ScheduleAnyway"},
          {5, "topology.kubernetes.io/zone", "ScheduleAnyway"}};
}

cfg::Keys schedulerConfigKeys(SchedulerConfig* c) {
  return {
      {"schedulerNames", cfg::stringsInto(&c->scheduler_names)},
      {"topologyLevels", cfg::stringsInto(&c->topology_levels)},
      {"singlePodStrategy",
       [c](const YAML::Node& n, const std::string& key) -> absl::Status {
         std::string s;
         if (absl::Status st = cfg::readString(n, key, &s); !st.ok()) return st;
         if (s == "pack") {
           c->single_pod_strategy = SinglePodStrategy::kPack;
         } else if (s == "spread") {
           c->single_pod_strategy = SinglePodStrategy::kSpread;
         } else {
           return cfg::bad(key, absl::StrCat("must be pack or spread, got \"", s, "\""));
         }
         return absl::OkStatus();
       }},
      {"gang", cfg::mapInto({{"defaultScheduleTimeoutSeconds",
                         cfg::intInto(&c->gang_default_schedule_timeout_seconds)}})},
      {"queue", cfg::mapInto({{"reservationAfterSeconds", cfg::intInto(&c->queue_reservation_after_seconds)},
                         {"initialBackoffSeconds", cfg::intInto(&c->queue_initial_backoff_seconds)},
                         {"maxBackoffSeconds", cfg::intInto(&c->queue_max_backoff_seconds)},
                         {"waitingEventAfterSeconds",
                          cfg::intInto(&c->queue_waiting_event_after_seconds)},
                         {"waitingConditionAfterSeconds",
                          cfg::intInto(&c->queue_waiting_condition_after_seconds)}})},
      {"preemption",
       cfg::mapInto({{"enabled", cfg::boolInto(&c->preemption_enabled)},
                     {"protectedPriority", cfg::intInto(&c->preemption_protected_priority)},
                     {"minRuntime", minRuntimeInto(&c->preemption_min_runtime)},
                     {"victimCooldownSeconds", cfg::intInto(&c->preemption_victim_cooldown_seconds)},
                     {"nominationTimeoutSeconds",
                      cfg::intInto(&c->preemption_nomination_timeout_seconds)}})},
      {"volumeBinding",
       cfg::mapInto({{"timeoutSeconds", cfg::intInto(&c->volume_binding_timeout_seconds)}})},
      {"tenancy",
       cfg::mapInto({{"enabled", cfg::boolInto(&c->tenancy_enabled)},
                     {"defaultQueue", cfg::stringInto(&c->tenancy_default_queue)},
                     {"usageHalfLife",
                      [c](const YAML::Node& n, const std::string& key) -> absl::Status {
                        std::string s;
                        if (absl::Status st = cfg::readString(n, key, &s); !st.ok()) return st;
                        absl::Duration d;
                        if (!absl::ParseDuration(s, &d) || d < absl::ZeroDuration())
                          return cfg::bad(key, absl::StrCat("must be a duration such as 168h, got \"", s, "\""));
                        c->tenancy_usage_half_life_seconds = absl::ToInt64Seconds(d);
                        return absl::OkStatus();
                      }},
                     {"statusIntervalSeconds", cfg::intInto(&c->tenancy_status_interval_seconds)}})},
      {"podTopologySpread",
       cfg::mapInto(
           {{"defaultingType",
             [c](const YAML::Node& n, const std::string& key) -> absl::Status {
               std::string s;
               if (absl::Status st = cfg::readString(n, key, &s); !st.ok()) return st;
               if (s == "System") {
                 c->spread_defaulting = SchedulerConfig::SpreadDefaulting::kSystem;
               } else if (s == "List") {
                 c->spread_defaulting = SchedulerConfig::SpreadDefaulting::kList;
               } else {
                 return cfg::bad(key, absl::StrCat("must be System or List, got \"", s, "\""));
               }
               return absl::OkStatus();
             }},
            {"defaultConstraints", defaultSpreadInto(&c->default_spread_constraints)}})},
  };
}

int64_t SchedulerConfig::minRuntimeSeconds(int64_t priority) const {
  int64_t seconds = 0;
  for (const MinRuntimeBand& band : preemption_min_runtime) {
    if (band.priority <= priority) seconds = band.seconds;
  }
  return seconds;
}

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
  if (c.scheduler_names.empty()) return cfg::bad("schedulerNames", "must name at least one scheduler");
  std::set<std::string> seen;
  for (size_t i = 0; i < c.scheduler_names.size(); ++i) {
    const std::string& n = c.scheduler_names[i];
    std::string key = absl::StrCat("schedulerNames[", i, "]");
    if (n.empty()) return cfg::bad(key, "must not be empty");
    if (!seen.insert(n).second) return cfg::bad(key, absl::StrCat("\"", n, "\" is listed twice"));
  }
  if (c.topology_levels.size() > static_cast<size_t>(kMaxTopologyLevels)) {
    return cfg::bad("topologyLevels", absl::StrCat("at most ", kMaxTopologyLevels, " levels, got ",
                                              c.topology_levels.size()));
  }
  seen.clear();
  for (size_t i = 0; i < c.topology_levels.size(); ++i) {
    const std::string& l = c.topology_levels[i];
    std::string key = absl::StrCat("topologyLevels[", i, "]");
    if (l.empty()) return cfg::bad(key, "must be a node label key, got an empty string");
    if (l == kHostnameLevel) {
      return cfg::bad(key, absl::StrCat(av(kHostnameLevel),
                                   " is the implicit bottom level; list only the levels above it"));
    }
    if (!seen.insert(l).second) return cfg::bad(key, absl::StrCat("\"", l, "\" is listed twice"));
  }
  if (absl::Status s = cfg::nonNegative("gang.defaultScheduleTimeoutSeconds",
                                   c.gang_default_schedule_timeout_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("tenancy.statusIntervalSeconds", c.tenancy_status_interval_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("queue.reservationAfterSeconds", c.queue_reservation_after_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("queue.initialBackoffSeconds", c.queue_initial_backoff_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("queue.maxBackoffSeconds", c.queue_max_backoff_seconds); !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("queue.waitingEventAfterSeconds",
                                     c.queue_waiting_event_after_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::nonNegative("queue.waitingConditionAfterSeconds",
                                        c.queue_waiting_condition_after_seconds);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < c.preemption_min_runtime.size(); ++i) {
    if (absl::Status s = cfg::nonNegative(absl::StrCat("preemption.minRuntime[", i, "].seconds"),
                                          c.preemption_min_runtime[i].seconds);
        !s.ok()) {
      return s;
    }
    if (i > 0 && c.preemption_min_runtime[i].priority == c.preemption_min_runtime[i - 1].priority)
      return cfg::bad("preemption.minRuntime",
                      absl::StrCat("priority ", c.preemption_min_runtime[i].priority, " is listed twice"));
  }
  if (absl::Status s = cfg::nonNegative("preemption.victimCooldownSeconds",
                                        c.preemption_victim_cooldown_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("preemption.nominationTimeoutSeconds",
                                     c.preemption_nomination_timeout_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cfg::positive("volumeBinding.timeoutSeconds",
                                     c.volume_binding_timeout_seconds);
      !s.ok()) {
    return s;
  }
  if (c.spread_defaulting == SchedulerConfig::SpreadDefaulting::kSystem &&
      !c.default_spread_constraints.empty()) {
    return cfg::bad("podTopologySpread.defaultConstraints",
                    "must be empty with defaultingType System (kube-scheduler's own defaults); "
                    "set defaultingType: List to use these");
  }
  if (c.queue_max_backoff_seconds < c.queue_initial_backoff_seconds) {
    return cfg::bad("queue.maxBackoffSeconds",
               absl::StrCat("must be at least queue.initialBackoffSeconds (",
                            c.queue_initial_backoff_seconds, "), got ", c.queue_max_backoff_seconds));
  }
  return absl::OkStatus();
}

absl::StatusOr<SchedulerConfig> parseConfig(std::string_view yaml) {
  SchedulerConfig config;
  if (absl::Status s = cfg::readDocument(yaml, schedulerConfigKeys(&config)); !s.ok())
    return s;
  if (absl::Status s = validateConfig(config); !s.ok()) return s;
  return config;
}

absl::StatusOr<SchedulerConfig> loadConfig(const std::string& path) {
  absl::StatusOr<std::string> text = cfg::readFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<SchedulerConfig> config = parseConfig(*text);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace muster::scheduler
