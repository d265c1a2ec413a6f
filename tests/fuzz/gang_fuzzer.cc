// A pod's gang and topology annotations (and its PodGroup's) as scheduler::gangSpecOf reads them.
// The input is NUL-separated values: gang-name, gang-size, gang-schedule-timeout-seconds,
// topology-required, topology-preferred, gpu-nic-affinity, the pod-group label, and the PodGroup's
// minMember, scheduleTimeoutSeconds and its own topology-required annotation. An empty field is an
// absent annotation, a field of one \x01 byte an empty one; the PodGroup exists when its minMember
// field is given.
#include <cstddef>
#include <cstdint>

#include "proto/selector.h"
#include "scheduler/gang.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> f = fuzz::splitAtNul(fuzz::asText(data, size));
  f.resize(10);
  proto::Pod pod;
  pod.meta.namespace_ = "ml";
  pod.meta.name = "worker-0";
  auto annotate = [&](const char* key, const std::string& v) {
    if (!v.empty()) pod.meta.annotations[key] = v == "\x01" ? "" : v;
  };
  annotate(proto::vocabulary::kGangNameAnnotation, f[0]);
  annotate(proto::vocabulary::kGangSizeAnnotation, f[1]);
  annotate(proto::vocabulary::kGangTimeoutAnnotation, f[2]);
  annotate(proto::vocabulary::kTopologyRequiredAnnotation, f[3]);
  annotate(proto::vocabulary::kTopologyPreferredAnnotation, f[4]);
  annotate(proto::vocabulary::kGpuNicAffinityAnnotation, f[5]);
  if (!f[6].empty()) pod.meta.labels[proto::vocabulary::kPodGroupLabel] = f[6];

  proto::PodGroup group;
  group.meta.namespace_ = "ml";
  group.meta.name = f[6];
  int64_t n = 0;
  if (proto::parseInt64(f[7], &n)) group.spec.min_member = static_cast<int32_t>(n);
  if (proto::parseInt64(f[8], &n)) group.spec.schedule_timeout_seconds = static_cast<int32_t>(n);
  if (!f[9].empty()) group.meta.annotations[proto::vocabulary::kTopologyRequiredAnnotation] = f[9];
  const bool group_exists = !f[7].empty();
  scheduler::PodGroupLookup lookup = [&](std::string_view, std::string_view name) -> const proto::PodGroup* {
    return group_exists && name == group.meta.name ? &group : nullptr;
  };

  scheduler::SchedulerConfig config;
  config.topology_levels = {"muster.dev/block", "muster.dev/spine", "muster.dev/rack"};
  absl::StatusOr<scheduler::GangSpec> spec = scheduler::gangSpecOf(pod, lookup, config);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument, spec.status().ToString());
    return 0;
  }
  FUZZ_CHECK(spec->min_member >= 1, "a gang has at least one member");
  FUZZ_CHECK(spec->schedule_timeout_seconds >= 0, "timeouts are not negative");
  FUZZ_CHECK(spec->required_level >= -1 && spec->required_level < config.levelCount(), "level");
  FUZZ_CHECK(spec->preferred_level >= -1 && spec->preferred_level < config.levelCount(), "level");
  if (spec->required_level >= 0 && spec->preferred_level >= 0) {
    FUZZ_CHECK(spec->preferred_level >= spec->required_level, "preferred at or below required");
  }
  FUZZ_CHECK(!spec->key.name.empty(), "a gang has a name");
  return 0;
}
