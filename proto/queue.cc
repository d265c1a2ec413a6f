#include "proto/queue.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "proto/codec.h"

namespace muster::proto {

namespace resources {
const Resource kQueues{std::string(kQueueApiVersion), "queues", false};
}  // namespace resources

namespace {

// Calls fn(name, value, path) for each member of the object member `name`.
template <typename Fn>
absl::Status forEachMember(const rapidjson::Value& object, const JsonPath& path,
                           std::string_view name, Fn&& fn) {
  return withObject(object, path, name, [&](const rapidjson::Value& map, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(checkSize(p, map.MemberCount(), kMaxJsonElements, "entries"));
    for (auto it = map.MemberBegin(); it != map.MemberEnd(); ++it) {
      std::string key(it->name.GetString(), it->name.GetStringLength());
      const JsonPath member_path = p.field(key);
      MUSTER_RETURN_IF_ERROR(fn(key, it->value, member_path));
    }
    return absl::OkStatus();
  });
}

absl::Status decodeResource(const rapidjson::Value& v, const JsonPath& path, QueueResource* out) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  if (const rapidjson::Value* q = findField(v, "quota"); q != nullptr)
    MUSTER_RETURN_IF_ERROR(decode(*q, path.field("quota"), &out->quota.emplace()));
  if (const rapidjson::Value* l = findField(v, "limit"); l != nullptr)
    MUSTER_RETURN_IF_ERROR(decode(*l, path.field("limit"), &out->limit.emplace()));
  MUSTER_RETURN_IF_ERROR(readDouble(v, path, "overQuotaWeight", &out->over_quota_weight));
  if (out->over_quota_weight < 0) return fieldError(path.field("overQuotaWeight"), "must not be negative");
  return absl::OkStatus();
}

absl::Status decodeSpec(const rapidjson::Value& v, const JsonPath& path, QueueSpec* out) {
  MUSTER_RETURN_IF_ERROR(readString(v, path, "parent", &out->parent));
  return forEachMember(v, path, "resources",
                       [out](const std::string& name, const rapidjson::Value& r, const JsonPath& p) {
                         return decodeResource(r, p, &out->resources[name]);
                       });
}

absl::Status decodeStatus(const rapidjson::Value& v, const JsonPath& path, QueueStatus* out) {
  MUSTER_RETURN_IF_ERROR(readInt64(v, path, "observedGeneration", &out->observed_generation));
  MUSTER_RETURN_IF_ERROR(readInt64(v, path, "pendingGangs", &out->pending_gangs));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "usageUpdatedAt", &out->usage_updated_at));
  MUSTER_RETURN_IF_ERROR(forEachMember(
      v, path, "resources",
      [out](const std::string& name, const rapidjson::Value& r, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(expectObject(r, p));
        QueueResourceStatus& s = out->resources[name];
        MUSTER_RETURN_IF_ERROR(readString(r, p, "allocated", &s.allocated));
        MUSTER_RETURN_IF_ERROR(readString(r, p, "fairShare", &s.fair_share));
        return readDouble(r, p, "usage", &s.usage);
      }));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "summary", [out](const rapidjson::Value& s, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(readString(s, p, "gpuQuota", &out->summary.gpu_quota));
        MUSTER_RETURN_IF_ERROR(readString(s, p, "gpuLimit", &out->summary.gpu_limit));
        MUSTER_RETURN_IF_ERROR(readString(s, p, "gpuFairShare", &out->summary.gpu_fair_share));
        return readString(s, p, "gpuAllocated", &out->summary.gpu_allocated);
      }));
  return forEachElement(v, path, "conditions", [out](const rapidjson::Value& e, const JsonPath& p) {
    return decode(e, p, &out->conditions.emplace_back());
  });
}

void writeQuantityField(JsonWriter& w, std::string_view name, const std::optional<Quantity>& q) {
  if (q) w.stringField(name, q->toString());
}

}  // namespace

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Queue* out) {
  *out = Queue{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  if (const rapidjson::Value* meta = findField(v, "metadata"); meta != nullptr)
    MUSTER_RETURN_IF_ERROR(decode(*meta, path.field("metadata"), &out->meta));
  MUSTER_RETURN_IF_ERROR(withObject(v, path, "spec", [out](const rapidjson::Value& s, const JsonPath& p) {
    return decodeSpec(s, p, &out->spec);
  }));
  return withObject(v, path, "status", [out](const rapidjson::Value& s, const JsonPath& p) {
    return decodeStatus(s, p, &out->status);
  });
}

absl::Status decode(const rapidjson::Value& v, Queue* out) { return decode(v, JsonPath(), out); }

absl::Status decodeQueueJson(std::string_view json, Queue* out) {
  absl::StatusOr<rapidjson::Document> doc = parseJson(json);
  if (!doc.ok()) return doc.status();
  return decode(*doc, out);
}

std::string encode(const Queue& queue) {
  JsonWriter w;
  w.beginObject();
  w.stringField("apiVersion", kQueueApiVersion).stringField("kind", kQueueKind);
  w.key("metadata").beginObject().stringField("name", queue.meta.name);
  if (!queue.meta.labels.empty()) w.stringMapField("labels", queue.meta.labels);
  w.endObject();
  w.key("spec").beginObject();
  w.stringFieldIfSet("parent", queue.spec.parent);
  w.key("resources").beginObject();
  for (const auto& [name, r] : queue.spec.resources) {
    w.key(name).beginObject();
    writeQuantityField(w, "quota", r.quota);
    writeQuantityField(w, "limit", r.limit);
    w.key("overQuotaWeight").raw(absl::StrFormat("%.17g", r.over_quota_weight));
    w.endObject();
  }
  w.endObject().endObject().endObject();
  return w.str();
}

std::string statusPatch(const QueueStatus& status, const std::vector<std::string>& removed) {
  JsonWriter w;
  w.beginObject().key("status").beginObject();
  w.integerField("observedGeneration", status.observed_generation);
  w.integerField("pendingGangs", status.pending_gangs);
  w.key("resources").beginObject();
  for (const std::string& name : removed)
    if (!status.resources.contains(name)) w.key(name).null();
  for (const auto& [name, r] : status.resources) {
    w.key(name).beginObject();
    w.stringField("allocated", r.allocated).stringField("fairShare", r.fair_share);
    w.key("usage").raw(absl::StrFormat("%.17g", std::isfinite(r.usage) ? r.usage : 0.0));
    w.endObject();
  }
  w.endObject();
  w.stringOrNullField("usageUpdatedAt", status.usage_updated_at);
  w.key("summary").beginObject();
  w.stringField("gpuQuota", status.summary.gpu_quota).stringField("gpuLimit", status.summary.gpu_limit);
  w.stringField("gpuFairShare", status.summary.gpu_fair_share);
  w.stringField("gpuAllocated", status.summary.gpu_allocated);
  w.endObject();
  writeConditions(w, status.conditions);
  w.endObject().endObject();
  return w.str();
}

}  // namespace muster::proto
