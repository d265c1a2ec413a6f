#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "jobengine/slurm/core/time.h"

namespace muster::jobengine::slurm {
namespace {

std::optional<int64_t> limit(std::string_view text) {
  absl::StatusOr<std::optional<int64_t>> v = parseTimeLimit(text);
  INFO(std::string(text) << ": " << v.status().ToString());
  REQUIRE(v.ok());
  return *v;
}

absl::Time utc(int y, int mo, int d, int h = 0, int mi = 0, int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), absl::UTCTimeZone());
}

// A Friday morning; every relative timestamp below is read against it.
const absl::Time kNow = utc(2024, 3, 15, 10, 30, 20);

absl::Time stamp(std::string_view text, bool past = true) {
  absl::StatusOr<absl::Time> t = parseTimestamp(text, kNow, past);
  INFO(std::string(text) << ": " << t.status().ToString());
  REQUIRE(t.ok());
  return *t;
}

std::string stampError(std::string_view text) {
  absl::StatusOr<absl::Time> t = parseTimestamp(text, kNow, true);
  INFO(std::string(text));
  REQUIRE_FALSE(t.ok());
  return std::string(t.status().message());
}

TEST_CASE("every sbatch --time format is read", "[time]") {
  // sbatch.1 --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
  // "days-hours:minutes" and "days-hours:minutes:seconds".
  CHECK(limit("10") == 600);
  CHECK(limit("10:00") == 600);
  CHECK(limit("1:00:00") == 3600);
  CHECK(limit("1-0") == 86400);
  CHECK(limit("1-2") == 86400 + 2 * 3600);
  CHECK(limit("1-2:30") == 86400 + 2 * 3600 + 30 * 60);
  CHECK(limit("2-00:00:00") == 2 * 86400);
  CHECK(limit("1-") == 86400);  // _is_valid_timespec accepts it; sscanf reads the days only
}

TEST_CASE("a time limit is rounded up to whole minutes", "[time]") {
  // time_str2mins: ROUNDUP(secs, 60).
  CHECK(limit("0:30") == 60);
  CHECK(limit("10:01") == 660);
  CHECK(limit("1-2:30:15") == (86400 + 2 * 3600 + 30 * 60 + 60));
  CHECK(limit("0:0:59") == 60);
  // Without rounding, for the callers that need exact seconds.
  CHECK(*parseDurationSeconds("0:30") == 30);
  CHECK(*parseDurationSeconds("1-2:30:15") == 86400 + 2 * 3600 + 30 * 60 + 15);
  CHECK(*parseDurationSeconds("0") == 0);
}

TEST_CASE("zero, -1, INFINITE and UNLIMITED mean no time limit", "[time]") {
  CHECK(limit("0") == std::nullopt);  // arg_set_time_limit: 0 minutes -> INFINITE
  CHECK(limit("0:0") == std::nullopt);
  CHECK(limit("-1") == std::nullopt);
  CHECK(limit("INFINITE") == std::nullopt);
  CHECK(limit("unlimited") == std::nullopt);
  CHECK(limit("UNLIMITED") == std::nullopt);
  CHECK(*parseDurationSeconds("UNLIMITED") == std::nullopt);
}

TEST_CASE("malformed time limits are refused", "[time]") {
  for (std::string_view bad : {"", "abc", "1:2:3:4", "1-2-3", "-5", ":30", "30:", "1-:30",
                               "5m", "1.5", "1-2:", "+5", "99999999999", "25000-00:00:00"}) {
    INFO(std::string(bad));
    absl::StatusOr<std::optional<int64_t>> v = parseTimeLimit(bad);
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().message() == "Invalid time specification: " + std::string(bad));
  }
}

