// The srun <-> step-tasks byte stream (step_protocol.h): frames split by FrameReader from chunks of
// fuzz-chosen sizes, each payload decoded by its type. A decoded frame re-encodes to a frame that
// decodes to the same value, and the Hello search never reads past the bytes. The first byte sets
// the chunk size.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/steps/step_protocol.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

namespace {

// The payload of the one frame `encoded` holds.
std::string payloadOf(const std::string& encoded) {
  FrameReader reader;
  reader.append(encoded);
  absl::StatusOr<std::optional<Frame>> frame = reader.next();
  FUZZ_CHECK(frame.ok() && frame->has_value(), "an encoded frame reads back");
  FUZZ_CHECK(reader.buffered() == 0, "an encoded frame is exactly one frame");
  return (*frame)->payload;
}

void checkFrame(const Frame& f) {
  FUZZ_CHECK(maxPayload(static_cast<uint8_t>(f.type)).has_value(), "known type");
  FUZZ_CHECK(f.payload.size() <= *maxPayload(static_cast<uint8_t>(f.type)), "payload within its limit");
  switch (f.type) {
    case FrameType::kRequest: {
      absl::StatusOr<StepRequest> r = decodeRequest(f.payload);
      if (!r.ok()) return;
      absl::StatusOr<StepRequest> back = decodeRequest(payloadOf(encodeRequest(*r)));
      FUZZ_CHECK(back.ok() && *back == *r, "a Request survives encode/decode");
      return;
    }
    case FrameType::kHello: {
      absl::StatusOr<uint32_t> v = decodeHello(f.payload);
      if (v.ok() && *v == kStepProtocolVersion) {
        FUZZ_CHECK(decodeHello(payloadOf(encodeHello())).ok(), "Hello");
      }
      return;
    }
    case FrameType::kSignal: {
      absl::StatusOr<int> s = decodeSignal(f.payload);
      if (!s.ok()) return;
      absl::StatusOr<int> back = decodeSignal(payloadOf(encodeSignal(*s)));
      FUZZ_CHECK(back.ok() && *back == *s, "a Signal survives encode/decode");
      return;
    }
    case FrameType::kStdout:
    case FrameType::kStderr: {
      absl::StatusOr<TaskOutput> o = decodeOutput(f.type, f.payload);
      if (!o.ok()) return;
      FUZZ_CHECK(o->stderr_stream == (f.type == FrameType::kStderr), "stream follows the type");
      const std::string encoded = encodeOutput(*o);
      absl::StatusOr<TaskOutput> back =
          decodeOutput(static_cast<FrameType>(encoded[0]), payloadOf(encoded));
      FUZZ_CHECK(back.ok() && *back == *o, "output survives encode/decode");
      return;
    }
    case FrameType::kMessage: {
      absl::StatusOr<TaskMessage> m = decodeMessage(f.payload);
      if (!m.ok()) return;
      absl::StatusOr<TaskMessage> back = decodeMessage(payloadOf(encodeMessage(*m)));
      FUZZ_CHECK(back.ok() && *back == *m, "a Message survives encode/decode");
      return;
    }
    case FrameType::kExit: {
      absl::StatusOr<TaskExit> x = decodeExit(f.payload);
      if (!x.ok()) return;
      absl::StatusOr<TaskExit> back = decodeExit(payloadOf(encodeExit(*x)));
      FUZZ_CHECK(back.ok() && *back == *x, "an Exit survives encode/decode");
      return;
    }
    case FrameType::kTerminate:
    case FrameType::kDone:
      return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = data[0] % 64 + 1;
  const std::string_view bytes = fuzz::asText(data + 1, size - 1);
  if (std::optional<size_t> at = findHello(bytes)) FUZZ_CHECK(*at < bytes.size(), "Hello inside");

  FrameReader reader;
  size_t fed = 0;
  while (true) {
    absl::StatusOr<std::optional<Frame>> frame = reader.next();
    if (!frame.ok()) {
      FUZZ_CHECK(!reader.next().ok(), "an error sticks");
      return 0;
    }
    if (frame->has_value()) {
      checkFrame(**frame);
      continue;
    }
    if (fed >= bytes.size()) break;
    const size_t n = std::min(chunk, bytes.size() - fed);
    reader.append(bytes.substr(fed, n));
    fed += n;
  }
  FUZZ_CHECK(reader.buffered() <= bytes.size(), "buffered bytes were received");
  return 0;
}
