// The bounds proto/json.h puts on what Muster decodes (tests/fuzz/README.md explains each limit):
// hostile JSON must fail with an error that names the problem, never exhaust the stack or memory,
// and never be truncated into a different value.
#include "proto/json.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "proto/codec.h"

namespace muster::proto {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string messageOf(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("deeply nested JSON is refused without using the stack", "[json][limits]") {
  // A million levels: RapidJSON's recursive parser overflowed the stack on this.
  absl::StatusOr<rapidjson::Document> doc = parseJson(std::string(1000000, '['));
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(messageOf(doc.status()) == "invalid JSON at offset 128: nested deeper than 128 levels");

  Pod pod;
  absl::Status status = decodeJson(R"({"metadata":{"labels":)" + std::string(200000, '['), &pod);
  CHECK(absl::StrContains(messageOf(status), "nested deeper than 128 levels"));
}

TEST_CASE("JSON nested exactly to the limit parses, one level more does not", "[json][limits]") {
  CHECK(parseJson(nested(kMaxJsonDepth)).ok());
  CHECK_FALSE(parseJson(nested(kMaxJsonDepth + 1)).ok());
  CHECK(parseJson(R"({"a":)" + nested(kMaxJsonDepth - 1) + "}").ok());
}

TEST_CASE("a document larger than the limit is refused before it is parsed", "[json][limits]") {
  absl::StatusOr<rapidjson::Document> doc = parseJson(R"({"kind":"Pod"})", 10);
  REQUIRE_FALSE(doc.ok());
  CHECK(messageOf(doc.status()) == "JSON document of 14 bytes is larger than the 10 Muster accepts");
  CHECK(parseJson(R"({"kind":"Pod"})", 14).ok());
}

TEST_CASE("parse errors still name the offset and RapidJSON's reason", "[json]") {
  absl::StatusOr<rapidjson::Document> doc = parseJson(R"({"a" 1})");
  REQUIRE_FALSE(doc.ok());
  CHECK(messageOf(doc.status()) ==
        "invalid JSON at offset 5: Missing a colon after a name of object member.");
  CHECK_FALSE(parseJson("{} x").ok());
  CHECK_FALSE(parseJson("").ok());
}

TEST_CASE("a number is read to the nearest double, so decoding what was encoded changes nothing",
          "[json]") {
  // Found by the paralleljob fuzzer: a 59-digit number in a launcher template was read to a
  // nearby double, written as 4.0967777777777797e58, and read back as another one.
  for (const char* text : {"40967777777777777777777777777777777777777777777777777777777",
                           "4.0967777777777797e58", "0.30000000000000004", "1.7976931348623157e308",
                           "5e-324", "123456789012345678901234567890.5", "-2.2250738585072011e-308",
                           "0e40", "9007199254740993"}) {
    INFO(text);
    absl::StatusOr<rapidjson::Document> once = parseJson(text);
    REQUIRE(once.ok());
    const std::string written = toJson(*once);
    absl::StatusOr<rapidjson::Document> twice = parseJson(written);
    REQUIRE(twice.ok());
    CHECK(toJson(*twice) == written);
    CHECK(twice->GetDouble() == once->GetDouble());
  }
  CHECK(toJson(*parseJson("4.0967777777777797e58")) == "4.0967777777777797e58");
  CHECK(parseJson("40967777777777777777777777777777777777777777777777777777777")->GetDouble() ==
        4.0967777777777777e58);
  CHECK(parseJson("0.1")->GetDouble() == 0.1);
}

TEST_CASE("integers keep their exact value and type, and doubles out of range are refused",
          "[json]") {
  CHECK(parseJson("0")->IsUint());
  CHECK(parseJson("-0")->GetInt() == 0);
  CHECK(parseJson("-2147483648")->IsInt());
  CHECK(parseJson("-2147483649")->GetInt64() == -2147483649LL);
  CHECK(parseJson("4294967295")->GetUint() == 4294967295U);
  CHECK(parseJson("9223372036854775807")->GetInt64() == INT64_MAX);
  CHECK(parseJson("-9223372036854775808")->GetInt64() == INT64_MIN);
  CHECK(parseJson("18446744073709551615")->GetUint64() == UINT64_MAX);
  CHECK(parseJson("18446744073709551616")->GetDouble() == 18446744073709551616.0);
  CHECK(parseJson("-9223372036854775809")->GetDouble() == -9223372036854775808.0);
  CHECK(toJson(*parseJson(R"({"a":[1,-1,2.5,1e2]})")) == R"({"a":[1,-1,2.5,100.0]})");
  // Closer to zero than the smallest double reads as zero, with its sign; past the largest is an
  // error, as RapidJSON reports it.
  CHECK(parseJson("1e-400")->GetDouble() == 0.0);
  CHECK(std::signbit(parseJson("-1e-400")->GetDouble()));
  CHECK(parseJson("0.0000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000001")
            ->GetDouble() == 0.0);
  absl::StatusOr<rapidjson::Document> big = parseJson(R"({"a":1.8e308})");
  REQUIRE_FALSE(big.ok());
  CHECK(messageOf(big.status()) ==
        "invalid JSON at offset 5: Number too big to be stored in double.");
  CHECK_FALSE(parseJson("1e309").ok());
  CHECK_FALSE(parseJson("-1.8e308").ok());
}

TEST_CASE("a string longer than the limit is refused, naming its field", "[json][limits]") {
  const std::string huge(kMaxJsonStringBytes + 1, 'x');
  Pod pod;
  absl::Status status = decodeJson(R"({"metadata":{"name":")" + huge + R"("}})", &pod);
  CHECK(messageOf(status) == "metadata.name: 2097153 bytes of string, more than the 2097152 Muster accepts");
  status = decodeJson(R"({"metadata":{"annotations":{"a":")" + huge + R"("}}})", &pod);
  CHECK(messageOf(status) ==
        "metadata.annotations.a: 2097153 bytes of string, more than the 2097152 Muster accepts");
  CHECK(decodeJson(R"({"metadata":{"name":")" + huge.substr(1) + R"("}})", &pod).ok());
}

TEST_CASE("a list with more elements than the limit is refused, naming it", "[json][limits]") {
  std::string tolerations;
  for (size_t i = 0; i <= kMaxJsonElements; ++i) tolerations += i ? ",{}" : "{}";
  Pod pod;
  absl::Status status = decodeJson(R"({"spec":{"tolerations":[)" + tolerations + "]}}", &pod);
  CHECK(messageOf(status) == "spec.tolerations: 65537 elements, more than the 65536 Muster accepts");

  std::string labels;
  for (size_t i = 0; i <= kMaxJsonElements; ++i) {
    labels += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"\"";
  }
  status = decodeJson(R"({"metadata":{"labels":{)" + labels + "}}}", &pod);
  CHECK(messageOf(status) == "metadata.labels: 65537 entries, more than the 65536 Muster accepts");
}

TEST_CASE("an integer out of its field's range is an error, never truncated", "[json][limits]") {
  Pod pod;
  absl::Status status = decodeJson(R"({"spec":{"priority":4294967296}})", &pod);
  CHECK(messageOf(status) == "spec.priority: expected int32, got 4294967296");
  status = decodeJson(R"({"spec":{"priority":-2147483649}})", &pod);
  CHECK(messageOf(status) == "spec.priority: expected int32, got -2147483649");
  status = decodeJson(R"({"spec":{"priority":1.5}})", &pod);
  CHECK(messageOf(status) == "spec.priority: expected int32, got 1.5");
  status = decodeJson(R"({"spec":{"priority":"1"}})", &pod);
  CHECK(messageOf(status) == "spec.priority: expected int32");
  REQUIRE(decodeJson(R"({"spec":{"priority":-2147483648}})", &pod).ok());
  CHECK(pod.spec.priority == INT32_MIN);

  ObjectMeta meta;
  absl::StatusOr<rapidjson::Document> doc = parseJson(R"({"generation":9223372036854775808})");
  REQUIRE(doc.ok());
  CHECK(messageOf(decode(*doc, &meta)) == "generation: expected int64, got 9223372036854775808");
}

}  // namespace
}  // namespace muster::proto
