#include "proto/quantity.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace muster::proto {
namespace {

Quantity q(std::string_view text) {
  absl::StatusOr<Quantity> parsed = Quantity::parse(text);
  INFO("parsing \"" << text << "\": " << parsed.status().ToString());
  REQUIRE(parsed.ok());
  return *parsed;
}

// Nano-units as a decimal string, to compare against Kubernetes' printed inf.Dec values.
std::string nanoString(const Quantity& quantity) {
  absl::int128 v = quantity.nanoValue();
  const bool negative = v < 0;
  absl::uint128 m = negative ? absl::uint128(-v) : absl::uint128(v);
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  } while (m > 0);
  return negative ? "-" + out : out;
}

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

TEST_CASE("a cpu request of 100m is 100 milli-units", "[quantity]") {
  Quantity cpu = q("100m");
  CHECK(cpu.milliValue() == 100);
  CHECK(cpu.value() == 1);
  CHECK(cpu.nanoValue() == 100'000'000);
}

TEST_CASE("a fractional cpu of 1.5 is 1500m and rounds up to 2 whole cpus", "[quantity]") {
  Quantity cpu = q("1.5");
  CHECK(cpu.milliValue() == 1500);
  CHECK(cpu.value() == 2);
}

TEST_CASE("binary suffixes are powers of 1024", "[quantity]") {
  CHECK(q("1Ki").value() == 1024);
  CHECK(q("500Mi").value() == 500LL * 1024 * 1024);
  CHECK(q("2Gi").value() == 2LL * 1024 * 1024 * 1024);
  CHECK(q("5Ti").value() == 5LL << 40);
  CHECK(q("4Pi").value() == 4LL << 50);
  CHECK(q("3Ei").value() == 3LL << 60);
}

