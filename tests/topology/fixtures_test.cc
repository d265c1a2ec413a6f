// Discovery against expectations written by hand from `lstopo-no-graphics --input F -v` for every
// real hwloc export in tests/topology/testdata/hwloc (tests/topology/testdata/expected/<F>.json,
// see SOURCES.md): NUMA nodes, GPUs (vendor, NUMA set, socket, PCI bridge chain), RDMA NICs (kind,
// NUMA set, bridge chain), and the path between every GPU and NIC. The expectations were read
// off the exports, not off Muster's output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "proto/json.h"
#include "topology/discovery/discovery.h"
#include "topology/model/affinity.h"

namespace muster::topology {
namespace {

namespace fs = std::filesystem;

const fs::path kTestdata = MUSTER_TOPOLOGY_TESTDATA;

std::vector<fs::path> expectationFiles() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kTestdata / "expected")) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int32_t> ints(const rapidjson::Value& v) {
  std::vector<int32_t> out;
  for (const auto& i : v.GetArray()) out.push_back(i.GetInt());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> strings(const rapidjson::Value& v) {
  std::vector<std::string> out;
  for (const auto& s : v.GetArray()) out.push_back(s.GetString());
  return out;
}

const rapidjson::Value* field(const rapidjson::Value& v, const char* name) {
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

// The expectations give the Package at or above the device's nearest CPU-side object, else null.
// Muster also takes the machine's only Package for a device attached above it (one socket: the
// device cannot be on another).
int32_t packageOf(const rapidjson::Value& doc, const rapidjson::Value& v) {
  const rapidjson::Value* p = field(v, "package");
  if (p != nullptr && !p->IsNull()) return p->GetInt();
  const auto packages = doc["packages"].GetArray();
  return packages.Size() == 1 ? packages[0]["os"].GetInt() : -1;
}

// The bridges from the top down to the device's parent: the PIX switch is the one above the
// downstream port (second from the bottom), or the only one; the root port is the top.
void checkBridges(const Place& place, const rapidjson::Value& v) {
  const rapidjson::Value* b = field(v, "bridges");
  REQUIRE(b != nullptr);
  const std::vector<std::string> bridges = strings(*b);
  if (bridges.empty()) {
    CHECK(place.pcie_switch.empty());
    CHECK(place.pcie_root.empty());
    return;
  }
  CHECK(place.pcie_root == bridges.front());
  CHECK(place.pcie_switch == (bridges.size() >= 2 ? bridges[bridges.size() - 2] : bridges[0]));
}

std::string ncclName(std::string expected) { return expected == "SOCKET" ? "SOC" : expected; }

TEST_CASE("every real hwloc export matches the expectations written from lstopo") {
  const std::vector<fs::path> files = expectationFiles();
  REQUIRE(files.size() >= 8);
  for (const fs::path& file : files) {
    const std::string name = file.stem().string();
    INFO(name);
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    absl::StatusOr<rapidjson::Document> doc = proto::parseJson(text);
    REQUIRE(doc.ok());
    DiscoveryOptions options;
    options.hwloc_xml = (kTestdata / "hwloc" / (name + ".xml")).string();
    REQUIRE(fs::exists(options.hwloc_xml));
    absl::StatusOr<Topology> t = discover(options);
    REQUIRE(t.ok());

    std::vector<int32_t> numa_want, numa_got;
    for (const auto& n : (*doc)["numaNodes"].GetArray()) {
      numa_want.push_back(n["os"].GetInt());
      const NumaNode* got = nullptr;
      for (const NumaNode& m : t->numa_nodes) {
        if (m.id == n["os"].GetInt()) got = &m;
      }
      REQUIRE(got != nullptr);
      CHECK(got->cpus == n["cpus"].GetString());
    }
    for (const NumaNode& m : t->numa_nodes) numa_got.push_back(m.id);
    std::sort(numa_want.begin(), numa_want.end());
    CHECK(numa_got == numa_want);

    std::map<std::string, const Gpu*> gpus;
    for (const Gpu& g : t->gpus) gpus[g.bus_id] = &g;
    std::set<std::string> gpu_want;
    for (const auto& e : (*doc)["gpus"].GetArray()) {
      const std::string bus = e["busId"].GetString();
      INFO("GPU " << bus);
      gpu_want.insert(bus);
      if (!gpus.contains(bus)) {
        FAIL_CHECK("not discovered");
        continue;
      }
      const Gpu& g = *gpus[bus];
      CHECK(g.vendor == e["vendor"].GetString());
      CHECK(g.numa_nodes == ints(e["numa"]));
      CHECK(g.package == packageOf(*doc, e));
      checkBridges(g, e);
    }
    std::set<std::string> gpu_got;
    for (const auto& [bus, g] : gpus) gpu_got.insert(bus);
    CHECK(gpu_got == gpu_want);

    std::set<std::string> nic_want, nic_got;
    for (const auto& e : (*doc)["nics"].GetArray()) {
      const std::string os = e["osDevice"].GetString();
      INFO("NIC " << os);
      nic_want.insert(os);
      const RdmaNic* n = t->findNic(os);
      if (n == nullptr) {
        FAIL_CHECK("not discovered");
        continue;
      }
      CHECK(n->bus_id == e["busId"].GetString());
      CHECK(std::string(nicKindName(n->kind)) == e["kind"].GetString());
      CHECK(n->numa_nodes == ints(e["numa"]));
      CHECK(n->package == packageOf(*doc, e));
      checkBridges(*n, e);
    }
    for (const RdmaNic& n : t->rdma_nics) nic_got.insert(n.name);
    CHECK(nic_got == nic_want);

    size_t pairs = 0;
    for (const auto& d : (*doc)["distances"].GetObject()) {
      const std::string key = d.name.GetString();
      const size_t bar = key.find('|');
      REQUIRE(bar != std::string::npos);
      const std::string bus = key.substr(0, bar), nic = key.substr(bar + 1);
      INFO(key);
      if (!gpus.contains(bus)) continue;  // reported above
      CHECK(std::string(pathName(pathBetween(*t, gpus[bus]->index, nic))) ==
            ncclName(d.value.GetString()));
      ++pairs;
    }
    CHECK(pairs == t->gpus.size() * t->rdma_nics.size());
  }
}

}  // namespace
}  // namespace muster::topology
