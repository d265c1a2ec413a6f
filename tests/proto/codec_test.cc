#include "proto/codec.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "proto/json.h"
#include "proto/objects.h"

namespace muster::proto {
namespace {

std::string readTestdata(const std::string& name) {
  std::ifstream in(std::string(MUSTER_TESTDATA_DIR) + "/" + name);
  INFO("reading testdata/" << name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename T>
T decodeTestdata(const std::string& name) {
  T out;
  absl::Status status = decodeJson(readTestdata(name), &out);
  INFO(name << ": " << status.ToString());
  REQUIRE(status.ok());
  return out;
}

// Decodes `json` as T and returns the error message ("" when it decoded).
template <typename T>
std::string decodeError(std::string_view json) {
  T out;
  absl::Status status = decodeJson(json, &out);
  if (!status.ok()) CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

Quantity q(std::string_view text) { return *Quantity::parse(text); }

TEST_CASE("a running GPU worker pod decodes from API server JSON", "[codec]") {
  Pod pod = decodeTestdata<Pod>("pod_gpu_worker.json");

  CHECK(pod.meta.name == "train-worker-1");
  CHECK(pod.meta.namespace_ == "ml");
  CHECK(pod.meta.uid == "6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d");
  CHECK(pod.meta.resource_version == "481516");
  CHECK(pod.meta.generate_name == "train-worker-");
  CHECK(pod.meta.generation == 1);
  CHECK(pod.meta.creation_timestamp == "2025-03-14T09:26:53Z");
  CHECK_FALSE(pod.meta.deletion_timestamp.has_value());
  CHECK(pod.meta.labels.at("scheduling.x-k8s.io/pod-group") == "train");
  CHECK(pod.meta.annotations.at("gang-scheduling.preferred.jp/gang-size") == "4");
  REQUIRE(pod.meta.owner_references.size() == 1);
  CHECK(pod.meta.owner_references[0].kind == "Job");
  CHECK(pod.meta.owner_references[0].controller);
  CHECK(pod.meta.owner_references[0].block_owner_deletion);
  CHECK(pod.meta.finalizers == std::vector<std::string>{"batch.kubernetes.io/job-tracking"});

  const PodSpec& spec = pod.spec;
  CHECK(spec.node_name == "gpu-node-17");
  CHECK(spec.scheduler_name == "muster-scheduler");
  CHECK(spec.priority == 100000);
  CHECK(spec.priority_class_name == "training-high");
  CHECK(spec.hostname == "train-worker-1");
  CHECK(spec.subdomain == "train");
  CHECK_FALSE(spec.host_network);
  CHECK(spec.has_topology_spread_constraints);
  CHECK(spec.node_selector.at("muster.dev/gpu-product") == "H100-SXM5-80GB");
  CHECK(spec.pvc_claim_names == std::vector<std::string>{"imagenet", "train-worker-1-scratch"});
  CHECK(spec.overhead.at("cpu").milliValue() == 250);
  CHECK(spec.overhead.at("memory") == q("120Mi"));

  REQUIRE(spec.containers.size() == 2);
  const Container& main = spec.containers[0];
  CHECK(main.name == "main");
  CHECK(main.image == "ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0");
  CHECK(main.resources.requests.at("cpu").milliValue() == 30500);
  CHECK(main.resources.requests.at("memory") == q("240Gi"));
  CHECK(main.resources.requests.at("nvidia.com/gpu").value() == 8);
  CHECK(main.resources.limits.at("preferred.jp/rdma").value() == 1);
  REQUIRE(main.ports.size() == 2);
  CHECK(main.ports[0].container_port == 22);
  CHECK(main.ports[0].host_port == 0);
  CHECK(main.ports[0].protocol == "TCP");
  CHECK(main.ports[1].host_port == 29500);
  CHECK(main.ports[1].host_ip == "0.0.0.0");
  CHECK(main.ports[1].protocol == "UDP");
  REQUIRE(spec.init_containers.size() == 2);
  CHECK(spec.init_containers[0].resources.requests.at("cpu").milliValue() == 100);
  CHECK_FALSE(spec.init_containers[0].isSidecar());
  CHECK(spec.init_containers[1].name == "log-shipper");
  CHECK(spec.init_containers[1].restart_policy == "Always");
  CHECK(spec.init_containers[1].isSidecar());

  REQUIRE(spec.affinity.has_value());
  const NodeAffinity& node_affinity = spec.affinity->node_affinity;
  REQUIRE(node_affinity.required.has_value());
  CHECK(node_affinity.required->matches({{"topology.muster.dev/block", "b2"}}, "n"));
  CHECK_FALSE(node_affinity.required->matches({{"topology.muster.dev/block", "b3"}}, "n"));
  REQUIRE(node_affinity.preferred.size() == 1);
  CHECK(node_affinity.preferred[0].weight == 50);
  CHECK(node_affinity.preferred[0].preference.match_expressions[0].operator_ == "Gt");
  CHECK_FALSE(spec.affinity->has_pod_affinity);
  CHECK(spec.affinity->has_pod_anti_affinity);

  REQUIRE(spec.tolerations.size() == 3);
  CHECK(spec.tolerations[0].key == "nvidia.com/gpu");
  CHECK(spec.tolerations[0].operator_ == "Exists");
  CHECK(spec.tolerations[0].effect == "NoSchedule");
  CHECK_FALSE(spec.tolerations[0].toleration_seconds.has_value());
  CHECK(spec.tolerations[1].toleration_seconds == 300);

  const PodStatus& status = pod.status;
  CHECK(status.phase == "Running");
  CHECK(status.pod_ip == "10.244.17.23");
  REQUIRE(status.conditions.size() == 4);
  const PodCondition* ready = pod.findCondition("Ready");
  REQUIRE(ready != nullptr);
  CHECK(ready->status == "False");
  CHECK(ready->reason == "ContainersNotReady");
  CHECK(ready->message == "containers with unready status: [sidecar]");
  CHECK(ready->last_transition_time == "2025-03-14T09:27:10Z");
  REQUIRE(status.container_statuses.size() == 2);
  CHECK(status.container_statuses[0].name == "main");
  CHECK(status.container_statuses[0].ready);
  CHECK(status.container_statuses[0].state == "running");
  CHECK_FALSE(status.container_statuses[0].exit_code.has_value());
  CHECK(status.container_statuses[1].state == "terminated");
  CHECK(status.container_statuses[1].exit_code == 137);
  CHECK(status.container_statuses[1].reason == "OOMKilled");
  CHECK(status.container_statuses[1].restart_count == 2);
}

TEST_CASE("a pending pod with few fields decodes with defaults", "[codec]") {
  Pod pod = decodeTestdata<Pod>("pod_pending_minimal.json");
  CHECK(pod.meta.name == "hello");
  CHECK(pod.spec.node_name.empty());
  CHECK(pod.spec.scheduler_name == "default-scheduler");
  CHECK(pod.spec.priority == 0);
  CHECK_FALSE(pod.spec.affinity.has_value());
  CHECK(pod.spec.tolerations.empty());
  CHECK(pod.spec.pvc_claim_names.empty());
  CHECK_FALSE(pod.spec.has_topology_spread_constraints);
  CHECK(pod.spec.scheduling_gates.empty());
  CHECK_FALSE(pod.spec.has_resource_claims);
  REQUIRE(pod.spec.containers.size() == 1);
  CHECK(pod.spec.containers[0].resources.requests.empty());
  CHECK(pod.status.phase == "Pending");
  CHECK(pod.status.conditions.empty());
}

TEST_CASE("scheduling gates and DRA claims of a pod are decoded", "[codec]") {
  Pod pod;
  REQUIRE(decodeJson(R"({"spec":{"schedulingGates":[{"name":"a.example/x"},{"name":"b"}],
      "resourceClaims":[{"name":"gpu","resourceClaimName":"c"}]}})", &pod).ok());
  CHECK(pod.spec.scheduling_gates == std::vector<std::string>{"a.example/x", "b"});
  CHECK(pod.spec.has_resource_claims);
  REQUIRE(decodeJson(R"({"spec":{"schedulingGates":[],"resourceClaims":[]}})", &pod).ok());
  CHECK(pod.spec.scheduling_gates.empty());
  CHECK_FALSE(pod.spec.has_resource_claims);
}

TEST_CASE("a PersistentVolumeClaim is bound only with a volume and phase Bound", "[codec]") {
  proto::PersistentVolumeClaim claim;
  REQUIRE(decodeJson(R"({"metadata":{"name":"data","namespace":"ml"},
      "spec":{"volumeName":"pv-1","accessModes":["ReadWriteOncePod"]},"status":{"phase":"Bound"}})", &claim).ok());
  CHECK(claim.meta.name == "data");
  CHECK(claim.isBound());
  CHECK(claim.access_modes == std::vector<std::string>{"ReadWriteOncePod"});
  REQUIRE(decodeJson(R"({"metadata":{"name":"data"},"spec":{},"status":{"phase":"Pending"}})",
                     &claim).ok());
  CHECK_FALSE(claim.isBound());
  REQUIRE(decodeJson(R"({"metadata":{"name":"data"},"spec":{"volumeName":"pv-1"},
      "status":{"phase":"Lost"}})", &claim).ok());
  CHECK_FALSE(claim.isBound());
}

TEST_CASE("what volume binding reads of claims and StorageClasses decodes", "[codec]") {
  proto::PersistentVolumeClaim claim;
  REQUIRE(decodeJson(R"({"metadata":{"name":"data","namespace":"ml",
      "annotations":{"volume.kubernetes.io/selected-node":"n3"}},
      "spec":{"storageClassName":"fast","volumeMode":"Block","accessModes":["ReadWriteOnce"],
        "resources":{"requests":{"storage":"500Gi"}},"selector":{"matchLabels":{"disk":"nvme"}}},
      "status":{"phase":"Pending"}})", &claim).ok());
  CHECK(claim.storage_class_name == "fast");
  CHECK(claim.volume_mode == "Block");
  CHECK(claim.storage_request == *Quantity::parse("500Gi"));
  REQUIRE(claim.selector.has_value());
  CHECK(claim.selector->match_labels.at("disk") == "nvme");
  CHECK(claim.meta.annotations.at("volume.kubernetes.io/selected-node") == "n3");
  StorageClass sc;
  REQUIRE(decodeJson(R"({"metadata":{"name":"zonal"},"provisioner":"ebs.csi.aws.com",
      "volumeBindingMode":"WaitForFirstConsumer","allowedTopologies":[{"matchLabelExpressions":[
        {"key":"topology.kubernetes.io/zone","values":["a","b"]}]}]})", &sc).ok());
  CHECK(sc.provisioner == "ebs.csi.aws.com");
  CHECK(sc.volume_binding_mode == "WaitForFirstConsumer");
  REQUIRE(sc.allowed_topologies.has_value());
  CHECK(sc.allowed_topologies->matches({{"topology.kubernetes.io/zone", "b"}}, "x"));
  CHECK_FALSE(sc.allowed_topologies->matches({{"topology.kubernetes.io/zone", "c"}}, "x"));
  REQUIRE(decodeJson(R"({"metadata":{"name":"std"},"provisioner":"p"})", &sc).ok());
  CHECK_FALSE(sc.allowed_topologies.has_value());
  CHECK(sc.volume_binding_mode.empty());
  // The pod side: an ephemeral volume's claim is "<pod>-<volume>".
  Pod pod;
  REQUIRE(decodeJson(R"({"metadata":{"name":"w0"},"spec":{"volumes":[
      {"name":"data","persistentVolumeClaim":{"claimName":"shared"}},
      {"name":"scratch","ephemeral":{"volumeClaimTemplate":{"spec":{}}}}]}})", &pod).ok());
  CHECK(pod.spec.pvc_claim_names == std::vector<std::string>{"shared", "w0-scratch"});
  CHECK(pod.spec.ephemeral_claim_names == std::vector<std::string>{"w0-scratch"});
}

TEST_CASE("what node volume limits read: CSINodes, volumes' and pods' CSI drivers", "[codec]") {
  CSINode n;
  REQUIRE(decodeJson(R"({"metadata":{"name":"n1"},"spec":{"drivers":[
      {"name":"ebs.csi.aws.com","nodeID":"i-1","allocatable":{"count":25}},
      {"name":"nfs.csi.k8s.io","nodeID":"n1"}]}})", &n).ok());
  REQUIRE(n.drivers.size() == 2);
  CHECK(n.drivers[0].name == "ebs.csi.aws.com");
  CHECK(n.drivers[0].allocatable_count == 25);
  CHECK_FALSE(n.drivers[1].allocatable_count.has_value());  // no limit
  CHECK_FALSE(decodeJson(R"({"metadata":{"name":"n1"},"spec":{"drivers":[
      {"name":"x","allocatable":{"count":-1}}]}})", &n).ok());
  PersistentVolume pv;
  REQUIRE(decodeJson(R"({"metadata":{"name":"pv1"},"spec":{"csi":{"driver":"pd.csi.storage.gke.io",
      "volumeHandle":"projects/p/disks/d"}}})", &pv).ok());
  CHECK(pv.csi_driver == "pd.csi.storage.gke.io");
  // In-tree sources count as the driver they migrate to.
  REQUIRE(decodeJson(R"({"metadata":{"name":"pv2"},"spec":{"awsElasticBlockStore":{"volumeID":"vol-1"}}})",
                     &pv).ok());
  CHECK(pv.csi_driver == "ebs.csi.aws.com");
  REQUIRE(decodeJson(R"({"metadata":{"name":"pv3"},"spec":{"hostPath":{"path":"/d"}}})", &pv).ok());
  CHECK(pv.csi_driver.empty());
  Pod pod;
  REQUIRE(decodeJson(R"({"metadata":{"name":"w0"},"spec":{"volumes":[
      {"name":"secrets","csi":{"driver":"secrets-store.csi.k8s.io"}},
      {"name":"disk","azureDisk":{"diskName":"d","diskURI":"u"}},
      {"name":"cfg","configMap":{"name":"c"}}]}})", &pod).ok());
  CHECK(pod.spec.inline_csi_drivers ==
        std::vector<std::string>{"secrets-store.csi.k8s.io", "disk.csi.azure.com"});
}

