#include "scheduler/volume_binding.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>

#include "scheduler/filter.h"
#include "scheduler/placement.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {

using testing::node;
using testing::q;

// The informers' content, as VolumeLookups reads it.
struct Objects {
  std::map<std::string, std::shared_ptr<const proto::PersistentVolumeClaim>> claims;  // "ns/name"
  std::map<std::string, std::shared_ptr<const proto::StorageClass>> classes;
  std::map<std::string, std::shared_ptr<const proto::PersistentVolume>> volumes;

  VolumeLookups lookups() const {
    return {
        [this](std::string_view ns, std::string_view name) -> std::shared_ptr<const proto::PersistentVolumeClaim> {
          auto it = claims.find(std::string(ns) + "/" + std::string(name));
          return it == claims.end() ? nullptr : it->second;
        },
        [this](std::string_view name) -> std::shared_ptr<const proto::StorageClass> {
          auto it = classes.find(std::string(name));
          return it == classes.end() ? nullptr : it->second;
        },
        [this](std::string_view name) -> std::shared_ptr<const proto::PersistentVolume> {
          auto it = volumes.find(std::string(name));
          return it == volumes.end() ? nullptr : it->second;
        },
        [this] {
          std::vector<std::shared_ptr<const proto::PersistentVolume>> all;
          for (const auto& [_, v] : volumes) all.push_back(v);
          return all;
        },
    };
  }
  proto::PersistentVolumeClaim& claim(const std::string& name, const std::string& cls,
                                      const std::string& size = "10Gi") {
    auto c = std::make_shared<proto::PersistentVolumeClaim>();
    c->meta.name = name;
    c->meta.namespace_ = "ml";
    c->meta.uid = "uid-claim-" + name;
    c->storage_class_name = cls;
    c->storage_request = q(size);
    c->access_modes = {"ReadWriteOnce"};
    c->phase = "Pending";
    claims["ml/" + name] = c;
    return *c;
  }
  proto::StorageClass& storageClass(const std::string& name, const std::string& mode,
                                    const std::string& provisioner) {
    auto c = std::make_shared<proto::StorageClass>();
    c->meta.name = name;
    c->volume_binding_mode = mode;
    c->provisioner = provisioner;
    classes[name] = c;
    return *c;
  }
  proto::PersistentVolume& volume(const std::string& name, const std::string& cls,
                                  const std::string& capacity, const std::string& on_node = "") {
    auto v = std::make_shared<proto::PersistentVolume>();
    v->meta.name = name;
    v->meta.resource_version = "rv-" + name;
    v->storage_class_name = cls;
    v->capacity = q(capacity);
    v->access_modes = {"ReadWriteOnce", "ReadOnlyMany"};
    v->phase = "Available";
    if (!on_node.empty()) {
      proto::NodeSelectorTerm t;
      t.match_expressions.push_back({"kubernetes.io/hostname", "In", {on_node}});
      v->node_affinity.emplace().node_selector_terms.push_back(t);
    }
    volumes[name] = v;
    return *v;
  }
};

proto::Pod podWithClaims(const std::string& name, std::vector<std::string> claims) {
  proto::Pod p = testing::pod(name).gpus(1).build();
  p.spec.pvc_claim_names = std::move(claims);
  return p;
}

proto::Labels labelsOf(const std::string& n) { return {{"kubernetes.io/hostname", n}}; }

