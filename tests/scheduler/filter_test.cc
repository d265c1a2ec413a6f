#include "scheduler/filter.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::fieldTerm;
using testing::node;
using testing::pod;
using testing::term;

// The verdict of all filters for `p` on `n`, with `others` already bound there.
Status verdict(const testing::PodBuilder& p, const proto::Node& n,
               std::vector<proto::Pod> others = {}) {
  ClusterCache cache({});
  cache.addNode(n);
  for (const proto::Pod& o : others) cache.addPod(o);
  return filterNode(*p.info(), cache.node(*cache.findNode(n.meta.name)));
}

std::string reasonOf(const Status& s) { return s.reasons.empty() ? "" : s.reasons[0]; }

TEST_CASE("NodeResourcesFit: a pod fits when every requested resource is free", "[filter]") {
  proto::Node n = node("n1").gpus(8);
  CHECK(verdict(pod("p").gpus(8).cpu("4"), n).ok());
  CHECK(verdict(pod("p").gpus(4), n, {pod("other").gpus(4).onNode("n1")}).ok());
}

TEST_CASE("NodeResourcesFit: too few GPUs is Insufficient nvidia.com/gpu", "[filter]") {
  proto::Node n = node("n1").gpus(8);
  Status s = verdict(pod("p").gpus(8), n, {pod("other").gpus(1).onNode("n1")});
  CHECK(s.code == Status::Code::kUnschedulable);
  CHECK(s.reasons == std::vector<std::string>{"Insufficient nvidia.com/gpu"});
  CHECK(reasonOf(verdict(pod("p").gpus(1), node("cpu-only")))  == "Insufficient nvidia.com/gpu");
}

TEST_CASE("NodeResourcesFit: cpu, memory and any extended resource are checked", "[filter]") {
  proto::Node n = node("n1").gpus(8).cpu("4").memory("8Gi").resource("preferred.jp/rdma", "1");
  CHECK(verdict(pod("p").cpu("4").memory("8Gi").request("preferred.jp/rdma", "1"), n).ok());
  Status s = verdict(pod("p").cpu("5").memory("9Gi").request("preferred.jp/rdma", "2"), n);
  CHECK(s.reasons ==
        std::vector<std::string>{"Insufficient cpu", "Insufficient memory",
                                 "Insufficient preferred.jp/rdma"});
}

TEST_CASE("NodeResourcesFit: the pod count is limited by allocatable pods", "[filter]") {
  proto::Node n = node("n1").maxPods(1);
  CHECK(verdict(pod("p"), n).ok());
  CHECK(reasonOf(verdict(pod("p"), n, {pod("other").onNode("n1")})) == "Too many pods");
}

TEST_CASE("NodeResourcesFit: the init-container max rule and overhead decide fit", "[filter]") {
  proto::Node n = node("n1").cpu("2");
  CHECK(verdict(pod("p").cpu("1").initContainer("init", {{"cpu", testing::q("2")}}), n).ok());
  CHECK(reasonOf(verdict(pod("p").cpu("1").initContainer("init", {{"cpu", testing::q("2")}})
                             .overhead("cpu", "100m"),
                         n)) == "Insufficient cpu");
}

TEST_CASE("NodeResourcesFit: terminal pods on the node do not count", "[filter]") {
  proto::Node n = node("n1").gpus(8);
  CHECK(verdict(pod("p").gpus(8), n, {pod("done").gpus(8).onNode("n1").phase("Succeeded")}).ok());
  CHECK(verdict(pod("p").gpus(8), n, {pod("failed").gpus(8).onNode("n1").phase("Failed")}).ok());
}

TEST_CASE("NodeName: a pod naming another node does not fit", "[filter]") {
  proto::Pod p = pod("p");
  p.spec.node_name = "n1";
  ClusterCache cache({});
  cache.addNode(node("n1"));
  cache.addNode(node("n2"));
  PodInfoPtr info = *makePodInfo(p);
  CHECK(filterNode(*info, cache.node(*cache.findNode("n1"))).ok());
  Status s = filterNode(*info, cache.node(*cache.findNode("n2")));
  CHECK(s.code == Status::Code::kUnschedulableAndUnresolvable);
  CHECK(reasonOf(s) == "node(s) didn't match the requested node name");
}

