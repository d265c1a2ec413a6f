// The agent's labels and condition, its schedule (discovery, free devices from the kubelet,
// publishing) with fakes at the seams, and the muster-topology command line (no API server
// needed).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <regex>

#include "absl/strings/str_cat.h"
#include "proto/nodetopology.h"
#include "tests/topology/builders.h"
#include "tests/topology/run.h"
#include "topology/agent/agent.h"
#include "topology/podresources/client.h"

namespace muster::topology {
namespace {

using namespace std::chrono_literals;
using testing::dgxLike;
using testing::run;
using testing::TempDir;

// The kubelet as the agent's DeviceAllocationSource sees it; the test changes what it reports
// between steps.
struct FakeKubelet {
  absl::StatusOr<DeviceAllocations> reports = DeviceAllocations{};
  int reads = 0;
};

class FakeAllocationSource final : public DeviceAllocationSource {
 public:
  explicit FakeAllocationSource(std::shared_ptr<FakeKubelet> kubelet)
      : kubelet_(std::move(kubelet)) {}
  absl::StatusOr<DeviceAllocations> read() override {
    ++kubelet_->reads;
    return kubelet_->reports;
  }

 private:
  std::shared_ptr<FakeKubelet> kubelet_;
};

// What the agent hands to publish(), in order; `fail` makes the next publish fail.
struct FakeApi {
  std::vector<Topology> published;
  absl::Status fail;
};

AgentLoop agentLoop(FakeApi* api, DeviceAllocationSourcePtr source) {
  AgentLoop::Options options;
  options.interval = 60s;
  options.allocation_interval = 5s;
  options.proc_root = "/nonexistent";
  return AgentLoop(
      options, [] { return absl::StatusOr<Topology>(dgxLike()); },
      [api](const Topology& t) -> absl::StatusOr<PublishResult> {
        if (!api->fail.ok()) return std::exchange(api->fail, absl::OkStatus());
        api->published.push_back(t);
        return PublishResult{};
      },
      std::move(source));
}

const AgentLoop::Clock::time_point kT0 = AgentLoop::Clock::time_point{} + 1h;

// Everything written to stderr (the log) while it lives.
class CapturedStderr {
 public:
  CapturedStderr() : file_(std::tmpfile()) {
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fileno(file_), 2);
  }
  ~CapturedStderr() { text(); }
  std::string text() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
      std::rewind(file_);
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) text_.append(buf, n);
      std::fclose(file_);
    }
    return text_;
  }

 private:
  std::FILE* file_;
  int saved_ = -1;
  std::string text_;
};

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

TEST_CASE("label values are made valid from free text") {
  CHECK(labelValue("Tesla P100-PCIE-16GB") == "Tesla-P100-PCIE-16GB");
  CHECK(labelValue("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3");
  CHECK(labelValue("  (weird) ") == "weird");
  CHECK(labelValue(std::string(100, 'a')).size() == 63);
  CHECK(labelValue("").empty());
}

TEST_CASE("node labels carry GPU and RDMA counts, model and link layer, and absent ones are removed") {
  auto labels = nodeLabels(testing::node().gpu(0, "", 0, "Tesla P100-PCIE-16GB")
                               .gpu(1, "", 0, "Tesla P100-PCIE-16GB").nic("mlx5_0", "", 0).build());
  CHECK(labels.at("muster.dev/gpu.count") == "2");
  CHECK(labels.at("muster.dev/gpu.model") == "Tesla-P100-PCIE-16GB");
  CHECK(labels.at("muster.dev/rdma.count") == "1");
  CHECK(labels.at("muster.dev/rdma.link-layer") == "InfiniBand");
  auto empty = nodeLabels(Topology{});
  CHECK(empty.at("muster.dev/gpu.count") == "0");
  CHECK(empty.at("muster.dev/rdma.count") == "0");
  CHECK_FALSE(empty.at("muster.dev/gpu.model").has_value());
  CHECK_FALSE(empty.at("muster.dev/rdma.link-layer").has_value());
}

TEST_CASE("the Discovered condition counts what was found and points at warnings") {
  Topology t = testing::node().numa(0, "0-7").gpu(0, "", 0).build();
  proto::Condition c = discoveredCondition(t);
  CHECK(c.type == "Discovered");
  CHECK(c.status == "True");
  CHECK(c.reason == "Discovered");
  CHECK(c.message == "1 GPUs, 0 RDMA NICs, 1 NUMA nodes");
  t.warnings.push_back("x");
  c = discoveredCondition(t);
  CHECK(c.reason == "DiscoveredWithWarnings");
  CHECK(c.message == "1 GPUs, 0 RDMA NICs, 1 NUMA nodes; 1 warnings (see spec.source.warnings)");
}

TEST_CASE("muster-topology show --json prints the NodeTopology the agent would publish") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--json", "--node-name", "cts1-pascal", "--hwloc-xml",
                fixture("cts1-pascal.xml")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  proto::NodeTopology obj;
  REQUIRE(proto::decodeNodeTopologyJson(r.out, &obj).ok());
  CHECK(obj.meta.name == "cts1-pascal");
  CHECK(obj.spec.summary.gpus == 2);
  CHECK(obj.spec.summary.gpu_model == "Tesla P100-PCIE-16GB");
  CHECK(obj.spec.rdma_nics.at(0).place.pcie_switch == "0000:02:00.0");
  CHECK(obj.spec.source.hwloc_version.rfind("2.", 0) == 0);
}

