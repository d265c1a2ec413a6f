#include "jobengine/slurm/core/time.h"

#include <array>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

constexpr int64_t kMaxSeconds = std::numeric_limits<int32_t>::max();

absl::Status invalidTime(std::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat("Invalid time specification: ", av(text)));
}

bool isUnlimited(std::string_view text) {
  return text == "-1" || equalsIgnoreCase(text, "INFINITE") || equalsIgnoreCase(text, "UNLIMITED");
}

// parse_time.c _is_valid_timespec: digits, at most one '-' before any ':', at most two ':', and
// enough numbers for the separators given.
bool isValidTimespec(std::string_view s) {
  int digit = 0, dash = 0, colon = 0;
  bool already_digit = false;
  for (char c : s) {
    if (isDigit(c)) {
      if (!already_digit) {
        ++digit;
        already_digit = true;
      }
    } else if (c == '-') {
      already_digit = false;
      ++dash;
      if (colon) return false;
    } else if (c == ':') {
      already_digit = false;
      ++colon;
    } else {
      return false;
    }
  }
  if (!digit || dash > 1 || colon > 2) return false;
  if (dash) {
    if (colon == 1 && digit < 3) return false;
    if (colon == 2 && digit < 4) return false;
  } else {
    if (colon == 1 && digit < 2) return false;
    if (colon == 2 && digit < 3) return false;
  }
  return true;
}

// Splits "a:b:c" into at most three numbers; every part must be digits.
bool splitColons(std::string_view s, std::array<int64_t, 3>* parts, int* count) {
  *count = 0;
  size_t start = 0;
  while (true) {
    size_t colon = s.find(':', start);
    std::string_view part =
        s.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start);
    std::optional<uint64_t> v = parseDigits(part);
    if (!v || *v > static_cast<uint64_t>(kMaxSeconds) || *count == 3) return false;
    (*parts)[(*count)++] = static_cast<int64_t>(*v);
    if (colon == std::string_view::npos) return true;
    start = colon + 1;
  }
}

// time_str2secs without its NO_VAL/INFINITE encoding.
absl::StatusOr<std::optional<int64_t>> durationSeconds(std::string_view text) {
  if (text.empty()) return invalidTime(text);
  if (isUnlimited(text)) return std::optional<int64_t>();
  if (!isValidTimespec(text)) return invalidTime(text);
  int64_t d = 0, h = 0, m = 0, s = 0;
  std::array<int64_t, 3> parts{};
  int count = 0;
  if (size_t dash = text.find('-'); dash != std::string_view::npos) {
    // days-[hours[:minutes[:seconds]]]
    std::optional<uint64_t> days = parseDigits(text.substr(0, dash));
    if (!days || *days > static_cast<uint64_t>(kMaxSeconds)) return invalidTime(text);
    d = static_cast<int64_t>(*days);
    std::string_view rest = text.substr(dash + 1);
    if (!rest.empty()) {
      if (!splitColons(rest, &parts, &count)) return invalidTime(text);
      h = parts[0];
      if (count > 1) m = parts[1];
      if (count > 2) s = parts[2];
    }
  } else {
    if (!splitColons(text, &parts, &count)) return invalidTime(text);
    if (count == 3) {
      h = parts[0];
      m = parts[1];
      s = parts[2];
    } else {
      // minutes[:seconds]
      m = parts[0];
      if (count > 1) s = parts[1];
    }
  }
  int64_t total = d * 86400 + h * 3600 + m * 60 + s;
  if (total > kMaxSeconds) return invalidTime(text);
  return std::optional<int64_t>(total);
}

std::string hms(int64_t seconds) {
  int64_t secs = seconds % 60;
  int64_t minutes = (seconds / 60) % 60;
  int64_t hours = (seconds / 3600) % 24;
  int64_t days = seconds / 86400;
  if (days) return absl::StrFormat("%d-%02d:%02d:%02d", days, hours, minutes, secs);
  return absl::StrFormat("%02d:%02d:%02d", hours, minutes, secs);
}

// ---- parse_time ----

char at(std::string_view s, size_t i) { return i < s.size() ? s[i] : '\0'; }
bool isBlank(char c) { return c == ' ' || c == '\t'; }

