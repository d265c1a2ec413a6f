#pragma once

// Builders that make scheduler scenarios read like prose:
//   node("n1").gpus(8).rack("r1")          pod("w0").gpus(8).gang("train", 16)

#include <string>
#include <utility>

#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler::testing {

inline proto::Quantity q(const std::string& text) { return *proto::Quantity::parse(text); }

inline constexpr const char* kBlock = "muster.dev/block";
inline constexpr const char* kSpine = "muster.dev/spine";
inline constexpr const char* kRack = "muster.dev/rack";

class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name) {
    n_.meta.name = std::move(name);
    n_.meta.labels["kubernetes.io/hostname"] = n_.meta.name;  // as every kubelet sets it
    n_.status.allocatable = {{"cpu", q("64")}, {"memory", q("512Gi")}, {"pods", q("110")}};
    n_.status.conditions.push_back({"Ready", "True", "KubeletReady", ""});
  }
  NodeBuilder& gpus(int n) { return resource("nvidia.com/gpu", std::to_string(n)); }
  NodeBuilder& cpu(const std::string& v) { return resource("cpu", v); }
  NodeBuilder& memory(const std::string& v) { return resource("memory", v); }
  NodeBuilder& maxPods(int n) { return resource("pods", std::to_string(n)); }
  NodeBuilder& resource(const std::string& name, const std::string& v) {
    n_.status.allocatable[name] = q(v);
    return *this;
  }
  NodeBuilder& label(const std::string& k, const std::string& v) {
    n_.meta.labels[k] = v;
    return *this;
  }
  NodeBuilder& rack(const std::string& v) { return label(kRack, v); }
  NodeBuilder& spine(const std::string& v) { return label(kSpine, v); }
  NodeBuilder& block(const std::string& v) { return label(kBlock, v); }
  NodeBuilder& taint(const std::string& k, const std::string& v, const std::string& effect) {
    n_.spec.taints.push_back({k, v, effect});
    return *this;
  }
  NodeBuilder& cordoned() {
    n_.spec.unschedulable = true;
    return *this;
  }
  NodeBuilder& notReady() {
    n_.status.conditions[0].status = "False";
    return *this;
  }
  proto::Node build() const { return n_; }
  operator proto::Node() const { return n_; }

 private:
  proto::Node n_;
};
inline NodeBuilder node(std::string name) { return NodeBuilder(std::move(name)); }

