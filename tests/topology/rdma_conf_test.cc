// rdma-conf: NIC choice for the pod's GPUs on fixture-backed device views, and the NCCL/UCX files
// sourced by real sh and bash.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/topology/builders.h"
#include "tests/topology/run.h"
#include "topology/agent/rdma_conf.h"
#include "topology/discovery/discovery.h"

namespace muster::topology {
namespace {

namespace fs = std::filesystem;
using testing::run;
using testing::TempDir;

std::string fixture(const std::string& name) {
  return std::string(MUSTER_TOPOLOGY_TESTDATA) + "/hwloc/" + name;
}

Topology load(const std::string& name, const std::string& sysfs_root = "") {
  DiscoveryOptions options;
  options.hwloc_xml = fixture(name);
  VerbsProviderPtr sysfs;
  if (!sysfs_root.empty()) {
    sysfs = makeSysfsProvider(sysfs_root);
    options.providers.push_back(sysfs.get());
  }
  absl::StatusOr<Topology> t = discover(options);
  REQUIRE(t.ok());
  return *t;
}

RdmaConf build(Topology t, std::map<std::string, std::string> env,
               std::map<std::string, std::string> uuids = {}) {
  RdmaConfInput in;
  in.topology = std::move(t);
  in.env = std::move(env);
  in.gpu_uuid_to_bus = std::move(uuids);
  in.socket_ifname = "eth0";
  absl::StatusOr<RdmaConf> conf = buildRdmaConf(in);
  REQUIRE(conf.ok());
  return *conf;
}

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  REQUIRE(writeFileAtomically(path, text).ok());
  return path;
}

// `<shell> -c '. FILE; echo "$VAR"'` with extra environment; stdout without the newline.
std::string sourced(const std::string& shell, const std::string& file, const std::string& var,
                    std::map<std::string, std::string> env = {}) {
  for (const char* v : {"NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE",
                        "UCX_NET_DEVICES", "UCX_TLS", "UCX_IB_GID_INDEX"}) {
    env.emplace(v, testing::kUnset);
  }
  auto r = run({shell, "-c", "set -eu; . \"$1\"; printf '%s' \"$" + var + "\"", shell, file}, env);
  INFO(shell << " stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

TEST_CASE("cts1-pascal: both GPUs get mlx5_0 port 1, the NIC behind their PCIe switch") {
  RdmaConf conf = build(load("cts1-pascal.xml"), {{"NVIDIA_VISIBLE_DEVICES", "0,1"}});
  CHECK(conf.gpus == std::vector<int32_t>{0, 1});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_0:1"});
  CHECK_FALSE(conf.roce);
  CHECK(has(conf.nccl, "[ -n \"${NCCL_IB_HCA:-}\" ] || NCCL_IB_HCA='mlx5_0:1'\nexport NCCL_IB_HCA\n"));
  CHECK(has(conf.nccl, "NCCL_SOCKET_IFNAME='eth0'"));
  CHECK_FALSE(has(conf.nccl, "NCCL_IB_GID_INDEX"));
  CHECK(has(conf.nccl, "# GPU 0 (0000:04:00.0): mlx5_0 (PIX, behind PCIe switch 0000:02:00.0)"));
  CHECK(has(conf.ucx, "UCX_NET_DEVICES='mlx5_0:1'"));
  CHECK(has(conf.ucx, "UCX_TLS='rc,sm,self,cuda_copy,cuda_ipc'"));
}

TEST_CASE("the NCCL and UCX files work when sourced by sh and by bash, and a preset value wins") {
  RdmaConf conf = build(load("cts1-pascal.xml"), {{"NVIDIA_VISIBLE_DEVICES", "all"}});
  TempDir dir;
  const std::string nccl = write(dir, "rdma/nccl.conf", conf.nccl);
  const std::string ucx = write(dir, "rdma/ucx.conf", conf.ucx);
  for (const std::string shell : {"sh", "bash"}) {
    INFO(shell);
    CHECK(sourced(shell, nccl, "NCCL_IB_HCA") == "mlx5_0:1");
    CHECK(sourced(shell, nccl, "NCCL_SOCKET_IFNAME") == "eth0");
    CHECK(sourced(shell, ucx, "UCX_NET_DEVICES") == "mlx5_0:1");
    CHECK(sourced(shell, ucx, "UCX_TLS") == "rc,sm,self,cuda_copy,cuda_ipc");
    // The pod's own value is kept.
    CHECK(sourced(shell, nccl, "NCCL_IB_HCA", {{"NCCL_IB_HCA", "mlx5_7:2"}}) == "mlx5_7:2");
    CHECK(sourced(shell, ucx, "UCX_TLS", {{"UCX_TLS", "tcp"}}) == "tcp");
    // Exported, so mpirun/torchrun children see it.
    auto r = run({shell, "-c", ". \"$1\"; sh -c 'printf %s \"$NCCL_IB_HCA\"'", shell, nccl},
                 {{"NCCL_IB_HCA", testing::kUnset}});
    CHECK(r.out == "mlx5_0:1");
  }
}

TEST_CASE("coral-lassen: a GPU named by UUID gets the two NICs on its NUMA node") {
  RdmaConf conf = build(load("coral-lassen.xml"),
                        {{"NVIDIA_VISIBLE_DEVICES", "GPU-3e0871a1-dd1a-b447-40f2-86e6745c3206"}});
  CHECK(conf.gpus == std::vector<int32_t>{2});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_2:1", "mlx5_3:1"});
  CHECK(has(conf.nccl, "# GPU 2 (0035:03:00.0): mlx5_2, mlx5_3 (NODE, on NUMA node 8)"));
}

TEST_CASE("coral-lassen: CUDA_VISIBLE_DEVICES is used when NVIDIA_VISIBLE_DEVICES is unset") {
  RdmaConf conf = build(load("coral-lassen.xml"), {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"});
  conf = build(load("coral-lassen.xml"), {{"NVIDIA_VISIBLE_DEVICES", "1,3"}});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"});
}

TEST_CASE("a GPU UUID unknown to hwloc is resolved through /proc/driver/nvidia") {
  TempDir proc;
  fs::create_directories(proc.path() + "/driver/nvidia/gpus/0000:84:00.0");
  std::ofstream(proc.path() + "/driver/nvidia/gpus/0000:84:00.0/information")
      << "Model: \t\t Tesla K40m\nGPU UUID: \t GPU-5a2c7f5e-0000-1111-2222-333344445555\n"
         "Bus Location: \t 0000:84:00.0\n";
  std::vector<std::string> bus_ids;
  auto uuids = readNvidiaProcGpus(proc.path(), &bus_ids);
  CHECK(bus_ids == std::vector<std::string>{"0000:84:00.0"});
  RdmaConf conf = build(load("32em64t-2n8c2t-pci-normalio.xml"),
                        {{"NVIDIA_VISIBLE_DEVICES", "GPU-5a2c7f5e-0000-1111-2222-333344445555"}},
                        uuids);
  CHECK(conf.gpus == std::vector<int32_t>{2});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_0:1"});
  CHECK(has(conf.nccl, "mlx5_0 (PIX, behind PCIe switch 0000:80:03.0)"));
}

TEST_CASE("an unknown GPU token is noted in the file, not fatal") {
  RdmaConf conf = build(load("cts1-pascal.xml"), {{"NVIDIA_VISIBLE_DEVICES", "7,MIG-abc"}});
  CHECK(conf.gpus.empty());
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_0:1"});
  CHECK(has(conf.nccl, "# note: NVIDIA_VISIBLE_DEVICES: GPU \"7\" not found"));
}

TEST_CASE("the RDMA devices named by the pod's env limit the choice") {
  Topology lassen = load("coral-lassen.xml");
  RdmaConf conf = build(lassen, {{"NVIDIA_VISIBLE_DEVICES", "0"}, {"MUSTER_RDMA_DEVICES", "mlx5_3"}});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_3:1"});  // the only one the pod has
  conf = build(lassen, {{"NVIDIA_VISIBLE_DEVICES", "0"},
                        {"PCIDEVICE_NVIDIA_COM_RDMA", "0003:01:00.1,0033:01:00.0"}});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_1:1"});
}

TEST_CASE("without RDMA NICs NCCL uses sockets and UCX TCP") {
  RdmaConf conf = build(load("96em64t-4n4d3ca2co-pci.xml"), {});
  CHECK(conf.hcas.empty());
  CHECK(has(conf.nccl, "NCCL_IB_DISABLE='1'"));
  CHECK_FALSE(has(conf.nccl, "NCCL_IB_HCA"));
  CHECK(has(conf.ucx, "UCX_TLS='tcp,sm,self'"));
  TempDir dir;
  CHECK(sourced("sh", write(dir, "nccl.conf", conf.nccl), "NCCL_IB_DISABLE") == "1");
}

TEST_CASE("a NIC whose ports are all down is skipped") {
  Topology t = testing::node().gpu(0, "sw", 0).nic("mlx5_0", "sw", 0, LinkLayer::kInfiniBand, "DOWN")
                   .nic("mlx5_1", "", 0).build();
  RdmaConf conf = build(t, {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(conf.hcas == std::vector<std::string>{"mlx5_1:1"});
  CHECK(has(conf.nccl, "# note: mlx5_0: no ACTIVE port; skipped"));
}

TEST_CASE("NCCL_IB_HCA asks for exact names when one is a prefix of another device") {
  Topology t = testing::node().gpu(0, "sw", 0).nic("mlx5_1", "sw", 0).nic("mlx5_10", "x", 1).build();
  RdmaConf conf = build(t, {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(has(conf.nccl, "NCCL_IB_HCA='=mlx5_1:1'"));
  CHECK(has(conf.ucx, "UCX_NET_DEVICES='mlx5_1:1'"));
}

// A RoCE port in a sysfs tree shaped like the kernel's: GID 5 is the RoCE v2 IPv4 one.
std::string fakeRoceSysfs(const TempDir& dir) {
  const std::string root = dir.path() + "/sys";
  const std::string pci = root + "/devices/pci0000:00/0000:00:03.0/0000:08:00.0";
  const std::string dev = root + "/class/infiniband/mlx5_0";
  fs::create_directories(pci + "/net/enp8s0f0");
  fs::create_directories(dev + "/ports/1/gids");
  fs::create_directories(dev + "/ports/1/gid_attrs/types");
  fs::create_directory_symlink(pci, dev + "/device");
  std::ofstream(dev + "/node_guid") << "ec0d:9a03:0067:fdd4\n";
  std::ofstream(dev + "/ports/1/state") << "4: ACTIVE\n";
  std::ofstream(dev + "/ports/1/link_layer") << "Ethernet\n";
  std::ofstream(dev + "/ports/1/rate") << "100 Gb/sec (4X EDR)\n";
  const char* types[] = {"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"};
  const char* gids[] = {"fe80:0000:0000:0000:ee0d:9aff:fe67:fdd4",
                        "fe80:0000:0000:0000:ee0d:9aff:fe67:fdd4",
                        "fd00:0000:0000:0000:0000:0000:0000:0001",
                        "fd00:0000:0000:0000:0000:0000:0000:0001",
                        "0000:0000:0000:0000:0000:ffff:0a00:0001",
                        "0000:0000:0000:0000:0000:ffff:0a00:0001"};
  for (int i = 0; i < 6; ++i) {
    std::ofstream(dev + "/ports/1/gid_attrs/types/" + std::to_string(i)) << types[i] << "\n";
    std::ofstream(dev + "/ports/1/gids/" + std::to_string(i)) << gids[i] << "\n";
  }
  return root;
}

TEST_CASE("RoCE: the RoCE v2 IPv4 GID index read from sysfs goes to NCCL and UCX") {
  TempDir dir;
  Topology t = load("cts1-pascal.xml", fakeRoceSysfs(dir));
  REQUIRE(t.rdma_nics.size() == 1);
  CHECK(t.rdma_nics[0].link_layer == LinkLayer::kEthernet);
  CHECK(t.rdma_nics[0].ports[0].rate_gbps == 100);
  RdmaConf conf = build(t, {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(conf.roce);
  CHECK(conf.gid_index == 5);
  CHECK(has(conf.nccl, "NCCL_IB_GID_INDEX='5'"));
  CHECK(has(conf.ucx, "UCX_IB_GID_INDEX='5'"));
  TempDir out;
  CHECK(sourced("bash", write(out, "nccl.conf", conf.nccl), "NCCL_IB_GID_INDEX") == "5");
}

TEST_CASE("RoCE without a readable GID table falls back to GID index 3, and says so") {
  Topology t = testing::node().gpu(0, "sw", 0).nic("mlx5_0", "sw", 0, LinkLayer::kEthernet).build();
  RdmaConf conf = build(t, {{"NVIDIA_VISIBLE_DEVICES", "0"}});
  CHECK(conf.gid_index == 3);
  CHECK(has(conf.nccl, "NCCL_IB_GID_INDEX='3'"));
  CHECK(has(conf.nccl, "# note: RoCE v2 IPv4 GID index not readable"));
}

TEST_CASE("values are single-quoted so any text survives sourcing") {
  CHECK(shellQuote("a'b") == "'a'\\''b'");
  TempDir dir;
  const std::string file = write(dir, "q.conf", shellDefault("NCCL_SOCKET_IFNAME", "it's $HOME `x`"));
  CHECK(sourced("sh", file, "NCCL_SOCKET_IFNAME") == "it's $HOME `x`");
  CHECK(sourced("bash", file, "NCCL_SOCKET_IFNAME") == "it's $HOME `x`");
}

TEST_CASE("a comment line escapes control characters and backslashes") {
  CHECK(shellComment("plain text") == "# plain text\n");
  CHECK(shellComment("a\nb\\c\x7f\r\td") == "# a\\x0ab\\\\c\\x7f\\x0d\\x09d\n");
}

// What a user may put into main's env (the init container copies MUSTER_RDMA_DEVICES as written;
// the GPU variables come from the device plugin or the user): newlines, command substitutions,
// backticks and quotes of both kinds.
TEST_CASE("hostile text in the pod's env runs nothing when the files are sourced") {
  TempDir dir;
  const std::string mark = dir.path() + "/ran";
  const std::string hostile = "mlx5_0\ntouch " + mark + "-newline\n$(touch " + mark +
                              "-dollar)`touch " + mark + "-backtick`'\"; touch " + mark +
                              "-quote\r\ntouch " + mark + "-cr";
  RdmaConf conf = build(load("cts1-pascal.xml"),
                        {{"NVIDIA_VISIBLE_DEVICES", "GPU-x\ntouch " + mark + "-gpu"},
                         {"MUSTER_RDMA_DEVICES", hostile}});
  // The hostile text is quoted in the notes, escaped: each note is one comment line.
  CHECK(has(conf.nccl, "# note: MUSTER_RDMA_DEVICES: mlx5_0\\x0atouch "));
  CHECK(has(conf.nccl, "# note: NVIDIA_VISIBLE_DEVICES: GPU \"GPU-x\\x0atouch "));
  for (const std::string* text : {&conf.nccl, &conf.ucx}) {
    size_t start = 0;
    while (start < text->size()) {
      const size_t end = text->find('\n', start);
      const std::string line = text->substr(start, end - start);
      INFO(line);
      // Only comments, `[ -n "${X:-}" ] || X='...'` and `export X`.
      CHECK((line.rfind("# ", 0) == 0 || line.rfind("[ -n \"${", 0) == 0 ||
             line.rfind("export ", 0) == 0));
      CHECK(line.find('\r') == std::string::npos);
      start = end == std::string::npos ? text->size() : end + 1;
    }
  }
  const std::string nccl = write(dir, "nccl.conf", conf.nccl);
  const std::string ucx = write(dir, "ucx.conf", conf.ucx);
  for (const std::string shell : {"sh", "bash"}) {
    INFO(shell);
    CHECK(sourced(shell, nccl, "NCCL_IB_DISABLE") == "1");  // the only NIC was not the pod's
    CHECK(sourced(shell, ucx, "UCX_TLS") == "tcp,sm,self");
  }
  for (const std::string suffix : {"-newline", "-dollar", "-backtick", "-quote", "-cr", "-gpu"}) {
    INFO(suffix);
    CHECK_FALSE(fs::exists(mark + suffix));
  }
}

TEST_CASE("any value, newlines and quotes included, round-trips through a sourced assignment") {
  TempDir dir;
  const std::string mark = dir.path() + "/ran";
  const std::string value = "a\nb $(touch " + mark + ") `touch " + mark + "` 'single' \"double\" \\ "
                            "\t\r\x01 ${HOME} ; exit 3\n";
  const std::string file = write(dir, "v.conf", shellDefault("NCCL_SOCKET_IFNAME", value));
  for (const std::string shell : {"sh", "bash"}) {
    INFO(shell);
    CHECK(sourced(shell, file, "NCCL_SOCKET_IFNAME") == value);
  }
  CHECK_FALSE(fs::exists(mark));
}

TEST_CASE("the pod's primary interface comes from the default route") {
  TempDir proc;
  fs::create_directories(proc.path() + "/net");
  std::ofstream(proc.path() + "/net/route")
      << "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "net1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
         "eth0\t00000000\t0100F40A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
  CHECK(defaultRouteInterface(proc.path()) == "eth0");
  CHECK(defaultRouteInterface(proc.path() + "/missing").empty());
}

TEST_CASE("muster-topology rdma-conf writes the files named by RDMA_NCCL_CONF and RDMA_UCX_CONF") {
  TempDir dir, proc;
  const std::string nccl = dir.path() + "/etc/muster/nccl.conf";
  const std::string ucx = dir.path() + "/etc/muster/ucx.conf";
  auto r = run({MUSTER_TOPOLOGY_BIN, "rdma-conf", "--hwloc-xml", fixture("cts1-pascal.xml"),
                "--proc-root", proc.path(), "--socket-ifname", "eth0"},
               {{"RDMA_NCCL_CONF", nccl},
                {"RDMA_UCX_CONF", ucx},
                {"NVIDIA_VISIBLE_DEVICES", "GPU-fa7cef9c-220f-b6d7-1bb6-ea1e99d3ad0a"},
                {"CUDA_VISIBLE_DEVICES", testing::kUnset},
                {"MUSTER_RDMA_DEVICES", testing::kUnset}});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(sourced("sh", nccl, "NCCL_IB_HCA") == "mlx5_0:1");
  CHECK(sourced("bash", ucx, "UCX_NET_DEVICES") == "mlx5_0:1");
  std::ifstream in(nccl);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(has(text, "GPUs: 1 (0000:07:00.0)"));
  // The seed's own line works verbatim.
  auto seed = run({"sh", "-c", "[ -f \"$RDMA_NCCL_CONF\" ] && . \"$RDMA_NCCL_CONF\"; echo $NCCL_IB_HCA"},
                  {{"RDMA_NCCL_CONF", nccl}, {"NCCL_IB_HCA", testing::kUnset}});
  CHECK(seed.out == "mlx5_0:1\n");
}

}  // namespace
}  // namespace muster::topology