TEST_CASE("volume binding's patches: a claim's selected node, a volume's claimRef", "[codec]") {
  CHECK(selectedNodePatch("n3", "u1") ==
        R"({"metadata":{"uid":"u1","annotations":{"volume.kubernetes.io/selected-node":"n3"}}})");
  CHECK(selectedNodePatch("", "u1") ==
        R"({"metadata":{"uid":"u1","annotations":{"volume.kubernetes.io/selected-node":null}}})");
  CHECK(claimRefPatch("ml", "data", "u1", "42") ==
        R"({"metadata":{"resourceVersion":"42","annotations":{"pv.kubernetes.io/bound-by-controller":"yes"}},)"
        R"("spec":{"claimRef":{"kind":"PersistentVolumeClaim","apiVersion":"v1","namespace":"ml","name":"data","uid":"u1"}}})");
  CHECK(claimRefPatch("", "", "", "43") ==
        R"({"metadata":{"resourceVersion":"43"},"spec":{"claimRef":null}})");
}

TEST_CASE("a GPU node decodes with capacity, taints and conditions", "[codec]") {
  Node node = decodeTestdata<Node>("node_gpu.json");
  CHECK(node.meta.name == "gpu-node-17");
  CHECK(node.meta.namespace_.empty());
  CHECK(node.meta.labels.at("topology.muster.dev/spine") == "s3");
  CHECK_FALSE(node.spec.unschedulable);
  REQUIRE(node.spec.taints.size() == 2);
  CHECK(node.spec.taints[0].key == "nvidia.com/gpu");
  CHECK(node.spec.taints[0].value == "present");
  CHECK(node.spec.taints[1].effect == "PreferNoSchedule");
  CHECK(node.status.capacity.at("cpu").value() == 224);
  CHECK(node.status.allocatable.at("cpu").milliValue() == 222500);
  CHECK(node.status.allocatable.at("memory").value() == 2102903592LL * 1024);
  CHECK(node.status.allocatable.at("nvidia.com/gpu").value() == 8);
  CHECK(node.status.allocatable.at("ephemeral-storage").value() == 3543225453148);
  CHECK(node.status.allocatable.at("hugepages-1Gi").isZero());
  REQUIRE(node.status.conditions.size() == 4);
  CHECK(node.status.conditions[3].reason == "KubeletReady");
  CHECK(node.isReady());
}