TEST_CASE("which claims keep a pod waiting, in kube-scheduler's words", "[volumes]") {
  Objects o;
  o.storageClass("wffc", "WaitForFirstConsumer", "csi.example.com");
  o.storageClass("now", "Immediate", "csi.example.com");
  o.claim("a", "wffc");
  CHECK(claimProblem(podWithClaims("p", {"a"}), o.lookups()).empty());
  CHECK(claimProblem(podWithClaims("p", {"missing"}), o.lookups()) ==
        "persistentvolumeclaim \"missing\" not found");
  o.claim("b", "now");
  CHECK(claimProblem(podWithClaims("p", {"a", "b"}), o.lookups()) ==
        "pod has unbound immediate PersistentVolumeClaims");
  o.claim("c", "");
  CHECK(claimProblem(podWithClaims("p", {"c"}), o.lookups()) ==
        "pod has unbound immediate PersistentVolumeClaims");
  o.claim("d", "gone");
  CHECK(claimProblem(podWithClaims("p", {"d"}), o.lookups()) ==
        "storageclass.storage.k8s.io \"gone\" not found");
  // Bound claims are fine whatever their class.
  proto::PersistentVolumeClaim& b = o.claim("e", "now");
  b.volume_name = "pv-e";
  b.phase = "Bound";
  CHECK(claimProblem(podWithClaims("p", {"e"}), o.lookups()).empty());
  o.claim("f", "wffc").meta.deletion_timestamp = "2026-12-04T00:00:00Z";
  CHECK(claimProblem(podWithClaims("p", {"f"}), o.lookups()) ==
        "persistentvolumeclaim \"f\" is being deleted");
  // Ephemeral: created by the ephemeral volume controller, owned by the pod.
  proto::Pod eph = podWithClaims("p", {"p-scratch"});
  eph.spec.ephemeral_claim_names = {"p-scratch"};
  CHECK(claimProblem(eph, o.lookups()) ==
        "waiting for ephemeral volume controller to create the persistentvolumeclaim "
        "\"p-scratch\"");
  proto::PersistentVolumeClaim& owned = o.claim("p-scratch", "wffc");
  CHECK(claimProblem(eph, o.lookups()) == "PVC ml/p-scratch was not created for pod ml/p (pod is not owner)");
  owned.meta.owner_references.push_back({"v1", "Pod", "p", eph.meta.uid, true, true});
  CHECK(claimProblem(eph, o.lookups()).empty());
}

TEST_CASE("a volume serves a claim only with its class, modes, size and selector, and when free",
          "[volumes]") {
  Objects o;
  proto::PersistentVolumeClaim& c = o.claim("c", "local", "10Gi");
  proto::PersistentVolume& v = o.volume("v", "local", "10Gi");
  CHECK(volumeMatchesClaim(v, c));
  v.capacity = q("9Gi");
  CHECK_FALSE(volumeMatchesClaim(v, c));
  v.capacity = q("10Gi");
  v.storage_class_name = "other";
  CHECK_FALSE(volumeMatchesClaim(v, c));
  v.storage_class_name = "local";
  c.access_modes = {"ReadWriteMany"};
  CHECK_FALSE(volumeMatchesClaim(v, c));
  c.access_modes = {"ReadWriteOnce"};
  v.volume_mode = "Block";
  CHECK_FALSE(volumeMatchesClaim(v, c));
  v.volume_mode = "Filesystem";  // "" and Filesystem are one mode
  CHECK(volumeMatchesClaim(v, c));
  c.selector.emplace().match_labels["disk"] = "nvme";
  CHECK_FALSE(volumeMatchesClaim(v, c));
  v.meta.labels["disk"] = "nvme";
  CHECK(volumeMatchesClaim(v, c));
  v.claim_namespace = "ml";
  v.claim_name = "someone-else";
  CHECK_FALSE(volumeMatchesClaim(v, c));
  v.claim_name = "c";  // pre-bound to this claim
  CHECK(volumeMatchesClaim(v, c));
  v.claim_name.clear();
  v.phase = "Released";
  CHECK_FALSE(volumeMatchesClaim(v, c));
}

