// The bounds proto/json.h puts on what Muster decodes (tests/fuzz/README.md explains each limit):
// hostile JSON must fail with an error that names the problem, never exhaust the stack or memory,
// and never be truncated into a different value.
#include "proto/json.h"

#include <catch2/catch.hpp>

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