TEST_CASE("a PodGroup decodes spec and status", "[codec]") {
  PodGroup group = decodeTestdata<PodGroup>("podgroup.json");
  CHECK(group.meta.name == "train");
  CHECK(group.meta.generation == 3);
  CHECK(group.spec.min_member == 4);
  CHECK(group.spec.min_resources.at("nvidia.com/gpu").value() == 32);
  CHECK(group.spec.min_resources.at("memory") == q("960Gi"));
  CHECK(group.spec.schedule_timeout_seconds == 600);
  CHECK(group.status.phase == "Scheduled");
  CHECK(group.status.occupied_by == "ml/train");
  CHECK(group.status.scheduled == 4);
  CHECK(group.status.running == 3);
  CHECK(group.status.succeeded == 0);
  CHECK(group.status.failed == 1);
  CHECK(group.status.schedule_start_time == "2025-03-14T09:26:51Z");
}

TEST_CASE("a scheduling.k8s.io/v1alpha2 PodGroup and a pod's schedulingGroup decode", "[codec]") {
  proto::WorkloadPodGroup group;
  REQUIRE(decodeJson(R"({"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup",
      "metadata":{"name":"train","namespace":"ml","generation":2},
      "spec":{"podGroupTemplateRef":{"workload":{"workloadName":"w","podGroupTemplateName":"t"}},
              "schedulingPolicy":{"gang":{"minCount":16}},
              "schedulingConstraints":{"topology":[{"key":"muster.dev/rack"}]},
              "disruptionMode":"PodGroup","priority":100},
      "status":{"conditions":[{"type":"PodGroupScheduled","status":"False","reason":"Unschedulable",
          "message":"0/4 nodes are available","lastTransitionTime":"2026-12-04T09:00:00Z",
          "observedGeneration":2}]}})", &group).ok());
  CHECK(group.meta.generation == 2);
  CHECK_FALSE(group.basic);
  CHECK(group.gang_min_count == 16);
  CHECK(group.topology_keys == std::vector<std::string>{"muster.dev/rack"});
  REQUIRE(group.condition("PodGroupScheduled") != nullptr);
  CHECK(group.condition("PodGroupScheduled")->reason == "Unschedulable");
  CHECK(group.condition("DisruptionTarget") == nullptr);

  REQUIRE(decodeJson(R"({"metadata":{"name":"serve"},"spec":{"schedulingPolicy":{"basic":{}}}})",
                     &group).ok());
  CHECK(group.basic);
  CHECK_FALSE(group.gang_min_count.has_value());
  CHECK(group.topology_keys.empty());

  Pod pod;
  REQUIRE(decodeJson(R"({"spec":{"schedulingGroup":{"podGroupName":"train"}}})", &pod).ok());
  CHECK(pod.spec.scheduling_group == "train");
  REQUIRE(decodeJson(R"({"spec":{}})", &pod).ok());
  CHECK(pod.spec.scheduling_group.empty());
}

