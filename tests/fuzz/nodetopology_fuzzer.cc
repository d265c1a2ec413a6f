// A muster.dev NodeTopology as the API server sends it (the scheduler watches them). The spec
// must survive encode -> decode unchanged, and the patches Muster writes must be valid JSON.
#include <cstddef>
#include <cstdint>

#include "proto/nodetopology.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::NodeTopology topology;
  if (!proto::decodeNodeTopologyJson(fuzz::asText(data, size), &topology).ok()) return 0;

  const std::string encoded = proto::encode(topology);
  proto::NodeTopology back;
  const absl::Status decoded = proto::decodeNodeTopologyJson(encoded, &back);
  FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + encoded);
  FUZZ_CHECK(back.spec == topology.spec, encoded);
  FUZZ_CHECK(proto::sameFacts(back.spec, topology.spec), encoded);
  FUZZ_CHECK(back.meta.labels == topology.meta.labels, encoded);

  const std::string patch = proto::specPatch(topology.spec);
  proto::NodeTopology patched;
  const absl::Status patch_decoded = proto::decodeNodeTopologyJson(patch, &patched);
  FUZZ_CHECK(patch_decoded.ok(), patch_decoded.ToString() + "\n" + patch);
  FUZZ_CHECK(patched.spec == topology.spec, patch);

  const std::string status = proto::statusPatch(topology.status);
  const absl::StatusOr<rapidjson::Document> status_doc = proto::parseJson(status);
  FUZZ_CHECK(status_doc.ok(), status);
  return 0;
}