struct TimeFields {
  int hour = -1, minute = -1, second = 0;
  int month = -1;  // 0-based, as struct tm
  int mday = -1;
  int64_t year = -1;  // the full year
};

void setDate(TimeFields* f, const absl::CivilSecond& c) {
  f->month = c.month() - 1;
  f->mday = c.day();
  f->year = c.year();
}

absl::CivilSecond civil(absl::Time t) { return absl::ToCivilSecond(t, absl::UTCTimeZone()); }

struct Unit {
  std::string_view name;
  int64_t multiplier;
};
constexpr std::array<Unit, 10> kUnits = {{
    {"seconds", 1},
    {"second", 1},
    {"minutes", 60},
    {"minute", 60},
    {"hours", 3600},
    {"hour", 3600},
    {"days", 86400},
    {"day", 86400},
    {"weeks", 604800},
    {"week", 604800},
}};

// _get_delta: digits and at most one unit word after the sign at *pos.
bool getDelta(std::string_view s, size_t* pos, int64_t* delta) {
  int64_t cnt = 0;
  int digits = 0;
  size_t offset = *pos + 1;
  for (; offset < s.size() && s[offset] != '\n'; ++offset) {
    if (isSpace(s[offset])) continue;
    bool unit_found = false;
    for (const Unit& u : kUnits) {
      if (startsWithIgnoreCase(s.substr(offset), u.name)) {
        offset += u.name.size();
        if (cnt > std::numeric_limits<int64_t>::max() / u.multiplier) return false;
        cnt *= u.multiplier;
        unit_found = true;
        break;
      }
    }
    if (unit_found) break;
    if (isDigit(s[offset])) {
      if (cnt > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      cnt = cnt * 10 + (s[offset] - '0');
      ++digits;
      continue;
    }
    *pos = offset - 1;
    return false;
  }
  if (!digits) return false;
  *pos = offset - 1;
  *delta = cnt;
  return true;
}

// _get_time: "HH:MM[:SS] [AM|PM]".
bool getTime(std::string_view s, size_t* pos, TimeFields* f) {
  size_t offset = *pos;
  auto fail = [&]() {
    *pos = offset;
    return false;
  };
  if (!isDigit(at(s, offset))) return fail();
  int hr = at(s, offset++) - '0';
  if (at(s, offset) != ':') {
    if (!isDigit(at(s, offset))) return fail();
    hr = hr * 10 + (at(s, offset++) - '0');
  }
  if (hr > 23) {
    offset -= 2;
    return fail();
  }
  if (at(s, offset) != ':') return fail();
  ++offset;
  if (!isDigit(at(s, offset))) return fail();
  int min = at(s, offset++) - '0';
  if (!isDigit(at(s, offset))) return fail();
  min = min * 10 + (at(s, offset++) - '0');
  if (min > 59) {
    offset -= 2;
    return fail();
  }
  int sec = 0;
  if (at(s, offset) == ':') {
    ++offset;
    if (!isDigit(at(s, offset))) return fail();
    sec = at(s, offset++) - '0';
    if (!isDigit(at(s, offset))) return fail();
    sec = sec * 10 + (at(s, offset++) - '0');
    if (sec > 59) {
      offset -= 2;
      return fail();
    }
  }
  while (isSpace(at(s, offset))) ++offset;
  if (startsWithIgnoreCase(s.substr(std::min(offset, s.size())), "pm")) {
    hr += 12;
    if (hr > 23) {
      if (hr == 24) {
        hr = 12;
      } else {
        return fail();
      }
    }
    offset += 2;
  } else if (startsWithIgnoreCase(s.substr(std::min(offset, s.size())), "am")) {
    if (hr > 11) {
      if (hr == 12) {
        hr = 0;
      } else {
        return fail();
      }
    }
    offset += 2;
  }
  *pos = offset - 1;
  f->hour = hr;
  f->minute = min;
  f->second = sec;
  return true;
}

// _get_date: "YYYY-MM-DD" or "MMDD[YY]", "MM/DD[/YY]", "MM.DD[.YY]".
bool getDate(std::string_view s, size_t* pos, TimeFields* f) {
  size_t offset = *pos;
  auto fail = [&]() {
    *pos = offset;
    return false;
  };
  if (s.size() >= offset + 7 && at(s, offset + 4) == '-' && at(s, offset + 7) == '-') {
    int yr = 0;
    for (int i = 0; i < 4; ++i) {
      if (!isDigit(at(s, offset))) return fail();
      yr = yr * 10 + (at(s, offset++) - '0');
    }
    ++offset;  // the '-'
    int mon = at(s, offset++) - '0';
    if (isDigit(at(s, offset))) mon = mon * 10 + (at(s, offset++) - '0');
    if (mon < 1 || mon > 12) {
      offset -= 2;
      return fail();
    }
    ++offset;  // the '-'
    if (!isDigit(at(s, offset))) return fail();
    int day = at(s, offset++) - '0';
    if (isDigit(at(s, offset))) day = day * 10 + (at(s, offset++) - '0');
    if (day < 1 || day > 31) {
      offset -= 2;
      return fail();
    }
    *pos = offset - 1;
    f->month = mon - 1;
    f->mday = day;
    f->year = yr;
    return true;
  }
  int mon = at(s, offset++) - '0';
  if (isDigit(at(s, offset))) mon = mon * 10 + (at(s, offset++) - '0');
  if (mon < 1 || mon > 12) {
    offset -= 2;
    return fail();
  }
  if (at(s, offset) == '.' || at(s, offset) == '/') ++offset;
  if (!isDigit(at(s, offset))) return fail();
  int day = at(s, offset++) - '0';
  if (isDigit(at(s, offset))) day = day * 10 + (at(s, offset++) - '0');
  if (day < 1 || day > 31) {
    offset -= 2;
    return fail();
  }
  if (at(s, offset) == '.' || at(s, offset) == '/') ++offset;
  int yr = 0;
  if (isDigit(at(s, offset))) {
    yr = at(s, offset++) - '0';
    if (!isDigit(at(s, offset))) return fail();
    yr = yr * 10 + (at(s, offset++) - '0');
  }
  *pos = offset - 1;
  f->month = mon - 1;
  f->mday = day;
  if (yr) f->year = 2000 + yr;  // Slurm: "00" means no year given
  return true;
}

struct Keyword {
  std::string_view word;
  int hour;
};
constexpr std::array<Keyword, 5> kClockWords = {{
    {"midnight", 0},
    {"noon", 12},
    {"elevenses", 11},
    {"fika", 15},
    {"teatime", 16},
}};

}  // namespace