TEST_CASE("a v1alpha2 PodGroup condition patch carries every required field", "[codec]") {
  proto::Condition c{"PodGroupScheduled", "True", "Scheduled", "", "2026-12-04T09:00:00Z"};
  CHECK(workloadPodGroupConditionPatch(c, 3) ==
        R"({"status":{"conditions":[{"type":"PodGroupScheduled","status":"True","reason":"Scheduled",)"
        R"("message":"","lastTransitionTime":"2026-12-04T09:00:00Z","observedGeneration":3}]}})");
}

TEST_CASE("PodGroup minResources written as numbers in the CRD are quantities too", "[codec]") {
  PodGroup group;
  REQUIRE(decodeJson(R"({"spec":{"minMember":2,"minResources":{"cpu":2,"memory":0.5,"x":1e3}}})",
                     &group)
              .ok());
  CHECK(group.spec.min_resources.at("cpu").value() == 2);
  CHECK(group.spec.min_resources.at("memory").milliValue() == 500);
  CHECK(group.spec.min_resources.at("x").value() == 1000);
  CHECK_FALSE(group.spec.schedule_timeout_seconds.has_value());
}

TEST_CASE("a ParallelJob keeps its launcher template verbatim and lists its containers",
          "[codec]") {
  ParallelJob job = decodeTestdata<ParallelJob>("paralleljob.json");
  CHECK(job.meta.name == "mpi-sample-job");
  CHECK(job.meta.annotations.at("muster.dev/topology-preferred") == "topology.muster.dev/leaf");
  CHECK(job.spec.runtime_ref_name == "mpi-openmpi");
  CHECK(job.spec.num_pods == 3);
  CHECK(job.spec.num_proc_per_pod == 2);
  CHECK(job.spec.max_restarts == 1);
  CHECK(job.spec.launcher_container_names == std::vector<std::string>{"main", "log-shipper"});
  CHECK_FALSE(job.spec.worker.has_value());

  // The raw template is compact JSON with the members in their original order.
  CHECK_THAT(job.spec.launcher,
             Catch::StartsWith(R"({"metadata":{"labels":{"team":"hpc"}},"spec":{"containers":)"));
  auto launcher = parseJson(job.spec.launcher);
  REQUIRE(launcher.ok());
  CHECK(std::string((*launcher)["spec"]["containers"][0]["command"][2].GetString()) ==
        "mpirun --allow-run-as-root ./hello_mpi");

  CHECK(job.status.phase == "Restarting");
  CHECK(job.status.restarts == 1);
  CHECK(job.status.job_group_name == "mpi-sample-job-1");
  CHECK(job.status.message ==
        "pod mpi-sample-job-1-worker-2 failed: container main exited with code 137 (OOMKilled)");
  CHECK(job.status.start_time == "2025-03-14T11:00:05Z");
  CHECK(job.status.completion_time.empty());
  REQUIRE(job.status.conditions.size() == 1);
  CHECK(job.status.conditions[0].reason == "PodFailed");
}

TEST_CASE("a ParallelJob without failurePolicy may restart 3 times", "[codec]") {
  ParallelJob job;
  REQUIRE(decodeJson(R"({"metadata":{"name":"j"},"spec":{"runtimeRef":{"name":"mpi-openmpi"},
      "numPods":2,"numProcPerPod":8,
      "launcher":{"spec":{"containers":[{"name":"main","image":"x"}]}},
      "worker":{"spec":{"containers":[{"name":"main","image":"y"}]}}}})",
                     &job)
              .ok());
  CHECK(job.spec.max_restarts == 3);
  REQUIRE(job.spec.worker.has_value());
  CHECK(*job.spec.worker == R"({"spec":{"containers":[{"name":"main","image":"y"}]}})");
  CHECK(job.status.phase.empty());
}

TEST_CASE("an Event decodes from API server JSON", "[codec]") {
  Event event = decodeTestdata<Event>("event.json");
  CHECK(event.meta.name == "train-worker-1.17f3a2b4c5d6e7f8");
  CHECK(event.involved_object.kind == "Pod");
  CHECK(event.involved_object.name == "train-worker-1");
  CHECK(event.involved_object.namespace_ == "ml");
  CHECK(event.involved_object.resource_version == "481516");
  CHECK(event.reason == "FailedScheduling");
  CHECK(event.type == "Warning");
  CHECK(event.count == 6);
  CHECK(event.first_timestamp == "2025-03-14T09:26:55Z");
  CHECK(event.last_timestamp == "2025-03-14T09:31:55Z");
  CHECK_FALSE(event.event_time.has_value());  // null
  CHECK(event.source_component == "muster-scheduler");
  CHECK(event.reporting_component == "muster-scheduler");
  CHECK(event.reporting_instance == "muster-scheduler-7d9f8c6b5-xk2lp");
}

TEST_CASE("a Lease decodes from API server JSON", "[codec]") {
  Lease lease = decodeTestdata<Lease>("lease.json");
  CHECK(lease.meta.name == "muster-scheduler");
  CHECK(lease.meta.namespace_ == "kube-system");
  CHECK(lease.meta.resource_version == "99123");
  CHECK(lease.spec.holder_identity ==
        "muster-scheduler-7d9f8c6b5-xk2lp_5c1e9a7e-8f3b-4a21-9d6c-2b7e4f1a0c33");
  CHECK(lease.spec.lease_duration_seconds == 15);
  CHECK(lease.spec.acquire_time == "2025-03-14T08:00:00.123456Z");
  CHECK(lease.spec.renew_time == "2025-03-14T09:31:58.654321Z");
  CHECK(lease.spec.lease_transitions == 4);
}

