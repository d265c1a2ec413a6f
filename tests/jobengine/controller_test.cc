// How the controller executes a plan when the API server refuses its status write (controller.h).
#include <catch2/catch.hpp>

#include "jobengine/controller.h"
#include "proto/client.h"

namespace muster::jobengine {
namespace {

absl::Status refused(int code, const std::string& reason) {
  return proto::apiError(code,
                         R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"no",)"
                         R"("reason":")" + reason + R"(","code":)" + std::to_string(code) + "}",
                         "patch paralleljobs/status");
}

TEST_CASE("a status the API server refuses for what it says never blocks the plan's deletes, "
          "while conflicts and server trouble are retried whole", "[controller]") {
  // status.slurm.steps[0].startTime: Invalid value: "10000-01-01T00:00:00Z": ... date-time
  CHECK(statusRefusedForGood(refused(422, "Invalid")));
  CHECK(statusRefusedForGood(refused(400, "BadRequest")));
  CHECK(statusRefusedForGood(refused(413, "RequestEntityTooLarge")));
  CHECK_FALSE(statusRefusedForGood(refused(409, "Conflict")));
  CHECK_FALSE(statusRefusedForGood(refused(404, "NotFound")));
  CHECK_FALSE(statusRefusedForGood(refused(403, "Forbidden")));
  CHECK_FALSE(statusRefusedForGood(refused(429, "TooManyRequests")));
  CHECK_FALSE(statusRefusedForGood(refused(500, "InternalError")));
  CHECK_FALSE(statusRefusedForGood(refused(504, "Timeout")));
  CHECK_FALSE(statusRefusedForGood(absl::UnavailableError("connection reset")));
  CHECK_FALSE(statusRefusedForGood(absl::InvalidArgumentError("not from the API server")));
  CHECK_FALSE(statusRefusedForGood(absl::OkStatus()));
}

}  // namespace
}  // namespace muster::jobengine
