// Slurm's time formats: -t/--time limits (parseTimeLimit, parseDurationSeconds) and --begin
// timestamps (parseTimestamp, relative to a fixed now). What squeue/scontrol print for a parsed
// value must parse back to it.
#include <cstddef>
#include <cstdint>

#include "absl/time/civil_time.h"
#include "jobengine/slurm/core/time.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool past = data[0] & 1;
  const std::string_view text = fuzz::asText(data + 1, size - 1);

  absl::StatusOr<std::optional<int64_t>> limit = parseTimeLimit(text);
  if (limit.ok()) {
    (void)formatTimeLimit(*limit);
    if (limit->has_value()) {
      const int64_t s = **limit;
      FUZZ_CHECK(s > 0 && s % 60 == 0, fuzz::quote(text));
      const std::string hms = formatDurationHms(s);
      absl::StatusOr<std::optional<int64_t>> back = parseTimeLimit(hms);
      FUZZ_CHECK(back.ok() && *back == *limit, fuzz::quote(text) + " -> " + hms);
      (void)formatDuration(s);
    }
  }
  absl::StatusOr<std::optional<int64_t>> duration = parseDurationSeconds(text);
  if (duration.ok() && duration->has_value()) {
    const int64_t s = **duration;
    FUZZ_CHECK(s >= 0, fuzz::quote(text));
    const std::string hms = formatDurationHms(s);
    absl::StatusOr<std::optional<int64_t>> back = parseDurationSeconds(hms);
    FUZZ_CHECK(back.ok() && *back == *duration, fuzz::quote(text) + " -> " + hms);
  }

  const absl::Time now = absl::FromCivil(absl::CivilSecond(2026, 3, 14, 15, 9, 26), absl::UTCTimeZone());
  absl::StatusOr<absl::Time> when = parseTimestamp(text, now, past);
  if (when.ok()) {
    const std::string printed = formatTimestamp(*when);
    const absl::CivilSecond c = absl::ToCivilSecond(*when, absl::UTCTimeZone());
    if (c.year() >= 1971 && c.year() <= 9999) {
      absl::StatusOr<absl::Time> back = parseTimestamp(printed, now, past);
      FUZZ_CHECK(back.ok() && *back == *when, fuzz::quote(text) + " -> " + printed);
    }
  }
  return 0;
}