TEST_CASE("newEvent names the Event uniquely, within 253 characters, and stamps it now", "[codec]") {
  ObjectReference ref;
  ref.kind = "Pod";
  ref.name = std::string(250, 'p');
  const absl::Time now = absl::FromUnixSeconds(1764464523) + absl::Milliseconds(700);
  Event a = newEvent(ref, "Warning", "FailedScheduling", "why", "muster-scheduler", "host-1", now);
  Event b = newEvent(ref, "Warning", "FailedScheduling", "why", "muster-scheduler", "host-1", now);
  CHECK(a.meta.namespace_ == "default");
  CHECK(a.meta.name.size() == 200 + 1 + 16);
  CHECK(a.meta.name.rfind(std::string(200, 'p') + ".", 0) == 0);
  CHECK(a.meta.name != b.meta.name);
  CHECK(a.involved_object.name == ref.name);
  CHECK(a.count == 1);
  CHECK(a.reporting_component == "muster-scheduler");
  CHECK(a.reporting_instance == "host-1");
  CHECK(a.first_timestamp == a.last_timestamp);
  CHECK(a.first_timestamp == "2025-11-30T01:02:03Z");  // whole seconds, UTC
}

TEST_CASE("a series patch carries the count and the last time the Event happened", "[codec]") {
  CHECK(eventSeriesPatch(7, "2025-11-30T01:02:03Z") ==
        R"({"count":7,"lastTimestamp":"2025-11-30T01:02:03Z"})");
}

TEST_CASE("an Event survives encode then decode unchanged", "[codec]") {
  Event event;
  event.meta.name = "train.17f3a2b4c5d6e7f8";
  event.meta.namespace_ = "ml";
  event.meta.labels = {{"muster.dev/gang", "train"}};
  event.involved_object = {"PodGroup", "ml", "train", "uid-1", "scheduling.x-k8s.io/v1alpha1", "7",
                           ""};
  event.reason = "Unschedulable";
  event.message = "gang \"train\" needs 32 GPUs in one spine; the largest spine has 24 free";
  event.type = "Warning";
  event.count = 3;
  event.first_timestamp = "2025-03-14T09:26:55Z";
  event.last_timestamp = "2025-03-14T09:31:55Z";
  event.event_time = "2025-03-14T09:31:55.123456Z";
  event.source_component = "muster-scheduler";
  event.source_host = "node-0";
  event.reporting_component = "muster-scheduler";
  event.reporting_instance = "muster-scheduler-0";
  event.action = "Scheduling";

  std::string json = encode(event);
  CHECK_THAT(json, Catch::StartsWith(R"({"apiVersion":"v1","kind":"Event","metadata":)"));
  Event back;
  REQUIRE(decodeJson(json, &back).ok());
  CHECK(back.meta.name == event.meta.name);
  CHECK(back.meta.namespace_ == event.meta.namespace_);
  CHECK(back.meta.labels == event.meta.labels);
  CHECK(back.involved_object.kind == "PodGroup");
  CHECK(back.involved_object.namespace_ == "ml");
  CHECK(back.involved_object.uid == "uid-1");
  CHECK(back.involved_object.api_version == "scheduling.x-k8s.io/v1alpha1");
  CHECK(back.involved_object.resource_version == "7");
  CHECK(back.reason == event.reason);
  CHECK(back.message == event.message);
  CHECK(back.type == event.type);
  CHECK(back.count == 3);
  CHECK(back.first_timestamp == event.first_timestamp);
  CHECK(back.last_timestamp == event.last_timestamp);
  CHECK(back.event_time == event.event_time);
  CHECK(back.source_component == event.source_component);
  CHECK(back.source_host == event.source_host);
  CHECK(back.reporting_component == event.reporting_component);
  CHECK(back.reporting_instance == event.reporting_instance);
  CHECK(back.action == event.action);
  CHECK(encode(back) == json);
}

TEST_CASE("a decoded Event re-encodes to the same Event", "[codec]") {
  Event event = decodeTestdata<Event>("event.json");
  Event back;
  REQUIRE(decodeJson(encode(event), &back).ok());
  CHECK(encode(back) == encode(event));
  CHECK(back.meta.uid == event.meta.uid);
  CHECK(back.meta.creation_timestamp == event.meta.creation_timestamp);
}

