// topology/discovery on real hwloc XML exports and a real captured sysfs tree
// (tests/topology/testdata, see SOURCES.md). What each test expects is what
// `lstopo-no-graphics --input FILE` shows for the file; the first test also checks that against
// lstopo itself at test time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <set>

#include "tests/topology/run.h"
#include "topology/discovery/discovery.h"
#include "topology/discovery/verbs.h"
#include "topology/model/affinity.h"

namespace muster::topology {
namespace {

using testing::run;
using testing::TempDir;

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

Topology load(const std::string& name) {
  DiscoveryOptions options;
  options.hwloc_xml = fixture(name);
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  return *t;
}

std::vector<std::string> gpuBusIds(const Topology& t) {
  std::vector<std::string> out;
  for (const Gpu& g : t.gpus) out.push_back(g.bus_id);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> nicNames(const Topology& t) {
  std::vector<std::string> out;
  for (const RdmaNic& n : t.rdma_nics) out.push_back(n.name);
  return out;
}

std::vector<int32_t> numaIds(const Topology& t) {
  std::vector<int32_t> out;
  for (const NumaNode& n : t.numa_nodes) out.push_back(n.id);
  return out;
}

const LocalityGroup* group(const Topology& t, GroupKind kind, const std::string& id) {
  for (const LocalityGroup& g : t.groups) {
    if (g.kind == kind && g.id == id) return &g;
  }
  return nullptr;
}

TEST_CASE("NVIDIA GPUs, RDMA NICs and NUMA nodes match what lstopo-no-graphics shows for every fixture") {
  const std::regex pci_line(R"(busid=([0-9a-f:.]+) id=10de:[0-9a-f]{4} class=03)");
  const std::regex osdev_line(R"(^OpenFabrics "([^"]+)\")");
  const std::regex numa_line(R"(NUMANode L#\d+ \(P#(\d+))");
  for (const char* name : {"cts1-pascal.xml", "coral-lassen.xml", "32em64t-2n8c2t-pci-normalio.xml",
                           "96em64t-4n4d3ca2co-pci.xml"}) {
    INFO(name);
    auto pcidev = run({"lstopo-no-graphics", "--input", fixture(name), "--only", "pcidev", "-v"});
    auto osdev = run({"lstopo-no-graphics", "--input", fixture(name), "--only", "osdev"});
    auto numa = run({"lstopo-no-graphics", "--input", fixture(name), "--only", "numanode"});
    REQUIRE(pcidev.exit_code == 0);  // hwloc-nox (tests/install-deps.sh) provides lstopo
    REQUIRE(osdev.exit_code == 0);
    REQUIRE(numa.exit_code == 0);
    std::vector<std::string> want_gpus, want_nics;
    std::vector<int32_t> want_numa;
    std::smatch m;
    std::istringstream lines(pcidev.out + "\n");
    for (std::string line; std::getline(lines, line);) {
      if (std::regex_search(line, m, pci_line)) want_gpus.push_back(m[1]);
    }
    std::istringstream os_lines(osdev.out);
    for (std::string line; std::getline(os_lines, line);) {
      if (std::regex_search(line, m, osdev_line)) want_nics.push_back(m[1]);
    }
    std::istringstream numa_lines(numa.out);
    for (std::string line; std::getline(numa_lines, line);) {
      if (std::regex_search(line, m, numa_line)) want_numa.push_back(std::stoi(m[1]));
    }
    std::sort(want_gpus.begin(), want_gpus.end());
    std::sort(want_nics.begin(), want_nics.end());
    std::sort(want_numa.begin(), want_numa.end());
    Topology t = load(name);
    std::erase_if(t.gpus, [](const Gpu& g) { return g.vendor != "NVIDIA"; });
    CHECK(gpuBusIds(t) == want_gpus);
    CHECK(nicNames(t) == want_nics);
    CHECK(numaIds(t) == want_numa);
  }
}

TEST_CASE("cts1-pascal: both P100s and mlx5_0 are behind one PCIe switch on NUMA node 0") {
  Topology t = load("cts1-pascal.xml");
  REQUIRE(t.gpus.size() == 2);
  CHECK(t.gpus[0].index == 0);
  CHECK(t.gpus[0].bus_id == "0000:04:00.0");
  CHECK(t.gpus[0].model == "Tesla P100-PCIE-16GB");
  CHECK(t.gpus[0].uuid == "GPU-affad486-897e-9778-18e8-26a7127927a8");
  CHECK(t.gpus[0].os_devices == std::vector<std::string>{"opencl0d0", "cuda0", "nvml0"});
  CHECK(t.gpus[1].bus_id == "0000:07:00.0");
  REQUIRE(t.rdma_nics.size() == 1);
  const RdmaNic& nic = t.rdma_nics[0];
  CHECK(nic.name == "mlx5_0");
  CHECK(nic.bus_id == "0000:08:00.0");
  CHECK(nic.node_guid == "ec0d:9a03:0067:fdd4");
  CHECK(nic.net_devices == std::vector<std::string>{"hsi0"});
  CHECK(nic.link_layer == LinkLayer::kInfiniBand);  // IPoIB hsi0 has a 20-byte address
  REQUIRE(nic.ports.size() == 1);
  CHECK(nic.ports[0].state == "ACTIVE");
  CHECK(nic.ports[0].guid == "ec0d:9a03:0067:fdd4");
  for (const Gpu& g : t.gpus) {
    CHECK(g.pcie_switch == "0000:02:00.0");
    CHECK(g.numa_node == 0);
  }
  CHECK(nic.pcie_switch == "0000:02:00.0");
  CHECK(nic.numa_node == 0);
  const LocalityGroup* sw = group(t, GroupKind::kPCIeSwitch, "0000:02:00.0");
  REQUIRE(sw != nullptr);
  CHECK(sw->gpus == std::vector<int32_t>{0, 1});
  CHECK(sw->rdma_nics == std::vector<std::string>{"mlx5_0"});
  REQUIRE(t.numa_nodes.size() == 2);
  CHECK(t.numa_nodes[0].cpus == "0-17,36-53");
  CHECK(t.numa_nodes[1].cpus == "18-35,54-71");
  CHECK(t.numa_nodes[0].memory_bytes == 134756204544);
  CHECK(t.warnings.empty());
  CHECK(DeviceLocality(t).bestAlignment({2, 1}) == Alignment::kPCIeSwitch);
}

TEST_CASE("coral-lassen: 4 V100s and mlx5_0..3 in PCI domains other than 0, paired by NUMA node") {
  Topology t = load("coral-lassen.xml");
  CHECK(gpuBusIds(t) == std::vector<std::string>{"0004:04:00.0", "0004:05:00.0", "0035:03:00.0",
                                                 "0035:04:00.0"});
  CHECK(nicNames(t) == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
  CHECK(numaIds(t) == std::vector<int32_t>{0, 8});
  for (const Gpu& g : t.gpus) {
    CHECK(g.model == "Tesla V100-SXM2-16GB");
    CHECK(g.bus_id.rfind("0000:", 0) != 0);
    CHECK(g.os_devices.size() == 2);  // cudaN, nvmlN
    CHECK(g.numa_node == (g.index < 2 ? 0 : 8));
    // Behind PLX switches (upstream port <domain>:01:00.0) under the POWER9 root port, no NIC.
    CHECK(g.pcie_switch == g.bus_id.substr(0, 5) + "01:00.0");
    CHECK(g.pcie_root == g.bus_id.substr(0, 5) + "00:00.0");
  }
  for (const RdmaNic& n : t.rdma_nics) {
    // Straight on the root port of their own host bridge: that bridge is all they share.
    CHECK(n.pcie_switch == n.bus_id.substr(0, 5) + "00:00.0");
    CHECK(n.pcie_root == n.pcie_switch);
    CHECK(n.bus_id.rfind("0000:", 0) != 0);
    CHECK(n.link_layer == LinkLayer::kInfiniBand);
  }
  CHECK(t.rdma_nics[0].numa_node == 0);
  CHECK(t.rdma_nics[1].numa_node == 0);
  CHECK(t.rdma_nics[2].numa_node == 8);
  CHECK(t.rdma_nics[3].numa_node == 8);
  const LocalityGroup* numa8 = group(t, GroupKind::kNUMANode, "numa8");
  REQUIRE(numa8 != nullptr);
  CHECK(numa8->gpus == std::vector<int32_t>{2, 3});
  CHECK(numa8->rdma_nics == std::vector<std::string>{"mlx5_2", "mlx5_3"});
  DeviceLocality loc(t);
  CHECK(loc.bestAlignment({1, 1}) == Alignment::kNUMANode);
  CHECK(loc.bestAlignment({4, 4}) == Alignment::kNUMANode);
  CHECK(loc.pairedGpus(GroupKind::kPCIeSwitch) == 0);
}

TEST_CASE("96em64t-4n4d3ca2co: no GPU and no RDMA NIC, 4 NUMA nodes") {
  Topology t = load("96em64t-4n4d3ca2co-pci.xml");
  CHECK(t.gpus.empty());  // the VGA device there is an ATI (1002:515e)
  CHECK(t.rdma_nics.empty());
  CHECK(numaIds(t) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(t.groups.empty());
  CHECK(t.warnings.empty());
}

TEST_CASE("32em64t-2n8c2t: the K40m, a Radeon and mlx5_0 hang on one root port of socket 1") {
  Topology t = load("32em64t-2n8c2t-pci-normalio.xml");
  // Three NVIDIA 3D controllers; only 84:00.0 has a CUDA device (cuda0, "Tesla K40m"), so indexes
  // follow PCI bus order and a warning says so. The AMD Radeon (84:00.1, VGA with an OpenCL
  // device) comes after them.
  REQUIRE(t.gpus.size() == 4);
  CHECK(gpuBusIds(t) == std::vector<std::string>{"0000:03:00.0", "0000:83:00.0", "0000:84:00.0",
                                                 "0000:84:00.1"});
  const Gpu& k40 = t.gpus[2];
  CHECK(k40.bus_id == "0000:84:00.0");
  CHECK(k40.vendor == "NVIDIA");
  CHECK(k40.model == "Tesla K40m");
  CHECK(k40.numa_node == 1);
  CHECK(k40.pcie_switch == "0000:80:03.0");
  const Gpu& radeon = t.gpus[3];
  CHECK(radeon.index == 3);
  CHECK(radeon.vendor == "AMD");
  CHECK(radeon.model == "AMD Radeon R9 200 / HD 7900 Series");  // its OpenCL device's GPUModel
  CHECK(t.gpus[0].numa_node == 0);
  CHECK(t.gpus[0].model == "Tesla M2075 Dual-Slot Computing Processor Module");
  REQUIRE(t.rdma_nics.size() == 1);
  CHECK(t.rdma_nics[0].name == "mlx5_0");
  CHECK(t.rdma_nics[0].numa_node == 1);
  CHECK(t.rdma_nics[0].pcie_switch == "0000:80:03.0");  // the K40's root port, no switch between
  CHECK(pathBetween(t, 2, "mlx5_0") == GroupKind::kPCIeSwitch);
  CHECK(pathBetween(t, 1, "mlx5_0") == GroupKind::kHostBridge);  // another root port, same PHB
  CHECK(pathBetween(t, 0, "mlx5_0") == GroupKind::kNode);        // the other socket
  CHECK(gpuModelSummary(t) == "mixed");
  REQUIRE(t.warnings.size() == 2);
  CHECK(t.warnings[0].find("NVIDIA GPU indexes assigned in PCI bus order") != std::string::npos);
  CHECK(t.warnings[1].find("AMD GPU indexes assigned in PCI bus order") != std::string::npos);
  DeviceLocality loc(t);
  CHECK(loc.bestAlignment({1, 1}) == Alignment::kPCIeSwitch);
  FreeDevices only_gpu1{{1}, {"mlx5_0"}};
  CHECK(loc.bestAlignment({1, 1}, &only_gpu1) == Alignment::kHostBridge);
  FreeDevices only_gpu0{{0}, {"mlx5_0"}};
  CHECK(loc.bestAlignment({1, 1}, &only_gpu0) == Alignment::kNode);
}

TEST_CASE("a missing or broken hwloc XML is an error, not a crash") {
  DiscoveryOptions options;
  options.hwloc_xml = "/nonexistent/topology.xml";
  CHECK_FALSE(discover(options).ok());
  TempDir dir;
  const std::string bad = dir.path() + "/bad.xml";
  std::ofstream(bad) << "<topology><object type=\"Machine\"";
  options.hwloc_xml = bad;
  CHECK_FALSE(discover(options).ok());
}

TEST_CASE("the live machine is discovered without crashing (here: no GPU, no RDMA)") {
  DiscoveryOptions options;
  VerbsProviderPtr verbs = makeIbverbsProvider();
  VerbsProviderPtr sysfs = makeSysfsProvider("/sys");
  options.providers = {verbs.get(), sysfs.get()};
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  CHECK_FALSE(t->numa_nodes.empty());
  CHECK(!t->hwloc_version.empty());
}

// Extracts the captured tree with tar, no shell involved.
std::string extractSysfs(const TempDir& dir) {
  auto r = run({"tar", "-xjf",
                std::string(MUSTER_TOPOLOGY_TESTDATA) + "/sysfs/40intel64-2g2n4c+pci.tar.bz2", "-C",
                dir.path()});
  REQUIRE(r.exit_code == 0);
  return dir.path() + "/40intel64-2g2n4c+pci/sys";
}

TEST_CASE("the sysfs reader finds qib0 and its port in a captured /sys") {
  TempDir dir;
  VerbsProviderPtr sysfs = makeSysfsProvider(extractSysfs(dir));
  absl::StatusOr<std::vector<RdmaDeviceInfo>> devices = sysfs->devices();
  REQUIRE(devices.ok());
  REQUIRE(devices->size() == 1);
  const RdmaDeviceInfo& qib = (*devices)[0];
  CHECK(qib.name == "qib0");
  CHECK(qib.bus_id == "0000:43:00.0");
  CHECK(qib.node_guid == "0011:7500:0077:cfc8");
  CHECK(qib.model == "InfiniPath_QLE7340");
  CHECK(qib.numa_node == 2);
  CHECK(qib.net_devices == std::vector<std::string>{"ib0"});
  REQUIRE(qib.ports.size() == 1);
  const RdmaPort& port = qib.ports[0];
  CHECK(port.port == 1);
  CHECK(port.state == "ACTIVE");
  CHECK(port.link_layer == LinkLayer::kInfiniBand);
  CHECK(port.rate_gbps == 40);
  CHECK(port.gid == "fe80:0000:0000:0000:0011:7500:0077:cfc8");
  CHECK(port.guid == "0011:7500:0077:cfc8");
}

TEST_CASE("a sysfs root without /class/infiniband is reported, and discovery goes on") {
  TempDir dir;
  VerbsProviderPtr sysfs = makeSysfsProvider(dir.path());
  CHECK(absl::IsNotFound(sysfs->devices().status()));
  DiscoveryOptions options;
  options.hwloc_xml = fixture("cts1-pascal.xml");
  options.providers = {sysfs.get()};
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  CHECK(t->rdma_nics.size() == 1);  // hwloc's own port facts remain
  CHECK(t->rdma_nics[0].ports[0].state == "ACTIVE");
}

TEST_CASE("provider facts replace hwloc's, and a NIC only the provider sees is added with a "
          "warning") {
  TempDir dir;
  VerbsProviderPtr sysfs = makeSysfsProvider(extractSysfs(dir));
  DiscoveryOptions options;
  options.hwloc_xml = fixture("96em64t-4n4d3ca2co-pci.xml");
  options.providers = {sysfs.get()};
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  REQUIRE(t->rdma_nics.size() == 1);
  CHECK(t->rdma_nics[0].name == "qib0");
  CHECK(t->rdma_nics[0].numa_node == 2);
  CHECK(t->rdma_nics[0].ports[0].rate_gbps == 40);
  REQUIRE(t->warnings.size() == 1);
  CHECK(t->warnings[0].find("qib0 seen by sysfs:") != std::string::npos);
}

TEST_CASE("sysfs port state and rate texts are parsed as the kernel writes them") {
  CHECK(parsePortState("4: ACTIVE") == "ACTIVE");
  CHECK(parsePortState("1: DOWN\n") == "DOWN");
  CHECK(parsePortState("ARMED") == "ARMED");
  CHECK(parseRateGbps("40 Gb/sec (4X QDR)") == 40);
  CHECK(parseRateGbps("2.5 Gb/sec (1X SDR)") == 2.5);
  CHECK(parseRateGbps("400 Gb/sec (4X NDR)") == 400);
  CHECK(parseRateGbps("garbage") == 0);
  CHECK(parseRateGbps("") == 0);
}

}  // namespace
}  // namespace muster::topology
