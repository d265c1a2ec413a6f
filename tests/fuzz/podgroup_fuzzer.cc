// A PodGroup as the API server sends it, of either API: scheduling.x-k8s.io/v1alpha1 (the status
// patch Muster writes for it must be JSON that decodes back into the same status) and Kubernetes'
// own scheduling.k8s.io/v1alpha2 (each condition, written back as Muster's condition patch, must
// decode to the same condition).
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

namespace {

void workloadPodGroup(std::string_view text) {
  proto::WorkloadPodGroup group;
  if (!proto::decodeJson(text, &group).ok()) return;
  for (const proto::Condition& c : group.conditions) {
    const std::string patch = proto::workloadPodGroupConditionPatch(c, group.meta.generation);
    proto::WorkloadPodGroup back;
    const absl::Status decoded = proto::decodeJson(patch, &back);
    FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + patch);
    FUZZ_CHECK(back.conditions.size() == 1, patch);
    const proto::Condition& b = back.conditions.front();
    FUZZ_CHECK(b.type == c.type && b.status == c.status && b.reason == c.reason &&
                   b.message == c.message && b.last_transition_time == c.last_transition_time,
               patch);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::asText(data, size);
  workloadPodGroup(text);

  proto::PodGroup group;
  if (!proto::decodeJson(text, &group).ok()) return 0;
  for (const auto& [name, q] : group.spec.min_resources) (void)q.toString();

  const std::string patch = proto::statusPatch(group.status);
  proto::PodGroup back;
  const absl::Status decoded = proto::decodeJson(patch, &back);
  FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + patch);
  FUZZ_CHECK(proto::statusPatch(back.status) == patch, patch);
  return 0;
}
