#include "scheduler/gang.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::pod;

SchedulerConfig config() {
  SchedulerConfig c;
  c.topology_levels = {testing::kBlock, testing::kSpine, testing::kRack};
  return c;
}

const PodGroupLookup kNoGroups = [](std::string_view, std::string_view) {
  return static_cast<const proto::PodGroup*>(nullptr);
};

TEST_CASE("a pod with no gang declaration is a gang of one", "[gang]") {
  GangSpec s = *gangSpecOf(pod("solo"), kNoGroups, config());
  CHECK(s.source == GangSource::kSinglePod);
  CHECK(s.key.toString() == "ml/solo");
  CHECK(s.key.single_pod);
  CHECK(s.min_member == 1);
}

TEST_CASE("PFN annotations declare a gang with its size and timeout", "[gang]") {
  GangSpec s = *gangSpecOf(pod("w0").gang("train", 16).annotation(
                               "gang-scheduling.preferred.jp/gang-schedule-timeout-seconds", "60"),
                           kNoGroups, config());
  CHECK(s.source == GangSource::kAnnotations);
  CHECK(s.key == GangKey{"ml", "train", false});
  CHECK(s.min_member == 16);
  CHECK(s.schedule_timeout_seconds == 60);
}

TEST_CASE("invalid gang annotations are errors for an Event", "[gang]") {
  auto error = [](const proto::Pod& p) {
    absl::StatusOr<GangSpec> s = gangSpecOf(p, kNoGroups, config());
    REQUIRE_FALSE(s.ok());
    return std::string(s.status().message());
  };
  CHECK(error(pod("w").gang("train", 0)) ==
        "annotation gang-scheduling.preferred.jp/gang-size must be a positive integer, got \"0\"");
  CHECK(error(pod("w").annotation("gang-scheduling.preferred.jp/gang-name", "t")
                  .annotation("gang-scheduling.preferred.jp/gang-size", "abc")) ==
        "annotation gang-scheduling.preferred.jp/gang-size must be a positive integer, got \"abc\"");
  CHECK(error(pod("w").gang("train", 1000001)) ==
        "annotation gang-scheduling.preferred.jp/gang-size must be at most 1000000 (the largest "
        "gang Muster places), got 1000001");
  CHECK(error(pod("w").annotation("gang-scheduling.preferred.jp/gang-name", "t")
                  .annotation("gang-scheduling.preferred.jp/gang-size", "99999999999999999999")) ==
        "annotation gang-scheduling.preferred.jp/gang-size must be a positive integer, got "
        "\"99999999999999999999\"");
  CHECK(error(pod("w").annotation("gang-scheduling.preferred.jp/gang-name", "t")) ==
        "annotation gang-scheduling.preferred.jp/gang-size is missing (required with "
        "gang-scheduling.preferred.jp/gang-name)");
  CHECK(error(pod("w").gang("t", 2).annotation(
            "gang-scheduling.preferred.jp/gang-schedule-timeout-seconds", "soon")) ==
        "annotation gang-scheduling.preferred.jp/gang-schedule-timeout-seconds must be a "
        "non-negative integer (seconds), got \"soon\"");
  CHECK(error(pod("w").gang("t", 2).topologyRequired("zone")) ==
        "pod annotation muster.dev/topology-required: \"zone\" is not a topology level; use one of "
        "muster.dev/block, muster.dev/spine, muster.dev/rack, kubernetes.io/hostname");
  CHECK(error(pod("w").gang("t", 2).topologyRequired(testing::kRack).topologyPreferred(testing::kSpine))
            .find("must be at or below") != std::string::npos);
}

TEST_CASE("a PodGroup label takes minMember from the PodGroup, and waits while it is missing",
          "[gang]") {
  proto::PodGroup group;
  group.meta.name = "job";
  group.meta.namespace_ = "ml";
  group.meta.annotations["muster.dev/topology-preferred"] = testing::kRack;
  group.spec.min_member = 4;
  group.spec.schedule_timeout_seconds = 30;
  PodGroupLookup lookup = [&](std::string_view ns, std::string_view name) {
    return ns == "ml" && name == "job" ? &group : nullptr;
  };
  GangSpec s = *gangSpecOf(pod("w0").podGroup("job"), lookup, config());
  CHECK(s.source == GangSource::kPodGroup);
  CHECK(s.min_member == 4);
  CHECK(s.schedule_timeout_seconds == 30);
  CHECK(s.preferred_level == 2);
  CHECK_FALSE(s.pod_group_missing);

  GangSpec missing = *gangSpecOf(pod("w0").podGroup("other"), lookup, config());
  CHECK(missing.pod_group_missing);
  CHECK(missing.key.toString() == "ml/other");
}

