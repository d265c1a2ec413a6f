#include "scheduler/filter.h"

#include "proto/vocabulary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster::scheduler {

Status filterNodeUnschedulable(const PodInfo& pod, const NodeInfo& node) {
  if (!node.unschedulable) return Status::success();
  proto::Taint taint{std::string(kTaintUnschedulable), "", "NoSchedule"};
  for (const proto::Toleration& t : pod.pod().spec.tolerations) {
    if (proto::tolerates(t, taint)) return Status::success();
  }
  return Status::unresolvable(std::string(kReasonUnschedulable));
}

Status filterNodeName(const PodInfo& pod, const NodeInfo& node) {
  const std::string& want = pod.pod().spec.node_name;
  if (want.empty() || want == node.name) return Status::success();
  return Status::unresolvable(std::string(kReasonNodeName));
}

Status filterTaintToleration(const PodInfo& pod, const NodeInfo& node) {
  const auto& tolerations = pod.pod().spec.tolerations;
  if (!node.taints.empty()) {
    if (const proto::Taint* t = proto::findUntoleratedTaint(node.taints, tolerations)) {
      return Status::unresolvable(
          absl::StrCat("node(s) had untolerated taint {", t->key, ": ", t->value, "}"));
    }
  }
  if (!node.ready) {
    // The node lifecycle controller will taint it not-ready; judge as if it had.
    std::vector<proto::Taint> not_ready{{std::string(kTaintNotReady), "", "NoSchedule"}};
    if (const proto::Taint* t = proto::findUntoleratedTaint(not_ready, tolerations)) {
      return Status::unresolvable(
          absl::StrCat("node(s) had untolerated taint {", t->key, ": ", t->value, "}"));
    }
  }
  return Status::success();
}

Status filterNodeAffinity(const PodInfo& pod, const NodeInfo& node) {
  const proto::PodSpec& spec = pod.pod().spec;
  for (const auto& [key, value] : spec.node_selector) {
    auto it = node.labels().find(key);
    if (it == node.labels().end() || it->second != value) {
      return Status::unresolvable(std::string(kReasonNodeAffinity));
    }
  }
  if (spec.affinity && spec.affinity->node_affinity.required &&
      !spec.affinity->node_affinity.required->matches(node.labels(), node.name)) {
    return Status::unresolvable(std::string(kReasonNodeAffinity));
  }
  return Status::success();
}

std::optional<std::string> volumeFor(const VolumeConstraint& v, const proto::Labels& node_labels,
                                     std::string_view node_name,
                                     const std::set<std::string, std::less<>>& taken) {
  for (const CandidateVolume& c : v.candidates) {
    if (taken.contains(c.name)) continue;
    if (!c.node_affinity || c.node_affinity->matches(node_labels, node_name)) return c.name;
  }
  if (!canProvisionOn(v, node_labels, node_name)) return std::nullopt;
  return std::string();
}

bool canProvisionOn(const VolumeConstraint& v, const proto::Labels& node_labels,
                    std::string_view node_name) {
  if (!v.provisionable) return false;
  if (!v.selected_node.empty() && v.selected_node != node_name) return false;
  return !v.provision_topology || v.provision_topology->node_selector_terms.empty() ||
         v.provision_topology->matches(node_labels, "");
}

Status filterVolumeBinding(const PodInfo& pod, const NodeInfo& node) {
  for (const VolumeConstraint& v : pod.volumes) {
    if (v.to_bind) {
      if (!volumeFor(v, node.labels(), node.name))
        return Status::unresolvable(std::string(kReasonVolumeBindConflict));
      continue;
    }
    if (!v.found) {
      return Status::unresolvable(absl::StrCat("PersistentVolume ", v.volume, " of claim ", v.claim,
                                               " not found"));
    }
    if (v.node_affinity && !v.node_affinity->matches(node.labels(), node.name)) {
      return Status::unresolvable(std::string(kReasonVolumeNodeAffinity));
    }
  }
  return Status::success();
}

