#include "scheduler/config.h"

#include <catch2/catch.hpp>

// The scheduler's own keys (the whole file is tested in tests/scheduler/cmd/config_test.cc).

namespace muster::scheduler {
namespace {

std::string errorOf(const std::string& yaml) {
  absl::StatusOr<SchedulerConfig> c = parseConfig(yaml);
  REQUIRE_FALSE(c.ok());
  return std::string(c.status().message());
}

TEST_CASE("the scheduler's keys alone are a valid config, and nothing else is", "[config]") {
  absl::StatusOr<SchedulerConfig> c = parseConfig(R"(
schedulerNames: [muster-scheduler, gpu-scheduler]
topologyLevels: [muster.dev/block, muster.dev/rack]
singlePodStrategy: spread
gang: {defaultScheduleTimeoutSeconds: 600}
queue: {reservationAfterSeconds: 120, initialBackoffSeconds: 2, maxBackoffSeconds: 30,
        waitingEventAfterSeconds: 90, waitingConditionAfterSeconds: 0}
)");
  REQUIRE(c.ok());
  CHECK(c->queue_waiting_event_after_seconds == 90);
  CHECK(c->queue_waiting_condition_after_seconds == 0);
  CHECK(SchedulerConfig{}.queue_waiting_condition_after_seconds == 5);
  CHECK(errorOf("queue: {waitingConditionAfterSeconds: -1}") ==
        "queue.waitingConditionAfterSeconds: must not be negative, got -1");
  CHECK(c->levelIndex("muster.dev/rack") == 1);
  CHECK(c->levelKey(2) == "kubernetes.io/hostname");
  CHECK(c->gang_default_schedule_timeout_seconds == 600);
  CHECK(errorOf("leaderElection: {enabled: false}").find("leaderElection: unknown key") !=
        std::string::npos);
}

TEST_CASE("preemption's keys: bands of minimum runtime by priority, and what is refused",
          "[config]") {
  absl::StatusOr<SchedulerConfig> c = parseConfig(R"(
preemption:
  enabled: true
  protectedPriority: 100000
  minRuntime: [{priority: 1000, seconds: 3600}, {priority: 0, seconds: 300}]
  victimCooldownSeconds: 60
  nominationTimeoutSeconds: 120
)");
  REQUIRE(c.ok());
  CHECK(c->preemption_protected_priority == 100000);
  CHECK(c->minRuntimeSeconds(-5) == 0);
  CHECK(c->minRuntimeSeconds(0) == 300);
  CHECK(c->minRuntimeSeconds(999) == 300);
  CHECK(c->minRuntimeSeconds(5000) == 3600);
  CHECK(c->preemption_victim_cooldown_seconds == 60);
  CHECK(SchedulerConfig{}.preemption_enabled);
  CHECK_FALSE(parseConfig("preemption: {enabled: false}")->preemption_enabled);
  CHECK(errorOf("preemption: {minRuntime: [{priority: 1, seconds: -1}]}") ==
        "preemption.minRuntime[0].seconds: must not be negative, got -1");
  CHECK(errorOf("preemption: {minRuntime: [{priority: 1, secs: 5}]}").find(
            "preemption.minRuntime[0].secs: unknown key") != std::string::npos);
  CHECK(errorOf("preemption: {nominationTimeoutSeconds: 0}") ==
        "preemption.nominationTimeoutSeconds: must be positive, got 0");
}

TEST_CASE("volume binding's timeout: 600 s unless set, and positive", "[config]") {
  CHECK(SchedulerConfig{}.volume_binding_timeout_seconds == 600);
  CHECK(parseConfig("volumeBinding: {timeoutSeconds: 90}")->volume_binding_timeout_seconds == 90);
  CHECK(errorOf("volumeBinding: {timeoutSeconds: 0}") ==
        "volumeBinding.timeoutSeconds: must be positive, got 0");
  CHECK(errorOf("volumeBinding: {timeout: 5}").find("volumeBinding.timeout: unknown key") !=
        std::string::npos);
}

TEST_CASE("default spread constraints: kube-scheduler's System ones unless a List is given",
          "[config]") {
  const auto system = SchedulerConfig{}.defaultSpread();
  REQUIRE(system.size() == 2);
  CHECK(system[0] == SchedulerConfig::DefaultSpread{3, "kubernetes.io/hostname", "ScheduleAnyway"});
  CHECK(system[1] == SchedulerConfig::DefaultSpread{5, "topology.kubernetes.io/zone", "ScheduleAnyway"});
  auto list = parseConfig(
      "podTopologySpread: {defaultingType: List, defaultConstraints: "
      "[{maxSkew: 1, topologyKey: muster.dev/rack, whenUnsatisfiable: DoNotSchedule}]}");
  REQUIRE(list.ok());
  CHECK(list->defaultSpread() ==
        std::vector<SchedulerConfig::DefaultSpread>{{1, "muster.dev/rack", "DoNotSchedule"}});
  CHECK(parseConfig("podTopologySpread: {defaultingType: List}")->defaultSpread().empty());
  CHECK(errorOf("podTopologySpread: {defaultingType: Cluster}") ==
        "podTopologySpread.defaultingType: must be System or List, got \"Cluster\"");
  CHECK(errorOf("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: k, "
                "whenUnsatisfiable: DoNotSchedule}]}")
            .find("podTopologySpread.defaultConstraints: must be empty with defaultingType System") !=
        std::string::npos);
  CHECK(errorOf("podTopologySpread: {defaultingType: List, defaultConstraints: [{maxSkew: 0, "
                "topologyKey: k, whenUnsatisfiable: DoNotSchedule}]}") ==
        "podTopologySpread.defaultConstraints[0].maxSkew: must be a positive integer, got 0");
  CHECK(errorOf("podTopologySpread: {defaultingType: List, defaultConstraints: [{maxSkew: 1, "
                "topologyKey: k, whenUnsatisfiable: Sometimes}]}") ==
        "podTopologySpread.defaultConstraints[0].whenUnsatisfiable: must be DoNotSchedule or "
        "ScheduleAnyway, got \"Sometimes\"");
}

TEST_CASE("a scheduler config built in code is validated the same way", "[config]") {
  SchedulerConfig c;
  c.topology_levels = {"rack", "rack"};
  CHECK(validateConfig(c).message() == "topologyLevels[1]: \"rack\" is listed twice");
  c.topology_levels = {"rack"};
  c.queue_max_backoff_seconds = 0;
  CHECK(validateConfig(c).message() == "queue.maxBackoffSeconds: must be positive, got 0");
}

}  // namespace
}  // namespace muster::scheduler
