// A scheduling.x-k8s.io PodGroup as the API server sends it. The status patch Muster writes for it
// must be JSON that decodes back into the same status.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::PodGroup group;
  if (!proto::decodeJson(fuzz::asText(data, size), &group).ok()) return 0;
  for (const auto& [name, q] : group.spec.min_resources) (void)q.toString();

  const std::string patch = proto::statusPatch(group.status);
  proto::PodGroup back;
  const absl::Status decoded = proto::decodeJson(patch, &back);
  FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + patch);
  FUZZ_CHECK(proto::statusPatch(back.status) == patch, patch);
  return 0;
}