TEST_CASE("a Lease survives encode then decode unchanged", "[codec]") {
  Lease lease = decodeTestdata<Lease>("lease.json");
  std::string json = encode(lease);
  CHECK_THAT(json, Catch::StartsWith(R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"));
  CHECK_THAT(json, Catch::Contains(R"("resourceVersion":"99123")"));
  Lease back;
  REQUIRE(decodeJson(json, &back).ok());
  CHECK(back.meta.name == lease.meta.name);
  CHECK(back.meta.namespace_ == lease.meta.namespace_);
  CHECK(back.meta.uid == lease.meta.uid);
  CHECK(back.meta.resource_version == lease.meta.resource_version);
  CHECK(back.spec.holder_identity == lease.spec.holder_identity);
  CHECK(back.spec.lease_duration_seconds == lease.spec.lease_duration_seconds);
  CHECK(back.spec.acquire_time == lease.spec.acquire_time);
  CHECK(back.spec.renew_time == lease.spec.renew_time);
  CHECK(back.spec.lease_transitions == lease.spec.lease_transitions);
  CHECK(encode(back) == json);
}

TEST_CASE("a new Lease encodes only the fields that are set", "[codec]") {
  Lease lease;
  lease.meta.name = "muster-scheduler";
  lease.meta.namespace_ = "kube-system";
  lease.spec.holder_identity = "me";
  lease.spec.lease_duration_seconds = 15;
  lease.spec.lease_transitions = 0;
  CHECK(encode(lease) ==
        R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
        R"("metadata":{"name":"muster-scheduler","namespace":"kube-system"},)"
        R"("spec":{"holderIdentity":"me","leaseDurationSeconds":15,"leaseTransitions":0}})");
}

TEST_CASE("a Binding names the pod and targets the node", "[codec]") {
  Binding binding;
  binding.meta.name = "train-worker-1";
  binding.meta.namespace_ = "ml";
  binding.target_node = "gpu-node-17";
  CHECK(encode(binding) ==
        R"({"apiVersion":"v1","kind":"Binding",)"
        R"("metadata":{"name":"train-worker-1","namespace":"ml"},)"
        R"("target":{"apiVersion":"v1","kind":"Node","name":"gpu-node-17"}})");
  binding.meta.uid = "6f1b";
  CHECK_THAT(encode(binding), Catch::Contains(R"("namespace":"ml","uid":"6f1b"})"));
}

TEST_CASE("a pod condition patch sets one condition under status", "[codec]") {
  PodCondition condition{"PodScheduled", "False", "Unschedulable",
                         "gang ml/train: 0/64 nodes are available", "2025-03-14T09:26:55Z"};
  CHECK(podConditionPatch(condition) ==
        R"({"status":{"conditions":[{"type":"PodScheduled","status":"False",)"
        R"("reason":"Unschedulable","message":"gang ml/train: 0/64 nodes are available",)"
        R"("lastTransitionTime":"2025-03-14T09:26:55Z"}]}})");
  CHECK(podConditionPatch({"PodScheduled", "True", "", "", ""}) ==
        R"({"status":{"conditions":[{"type":"PodScheduled","status":"True"}]}})");
}

TEST_CASE("a condition patch and an eviction for one pod carry its uid as precondition",
          "[codec]") {
  CHECK(podConditionPatch({"muster.dev/Preempted", "True", "Preempted", "Preempted by ml/big", ""},
                          "6f1b") ==
        R"({"metadata":{"uid":"6f1b"},"status":{"conditions":[{"type":"muster.dev/Preempted",)"
        R"("status":"True","reason":"Preempted","message":"Preempted by ml/big"}]}})");
  CHECK(evictionBody("ml", "w0", "6f1b") ==
        R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"w0","namespace":"ml"},)"
        R"("deleteOptions":{"preconditions":{"uid":"6f1b"}}})");
  CHECK(evictionBody("ml", "w0") ==
        R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"w0","namespace":"ml"}})");
}

TEST_CASE("a nominatedNodeName patch sets it, or clears it with null", "[codec]") {
  CHECK(nominatedNodeNamePatch("n7") == R"({"status":{"nominatedNodeName":"n7"}})");
  CHECK(nominatedNodeNamePatch("") == R"({"status":{"nominatedNodeName":null}})");
}

TEST_CASE("strings are escaped in encoded bodies", "[codec]") {
  PodCondition condition{"PodScheduled", "False", "Unschedulable",
                         "needs \"8\" GPUs\n\ton one node", ""};
  std::string patch = podConditionPatch(condition);
  CHECK_THAT(patch, Catch::Contains(R"("message":"needs \"8\" GPUs\n\ton one node")"));
  CHECK(parseJson(patch).ok());
}

TEST_CASE("a PodGroup status patch writes every field and nulls empty ones", "[codec]") {
  PodGroupStatus status;
  status.phase = "Scheduling";
  status.scheduled = 2;
  status.running = 1;
  CHECK(statusPatch(status) ==
        R"({"status":{"phase":"Scheduling","occupiedBy":null,"scheduled":2,"running":1,)"
        R"("succeeded":0,"failed":0,"scheduleStartTime":null}})");
  PodGroup group;
  REQUIRE(decodeJson(statusPatch(decodeTestdata<PodGroup>("podgroup.json").status), &group).ok());
  CHECK(group.status.occupied_by == "ml/train");
  CHECK(group.status.failed == 1);
  CHECK(group.status.schedule_start_time == "2025-03-14T09:26:51Z");
}

TEST_CASE("a ParallelJob status patch carries phase, restarts and conditions", "[codec]") {
  ParallelJobStatus status;
  status.phase = "Running";
  status.restarts = 2;
  status.job_group_name = "mpi-sample-job-2";
  status.start_time = "2025-03-14T11:00:05Z";
  status.conditions.push_back({"Running", "True", "AllPodsRunning", "", "2025-03-14T11:01:00Z"});
  CHECK(statusPatch(status) ==
        R"({"status":{"phase":"Running","restarts":2,"jobGroupName":"mpi-sample-job-2",)"
        R"("message":null,"startTime":"2025-03-14T11:00:05Z","completionTime":null,)"
        R"("conditions":[{"type":"Running","status":"True","reason":"AllPodsRunning",)"
        R"("lastTransitionTime":"2025-03-14T11:01:00Z"}]}})");
  ParallelJob job;
  REQUIRE(decodeJson(statusPatch(status), &job).ok());
  CHECK(job.status.restarts == 2);
  CHECK(job.status.conditions.size() == 1);
  CHECK_FALSE(job.status.pods);
  // podsReady and pods (the READY and PODS columns) when set.
  status.pods_ready = 0;
  status.ready = "0/3";
  status.pods = 1;
  const std::string patch = statusPatch(status);
  CHECK(patch.find(R"("podsReady":0,"ready":"0/3","pods":1)") != std::string::npos);
  REQUIRE(decodeJson(patch, &job).ok());
  CHECK(job.status.pods_ready == 0);
  CHECK(job.status.ready == "0/3");
  CHECK(job.status.pods == 1);
}

TEST_CASE("a wrong JSON type in a pod is an error naming the field path", "[codec]") {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {R"({"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":true}}}]}})",
       "spec.containers[0].resources.requests.cpu: expected string"},
      {R"({"spec":{"containers":[{},{"resources":{"limits":{"nvidia.com/gpu":[]}}}]}})",
       "spec.containers[1].resources.limits[nvidia.com/gpu]: expected string"},
      {R"({"metadata":{"name":7}})", "metadata.name: expected string"},
      {R"({"metadata":{"labels":{"app":1}}})", "metadata.labels.app: expected string"},
      {R"({"metadata":{"labels":[]}})", "metadata.labels: expected object"},
      {R"({"metadata":{"generation":"1"}})", "metadata.generation: expected int64"},
      {R"({"metadata":{"ownerReferences":[{"controller":"yes"}]}})",
       "metadata.ownerReferences[0].controller: expected boolean"},
      {R"({"metadata":{"finalizers":["a",2]}})", "metadata.finalizers[1]: expected string"},
      {R"({"spec":{"priority":1.5}})", "spec.priority: expected int32, got 1.5"},
      {R"({"spec":{"priority":4294967296}})", "spec.priority: expected int32, got 4294967296"},
      {R"({"spec":{"containers":{}}})", "spec.containers: expected array"},
      {R"({"spec":{"containers":["main"]}})", "spec.containers[0]: expected object"},
      {R"({"spec":{"containers":[{"ports":[{"containerPort":"22"}]}]}})",
       "spec.containers[0].ports[0].containerPort: expected int32"},
      {R"({"spec":{"tolerations":[{"tolerationSeconds":"300"}]}})",
       "spec.tolerations[0].tolerationSeconds: expected int64"},
      {R"({"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms":[{"matchExpressions":[{"key":1}]}]}}}}})",
       "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
       "nodeSelectorTerms[0].matchExpressions[0].key: expected string"},
      {R"({"spec":{"affinity":{"podAffinity":
            {"requiredDuringSchedulingIgnoredDuringExecution":{}}}}})",
       "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution: expected array"},
      {R"({"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":5}}]}})",
       "spec.volumes[0].persistentVolumeClaim.claimName: expected string"},
      {R"({"spec":{"schedulingGates":[{"name":1}]}})",
       "spec.schedulingGates[0].name: expected string"},
      {R"({"spec":{"resourceClaims":{}}})", "spec.resourceClaims: expected array"},
      {R"({"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":"1"}}}]}})",
       "status.containerStatuses[0].state.terminated.exitCode: expected int32"},
      {R"({"status":"Running"})", "status: expected object"},
      {R"([])", "expected object"},
  };
  for (const Case& c : cases) {
    INFO(c.json);
    CHECK(decodeError<Pod>(c.json) == c.error);
  }
}

