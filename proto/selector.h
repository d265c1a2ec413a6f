#pragma once

// Label selectors (metav1.LabelSelector) and node selectors (core/v1 NodeSelector, as node affinity
// uses them), with the matching semantics of k8s.io/apimachinery/pkg/labels and
// k8s.io/component-helpers/scheduling/corev1/nodeaffinity.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "proto/json.h"

namespace muster::proto {

using Labels = std::map<std::string, std::string>;

// metav1.LabelSelectorRequirement. Operators: "In", "NotIn", "Exists", "DoesNotExist".
struct LabelSelectorRequirement {
  std::string key;
  std::string operator_;
  std::vector<std::string> values;
};

// metav1.LabelSelector. Requirements are ANDed. A selector with no requirements matches every
// label set (LabelSelectorAsSelector's Everything); hold an absent selector as
// std::optional<LabelSelector> where "absent" must mean "nothing".
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;

  // OK, or InvalidArgument naming the first bad requirement: an unknown operator, In/NotIn without
  // values, Exists/DoesNotExist with values.
  absl::Status validate() const;
  // An invalid selector matches nothing (Kubernetes refuses to build it).
  bool matches(const Labels& labels) const;
  // The selector as text: equal for equal selectors ("{k\x1fv\x1e...}"); a key for grouping.
  std::string canonical() const;
};

// core/v1 NodeSelectorRequirement. Operators: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt";
// matchFields allow only "In" and "NotIn" with exactly one value, on the key "metadata.name".
struct NodeSelectorRequirement {
  std::string key;
  std::string operator_;
  std::vector<std::string> values;
};

// Requirements ANDed. A term with neither matchExpressions nor matchFields matches no node; a term
// with an invalid requirement (unknown operator, wrong number of values, a Gt/Lt value that is
// not an integer) matches no node either.
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;  // on node labels
  std::vector<NodeSelectorRequirement> match_fields;       // on node fields (metadata.name)

  bool isEmpty() const { return match_expressions.empty() && match_fields.empty(); }
  absl::Status validate() const;
  // `node_name` empty means the node has no fields, and matchFields are then not checked (as
  // nodeaffinity does).
  bool matches(const Labels& node_labels, std::string_view node_name) const;
};

// Terms ORed: a node matches when any term does. No terms: matches no node.
struct NodeSelector {
  std::vector<NodeSelectorTerm> node_selector_terms;

  bool matches(const Labels& node_labels, std::string_view node_name) const;
};

// core/v1 PreferredSchedulingTerm.
struct PreferredSchedulingTerm {
  int32_t weight = 0;
  NodeSelectorTerm preference;
};

// The NodeAffinity score of a node: the sum of the weights of the terms it matches. Terms with
// weight 0, empty terms and invalid terms count nothing.
int64_t preferredSchedulingScore(const std::vector<PreferredSchedulingTerm>& terms,
                                 const Labels& node_labels, std::string_view node_name);

// Parses like Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, no spaces.
bool parseInt64(std::string_view s, int64_t* out);

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, LabelSelector* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeSelectorRequirement* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeSelectorTerm* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeSelector* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PreferredSchedulingTerm* out);
absl::Status decode(const rapidjson::Value& v, LabelSelector* out);
absl::Status decode(const rapidjson::Value& v, NodeSelector* out);

}  // namespace muster::proto
