#include "jobengine/api.h"

namespace muster::jobengine {
namespace {

class ClientJobApi final : public JobApi {
 public:
  explicit ClientJobApi(std::shared_ptr<proto::Client> client) : client_(std::move(client)) {}

  proto::asio::awaitable<absl::StatusOr<std::string>> create(const proto::Resource& r,
                                                             std::string_view ns,
                                                             std::string body) override {
    co_return co_await client_->create(r, ns, std::move(body));
  }
  proto::asio::awaitable<absl::StatusOr<std::string>> get(const proto::Resource& r,
                                                          std::string_view ns,
                                                          std::string_view name) override {
    co_return co_await client_->get(r, ns, name);
  }
  proto::asio::awaitable<absl::StatusOr<std::string>> remove(const proto::Resource& r,
                                                             std::string_view ns,
                                                             std::string_view name,
                                                             std::string_view uid) override {
    co_return co_await client_->remove(r, ns, name, uid);
  }
  proto::asio::awaitable<absl::StatusOr<std::string>> patch(const proto::Resource& r,
                                                            std::string_view ns,
                                                            std::string_view name,
                                                            std::string body) override {
    co_return co_await client_->patch(r, ns, name, proto::PatchType::kMerge, std::move(body));
  }
  proto::asio::awaitable<absl::StatusOr<std::string>> patchStatus(const proto::Resource& r,
                                                                  std::string_view ns,
                                                                  std::string_view name,
                                                                  std::string body) override {
    co_return co_await client_->patch(r, ns, name, proto::PatchType::kMerge, std::move(body),
                                      "status");
  }

 private:
  std::shared_ptr<proto::Client> client_;
};

}  // namespace

JobApiPtr makeClientJobApi(std::shared_ptr<proto::Client> client) {
  return std::make_shared<ClientJobApi>(std::move(client));
}

}  // namespace muster::jobengine