TEST_CASE("muster-topology show prints tables with the GPU to NIC pairing") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--hwloc-xml", fixture("coral-lassen.xml")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("GPUs: 4") != std::string::npos);
  CHECK(r.out.find("RDMA NICs: 4") != std::string::npos);
  CHECK(r.out.find("mlx5_2,mlx5_3  NODE") != std::string::npos);
  // Every GPU gets the NICs rdma-conf would pick, also when they are only on the same node.
  r = run({MUSTER_TOPOLOGY_BIN, "show", "--hwloc-xml", fixture("32em64t-2n8c2t-pci-normalio.xml")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("node only") == std::string::npos);
  CHECK(std::regex_search(r.out, std::regex("\n  0 +mlx5_0 +SYS +mlx5_0=SYS\n")));
  CHECK(std::regex_search(r.out, std::regex("\n  2 +mlx5_0 +PIX +mlx5_0=PIX\n")));
}

TEST_CASE("--help of a command prints that command's usage, and version the hwloc release") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("usage: muster-topology show", 0) == 0);
  CHECK(r.out.find("muster-topology agent") == std::string::npos);
  r = run({MUSTER_TOPOLOGY_BIN, "rdma-conf", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("usage: muster-topology rdma-conf", 0) == 0);
  r = run({MUSTER_TOPOLOGY_BIN, "version"});
  REQUIRE(r.exit_code == 0);
  // The library's release as lstopo reports it, not hwloc's API level (2.8.0 for 2.9.x).
  auto lstopo = run({"lstopo-no-graphics", "--version"});
  REQUIRE(lstopo.exit_code == 0);
  std::smatch m;
  const std::string lstopo_out = lstopo.out;
  REQUIRE(std::regex_search(lstopo_out, m, std::regex("([0-9]+\\.[0-9]+\\.[0-9]+)")));
  CHECK(r.out.find(absl::StrCat("(hwloc ", m[1].str(), ")")) != std::string::npos);
}

TEST_CASE("muster-topology agent without a node name says how to give one") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "agent", "--once"}, {{"NODE_NAME", testing::kUnset}});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--node-name or $NODE_NAME") != std::string::npos);
  CHECK(run({MUSTER_TOPOLOGY_BIN, "frobnicate"}).exit_code == 2);
  CHECK(run({MUSTER_TOPOLOGY_BIN, "agent", "--interval", "soon"}).exit_code == 2);
}

TEST_CASE("a missing fixture makes show fail with a message, not a crash") {
  auto r = run({MUSTER_TOPOLOGY_BIN, "show", "--hwloc-xml", "/nonexistent.xml"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("hwloc cannot read XML /nonexistent.xml") != std::string::npos);
}

TEST_CASE("the agent publishes the free devices the kubelet reports and republishes only when "
          "they change") {
  auto kubelet = std::make_shared<FakeKubelet>();
  kubelet->reports = DeviceAllocations{
      {{"nvidia.com/gpu", {"0"}}, {"preferred.jp/rdma", {"mlx5_0"}}}, std::nullopt};
  FakeApi api;
  AgentLoop loop = agentLoop(&api, std::make_unique<FakeAllocationSource>(kubelet));

  AgentLoop::Step step = loop.step(kT0);
  REQUIRE(step.status.ok());
  REQUIRE(api.published.size() == 1);
  REQUIRE(api.published[0].allocatable);
  CHECK(api.published[0].allocatable->gpus == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7});
  CHECK(api.published[0].allocatable->rdma_nics.size() == 7);
  CHECK(loop.allocationNote().empty());
  CHECK(step.next == kT0 + 5s);

  // The kubelet is asked again; nothing changed, nothing is written.
  step = loop.step(kT0 + 5s);
  CHECK(kubelet->reads == 2);
  CHECK(api.published.size() == 1);
  CHECK(step.next == kT0 + 10s);

  // A pod takes GPUs 1 and 2.
  kubelet->reports->allocated.push_back({"nvidia.com/gpu", {"1", "2"}});
  step = loop.step(kT0 + 10s);
  REQUIRE(api.published.size() == 2);
  CHECK(api.published[1].allocatable->gpus == std::vector<int32_t>{3, 4, 5, 6, 7});

  // Woken early: nothing is due.
  step = loop.step(kT0 + 12s);
  CHECK(kubelet->reads == 3);
  CHECK(step.next == kT0 + 15s);

  // The pod ends.
  kubelet->reports->allocated.pop_back();
  loop.step(kT0 + 15s);
  REQUIRE(api.published.size() == 3);
  CHECK(api.published[2].allocatable->gpus.size() == 7);

  // The interval: rediscovery publishes again (publish() writes only what differs).
  step = loop.step(kT0 + 60s);
  CHECK(api.published.size() == 4);
  CHECK(step.next == kT0 + 65s);
}

