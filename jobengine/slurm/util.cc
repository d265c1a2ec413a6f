#include "jobengine/slurm/util.h"

#include <limits>

namespace muster::jobengine::slurm {

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (toLowerAscii(a[i]) != toLowerAscii(b[i])) return false;
  }
  return true;
}

bool startsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && equalsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

LongOption splitLongOption(std::string_view word) {
  if (word.rfind("--", 0) == 0) word.remove_prefix(2);
  const size_t eq = word.find('=');
  if (eq == std::string_view::npos) return {std::string(word), std::nullopt};
  return {std::string(word.substr(0, eq)), std::string(word.substr(eq + 1))};
}

std::optional<uint64_t> parseLeadingDigits(std::string_view s, size_t* consumed) {
  uint64_t value = 0;
  size_t i = 0;
  bool overflow = false;
  while (i < s.size() && isDigit(s[i])) {
    uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) overflow = true;
    value = value * 10 + digit;
    ++i;
  }
  *consumed = i;
  if (i == 0 || overflow) return std::nullopt;
  return value;
}

std::optional<uint64_t> parseDigits(std::string_view s) {
  size_t consumed = 0;
  std::optional<uint64_t> value = parseLeadingDigits(s, &consumed);
  if (!value || consumed != s.size()) return std::nullopt;
  return value;
}

int64_t strtolPrefix(std::string_view s, size_t* consumed) {
  size_t i = 0;
  while (i < s.size() && isSpace(s[i])) ++i;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  size_t digits_start = i;
  // Accumulate as a negative number so that INT64_MIN is representable.
  int64_t value = 0;
  bool saturated = false;
  while (i < s.size() && isDigit(s[i])) {
    int64_t digit = s[i] - '0';
    if (!saturated) {
      if (value < (std::numeric_limits<int64_t>::min() + digit) / 10) {
        saturated = true;
      } else {
        value = value * 10 - digit;
      }
    }
    ++i;
  }
  if (i == digits_start) {
    *consumed = 0;
    return 0;
  }
  *consumed = i;
  if (saturated) {
    return negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  if (!negative) {
    return value == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max()
                                                         : -value;
  }
  return value;
}

}  // namespace muster::jobengine::slurm
