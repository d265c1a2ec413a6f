// proto/config_reader.h: YAML values turned into JSON for the parts of a config that are
// Kubernetes objects (a Slurm partition's pod template).
#include "proto/config_reader.h"

#include <catch2/catch.hpp>

#include <string>

#include "absl/strings/match.h"

namespace muster::proto::config {
namespace {

TEST_CASE("yamlToJson resolves the core schema's plain scalars and keeps quoted ones strings",
          "[config]") {
  YAML::Node n = YAML::Load(R"({a: true, b: "true", c: 12, d: 1.5, e: ~, f: [x, 'y'], g: -3})");
  absl::StatusOr<std::string> json = yamlToJson(n, "t");
  REQUIRE(json.ok());
  CHECK(*json == R"({"a":true,"b":"true","c":12,"d":1.5,"e":null,"f":["x","y"],"g":-3})");
}

TEST_CASE("yamlToJson writes an alias out as the value it names", "[config]") {
  YAML::Node n = YAML::Load("a: &x {k: v}\nb: *x\n");
  absl::StatusOr<std::string> json = yamlToJson(n, "t");
  REQUIRE(json.ok());
  CHECK(*json == R"({"a":{"k":"v"},"b":{"k":"v"}})");
}

TEST_CASE("yamlToJson stops an alias bomb at its size limit", "[config][limits]") {
  // "Billion laughs": nine levels of ten aliases each name 10^9 scalars. Written out in full this
  // took minutes and gigabytes; it now fails after kMaxYamlJsonBytes.
  std::string yaml = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 9; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    yaml += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) yaml += (j ? ", " : "") + prev;
    yaml += "]\n";
  }
  absl::StatusOr<std::string> json = yamlToJson(YAML::Load(yaml), "template");
  REQUIRE_FALSE(json.ok());
  CHECK(json.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(json.status().message(),
                          "is more than 2097152 bytes as JSON (aliases are written out in full)"));
}

TEST_CASE("yamlToJson refuses values nested more than 64 deep", "[config][limits]") {
  std::string yaml = std::string(70, '[') + std::string(70, ']');
  absl::StatusOr<std::string> json = yamlToJson(YAML::Load(yaml), "t");
  REQUIRE_FALSE(json.ok());
  CHECK(absl::StrContains(json.status().message(), "is nested too deeply"));
}

TEST_CASE("a config nested deeper than yaml-cpp's limit says so", "[config][limits]") {
  // yaml-cpp 0.7 stops at 500 levels but calls it "bad file".
  absl::Status status = readDocument(std::string(100000, '['), {});
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(status.message(), "config is not valid YAML"));
  CHECK(absl::StrContains(status.message(), "nested deeper than 500 levels"));
  CHECK_FALSE(absl::StrContains(status.message(), "bad file"));
  // 499 levels are fine as YAML (and then not a mapping of known keys).
  status = readDocument("a: " + std::string(498, '[') + std::string(498, ']'), {});
  CHECK(absl::StrContains(status.message(), "a: unknown key"));
}

}  // namespace
}  // namespace muster::proto::config