TEST_CASE("spec.schedulingGroup names a scheduling.k8s.io/v1alpha2 PodGroup", "[gang]") {
  proto::WorkloadPodGroup gang, basic, zoned, empty;
  gang.meta.name = "train";
  gang.gang_min_count = 8;
  gang.topology_keys = {testing::kRack};
  gang.meta.annotations["muster.dev/gpu-nic-affinity"] = "required";
  basic.meta.name = "serve";
  basic.basic = true;
  zoned.meta.name = "zoned";
  zoned.gang_min_count = 2;
  zoned.topology_keys = {"topology.kubernetes.io/zone"};
  empty.meta.name = "empty";
  proto::PodGroup xk8s;
  xk8s.meta.name = "train";
  xk8s.spec.min_member = 3;
  PodGroupLookup groups = [&](std::string_view, std::string_view name) {
    return name == "train" ? &xk8s : nullptr;
  };
  WorkloadPodGroupLookup workload = [&](std::string_view ns,
                                        std::string_view name) -> const proto::WorkloadPodGroup* {
    if (ns != "ml") return nullptr;
    for (const auto* g : {&gang, &basic, &zoned, &empty})
      if (g->meta.name == name) return g;
    return nullptr;
  };

  // The pod's spec field wins over the x-k8s label naming a PodGroup of the same name.
  GangSpec s = *gangSpecOf(pod("w0").schedulingGroup("train").podGroup("train"), groups, config(),
                           workload);
  CHECK(s.source == GangSource::kWorkloadPodGroup);
  CHECK(s.key == GangKey{"ml", "train", false});
  CHECK(s.min_member == 8);
  CHECK(s.required_level == 2);  // schedulingConstraints.topology: the rack
  CHECK(s.gpu_nic_affinity == GpuNicAffinity::kRequired);  // the PodGroup's annotation
  CHECK(s.workload_pod_group == "train");
  CHECK_FALSE(s.pod_group_missing);
  CHECK(podGroupApiOf(s) == "scheduling.k8s.io/v1alpha2");

  // A basic PodGroup places each pod on its own.
  GangSpec b = *gangSpecOf(pod("s0").schedulingGroup("serve"), groups, config(), workload);
  CHECK(b.source == GangSource::kSinglePod);
  CHECK(b.key == GangKey{"ml", "s0", true});
  CHECK(b.min_member == 1);

  GangSpec missing = *gangSpecOf(pod("w0").schedulingGroup("later"), groups, config(), workload);
  CHECK(missing.pod_group_missing);
  CHECK(missing.source == GangSource::kWorkloadPodGroup);
  CHECK(missing.key.toString() == "ml/later");
  // Without a lookup (the API is not served) every such PodGroup is missing.
  CHECK(gangSpecOf(pod("w0").schedulingGroup("train"), groups, config())->pod_group_missing);

  absl::StatusOr<GangSpec> bad = gangSpecOf(pod("z").schedulingGroup("zoned"), groups, config(), workload);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "PodGroup ml/zoned (scheduling.k8s.io/v1alpha2): spec.schedulingConstraints.topology key "
        "\"topology.kubernetes.io/zone\" is not one of Muster's topology levels (muster.dev/block, "
        "muster.dev/spine, muster.dev/rack, kubernetes.io/hostname)");
  absl::StatusOr<GangSpec> neither = gangSpecOf(pod("e").schedulingGroup("empty"), groups, config(), workload);
  REQUIRE_FALSE(neither.ok());
  CHECK(neither.status().message() ==
        "PodGroup ml/empty (scheduling.k8s.io/v1alpha2): spec.schedulingPolicy sets neither gang "
        "nor basic");
  empty.gang_min_count = 0;
  absl::StatusOr<GangSpec> zero = gangSpecOf(pod("e").schedulingGroup("empty"), groups, config(), workload);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().message().find("minCount must be 1 to 1000000") != std::string::npos);
}

TEST_CASE("topology annotations name a level, the host level included", "[gang]") {
  GangSpec s = *gangSpecOf(pod("w").gang("t", 2).topologyRequired(testing::kSpine)
                               .topologyPreferred("kubernetes.io/hostname"),
                           kNoGroups, config());
  CHECK(s.required_level == 1);
  CHECK(s.preferred_level == 3);
}

}  // namespace
}  // namespace muster::scheduler
