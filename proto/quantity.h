#pragma once

// resource.Quantity as Kubernetes parses it (k8s.io/apimachinery/pkg/api/resource):
//
//   <quantity>      ::= <sign><number><suffix>
//   <number>        ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//   <suffix>        ::= <binarySI> | <decimalSI> | <decimalExponent>
//   <binarySI>      ::= Ki | Mi | Gi | Ti | Pi | Ei
//   <decimalSI>     ::= n | u | m | "" | k | M | G | T | P | E
//   <decimalExponent> ::= e<signedInt> | E<signedInt>
//
// The value is kept exactly in nano-units (10^-9), the finest precision Kubernetes keeps. A
// non-zero amount finer than that is rounded up in magnitude, as Kubernetes does ("0.1n" is 1n,
// "-0.1n" is -1n), so asking for some of a resource always asks for at least 1n.
//
// Differences from Kubernetes, on purpose:
// - A quantity needs at least one digit. Kubernetes' scanner lets "Gi", ".", "+" and "-" through
//   as zero; its documented grammar (above) does not, and neither do we.
// - Magnitudes saturate at the largest nano amount an int128 holds (about 1.7e29 units); binary
//   quantities are capped at 2^63-1 units exactly as Kubernetes caps them.
// - value() and milliValue() are the mathematical ceiling, also for negative amounts.

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"

namespace muster::proto {

class Quantity {
 public:
  // How the quantity was written; only affects toString() (as Quantity.Format does).
  enum class Format { kDecimalSI, kBinarySI, kDecimalExponent };

  Quantity() = default;  // zero

  // Parses a quantity string. Errors are InvalidArgument and name the input.
  static absl::StatusOr<Quantity> parse(std::string_view text);

  static Quantity fromNano(absl::int128 nano, Format format = Format::kDecimalSI);
  static Quantity fromMilli(int64_t milli);  // fromMilli(100).toString() == "100m"
  static Quantity fromValue(int64_t units, Format format = Format::kDecimalSI);

  // The exact amount in units of 10^-9.
  absl::int128 nanoValue() const { return nano_; }
  // ceil(amount * 1000), saturating at the int64 limits.
  int64_t milliValue() const;
  // ceil(amount), saturating at the int64 limits.
  int64_t value() const;

  bool isZero() const { return nano_ == 0; }
  int sign() const { return nano_ > 0 ? 1 : (nano_ < 0 ? -1 : 0); }
  Format format() const { return format_; }

  // Canonical text that parse() reads back to the same amount: "100m", "2Gi", "1500m", "1e3",
  // "0". Binary quantities print with the largest binary suffix that divides them exactly
  // ("1024Mi" prints "1Gi") when they are at least 1024; everything else prints with the largest
  // decimal suffix (or e3^k exponent) that keeps the mantissa an integer.
  std::string toString() const;

  // Sums and differences saturate. The result keeps this quantity's format, or the other's when
  // this one is zero (as Quantity.Add does).
  Quantity operator+(const Quantity& other) const;
  Quantity operator-(const Quantity& other) const;
  Quantity& operator+=(const Quantity& other) { return *this = *this + other; }
  Quantity& operator-=(const Quantity& other) { return *this = *this - other; }
  Quantity operator-() const;

  // Compare amounts only, not formats: "1Gi" == "1073741824".
  friend bool operator==(const Quantity& a, const Quantity& b) { return a.nano_ == b.nano_; }
  friend std::strong_ordering operator<=>(const Quantity& a, const Quantity& b) {
    if (a.nano_ < b.nano_) return std::strong_ordering::less;
    if (a.nano_ > b.nano_) return std::strong_ordering::greater;
    return std::strong_ordering::equal;
  }

 private:
  Quantity(absl::int128 nano, Format format) : nano_(nano), format_(format) {}

  absl::int128 nano_ = 0;
  Format format_ = Format::kDecimalSI;
};

}  // namespace muster::proto
