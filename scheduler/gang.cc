#include "scheduler/gang.h"
#include "scheduler/strings.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/selector.h"

namespace muster::scheduler {
namespace {

const std::string* find(const std::map<std::string, std::string>& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? nullptr : &it->second;
}

absl::Status invalid(std::string_view what) { return absl::InvalidArgumentError(av(what)); }

absl::Status levelOf(const SchedulerConfig& config, std::string_view annotation,
                     const std::string& value, std::string_view where, int* out) {
  int index = config.levelIndex(value);
  if (index < 0) {
    std::vector<std::string> allowed = config.topology_levels;
    allowed.emplace_back(std::string(kHostnameLevel));
    return invalid(absl::StrCat(av(where), " annotation ", av(annotation), ": \"", value,
                                "\" is not a topology level; use one of ",
                                absl::StrJoin(allowed, ", ")));
  }
  *out = index;
  return absl::OkStatus();
}

}  // namespace

std::string_view podGroupApiOf(const GangSpec& spec) {
  return spec.workload_pod_group.empty() ? "scheduling.x-k8s.io/v1alpha1"
                                         : "scheduling.k8s.io/v1alpha2";
}

GangKey gangKeyOf(const proto::Pod& pod) {
  GangKey key{pod.meta.namespace_, "", false};
  if (!pod.spec.scheduling_group.empty()) {
    key.name = pod.spec.scheduling_group;
  } else if (const std::string* group = find(pod.meta.labels, vocab::kPodGroupLabel);
             group && !group->empty()) {
    key.name = *group;
  } else if (const std::string* gang = find(pod.meta.annotations, vocab::kGangNameAnnotation);
             gang && !gang->empty()) {
    key.name = *gang;
  } else {
    key.name = pod.meta.name;
    key.single_pod = true;
  }
  return key;
}

absl::StatusOr<GangSpec> gangSpecOf(const proto::Pod& pod, const PodGroupLookup& pod_groups,
                                    const SchedulerConfig& config,
                                    const WorkloadPodGroupLookup& workload_pod_groups) {
  GangSpec spec;
  spec.key.namespace_ = pod.meta.namespace_;
  spec.schedule_timeout_seconds = config.gang_default_schedule_timeout_seconds;
  const auto& annotations = pod.meta.annotations;
  const proto::PodGroup* group = nullptr;
  const proto::WorkloadPodGroup* workload_group = nullptr;
  // The annotations of whichever PodGroup the pod is in (topology, GPU-NIC affinity).
  const std::map<std::string, std::string>* group_annotations = nullptr;
  int constrained_level = -1;  // from the v1alpha2 PodGroup's schedulingConstraints

  if (!pod.spec.scheduling_group.empty()) {
    spec.source = GangSource::kWorkloadPodGroup;
    spec.key.name = pod.spec.scheduling_group;
    spec.workload_pod_group = pod.spec.scheduling_group;
    workload_group = workload_pod_groups
                         ? workload_pod_groups(pod.meta.namespace_, pod.spec.scheduling_group)
                         : nullptr;
    if (workload_group == nullptr) {
      spec.pod_group_missing = true;
    } else {
      const std::string where = absl::StrCat("PodGroup ", spec.key.toString(), " (",
                                             av(podGroupApiOf(spec)), ")");
      group_annotations = &workload_group->meta.annotations;
      if (workload_group->gang_min_count) {
        int32_t n = *workload_group->gang_min_count;
        if (n < 1 || n > kMaxGangSize) {
          return invalid(absl::StrCat(where, ": spec.schedulingPolicy.gang.minCount must be 1 to ",
                                      kMaxGangSize, " (the largest gang Muster places), got ", n));
        }
        spec.min_member = n;
      } else if (workload_group->basic) {
        // Basic: every pod is placed on its own, as kube-scheduler does.
        spec.source = GangSource::kSinglePod;
        spec.key.name = pod.meta.name;
        spec.key.single_pod = true;
      } else {
        return invalid(absl::StrCat(where, ": spec.schedulingPolicy sets neither gang nor basic"));
      }
      for (const std::string& key : workload_group->topology_keys) {
        int level = -1;
        if (absl::Status s = levelOf(config, "spec.schedulingConstraints.topology[].key", key,
                                     where, &level);
            !s.ok()) {
          return invalid(absl::StrCat(where, ": spec.schedulingConstraints.topology key \"", key,
                                      "\" is not one of Muster's topology levels (",
                                      absl::StrJoin(config.topology_levels, ", "), ", ",
                                      av(kHostnameLevel), ")"));
        }
        constrained_level = std::max(constrained_level, level);
      }
    }
  } else if (const std::string* name = find(pod.meta.labels, vocab::kPodGroupLabel); name && !name->empty()) {
    spec.source = GangSource::kPodGroup;
    spec.key.name = *name;
    group = pod_groups ? pod_groups(pod.meta.namespace_, *name) : nullptr;
    if (group != nullptr) group_annotations = &group->meta.annotations;
    if (group == nullptr) {
      spec.pod_group_missing = true;
    } else {
      if (group->spec.min_member < 0) {
        return invalid(absl::StrCat("PodGroup ", spec.key.toString(), ": spec.minMember must not be "
                                    "negative, got ", group->spec.min_member));
      }
      if (group->spec.min_member > kMaxGangSize) {
        return invalid(absl::StrCat("PodGroup ", spec.key.toString(), ": spec.minMember must be at "
                                    "most ", kMaxGangSize, " (the largest gang Muster places), got ",
                                    group->spec.min_member));
      }
      spec.min_member = std::max<int32_t>(group->spec.min_member, 1);
      if (group->spec.schedule_timeout_seconds.value_or(0) < 0) {
        return invalid(absl::StrCat("PodGroup ", spec.key.toString(),
                                    ": spec.scheduleTimeoutSeconds must not be negative, got ",
                                    *group->spec.schedule_timeout_seconds));
      }
      if (group->spec.schedule_timeout_seconds.value_or(0) > 0) {
        spec.schedule_timeout_seconds = *group->spec.schedule_timeout_seconds;
      }
    }
  } else if (const std::string* gang = find(annotations, vocab::kGangNameAnnotation)) {
    if (gang->empty()) return invalid(absl::StrCat("annotation ", av(vocab::kGangNameAnnotation), " is empty"));
    spec.source = GangSource::kAnnotations;
    spec.key.name = *gang;
    const std::string* size = find(annotations, vocab::kGangSizeAnnotation);
    int64_t n = 0;
    if (size == nullptr) {
      return invalid(absl::StrCat("annotation ", av(vocab::kGangSizeAnnotation), " is missing (required with ",
                                  av(vocab::kGangNameAnnotation), ")"));
    }
    if (!proto::parseInt64(*size, &n) || n < 1) {
      return invalid(absl::StrCat("annotation ", av(vocab::kGangSizeAnnotation),
                                  " must be a positive integer, got \"", *size, "\""));
    }
    if (n > kMaxGangSize) {
      return invalid(absl::StrCat("annotation ", av(vocab::kGangSizeAnnotation), " must be at most ",
                                  kMaxGangSize, " (the largest gang Muster places), got ", *size));
    }
    spec.min_member = static_cast<int32_t>(n);
    if (const std::string* timeout = find(annotations, vocab::kGangTimeoutAnnotation)) {
      int64_t t = 0;
      if (!proto::parseInt64(*timeout, &t) || t < 0) {
        return invalid(absl::StrCat("annotation ", av(vocab::kGangTimeoutAnnotation),
                                    " must be a non-negative integer (seconds), got \"", *timeout,
                                    "\""));
      }
      if (t > 0) spec.schedule_timeout_seconds = t;
    }
  } else {
    spec.source = GangSource::kSinglePod;
    spec.key.name = pod.meta.name;
    spec.key.single_pod = true;
  }

  auto topology = [&](std::string_view annotation, int* out) -> absl::Status {
    if (const std::string* v = find(annotations, annotation)) {
      return levelOf(config, annotation, *v, "pod", out);
    }
    if (group_annotations != nullptr) {
      if (const std::string* v = find(*group_annotations, annotation)) {
        return levelOf(config, annotation, *v, absl::StrCat("PodGroup ", spec.key.toString()), out);
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status s = topology(vocab::kTopologyRequiredAnnotation, &spec.required_level); !s.ok()) return s;
  if (absl::Status s = topology(vocab::kTopologyPreferredAnnotation, &spec.preferred_level); !s.ok()) {
    return s;
  }
  // Kubernetes' own topology constraint is required too; the deeper of it and the annotation wins.
  spec.required_level = std::max(spec.required_level, constrained_level);
  if (spec.required_level >= 0 && spec.preferred_level >= 0 &&
      spec.preferred_level < spec.required_level) {
    return invalid(absl::StrCat(av(vocab::kTopologyPreferredAnnotation), " (",
                                av(config.levelKey(spec.preferred_level)), ") must be at or below ",
                                av(vocab::kTopologyRequiredAnnotation), " (",
                                av(config.levelKey(spec.required_level)), ")"));
  }
  const std::string* affinity = find(annotations, vocab::kGpuNicAffinityAnnotation);
  if (affinity == nullptr && group_annotations != nullptr) {
    affinity = find(*group_annotations, vocab::kGpuNicAffinityAnnotation);
  }
  if (affinity != nullptr) {
    absl::StatusOr<GpuNicAffinity> parsed = parseGpuNicAffinity(*affinity);
    if (!parsed.ok()) return invalid(std::string(parsed.status().message()));
    spec.gpu_nic_affinity = *parsed;
  }
  return spec;
}

}  // namespace muster::scheduler
