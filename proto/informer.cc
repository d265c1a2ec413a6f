#include "proto/informer.h"

namespace muster::proto {
namespace {

std::string metadataString(const rapidjson::Value& object, const char* field) {
  if (!object.IsObject()) return "";
  auto meta = object.FindMember("metadata");
  if (meta == object.MemberEnd() || !meta->value.IsObject()) return "";
  auto v = meta->value.FindMember(field);
  if (v == meta->value.MemberEnd() || !v->value.IsString()) return "";
  return std::string(v->value.GetString(), v->value.GetStringLength());
}

}  // namespace

std::string undecodableKey(const rapidjson::Value& object) {
  return objectKey(metadataString(object, "namespace"), metadataString(object, "name"));
}

std::string undecodableResourceVersion(const rapidjson::Value& object) {
  return metadataString(object, "resourceVersion");
}

metrics::Counter& undecodableObjects(const std::string& resource) {
  static metrics::Family<metrics::Counter>& family = metrics::defaultRegistry().counter(
      "muster_informer_undecodable_objects_total",
      "Objects from the API server that did not decode and were treated as deleted.",
      {"resource"});
  return family.with({resource});
}

}  // namespace muster::proto
