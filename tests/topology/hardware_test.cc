// The hardware issue 13 is about: a real NVIDIA H200 machine (the export and driver entries the
// agent read there, tests/topology/testdata/device/h200), NIC kinds (InfiniBand, RoCE, EFA,
// iWARP) and what rdma-conf writes for each, ROCm's visibility variables, GPU ids as CUDA takes
// them (UUID prefixes, MIG devices), and the sysfs facts that tell EFA and iWARP apart.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "tests/topology/builders.h"
#include "tests/topology/run.h"
#include "topology/agent/rdma_conf.h"
#include "topology/discovery/discovery.h"
#include "topology/discovery/verbs.h"
#include "topology/model/affinity.h"

namespace muster::topology {
namespace {

namespace fs = std::filesystem;
using testing::run;
using testing::TempDir;
using testing::TopologyBuilder;

const std::string kH200 = std::string(MUSTER_TOPOLOGY_TESTDATA) + "/device/h200";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<Topology> loadH200(bool with_proc) {
  DiscoveryOptions options;
  options.hwloc_xml = kH200 + "/lstopo.xml";
  if (with_proc) options.proc_root = kH200 + "/proc";
  return discover(options);
}

RdmaConf build(Topology t, std::map<std::string, std::string> env,
               std::vector<std::string> proc_bus_ids = {}) {
  RdmaConfInput in;
  in.topology = std::move(t);
  in.env = std::move(env);
  in.proc_gpu_bus_ids = std::move(proc_bus_ids);
  in.socket_ifname = "eth0";
  absl::StatusOr<RdmaConf> conf = buildRdmaConf(in);
  REQUIRE(conf.ok());
  return *conf;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `sh -c '. FILE; printf %s "$VAR"'`, the variable unset before.
std::string sourced(const std::string& file, const std::string& var) {
  auto r = run({"sh", "-c", "set -eu; . \"$1\"; printf '%s' \"${" + var + ":-}\"", "sh", file},
               {{var, testing::kUnset}});
  REQUIRE(r.exit_code == 0);
  return r.out;
}

TEST_CASE("H200: the GPU the agent saw on a real machine, with the driver's model and UUID") {
  // What nvidia-smi said on that machine, read here independently of the driver's /proc entry.
  const std::string smi = slurp(kH200 + "/nvidia-smi-L.txt");
  std::smatch m;
  REQUIRE(std::regex_search(smi, m, std::regex(R"(GPU 0: (.+) \(UUID: (GPU-[0-9a-f-]+)\))")));
  const std::string model = m[1], uuid = m[2];
  CHECK(model == "NVIDIA H200");
  // nvidia-smi topo -m: CPU affinity 0-15, NUMA affinity 0.
  CHECK(std::regex_search(slurp(kH200 + "/nvidia-smi-topo.txt"),
                          std::regex(R"(GPU0\s+X\s+0-15\s+0\s)")));

  absl::StatusOr<Topology> t = loadH200(true);
  REQUIRE(t.ok());
  REQUIRE(t->gpus.size() == 1);
  const Gpu& g = t->gpus[0];
  CHECK(g.bus_id == "0000:00:06.0");
  CHECK(g.vendor == "NVIDIA");
  CHECK(g.model == model);
  CHECK(g.uuid == uuid);
  CHECK(g.numa_nodes == std::vector<int32_t>{0});
  CHECK(g.package == 0);
  CHECK(g.pcie_switch.empty());  // straight on the VM's host bridge
  CHECK(g.host_bridge == "0000:[00-00]");
  CHECK(t->rdma_nics.empty());   // ibv_devices listed none there
  REQUIRE(t->numa_nodes.size() == 1);
  CHECK(t->numa_nodes[0].cpus == "0-15");

  // What the agent published there before this change: no UUID, no vendor, "NVIDIA 2335".
  const std::string before = slurp(kH200 + "/show-644b12c.json");
  CHECK(has(before, "\"model\":\"NVIDIA 2335\""));
  CHECK(has(before, "\"uuid\":\"\""));
  // Without the driver's entries the PCI ids are all there is.
  absl::StatusOr<Topology> bare = loadH200(false);
  REQUIRE(bare.ok());
  CHECK(bare->gpus.at(0).model == "NVIDIA 2335");
  CHECK(bare->gpus.at(0).vendor == "NVIDIA");

  // rdma-conf there: no RDMA NIC, so sockets; the GPU is found by its UUID prefix.
  RdmaConf conf = build(*t, {{"CUDA_VISIBLE_DEVICES", uuid.substr(0, 12)}});
  CHECK(conf.gpus == std::vector<int32_t>{0});
  CHECK(has(conf.nccl, "NCCL_IB_DISABLE='1'"));
  CHECK(has(conf.ucx, "UCX_TLS='tcp,sm,self,cuda_copy,cuda_ipc'"));
}

Topology loadFixture(const std::string& name) {
  DiscoveryOptions options;
  options.hwloc_xml = std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  return *t;
}

TEST_CASE("the machines of issue 13: two switch levels, AMD MI50s, EFA, MCDRAM in flat mode") {
  // DGX-2: two V100s per inner switch, four per outer switch, under one root port.
  Topology dgx2 = loadFixture("nvidiaDGX2.xml");
  REQUIRE(dgx2.gpus.size() == 16);
  const Gpu& g0 = dgx2.gpus[0];
  const Gpu& g1 = dgx2.gpus[1];
  const Gpu& g2 = dgx2.gpus[2];
  CHECK(g0.pcie_switch == g1.pcie_switch);
  CHECK(g0.pcie_switch != g2.pcie_switch);  // the one-level model put all four together
  CHECK(g0.pcie_root == g2.pcie_root);
  CHECK(g0.pcie_switch != g0.pcie_root);

  // Corona: 8 MI50s numbered by ROCm SMI, with vendor and model; RCCL reads NCCL's file.
  Topology corona = loadFixture("epyc-corona-p2.xml");
  REQUIRE(corona.gpus.size() == 8);
  for (const Gpu& g : corona.gpus) {
    CHECK(g.vendor == "AMD");
    CHECK(g.model.find("MI50") != std::string::npos);
    CHECK(std::find(g.os_devices.begin(), g.os_devices.end(), absl::StrCat("rsmi", g.index)) !=
          g.os_devices.end());
  }
  RdmaConf rccl = build(corona, {{"ROCR_VISIBLE_DEVICES", "5"}});
  CHECK(rccl.hcas == std::vector<std::string>{"mlx5_0:1"});
  CHECK(has(rccl.nccl, "(PHB, under host bridge"));

  // Tuolumne: MI300A in CPX mode, six rsmi partitions per GPU: the GPUs are numbered in bus
  // order, not by a partition's index, and the all-zero AMD UUID is no UUID.
  Topology tuo = loadFixture("tuo.CPX.xml");
  REQUIRE(tuo.gpus.size() == 4);
  for (int32_t i = 0; i < 4; ++i) {
    CHECK(tuo.gpus[i].index == i);
    CHECK(tuo.gpus[i].bus_id == absl::StrCat("000", i, ":02:00.0"));
    CHECK(tuo.gpus[i].uuid.empty());
  }

  // g4dn.metal: the EFA device is EFA (Amazon's), and rdma-conf writes libfabric's settings.
  Topology g4dn = loadFixture("g4dnmetal.xml");
  REQUIRE(g4dn.rdma_nics.size() == 1);
  CHECK(g4dn.rdma_nics[0].kind == NicKind::kEFA);
  CHECK(g4dn.rdma_nics[0].link_layer == LinkLayer::kUnknown);
  RdmaConf efa = build(g4dn, {{"NVIDIA_VISIBLE_DEVICES", "4"}});
  CHECK(efa.efa_devices == std::vector<std::string>{"rdmap197s0"});
  CHECK(has(efa.nccl, "FI_PROVIDER='efa'"));
  CHECK_FALSE(has(efa.nccl, "NCCL_IB_HCA"));

  // KNL in SNC-4 flat mode: the NIC is near DDR node 0 and its MCDRAM node 4.
  Topology knl = loadFixture("knl-snc4-flat-hwloc1.xml");
  REQUIRE(knl.rdma_nics.size() == 1);
  CHECK(knl.rdma_nics[0].numa_nodes == std::vector<int32_t>{0, 4});
}

TEST_CASE("GPU ids: full and prefix UUIDs, MIG devices by their parent, ambiguity noted") {
  // Four GPUs with UUIDs that share a prefix in pairs.
  TopologyBuilder b;
  b.gpu(0, "", 0).gpu(1, "", 0).gpu(2, "", 1).gpu(3, "", 1);
  b.nic("mlx5_0", "", 0).nic("mlx5_1", "", 1);
  Topology t = b.build();
  t.gpus[0].uuid = "GPU-aaaa1111-0000-0000-0000-000000000000";
  t.gpus[1].uuid = "GPU-aaaa2222-0000-0000-0000-000000000000";
  t.gpus[2].uuid = "GPU-bbbb1111-0000-0000-0000-000000000000";
  t.gpus[3].uuid = "GPU-bbbb2222-0000-0000-0000-000000000000";
  CHECK(build(t, {{"CUDA_VISIBLE_DEVICES", "GPU-aaaa2"}}).gpus == std::vector<int32_t>{1});
  CHECK(build(t, {{"CUDA_VISIBLE_DEVICES", t.gpus[2].uuid}}).gpus == std::vector<int32_t>{2});
  RdmaConf ambiguous = build(t, {{"CUDA_VISIBLE_DEVICES", "GPU-bbbb"}});
  CHECK(ambiguous.gpus.empty());
  CHECK(has(ambiguous.nccl, "GPU \"GPU-bbbb\" a UUID prefix that matches several GPUs; ignored"));
  // Old-style MIG names carry the parent's UUID.
  RdmaConf mig = build(t, {{"NVIDIA_VISIBLE_DEVICES", "MIG-" + t.gpus[3].uuid + "/1/0"}});
  CHECK(mig.gpus == std::vector<int32_t>{3});
  CHECK(mig.hcas == std::vector<std::string>{"mlx5_1:1"});
  // New-style MIG UUIDs do not: the parent is the GPU the container sees in /proc.
  mig = build(t, {{"NVIDIA_VISIBLE_DEVICES", "MIG-5c5bb9e4-9c3f-5a2c-9d5b-0d3a8bd6d3f1"}},
              {t.gpus[0].bus_id});
  CHECK(mig.gpus == std::vector<int32_t>{0});
  CHECK(mig.hcas == std::vector<std::string>{"mlx5_0:1"});
  mig = build(t, {{"NVIDIA_VISIBLE_DEVICES", "MIG-5c5bb9e4-9c3f-5a2c-9d5b-0d3a8bd6d3f1"}});
  CHECK(mig.gpus.empty());
  CHECK(has(mig.nccl, "a MIG device whose parent GPU is not in /proc/driver/nvidia/gpus"));
}

TEST_CASE("ROCm: ROCR_VISIBLE_DEVICES, and HIP_VISIBLE_DEVICES picking among them") {
  TopologyBuilder b;
  b.gpu(0, "sw0", 0).gpu(1, "sw1", 0).gpu(2, "sw2", 1).gpu(3, "sw3", 1);
  b.nic("mlx5_0", "sw0", 0).nic("mlx5_1", "sw1", 0).nic("mlx5_2", "sw2", 1).nic("mlx5_3", "sw3", 1);
  Topology t = b.build();
  for (Gpu& g : t.gpus) g.vendor = "AMD";
  CHECK(build(t, {{"ROCR_VISIBLE_DEVICES", "2,3"}}).hcas ==
        std::vector<std::string>{"mlx5_2:1", "mlx5_3:1"});
  // HIP's list indexes ROCR's: position 1 of "2,3" is GPU 3.
  RdmaConf both = build(t, {{"ROCR_VISIBLE_DEVICES", "2,3"}, {"HIP_VISIBLE_DEVICES", "1"}});
  CHECK(both.gpus == std::vector<int32_t>{3});
  CHECK(both.hcas == std::vector<std::string>{"mlx5_3:1"});
  CHECK(build(t, {{"HIP_VISIBLE_DEVICES", "0"}}).hcas == std::vector<std::string>{"mlx5_0:1"});
  // RCCL reads NCCL's variables: the same file serves it.
  CHECK(has(both.nccl, "NCCL_IB_HCA='mlx5_3:1'"));
  // A newline in the env stays inside one comment line.
  RdmaConf hostile = build(t, {{"ROCR_VISIBLE_DEVICES", "2"}, {"HIP_VISIBLE_DEVICES", "9\nid"}});
  CHECK(has(hostile.nccl, "# note: HIP_VISIBLE_DEVICES: \"9\\x0aid\" is not a position"));
}

TEST_CASE("NIC kinds: EFA gets libfabric's settings and no IB ones, iWARP none") {
  TopologyBuilder b;
  b.gpu(0, "sw0", 0).gpu(1, "sw1", 0);
  b.nic("rdmap16s27", "sw0", 0, LinkLayer::kUnknown).kind(NicKind::kEFA);
  b.nic("rdmap32s27", "sw1", 0, LinkLayer::kUnknown).kind(NicKind::kEFA);
  RdmaConf efa = build(b.build(), {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(efa.efa);
  CHECK(efa.efa_devices == std::vector<std::string>{"rdmap16s27"});  // the GPU's own switch
  CHECK(efa.hcas.empty());
  CHECK_FALSE(has(efa.nccl, "NCCL_IB_HCA"));
  CHECK_FALSE(has(efa.ucx, "rc,"));
  TempDir dir;
  const std::string nccl = dir.path() + "/nccl.conf", ucx = dir.path() + "/ucx.conf";
  REQUIRE(writeFileAtomically(nccl, efa.nccl).ok());
  REQUIRE(writeFileAtomically(ucx, efa.ucx).ok());
  CHECK(sourced(nccl, "FI_PROVIDER") == "efa");
  CHECK(sourced(nccl, "FI_EFA_USE_DEVICE_RDMA") == "1");
  CHECK(sourced(nccl, "NCCL_IB_DISABLE") == "1");
  CHECK(sourced(ucx, "UCX_TLS") == "tcp,sm,self,cuda_copy,cuda_ipc");

  TopologyBuilder w;
  w.gpu(0, "sw0", 0).nic("iw0", "sw0", 0, LinkLayer::kEthernet).kind(NicKind::kIWARP);
  RdmaConf iwarp = build(w.build(), {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(iwarp.hcas.empty());
  CHECK(has(iwarp.nccl, "iw0: iWARP is not used by NCCL; skipped"));
  CHECK(has(iwarp.nccl, "NCCL_IB_DISABLE='1'"));

  // InfiniBand and RoCE NICs win over EFA in one pod (never both kinds in one file).
  TopologyBuilder mixed;
  mixed.gpu(0, "sw0", 0).nic("mlx5_0", "sw1", 0).nic("rdmap0", "sw0", 0).kind(NicKind::kEFA);
  RdmaConf m = build(mixed.build(), {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(m.hcas == std::vector<std::string>{"mlx5_0:1"});
  CHECK_FALSE(m.efa);
}

// A /sys/class/infiniband entry: node_type, one port, and the PCI device with its driver.
void fakeDevice(const std::string& sys, const std::string& name, const std::string& bus,
                const std::string& node_type, const std::string& link_layer,
                const std::string& driver) {
  const std::string pci = sys + "/devices/pci0000:00/" + bus;
  fs::create_directories(pci);
  fs::create_directories(sys + "/bus/pci/drivers/" + driver);
  fs::create_directory_symlink(sys + "/bus/pci/drivers/" + driver, pci + "/driver");
  const std::string dev = sys + "/class/infiniband/" + name;
  fs::create_directories(dev + "/ports/1");
  fs::create_directory_symlink(pci, dev + "/device");
  std::ofstream(dev + "/node_type") << node_type << "\n";
  std::ofstream(dev + "/ports/1/state") << "4: ACTIVE\n";
  std::ofstream(dev + "/ports/1/link_layer") << link_layer << "\n";
}

TEST_CASE("the sysfs reader tells EFA (driver) and iWARP (node type) from InfiniBand") {
  TempDir dir;
  const std::string sys = dir.path() + "/sys";
  fakeDevice(sys, "rdmap0s6", "0000:00:06.0", "6: unspecified", "Unspecified", "efa");
  fakeDevice(sys, "iwp1", "0000:00:07.0", "4: RNIC", "Ethernet", "irdma");
  fakeDevice(sys, "mlx5_0", "0000:00:08.0", "1: CA", "InfiniBand", "mlx5_core");
  VerbsProviderPtr sysfs = makeSysfsProvider(sys);
  absl::StatusOr<std::vector<RdmaDeviceInfo>> devices = sysfs->devices();
  REQUIRE(devices.ok());
  REQUIRE(devices->size() == 3);
  std::map<std::string, NicKind> kinds;
  for (const RdmaDeviceInfo& d : *devices) kinds[d.name] = d.kind;
  CHECK(kinds["rdmap0s6"] == NicKind::kEFA);
  CHECK(kinds["iwp1"] == NicKind::kIWARP);
  CHECK(kinds["mlx5_0"] == NicKind::kUnknown);  // the link layer decides: discovery's job

  // Discovery over an export with no NIC: the provider's devices are added with their kinds.
  DiscoveryOptions options;
  options.hwloc_xml = kH200 + "/lstopo.xml";
  options.providers = {sysfs.get()};
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  REQUIRE(t->rdma_nics.size() == 3);
  CHECK(t->findNic("rdmap0s6")->kind == NicKind::kEFA);
  CHECK(t->findNic("rdmap0s6")->link_layer == LinkLayer::kUnknown);  // never taken for IB
  CHECK(t->findNic("iwp1")->kind == NicKind::kIWARP);
  CHECK(t->findNic("mlx5_0")->kind == NicKind::kInfiniBand);
  // An EFA device with no link layer is not a "link layer unknown" warning.
  for (const std::string& w : t->warnings) CHECK(w.find("rdmap0s6: link layer unknown") == std::string::npos);
}

TEST_CASE("the NodeTopology carries kinds, NUMA sets and paths, and reads back the same") {
  Topology t = TopologyBuilder()
                   .gpu(0, "sw0", 0).under("rp0").near({0, 2})
                   .nic("mlx5_0", "sw0", 0).under("rp0")
                   .nic("rdmap0", "sw1", 1).under("rp1").kind(NicKind::kEFA)
                   .build();
  proto::NodeTopology obj = toNodeTopology(t, "n", "v", "2026-12-04T00:00:00Z");
  const std::string json = proto::encode(obj);
  CHECK(has(json, "\"numaNodes\":[0,2]"));
  CHECK(has(json, "\"kind\":\"EFA\""));
  CHECK(has(json, "\"nicPaths\":[{\"rdmaNic\":\"mlx5_0\",\"path\":\"PIX\"},{\"rdmaNic\":\"rdmap0\","
                  "\"path\":\"SYS\"}]"));
  proto::NodeTopology back;
  REQUIRE(proto::decodeNodeTopologyJson(json, &back).ok());
  CHECK(back.spec == obj.spec);
  absl::StatusOr<Topology> read = fromNodeTopology(back);
  REQUIRE(read.ok());
  CHECK(read->gpus[0].numa_nodes == std::vector<int32_t>{0, 2});
  CHECK(read->findNic("rdmap0")->kind == NicKind::kEFA);
  CHECK(pathBetween(*read, 0, "mlx5_0") == GroupKind::kPCIeSwitch);
  // An object of the first schema (no kind, one NUMA node) still reads: kind from the link layer.
  proto::NodeTopology old;
  REQUIRE(proto::decodeNodeTopologyJson(
              R"({"spec":{"nodeName":"n","gpus":[{"index":0,"numaNode":1}],)"
              R"("rdmaNics":[{"name":"mlx5_0","numaNode":1,"linkLayer":"Ethernet"}]}})",
              &old)
              .ok());
  absl::StatusOr<Topology> first = fromNodeTopology(old);
  REQUIRE(first.ok());
  CHECK(first->gpus[0].numaSet() == std::vector<int32_t>{1});
  CHECK(first->findNic("mlx5_0")->kind == NicKind::kRoCE);
  CHECK(DeviceLocality(*first).bestAlignment({1, 1}) == Alignment::kNUMANode);
}

}  // namespace
}  // namespace muster::topology
