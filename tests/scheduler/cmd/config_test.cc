#include "scheduler/cmd/config.h"

#include <catch2/catch.hpp>

// The whole configuration file, as an operator writes it: every component's keys in one mapping.

namespace muster::cmd {
namespace {

std::string errorOf(const std::string& yaml) {
  absl::StatusOr<ProcessConfig> c = parseProcessConfig(yaml);
  REQUIRE_FALSE(c.ok());
  return std::string(c.status().message());
}

TEST_CASE("an empty config file gives the documented defaults", "[config]") {
  absl::StatusOr<ProcessConfig> c = parseProcessConfig("");
  REQUIRE(c.ok());
  CHECK(c->scheduler.scheduler_names == std::vector<std::string>{"muster-scheduler"});
  CHECK(c->scheduler.topology_levels.empty());
  CHECK(c->scheduler.single_pod_strategy == scheduler::SinglePodStrategy::kPack);
  CHECK(c->scheduler.gang_default_schedule_timeout_seconds == 0);
  CHECK(c->scheduler.queue_reservation_after_seconds == 300);
  CHECK(c->scheduler.queue_initial_backoff_seconds == 1);
  CHECK(c->scheduler.queue_max_backoff_seconds == 60);
  CHECK(c->metrics_bind_address == "0.0.0.0:10259");
  CHECK(c->leader_election.enabled);
  CHECK(c->leader_election.lease_duration_seconds == 15);
  CHECK(c->job_engine.enabled);
  CHECK(c->job_engine.cluster_domain == "cluster.local");
  CHECK(c->events_max_per_object_per_minute == 10);
  CHECK_FALSE(c->scheduler.scheduled_events_per_pod);
  CHECK(c->client_max_connections == 64);
  CHECK(c->scheduler.levelCount() == 1);
}

TEST_CASE("a full config is read", "[config]") {
  absl::StatusOr<ProcessConfig> c = parseProcessConfig(R"(
schedulerNames: [muster-scheduler, gpu-scheduler]
topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]
singlePodStrategy: spread
gang: {defaultScheduleTimeoutSeconds: 600}
queue: {reservationAfterSeconds: 120, initialBackoffSeconds: 2, maxBackoffSeconds: 30}
client: {qps: 50.5, burst: 100, maxConnections: 64}
metricsBindAddress: "127.0.0.1:9090"
leaderElection: {enabled: false, leaseName: x, leaseNamespace: y}
jobEngine: {enabled: false, clusterDomain: k8s.example.org}
events: {maxPerGangPerMinute: 3, scheduled: pod}
)");
  REQUIRE(c.ok());
  CHECK(c->scheduler.scheduler_names.size() == 2);
  CHECK(c->scheduler.handlesSchedulerName("gpu-scheduler"));
  CHECK(c->scheduler.levelIndex("muster.dev/rack") == 2);
  CHECK(c->scheduler.levelIndex("kubernetes.io/hostname") == 3);
  CHECK(c->scheduler.levelIndex("zone") == -1);
  CHECK(c->scheduler.single_pod_strategy == scheduler::SinglePodStrategy::kSpread);
  CHECK(c->client_qps == 50.5);
  CHECK(c->client_max_connections == 64);
  CHECK(c->scheduler.queue_reservation_after_seconds == 120);
  CHECK_FALSE(c->leader_election.enabled);
  CHECK_FALSE(c->job_engine.enabled);
  CHECK(c->job_engine.cluster_domain == "k8s.example.org");
  CHECK(c->events_max_per_object_per_minute == 3);
  CHECK(c->scheduler.scheduled_events_per_pod);
}

TEST_CASE("config errors name the key and what is wrong", "[config]") {
  CHECK(errorOf("queue: {maxBackofSeconds: 5}").find("queue.maxBackofSeconds: unknown key") !=
        std::string::npos);
  CHECK(errorOf("schedulerNmes: [a]").find("schedulerNmes: unknown key") != std::string::npos);
  CHECK(errorOf("queue: {initialBackoffSeconds: abc}") ==
        "queue.initialBackoffSeconds: must be an integer, got \"abc\"");
  CHECK(errorOf("queue: {initialBackoffSeconds: 0}") ==
        "queue.initialBackoffSeconds: must be positive, got 0");
  CHECK(errorOf("queue: {initialBackoffSeconds: 10, maxBackoffSeconds: 5}")
            .find("queue.maxBackoffSeconds: must be at least") != std::string::npos);
  CHECK(errorOf("schedulerNames: [a, a]") == "schedulerNames[1]: \"a\" is listed twice");
  CHECK(errorOf("schedulerNames: []") == "schedulerNames: must name at least one scheduler");
  CHECK(errorOf("topologyLevels: [a, \"\"]").find("topologyLevels[1]: must be a node label key") !=
        std::string::npos);
  CHECK(errorOf("topologyLevels: [rack, rack]") == "topologyLevels[1]: \"rack\" is listed twice");
  CHECK(errorOf("topologyLevels: [kubernetes.io/hostname]").find("implicit bottom level") !=
        std::string::npos);
  CHECK(errorOf("singlePodStrategy: random") ==
        "singlePodStrategy: must be pack or spread, got \"random\"");
  CHECK(errorOf("leaderElection: {enabled: maybe}") ==
        "leaderElection.enabled: must be true or false, got \"maybe\"");
  CHECK(errorOf("leaderElection: {leaseDurationSeconds: 5}")
            .find("leaderElection.leaseDurationSeconds: must be greater than renewDeadlineSeconds") !=
        std::string::npos);
  CHECK(errorOf("metricsBindAddress: nowhere").find("metricsBindAddress: must be host:port") !=
        std::string::npos);
  CHECK(errorOf("gang: 5") == "gang: must be a mapping, got \"5\"");
  CHECK(errorOf("events: {maxPerGangPerMinute: 0}") ==
        "events.maxPerGangPerMinute: must be positive, got 0");
  CHECK(errorOf("client: {maxConnections: 0}") == "client.maxConnections: must be positive, got 0");
  CHECK(errorOf("client: {maxConnections: 5000}") == "client.maxConnections: must be at most 1024, got 5000");
  CHECK(errorOf("events: {scheduled: node}") == "events.scheduled: must be gang or pod, got \"node\"");
  CHECK(errorOf("[1, 2").find("not valid YAML") != std::string::npos);
  CHECK(errorOf("jobEngine: {clusterDomain: \"not a domain\"}") ==
        "jobEngine.clusterDomain: must be a DNS domain such as cluster.local, got \"not a domain\"");
  CHECK(errorOf("jobEngine: {enable: true}").find("jobEngine.enable: unknown key") !=
        std::string::npos);
}

TEST_CASE("a config file that does not exist is NotFound naming the path", "[config]") {
  absl::StatusOr<ProcessConfig> c = loadProcessConfig("/nonexistent/muster.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(c.status().message()).find("/nonexistent/muster.yaml") != std::string::npos);
}

}  // namespace
}  // namespace muster::cmd