class PodBuilder {
 public:
  explicit PodBuilder(std::string name) {
    p_.meta.name = std::move(name);
    p_.meta.namespace_ = "ml";
    p_.meta.uid = "uid-" + p_.meta.name;
    p_.spec.scheduler_name = "muster-scheduler";
    p_.spec.containers.push_back(proto::Container{"main", "image", {}, {}, ""});
    p_.status.phase = "Pending";
  }
  PodBuilder& ns(const std::string& v) {
    p_.meta.namespace_ = v;
    return *this;
  }
  PodBuilder& request(const std::string& name, const std::string& v) {
    p_.spec.containers[0].resources.requests[name] = q(v);
    return *this;
  }
  PodBuilder& limit(const std::string& name, const std::string& v) {
    p_.spec.containers[0].resources.limits[name] = q(v);
    return *this;
  }
  PodBuilder& gpus(int n) { return request("nvidia.com/gpu", std::to_string(n)); }
  // A fraction of one GPU (muster.dev/gpu-fraction), e.g. "0.5".
  PodBuilder& gpuFraction(const std::string& v) { return annotation("muster.dev/gpu-fraction", v); }
  PodBuilder& cpu(const std::string& v) { return request("cpu", v); }
  PodBuilder& memory(const std::string& v) { return request("memory", v); }
  PodBuilder& container(const std::string& name, proto::ResourceList requests) {
    proto::Container c{name, "image", {}, {}, ""};
    c.resources.requests = std::move(requests);
    p_.spec.containers.push_back(std::move(c));
    return *this;
  }
  PodBuilder& initContainer(const std::string& name, proto::ResourceList requests) {
    proto::Container c{name, "image", {}, {}, ""};
    c.resources.requests = std::move(requests);
    p_.spec.init_containers.push_back(std::move(c));
    return *this;
  }
  // A native sidecar: an init container with restartPolicy Always.
  PodBuilder& sidecar(const std::string& name, proto::ResourceList requests) {
    initContainer(name, std::move(requests));
    p_.spec.init_containers.back().restart_policy = "Always";
    return *this;
  }
  PodBuilder& overhead(const std::string& name, const std::string& v) {
    p_.spec.overhead[name] = q(v);
    return *this;
  }
  PodBuilder& gang(const std::string& name, int size) {
    p_.meta.annotations["gang-scheduling.preferred.jp/gang-name"] = name;
    p_.meta.annotations["gang-scheduling.preferred.jp/gang-size"] = std::to_string(size);
    return *this;
  }
  PodBuilder& podGroup(const std::string& name) {
    p_.meta.labels["scheduling.x-k8s.io/pod-group"] = name;
    return *this;
  }
  // spec.schedulingGroup.podGroupName: a scheduling.k8s.io/v1alpha2 PodGroup.
  PodBuilder& schedulingGroup(const std::string& name) {
    p_.spec.scheduling_group = name;
    return *this;
  }
  PodBuilder& annotation(const std::string& k, const std::string& v) {
    p_.meta.annotations[k] = v;
    return *this;
  }
  PodBuilder& topologyRequired(const std::string& level) {
    return annotation("muster.dev/topology-required", level);
  }
  PodBuilder& topologyPreferred(const std::string& level) {
    return annotation("muster.dev/topology-preferred", level);
  }
  PodBuilder& schedulerName(const std::string& name) {
    p_.spec.scheduler_name = name;
    return *this;
  }
  // status.nominatedNodeName, as another scheduler sets it.
  PodBuilder& nominatedTo(const std::string& node) {
    p_.status.nominated_node_name = node;
    return *this;
  }
  PodBuilder& priority(int32_t p) {
    p_.spec.priority = p;
    return *this;
  }
  PodBuilder& started(const std::string& ts) {
    p_.status.start_time = ts;
    return *this;
  }
  PodBuilder& preemptionPolicy(const std::string& v) {
    p_.spec.preemption_policy = v;
    return *this;
  }
  PodBuilder& created(const std::string& ts) {
    p_.meta.creation_timestamp = ts;
    return *this;
  }
  PodBuilder& nodeSelector(const std::string& k, const std::string& v) {
    p_.spec.node_selector[k] = v;
    return *this;
  }
  PodBuilder& requiredAffinity(proto::NodeSelectorTerm term) {
    if (!p_.spec.affinity) p_.spec.affinity.emplace();
    if (!p_.spec.affinity->node_affinity.required) p_.spec.affinity->node_affinity.required.emplace();
    p_.spec.affinity->node_affinity.required->node_selector_terms.push_back(std::move(term));
    return *this;
  }
  PodBuilder& preferredAffinity(int32_t weight, proto::NodeSelectorTerm term) {
    if (!p_.spec.affinity) p_.spec.affinity.emplace();
    p_.spec.affinity->node_affinity.preferred.push_back({weight, std::move(term)});
    return *this;
  }
  PodBuilder& toleration(const std::string& key, const std::string& op, const std::string& value,
                         const std::string& effect) {
    p_.spec.tolerations.push_back({key, op, value, effect, std::nullopt});
    return *this;
  }
  PodBuilder& hostPort(int32_t port, const std::string& ip = "", const std::string& protocol = "TCP") {
    p_.spec.containers[0].ports.push_back({port, port, ip, protocol});
    return *this;
  }
  PodBuilder& label(const std::string& k, const std::string& v) {
    p_.meta.labels[k] = v;
    return *this;
  }
  // A required podAffinity / podAntiAffinity term selecting pods labelled `k`=`v` (in the pod's
  // namespace) on `topology_key`.
  PodBuilder& requiredAffinity(const std::string& k, const std::string& v,
                               const std::string& topology_key) {
    affinityTerms().pod_affinity.required.push_back(podTerm(k, v, topology_key));
    p_.spec.affinity->has_pod_affinity = true;
    return *this;
  }
  PodBuilder& requiredAntiAffinity(const std::string& k, const std::string& v,
                                   const std::string& topology_key) {
    affinityTerms().pod_anti_affinity.required.push_back(podTerm(k, v, topology_key));
    p_.spec.affinity->has_pod_anti_affinity = true;
    return *this;
  }
  PodBuilder& preferredPodAffinity(int32_t weight, const std::string& k, const std::string& v,
                                   const std::string& topology_key) {
    affinityTerms().pod_affinity.preferred.push_back({weight, podTerm(k, v, topology_key)});
    p_.spec.affinity->has_pod_affinity = true;
    return *this;
  }
  PodBuilder& preferredPodAntiAffinity(int32_t weight, const std::string& k, const std::string& v,
                                       const std::string& topology_key) {
    affinityTerms().pod_anti_affinity.preferred.push_back({weight, podTerm(k, v, topology_key)});
    p_.spec.affinity->has_pod_anti_affinity = true;
    return *this;
  }
  // A topology spread constraint counting pods labelled `k`=`v`.
  PodBuilder& spread(const std::string& key, int32_t max_skew, const std::string& when,
                     const std::string& k, const std::string& v,
                     std::optional<int32_t> min_domains = std::nullopt) {
    proto::TopologySpreadConstraint c;
    c.max_skew = max_skew;
    c.topology_key = key;
    c.when_unsatisfiable = when;
    c.label_selector.emplace().match_labels[k] = v;
    c.min_domains = min_domains;
    p_.spec.topology_spread_constraints.push_back(std::move(c));
    p_.spec.has_topology_spread_constraints = true;
    return *this;
  }
  proto::TopologySpreadConstraint& lastSpread() { return p_.spec.topology_spread_constraints.back(); }
  static proto::PodAffinityTerm podTerm(const std::string& k, const std::string& v,
                                        const std::string& topology_key) {
    proto::PodAffinityTerm t;
    t.label_selector.emplace().match_labels[k] = v;
    t.topology_key = topology_key;
    return t;
  }
  PodBuilder& onNode(const std::string& node) {
    p_.spec.node_name = node;
    p_.status.phase = "Running";
    return *this;
  }
  PodBuilder& phase(const std::string& v) {
    p_.status.phase = v;
    return *this;
  }
  PodBuilder& gate(const std::string& name) {
    p_.spec.scheduling_gates.push_back(name);
    return *this;
  }
  PodBuilder& deleting() {
    p_.meta.deletion_timestamp = "2024-01-01T00:00:00Z";
    return *this;
  }
  PodBuilder& claim(const std::string& name) {
    p_.spec.pvc_claim_names.push_back(name);
    return *this;
  }
  proto::Affinity& affinityTerms() {
    if (!p_.spec.affinity) p_.spec.affinity.emplace();
    return *p_.spec.affinity;
  }
  proto::Pod build() const { return p_; }
  operator proto::Pod() const { return p_; }
  PodInfoPtr info() const { return *makePodInfo(p_); }

