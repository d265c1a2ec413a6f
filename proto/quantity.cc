#include "proto/quantity.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "proto/strings.h"

namespace muster::proto {
namespace {

using absl::int128;
using absl::uint128;

constexpr std::string_view kFormatError =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr std::string_view kSuffixError = "unable to parse quantity's suffix";

constexpr int64_t kNanoPerUnit = 1'000'000'000;
constexpr int64_t kNanoPerMilli = 1'000'000;

// Magnitudes are symmetric so that negation never overflows.
const uint128 kMaxMagnitude = uint128(absl::Int128Max());
// Kubernetes caps binary quantities at 2^63-1 units.
const uint128 kMaxBinaryMagnitude =
    uint128(std::numeric_limits<int64_t>::max()) * uint128(kNanoPerUnit);

bool isDigit(char c) { return c >= '0' && c <= '9'; }

absl::Status parseError(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(strCat("invalid quantity \"", text, "\": ", why));
}

struct Suffix {
  int base = 10;         // 10 or 2
  int64_t exponent = 0;  // power of `base`
  Quantity::Format format = Quantity::Format::kDecimalSI;
};

// What Kubernetes' scanner lets through after the number: [eEinumkKMGTP]*[-+]?[0-9]*.
bool scannable(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && std::string_view("eEinumkKMGTP").find(s[i]) != std::string_view::npos) ++i;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (i < s.size() && isDigit(s[i])) ++i;
  return i == s.size();
}

std::optional<Suffix> interpretSuffix(std::string_view s) {
  using Format = Quantity::Format;
  static constexpr std::pair<std::string_view, int> kDecimal[] = {
      {"", 0}, {"n", -9}, {"u", -6}, {"m", -3}, {"k", 3},
      {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}, {"E", 18}};
  static constexpr std::pair<std::string_view, int> kBinary[] = {
      {"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  for (const auto& [name, exponent] : kDecimal) {
    if (s == name) return Suffix{10, exponent, Format::kDecimalSI};
  }
  for (const auto& [name, exponent] : kBinary) {
    if (s == name) return Suffix{2, exponent, Format::kBinarySI};
  }
  // e<signed int>: Kubernetes reads it with strconv.ParseInt and accepts |exponent| <= MaxInt32.
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) return std::nullopt;
  size_t i = 1;
  bool negative = false;
  if (s[i] == '+' || s[i] == '-') {
    negative = s[i] == '-';
    ++i;
  }
  if (i == s.size()) return std::nullopt;
  int64_t exponent = 0;
  for (; i < s.size(); ++i) {
    if (!isDigit(s[i])) return std::nullopt;
    exponent = exponent * 10 + (s[i] - '0');
    if (exponent > std::numeric_limits<int32_t>::max()) return std::nullopt;
  }
  return Suffix{10, negative ? -exponent : exponent, Format::kDecimalExponent};
}

// digits *= 2^bits, on a decimal digit string (most significant first).
void multiplyByPowerOfTwo(std::string* digits, int bits) {
  while (bits > 0) {
    const int step = std::min(bits, 30);
    bits -= step;
    const uint64_t factor = uint64_t{1} << step;
    uint64_t carry = 0;
    for (auto it = digits->rbegin(); it != digits->rend(); ++it) {
      const uint64_t v = static_cast<uint64_t>(*it - '0') * factor + carry;
      *it = static_cast<char>('0' + v % 10);
      carry = v / 10;
    }
    std::string prefix;
    while (carry > 0) {
      prefix.push_back(static_cast<char>('0' + carry % 10));
      carry /= 10;
    }
    std::reverse(prefix.begin(), prefix.end());
    digits->insert(0, prefix);
  }
}

// Decimal digits → magnitude; nullopt when it exceeds kMaxMagnitude.
std::optional<uint128> digitsToMagnitude(std::string_view digits) {
  uint128 v = 0;
  for (char c : digits) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (kMaxMagnitude - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

uint128 powerOfTen(int n) {
  uint128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

std::string magnitudeToString(uint128 v) {
  if (v == 0) return "0";
  std::string out;
  while (v > 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

uint128 magnitudeOf(int128 v) {
  // Values are kept within ±Int128Max, so negation is safe.
  return v < 0 ? uint128(-v) : uint128(v);
}

int128 saturatingAdd(int128 a, int128 b) {
  const int128 max = absl::Int128Max();
  if (b > 0 && a > max - b) return max;
  if (b < 0 && a < -max - b) return -max;
  return a + b;
}

int64_t saturateToInt64(int128 v) {
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

int64_t ceilDiv(int128 nano, int64_t divisor) {
  int128 q = nano / divisor;  // truncates toward zero
  if (nano % divisor > 0) q += 1;
  return saturateToInt64(q);
}

}  // namespace

absl::StatusOr<Quantity> Quantity::parse(std::string_view text) {
  if (text.empty()) return parseError(text, kFormatError);
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++pos;
  }
  const size_t int_start = pos;
  while (pos < text.size() && isDigit(text[pos])) ++pos;
  std::string_view int_digits = text.substr(int_start, pos - int_start);
  std::string_view frac_digits;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_start = ++pos;
    while (pos < text.size() && isDigit(text[pos])) ++pos;
    frac_digits = text.substr(frac_start, pos - frac_start);
  }
  if (int_digits.empty() && frac_digits.empty()) return parseError(text, kFormatError);

  const std::string_view suffix_text = text.substr(pos);
  if (!scannable(suffix_text)) return parseError(text, kFormatError);
  const std::optional<Suffix> suffix = interpretSuffix(suffix_text);
  if (!suffix) return parseError(text, kSuffixError);

  // amount = digits * 10^exponent10 (* 2^binary exponent, applied to the digits).
  std::string digits = strCat(int_digits, frac_digits);
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  int64_t exponent10 = -static_cast<int64_t>(frac_digits.size());
  if (suffix->base == 10) {
    exponent10 += suffix->exponent;
  } else if (!digits.empty()) {
    multiplyByPowerOfTwo(&digits, static_cast<int>(suffix->exponent));
  }
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++exponent10;
  }

  Format format = suffix->format;
  if (digits.empty()) return Quantity(0, format);

  // Into nano units: magnitude = digits * 10^(exponent10 + 9), rounded up when fractional.
  const int64_t nano_exponent = exponent10 + 9;
  uint128 magnitude = 0;
  if (nano_exponent >= 0) {
    const int64_t total_digits = static_cast<int64_t>(digits.size()) + nano_exponent;
    std::optional<uint128> v;
    if (total_digits <= 39) {
      v = digitsToMagnitude(digits);
      for (int64_t i = 0; v && i < nano_exponent; ++i) {
        if (*v > kMaxMagnitude / 10) v.reset();
        else *v *= 10;
      }
    }
    magnitude = v.value_or(kMaxMagnitude);
  } else {
    const uint64_t fraction_digits = static_cast<uint64_t>(-nano_exponent);
    if (fraction_digits >= digits.size()) {
      magnitude = 1;  // a non-zero amount below 1n rounds up to 1n
    } else {
      // Trailing zeros are gone, so the dropped fraction is non-zero: round up.
      const std::string_view whole =
          std::string_view(digits).substr(0, digits.size() - fraction_digits);
      const std::optional<uint128> v = digitsToMagnitude(whole);
      magnitude = (v && *v < kMaxMagnitude) ? *v + 1 : kMaxMagnitude;
    }
  }

  if (format == Format::kBinarySI) {
    magnitude = std::min(magnitude, kMaxBinaryMagnitude);
    // Kubernetes prints binary amounts below one unit as decimal ones.
    if (magnitude < uint128(kNanoPerUnit)) format = Format::kDecimalSI;
  }
  const int128 nano = int128(magnitude);
  return Quantity(negative ? -nano : nano, format);
}

Quantity Quantity::fromNano(absl::int128 nano, Format format) {
  const int128 max = absl::Int128Max();
  return Quantity(std::clamp(nano, -max, max), format);
}

Quantity Quantity::fromMilli(int64_t milli) {
  return Quantity(int128(milli) * kNanoPerMilli, Format::kDecimalSI);
}

Quantity Quantity::fromValue(int64_t units, Format format) {
  return Quantity(int128(units) * kNanoPerUnit, format);
}

int64_t Quantity::milliValue() const { return ceilDiv(nano_, kNanoPerMilli); }

int64_t Quantity::value() const { return ceilDiv(nano_, kNanoPerUnit); }

std::string Quantity::toString() const {
  if (nano_ == 0) return "0";
  const std::string sign = nano_ < 0 ? "-" : "";
  const uint128 magnitude = magnitudeOf(nano_);

  if (format_ == Format::kBinarySI && magnitude >= uint128(1024) * kNanoPerUnit &&
      magnitude % kNanoPerUnit == 0) {
    static constexpr std::string_view kBinarySuffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    uint128 units = magnitude / kNanoPerUnit;
    int power = 0;
    while (power < 6 && units % 1024 == 0) {
      units /= 1024;
      ++power;
    }
    return strCat(sign, magnitudeToString(units), kBinarySuffixes[power]);
  }

  // Largest exponent of 10^3 that keeps the mantissa whole: from n = 10^-9 up to E = 10^18 for
  // suffixes (there is none beyond E, so 10^21 prints as "1000E"), and up to 10^27 (10^36 nano,
  // the most a uint128 holds) in exponent form, which apimachinery prints as "1e21", not "1000e18".
  static constexpr std::string_view kDecimalSuffixes[] = {"n", "u", "m", "",  "k",
                                                          "M", "G", "T", "P", "E"};
  const int max_step = format_ == Format::kDecimalExponent ? 12 : 9;
  int step = 0;
  for (int candidate = max_step; candidate > 0; --candidate) {
    if (magnitude % powerOfTen(3 * candidate) == 0) {
      step = candidate;
      break;
    }
  }
  const std::string mantissa = magnitudeToString(magnitude / powerOfTen(3 * step));
  if (format_ == Format::kDecimalExponent) {
    const int exponent = 3 * step - 9;
    if (exponent == 0) return strCat(sign, mantissa);
    return strCat(sign, mantissa, "e", std::to_string(exponent));
  }
  return strCat(sign, mantissa, kDecimalSuffixes[step]);
}

Quantity Quantity::operator+(const Quantity& other) const {
  return Quantity(saturatingAdd(nano_, other.nano_), nano_ == 0 ? other.format_ : format_);
}

Quantity Quantity::operator-(const Quantity& other) const {
  return Quantity(saturatingAdd(nano_, -other.nano_), nano_ == 0 ? other.format_ : format_);
}

Quantity Quantity::operator-() const { return Quantity(-nano_, format_); }

}  // namespace muster::proto
