#pragma once

// The API calls the job engine makes for a ParallelJob, behind one seam: the controller uses the
// process's proto::Client through makeClientJobApi(); unit tests use a fake (tests/jobengine/).
// Every call returns the response body (JSON) or the API error (proto::isNotFound, ...).

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/asio.h"
#include "proto/client.h"

namespace muster::jobengine {

class JobApi {
 public:
  virtual ~JobApi() = default;
  virtual proto::asio::awaitable<absl::StatusOr<std::string>> create(const proto::Resource& r,
                                                                     std::string_view ns,
                                                                     std::string body) = 0;
  virtual proto::asio::awaitable<absl::StatusOr<std::string>> get(const proto::Resource& r,
                                                                  std::string_view ns,
                                                                  std::string_view name) = 0;
  // Deletes `name`; with `uid` non-empty only the object with that UID (a precondition).
  virtual proto::asio::awaitable<absl::StatusOr<std::string>> remove(const proto::Resource& r,
                                                                     std::string_view ns,
                                                                     std::string_view name,
                                                                     std::string_view uid) = 0;
  // A merge patch of the object.
  virtual proto::asio::awaitable<absl::StatusOr<std::string>> patch(const proto::Resource& r,
                                                                    std::string_view ns,
                                                                    std::string_view name,
                                                                    std::string body) = 0;
  // A merge patch of the status subresource.
  virtual proto::asio::awaitable<absl::StatusOr<std::string>> patchStatus(
      const proto::Resource& r, std::string_view ns, std::string_view name, std::string body) = 0;
};
using JobApiPtr = std::shared_ptr<JobApi>;

JobApiPtr makeClientJobApi(std::shared_ptr<proto::Client> client);

}  // namespace muster::jobengine