 private:
  proto::Pod p_;
};
inline PodBuilder pod(std::string name) { return PodBuilder(std::move(name)); }

inline proto::NodeSelectorTerm term(const std::string& key, const std::string& op,
                                    std::vector<std::string> values) {
  proto::NodeSelectorTerm t;
  t.match_expressions.push_back({key, op, std::move(values)});
  return t;
}
inline proto::NodeSelectorTerm fieldTerm(const std::string& op, std::vector<std::string> values) {
  proto::NodeSelectorTerm t;
  t.match_fields.push_back({"metadata.name", op, std::move(values)});
  return t;
}

// A cache with the given levels holding racks × nodes_per_rack nodes of `gpus` GPUs each, named
// r<rack>-n<node>, rack r<rack> in spine s<rack / racks_per_spine>.
inline void addRacks(ClusterCache& cache, int racks, int nodes_per_rack, int gpus,
                     int racks_per_spine = 1000) {
  for (int r = 0; r < racks; ++r) {
    for (int n = 0; n < nodes_per_rack; ++n) {
      cache.addNode(node("r" + std::to_string(r) + "-n" + std::to_string(n))
                        .gpus(gpus)
                        .rack("r" + std::to_string(r))
                        .spine("s" + std::to_string(r / racks_per_spine)));
    }
  }
}

}  // namespace muster::scheduler::testing