TEST_CASE("squeue's TIME column grows from M:SS to D-HH:MM:SS", "[time]") {
  CHECK(formatDuration(0) == "0:00");
  CHECK(formatDuration(59) == "0:59");
  CHECK(formatDuration(307) == "5:07");
  CHECK(formatDuration(3600) == "1:00:00");
  CHECK(formatDuration(86399) == "23:59:59");
  CHECK(formatDuration(86400) == "1-00:00:00");
  CHECK(formatDuration(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "2-03:04:05");
}

TEST_CASE("negative durations and durations past a year print INVALID", "[time]") {
  CHECK(formatDuration(-1) == "INVALID");
  CHECK(formatDuration(kYearSeconds) == "365-00:00:00");
  CHECK(formatDuration(kYearSeconds + 1) == "INVALID");
}

TEST_CASE("a time limit prints UNLIMITED when there is none", "[time]") {
  CHECK(formatTimeLimit(std::nullopt) == "UNLIMITED");
  CHECK(formatTimeLimit(3600) == "1:00:00");
  CHECK(formatDurationHms(std::nullopt) == "UNLIMITED");
  CHECK(formatDurationHms(307) == "00:05:07");
  CHECK(formatDurationHms(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "2-03:04:05");
  CHECK(formatDurationHms(-5) == "INVALID");
}

TEST_CASE("ISO timestamps are read in UTC", "[time]") {
  CHECK(stamp("2024-01-02T03:04:05") == utc(2024, 1, 2, 3, 4, 5));
  CHECK(stamp("2024-01-02T03:04") == utc(2024, 1, 2, 3, 4, 0));
  CHECK(stamp("2024-01-02") == utc(2024, 1, 2));
}

TEST_CASE("an out-of-range day rolls over like mktime", "[time]") {
  CHECK(stamp("2024-02-30") == utc(2024, 3, 1));
}

TEST_CASE("now with an offset counts seconds by default and spelled-out units", "[time]") {
  CHECK(stamp("now") == kNow);
  CHECK(stamp("now+30") == kNow + absl::Seconds(30));
  CHECK(stamp("now-1hours") == kNow - absl::Hours(1));
  CHECK(stamp("now-1hour") == kNow - absl::Hours(1));
  CHECK(stamp("now-3days") == kNow - absl::Hours(72));
  CHECK(stamp("now-2weeks") == kNow - absl::Hours(24 * 14));
  CHECK(stamp("NOW-10MINUTES") == kNow - absl::Minutes(10));
  CHECK(stamp("now - 5 minutes") == kNow - absl::Minutes(5));
  stampError("now-5min");  // unit words are not abbreviated
  stampError("now-");
  stampError("nowx");
}

TEST_CASE("today, tomorrow and the named times of day", "[time]") {
  CHECK(stamp("today") == utc(2024, 3, 15));
  CHECK(stamp("tomorrow") == utc(2024, 3, 16));
  CHECK(stamp("today noon") == utc(2024, 3, 15, 12));
  CHECK(stamp("elevenses", false) == utc(2024, 3, 15, 11));
  CHECK(stamp("fika", false) == utc(2024, 3, 15, 15));
  CHECK(stamp("teatime", false) == utc(2024, 3, 15, 16));
  // midnight has passed today: sacct (past) means this morning, --begin means tonight.
  CHECK(stamp("midnight", true) == utc(2024, 3, 15));
  CHECK(stamp("midnight", false) == utc(2024, 3, 16));
}

TEST_CASE("a time without a date is the next such time unless looking back", "[time]") {
  CHECK(stamp("16:00", false) == utc(2024, 3, 15, 16));
  CHECK(stamp("09:00", false) == utc(2024, 3, 16, 9));
  CHECK(stamp("09:00", true) == utc(2024, 3, 15, 9));
  CHECK(stamp("10:30", false) == utc(2024, 3, 16, 10, 30));  // minutes must be later than now's
  CHECK(stamp("10:31:07", false) == utc(2024, 3, 15, 10, 31, 7));
  CHECK(stamp("4:30pm", false) == utc(2024, 3, 15, 16, 30));
  CHECK(stamp("12:00am", true) == utc(2024, 3, 15, 0, 0));
  CHECK(stamp("12:15 PM", false) == utc(2024, 3, 15, 12, 15));
}

TEST_CASE("month-day dates take the year Slurm would", "[time]") {
  CHECK(stamp("0102", true) == utc(2024, 1, 2));
  CHECK(stamp("0102", false) == utc(2025, 1, 2));
  CHECK(stamp("1231", true) == utc(2023, 12, 31));
  CHECK(stamp("01/02/23") == utc(2023, 1, 2));
  CHECK(stamp("01.02.23-10:00") == utc(2023, 1, 2, 10));
  CHECK(stamp("0102-10:00:05") == utc(2024, 1, 2, 10, 0, 5));
  CHECK(stamp("3/16", false) == utc(2024, 3, 16));
}

TEST_CASE("uts gives seconds since the epoch", "[time]") {
  CHECK(stamp("uts1700000000") == absl::FromUnixSeconds(1700000000));
  stampError("uts5");
  stampError("uts");
  stampError("uts17000000x");
}

TEST_CASE("a timestamp past 9999-12-31 is refused: nothing downstream can write it", "[time]") {
  // RFC 3339 (the ParallelJob's spec.slurm.beginTime) has four digits for the year.
  CHECK(stamp("9999-12-31T23:59:59") == utc(9999, 12, 31, 23, 59, 59));
  CHECK(stamp("uts253402300799") == utc(9999, 12, 31, 23, 59, 59));
  CHECK(stampError("uts253402300800") == "Invalid time specification (pos=0): uts253402300800");
  stampError("uts9223372036854775806");
  stampError("now+3000000days");  // year 10237
  CHECK(stamp("now+100000days", false) == kNow + absl::Hours(24 * 100000));  // year 2297: kept
}

TEST_CASE("invalid timestamps say where parsing stopped, as Slurm prints it", "[time]") {
  CHECK(stampError("yesterday") == "Invalid time specification (pos=0): yesterday");
  CHECK(stampError("2024-13-01") == "Invalid time specification (pos=5): 2024-13-01");
  stampError("2024-1-02");
  stampError("25:00");
  stampError("13:00pm");
  stampError("2024-01-02T25:00");
  stampError("12pm");
  stampError("");  // Slurm returns the epoch; Muster refuses
  stampError("T");
}

TEST_CASE("timestamps print in Slurm's ISO format", "[time]") {
  CHECK(formatTimestamp(utc(2024, 1, 2, 3, 4, 5)) == "2024-01-02T03:04:05");
  CHECK(formatTimestamp(absl::UnixEpoch()) == "Unknown");
  CHECK(formatTimestamp(absl::InfiniteFuture()) == "Unknown");
}

}  // namespace
}  // namespace muster::jobengine::slurm
