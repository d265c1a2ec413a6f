// muster-topology's device plugin, from the kubelet's side of its gRPC sockets: what the plugin
// watcher reads (GetInfo), what the device manager lists and allocates, and the devices a real
// machine's hwloc export gives, with and without folding NUMA nodes onto this machine's.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/topology/run.h"
#include "topology/deviceplugin/api.grpc.pb.h"
#include "topology/deviceplugin/plugin.h"
#include "topology/deviceplugin/registration.grpc.pb.h"
#include "topology/discovery/discovery.h"

namespace muster::topology::deviceplugin {
namespace {

using testing::TempDir;

Topology lassen() {
  DiscoveryOptions options;
  options.hwloc_xml = std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/coral-lassen.xml";
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  return *t;
}

Resource gpus() {
  Resource r;
  r.name = "nvidia.com/gpu";
  r.devices = {{"GPU-a", 0}, {"GPU-b", 0}, {"GPU-c", 1}, {"GPU-d", -1}};
  r.ids_env = "NVIDIA_VISIBLE_DEVICES";
  r.envs = {{"HWLOC_XMLFILE", kFakeTopologyPath}};
  r.mounts = {{"/host/export.xml", kFakeTopologyPath}};
  return r;
}

std::shared_ptr<grpc::Channel> dial(const std::string& socket) {
  return grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
}

TEST_CASE("the devices of Lassen's export: GPUs by UUID and NICs by name, each on its NUMA node",
          "[deviceplugin]") {
  const Topology t = lassen();
  const std::vector<Device> g = gpuDevices(t, {});
  REQUIRE(g.size() == 4);
  CHECK(g[0] == Device{"GPU-04732404-7fc3-5ae6-cddd-c879b3a379bb", 0});
  CHECK(g[2].numa_node == 8);  // the second socket's node is 8 on Lassen
  const std::vector<Device> n = nicDevices(t, {});
  REQUIRE(n.size() == 4);
  CHECK(n[0] == Device{"mlx5_0", 0});
  CHECK(n[3] == Device{"mlx5_3", 8});

  SECTION("folded onto a one-node machine, every hint is that node") {
    for (const Device& d : gpuDevices(t, {0})) CHECK(d.numa_node == 0);
    for (const Device& d : nicDevices(t, {0})) CHECK(d.numa_node == 0);
  }
  SECTION("folded onto a two-node machine, the export's nodes map in order") {
    const std::vector<Device> f = gpuDevices(t, {0, 1});
    CHECK(f[0].numa_node == 0);
    CHECK(f[1].numa_node == 0);
    CHECK(f[2].numa_node == 1);
    CHECK(f[3].numa_node == 1);
  }
}

TEST_CASE("this machine's NUMA nodes come from sysfs, one node where sysfs has none", "[deviceplugin]") {
  TempDir sysfs;
  CHECK(hostNumaNodes(sysfs.path()) == std::vector<int32_t>{0});
  for (const char* d : {"node0", "node2", "nodes", "has_cpu"}) {
    std::filesystem::create_directories(sysfs.path() + "/devices/system/node/" + d);
  }
  CHECK(hostNumaNodes(sysfs.path()) == std::vector<int32_t>{0, 2});
}

TEST_CASE("an allocation lists the ids in the resource's variable, with its extra env and mounts",
          "[deviceplugin]") {
  const Allocation a = allocationFor(gpus(), {"GPU-b", "GPU-c"});
  CHECK(a.envs.at("NVIDIA_VISIBLE_DEVICES") == "GPU-b,GPU-c");
  CHECK(a.envs.at("HWLOC_XMLFILE") == kFakeTopologyPath);
  REQUIRE(a.mounts.size() == 1);
  CHECK(a.mounts[0].container_path == kFakeTopologyPath);
}

TEST_CASE("the kubelet's view: the plugin watcher's GetInfo, ListAndWatch with NUMA hints, Allocate",
          "[deviceplugin]") {
  TempDir kubelet;
  Plugin plugin(kubelet.path(), gpus());
  SECTION("before the kubelet made its plugin directory there is nothing to serve") {
    absl::Status s = plugin.start();
    CHECK(absl::IsUnavailable(s));
    CHECK(std::string(s.message()).find("plugins_registry") != std::string::npos);
    CHECK(plugin.needsRestart());
  }
  SECTION("served") {
    std::filesystem::create_directories(kubelet.path() + "/plugins_registry");
    REQUIRE(plugin.start().ok());
    CHECK_FALSE(plugin.needsRestart());
    CHECK(plugin.socketPath() == kubelet.path() + "/plugins_registry/muster-gpu.sock");
    auto channel = dial(plugin.socketPath());

    auto registration = pluginregistration::Registration::NewStub(channel);
    {
      grpc::ClientContext context;
      pluginregistration::InfoRequest request;
      pluginregistration::PluginInfo info;
      REQUIRE(registration->GetInfo(&context, request, &info).ok());
      CHECK(info.type() == "DevicePlugin");
      CHECK(info.name() == "nvidia.com/gpu");
      CHECK(info.endpoint() == plugin.socketPath());
      REQUIRE(info.supported_versions_size() == 1);
      CHECK(info.supported_versions(0) == "v1beta1");
    }
    CHECK_FALSE(plugin.registration().has_value());
    {
      grpc::ClientContext context;
      pluginregistration::RegistrationStatus status;
      status.set_plugin_registered(false);
      status.set_error("resource name taken");
      pluginregistration::RegistrationStatusResponse response;
      REQUIRE(registration->NotifyRegistrationStatus(&context, status, &response).ok());
      CHECK(plugin.registration() == "resource name taken");
      status.set_plugin_registered(true);
      status.clear_error();
      grpc::ClientContext again;
      REQUIRE(registration->NotifyRegistrationStatus(&again, status, &response).ok());
      CHECK(plugin.registration() == "");
    }

    auto devices = v1beta1::DevicePlugin::NewStub(channel);
    {
      grpc::ClientContext context;
      v1beta1::Empty empty;
      auto stream = devices->ListAndWatch(&context, empty);
      v1beta1::ListAndWatchResponse list;
      REQUIRE(stream->Read(&list));
      REQUIRE(list.devices_size() == 4);
      CHECK(list.devices(0).id() == "GPU-a");
      CHECK(list.devices(0).health() == "Healthy");
      REQUIRE(list.devices(2).topology().nodes_size() == 1);
      CHECK(list.devices(2).topology().nodes(0).id() == 1);
      CHECK(list.devices(3).topology().nodes_size() == 0);  // no hint where the node is unknown
      context.TryCancel();
    }
    {
      grpc::ClientContext context;
      v1beta1::AllocateRequest request;
      auto* c = request.add_container_requests();
      c->add_devices_ids("GPU-a");
      c->add_devices_ids("GPU-c");
      request.add_container_requests()->add_devices_ids("GPU-d");
      v1beta1::AllocateResponse response;
      REQUIRE(devices->Allocate(&context, request, &response).ok());
      REQUIRE(response.container_responses_size() == 2);
      CHECK(response.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES") == "GPU-a,GPU-c");
      CHECK(response.container_responses(1).envs().at("NVIDIA_VISIBLE_DEVICES") == "GPU-d");
      CHECK(response.container_responses(0).envs().at("HWLOC_XMLFILE") == kFakeTopologyPath);
      REQUIRE(response.container_responses(0).mounts_size() == 1);
      CHECK(response.container_responses(0).mounts(0).read_only());
      CHECK(response.container_responses(0).devices_size() == 0);  // fake: no device file
    }
    {
      grpc::ClientContext context;
      v1beta1::AllocateRequest request;
      request.add_container_requests()->add_devices_ids("GPU-z");
      v1beta1::AllocateResponse response;
      grpc::Status s = devices->Allocate(&context, request, &response);
      CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
      CHECK(s.error_message() == "no nvidia.com/gpu device GPU-z here");
    }

    // The socket removed (a kubelet cleaning up, a person): the plugin must serve anew.
    ::unlink(plugin.socketPath().c_str());
    CHECK(plugin.needsRestart());
    REQUIRE(plugin.start().ok());
    CHECK_FALSE(plugin.needsRestart());
    plugin.stop();
    struct stat st {};
    CHECK(::stat(plugin.socketPath().c_str(), &st) != 0);  // gone when stopped: deregistered
  }
}

TEST_CASE("device-plugin refuses to run without --fake", "[deviceplugin]") {
  testing::RunResult r = testing::run({MUSTER_TOPOLOGY_BIN, "device-plugin"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("pass --fake") != std::string::npos);
}

}  // namespace
}  // namespace muster::topology::deviceplugin
