#include "topology/podresources/client.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "topology/podresources/api.grpc.pb.h"

namespace muster::topology {
namespace {

// What the kubelet's own pod-resources client allows (16 MiB); gRPC's default is 4 MiB, which a
// node with many pods can pass.
constexpr int kMaxMessageBytes = 16 * 1024 * 1024;

absl::StatusCode toAbsl(grpc::StatusCode code) {
  // gRPC and absl share the canonical codes.
  return static_cast<absl::StatusCode>(static_cast<int>(code));
}

void appendDevices(const google::protobuf::RepeatedPtrField<v1::ContainerDevices>& devices,
                   std::vector<ResourceDevices>* out) {
  for (const v1::ContainerDevices& d : devices) {
    ResourceDevices& r = out->emplace_back();
    r.resource_name = d.resource_name();
    r.device_ids.assign(d.device_ids().begin(), d.device_ids().end());
  }
}

class PodResourcesClient final : public DeviceAllocationSource {
 public:
  explicit PodResourcesClient(PodResourcesOptions options) : options_(std::move(options)) {}

  absl::StatusOr<DeviceAllocations> read() override {
    const std::string& path = options_.socket_path;
    if (path.empty()) return absl::FailedPreconditionError("no pod-resources socket given");
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(
          "the kubelet's pod-resources socket ", path,
          " does not exist (mount the host's /var/lib/kubelet/pod-resources there; Helm: "
          "agent.podResources.enabled=true)"));
    }
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is not a socket"));
    }
    if (::access(path.c_str(), R_OK | W_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot open the kubelet's pod-resources socket ", path,
          ": permission denied (it is root's: run the agent as uid 0, as the chart does with "
          "agent.podResources.enabled)"));
    }
    if (stub_ == nullptr) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(kMaxMessageBytes);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
      const std::string target = path.front() == '/' ? "unix://" + path : "unix:" + path;
      stub_ = v1::PodResourcesLister::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    }

    DeviceAllocations out;
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + options_.timeout);
      v1::ListPodResourcesResponse response;
      grpc::Status s = stub_->List(&context, v1::ListPodResourcesRequest(), &response);
      if (!s.ok()) return failure("List", s);
      for (const v1::PodResources& pod : response.pod_resources()) {
        for (const v1::ContainerResources& c : pod.containers()) {
          appendDevices(c.devices(), &out.allocated);
        }
      }
    }
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + options_.timeout);
      v1::AllocatableResourcesResponse response;
      grpc::Status s = stub_->GetAllocatableResources(
          &context, v1::AllocatableResourcesRequest(), &response);
      if (s.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
        if (!s.ok()) return failure("GetAllocatableResources", s);
        appendDevices(response.devices(), &out.allocatable.emplace());
      }
    }
    return out;
  }

 private:
  absl::Status failure(const char* call, const grpc::Status& s) const {
    return absl::Status(toAbsl(s.error_code()),
                        absl::StrCat("pod-resources ", call, " on ", options_.socket_path, ": ",
                                     s.error_message()));
  }

  PodResourcesOptions options_;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub_;
};

}  // namespace

DeviceAllocationSourcePtr makePodResourcesClient(PodResourcesOptions options) {
  return std::make_unique<PodResourcesClient>(std::move(options));
}

}  // namespace muster::topology
