// What Muster reads from objects captured from a real kube-apiserver v1.36.3
// (testdata/captured/README.md says how they were made).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "proto/client.h"
#include "proto/codec.h"

namespace muster::proto {
namespace {

std::string readCaptured(const std::string& name) {
  std::ifstream in(std::string(MUSTER_TESTDATA_DIR) + "/" + name, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t request(const Container& c, const std::string& resource) {
  auto it = c.resources.requests.find(resource);
  return it == c.resources.requests.end() ? -1 : it->second.milliValue();
}

}  // namespace

TEST_CASE("a running GPU pod from the API server decodes with what a scheduler needs") {
  Pod pod;
  REQUIRE(decodeJson(readCaptured("captured/pod_running_gpu.json"), &pod).ok());
  CHECK(pod.meta.name == "worker-0");
  CHECK_FALSE(pod.meta.uid.empty());
  CHECK(pod.meta.labels.at("scheduling.x-k8s.io/pod-group") == "train");
  CHECK(pod.meta.annotations.at("gang-scheduling.preferred.jp/gang-size") == "2");
  CHECK(pod.spec.scheduler_name == "muster-scheduler");
  CHECK(pod.spec.node_name == "node-00001");
  REQUIRE(pod.spec.priority.has_value());
  CHECK(*pod.spec.priority == 100);  // resolved from the PriorityClass by admission
  REQUIRE(pod.spec.containers.size() == 1);
  // Limits only in the manifest: the API server defaulted requests from them.
  CHECK(request(pod.spec.containers[0], "nvidia.com/gpu") == 8000);
  CHECK(request(pod.spec.containers[0], "cpu") == 1500);
  CHECK(request(pod.spec.containers[0], "memory") == int64_t{64} * 1024 * 1024 * 1024 * 1000);
  REQUIRE(pod.spec.init_containers.size() == 1);
  CHECK(request(pod.spec.init_containers[0], "cpu") == 2000);
  REQUIRE(pod.spec.containers[0].ports.size() == 1);
  CHECK(pod.spec.containers[0].ports[0].host_port == 2222);
  REQUIRE(pod.spec.affinity.has_value());
  REQUIRE(pod.spec.affinity->node_affinity.required.has_value());
  CHECK(pod.spec.affinity->node_affinity.required->matches({{"muster.dev/rack", "rack-0000"}}, "x"));
  CHECK_FALSE(pod.spec.affinity->node_affinity.required->matches({{"muster.dev/rack", "rack-0001"}}, "x"));
  CHECK(pod.status.phase == "Running");
  REQUIRE(pod.findCondition("Ready") != nullptr);
  CHECK(pod.findCondition("Ready")->status == "True");
}

TEST_CASE("a kwok node from the API server decodes ready, with GPUs and topology labels") {
  Node node;
  REQUIRE(decodeJson(readCaptured("captured/node.json"), &node).ok());
  CHECK(node.isReady());
  CHECK(node.status.allocatable.at("nvidia.com/gpu").value() == 8);
  CHECK(node.status.allocatable.at("preferred.jp/rdma").value() == 8);
  CHECK(node.status.allocatable.at("cpu").milliValue() == 64000);
  CHECK(node.meta.labels.count("muster.dev/rack") == 1);
  CHECK(node.meta.labels.count("muster.dev/spine") == 1);
  CHECK(node.meta.labels.count("muster.dev/block") == 1);
}

TEST_CASE("the seed's ParallelJob as stored by the API server carries the CRD's defaults") {
  ParallelJob job;
  REQUIRE(decodeJson(readCaptured("captured/paralleljob.json"), &job).ok());
  CHECK(job.meta.name == "mpi-sample-job");
  CHECK(job.spec.num_pods == 3);
  CHECK(job.spec.num_proc_per_pod == 2);
  CHECK(job.spec.max_restarts == 3);
}

TEST_CASE("a PodGroup and a node Lease from the API server decode") {
  PodGroup group;
  REQUIRE(decodeJson(readCaptured("captured/podgroup.json"), &group).ok());
  CHECK(group.spec.min_member == 2);
  REQUIRE(group.spec.schedule_timeout_seconds.has_value());
  CHECK(*group.spec.schedule_timeout_seconds == 60);
  Lease lease;
  REQUIRE(decodeJson(readCaptured("captured/lease.json"), &lease).ok());
  CHECK(lease.meta.name == "node-00000");
  CHECK_FALSE(lease.spec.holder_identity.empty());  // kwok's own identity
  CHECK(lease.spec.lease_duration_seconds.value_or(0) > 0);
  CHECK_FALSE(lease.spec.renew_time.empty());
}

TEST_CASE("the API server's 404 Status body becomes a NotFound error with its message") {
  absl::Status status = apiError(404, readCaptured("status_notfound.json"), "get pod default/nope");
  CHECK(isNotFound(status));
  CHECK(httpStatusOf(status) == 404);
  CHECK(reasonOf(status) == "NotFound");
  CHECK_THAT(std::string(status.message()), Catch::Contains("pods \"nope\" not found"));
}

}  // namespace muster::proto
