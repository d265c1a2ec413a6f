#include "scheduler/api.h"

#include "proto/codec.h"

namespace muster::scheduler {
namespace {

namespace asio = proto::asio;

class ClientSchedulerApi final : public SchedulerApi {
 public:
  explicit ClientSchedulerApi(std::shared_ptr<proto::Client> client) : client_(std::move(client)) {}

  asio::awaitable<absl::Status> bind(PodRef pod, std::string node) override {
    absl::Status status =
        co_await client_->bind(pod.namespace_, pod.name, pod.uid, node);
    if (proto::isConflict(status)) {
      const std::string message(status.message());
      if (message.find("\"" + node + "\"") != std::string::npos) co_return absl::OkStatus();
    }
    co_return status;
  }

  asio::awaitable<absl::Status> setPodCondition(PodRef pod,
                                                proto::PodCondition condition) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPods.objectPath(pod.namespace_, pod.name, "status");
    req.content_type = std::string(proto::contentType(proto::PatchType::kStrategicMerge));
    req.body = proto::podConditionPatch(condition, pod.uid);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setNominatedNodeName(PodRef pod, std::string node) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPods.objectPath(pod.namespace_, pod.name, "status");
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::nominatedNodeNamePatch(node);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setPodAnnotation(PodRef pod, std::string key,
                                                 std::string value) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPods.objectPath(pod.namespace_, pod.name);
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::annotationPatch(key, value, pod.uid);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> evict(PodRef pod) override {
    proto::Request req;
    req.verb = proto::Verb::kPost;
    req.path = proto::resources::kPods.objectPath(pod.namespace_, pod.name, "eviction");
    req.body = proto::evictionBody(pod.namespace_, pod.name, pod.uid);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setQueueStatus(std::string queue, proto::QueueStatus status,
                                               std::vector<std::string> removed) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kQueues.objectPath("", queue, "status");
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::statusPatch(status, removed);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setPodGroupStatus(std::string group_namespace,
                                                  std::string group_name,
                                                  proto::PodGroupStatus status) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPodGroups.objectPath(group_namespace, group_name,
                                                       "status");
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::statusPatch(status);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setWorkloadPodGroupCondition(std::string group_namespace,
                                                            std::string group_name,
                                                            proto::Condition condition,
                                                            int64_t observed_generation) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kWorkloadPodGroups.objectPath(group_namespace, group_name,
                                                               "status");
    req.content_type = std::string(proto::contentType(proto::PatchType::kStrategicMerge));
    req.body = proto::workloadPodGroupConditionPatch(condition, observed_generation);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setClaimSelectedNode(std::string claim_namespace,
                                                    std::string claim, std::string claim_uid,
                                                    std::string node) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPersistentVolumeClaims.objectPath(claim_namespace, claim);
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::selectedNodePatch(node, claim_uid);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

  asio::awaitable<absl::Status> setVolumeClaimRef(std::string volume, std::string claim_namespace,
                                                 std::string claim, std::string claim_uid,
                                                 std::string resource_version) override {
    proto::Request req;
    req.verb = proto::Verb::kPatch;
    req.path = proto::resources::kPersistentVolumes.objectPath("", volume);
    req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
    req.body = proto::claimRefPatch(claim_namespace, claim, claim_uid, resource_version);
    auto result = co_await client_->call(std::move(req));
    co_return result.status();
  }

 private:
  std::shared_ptr<proto::Client> client_;
};

}  // namespace

SchedulerApiPtr makeClientSchedulerApi(std::shared_ptr<proto::Client> client) {
  return std::make_shared<ClientSchedulerApi>(std::move(client));
}

}  // namespace muster::scheduler
