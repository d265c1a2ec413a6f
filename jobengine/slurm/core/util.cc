#include "jobengine/slurm/core/util.h"

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

std::string terminalSafe(std::string_view s) {
  auto cont = [&](size_t i) {
    return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80;
  };
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
      ++i;
      continue;
    }
    // The length of a valid sequence led by `c` (RFC 3629's table), 0 when there is none.
    size_t n = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      n = cont(i + 1) ? 2 : 0;
    } else if (c >= 0xe0 && c <= 0xef) {
      const unsigned char c1 = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
      const bool ok1 = c == 0xe0 ? (c1 >= 0xa0 && c1 <= 0xbf)    // not overlong
                       : c == 0xed ? (c1 >= 0x80 && c1 <= 0x9f)  // not a surrogate
                                   : cont(i + 1);
      n = ok1 && cont(i + 2) ? 3 : 0;
    } else if (c >= 0xf0 && c <= 0xf4) {
      const unsigned char c1 = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
      const bool ok1 = c == 0xf0 ? (c1 >= 0x90 && c1 <= 0xbf)    // not overlong
                       : c == 0xf4 ? (c1 >= 0x80 && c1 <= 0x8f)  // at most U+10FFFF
                                   : cont(i + 1);
      n = ok1 && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    if (n == 0) {  // not UTF-8: this byte alone
      out += '?';
      ++i;
      continue;
    }
    // C1 controls: U+0080-U+009F, 0xc2 0x80-0xc2 0x9f.
    if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) <= 0x9f)
      out += '?';
    else
      out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace muster::jobengine::slurm