absl::StatusOr<std::optional<int64_t>> parseDurationSeconds(std::string_view text) {
  return durationSeconds(text);
}

absl::StatusOr<std::optional<int64_t>> parseTimeLimit(std::string_view text) {
  absl::StatusOr<std::optional<int64_t>> secs = durationSeconds(text);
  if (!secs.ok() || !secs->has_value()) return secs;
  int64_t minutes = (**secs + 59) / 60;  // ROUNDUP(secs, 60)
  if (minutes == 0) return std::optional<int64_t>();  // --time=0 is UNLIMITED
  return std::optional<int64_t>(minutes * 60);
}

std::string formatDuration(int64_t seconds) {
  if (seconds < 0 || seconds > kYearSeconds) return "INVALID";
  int64_t secs = seconds % 60;
  int64_t minutes = (seconds / 60) % 60;
  int64_t hours = (seconds / 3600) % 24;
  int64_t days = seconds / 86400;
  if (days) return absl::StrFormat("%d-%02d:%02d:%02d", days, hours, minutes, secs);
  if (hours) return absl::StrFormat("%d:%02d:%02d", hours, minutes, secs);
  return absl::StrFormat("%d:%02d", minutes, secs);
}

std::string formatTimeLimit(std::optional<int64_t> seconds) {
  if (!seconds) return "UNLIMITED";
  return formatDuration(*seconds);
}

std::string formatDurationHms(std::optional<int64_t> seconds) {
  if (!seconds) return "UNLIMITED";
  if (*seconds < 0) return "INVALID";
  return hms(*seconds);
}

