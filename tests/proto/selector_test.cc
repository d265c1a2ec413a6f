#include "proto/selector.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/json.h"

namespace muster::proto {
namespace {

// Builders: requirement("gpu", "In", {"a100", "h100"}), term().expr(...).field(...).
NodeSelectorRequirement requirement(std::string key, std::string op,
                                    std::vector<std::string> values = {}) {
  return NodeSelectorRequirement{std::move(key), std::move(op), std::move(values)};
}

struct TermBuilder {
  NodeSelectorTerm term;
  TermBuilder& expr(std::string key, std::string op, std::vector<std::string> values = {}) {
    term.match_expressions.push_back(requirement(std::move(key), std::move(op), std::move(values)));
    return *this;
  }
  TermBuilder& field(std::string key, std::string op, std::vector<std::string> values) {
    term.match_fields.push_back(requirement(std::move(key), std::move(op), std::move(values)));
    return *this;
  }
  operator NodeSelectorTerm() const { return term; }  // NOLINT: builder
};

TermBuilder term() { return TermBuilder{}; }

struct LabelSelectorBuilder {
  LabelSelector selector;
  LabelSelectorBuilder& label(std::string key, std::string value) {
    selector.match_labels[std::move(key)] = std::move(value);
    return *this;
  }
  LabelSelectorBuilder& expr(std::string key, std::string op,
                             std::vector<std::string> values = {}) {
    selector.match_expressions.push_back({std::move(key), std::move(op), std::move(values)});
    return *this;
  }
  bool matches(const Labels& labels) const { return selector.matches(labels); }
};

LabelSelectorBuilder selector() { return LabelSelectorBuilder{}; }

const Labels kGpuNode = {{"gpu", "h100"}, {"zone", "a"}, {"gpus", "8"}};

TEST_CASE("an empty label selector matches every label set", "[selector]") {
  CHECK(selector().matches({}));
  CHECK(selector().matches(kGpuNode));
}

TEST_CASE("matchLabels need every label present with the same value", "[selector]") {
  CHECK(selector().label("gpu", "h100").matches(kGpuNode));
  CHECK(selector().label("gpu", "h100").label("zone", "a").matches(kGpuNode));
  CHECK_FALSE(selector().label("gpu", "a100").matches(kGpuNode));
  CHECK_FALSE(selector().label("rack", "1").matches(kGpuNode));
}

TEST_CASE("label selector In needs the label and one of the values", "[selector]") {
  CHECK(selector().expr("gpu", "In", {"a100", "h100"}).matches(kGpuNode));
  CHECK_FALSE(selector().expr("gpu", "In", {"a100"}).matches(kGpuNode));
  CHECK_FALSE(selector().expr("rack", "In", {"1"}).matches(kGpuNode));
}

TEST_CASE("label selector NotIn matches when the label is absent or has another value",
          "[selector]") {
  CHECK(selector().expr("gpu", "NotIn", {"a100"}).matches(kGpuNode));
  CHECK(selector().expr("rack", "NotIn", {"1"}).matches(kGpuNode));
  CHECK_FALSE(selector().expr("gpu", "NotIn", {"h100"}).matches(kGpuNode));
}

TEST_CASE("label selector Exists and DoesNotExist look only at the key", "[selector]") {
  CHECK(selector().expr("gpu", "Exists").matches(kGpuNode));
  CHECK_FALSE(selector().expr("rack", "Exists").matches(kGpuNode));
  CHECK(selector().expr("rack", "DoesNotExist").matches(kGpuNode));
  CHECK_FALSE(selector().expr("gpu", "DoesNotExist").matches(kGpuNode));
}

TEST_CASE("label selector requirements are ANDed with matchLabels", "[selector]") {
  CHECK(selector().label("zone", "a").expr("gpu", "Exists").matches(kGpuNode));
  CHECK_FALSE(selector().label("zone", "b").expr("gpu", "Exists").matches(kGpuNode));
  CHECK_FALSE(selector().label("zone", "a").expr("gpu", "DoesNotExist").matches(kGpuNode));
}

TEST_CASE("an invalid label selector matches nothing and says why", "[selector]") {
  auto unknown_op = selector().expr("gpu", "Gt", {"1"});  // Gt is for node selectors only
  CHECK_FALSE(unknown_op.matches(kGpuNode));
  CHECK_THAT(std::string(unknown_op.selector.validate().message()), Catch::Contains("Gt"));
  CHECK_FALSE(selector().expr("gpu", "In").matches(kGpuNode));
  CHECK_FALSE(selector().expr("gpu", "Exists", {"h100"}).matches(kGpuNode));
  CHECK_THAT(std::string(selector().expr("gpu", "In").selector.validate().message()),
             Catch::Contains("matchExpressions[0]"));
}

TEST_CASE("a node selector term ANDs its requirements", "[selector]") {
  NodeSelectorTerm both = term().expr("gpu", "In", {"h100"}).expr("zone", "In", {"a"});
  CHECK(both.matches(kGpuNode, "node-1"));
  NodeSelectorTerm one_fails = term().expr("gpu", "In", {"h100"}).expr("zone", "In", {"b"});
  CHECK_FALSE(one_fails.matches(kGpuNode, "node-1"));
}

TEST_CASE("node selector terms are ORed", "[selector]") {
  NodeSelector selector{{term().expr("zone", "In", {"b"}), term().expr("gpu", "Exists")}};
  CHECK(selector.matches(kGpuNode, "node-1"));
  NodeSelector neither{{term().expr("zone", "In", {"b"}), term().expr("rack", "Exists")}};
  CHECK_FALSE(neither.matches(kGpuNode, "node-1"));
}

TEST_CASE("a node selector term without requirements matches no node", "[selector]") {
  CHECK_FALSE(NodeSelectorTerm{}.matches(kGpuNode, "node-1"));
  CHECK_FALSE(NodeSelector{{NodeSelectorTerm{}}}.matches(kGpuNode, "node-1"));
  CHECK_FALSE(NodeSelector{}.matches(kGpuNode, "node-1"));
}

TEST_CASE("node selector In, NotIn, Exists, DoesNotExist behave as for labels", "[selector]") {
  CHECK(term().expr("gpu", "In", {"h100"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "In", {"a100"}).term.matches(kGpuNode, "n"));
  CHECK(term().expr("gpu", "NotIn", {"a100"}).term.matches(kGpuNode, "n"));
  CHECK(term().expr("rack", "NotIn", {"1"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "NotIn", {"h100"}).term.matches(kGpuNode, "n"));
  CHECK(term().expr("gpu", "Exists").term.matches(kGpuNode, "n"));
  CHECK(term().expr("rack", "DoesNotExist").term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "DoesNotExist").term.matches(kGpuNode, "n"));
}

TEST_CASE("node selector Gt and Lt compare integers", "[selector]") {
  CHECK(term().expr("gpus", "Gt", {"4"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpus", "Gt", {"8"}).term.matches(kGpuNode, "n"));
  CHECK(term().expr("gpus", "Lt", {"16"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpus", "Lt", {"8"}).term.matches(kGpuNode, "n"));
  CHECK(term().expr("gpus", "Gt", {"-1"}).term.matches(kGpuNode, "n"));
  CHECK(term().expr("gpus", "Lt", {"+9"}).term.matches(kGpuNode, "n"));
}

TEST_CASE("Gt and Lt fail to match a missing or non-integer label", "[selector]") {
  CHECK_FALSE(term().expr("rack", "Gt", {"1"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "Gt", {"1"}).term.matches(kGpuNode, "n"));  // "h100"
  CHECK_FALSE(term().expr("gpus", "Lt", {"1"}).term.matches({{"gpus", "8.5"}}, "n"));
  CHECK_FALSE(term().expr("gpus", "Gt", {"1"}).term.matches({{"gpus", " 8"}}, "n"));
}

TEST_CASE("a node selector term with an invalid requirement matches no node", "[selector]") {
  CHECK_FALSE(term().expr("gpus", "Gt", {"four"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpus", "Gt", {"1", "2"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "In").term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "Exists", {"h100"}).term.matches(kGpuNode, "n"));
  CHECK_FALSE(term().expr("gpu", "Equals", {"h100"}).term.matches(kGpuNode, "n"));
  // An invalid term does not stop another term from matching.
  NodeSelector selector{{term().expr("gpu", "Bogus"), term().expr("gpu", "Exists")}};
  CHECK(selector.matches(kGpuNode, "n"));
}

TEST_CASE("matchFields select a node by metadata.name", "[selector]") {
  CHECK(term().field("metadata.name", "In", {"node-1"}).term.matches(kGpuNode, "node-1"));
  CHECK_FALSE(term().field("metadata.name", "In", {"node-2"}).term.matches(kGpuNode, "node-1"));
  CHECK(term().field("metadata.name", "NotIn", {"node-2"}).term.matches(kGpuNode, "node-1"));
  CHECK_FALSE(term().field("metadata.name", "NotIn", {"node-1"}).term.matches(kGpuNode, "node-1"));
}

TEST_CASE("matchFields allow only In and NotIn with exactly one value", "[selector]") {
  CHECK_FALSE(
      term().field("metadata.name", "In", {"node-1", "node-2"}).term.matches(kGpuNode, "node-1"));
  CHECK_FALSE(term().field("metadata.name", "Exists", {}).term.matches(kGpuNode, "node-1"));
  CHECK_FALSE(term().field("metadata.name", "Gt", {"1"}).term.matches(kGpuNode, "node-1"));
}

TEST_CASE("matchExpressions and matchFields of one term are ANDed", "[selector]") {
  NodeSelectorTerm t = term().expr("gpu", "Exists").field("metadata.name", "In", {"node-1"});
  CHECK(t.matches(kGpuNode, "node-1"));
  CHECK_FALSE(t.matches(kGpuNode, "node-2"));
  CHECK_FALSE(t.matches({}, "node-1"));
}

TEST_CASE("preferred terms add up the weights of the terms a node matches", "[selector]") {
  std::vector<PreferredSchedulingTerm> preferred = {
      {10, term().expr("gpu", "In", {"h100"})},
      {5, term().expr("zone", "In", {"a"})},
      {7, term().expr("zone", "In", {"b"})},
      {0, term().expr("gpu", "Exists")},
      {3, NodeSelectorTerm{}},
  };
  CHECK(preferredSchedulingScore(preferred, kGpuNode, "n") == 15);
  CHECK(preferredSchedulingScore(preferred, {}, "n") == 0);
}

TEST_CASE("parseInt64 reads integers like Go's strconv.ParseInt", "[selector]") {
  int64_t v = 0;
  CHECK((parseInt64("42", &v) && v == 42));
  CHECK((parseInt64("-42", &v) && v == -42));
  CHECK((parseInt64("+7", &v) && v == 7));
  CHECK((parseInt64("007", &v) && v == 7));
  CHECK((parseInt64("9223372036854775807", &v) && v == INT64_MAX));
  CHECK((parseInt64("-9223372036854775808", &v) && v == INT64_MIN));
  CHECK_FALSE(parseInt64("9223372036854775808", &v));
  CHECK_FALSE(parseInt64("-9223372036854775809", &v));
  CHECK_FALSE(parseInt64("", &v));
  CHECK_FALSE(parseInt64("-", &v));
  CHECK_FALSE(parseInt64("1.5", &v));
  CHECK_FALSE(parseInt64(" 1", &v));
  CHECK_FALSE(parseInt64("1_000", &v));
}

TEST_CASE("a node selector decodes from core/v1 JSON", "[selector]") {
  auto doc = parseJson(R"({"nodeSelectorTerms":[
      {"matchExpressions":[{"key":"gpu","operator":"In","values":["h100","a100"]},
                           {"key":"gpus","operator":"Gt","values":["4"]}]},
      {"matchFields":[{"key":"metadata.name","operator":"In","values":["node-7"]}]}]})");
  REQUIRE(doc.ok());
  NodeSelector selector;
  REQUIRE(decode(*doc, &selector).ok());
  REQUIRE(selector.node_selector_terms.size() == 2);
  CHECK(selector.node_selector_terms[0].match_expressions[0].values ==
        std::vector<std::string>{"h100", "a100"});
  CHECK(selector.matches(kGpuNode, "node-1"));
  CHECK(selector.matches({}, "node-7"));
  CHECK_FALSE(selector.matches({}, "node-1"));
}

TEST_CASE("a label selector decodes from metav1 JSON", "[selector]") {
  auto doc = parseJson(R"({"matchLabels":{"app":"trainer"},
      "matchExpressions":[{"key":"tier","operator":"NotIn","values":["canary"]}]})");
  REQUIRE(doc.ok());
  LabelSelector s;
  REQUIRE(decode(*doc, &s).ok());
  CHECK(s.match_labels.at("app") == "trainer");
  CHECK(s.matches({{"app", "trainer"}}));
  CHECK_FALSE(s.matches({{"app", "trainer"}, {"tier", "canary"}}));
}

TEST_CASE("selector JSON of the wrong type is an error naming the field", "[selector]") {
  auto doc = parseJson(R"({"nodeSelectorTerms":[{"matchExpressions":[
      {"key":"gpu","operator":"In","values":"h100"}]}]})");
  REQUIRE(doc.ok());
  NodeSelector selector;
  absl::Status status = decode(*doc, &selector);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() == "nodeSelectorTerms[0].matchExpressions[0].values: expected array");

  auto labels = parseJson(R"({"matchLabels":{"app":3}})");
  REQUIRE(labels.ok());
  LabelSelector s;
  CHECK(decode(*labels, &s).message() == "matchLabels.app: expected string");
}

}  // namespace
}  // namespace muster::proto
