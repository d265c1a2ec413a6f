// resource.Quantity strings (requests, limits, capacity of every pod and node). The input is one
// or two quantities separated by a NUL. Checked: toString() reads back to the same amount and
// the same text; value() and milliValue() are the ceilings they promise; sums, differences and
// comparisons agree with exact 128-bit arithmetic wherever nothing saturates.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/numeric/int128.h"
#include "proto/quantity.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using absl::int128;

namespace {

std::string show(int128 v) {
  if (v == 0) return "0";
  std::string out;
  const bool negative = v < 0;
  absl::uint128 m = negative ? absl::uint128(-v) : absl::uint128(v);
  while (m > 0) {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  }
  return negative ? "-" + out : out;
}

int64_t saturate(int128 v) {
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

int128 ceilDiv(int128 a, int64_t b) {
  int128 q = a / b;
  if (a % b > 0) q += 1;
  return q;
}

void checkOne(const proto::Quantity& q, std::string_view input) {
  const std::string text = q.toString();
  absl::StatusOr<proto::Quantity> back = proto::Quantity::parse(text);
  FUZZ_CHECK(back.ok(), fuzz::quote(input) + " -> " + text + ": " + back.status().ToString());
  FUZZ_CHECK(*back == q, fuzz::quote(input) + " -> " + text + " -> " + show(back->nanoValue()));
  // The text itself is stable from the second round on: a binary amount without an exact
  // binary suffix prints as a plain number ("62.5Ki" -> "64000"), which reads back as a decimal
  // one ("64k"), as with Kubernetes' Quantity.String().
  const std::string again = back->toString();
  absl::StatusOr<proto::Quantity> third = proto::Quantity::parse(again);
  FUZZ_CHECK(third.ok() && *third == q && third->toString() == again,
             fuzz::quote(input) + " -> " + text + " -> " + again);
  if (q.format() != proto::Quantity::Format::kBinarySI) {
    FUZZ_CHECK(again == text, fuzz::quote(input) + " -> " + text + " -> " + again);
  }
  FUZZ_CHECK(q.value() == saturate(ceilDiv(q.nanoValue(), 1'000'000'000)), text);
  FUZZ_CHECK(q.milliValue() == saturate(ceilDiv(q.nanoValue(), 1'000'000)), text);
  FUZZ_CHECK(q.sign() == (q.nanoValue() > 0) - (q.nanoValue() < 0), text);
  FUZZ_CHECK((-(-q)) == q, text);
  FUZZ_CHECK((q - q).isZero(), text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::asText(data, size);
  const size_t nul = input.find('\0');
  const std::string_view first = input.substr(0, nul);
  absl::StatusOr<proto::Quantity> a = proto::Quantity::parse(first);
  if (!a.ok()) {
    FUZZ_CHECK(!a.status().message().empty(), fuzz::quote(first));
    return 0;
  }
  checkOne(*a, first);
  if (nul == std::string_view::npos) return 0;
  const std::string_view second = input.substr(nul + 1);
  absl::StatusOr<proto::Quantity> b = proto::Quantity::parse(second);
  if (!b.ok()) return 0;
  checkOne(*b, second);

  const int128 x = a->nanoValue();
  const int128 y = b->nanoValue();
  const std::string what = fuzz::quote(first) + " , " + fuzz::quote(second);
  FUZZ_CHECK((*a < *b) == (x < y) && (*a == *b) == (x == y), what);
  FUZZ_CHECK(*a + *b == *b + *a, what);
  // Exact wherever the sum cannot reach the saturation bound (both below 2^126).
  const int128 bound = int128(1) << 126;
  if (x > -bound && x < bound && y > -bound && y < bound) {
    FUZZ_CHECK((*a + *b).nanoValue() == x + y, what);
    FUZZ_CHECK((*a - *b).nanoValue() == x - y, what);
    FUZZ_CHECK((*a + *b) - *b == *a, what);
  } else {
    // Saturated results stay ordered: adding a positive amount never makes a quantity smaller.
    if (y >= 0) FUZZ_CHECK(*a + *b >= *a, what);
    if (y <= 0) FUZZ_CHECK(*a + *b <= *a, what);
  }
  return 0;
}