TEST_CASE("decimal suffixes are powers of 1000, from nano to exa", "[quantity]") {
  CHECK(q("5n").nanoValue() == 5);
  CHECK(q("4u").nanoValue() == 4'000);
  CHECK(q("3m").nanoValue() == 3'000'000);
  CHECK(q("9").value() == 9);
  CHECK(q("8k").value() == 8'000);
  CHECK(q("7M").value() == 7'000'000);
  CHECK(q("6G").value() == 6'000'000'000);
  CHECK(q("5T").value() == 5'000'000'000'000);
  CHECK(q("2P").value() == 2'000'000'000'000'000);
  CHECK(q("1E").value() == 1'000'000'000'000'000'000);
}

TEST_CASE("decimal exponents scale by powers of ten, upper or lower case, signed", "[quantity]") {
  CHECK(q("1e3").value() == 1000);
  CHECK(q("1E3").value() == 1000);
  CHECK(q("1.3E+6").value() == 1'300'000);
  CHECK(q("1.5E-3").nanoValue() == 1'500'000);
  CHECK(q("0.5e-2").milliValue() == 5);
  CHECK(q("1e-9").nanoValue() == 1);
}

TEST_CASE("numbers may omit the integer or fraction part and carry a sign", "[quantity]") {
  CHECK(q(".5").milliValue() == 500);
  CHECK(q("1.").value() == 1);
  CHECK(q("1.G").value() == 1'000'000'000);
  CHECK(q("+1").value() == 1);
  CHECK(q("-1").value() == -1);
  CHECK(q("007").value() == 7);
  CHECK(q("0").isZero());
  CHECK(q("000").isZero());
  CHECK(q("0Gi").isZero());
}

TEST_CASE("a fractional binary quantity is exact in nano-units", "[quantity]") {
  // 0.1 * 2^30 = 107374182.4
  Quantity memory = q("0.1Gi");
  CHECK(nanoString(memory) == "107374182400000000");
  CHECK(memory.value() == 107374183);
  CHECK(q("100.035Ki").milliValue() == 102435840);
}

TEST_CASE("anything finer than a nano-unit rounds up to the next nano-unit", "[quantity]") {
  CHECK(q("3.001n").nanoValue() == 4);
  CHECK(q("1.1E-9").nanoValue() == 2);
  CHECK(q("0.0000000001").nanoValue() == 1);
  CHECK(q("0.00000012345").nanoValue() == 124);
  CHECK(q("0.000000000001Ki").nanoValue() == 2);
  CHECK(q("1e-100").nanoValue() == 1);
  CHECK(q("2147483647e-9").milliValue() == 2148);
}

TEST_CASE("negative amounts finer than nano round away from zero, as Kubernetes does",
          "[quantity]") {
  CHECK(q("-0.5n").nanoValue() == -1);
  CHECK(q("-3.001n").nanoValue() == -4);
}

TEST_CASE("value and milliValue are ceilings, also for negative amounts", "[quantity]") {
  CHECK(q("1001m").value() == 2);
  CHECK(q("1000m").value() == 1);
  CHECK(q("1n").milliValue() == 1);
  CHECK(q("-1.5").value() == -1);
  CHECK(q("-1500u").milliValue() == -1);
  CHECK(q("-1n").milliValue() == 0);
}

TEST_CASE("values agree with Kubernetes' resource.ParseQuantity", "[quantity]") {
  // Expected nano amounts printed by k8s.io/apimachinery v0.36.3 (AsDec, scaled to nano).
  struct Case {
    const char* input;
    const char* nano;
    int64_t milli;
    int64_t value;
  };
  const Case cases[] = {
      {"100m", "100000000", 100, 1},
      {"1.5", "1500000000", 1500, 2},
      {"2Gi", "2147483648000000000", 2147483648000, 2147483648},
      {"500Mi", "524288000000000000", 524288000000, 524288000},
      {".5", "500000000", 500, 1},
      {"0.1Gi", "107374182400000000", 107374182400, 107374183},
      {"1.5E-3", "1500000", 2, 1},
      {"100.035Ki", "102435840000000", 102435840, 102436},
      {"1.5Gi", "1610612736000000000", 1610612736000, 1610612736},
      {"0.5Ki", "512000000000", 512000, 512},
      {"1.3E+6", "1300000000000000", 1300000000, 1300000},
      {"0.00000012345", "124", 1, 1},
      {"1000000000000000000000000000000000000000000e-30", "1000000000000000000000",
       1000000000000000, 1000000000000},
  };
  for (const Case& c : cases) {
    INFO(c.input);
    Quantity parsed = q(c.input);
    CHECK(nanoString(parsed) == c.nano);
    CHECK(parsed.milliValue() == c.milli);
    CHECK(parsed.value() == c.value);
  }
}

TEST_CASE("binary quantities are capped at 2^63-1 units, as Kubernetes caps them", "[quantity]") {
  CHECK(q("9Ei").value() == kInt64Max);
  CHECK(q("9223372036854775807Ki").value() == kInt64Max);
  CHECK(q("9Ei") == q("9223372036854775807"));
}

TEST_CASE("decimal quantities beyond int64 are kept exactly and saturate on conversion",
          "[quantity]") {
  Quantity huge = q("12E");
  CHECK(nanoString(huge) == "12000000000000000000000000000");
  CHECK(huge.value() == kInt64Max);
  CHECK(huge.milliValue() == kInt64Max);
  CHECK(q("-12E").value() == kInt64Min);
  CHECK(q("3Ei").milliValue() == kInt64Max);
  CHECK(nanoString(q("123456789012345678901234567890")) ==
        "123456789012345678901234567890000000000");
}

TEST_CASE("amounts too large for int128 nano-units saturate instead of wrapping", "[quantity]") {
  Quantity max = q("1e100");
  CHECK(max.nanoValue() == absl::Int128Max());
  CHECK(q("-1e100").nanoValue() == -absl::Int128Max());
  CHECK(q("1e2147483647").nanoValue() == absl::Int128Max());
  CHECK(q("999999999999999999999999999999999999999999").nanoValue() == absl::Int128Max());
  CHECK((max + max).nanoValue() == absl::Int128Max());
  CHECK((-max - max).nanoValue() == -absl::Int128Max());
}

TEST_CASE("malformed quantities are rejected with a message naming the input", "[quantity]") {
  const char* invalid[] = {
      "",       "1.2.3", "Gi", "1 Gi", "1KiB", "1e",    "1E+",   "--1",  " 1",   "1 ",
      "1.1.M",  "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", "1K",
      "1k+3",   "1Ki3",  ".",      "-",     "+",     "1ee3", "1e4294967297", "1e2147483648",
      "1e-2147483648", "١"};
  for (const char* text : invalid) {
    INFO("input: \"" << text << "\"");
    absl::StatusOr<Quantity> parsed = Quantity::parse(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(parsed.status().message()),
               Catch::Contains("\"" + std::string(text) + "\""));
  }
}

TEST_CASE("a quantity that breaks the syntax cites the Kubernetes regular expression",
          "[quantity]") {
  absl::StatusOr<Quantity> parsed = Quantity::parse("1.2.3");
  REQUIRE_FALSE(parsed.ok());
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Contains("quantities must match the regular expression"));
  CHECK_THAT(std::string(Quantity::parse("1e").status().message()),
             Catch::Contains("unable to parse quantity's suffix"));
}

TEST_CASE("exponents up to the int32 range are accepted", "[quantity]") {
  CHECK(Quantity::parse("1e2147483647").ok());
  CHECK(Quantity::parse("1e-2147483647").ok());
  CHECK(q("1e-2147483647").nanoValue() == 1);
}

TEST_CASE("quantities compare by amount, whatever the suffix", "[quantity]") {
  CHECK(q("1Gi") == q("1073741824"));
  CHECK(q("1000m") == q("1"));
  CHECK(q("1e3") == q("1k"));
  CHECK(q("100m") > q("50m"));
  CHECK(q("50m") < q("100m"));
  CHECK(q("10000T") > q("100Gi"));
  CHECK(q("-1") < q("0"));
  CHECK(q("1Ki") >= q("1024"));
  CHECK(q("1Ki") != q("1k"));
  CHECK(Quantity() == q("0"));
}

TEST_CASE("sums and differences are exact", "[quantity]") {
  CHECK((q("100m") + q("1.9")).milliValue() == 2000);
  CHECK((q("1Gi") - q("512Mi")) == q("512Mi"));
  CHECK((q("1") - q("1500m")).milliValue() == -500);
  Quantity total;
  total += q("250m");
  total += q("250m");
  total -= q("100m");
  CHECK(total.milliValue() == 400);
  CHECK((-q("2")).value() == -2);
}

TEST_CASE("adding to zero takes the other quantity's format", "[quantity]") {
  Quantity total;
  total += q("1Gi");
  CHECK(total.toString() == "1Gi");
  total += q("1Gi");
  CHECK(total.toString() == "2Gi");
}

TEST_CASE("quantities print in a canonical form", "[quantity]") {
  CHECK(q("0").toString() == "0");
  CHECK(q("0Gi").toString() == "0");
  CHECK(q("100m").toString() == "100m");
  CHECK(q("0.1").toString() == "100m");
  CHECK(q("1.5").toString() == "1500m");
  CHECK(q("1000m").toString() == "1");
  CHECK(q("1000M").toString() == "1G");
  CHECK(q("1024Mi").toString() == "1Gi");
  CHECK(q("1.5Gi").toString() == "1536Mi");
  CHECK(q("2000Ki").toString() == "2000Ki");
  CHECK(q("0.5Ki").toString() == "512");
  CHECK(q("1023").toString() == "1023");
  CHECK(q("0.1Gi").toString() == "107374182400m");
  CHECK(q("1e3").toString() == "1e3");
  CHECK(q("1.5E-3").toString() == "1500e-6");
  CHECK(q("0.5e-2").toString() == "5e-3");
  CHECK(q("1.1E-9").toString() == "2e-9");
  CHECK(q("3.001n").toString() == "4n");
  CHECK(q("12E").toString() == "12E");
  // Beyond exa: the exponent form goes on as apimachinery's does; there is no suffix beyond E.
  CHECK(q("1e21").toString() == "1e21");
  CHECK(q("12e20").toString() == "1200e18");
  CHECK(q("5e27").toString() == "5e27");
  CHECK(q("1000E").toString() == "1000E");
  CHECK(q("-1.5").toString() == "-1500m");
  CHECK(q("-2Gi").toString() == "-2Gi");
  CHECK(q(".000000000001Ki").toString() == "2n");
  CHECK(Quantity::fromMilli(100).toString() == "100m");
  CHECK(Quantity::fromValue(8).toString() == "8");
  CHECK(Quantity::fromValue(2048, Quantity::Format::kBinarySI).toString() == "2Ki");
}

TEST_CASE("printed quantities parse back to the same amount", "[quantity]") {
  const char* inputs[] = {"100m",   "1.5",   "2Gi",  "500Mi", ".5",   "+1",     "-1",
                          "0.1Gi",  "1e3",   "1.5E-3", "1E",  "9Ei",  "12E",    "3.001n",
                          "-0.1Gi", "1e100", "-1e100", "100.035Ki", "1.3E+6", "7.123456M",
                          "123456789012345678901234567890"};
  for (const char* text : inputs) {
    INFO(text);
    Quantity original = q(text);
    Quantity reparsed = q(original.toString());
    CHECK(reparsed == original);
    CHECK(reparsed.toString() == original.toString());
  }
}

}  // namespace
}  // namespace muster::proto
