#include "proto/objects.h"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "proto/codec.h"

namespace muster::proto {
namespace {

// Builders: toleration("gpu").exists().effect("NoSchedule"), taint("gpu", "present", "NoSchedule").
struct TolerationBuilder {
  Toleration t;
  TolerationBuilder& equals(std::string value) {
    t.operator_ = "Equal";
    t.value = std::move(value);
    return *this;
  }
  TolerationBuilder& exists() {
    t.operator_ = "Exists";
    return *this;
  }
  TolerationBuilder& op(std::string name) {
    t.operator_ = std::move(name);
    return *this;
  }
  TolerationBuilder& compare(std::string name, std::string value) {
    t.operator_ = std::move(name);
    t.value = std::move(value);
    return *this;
  }
  TolerationBuilder& effect(std::string e) {
    t.effect = std::move(e);
    return *this;
  }
  operator Toleration() const { return t; }  // NOLINT: builder
};

TolerationBuilder toleration(std::string key = "") {
  TolerationBuilder b;
  b.t.key = std::move(key);
  return b;
}

Taint taint(std::string key, std::string value, std::string effect) {
  return Taint{std::move(key), std::move(value), std::move(effect)};
}

const Taint kGpuTaint = taint("nvidia.com/gpu", "present", "NoSchedule");

TEST_CASE("an Equal toleration needs the same key, value and effect", "[objects]") {
  CHECK(tolerates(toleration("nvidia.com/gpu").equals("present").effect("NoSchedule"), kGpuTaint));
  CHECK_FALSE(
      tolerates(toleration("nvidia.com/gpu").equals("absent").effect("NoSchedule"), kGpuTaint));
  CHECK_FALSE(tolerates(toleration("other").equals("present").effect("NoSchedule"), kGpuTaint));
  CHECK_FALSE(
      tolerates(toleration("nvidia.com/gpu").equals("present").effect("NoExecute"), kGpuTaint));
}

TEST_CASE("an empty operator means Equal", "[objects]") {
  CHECK(tolerates(toleration("nvidia.com/gpu").compare("", "present"), kGpuTaint));
  CHECK_FALSE(tolerates(toleration("nvidia.com/gpu").op(""), kGpuTaint));
}

TEST_CASE("an Exists toleration matches any value of its key", "[objects]") {
  CHECK(tolerates(toleration("nvidia.com/gpu").exists(), kGpuTaint));
  CHECK(tolerates(toleration("nvidia.com/gpu").exists().effect("NoSchedule"), kGpuTaint));
  CHECK_FALSE(tolerates(toleration("other").exists(), kGpuTaint));
}

TEST_CASE("an empty key with Exists tolerates every taint", "[objects]") {
  CHECK(tolerates(toleration().exists(), kGpuTaint));
  CHECK(tolerates(toleration().exists(), taint("node.kubernetes.io/unreachable", "", "NoExecute")));
  CHECK_FALSE(tolerates(toleration().exists().effect("NoExecute"), kGpuTaint));
}

TEST_CASE("an empty effect tolerates every effect", "[objects]") {
  CHECK(tolerates(toleration("k").equals("v"), taint("k", "v", "NoSchedule")));
  CHECK(tolerates(toleration("k").equals("v"), taint("k", "v", "PreferNoSchedule")));
  CHECK(tolerates(toleration("k").equals("v"), taint("k", "v", "NoExecute")));
}

TEST_CASE("Gt and Lt tolerations tolerate nothing while their feature gate is off", "[objects]") {
  CHECK_FALSE(tolerates(toleration("gpus").compare("Gt", "4"), taint("gpus", "8", "NoSchedule")));
  CHECK_FALSE(tolerates(toleration("gpus").compare("Lt", "16"), taint("gpus", "8", "NoSchedule")));
  CHECK_FALSE(tolerates(toleration("k").op("Bogus"), taint("k", "", "NoSchedule")));
}

TEST_CASE("a node's untolerated NoSchedule or NoExecute taint is found", "[objects]") {
  std::vector<Taint> taints = {taint("maintenance", "", "PreferNoSchedule"), kGpuTaint,
                               taint("rdma", "down", "NoExecute")};
  const Taint* blocking = findUntoleratedTaint(taints, {});
  REQUIRE(blocking != nullptr);
  CHECK(blocking->key == "nvidia.com/gpu");

  blocking = findUntoleratedTaint(taints, {toleration("nvidia.com/gpu").exists()});
  REQUIRE(blocking != nullptr);
  CHECK(blocking->key == "rdma");

  CHECK(findUntoleratedTaint(taints, {toleration("nvidia.com/gpu").exists(),
                                      toleration("rdma").equals("down").effect("NoExecute")}) ==
        nullptr);
  CHECK(findUntoleratedTaint(taints, {toleration().exists()}) == nullptr);
  CHECK(findUntoleratedTaint({}, {}) == nullptr);
}

TEST_CASE("a node is ready only when its Ready condition is True", "[objects]") {
  Node node;
  CHECK_FALSE(node.isReady());
  node.status.conditions = {{"MemoryPressure", "False", "", ""},
                            {"Ready", "True", "KubeletReady", ""}};
  CHECK(node.isReady());
  node.status.conditions[1].status = "Unknown";
  CHECK_FALSE(node.isReady());
  node.status.conditions[1].status = "False";
  CHECK_FALSE(node.isReady());
}

TEST_CASE("the controller owner reference is the one marked controller", "[objects]") {
  ObjectMeta meta;
  CHECK(meta.controllerRef() == nullptr);
  meta.owner_references = {{"v1", "ConfigMap", "cm", "u1", false, false},
                           {"batch/v1", "Job", "train", "u2", true, true}};
  REQUIRE(meta.controllerRef() != nullptr);
  CHECK(meta.controllerRef()->name == "train");
}

TEST_CASE("value types carry Kubernetes' defaults", "[objects]") {
  CHECK(ContainerPort{}.protocol == "TCP");
  CHECK(Toleration{}.operator_ == "Equal");
  CHECK(ParallelJobSpec{}.max_restarts == 3);
  CHECK_FALSE(PodSpec{}.priority.has_value());
}

TEST_CASE("decoded defaults apply when fields are absent", "[objects]") {
  Pod pod;
  REQUIRE(decodeJson(R"({"spec":{"containers":[{"name":"c","ports":[{"containerPort":80}]}],
      "tolerations":[{"key":"k","value":"v"}]}})",
                     &pod)
              .ok());
  CHECK(pod.spec.containers[0].ports[0].protocol == "TCP");
  CHECK(pod.spec.tolerations[0].operator_ == "Equal");
  CHECK(tolerates(pod.spec.tolerations[0], taint("k", "v", "NoSchedule")));
}

TEST_CASE("a pod's conditions are found by type", "[objects]") {
  Pod pod;
  pod.status.conditions = {{"PodScheduled", "False", "Unschedulable", "no fit", ""}};
  REQUIRE(pod.findCondition("PodScheduled") != nullptr);
  CHECK(pod.findCondition("PodScheduled")->reason == "Unschedulable");
  CHECK(pod.findCondition("Ready") == nullptr);
}

TEST_CASE("pod affinity is noticed only when it has terms", "[objects]") {
  Pod pod;
  REQUIRE(decodeJson(R"({"spec":{"affinity":{"podAffinity":{},
      "podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
        {"labelSelector":{"matchLabels":{"app":"x"}},"topologyKey":"kubernetes.io/hostname"}]}}}})",
                     &pod)
              .ok());
  REQUIRE(pod.spec.affinity.has_value());
  CHECK_FALSE(pod.spec.affinity->has_pod_affinity);
  CHECK(pod.spec.affinity->has_pod_anti_affinity);
  CHECK_FALSE(pod.spec.affinity->node_affinity.required.has_value());
}

}  // namespace
}  // namespace muster::proto