TEST_CASE("a wrong JSON type in other objects is an error naming the field path", "[codec]") {
  CHECK(decodeError<Node>(R"({"status":{"allocatable":{"cpu":{}}}})") ==
        "status.allocatable.cpu: expected string");
  CHECK(decodeError<Node>(R"({"spec":{"unschedulable":"true"}})") ==
        "spec.unschedulable: expected boolean");
  CHECK(decodeError<Lease>(R"({"spec":{"leaseDurationSeconds":"15"}})") ==
        "spec.leaseDurationSeconds: expected int32");
  CHECK(decodeError<Event>(R"({"involvedObject":{"name":["x"]}})") ==
        "involvedObject.name: expected string");
  CHECK(decodeError<PodGroup>(R"({"spec":{"minMember":"4"}})") == "spec.minMember: expected int32");
  CHECK(decodeError<ParallelJob>(R"({"spec":{"launcher":"main"}})") ==
        "spec.launcher: expected object");
  CHECK(decodeError<ParallelJob>(R"({"spec":{"launcher":{"spec":{"containers":[{"name":1}]}}}})") ==
        "spec.launcher.spec.containers[0].name: expected string");
  CHECK(decodeError<ParallelJob>(R"({"spec":{"failurePolicy":{"maxRestarts":"1"}}})") ==
        "spec.failurePolicy.maxRestarts: expected int32");
}

TEST_CASE("an invalid quantity is an error naming the field and the input", "[codec]") {
  std::string message =
      decodeError<Pod>(R"({"spec":{"containers":[{"resources":{"requests":{"memory":"1 Gi"}}}]}})");
  CHECK_THAT(message, Catch::StartsWith("spec.containers[0].resources.requests.memory: "));
  CHECK_THAT(message, Catch::Contains("\"1 Gi\""));
  CHECK_THAT(message, Catch::Contains("quantities must match the regular expression"));
}

TEST_CASE("unknown fields are ignored and null means absent", "[codec]") {
  Pod pod;
  REQUIRE(decodeJson(R"({"apiVersion":"v1","kind":"Pod","futureField":{"x":[1,2,3]},
      "metadata":{"name":"p","namespace":"ns","labels":null,"deletionTimestamp":null,
                  "somethingNew":1},
      "spec":{"nodeName":null,"priority":null,"affinity":null,"runtimeClassName":"gvisor",
              "containers":[{"name":"c",
                             "resources":{"requests":{"cpu":"1"},"claims":[{"name":"gpu"}]},
                             "ports":null}]},
      "status":{"phase":"Pending","resize":"Proposed"}})",
                     &pod)
              .ok());
  CHECK(pod.meta.name == "p");
  CHECK(pod.meta.labels.empty());
  CHECK_FALSE(pod.meta.deletion_timestamp.has_value());
  CHECK(pod.spec.node_name.empty());
  CHECK_FALSE(pod.spec.priority.has_value());
  CHECK_FALSE(pod.spec.affinity.has_value());
  CHECK(pod.spec.containers[0].resources.requests.at("cpu").value() == 1);
  CHECK(pod.status.phase == "Pending");
}

TEST_CASE("a pod being deleted carries its deletion timestamp", "[codec]") {
  Pod pod;
  REQUIRE(decodeJson(R"({"metadata":{"name":"p","deletionTimestamp":"2025-03-14T10:00:00Z"}})",
                     &pod)
              .ok());
  CHECK(pod.meta.deletion_timestamp == "2025-03-14T10:00:00Z");
}

TEST_CASE("a PodDisruptionBudget decodes its selector and disruptionsAllowed", "[codec]") {
  PodDisruptionBudget budget;
  REQUIRE(decodeJson(R"({"apiVersion":"policy/v1","kind":"PodDisruptionBudget",
    "metadata":{"name":"train","namespace":"ml"},
    "spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"train"}}},
    "status":{"disruptionsAllowed":1,"currentHealthy":3,"desiredHealthy":2}})", &budget).ok());
  CHECK(budget.meta.namespace_ == "ml");
  REQUIRE(budget.selector.has_value());
  CHECK(budget.selector->matches({{"app", "train"}}));
  CHECK_FALSE(budget.selector->matches({{"app", "serve"}}));
  CHECK(budget.disruptions_allowed == 1);
  // No status yet: nothing may be disrupted; no selector: it selects nothing.
  REQUIRE(decodeJson(R"({"metadata":{"name":"b"},"spec":{}})", &budget).ok());
  CHECK(budget.disruptions_allowed == 0);
  CHECK_FALSE(budget.selector.has_value());
}