TEST_CASE("NodeUnschedulable: cordoned nodes take only pods that tolerate it", "[filter]") {
  proto::Node n = node("n1").cordoned();
  Status s = verdict(pod("p"), n);
  CHECK(s.code == Status::Code::kUnschedulableAndUnresolvable);
  CHECK(reasonOf(s) == "node(s) were unschedulable");
  CHECK(verdict(pod("p").toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"), n)
            .ok());
}

TEST_CASE("TaintToleration: NoSchedule and NoExecute taints need a toleration", "[filter]") {
  proto::Node n = node("n1").taint("dedicated", "gpu", "NoSchedule");
  CHECK(reasonOf(verdict(pod("p"), n)) == "node(s) had untolerated taint {dedicated: gpu}");
  CHECK(verdict(pod("p").toleration("dedicated", "Equal", "gpu", "NoSchedule"), n).ok());
  CHECK(verdict(pod("p").toleration("dedicated", "Exists", "", ""), n).ok());
  CHECK_FALSE(verdict(pod("p").toleration("dedicated", "Equal", "cpu", "NoSchedule"), n).ok());
  CHECK_FALSE(verdict(pod("p"), node("n2").taint("k", "v", "NoExecute")).ok());
  CHECK(verdict(pod("p"), node("n3").taint("k", "v", "PreferNoSchedule")).ok());
}

TEST_CASE("readiness: a node that is not Ready takes no pods unless they tolerate not-ready",
          "[filter]") {
  proto::Node n = node("n1").notReady();
  CHECK(reasonOf(verdict(pod("p"), n)) == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }");
  CHECK(verdict(pod("p").toleration("node.kubernetes.io/not-ready", "Exists", "", "NoSchedule"), n).ok());
  CHECK(verdict(pod("p"), node("n2")).ok());
}

TEST_CASE("NodeAffinity: nodeSelector must match the node's labels", "[filter]") {
  proto::Node n = node("n1").label("gpu-type", "h100");
  CHECK(verdict(pod("p").nodeSelector("gpu-type", "h100"), n).ok());
  Status s = verdict(pod("p").nodeSelector("gpu-type", "a100"), n);
  CHECK(s.code == Status::Code::kUnschedulableAndUnresolvable);
  CHECK(reasonOf(s) == "node(s) didn't match Pod's node affinity/selector");
}

TEST_CASE("NodeAffinity: required terms, matchExpressions and matchFields", "[filter]") {
  proto::Node n = node("n1").label("zone", "a");
  CHECK(verdict(pod("p").requiredAffinity(term("zone", "In", {"a", "b"})), n).ok());
  CHECK_FALSE(verdict(pod("p").requiredAffinity(term("zone", "NotIn", {"a"})), n).ok());
  CHECK(verdict(pod("p").requiredAffinity(fieldTerm("In", {"n1"})), n).ok());
  CHECK_FALSE(verdict(pod("p").requiredAffinity(fieldTerm("In", {"n2"})), n).ok());
  // Terms are ORed.
  CHECK(verdict(pod("p").requiredAffinity(fieldTerm("In", {"n2"})).requiredAffinity(term("zone", "Exists", {})), n).ok());
}

TEST_CASE("VolumeBinding: a bound volume's node affinity must match, and the volume must exist",
          "[filter]") {
  ClusterCache cache({});
  cache.addNode(node("n1").label("zone", "a"));
  cache.addNode(node("n2").label("zone", "b"));
  const NodeInfo& n1 = cache.node(*cache.findNode("n1"));
  const NodeInfo& n2 = cache.node(*cache.findNode("n2"));
  proto::NodeSelector zone_a{{term("zone", "In", {"a"})}};
  PodInfoPtr zonal = *makePodInfo(pod("p"), {{"data", "pv-data", true, zone_a}});
  CHECK(filterNode(*zonal, n1).ok());
  Status s = filterNode(*zonal, n2);
  CHECK(s.code == Status::Code::kUnschedulableAndUnresolvable);
  CHECK(reasonOf(s) == "node(s) had volume node affinity conflict");
  // Every volume counts (a second one only in zone b: no node has both).
  proto::NodeSelector zone_b{{term("zone", "In", {"b"})}};
  PodInfoPtr both = *makePodInfo(
      pod("p"), {{"data", "pv-data", true, zone_a}, {"logs", "pv-logs", true, zone_b}});
  CHECK_FALSE(filterNode(*both, n1).ok());
  CHECK_FALSE(filterNode(*both, n2).ok());
  // A volume without node affinity goes anywhere; one that does not exist, nowhere.
  CHECK(filterNode(**makePodInfo(pod("p"), {{"data", "pv-data", true, std::nullopt}}), n2).ok());
  Status missing = filterNode(**makePodInfo(pod("p"), {{"data", "pv-gone", false, std::nullopt}}), n1);
  CHECK(reasonOf(missing) == "PersistentVolume pv-gone of claim data not found");
  // Pods alike but for their volumes are told apart (the placement groups pods by signature).
  CHECK(zonal->constraint_signature != (*makePodInfo(pod("p")))->constraint_signature);
  CHECK(zonal->constraint_signature != both->constraint_signature);
}

TEST_CASE("NodePorts: a host port in use on the node conflicts", "[filter]") {
  proto::Node n = node("n1");
  std::vector<proto::Pod> others{pod("other").hostPort(8080).onNode("n1")};
  CHECK(reasonOf(verdict(pod("p").hostPort(8080), n, others)) ==
        "node(s) didn't have free ports for the requested pod ports");
  CHECK(verdict(pod("p").hostPort(8081), n, others).ok());
  CHECK(verdict(pod("p").hostPort(8080, "", "UDP"), n, others).ok());
}

TEST_CASE("NodePorts: 0.0.0.0 conflicts with every address, distinct addresses do not",
          "[filter]") {
  proto::Node n = node("n1");
  std::vector<proto::Pod> specific{pod("other").hostPort(80, "10.0.0.1").onNode("n1")};
  CHECK(verdict(pod("p").hostPort(80, "10.0.0.2"), n, specific).ok());
  CHECK_FALSE(verdict(pod("p").hostPort(80, "10.0.0.1"), n, specific).ok());
  CHECK_FALSE(verdict(pod("p").hostPort(80), n, specific).ok());
}

TEST_CASE("preferred node affinity scores the summed weights of matching terms", "[filter]") {
  ClusterCache cache({});
  cache.addNode(node("n1").label("zone", "a").label("fast", "yes"));
  PodInfoPtr p = pod("p").preferredAffinity(5, term("zone", "In", {"a"}))
                     .preferredAffinity(3, term("fast", "Exists", {}))
                     .preferredAffinity(7, term("zone", "In", {"b"}))
                     .info();
  CHECK(preferredAffinityScore(*p, cache.node(*cache.findNode("n1"))) == 8);
}

TEST_CASE("the diagnosis reads like kube-scheduler's message", "[filter]") {
  FilterDiagnosis d;
  for (int i = 0; i < 4; ++i) d.add(Status::unschedulable("Insufficient nvidia.com/gpu"));
  for (int i = 0; i < 8; ++i) d.add(Status::unresolvable("node(s) were unschedulable"));
  CHECK(d.message() ==
        "0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 8 node(s) were unschedulable.");
}

TEST_CASE("unsupported features are listed so the pod is not scheduled without them", "[filter]") {
  proto::Pod p = pod("p");
  CHECK(unsupported(p).empty());
  // Inter-pod terms are supported (interpod_test.cc), namespaceSelector included.
  p.spec.affinity.emplace();
  proto::PodAffinityTerm term;
  term.label_selector.emplace();
  term.topology_key = "kubernetes.io/hostname";
  term.namespace_selector.emplace().match_labels["team"] = "ml";
  p.spec.affinity->pod_anti_affinity.required.push_back(term);
  p.spec.affinity->has_pod_anti_affinity = true;
  p.spec.affinity->pod_affinity.preferred.push_back({10, term});
  p.spec.affinity->has_pod_affinity = true;
  CHECK(unsupported(p).empty());
  p.spec.has_topology_spread_constraints = true;
  p.spec.has_resource_claims = true;
  // Claims are checked by the scheduler (ClaimCheck), not refused as unsupported.
  p.spec.pvc_claim_names = {"data", "scratch"};
  std::vector<std::string> u = unsupported(p);
  REQUIRE(u.size() == 1);  // topology spread constraints are supported (spread_test.cc)
  CHECK(u[0] == "dynamic resource allocation (spec.resourceClaims)");
}

}  // namespace
}  // namespace muster::scheduler

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;

