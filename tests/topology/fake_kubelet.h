#pragma once

// A kubelet-like pod-resources server for tests: PodResourcesLister (topology/podresources/
// api.proto) holding what the test says pods hold and what the kubelet can allocate, listening on
// a unix socket in a temporary directory, as the kubelet does on
// /var/lib/kubelet/pod-resources/kubelet.sock. Used by the pod-resources client's unit tests and
// by the end-to-end test that follows free devices from the kubelet to the scheduler.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/topology/run.h"
#include "topology/podresources/api.grpc.pb.h"

namespace muster::topology::testing {

class FakeKubeletService final : public v1::PodResourcesLister::Service {
 public:
  // `allocatable` false: GetAllocatableResources is unimplemented, as on kubelets before 1.23.
  explicit FakeKubeletService(bool allocatable = true) : allocatable_(allocatable) {}

  // Container `container` of pod `pod` (namespace "default") holds `ids` of `resource`.
  void holds(const std::string& pod, const std::string& container, const std::string& resource,
             std::vector<std::string> ids);
  void removePod(const std::string& pod);
  // GetAllocatableResources reports `ids` of `resource`.
  void canAllocate(const std::string& resource, std::vector<std::string> ids);
  // Every List fails with `status` (OK again: answers again).
  void failWith(grpc::Status status);

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override;
  grpc::Status GetAllocatableResources(grpc::ServerContext* context,
                                       const v1::AllocatableResourcesRequest* request,
                                       v1::AllocatableResourcesResponse* response) override;

 private:
  const bool allocatable_;
  std::mutex mu_;
  v1::ListPodResourcesResponse list_;
  v1::AllocatableResourcesResponse allocatable_devices_;
  grpc::Status failure_;
};

// `service` served on <temp dir>/kubelet.sock until destruction; the service must outlive it.
class KubeletSocket {
 public:
  explicit KubeletSocket(FakeKubeletService* service);
  ~KubeletSocket();
  KubeletSocket(const KubeletSocket&) = delete;
  KubeletSocket& operator=(const KubeletSocket&) = delete;
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace muster::topology::testing