Status filterNodePorts(const PodInfo& pod, const NodeInfo& node) {
  for (const HostPort& want : pod.host_ports) {
    for (const HostPort& used : node.used_ports) {
      if (conflicts(want, used)) return Status::unschedulable(std::string(kReasonNodePorts));
    }
  }
  return Status::success();
}

Status filterNodeResourcesFit(const PodInfo& pod, const NodeInfo& node, const Resources& extra) {
  Status status;
  auto free = [&](ResourceId id) {
    return saturatingSub(node.freeOf(id), extra[id]);
  };
  if (pod.requests[kPods] > free(kPods)) status.reasons.emplace_back(kReasonTooManyPods);
  for (ResourceId id : {kCpu, kMemory, kEphemeralStorage}) {
    if (pod.requests[id] > 0 && pod.requests[id] > free(id)) {
      status.reasons.push_back(absl::StrCat("Insufficient ", resourceName(id)));
    }
  }
  if (pod.requests[kNodeShare] > free(kNodeShare)) {
    status.reasons.emplace_back(pod.requests[kNodeShare] >= kNodeShares ? kReasonNotEmptyForExclusive
                                                                        : kReasonHeldExclusively);
  }
  for (int i = kFirstNamed; i < resourceCount(); ++i) {
    ResourceId id = static_cast<ResourceId>(i);
    if (pod.requests[id] > 0 && pod.requests[id] > free(id)) {
      status.reasons.push_back(absl::StrCat("Insufficient ", resourceName(id)));
    }
  }
  // A fraction of a GPU: no GPU of the node has that much free.
  if (pod.gpu_milli > 0) {
    const std::optional<ResourceId> gpu = findResource(proto::vocabulary::kGpuResource);
    if (!gpu || fractionRoom(node, *gpu, pod.gpu_milli, extra[*gpu]) < 1)
      status.reasons.push_back(absl::StrCat("Insufficient ", proto::vocabulary::kGpuResource));
  }
  // No node advertises these (as kube-scheduler says of a node without the resource).
  for (const std::string& name : pod.unadvertised) {
    status.reasons.push_back(absl::StrCat("Insufficient ", name));
  }
  if (!status.reasons.empty()) status.code = Status::Code::kUnschedulable;
  return status;
}

Status filterStatic(const PodInfo& pod, const NodeInfo& node) {
  if (Status s = filterNodeUnschedulable(pod, node); !s.ok()) return s;
  if (Status s = filterNodeName(pod, node); !s.ok()) return s;
  if (Status s = filterTaintToleration(pod, node); !s.ok()) return s;
  if (Status s = filterNodeAffinity(pod, node); !s.ok()) return s;
  return filterVolumeBinding(pod, node);
}

Status filterNode(const PodInfo& pod, const NodeInfo& node) {
  if (Status s = filterStatic(pod, node); !s.ok()) return s;
  if (Status s = filterNodePorts(pod, node); !s.ok()) return s;
  return filterNodeResourcesFit(pod, node);
}

int64_t preferredAffinityScore(const PodInfo& pod, const NodeInfo& node) {
  if (!pod.has_preferred_affinity) return 0;
  return proto::preferredSchedulingScore(pod.pod().spec.affinity->node_affinity.preferred,
                                         node.labels(), node.name);
}

void FilterDiagnosis::add(const Status& status) {
  if (status.ok()) {
    addAvailable();
    return;
  }
  ++total_;
  for (const std::string& r : status.reasons) ++reasons_[r];
}

std::string FilterDiagnosis::message() const {
  std::string msg = absl::StrCat(available_, "/", total_, " nodes are available");
  if (reasons_.empty()) return msg + ".";
  std::vector<std::string> parts;
  for (const auto& [reason, count] : reasons_) parts.push_back(absl::StrCat(count, " ", reason));
  std::sort(parts.begin(), parts.end());
  return absl::StrCat(msg, ": ", absl::StrJoin(parts, ", "), ".");
}

std::vector<std::string> unsupported(const proto::Pod& pod) {
  std::vector<std::string> out;
  if (pod.spec.has_resource_claims) {
    out.push_back("dynamic resource allocation (spec.resourceClaims)");
  }
  return out;
}

}  // namespace muster::scheduler
