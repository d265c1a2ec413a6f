// The watch stream's framing: proto::LineSplitter must give the same records whatever the
// chunking of the bytes (TCP and HTTP chunks split anywhere), stop at the same record when the
// consumer fails, and refuse the same over-long record. The first byte picks which records fail,
// the second the longest record, the rest of the first 16 bytes are the chunk sizes (cycled).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/client.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

namespace {

struct Run {
  std::vector<std::string> lines;
  absl::Status status;
  size_t pending = 0;
};

Run feed(std::string_view bytes, const std::vector<size_t>& chunks, uint8_t fail_on,
         size_t max_record) {
  Run run;
  proto::LineSplitter splitter(max_record);
  auto on_line = [&](std::string_view line) -> absl::Status {
    run.lines.emplace_back(line);
    FUZZ_CHECK(!line.empty(), "empty records are skipped");
    FUZZ_CHECK(line.find('\n') == std::string_view::npos, std::string(line));
    FUZZ_CHECK(line.size() <= max_record, "a record within the limit");
    if (fail_on != 0 && static_cast<uint8_t>(line[0]) == fail_on) {
      return absl::CancelledError("consumer failed");
    }
    return absl::OkStatus();
  };
  size_t at = 0;
  size_t i = 0;
  while (at < bytes.size()) {
    const size_t n = chunks.empty() ? bytes.size() : std::min(chunks[i++ % chunks.size()], bytes.size() - at);
    run.status = splitter.feed(bytes.substr(at, n), on_line);
    at += n;
    if (!run.status.ok()) break;
  }
  run.pending = splitter.pending();
  FUZZ_CHECK(run.pending <= max_record, "never buffers more than the limit");
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t fail_on = data[0];
  // 0: the default limit (16 MiB, never reached here); else 4..1020 bytes.
  const size_t max_record = data[1] == 0 ? proto::kMaxWatchEventBytes : data[1] * size_t{4};
  std::vector<size_t> chunks;
  size_t header = std::min<size_t>(size, 16);
  for (size_t i = 2; i < header; ++i) chunks.push_back(data[i] % 32 + 1);
  const std::string_view bytes = fuzz::asText(data + header, size - header);

  const Run whole = feed(bytes, {}, fail_on, max_record);
  const Run split = feed(bytes, chunks, fail_on, max_record);
  const Run bytewise = feed(bytes, {1}, fail_on, max_record);
  FUZZ_CHECK(whole.lines == split.lines, "chunking changes the records");
  FUZZ_CHECK(whole.lines == bytewise.lines, "byte-by-byte feeding changes the records");
  FUZZ_CHECK(whole.status.code() == split.status.code() &&
                 whole.status.code() == bytewise.status.code(),
             "chunking changes the outcome: " + whole.status.ToString() + " / " +
                 split.status.ToString() + " / " + bytewise.status.ToString());
  if (whole.status.ok()) {
    FUZZ_CHECK(whole.pending == split.pending && whole.pending == bytewise.pending,
               "the unterminated tail differs");
    // The tail is exactly what follows the last newline.
    const size_t last_nl = bytes.rfind('\n');
    const size_t tail = last_nl == std::string_view::npos ? bytes.size() : bytes.size() - last_nl - 1;
    FUZZ_CHECK(whole.pending == tail, "the tail is not what follows the last newline");
  }
  return 0;
}