TEST_CASE("a claim that waits for its first consumer filters nodes by its volumes or its class",
          "[volumes]") {
  Objects o;
  o.storageClass("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner");
  o.claim("scratch", "local", "10Gi");
  o.volume("big-n1", "local", "100Gi", "n1");
  o.volume("small-n1", "local", "20Gi", "n1");
  o.volume("tiny-n2", "local", "1Gi", "n2");
  std::vector<VolumeConstraint> vs = volumeConstraints(podWithClaims("p", {"scratch"}), o.lookups(), {});
  REQUIRE(vs.size() == 1);
  const VolumeConstraint& v = vs[0];
  CHECK(v.to_bind);
  CHECK_FALSE(v.provisionable);  // no-provisioner: existing volumes only
  REQUIRE(v.candidates.size() == 2);  // smallest first; the 1Gi one is too small
  CHECK(v.candidates[0].name == "small-n1");
  CHECK(volumeFor(v, labelsOf("n1"), "n1") == std::optional<std::string>("small-n1"));
  CHECK(volumeFor(v, labelsOf("n1"), "n1", {"small-n1"}) == std::optional<std::string>("big-n1"));
  CHECK_FALSE(volumeFor(v, labelsOf("n2"), "n2"));
  // As the filter says it.
  PodInfoPtr info = *makePodInfo(podWithClaims("p", {"scratch"}), vs);
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8).build());
  cache.addNode(node("n2").gpus(8).build());
  Status s = filterVolumeBinding(*info, cache.node(*cache.findNode("n2")));
  REQUIRE_FALSE(s.ok());
  CHECK(s.reasons == std::vector<std::string>{"node(s) didn't find available persistent volumes to bind"});
  CHECK(filterVolumeBinding(*info, cache.node(*cache.findNode("n1"))).ok());
  // Volumes another gang's binding is waiting for are no candidates.
  vs = volumeConstraints(podWithClaims("p", {"scratch"}), o.lookups(), {"small-n1", "big-n1"});
  CHECK(vs[0].candidates.empty());

  // A provisioner: anywhere its allowedTopologies allow, and only on the selected node once a
  // claim has one.
  proto::StorageClass& zonal = o.storageClass("zonal", "WaitForFirstConsumer", "csi.example.com");
  proto::NodeSelectorTerm t;
  t.match_expressions.push_back({"topology.kubernetes.io/zone", "In", {"a"}});
  zonal.allowed_topologies.emplace().node_selector_terms.push_back(t);
  proto::PersistentVolumeClaim& data = o.claim("data", "zonal");
  vs = volumeConstraints(podWithClaims("p", {"data"}), o.lookups(), {});
  REQUIRE(vs.size() == 1);
  CHECK(vs[0].provisionable);
  const proto::Labels in_a{{"topology.kubernetes.io/zone", "a"}};
  const proto::Labels in_b{{"topology.kubernetes.io/zone", "b"}};
  CHECK(volumeFor(vs[0], in_a, "x") == std::optional<std::string>(""));
  CHECK_FALSE(volumeFor(vs[0], in_b, "y"));
  data.meta.annotations["volume.kubernetes.io/selected-node"] = "x";
  vs = volumeConstraints(podWithClaims("p", {"data"}), o.lookups(), {});
  CHECK(volumeFor(vs[0], in_a, "x") == std::optional<std::string>(""));
  CHECK_FALSE(volumeFor(vs[0], in_a, "x2"));
  // A claim with a selector is never provisioned.
  data.meta.annotations.clear();
  data.selector.emplace().match_labels["k"] = "v";
  vs = volumeConstraints(podWithClaims("p", {"data"}), o.lookups(), {});
  CHECK_FALSE(vs[0].provisionable);
}

TEST_CASE("a gang's plan gives each claim its own volume on its member's node, a shared claim "
          "once", "[volumes]") {
  Objects o;
  o.storageClass("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner");
  o.storageClass("fast", "WaitForFirstConsumer", "csi.example.com");
  o.volume("n1-a", "local", "10Gi", "n1");
  o.volume("n1-b", "local", "10Gi", "n1");
  o.claim("w0-scratch", "local");
  o.claim("w1-scratch", "local");
  o.claim("shared", "fast");
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8).build());
  cache.addNode(node("n2").gpus(8).build());
  std::vector<PodInfoPtr> members;
  for (const std::string w : {"w0", "w1"}) {
    proto::Pod p = podWithClaims(w, {w + "-scratch", "shared"});
    members.push_back(*makePodInfo(p, volumeConstraints(p, o.lookups(), {})));
  }
  absl::StatusOr<std::vector<VolumeWrite>> plan = planVolumes(members, {"n1", "n1"}, cache, {});
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 3);
  CHECK((*plan)[0] == VolumeWrite{"ml", "w0-scratch", "uid-claim-w0-scratch", "n1-a", "rv-n1-a", "n1"});
  CHECK((*plan)[1] == VolumeWrite{"ml", "shared", "uid-claim-shared", "", "", "n1"});
  CHECK((*plan)[2] == VolumeWrite{"ml", "w1-scratch", "uid-claim-w1-scratch", "n1-b", "rv-n1-b", "n1"});
  // One volume left on n1: the second member finds none, and nothing is planned.
  plan = planVolumes(members, {"n1", "n1"}, cache, {"n1-b"});
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(std::string(plan.status().message()),
             Catch::Contains("pod ml/w1 on node n1: PersistentVolumeClaim w1-scratch: node(s) "
                             "didn't find available persistent volumes to bind"));
}

// Node volume limits (kube-scheduler's NodeVolumeLimits): n1 attaches 2 EBS volumes and has one,
// n2 attaches 1 and has none.
struct Limits {
  Objects o;
  ClusterCache cache{{}};
  static constexpr char kEbs[] = "ebs.csi.aws.com";

