// The libibverbs implementation of VerbsProvider.
#include <infiniband/verbs.h>

#include <endian.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/log.h"
#include "topology/discovery/verbs.h"

namespace muster::topology {
namespace {

std::string portStateName(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "";
}

// Nominal Gb/s: lanes x per-lane signalling rate, as /sys/class/infiniband/*/ports/*/rate shows.
double rateGbps(uint8_t width, uint8_t speed) {
  double lanes = 0;
  switch (width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  double lane = 0;
  switch (speed) {
    case 1: lane = 2.5; break;    // SDR
    case 2: lane = 5; break;      // DDR
    case 4: lane = 10; break;     // QDR
    case 8: lane = 10; break;     // FDR10
    case 16: lane = 14; break;    // FDR
    case 32: lane = 25; break;    // EDR
    case 64: lane = 50; break;    // HDR
    case 128: lane = 100; break;  // NDR
    default: return 0;
  }
  return lanes * lane;
}

std::string gidText(const ibv_gid& gid) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    out += absl::StrFormat("%02x%02x", gid.raw[i], gid.raw[i + 1]);
  }
  return out;
}

std::string guidText(__be64 guid_be) {
  const uint64_t g = be64toh(guid_be);
  return absl::StrFormat("%04x:%04x:%04x:%04x", (g >> 48) & 0xffff, (g >> 32) & 0xffff,
                         (g >> 16) & 0xffff, g & 0xffff);
}

bool ipv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

class IbverbsProvider : public VerbsProvider {
 public:
  std::string name() const override { return "libibverbs"; }

  absl::StatusOr<std::vector<RdmaDeviceInfo>> devices() override {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("libibverbs: cannot list devices: ", std::strerror(errno)));
    }
    std::vector<RdmaDeviceInfo> out;
    for (int i = 0; i < count; ++i) out.push_back(readDevice(list[i]));
    ibv_free_device_list(list);
    if (out.empty()) return absl::NotFoundError("libibverbs sees no RDMA devices");
    return out;
  }

 private:
  static RdmaDeviceInfo readDevice(ibv_device* device) {
    RdmaDeviceInfo info;
    info.name = ibv_get_device_name(device);
    info.node_guid = guidText(ibv_get_device_guid(device));
    if (device->transport_type == IBV_TRANSPORT_IWARP) info.kind = NicKind::kIWARP;
    std::error_code ec;
    std::filesystem::path pci =
        std::filesystem::canonical(std::filesystem::path(device->ibdev_path) / "device", ec);
    if (!ec) {
      info.bus_id = pci.filename().string();
      std::error_code dec;
      if (std::filesystem::canonical(pci / "driver", dec).filename() == "efa" && !dec) {
        info.kind = NicKind::kEFA;
      }
      for (std::filesystem::directory_iterator it(pci / "net", ec), end; !ec && it != end;
           it.increment(ec)) {
        info.net_devices.push_back(it->path().filename().string());
      }
    }
    ibv_context* ctx = ibv_open_device(device);
    if (ctx == nullptr) {
      MUSTER_LOG_WARNING("Cannot open RDMA device; port facts come from sysfs or hwloc",
                         "device", info.name, "error", std::strerror(errno));
      return info;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) != 0) {
      MUSTER_LOG_WARNING("Cannot query RDMA device", "device", info.name, "error",
                         std::strerror(errno));
      ibv_close_device(ctx);
      return info;
    }
    for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pattr{};
      if (ibv_query_port(ctx, p, &pattr) != 0) continue;
      RdmaPort port;
      port.port = p;
      port.state = portStateName(pattr.state);
      // UNSPECIFIED: InfiniBand on an IB channel adapter (old kernels, as ibv_devinfo reads it);
      // on anything else (EFA's transport and node type are unspecified) not InfiniBand.
      const bool ib_adapter =
          device->transport_type == IBV_TRANSPORT_IB && device->node_type == IBV_NODE_CA;
      port.link_layer =
          pattr.link_layer == IBV_LINK_LAYER_ETHERNET       ? LinkLayer::kEthernet
          : pattr.link_layer == IBV_LINK_LAYER_INFINIBAND ||
                  (pattr.link_layer == IBV_LINK_LAYER_UNSPECIFIED && ib_adapter)
              ? LinkLayer::kInfiniBand
              : LinkLayer::kUnknown;
      port.rate_gbps = rateGbps(pattr.active_width, pattr.active_speed);
      ibv_gid gid{};
      if (ibv_query_gid(ctx, p, 0, &gid) == 0) {
        port.gid = gidText(gid);
        if (port.link_layer == LinkLayer::kInfiniBand) port.guid = port.gid.substr(20);
      }
      if (port.link_layer == LinkLayer::kEthernet) {
        for (int idx = 0; idx < pattr.gid_tbl_len; ++idx) {
          ibv_gid_entry entry{};
          if (ibv_query_gid_ex(ctx, p, idx, &entry, 0) != 0) continue;
          if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && ipv4Mapped(entry.gid)) {
            port.roce_v2_gid_index = idx;
            break;
          }
        }
      }
      info.ports.push_back(std::move(port));
    }
    ibv_close_device(ctx);
    return info;
  }
};

}  // namespace

VerbsProviderPtr makeIbverbsProvider() { return std::make_unique<IbverbsProvider>(); }

}  // namespace muster::topology
