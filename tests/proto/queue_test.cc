// The Queue codec (proto/queue.h): what operators write, what the scheduler writes back.
#include "proto/queue.h"

#include <catch2/catch.hpp>

#include "proto/json.h"

namespace muster::proto {
namespace {

TEST_CASE("a Queue decodes with quantities written as numbers or strings, and defaults") {
  Queue q;
  REQUIRE(decodeQueueJson(R"({"apiVersion":"muster.dev/v1alpha1","kind":"Queue",
      "metadata":{"name":"team-a","generation":3},
      "spec":{"parent":"org",
              "resources":{"nvidia.com/gpu":{"quota":8,"limit":"16","overQuotaWeight":2.5},
                           "memory":{"quota":"64Gi"}}},
      "status":{"pendingGangs":2,"usageUpdatedAt":"2026-12-07T10:00:00Z",
                "resources":{"nvidia.com/gpu":{"allocated":"8","fairShare":"12","usage":3.5e6}}}})",
                          &q).ok());
  CHECK(q.meta.name == "team-a");
  CHECK(q.spec.parent == "org");
  const QueueResource& gpu = q.spec.resources.at("nvidia.com/gpu");
  CHECK(gpu.quota->value() == 8);
  CHECK(gpu.limit->value() == 16);
  CHECK(gpu.over_quota_weight == 2.5);
  const QueueResource& memory = q.spec.resources.at("memory");
  CHECK(memory.quota->value() == int64_t{64} << 30);
  CHECK_FALSE(memory.limit);
  CHECK(memory.over_quota_weight == 1.0);
  CHECK(q.status.pending_gangs == 2);
  CHECK(q.status.resources.at("nvidia.com/gpu").usage == 3.5e6);
}

TEST_CASE("a Queue with a bad field is refused with the field's path") {
  Queue q;
  absl::Status s = decodeQueueJson(
      R"({"metadata":{"name":"x"},"spec":{"resources":{"cpu":{"quota":"lots"}}}})", &q);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("spec.resources.cpu.quota") != std::string::npos);
  s = decodeQueueJson(R"({"metadata":{"name":"x"},"spec":{"resources":{"cpu":{"overQuotaWeight":-1}}}})", &q);
  CHECK(std::string(s.message()).find("overQuotaWeight") != std::string::npos);
}

TEST_CASE("the status patch carries every field, nulls removed resources, and decodes back") {
  QueueStatus st;
  st.observed_generation = 4;
  st.pending_gangs = 1;
  st.resources["nvidia.com/gpu"] = {"8", "16", 1234.5};
  st.usage_updated_at = "2026-12-07T10:00:00Z";
  st.summary = {"8", "none", "16", "8"};
  st.conditions.push_back({"Valid", "True", "Valid", "", "2026-12-07T10:00:00Z"});
  const std::string patch = statusPatch(st, {"cpu", "nvidia.com/gpu"});
  CHECK(patch.find(R"("cpu":null)") != std::string::npos);
  absl::StatusOr<rapidjson::Document> doc = parseJson(patch);
  REQUIRE(doc.ok());
  Queue back;
  (*doc)["status"]["resources"].RemoveMember("cpu");
  REQUIRE(decode(*doc, &back).ok());
  CHECK(back.status.observed_generation == 4);
  CHECK(back.status.resources.at("nvidia.com/gpu").fair_share == "16");
  CHECK(back.status.resources.at("nvidia.com/gpu").usage == 1234.5);
  CHECK(back.status.summary.gpu_limit == "none");
  CHECK(back.status.conditions.at(0).type == "Valid");
}

}  // namespace
}  // namespace muster::proto
