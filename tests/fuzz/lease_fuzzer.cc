// A coordination.k8s.io Lease as the API server sends it (leader election reads it on every
// renewal). decode -> encode -> decode must give the same object, compared by its encoding.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::Lease lease;
  if (!proto::decodeJson(fuzz::asText(data, size), &lease).ok()) return 0;
  const std::string encoded = proto::encode(lease);
  proto::Lease back;
  const absl::Status decoded = proto::decodeJson(encoded, &back);
  FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + encoded);
  FUZZ_CHECK(proto::encode(back) == encoded, encoded + "\n" + proto::encode(back));
  FUZZ_CHECK(back.spec.lease_duration_seconds == lease.spec.lease_duration_seconds, encoded);
  return 0;
}
