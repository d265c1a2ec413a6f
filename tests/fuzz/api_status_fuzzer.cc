// The body of a non-2xx answer (a metav1 Status, or anything a proxy in between sends) as
// proto::apiError turns it into an absl::Status. The first two bytes are the HTTP status code.
#include <cstddef>
#include <cstdint>

#include "proto/client.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int http = (data[0] << 8 | data[1]) % 1000;
  const std::string_view body = fuzz::asText(data + 2, size - 2);
  const absl::Status status = proto::apiError(http, body, "GET /api/v1/pods");
  FUZZ_CHECK(!status.ok(), "an API error is never OK");
  FUZZ_CHECK(!status.message().empty(), "an API error always says something");
  (void)proto::reasonOf(status);
  (void)proto::isNotFound(status);
  (void)proto::isAlreadyExists(status);
  (void)proto::isConflict(status);
  (void)proto::isGone(status);
  if (http >= 400) FUZZ_CHECK(proto::httpStatusOf(status) == http, status.ToString());
  return 0;
}
