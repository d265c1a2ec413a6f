// Label and node selectors as they arrive inside objects (PodGroup/Pod affinity, node affinity,
// matchFields). The input is a JSON object {"labelSelector":..,"nodeSelector":..,
// "preferred":[..],"labels":{..},"nodeName":".."}; each selector decodes on its own and is then
// validated and matched against the labels. An invalid selector must match nothing.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "proto/selector.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<rapidjson::Document> doc = proto::parseJson(fuzz::asText(data, size));
  if (!doc.ok() || !doc->IsObject()) return 0;
  const proto::JsonPath root;
  proto::Labels labels;
  (void)proto::readStringMap(*doc, root, "labels", &labels);
  std::string node_name;
  (void)proto::readString(*doc, root, "nodeName", &node_name);

  if (const rapidjson::Value* v = proto::findField(*doc, "labelSelector")) {
    proto::LabelSelector s;
    if (proto::decode(*v, root.field("labelSelector"), &s).ok()) {
      const bool valid = s.validate().ok();
      const bool matched = s.matches(labels);
      if (!valid) FUZZ_CHECK(!matched, "an invalid label selector matches nothing");
      if (valid && s.match_labels.empty() && s.match_expressions.empty()) {
        FUZZ_CHECK(matched, "an empty label selector matches everything");
      }
    }
  }
  if (const rapidjson::Value* v = proto::findField(*doc, "nodeSelector")) {
    proto::NodeSelector s;
    if (proto::decode(*v, root.field("nodeSelector"), &s).ok()) {
      const bool matched = s.matches(labels, node_name);
      bool any_term = false;
      for (const proto::NodeSelectorTerm& t : s.node_selector_terms) {
        const bool term = t.matches(labels, node_name);
        if (!t.validate().ok() || t.isEmpty()) FUZZ_CHECK(!term, "an invalid or empty term matches nothing");
        any_term = any_term || term;
      }
      FUZZ_CHECK(matched == any_term, "terms are ORed");
    }
  }
  std::vector<proto::PreferredSchedulingTerm> preferred;
  absl::Status status = proto::forEachElement(
      *doc, root, "preferred", [&](const rapidjson::Value& e, const proto::JsonPath& p) {
        return proto::decode(e, p, &preferred.emplace_back());
      });
  if (status.ok()) {
    const int64_t score = proto::preferredSchedulingScore(preferred, labels, node_name);
    int64_t bound = 0;
    for (const auto& t : preferred) bound += t.weight > 0 ? t.weight : 0;
    FUZZ_CHECK(score <= bound, "the score is at most the sum of the positive weights");
  }
  return 0;
}