Status exclusiveVerdict(const testing::PodBuilder& p, std::vector<proto::Pod> others) {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  for (const proto::Pod& o : others) cache.addPod(o);
  return filterNode(*p.info(), cache.node(*cache.findNode("n1")));
}

proto::Pod daemonSetPod(const std::string& name) {
  proto::Pod p = pod(name).cpu("100m").onNode("n1");
  p.meta.owner_references.push_back({"apps/v1", "DaemonSet", "agent", "uid-ds", true, true});
  return p;
}

TEST_CASE("an exclusive pod goes only to a node without other pods, DaemonSet pods aside",
          "[filter]") {
  auto exclusive = pod("batch").gpus(1).annotation("muster.dev/exclusive", "true");
  CHECK(exclusiveVerdict(exclusive, {}).ok());
  CHECK(exclusiveVerdict(exclusive, {daemonSetPod("agent-x")}).ok());
  Status s = exclusiveVerdict(exclusive, {pod("other").gpus(1).onNode("n1")});
  CHECK(s.code == Status::Code::kUnschedulable);
  CHECK(s.reasons == std::vector<std::string>{std::string(kReasonNotEmptyForExclusive)});
}

TEST_CASE("no pod joins a node held by an exclusive pod, though resources are free", "[filter]") {
  proto::Pod holder = pod("batch").gpus(1).annotation("muster.dev/exclusive", "true").onNode("n1");
  Status s = exclusiveVerdict(pod("small").cpu("100m"), {holder});
  CHECK(s.reasons == std::vector<std::string>{std::string(kReasonHeldExclusively)});
  CHECK(exclusiveVerdict(pod("small").cpu("100m").annotation("muster.dev/exclusive", "false"),
                         {pod("other").gpus(1).onNode("n1")})
            .ok());
}

}  // namespace
}  // namespace muster::scheduler
