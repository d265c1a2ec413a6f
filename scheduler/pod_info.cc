#include "scheduler/pod_info.h"

#include <algorithm>

#include "proto/quantity.h"
#include "proto/vocabulary.h"

#include "scheduler/interpod.h"
#include "scheduler/spread.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"

namespace muster::scheduler {
namespace {

void appendTerm(std::string* out, const proto::NodeSelectorTerm& t) {
  absl::StrAppend(out, "{");
  for (const auto& r : t.match_expressions) {
    absl::StrAppend(out, "e:", r.key, "\x1f", r.operator_);
    for (const auto& v : r.values) absl::StrAppend(out, "\x1f", v);
    absl::StrAppend(out, "\x1e");
  }
  for (const auto& r : t.match_fields) {
    absl::StrAppend(out, "f:", r.key, "\x1f", r.operator_);
    for (const auto& v : r.values) absl::StrAppend(out, "\x1f", v);
    absl::StrAppend(out, "\x1e");
  }
  absl::StrAppend(out, "}");
}

}  // namespace

std::string nodeAffinitySignature(const proto::Pod& pod) {
  const proto::PodSpec& spec = pod.spec;
  std::string s = "s:";
  for (const auto& [k, v] : spec.node_selector) absl::StrAppend(&s, k, "\x1f", v, "\x1e");
  if (spec.affinity && spec.affinity->node_affinity.required) {
    absl::StrAppend(&s, "r[");
    for (const auto& t : spec.affinity->node_affinity.required->node_selector_terms) appendTerm(&s, t);
    absl::StrAppend(&s, "]");
  }
  return s;
}

std::vector<std::string> requiredGpuModels(const proto::Pod& pod) {
  namespace vocab = proto::vocabulary;
  auto isModelKey = [](const std::string& k) { return k == vocab::kLabelGpuModel || k == vocab::kLabelGpuProduct; };
  for (const auto& [k, v] : pod.spec.node_selector)
    if (isModelKey(k)) return {v};
  if (!pod.spec.affinity || !pod.spec.affinity->node_affinity.required) return {};
  std::vector<std::string> models;
  for (const proto::NodeSelectorTerm& t : pod.spec.affinity->node_affinity.required->node_selector_terms) {
    auto e = std::find_if(t.match_expressions.begin(), t.match_expressions.end(), [&](const auto& r) {
      return isModelKey(r.key) && r.operator_ == "In";
    });
    if (e == t.match_expressions.end()) return {};
    for (const std::string& v : e->values)
      if (std::find(models.begin(), models.end(), v) == models.end()) models.push_back(v);
  }
  return models;
}

namespace {

std::string signatureOf(const PodInfo& info) {
  const proto::PodSpec& spec = info.pod().spec;
  std::string s;
  for (int i = 0; i < kMaxResources; ++i) {
    if (info.requests.v[i] != 0) absl::StrAppend(&s, i, "=", info.requests.v[i], ",");
  }
  for (const std::string& name : info.unadvertised) absl::StrAppend(&s, "?", name, ",");
  absl::StrAppend(&s, "|n:", spec.node_name, "|p:");
  for (const HostPort& p : info.host_ports) absl::StrAppend(&s, p.ip, "/", p.protocol, "/", p.port, ",");
  absl::StrAppend(&s, "|", nodeAffinitySignature(info.pod()), "|a:");
  if (spec.affinity) {
    const proto::NodeAffinity& na = spec.affinity->node_affinity;
    for (const auto& p : na.preferred) {
      absl::StrAppend(&s, "w", p.weight);
      appendTerm(&s, p.preference);
    }
  }
  absl::StrAppend(&s, "|v:");
  for (const VolumeConstraint& v : info.volumes) {
    // A claim still to bind is known by what it can be bound to, not by its name: members with
    // alike claims of their own are one group, and share its volumes' room (placement/feasibility.h).
    if (!v.to_bind) absl::StrAppend(&s, v.claim, "\x1f", v.volume, "\x1f", v.found ? "1" : "0");
    absl::StrAppend(&s, v.read_write_once_pod ? "o" : "", "\x1f", v.csi_driver);
    auto selector = [&s](const std::optional<proto::NodeSelector>& selector) {
      if (!selector) return;
      absl::StrAppend(&s, "[");
      for (const auto& t : selector->node_selector_terms) appendTerm(&s, t);
      absl::StrAppend(&s, "]");
    };
    selector(v.node_affinity);
    if (v.to_bind) {
      absl::StrAppend(&s, "|b", v.provisionable ? "p" : "", ":", v.selected_node);
      selector(v.provision_topology);
      for (const CandidateVolume& c : v.candidates) {
        absl::StrAppend(&s, "\x1d", c.name);
        selector(c.node_affinity);
      }
    }
    absl::StrAppend(&s, "\x1e");
  }
  absl::StrAppend(&s, "|c:", absl::StrJoin(spec.inline_csi_drivers, ","));
  absl::StrAppend(&s, "|i:", interPodSignature(info.pod()), "|d:", spreadSignature(info.pod()), "|t:");
  for (const proto::Toleration& t : spec.tolerations) {
    absl::StrAppend(&s, t.key, "\x1f", t.operator_, "\x1f", t.value, "\x1f", t.effect, "\x1e");
  }
  return s;
}

}  // namespace

std::string podKey(const proto::Pod& pod) {
  return absl::StrCat(pod.meta.namespace_, "/", pod.meta.name);
}

std::vector<HostPort> hostPortsOf(const proto::Pod& pod) {
  std::vector<HostPort> out;
  auto add = [&](const std::vector<proto::Container>& containers) {
    for (const proto::Container& c : containers) {
      for (const proto::ContainerPort& p : c.ports) {
        int32_t port = p.host_port;
        if (port == 0 && pod.spec.host_network) port = p.container_port;
        if (port <= 0) continue;
        out.push_back(HostPort{p.host_ip.empty() ? "0.0.0.0" : p.host_ip,
                               p.protocol.empty() ? "TCP" : p.protocol, port});
      }
    }
  };
  add(pod.spec.init_containers);
  add(pod.spec.containers);
  return out;
}

bool conflicts(const HostPort& a, const HostPort& b) {
  if (a.port != b.port || a.protocol != b.protocol) return false;
  return a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0";
}

absl::StatusOr<PodInfoPtr> makePodInfo(std::shared_ptr<const proto::Pod> shared,
                                       std::vector<VolumeConstraint> volumes) {
  const proto::Pod& pod = *shared;
  auto info = std::make_shared<PodInfo>();
  info->resource_count = resourceCount();
  absl::StatusOr<Resources> requests = podRequests(pod, &info->unadvertised);
  if (!requests.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pod ", podKey(pod), ": ", requests.status().message()));
  }
  info->key = podKey(pod);
  info->requests = *requests;
  info->host_ports = hostPortsOf(pod);
  info->priority = pod.spec.priority.value_or(0);
  info->volumes = std::move(volumes);
  info->has_node_selector = !pod.spec.node_selector.empty() ||
                            (pod.spec.affinity && pod.spec.affinity->node_affinity.required) ||
                            !info->volumes.empty();
  info->has_preferred_affinity =
      pod.spec.affinity && !pod.spec.affinity->node_affinity.preferred.empty();
  info->shared_pod = std::move(shared);
  info->constraint_signature = signatureOf(*info);
  info->gpu_models = requiredGpuModels(pod);
  absl::StatusOr<int32_t> milli = gpuFractionMilli(pod);
  if (!milli.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("pod ", info->key, ": ", milli.status().message()));
  }
  info->gpu_milli = *milli;
  // Pods with different fractions are different shapes (a gang's groups).
  if (*milli > 0) absl::StrAppend(&info->constraint_signature, "|f:", *milli);
  return PodInfoPtr(std::move(info));
}