absl::StatusOr<absl::Time> parseTimestamp(std::string_view s, absl::Time now, bool past) {
  size_t pos = 0;
  auto fail = [&]() {
    return absl::InvalidArgumentError(
        absl::StrFormat("Invalid time specification (pos=%d): %s", pos, av(s)));
  };
  if (startsWithIgnoreCase(s, "uts")) {
    size_t consumed = 0;
    std::string_view digits = s.substr(3);
    int64_t uts = strtolPrefix(digits, &consumed);
    if (consumed == 0 || consumed != digits.size() || uts < 1000000 ||
        uts == std::numeric_limits<int64_t>::max() || absl::FromUnixSeconds(uts) > kLatestTimestamp) {
      return fail();
    }
    return absl::FromUnixSeconds(uts);
  }

  const absl::CivilSecond now_c = civil(now);
  TimeFields f;
  for (pos = 0; pos < s.size() && s[pos] != '\n'; ++pos) {
    char c = s[pos];
    if (isBlank(c) || c == '-' || c == 'T') continue;
    std::string_view rest = s.substr(pos);
    if (startsWithIgnoreCase(rest, "today")) {
      setDate(&f, now_c);
      pos += 4;
      continue;
    }
    if (startsWithIgnoreCase(rest, "tomorrow")) {
      setDate(&f, civil(now + absl::Hours(24)));
      pos += 7;
      continue;
    }
    bool clock_word = false;
    for (const Keyword& k : kClockWords) {
      if (startsWithIgnoreCase(rest, k.word)) {
        f.hour = k.hour;
        f.minute = 0;
        f.second = 0;
        pos += k.word.size() - 1;
        clock_word = true;
        break;
      }
    }
    if (clock_word) continue;
    if (startsWithIgnoreCase(rest, "now")) {
      int64_t delta = 0;
      for (size_t i = pos + 3;; ++i) {
        char ci = at(s, i);
        if (ci == '+' || ci == '-') {
          pos = i;
          if (!getDelta(s, &pos, &delta)) return fail();
          if (ci == '-') delta = -delta;
          break;
        }
        if (isBlank(ci)) continue;
        if (ci == '\0' || ci == '\n') {
          pos = i - 1;
          break;
        }
        pos = i;
        return fail();
      }
      if (delta > absl::ToInt64Seconds(absl::Hours(24 * 365 * 10000)) ||
          delta < -absl::ToInt64Seconds(absl::Hours(24 * 365 * 10000))) {
        return fail();
      }
      absl::CivilSecond later = civil(now + absl::Seconds(delta));
      setDate(&f, later);
      f.hour = later.hour();
      f.minute = later.minute();
      f.second = later.second();
      continue;
    }
    if (!isDigit(c)) return fail();
    if (at(s, pos + 1) == ':' || at(s, pos + 2) == ':') {
      if (!getTime(s, &pos, &f)) return fail();
      continue;
    }
    if (!getDate(s, &pos, &f)) return fail();
  }

  if (f.hour == -1 && f.month == -1) return fail();  // Slurm returns the epoch here
  if (f.hour == -1) {
    f.hour = 0;
    f.minute = 0;
  } else if (f.month == -1) {
    // A time without a date is the soonest such time (or today, looking into the past).
    if (past || f.hour > now_c.hour() || (f.hour == now_c.hour() && f.minute > now_c.minute())) {
      setDate(&f, now_c);
    } else {
      setDate(&f, civil(now + absl::Hours(24)));
    }
  }
  if (f.year == -1) {
    int now_month = now_c.month() - 1;
    if (past) {
      f.year = f.month > now_month ? now_c.year() - 1 : now_c.year();
    } else if (f.month > now_month || (f.month == now_month && f.mday > now_c.day()) ||
               (f.month == now_month && f.mday == now_c.day() && f.hour > now_c.hour()) ||
               (f.month == now_month && f.mday == now_c.day() && f.hour == now_c.hour() &&
                f.minute > now_c.minute())) {
      f.year = now_c.year();
    } else {
      f.year = now_c.year() + 1;
    }
  }
  absl::CivilSecond result(f.year, f.month + 1, f.mday, f.hour, f.minute, f.second);
  const absl::Time t = absl::FromCivil(result, absl::UTCTimeZone());
  if (t > kLatestTimestamp) {
    pos = 0;
    return fail();
  }
  return t;
}

std::string formatTimestamp(absl::Time t) {
  if (t == absl::UnixEpoch() || t == absl::InfiniteFuture() || t == absl::InfinitePast()) {
    return "Unknown";
  }
  return absl::FormatTime("%Y-%m-%dT%H:%M:%S", t, absl::UTCTimeZone());
}

}  // namespace muster::jobengine::slurm
