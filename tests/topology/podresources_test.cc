// The kubelet pod-resources client against a kubelet-like gRPC server (tests/topology/
// fake_kubelet.h: PodResourcesLister on a unix socket in a temporary directory), alone, driving
// the agent's schedule, and behind `muster-topology show`.
#include <catch2/catch.hpp>
#include <fstream>

#include "proto/nodetopology.h"
#include "tests/topology/builders.h"
#include "tests/topology/fake_kubelet.h"
#include "tests/topology/run.h"
#include "topology/agent/agent.h"
#include "topology/podresources/client.h"

namespace muster::topology {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubeletService;
using testing::KubeletSocket;
using testing::run;
using testing::TempDir;

TEST_CASE("the pod-resources client reads what containers hold and what the kubelet can allocate") {
  FakeKubeletService kubelet;
  kubelet.holds("train-0", "main", "nvidia.com/gpu", {"GPU-aaaa", "GPU-bbbb"});
  kubelet.holds("train-0", "main", "preferred.jp/rdma", {"mlx5_0"});
  kubelet.holds("train-0", "sidecar", "example.com/fpga", {"fpga0"});
  kubelet.holds("infer-1", "main", "nvidia.com/gpu", {"GPU-cccc"});
  kubelet.canAllocate("nvidia.com/gpu", {"GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"});
  KubeletSocket socket(&kubelet);

  DeviceAllocationSourcePtr client = makePodResourcesClient({socket.path()});
  absl::StatusOr<DeviceAllocations> got = client->read();
  REQUIRE(got.ok());
  CHECK(got->allocated == std::vector<ResourceDevices>{
                              {"nvidia.com/gpu", {"GPU-aaaa", "GPU-bbbb"}},
                              {"preferred.jp/rdma", {"mlx5_0"}},
                              {"example.com/fpga", {"fpga0"}},
                              {"nvidia.com/gpu", {"GPU-cccc"}},
                          });
  REQUIRE(got->allocatable);
  CHECK(*got->allocatable ==
        std::vector<ResourceDevices>{
            {"nvidia.com/gpu", {"GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"}}});

  // The channel is kept and sees later changes.
  kubelet.removePod("train-0");
  got = client->read();
  REQUIRE(got.ok());
  CHECK(got->allocated == std::vector<ResourceDevices>{{"nvidia.com/gpu", {"GPU-cccc"}}});
}

TEST_CASE("a kubelet without GetAllocatableResources still gives what containers hold") {
  FakeKubeletService kubelet(/*allocatable=*/false);
  kubelet.holds("train-0", "main", "nvidia.com/gpu", {"3"});
  KubeletSocket socket(&kubelet);
  absl::StatusOr<DeviceAllocations> got = makePodResourcesClient({socket.path()})->read();
  REQUIRE(got.ok());
  CHECK(got->allocated == std::vector<ResourceDevices>{{"nvidia.com/gpu", {"3"}}});
  CHECK_FALSE(got->allocatable.has_value());
}

TEST_CASE("the pod-resources client says why it cannot read the kubelet") {
  TempDir dir;
  absl::StatusOr<DeviceAllocations> got =
      makePodResourcesClient({dir.path() + "/kubelet.sock"})->read();
  CHECK(got.status().code() == absl::StatusCode::kNotFound);
  CHECK(got.status().message().find("kubelet.sock does not exist") != std::string::npos);

  std::ofstream(dir.path() + "/plain") << "not a socket";
  got = makePodResourcesClient({dir.path() + "/plain"})->read();
  CHECK(got.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(got.status().message().find("is not a socket") != std::string::npos);

  got = makePodResourcesClient({""})->read();
  CHECK(got.status().code() == absl::StatusCode::kFailedPrecondition);

  FakeKubeletService kubelet;
  kubelet.failWith(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "rate limited"));
  KubeletSocket socket(&kubelet);
  got = makePodResourcesClient({socket.path()})->read();
  CHECK(got.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(got.status().message().find("pod-resources List on ") != std::string::npos);
  CHECK(got.status().message().find("rate limited") != std::string::npos);
}

TEST_CASE("the agent publishes the free devices a kubelet-like server reports, and their changes") {
  FakeKubeletService kubelet;
  kubelet.holds("train-0", "main", "nvidia.com/gpu", {"0", "1"});
  kubelet.holds("train-0", "main", "preferred.jp/rdma", {"0000:80:00.0"});
  KubeletSocket socket(&kubelet);
  std::vector<Topology> published;
  AgentLoop::Options options;
  options.proc_root = "/nonexistent";
  AgentLoop loop(
      options, [] { return absl::StatusOr<Topology>(testing::dgxLike()); },
      [&](const Topology& t) -> absl::StatusOr<PublishResult> {
        published.push_back(t);
        return PublishResult{};
      },
      makePodResourcesClient({socket.path()}));
  const auto t0 = AgentLoop::Clock::time_point{} + 1h;
  REQUIRE(loop.step(t0).status.ok());
  REQUIRE(published.size() == 1);
  REQUIRE(published[0].allocatable);
  CHECK(published[0].allocatable->gpus == std::vector<int32_t>{2, 3, 4, 5, 6, 7});
  CHECK(published[0].allocatable->rdma_nics.front() == "mlx5_1");

  loop.step(t0 + 5s);
  CHECK(published.size() == 1);
  kubelet.removePod("train-0");
  loop.step(t0 + 10s);
  REQUIRE(published.size() == 2);
  CHECK(published[1].allocatable->gpus.size() == 8);
  CHECK(published[1].allocatable->rdma_nics.size() == 8);
}

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

TEST_CASE("muster-topology show --json lists the devices no pod holds") {
  FakeKubeletService kubelet;
  // cts1-pascal: GPUs 0 and 1 (with NVML UUIDs), mlx5_0.
  kubelet.holds("train-0", "main", "nvidia.com/gpu", {"GPU-affad486-897e-9778-18e8-26a7127927a8"});
  kubelet.canAllocate("nvidia.com/gpu", {"GPU-affad486-897e-9778-18e8-26a7127927a8",
                                         "GPU-fa7cef9c-220f-b6d7-1bb6-ea1e99d3ad0a"});
  KubeletSocket socket(&kubelet);
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--json", "--node-name", "cts1-pascal", "--hwloc-xml",
                fixture("cts1-pascal.xml"), "--pod-resources-socket", socket.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  proto::NodeTopology obj;
  REQUIRE(proto::decodeNodeTopologyJson(r.out, &obj).ok());
  REQUIRE(obj.spec.allocatable);
  CHECK(obj.spec.allocatable->free_gpus == std::vector<int32_t>{1});
  CHECK(obj.spec.allocatable->free_rdma_nics == std::vector<std::string>{"mlx5_0"});

  r = run({MUSTER_TOPOLOGY_BIN, "show", "--hwloc-xml", fixture("cts1-pascal.xml"),
           "--pod-resources-socket", socket.path(), "--rdma-resource", "rdma/hca"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Free (kubelet pod-resources):\n  GPUs: 1\n  RDMA NICs: mlx5_0\n") !=
        std::string::npos);
}

TEST_CASE("muster-topology show without the kubelet's socket lists no free devices and exits 0") {
  TempDir dir;
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--json", "--node-name", "n", "--hwloc-xml",
                fixture("cts1-pascal.xml"), "--pod-resources-socket",
                dir.path() + "/kubelet.sock"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("kubelet.sock does not exist") != std::string::npos);
  proto::NodeTopology obj;
  REQUIRE(proto::decodeNodeTopologyJson(r.out, &obj).ok());
  CHECK_FALSE(obj.spec.allocatable.has_value());
}

}  // namespace
}  // namespace muster::topology
