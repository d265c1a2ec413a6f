#pragma once

// Slurm's durations and timestamps (src/common/parse_time.c, squeue's print.c).
//
// Durations (sbatch/srun -t, --time; time_str2secs / time_str2mins):
//   "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S"; "-1", "INFINITE" and "UNLIMITED" (any case)
//   mean no limit. Slurm keeps a time limit in whole minutes and rounds up (ROUNDUP(secs, 60)),
//   so parseTimeLimit returns seconds that are always a multiple of 60: "0:30" -> 60.
//   A limit of 0 minutes means UNLIMITED, as sbatch's and srun's --time=0 (arg_set_time_limit).
//   Deviations: negative numbers ("-5", which Slurm reads as -5 days) and values above
//   INT32_MAX seconds (where Slurm's int overflows) are errors.
//
// Output (squeue's _print_secs for %M TIME, %l TIME_LIMIT, %L TIME_LEFT):
//   "M:SS" under an hour, "H:MM:SS" under a day, "D-HH:MM:SS" above; "INVALID" when negative or
//   more than 365 days (YEAR_SECONDS); "UNLIMITED" for no limit.
//
// Timestamps (sacct/squeue -S/-E, sbatch --begin; parse_time):
//   HH:MM[:SS] [AM|PM], MMDD[YY], MM/DD[/YY], MM.DD[.YY], any date followed by -HH:MM[:SS],
//   YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon, elevenses (11:00), fika (15:00),
//   teatime (16:00), now[{+|-}count[seconds|minutes|hours|days|weeks]] (default seconds, unit
//   words spelled out, singular or plural), uts<seconds since the epoch>.
//   A time without a date is today if that is still to come (or when `past` is set, as sacct
//   does), otherwise tomorrow; a date without a year is this year if still to come (or, with
//   `past`, not later in the year than now), otherwise next (last) year. Out-of-range days
//   roll over as mktime does ("2024-02-30" is 1 March).
//   Muster runs in containers without a meaningful local time zone, so every timestamp is read
//   and written in UTC (Slurm uses the local time zone).
//   Deviations: an input that names no date and no time at all (e.g. "" or "T") is an error;
//   Slurm returns the epoch (0). A time after 9999-12-31T23:59:59 (kLatestTimestamp) is an error:
//   the ParallelJob keeps --begin as an RFC 3339 date-time, whose year has four digits (Slurm
//   keeps any time_t).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/slurm/core/limits.h"

namespace muster::jobengine::slurm {

// squeue prints INVALID for durations above a year.
inline constexpr int64_t kYearSeconds = 365 * 24 * 60 * 60;
// The latest time parseTimestamp returns: 9999-12-31T23:59:59Z, the last an RFC 3339 date-time
// holds.
inline constexpr absl::Time kLatestTimestamp = absl::FromUnixSeconds(kLatestUnixSeconds);

// A time limit in seconds, rounded up to whole minutes; nullopt = UNLIMITED. InvalidArgument
// "Invalid time specification: <text>" for anything else.
absl::StatusOr<std::optional<int64_t>> parseTimeLimit(std::string_view text);

// The same formats without rounding (time_str2secs): exact seconds, 0 stays 0; nullopt for
// UNLIMITED.
absl::StatusOr<std::optional<int64_t>> parseDurationSeconds(std::string_view text);

// squeue's TIME column: "0:00", "5:07", "1:00:00", "2-03:04:05", "INVALID".
std::string formatDuration(int64_t seconds);

// squeue's TIME_LIMIT column: formatDuration, or "UNLIMITED" for nullopt.
std::string formatTimeLimit(std::optional<int64_t> seconds);

// scontrol's and sacct's form (secs2time_str): "00:05:07", "2-03:04:05", "UNLIMITED" for
// nullopt, "INVALID" when negative.
std::string formatDurationHms(std::optional<int64_t> seconds);

// A timestamp as parse_time reads it, relative to `now`, in UTC. `past` selects sacct's reading
// of incomplete dates (parse_time(str, 1)); sbatch --begin uses past = false. InvalidArgument
// "Invalid time specification (pos=N): <text>" as Slurm prints it.
absl::StatusOr<absl::Time> parseTimestamp(std::string_view text, absl::Time now, bool past);

// Slurm's default time format "%FT%T" (2024-01-02T03:04:05), in UTC. The epoch and the infinite
// times print "Unknown", as Slurm prints 0 and INFINITE.
std::string formatTimestamp(absl::Time t);

}  // namespace muster::jobengine::slurm
