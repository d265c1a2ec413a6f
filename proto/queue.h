#pragma once

// muster.dev/v1alpha1 Queue: one node of the tree a shared cluster is divided by (quota, limit
// and over-quota weight per resource name), written by operators and read by the scheduler,
// which writes its status. The CRD is manifests/crds/queues.muster.dev.yaml; the codec below is
// the only place its JSON field names appear.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "proto/client.h"
#include "proto/json.h"
#include "proto/objects.h"
#include "proto/quantity.h"

namespace muster::proto {

namespace resources {
extern const Resource kQueues;  // muster.dev/v1alpha1 queues, cluster-scoped
}  // namespace resources

inline constexpr std::string_view kQueueApiVersion = "muster.dev/v1alpha1";
inline constexpr std::string_view kQueueKind = "Queue";

struct QueueResource {
  std::optional<Quantity> quota;  // absent: 0
  std::optional<Quantity> limit;  // absent: no limit
  double over_quota_weight = 1.0;
};

struct QueueSpec {
  std::string parent;  // "": a child of the root
  std::map<std::string, QueueResource> resources;
};

// What the scheduler writes. Amounts are quantity strings in the spec's units.
struct QueueResourceStatus {
  std::string allocated;
  std::string fair_share;
  double usage = 0;  // amount × seconds, decayed
};

struct QueueSummary {
  std::string gpu_quota;
  std::string gpu_limit;
  std::string gpu_fair_share;
  std::string gpu_allocated;
};

struct QueueStatus {
  int64_t observed_generation = 0;
  int64_t pending_gangs = 0;
  std::map<std::string, QueueResourceStatus> resources;
  std::string usage_updated_at;  // RFC 3339; "" never
  QueueSummary summary;
  std::vector<Condition> conditions;
};

struct Queue {
  ObjectMeta meta;
  QueueSpec spec;
  QueueStatus status;
};

// Decoders in codec.h's style: types checked, errors name the field path, unknown fields ignored.
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Queue* out);
absl::Status decode(const rapidjson::Value& v, Queue* out);
absl::Status decodeQueueJson(std::string_view json, Queue* out);

// A whole Queue for POST (tests and examples): apiVersion, kind, metadata.name, spec.
std::string encode(const Queue& queue);
// Merge patch for the status subresource: every field of `status` (resources whole, so a
// resource the queue no longer has is dropped; a merge patch merges maps, so the old keys the
// caller passes in `removed` are written as null).
std::string statusPatch(const QueueStatus& status, const std::vector<std::string>& removed = {});

}  // namespace muster::proto
