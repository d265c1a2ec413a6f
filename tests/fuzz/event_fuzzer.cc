// A core/v1 Event as the API server sends it (the event recorder reads them back to aggregate).
// decode -> encode -> decode must give the same object, compared by its encoding.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::Event event;
  if (!proto::decodeJson(fuzz::asText(data, size), &event).ok()) return 0;
  const std::string encoded = proto::encode(event);
  proto::Event back;
  const absl::Status decoded = proto::decodeJson(encoded, &back);
  FUZZ_CHECK(decoded.ok(), decoded.ToString() + "\n" + encoded);
  FUZZ_CHECK(proto::encode(back) == encoded, encoded + "\n" + proto::encode(back));
  (void)proto::eventSeriesPatch(event.count + (event.count < INT32_MAX ? 1 : 0), event.last_timestamp);
  return 0;
}
