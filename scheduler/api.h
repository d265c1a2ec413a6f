#pragma once

// What the scheduler writes to the API server, as one small seam: the real implementation sends
// requests through proto::Client, unit tests substitute a fake that records calls and scripts
// failures. Events go through proto::EventRecorder, not through here.
//
// Every argument is taken by value: the coroutines outlive their callers' frames.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "proto/objects.h"
#include "proto/queue.h"

namespace muster::scheduler {

// Which pod a write is for.
struct PodRef {
  std::string namespace_;
  std::string name;
  std::string uid;

  static PodRef of(const proto::Pod& pod) {
    return {pod.meta.namespace_, pod.meta.name, pod.meta.uid};
  }
  std::string key() const { return namespace_ + "/" + name; }
};

class SchedulerApi {
 public:
  virtual ~SchedulerApi() = default;
  // POST pods/<name>/binding (with the pod's uid as precondition). A 409 answer saying the pod
  // is already bound to `node` (an earlier life of this scheduler did it) is success.
  virtual proto::asio::awaitable<absl::Status> bind(PodRef pod, std::string node) = 0;
  // Sets one condition through pods/<name>/status (strategic merge patch), only on the pod with
  // this uid (409 Conflict for one recreated under the name).
  virtual proto::asio::awaitable<absl::Status> setPodCondition(PodRef pod,
                                                               proto::PodCondition condition) = 0;
  // Sets (or, with "", clears) status.nominatedNodeName through pods/status (merge patch): where
  // a preemptor's pod will go once its victims are gone.
  virtual proto::asio::awaitable<absl::Status> setNominatedNodeName(PodRef pod,
                                                                    std::string node) = 0;
  // Sets one annotation of the pod (merge patch), only on the pod with this uid (409 Conflict for
  // one recreated under the name): the GPU a fraction went to, before the Binding.
  virtual proto::asio::awaitable<absl::Status> setPodAnnotation(PodRef pod, std::string key,
                                                                std::string value) = 0;
  // POST pods/<name>/eviction (policy/v1), with the pod's uid as precondition:
  // PodDisruptionBudgets apply; 429 when one refuses, 409 when the name is another pod's now.
  virtual proto::asio::awaitable<absl::Status> evict(PodRef pod) = 0;
  // Merge patch of a PodGroup's status subresource.
  virtual proto::asio::awaitable<absl::Status> setPodGroupStatus(std::string group_namespace,
                                                                 std::string group_name,
                                                                 proto::PodGroupStatus status) = 0;
  // Sets one condition of a scheduling.k8s.io/v1alpha2 PodGroup's status (strategic merge patch,
  // merged by type), with observedGeneration.
  virtual proto::asio::awaitable<absl::Status> setWorkloadPodGroupCondition(
      std::string group_namespace, std::string group_name, proto::Condition condition,
      int64_t observed_generation) = 0;
  // Volume binding (volume_binding.h). Sets (or, with "", removes) a PersistentVolumeClaim's
  // volume.kubernetes.io/selected-node annotation, only on the claim with this uid (merge patch).
  virtual proto::asio::awaitable<absl::Status> setClaimSelectedNode(std::string claim_namespace,
                                                                    std::string claim,
                                                                    std::string claim_uid,
                                                                    std::string node) = 0;
  // Sets (or, with claim "", clears) a PersistentVolume's spec.claimRef, only while the volume
  // is at `resource_version` (409 Conflict once it changed).
  virtual proto::asio::awaitable<absl::Status> setVolumeClaimRef(std::string volume,
                                                                 std::string claim_namespace,
                                                                 std::string claim,
                                                                 std::string claim_uid,
                                                                 std::string resource_version) = 0;
  // Merge patch of a Queue's status subresource (tenancy); `removed`: resources it no longer
  // reports. Unimplemented where the API has no queues (test fakes without tenancy).
  virtual proto::asio::awaitable<absl::Status> setQueueStatus(std::string /*queue*/,
                                                              proto::QueueStatus /*status*/,
                                                              std::vector<std::string> /*removed*/) {
    co_return absl::UnimplementedError("setQueueStatus");
  }
};
using SchedulerApiPtr = std::shared_ptr<SchedulerApi>;

SchedulerApiPtr makeClientSchedulerApi(std::shared_ptr<proto::Client> client);

}  // namespace muster::scheduler