TEST_CASE("a pod's preemptionPolicy and startTime are read", "[codec]") {
  Pod pod;
  REQUIRE(decodeJson(R"({"metadata":{"name":"p"},"spec":{"priority":5,"preemptionPolicy":"Never",
    "containers":[]},"status":{"phase":"Running","startTime":"2026-12-04T10:00:00Z"}})", &pod).ok());
  CHECK(pod.spec.preemption_policy == "Never");
  CHECK(pod.status.start_time == "2026-12-04T10:00:00Z");
}

TEST_CASE("a local PersistentVolume decodes its node affinity and claim", "[codec]") {
  PersistentVolume pv;
  REQUIRE(decodeJson(R"({"apiVersion":"v1","kind":"PersistentVolume",
    "metadata":{"name":"local-pv-1"},
    "spec":{"capacity":{"storage":"100Gi"},"local":{"path":"/mnt/nvme0"},
      "claimRef":{"kind":"PersistentVolumeClaim","namespace":"ml","name":"data-w0","uid":"u"},
      "nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchExpressions":[
        {"key":"kubernetes.io/hostname","operator":"In","values":["gpu-7"]}]}]}}},
    "status":{"phase":"Bound"}})",
                     &pv)
              .ok());
  CHECK(pv.meta.name == "local-pv-1");
  CHECK(pv.claim_namespace == "ml");
  CHECK(pv.claim_name == "data-w0");
  CHECK(pv.claim_uid == "u");
  CHECK(pv.capacity == *Quantity::parse("100Gi"));
  CHECK(pv.phase == "Bound");
  REQUIRE(pv.node_affinity.has_value());
  CHECK(pv.node_affinity->matches({{"kubernetes.io/hostname", "gpu-7"}}, "gpu-7"));
  CHECK_FALSE(pv.node_affinity->matches({{"kubernetes.io/hostname", "gpu-8"}}, "gpu-8"));
  // No nodeAffinity: reachable from every node; a wrong type is an error naming the field.
  REQUIRE(decodeJson(R"({"metadata":{"name":"nfs"},"spec":{"nfs":{"server":"s"}}})", &pv).ok());
  CHECK_FALSE(pv.node_affinity.has_value());
  CHECK(pv.claim_name.empty());
  absl::Status bad = decodeJson(R"({"metadata":{"name":"x"},"spec":{"nodeAffinity":{"required":7}}})", &pv);
  CHECK_FALSE(bad.ok());
  CHECK(std::string(bad.message()).find("spec.nodeAffinity.required") != std::string::npos);
}

TEST_CASE("decoding resets the output object first", "[codec]") {
  Pod pod = decodeTestdata<Pod>("pod_gpu_worker.json");
  REQUIRE(decodeJson(R"({"metadata":{"name":"other"}})", &pod).ok());
  CHECK(pod.meta.name == "other");
  CHECK(pod.meta.labels.empty());
  CHECK(pod.spec.containers.empty());
  CHECK(pod.status.phase.empty());
}

TEST_CASE("JSON that does not parse reports the offset and the reason", "[codec]") {
  absl::StatusOr<rapidjson::Document> doc = parseJson(R"({"metadata": {"name" "x"}})");
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(doc.status().message()), Catch::Contains("offset 21"));
  CHECK_THAT(std::string(doc.status().message()), Catch::Contains("Missing a colon"));
  Pod pod;
  CHECK_FALSE(decodeJson("", &pod).ok());
  CHECK_FALSE(decodeJson(R"({"a":1} trailing)", &pod).ok());
}

TEST_CASE("the JSON writer embeds raw JSON and string maps verbatim", "[codec][json]") {
  JsonWriter w;
  w.beginObject()
      .stringMapField("labels", {{"b", "2"}, {"a", "1"}})
      .key("template")
      .raw(R"({"spec":{"containers":[{"name":"main"}]}})")
      .stringOrNullField("gone", "")
      .endObject();
  CHECK(w.str() ==
        R"({"labels":{"a":"1","b":"2"},)"
        R"("template":{"spec":{"containers":[{"name":"main"}]}},"gone":null})");
}

// Captures from a real kube-apiserver go to testdata/captured/ (a single object or a List); every
// one of them must decode.
TEST_CASE("every captured API server payload decodes", "[codec][captured]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(MUSTER_TESTDATA_DIR) / "captured";
  // The captures are part of the repository: a missing directory (or an empty one) is a broken
  // checkout or a wrong MUSTER_TESTDATA_DIR, never "nothing to check".
  INFO(dir.string());
  REQUIRE(fs::is_directory(dir));
  size_t decoded_files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++decoded_files;
    INFO(entry.path().filename().string());
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<rapidjson::Document> doc = parseJson(text.str());
    REQUIRE(doc.ok());
    std::vector<const rapidjson::Value*> objects;
    std::string kind;
    REQUIRE(readString(*doc, JsonPath(), "kind", &kind).ok());
    const bool is_list = kind.size() > 4 && kind.compare(kind.size() - 4, 4, "List") == 0;
    if (is_list && doc->HasMember("items") && (*doc)["items"].IsArray()) {
      kind.resize(kind.size() - 4);
      for (const rapidjson::Value& item : (*doc)["items"].GetArray()) objects.push_back(&item);
    } else {
      objects.push_back(&*doc);
    }
    for (const rapidjson::Value* object : objects) {
      absl::Status status;
      if (kind == "Pod") {
        Pod pod;
        status = decode(*object, &pod);
      } else if (kind == "Node") {
        Node node;
        status = decode(*object, &node);
      } else if (kind == "Event") {
        Event event;
        status = decode(*object, &event);
      } else if (kind == "Lease") {
        Lease lease;
        status = decode(*object, &lease);
      } else if (kind == "PodGroup") {
        PodGroup group;
        status = decode(*object, &group);
      } else if (kind == "ParallelJob") {
        ParallelJob job;
        status = decode(*object, &job);
      } else {
        // A capture this test cannot check is a capture that proves nothing.
        FAIL_CHECK("no decoder for the captured kind " << kind);
        continue;
      }
      INFO(kind << ": " << status.ToString());
      CHECK(status.ok());
    }
  }
  CHECK(decoded_files > 0);
}

}  // namespace
}  // namespace muster::proto
