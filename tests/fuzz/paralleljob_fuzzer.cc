// A preferred.jp ParallelJob as the API server sends it. decode -> encode -> decode must give the
// same object (compared by its encoding), and spec.launcher must parse as the PodTemplate the
// job engine builds pods from.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "proto/pod_template.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::ParallelJob job;
  if (!proto::decodeJson(fuzz::asText(data, size), &job).ok()) return 0;

  const std::string encoded = proto::encode(job);
  proto::ParallelJob back;
  const absl::Status decoded = proto::decodeJson(encoded, &back);
  FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + encoded);
  FUZZ_CHECK(proto::encode(back) == encoded, encoded + "\n" + proto::encode(back));
  FUZZ_CHECK(back.spec.launcher_container_names == job.spec.launcher_container_names, encoded);

  const std::string status = proto::statusPatch(job.status);
  proto::ParallelJob status_back;
  const absl::Status status_decoded = proto::decodeJson(status, &status_back);
  FUZZ_CHECK(status_decoded.ok(), status_decoded.ToString() + "\n" + status);

  if (!job.spec.launcher.empty()) {
    absl::StatusOr<proto::PodTemplate> t = proto::PodTemplate::parse(job.spec.launcher, "spec.launcher");
    if (t.ok()) {
      for (const std::string& name : job.spec.launcher_container_names) {
        if (auto c = t->container(name)) {
          (void)c->image();
          c->addEnv("MUSTER_FUZZ", "1");
        }
      }
      proto::ObjectMeta meta;
      meta.name = "p";
      meta.namespace_ = "ns";
      const std::string pod = t->toPod(meta);
      proto::Pod decoded_pod;
      (void)proto::decodeJson(pod, &decoded_pod);
    }
  }
  return 0;
}