TEST_CASE("free devices disappear from the NodeTopology while the kubelet cannot be read and "
          "return with it") {
  auto kubelet = std::make_shared<FakeKubelet>();
  FakeApi api;
  AgentLoop loop = agentLoop(&api, std::make_unique<FakeAllocationSource>(kubelet));
  loop.step(kT0);
  REQUIRE(api.published.size() == 1);
  CHECK(api.published[0].allocatable.has_value());

  kubelet->reports = absl::UnavailableError("pod-resources List: connection refused");
  AgentLoop::Step step = loop.step(kT0 + 5s);
  CHECK(step.status.ok());
  REQUIRE(api.published.size() == 2);
  CHECK_FALSE(api.published[1].allocatable.has_value());
  CHECK(loop.allocationNote() == "pod-resources List: connection refused");
  loop.step(kT0 + 10s);
  CHECK(api.published.size() == 2);

  kubelet->reports = DeviceAllocations{};
  loop.step(kT0 + 15s);
  REQUIRE(api.published.size() == 3);
  CHECK(api.published[2].allocatable.has_value());
  CHECK(loop.allocationNote().empty());
}

TEST_CASE("a failed publish is retried soon with the free devices even when they did not change") {
  auto kubelet = std::make_shared<FakeKubelet>();
  FakeApi api;
  api.fail = absl::UnavailableError("apiserver down");
  AgentLoop loop = agentLoop(&api, std::make_unique<FakeAllocationSource>(kubelet));
  AgentLoop::Step step = loop.step(kT0);
  CHECK(step.status.code() == absl::StatusCode::kUnavailable);
  CHECK(api.published.empty());
  CHECK(step.next == kT0 + 1s);
  step = loop.step(kT0 + 1s);
  CHECK(step.status.ok());
  REQUIRE(api.published.size() == 1);
  CHECK(api.published[0].allocatable.has_value());
}

TEST_CASE("without the kubelet's socket the agent publishes no free devices, says why once and "
          "keeps going") {
  TempDir dir;
  FakeApi api;
  AgentLoop loop =
      agentLoop(&api, makePodResourcesClient({dir.path() + "/kubelet.sock", 1000ms}));
  std::vector<AgentLoop::Step> steps;
  std::string log;
  {
    CapturedStderr captured;
    for (auto at : {kT0, kT0 + 5s, kT0 + 10s, kT0 + 60s}) steps.push_back(loop.step(at));
    log = captured.text();
  }
  for (const AgentLoop::Step& s : steps) CHECK(s.status.ok());
  REQUIRE(api.published.size() == 2);  // the first discovery and the one after the interval
  CHECK_FALSE(api.published[0].allocatable.has_value());
  CHECK_FALSE(api.published[1].allocatable.has_value());
  CHECK(loop.allocationNote().find("kubelet.sock does not exist") != std::string::npos);
  INFO(log);
  CHECK(count(log, "Free devices not published") == 1);
  CHECK(count(log, "agent.podResources.enabled=true") == 1);
}

TEST_CASE("with pod-resources turned off the agent publishes no free devices") {
  FakeApi api;
  AgentLoop loop = agentLoop(&api, nullptr);
  AgentLoop::Step step = loop.step(kT0);
  CHECK(step.status.ok());
  REQUIRE(api.published.size() == 1);
  CHECK_FALSE(api.published[0].allocatable.has_value());
  CHECK(step.next == kT0 + 60s);  // nothing to poll
  CHECK_FALSE(loop.allocationNote().empty());
}

TEST_CASE("muster-topology agent refuses a bad --allocation-interval") {
  CHECK(run({MUSTER_TOPOLOGY_BIN, "agent", "--allocation-interval", "often"}).exit_code == 2);
  CHECK(run({MUSTER_TOPOLOGY_BIN, "agent", "--pod-resources-socket"}).exit_code == 2);
}

}  // namespace
}  // namespace muster::topology
