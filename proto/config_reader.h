#pragma once

// Reading Muster's YAML configuration: one file for the whole process, each component (the
// process itself, the scheduler, the job engine) contributing the keys it owns. Every key is
// optional; an unknown key is an error naming it and the keys known there, so a typo never
// silently falls back to a default. Errors read "queue.maxBackoffSeconds: must be an integer,
// got \"abc\"".

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muster::proto::config {

// Reads one value; `key` is its dotted path for messages.
using Reader = std::function<absl::Status(const YAML::Node& value, const std::string& key)>;
using Keys = std::vector<std::pair<std::string, Reader>>;

// InvalidArgument "<key>: <what>".
absl::Status bad(std::string_view key, std::string_view what);
// "\"text\"", "a list", "a mapping" or "null", for messages.
std::string describe(const YAML::Node& n);

absl::Status readInt(const YAML::Node& n, std::string_view key, int64_t* out);
absl::Status readDouble(const YAML::Node& n, std::string_view key, double* out);
absl::Status readBool(const YAML::Node& n, std::string_view key, bool* out);
absl::Status readString(const YAML::Node& n, std::string_view key, std::string* out);
absl::Status readStrings(const YAML::Node& n, std::string_view key, std::vector<std::string>* out);

Reader intInto(int64_t* out);
Reader doubleInto(double* out);
Reader boolInto(bool* out);
Reader stringInto(std::string* out);
Reader stringsInto(std::vector<std::string>* out);
// A nested mapping read with `keys`.
Reader mapInto(Keys keys);

// Visits each key of the mapping `n` (at dotted path `prefix`, "" for the root) with the reader
// registered for it; unknown keys are an error. A null node is an empty mapping.
absl::Status readMap(const YAML::Node& n, const std::string& prefix, const Keys& keys);

// yaml-cpp 0.7 refuses documents nested deeper than this (its parser's DepthGuard), so nothing
// that reads a YAML::Node recurses deeper.
inline constexpr int kMaxYamlDepth = 500;

// The message of a yaml-cpp error, without its position ("end of map not found"). yaml-cpp says
// "bad file" when a document is nested deeper than kMaxYamlDepth; this says that.
std::string yamlErrorMessage(const YAML::Exception& e);
// yaml-cpp's full text, "yaml-cpp: error at line 3, column 1: <yamlErrorMessage>".
std::string yamlErrorText(const YAML::Exception& e);

// Parses `yaml` (a whole file) and reads its root mapping with `keys`. YAML syntax errors become
// InvalidArgument "config is not valid YAML: …".
absl::Status readDocument(std::string_view yaml, const Keys& keys);
// The whole content of `path`; NotFound naming it.
absl::StatusOr<std::string> readFile(const std::string& path);

// The most JSON yamlToJson writes. Its values become Kubernetes objects (a partition's pod template
// goes into every job's ParallelJob and pods), which the API server refuses above 1.5 MiB; the
// bound also stops aliases that expand exponentially ("billion laughs": each alias is written out
// in full).
inline constexpr size_t kMaxYamlJsonBytes = size_t{2} << 20;

// A YAML value as JSON text, for parts of a config that are Kubernetes objects (a pod template):
// plain scalars are resolved as YAML 1.2's core schema does (true/false, null/~, integers,
// floats), quoted ones stay strings; an alias is written out as the value it names. Nested more
// than 64 deep, or more than kMaxYamlJsonBytes of JSON, is an error.
absl::StatusOr<std::string> yamlToJson(const YAML::Node& n, std::string_view key);

// Validation helpers, same message style.
absl::Status positive(std::string_view key, int64_t v);
absl::Status nonNegative(std::string_view key, int64_t v);
// host:port with a numeric port 0..65535 (0: any free port; an IPv6 host in brackets).
absl::Status validateAddress(std::string_view key, const std::string& address);

}  // namespace muster::proto::config
