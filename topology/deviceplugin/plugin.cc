#include "topology/deviceplugin/plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "topology/deviceplugin/api.grpc.pb.h"
#include "topology/deviceplugin/registration.grpc.pb.h"

namespace muster::topology::deviceplugin {
namespace {

// The export's NUMA node n -> this machine's node, the export's nodes taken in order.
int32_t fold(int32_t n, const std::vector<int32_t>& export_nodes, const std::vector<int32_t>& host) {
  if (n < 0 || host.empty()) return n;
  auto it = std::find(export_nodes.begin(), export_nodes.end(), n);
  if (it == export_nodes.end()) return host.front();
  return host[static_cast<size_t>(it - export_nodes.begin()) % host.size()];
}

std::vector<int32_t> exportNodes(const Topology& t) {
  std::set<int32_t> ids;
  for (const NumaNode& n : t.numa_nodes) ids.insert(n.id);
  for (const Gpu& g : t.gpus) if (g.numa_node >= 0) ids.insert(g.numa_node);
  for (const RdmaNic& n : t.rdma_nics) if (n.numa_node >= 0) ids.insert(n.numa_node);
  return {ids.begin(), ids.end()};
}

}  // namespace

std::vector<Device> gpuDevices(const Topology& t, const std::vector<int32_t>& host_numa_nodes) {
  const std::vector<int32_t> nodes = exportNodes(t);
  std::vector<Device> out;
  for (const Gpu& g : t.gpus) {
    out.push_back({g.uuid.empty() ? std::to_string(g.index) : g.uuid,
                   fold(g.numa_node, nodes, host_numa_nodes)});
  }
  return out;
}

std::vector<Device> nicDevices(const Topology& t, const std::vector<int32_t>& host_numa_nodes) {
  const std::vector<int32_t> nodes = exportNodes(t);
  std::vector<Device> out;
  for (const RdmaNic& n : t.rdma_nics) out.push_back({n.name, fold(n.numa_node, nodes, host_numa_nodes)});
  return out;
}

std::vector<int32_t> hostNumaNodes(const std::string& sysfs_root) {
  std::vector<int32_t> out;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(sysfs_root) / "devices/system/node";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos && name.size() < 10) {
      out.push_back(std::stoi(name.substr(4)));
    }
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) out.push_back(0);  // no NUMA in sysfs: one node, as the kubelet assumes
  return out;
}

Allocation allocationFor(const Resource& r, const std::vector<std::string>& ids) {
  Allocation a;
  a.envs = r.envs;
  if (!r.ids_env.empty()) a.envs[r.ids_env] = absl::StrJoin(ids, ",");
  a.mounts = r.mounts;
  return a;
}

class Plugin::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(const Resource& r) : resource_(r) {}

  void stop() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(false);
    return grpc::Status::OK;
  }

  // The devices never change (fake ones stay healthy): one answer, then the stream is held open
  // until the kubelet goes away or the plugin stops.
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    v1beta1::ListAndWatchResponse response;
    for (const Device& d : resource_.devices) {
      v1beta1::Device* out = response.add_devices();
      out->set_id(d.id);
      out->set_health("Healthy");
      if (d.numa_node >= 0) out->mutable_topology()->add_nodes()->set_id(d.numa_node);
    }
    if (!writer->Write(response)) return grpc::Status::OK;
    std::unique_lock lock(mu_);
    while (!stopping_ && !context->IsCancelled()) cv_.wait_for(lock, std::chrono::seconds(1));
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const v1beta1::PreferredAllocationRequest*,
                                      v1beta1::PreferredAllocationResponse*) override {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no preferred allocation");
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    for (const v1beta1::ContainerAllocateRequest& c : request->container_requests()) {
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      for (const std::string& id : ids) {
        if (std::none_of(resource_.devices.begin(), resource_.devices.end(),
                         [&](const Device& d) { return d.id == id; })) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("no ", resource_.name, " device ", id, " here"));
        }
      }
      const Allocation a = allocationFor(resource_, ids);
      v1beta1::ContainerAllocateResponse* out = response->add_container_responses();
      for (const auto& [k, v] : a.envs) (*out->mutable_envs())[k] = v;
      for (const Resource::Mount& m : a.mounts) {
        v1beta1::Mount* mount = out->add_mounts();
        mount->set_host_path(m.host_path);
        mount->set_container_path(m.container_path);
        mount->set_read_only(true);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const Resource& resource_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

// The plugin watcher's side: what this socket serves, and what the kubelet made of it.
class Plugin::RegistrationService final : public pluginregistration::Registration::Service {
 public:
  RegistrationService(std::string name, std::string endpoint)
      : name_(std::move(name)), endpoint_(std::move(endpoint)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* out) override {
    out->set_type("DevicePlugin");
    out->set_name(name_);
    out->set_endpoint(endpoint_);
    out->add_supported_versions(kApiVersion);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard lock(mu_);
    status_ = status->plugin_registered() ? std::string()
                                          : (status->error().empty() ? "refused" : status->error());
    return grpc::Status::OK;
  }

  std::optional<std::string> status() const {
    std::lock_guard lock(mu_);
    return status_;
  }

 private:
  std::string name_, endpoint_;
  mutable std::mutex mu_;
  std::optional<std::string> status_;
};

struct Plugin::ServerHolder {
  std::unique_ptr<grpc::Server> server;
  ino_t inode = 0;  // of the socket this server made: a new file at the path is not ours
};

Plugin::Plugin(std::string kubelet_dir, Resource resource)
    : dir_(std::move(kubelet_dir)), resource_(std::move(resource)) {}

Plugin::~Plugin() { stop(); }

// Short, because a unix socket's path holds at most 107 bytes: "muster-gpu.sock" for
// nvidia.com/gpu, "muster-rdma.sock" for preferred.jp/rdma.
std::string Plugin::socketName() const {
  const size_t slash = resource_.name.rfind('/');
  return "muster-" + resource_.name.substr(slash == std::string::npos ? 0 : slash + 1) + ".sock";
}

void Plugin::stop() {
  if (service_) service_->stop();
  if (server_ && server_->server) {
    server_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->server->Wait();
  }
  if (server_) ::unlink(socketPath().c_str());  // the kubelet deregisters a plugin whose socket goes
  server_.reset();
  service_.reset();
  registration_.reset();
}

bool Plugin::needsRestart() const {
  if (!server_) return true;
  struct stat st {};
  return ::stat(socketPath().c_str(), &st) != 0 || st.st_ino != server_->inode;
}

std::optional<std::string> Plugin::registration() const {
  return registration_ ? registration_->status() : std::nullopt;
}

absl::Status Plugin::start() {
  stop();
  // Nothing to listen for before the kubelet is up: it makes the directory it watches.
  struct stat dir {};
  if (::stat((dir_ + "/plugins_registry").c_str(), &dir) != 0) {
    return absl::UnavailableError(absl::StrCat("the kubelet's plugin directory ", dir_,
                                               "/plugins_registry does not exist (yet)"));
  }
  ::unlink(socketPath().c_str());
  service_ = std::make_unique<Service>(resource_);
  registration_ = std::make_unique<RegistrationService>(resource_.name, socketPath());
  server_ = std::make_unique<ServerHolder>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socketPath(), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  builder.RegisterService(registration_.get());
  server_->server = builder.BuildAndStart();
  if (!server_->server) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", socketPath()));
  }
  struct stat st {};
  if (::stat(socketPath().c_str(), &st) == 0) server_->inode = st.st_ino;
  return absl::OkStatus();
}

}  // namespace muster::topology::deviceplugin