absl::StatusOr<PodInfoPtr> makePodInfo(proto::Pod pod, std::vector<VolumeConstraint> volumes) {
  return makePodInfo(std::make_shared<const proto::Pod>(std::move(pod)), std::move(volumes));
}

absl::StatusOr<int32_t> gpuFractionMilli(const proto::Pod& pod) {
  namespace vocab = proto::vocabulary;
  auto it = pod.meta.annotations.find(vocab::kGpuFractionAnnotation);
  if (it == pod.meta.annotations.end()) return 0;
  absl::StatusOr<proto::Quantity> q = proto::Quantity::parse(it->second);
  const int64_t milli = q.ok() ? q->milliValue() : 0;
  if (!q.ok() || q->sign() <= 0 || milli >= 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "annotation ", vocab::kGpuFractionAnnotation, " must be a quantity above 0 and below 1 (\"0.5\", \"250m\"), got \"",
        it->second, "\"; a pod that needs a whole GPU or more requests ", vocab::kGpuResource));
  }
  for (const auto* containers : {&pod.spec.containers, &pod.spec.init_containers}) {
    for (const proto::Container& c : *containers) {
      for (const auto* list : {&c.resources.requests, &c.resources.limits}) {
        auto r = list->find(vocab::kGpuResource);
        if (r != list->end() && !r->second.isZero()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the pod asks for a fraction of a GPU (", vocab::kGpuFractionAnnotation, ": ", it->second,
              ") and for whole ", vocab::kGpuResource, " too; ask for one or the other"));
        }
      }
    }
  }
  return static_cast<int32_t>(milli);
}

std::optional<int32_t> gpuIndexOf(const proto::Pod& pod) {
  auto it = pod.meta.annotations.find(proto::vocabulary::kGpuIndexAnnotation);
  int32_t index = 0;
  if (it == pod.meta.annotations.end() || !absl::SimpleAtoi(it->second, &index) || index < 0)
    return std::nullopt;
  return index;
}

bool isTerminal(const proto::Pod& pod) {
  return pod.status.phase == "Succeeded" || pod.status.phase == "Failed";
}

}  // namespace muster::scheduler
