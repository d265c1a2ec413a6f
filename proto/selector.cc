#include "proto/selector.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include "proto/strings.h"

namespace muster::proto {
namespace {

bool contains(const std::vector<std::string>& values, std::string_view v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

absl::Status invalid(std::string_view what, size_t index, std::string_view why) {
  return absl::InvalidArgumentError(strCat(what, "[", std::to_string(index), "]: ", why));
}

// labels.NewRequirement's checks, for the operators each kind of selector allows.
absl::Status validateRequirement(std::string_view op, const std::vector<std::string>& values,
                                 bool allow_comparison) {
  if (op == "In" || op == "NotIn") {
    if (values.empty()) {
      return absl::InvalidArgumentError("for 'In', 'NotIn' operators, values set can't be empty");
    }
    return absl::OkStatus();
  }
  if (op == "Exists" || op == "DoesNotExist") {
    if (!values.empty()) {
      return absl::InvalidArgumentError("values set must be empty for exists and does not exist");
    }
    return absl::OkStatus();
  }
  if (allow_comparison && (op == "Gt" || op == "Lt")) {
    if (values.size() != 1) {
      return absl::InvalidArgumentError("for 'Gt', 'Lt' operators, exactly one value is required");
    }
    int64_t ignored = 0;
    if (!parseInt64(values[0], &ignored)) {
      return absl::InvalidArgumentError("for 'Gt', 'Lt' operators, the value must be an integer");
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(strCat("operator \"", op, "\" is not supported"));
}

// labels.Requirement.Matches for a requirement that passed validateRequirement.
bool requirementMatches(const std::string& key, std::string_view op,
                        const std::vector<std::string>& values, const Labels& labels) {
  auto it = labels.find(key);
  const bool has = it != labels.end();
  if (op == "In") return has && contains(values, it->second);
  if (op == "NotIn") return !has || !contains(values, it->second);
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  if (op == "Gt" || op == "Lt") {
    int64_t actual = 0;
    int64_t bound = 0;
    if (!has || !parseInt64(it->second, &actual) || !parseInt64(values[0], &bound)) return false;
    return op == "Gt" ? actual > bound : actual < bound;
  }
  return false;
}

absl::Status validateFieldRequirement(const NodeSelectorRequirement& r) {
  if (r.operator_ != "In" && r.operator_ != "NotIn") {
    return absl::InvalidArgumentError(
        strCat("operator \"", r.operator_, "\" is not supported for node fields"));
  }
  if (r.values.size() != 1) return absl::InvalidArgumentError("values: must have one element");
  return absl::OkStatus();
}

absl::Status decodeRequirements(const rapidjson::Value& v, const JsonPath& path,
                                std::string_view name, std::vector<NodeSelectorRequirement>* out) {
  out->clear();
  return forEachElement(v, path, name, [out](const rapidjson::Value& e, const JsonPath& p) {
    return decode(e, p, &out->emplace_back());
  });
}

}  // namespace

bool parseInt64(std::string_view s, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return false;
  // Accumulate negatively so that INT64_MIN parses.
  int64_t value = 0;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const int digit = s[i] - '0';
    if (value < (kMin + digit) / 10) return false;
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == kMin) return false;
    value = -value;
  }
  *out = value;
  return true;
}

absl::Status LabelSelector::validate() const {
  for (size_t i = 0; i < match_expressions.size(); ++i) {
    const LabelSelectorRequirement& r = match_expressions[i];
    absl::Status status = validateRequirement(r.operator_, r.values, /*allow_comparison=*/false);
    if (!status.ok()) return invalid("matchExpressions", i, std::string(status.message()));
  }
  return absl::OkStatus();
}

bool LabelSelector::matches(const Labels& labels) const {
  if (!validate().ok()) return false;
  for (const auto& [key, value] : match_labels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const LabelSelectorRequirement& r : match_expressions) {
    if (!requirementMatches(r.key, r.operator_, r.values, labels)) return false;
  }
  return true;
}

absl::Status NodeSelectorTerm::validate() const {
  for (size_t i = 0; i < match_expressions.size(); ++i) {
    const NodeSelectorRequirement& r = match_expressions[i];
    absl::Status status = validateRequirement(r.operator_, r.values, /*allow_comparison=*/true);
    if (!status.ok()) return invalid("matchExpressions", i, std::string(status.message()));
  }
  for (size_t i = 0; i < match_fields.size(); ++i) {
    absl::Status status = validateFieldRequirement(match_fields[i]);
    if (!status.ok()) return invalid("matchFields", i, std::string(status.message()));
  }
  return absl::OkStatus();
}

bool NodeSelectorTerm::matches(const Labels& node_labels, std::string_view node_name) const {
  if (isEmpty() || !validate().ok()) return false;
  for (const NodeSelectorRequirement& r : match_expressions) {
    if (!requirementMatches(r.key, r.operator_, r.values, node_labels)) return false;
  }
  if (!node_name.empty()) {
    for (const NodeSelectorRequirement& r : match_fields) {
      // The only node field is metadata.name; any other field reads as "".
      const std::string_view actual = r.key == "metadata.name" ? node_name : std::string_view();
      const bool equal = actual == r.values[0];
      if (r.operator_ == "In" ? !equal : equal) return false;
    }
  }
  return true;
}

bool NodeSelector::matches(const Labels& node_labels, std::string_view node_name) const {
  return std::any_of(node_selector_terms.begin(), node_selector_terms.end(),
                     [&](const NodeSelectorTerm& t) { return t.matches(node_labels, node_name); });
}

int64_t preferredSchedulingScore(const std::vector<PreferredSchedulingTerm>& terms,
                                 const Labels& node_labels, std::string_view node_name) {
  int64_t score = 0;
  for (const PreferredSchedulingTerm& t : terms) {
    if (t.weight != 0 && t.preference.matches(node_labels, node_name)) score += t.weight;
  }
  return score;
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, LabelSelector* out) {
  *out = LabelSelector{};
  if (absl::Status s = expectObject(v, path); !s.ok()) return s;
  if (absl::Status s = readStringMap(v, path, "matchLabels", &out->match_labels); !s.ok()) return s;
  return forEachElement(
      v, path, "matchExpressions", [out](const rapidjson::Value& e, const JsonPath& p) {
        if (absl::Status s = expectObject(e, p); !s.ok()) return s;
        LabelSelectorRequirement& r = out->match_expressions.emplace_back();
        if (absl::Status s = readString(e, p, "key", &r.key); !s.ok()) return s;
        if (absl::Status s = readString(e, p, "operator", &r.operator_); !s.ok()) return s;
        return readStringList(e, p, "values", &r.values);
      });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeSelectorRequirement* out) {
  *out = NodeSelectorRequirement{};
  if (absl::Status s = expectObject(v, path); !s.ok()) return s;
  if (absl::Status s = readString(v, path, "key", &out->key); !s.ok()) return s;
  if (absl::Status s = readString(v, path, "operator", &out->operator_); !s.ok()) return s;
  return readStringList(v, path, "values", &out->values);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeSelectorTerm* out) {
  *out = NodeSelectorTerm{};
  if (absl::Status s = expectObject(v, path); !s.ok()) return s;
  if (absl::Status s = decodeRequirements(v, path, "matchExpressions", &out->match_expressions);
      !s.ok()) {
    return s;
  }
  return decodeRequirements(v, path, "matchFields", &out->match_fields);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeSelector* out) {
  *out = NodeSelector{};
  if (absl::Status s = expectObject(v, path); !s.ok()) return s;
  return forEachElement(v, path, "nodeSelectorTerms",
                        [out](const rapidjson::Value& e, const JsonPath& p) {
                          return decode(e, p, &out->node_selector_terms.emplace_back());
                        });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PreferredSchedulingTerm* out) {
  *out = PreferredSchedulingTerm{};
  if (absl::Status s = expectObject(v, path); !s.ok()) return s;
  if (absl::Status s = readInt32(v, path, "weight", &out->weight); !s.ok()) return s;
  if (const rapidjson::Value* p = findField(v, "preference")) {
    return decode(*p, path.field("preference"), &out->preference);
  }
  return absl::OkStatus();
}

std::string LabelSelector::canonical() const {
  std::string out = "{";
  for (const auto& [k, v] : match_labels) strAppend(&out, k, "\x1f", v, "\x1e");
  for (const auto& r : match_expressions) {
    strAppend(&out, r.key, "\x1f", r.operator_);
    for (const auto& v : r.values) strAppend(&out, "\x1f", v);
    strAppend(&out, "\x1e");
  }
  return out + "}";
}

absl::Status decode(const rapidjson::Value& v, LabelSelector* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, NodeSelector* out) {
  return decode(v, JsonPath(), out);
}

}  // namespace muster::proto
