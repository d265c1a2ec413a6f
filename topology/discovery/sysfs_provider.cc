// The /sys/class/infiniband reader behind VerbsProvider.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "topology/discovery/verbs.h"

namespace muster::topology {
namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

// The first line of a small sysfs file, trimmed; "" when it cannot be read.
std::string readAttr(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string line;
  std::getline(in, line);
  return trim(line);
}

bool isPciAddress(const std::string& s) {
  static const std::regex kPci("^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$");
  return std::regex_match(s, kPci);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> sortedEntries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "fe80:0000:0000:0000:0011:7500:0077:cfc8" -> "0011:7500:0077:cfc8".
std::string guidOfGid(const std::string& gid) {
  if (gid.size() != 39) return "";
  return gid.substr(20);
}

class SysfsProvider : public VerbsProvider {
 public:
  explicit SysfsProvider(std::string root) : root_(std::move(root)) {}

  std::string name() const override { return absl::StrCat("sysfs:", root_); }

  absl::StatusOr<std::vector<RdmaDeviceInfo>> devices() override {
    const fs::path class_dir = fs::path(root_) / "class" / "infiniband";
    std::error_code ec;
    if (!fs::is_directory(class_dir, ec)) {
      return absl::NotFoundError(
          absl::StrCat(class_dir.string(), " does not exist: no RDMA devices in this sysfs"));
    }
    std::vector<RdmaDeviceInfo> out;
    for (const std::string& dev : sortedEntries(class_dir)) {
      out.push_back(readDevice(class_dir / dev, dev));
    }
    return out;
  }

 private:
  RdmaDeviceInfo readDevice(const fs::path& dir, const std::string& name) const {
    RdmaDeviceInfo info;
    info.name = name;
    info.node_guid = readAttr(dir / "node_guid");
    info.model = readAttr(dir / "hca_type");
    if (info.model.empty()) info.model = readAttr(dir / "board_id");
    std::error_code ec;
    fs::path device = fs::canonical(dir / "device", ec);
    const std::string node_type = readAttr(dir / "node_type");  // "1: CA", "4: RNIC"
    if (node_type.rfind("4:", 0) == 0) info.kind = NicKind::kIWARP;
    if (!ec && fs::canonical(device / "driver", ec).filename() == "efa" && !ec) {
      info.kind = NicKind::kEFA;
    }
    ec.clear();
    device = fs::canonical(dir / "device", ec);
    if (!ec && isPciAddress(device.filename().string())) {
      info.bus_id = lower(device.filename().string());
      const std::string numa = readAttr(device / "numa_node");
      int32_t n = -1;
      auto [nptr, nerr] = std::from_chars(numa.data(), numa.data() + numa.size(), n);
      if (nerr == std::errc() && nptr == numa.data() + numa.size() && n >= 0) info.numa_node = n;
      for (const std::string& net : sortedEntries(device / "net")) info.net_devices.push_back(net);
    }
    for (const std::string& p : sortedEntries(dir / "ports")) {
      int32_t number = 0;
      auto [ptr, perr] = std::from_chars(p.data(), p.data() + p.size(), number);
      if (perr != std::errc() || ptr != p.data() + p.size() || number < 1) continue;
      const fs::path pdir = dir / "ports" / p;
      RdmaPort port;
      port.port = number;
      port.state = parsePortState(readAttr(pdir / "state"));
      port.link_layer = parseLinkLayer(readAttr(pdir / "link_layer"));
      port.rate_gbps = parseRateGbps(readAttr(pdir / "rate"));
      port.gid = readAttr(pdir / "gids" / "0");
      if (port.link_layer == LinkLayer::kInfiniBand) port.guid = guidOfGid(port.gid);
      if (port.link_layer == LinkLayer::kEthernet) port.roce_v2_gid_index = roceV2Index(pdir);
      info.ports.push_back(std::move(port));
    }
    std::sort(info.ports.begin(), info.ports.end(),
              [](const RdmaPort& a, const RdmaPort& b) { return a.port < b.port; });
    return info;
  }

  // The first GID of type "RoCE v2" holding an IPv4-mapped address (what NCCL and UCX want).
  static int32_t roceV2Index(const fs::path& pdir) {
    for (int i = 0; i < 256; ++i) {
      const std::string type = readAttr(pdir / "gid_attrs" / "types" / std::to_string(i));
      if (type.empty() && i > 0 && !fs::exists(pdir / "gids" / std::to_string(i))) break;
      if (type != "RoCE v2") continue;
      const std::string gid = readAttr(pdir / "gids" / std::to_string(i));
      if (gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0) return i;
    }
    return -1;
  }

  std::string root_;
};

}  // namespace

std::string parsePortState(std::string_view text) {
  const size_t colon = text.find(':');
  std::string_view s = colon == std::string_view::npos ? text : text.substr(colon + 1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

double parseRateGbps(std::string_view text) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr == text.data() || v < 0) return 0;
  return v;
}

VerbsProviderPtr makeSysfsProvider(std::string sysfs_root) {
  return std::make_unique<SysfsProvider>(std::move(sysfs_root));
}

}  // namespace muster::topology
