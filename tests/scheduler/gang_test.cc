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

TEST_CASE("topology annotations name a level, the host level included", "[gang]") {
  GangSpec s = *gangSpecOf(pod("w").gang("t", 2).topologyRequired(testing::kSpine)
                               .topologyPreferred("kubernetes.io/hostname"),
                           kNoGroups, config());
  CHECK(s.required_level == 1);
  CHECK(s.preferred_level == 3);
}

}  // namespace
}  // namespace muster::scheduler
