#include "tests/topology/fake_kubelet.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <utility>

namespace muster::topology::testing {

void FakeKubeletService::holds(const std::string& pod, const std::string& container,
                               const std::string& resource, std::vector<std::string> ids) {
  std::lock_guard lock(mu_);
  v1::PodResources* p = nullptr;
  for (v1::PodResources& existing : *list_.mutable_pod_resources()) {
    if (existing.name() == pod) p = &existing;
  }
  if (p == nullptr) {
    p = list_.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_("default");
  }
  v1::ContainerResources* c = p->add_containers();
  c->set_name(container);
  v1::ContainerDevices* d = c->add_devices();
  d->set_resource_name(resource);
  for (const std::string& id : ids) d->add_device_ids(id);
  d->mutable_topology()->add_nodes()->set_id(0);
}

void FakeKubeletService::removePod(const std::string& pod) {
  std::lock_guard lock(mu_);
  auto* pods = list_.mutable_pod_resources();
  for (int i = 0; i < pods->size(); ++i) {
    if (pods->Get(i).name() == pod) {
      pods->DeleteSubrange(i, 1);
      return;
    }
  }
}

void FakeKubeletService::canAllocate(const std::string& resource, std::vector<std::string> ids) {
  std::lock_guard lock(mu_);
  v1::ContainerDevices* d = allocatable_devices_.add_devices();
  d->set_resource_name(resource);
  for (const std::string& id : ids) d->add_device_ids(id);
}

void FakeKubeletService::failWith(grpc::Status status) {
  std::lock_guard lock(mu_);
  failure_ = std::move(status);
}

grpc::Status FakeKubeletService::List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                                      v1::ListPodResourcesResponse* response) {
  std::lock_guard lock(mu_);
  if (!failure_.ok()) return failure_;
  *response = list_;
  return grpc::Status::OK;
}

grpc::Status FakeKubeletService::GetAllocatableResources(
    grpc::ServerContext* context, const v1::AllocatableResourcesRequest* request,
    v1::AllocatableResourcesResponse* response) {
  if (!allocatable_) {
    return v1::PodResourcesLister::Service::GetAllocatableResources(context, request, response);
  }
  std::lock_guard lock(mu_);
  *response = allocatable_devices_;
  return grpc::Status::OK;
}

KubeletSocket::KubeletSocket(FakeKubeletService* service) : path_(dir_.path() + "/kubelet.sock") {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path_, grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  server_ = builder.BuildAndStart();
  REQUIRE(server_ != nullptr);
}

KubeletSocket::~KubeletSocket() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace muster::topology::testing