  Limits() {
    o.storageClass("gp3", "WaitForFirstConsumer", "kubernetes.io/aws-ebs");  // migrates to EBS
    for (const char* name : {"shared", "a", "b"}) bound(name);
    cache.addNode(node("n1").gpus(8).build());
    cache.addNode(node("n2").gpus(8).build());
    cache.setClaimDriver([this](std::string_view ns, std::string_view name) -> std::string {
      auto c = o.lookups().claim(ns, name);
      return c ? claimCsiDriver(*c, o.lookups()) : "";
    });
    cache.setVolumeLimits("n1", std::make_shared<VolumeLimits>(VolumeLimits{{kEbs, 2}}));
    cache.setVolumeLimits("n2", std::make_shared<VolumeLimits>(VolumeLimits{{kEbs, 1}}));
    cache.addPod(testing::pod("old").ns("ml").claim("shared").onNode("n1"));
  }
  void bound(const std::string& name) {
    proto::PersistentVolumeClaim& c = o.claim(name, "gp3");
    c.volume_name = "pv-" + name;
    c.phase = "Bound";
    o.volume("pv-" + name, "gp3", "10Gi").csi_driver = kEbs;
  }
  PodInfoPtr info(const std::string& name, std::vector<std::string> claims, int inline_ebs = 0) {
    proto::Pod p = podWithClaims(name, std::move(claims));
    p.meta.namespace_ = "ml";
    for (int i = 0; i < inline_ebs; ++i) p.spec.inline_csi_drivers.push_back(kEbs);
    return *makePodInfo(p, volumeConstraints(p, o.lookups(), {}));
  }
  PlacementResult placeGang(std::vector<PodInfoPtr> members) {
    GangRequest r;
    r.key = GangKey{"ml", members.size() == 1 ? members[0]->pod().meta.name : "g",
                    members.size() == 1};
    r.min_member = static_cast<int32_t>(members.size());
    r.members = std::move(members);
    return place(r, cache);
  }
};

std::string where(const PlacementResult& r) {
  if (const auto* u = std::get_if<Unschedulable>(&r)) return "unschedulable: " + u->message;
  std::string out;
  for (const Assignment& a : std::get<GangPlacement>(r).assignments) out += a.node + " ";
  return out;
}

TEST_CASE("node volume limits: a node attaches no more of a driver's volumes than its CSINode "
          "allows", "[volumes]") {
  Limits l;
  CHECK(l.info("p", {"a"})->volumes.at(0).csi_driver == Limits::kEbs);
  // Two new volumes: n1 would have 3 of 2, n2 2 of 1.
  CHECK(where(l.placeGang({l.info("two", {"a", "b"})})) ==
        "unschedulable: 0/2 nodes are available: 2 node(s) exceed max volume count.");
  // The claim n1 already attaches counts once: "shared" + "a" is 2 of 2 there.
  CHECK(where(l.placeGang({l.info("reuse", {"shared", "a"})})) == "n1 ");
  // An inline volume of the driver counts like a claim.
  CHECK(where(l.placeGang({l.info("inline", {"shared"}, 2)})) ==
        "unschedulable: 0/2 nodes are available: 2 node(s) exceed max volume count.");
  // Claims still to bind count as their class's driver, once per member: room for 1 on each.
  for (const char* c : {"c0", "c1", "c2"}) l.o.claim(c, "gp3");
  CHECK(where(l.placeGang({l.info("m0", {"c0"}), l.info("m1", {"c1"})})) == "n1 n2 ");
  const PlacementResult three =
      l.placeGang({l.info("m0", {"c0"}), l.info("m1", {"c1"}), l.info("m2", {"c2"})});
  REQUIRE(std::holds_alternative<Unschedulable>(three));
  CHECK_THAT(std::get<Unschedulable>(three).message, Catch::Contains("gang ml/g needs 3 pods"));
  // Members with different bound claims are different groups: each alone fits n1, together they
  // would attach 3 there; the fill checks them together.
  CHECK(where(l.placeGang({l.info("x", {"a"}), l.info("y", {"b"})})) == "n1 n2 ");
  // Without the limit the node takes what it has room for.
  l.cache.setVolumeLimits("n1", nullptr);
  CHECK(where(l.placeGang({l.info("two", {"a", "b"})})) == "n1 ");
}

}  // namespace
}  // namespace muster::scheduler
