#include "scheduler/devices.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/strings.h"

namespace muster::scheduler {
namespace {

using topology::Alignment;
using topology::DeviceRequest;
using topology::DeviceSelection;
using topology::FreeDevices;

// A NIC none of whose ports can carry traffic (all known and not ACTIVE) is no use to a pod.
topology::Topology withoutDeadNics(topology::Topology t) {
  std::erase_if(t.rdma_nics, [](const topology::RdmaNic& nic) {
    return !nic.ports.empty() &&
           std::none_of(nic.ports.begin(), nic.ports.end(),
                        [](const topology::RdmaPort& p) { return p.usable(); });
  });
  if (t.allocatable) {
    std::erase_if(t.allocatable->rdma_nics, [&](const std::string& name) { return !t.findNic(name); });
    std::erase_if(t.allocatable->gpus, [&](int32_t index) { return !t.findGpu(index); });
  }
  return t;
}

void take(FreeDevices* free, const DeviceSelection& sel) {
  std::erase_if(free->gpus, [&](int32_t g) {
    return std::find(sel.gpus.begin(), sel.gpus.end(), g) != sel.gpus.end();
  });
  std::erase_if(free->rdma_nics, [&](const std::string& n) {
    return std::find(sel.rdma_nics.begin(), sel.rdma_nics.end(), n) != sel.rdma_nics.end();
  });
}

std::string shapeKeyOf(const topology::Topology& t) {
  std::string key = "g";
  for (const auto& g : t.gpus) absl::StrAppend(&key, ",", g.index);
  key += ";n";
  for (const auto& n : t.rdma_nics) absl::StrAppend(&key, ",", n.name);
  for (const auto& group : t.groups) {
    absl::StrAppend(&key, ";", av(topology::groupKindName(group.kind)), ":");
    for (int32_t g : group.gpus) absl::StrAppend(&key, g, ",");
    key += "/";
    for (const std::string& n : group.rdma_nics) absl::StrAppend(&key, n, ",");
  }
  if (t.allocatable) {
    key += ";free:";
    for (int32_t g : t.allocatable->gpus) absl::StrAppend(&key, g, ",");
    key += "/";
    for (const std::string& n : t.allocatable->rdma_nics) absl::StrAppend(&key, n, ",");
  }
  return key;
}

uint64_t memoKey(const DeviceRequest& r, int64_t used_gpus, int64_t used_nics) {
  auto b = [](int64_t v) { return static_cast<uint64_t>(std::clamp<int64_t>(v, 0, 0xffff)); };
  return b(r.gpus) << 48 | b(r.rdma_nics) << 32 | b(used_gpus) << 16 | b(used_nics);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const NodeDevices>> NodeDevices::fromNodeTopology(
    const proto::NodeTopology& object) {
  absl::StatusOr<topology::Topology> t = topology::fromNodeTopology(object);
  if (!t.ok()) return t.status();
  return std::make_shared<const NodeDevices>(std::move(*t));
}

NodeDevices::NodeDevices(topology::Topology topology)
    : topology_(withoutDeadNics(std::move(topology))),
      locality_(topology_),
      shape_key_(shapeKeyOf(topology_)) {}

AlignedCapacity NodeDevices::alignedCapacity(const DeviceRequest& per_pod, int64_t used_gpus,
                                             int64_t used_nics) const {
  if (per_pod.gpus <= 0 || per_pod.rdma_nics <= 0) return {};
  const uint64_t key = memoKey(per_pod, used_gpus, used_nics);
  {
    std::lock_guard lock(mu_);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  }
  AlignedCapacity c = compute(per_pod, used_gpus, used_nics);
  std::lock_guard lock(mu_);
  memo_.emplace(key, c);
  return c;
}

AlignedCapacity NodeDevices::compute(const DeviceRequest& per_pod, int64_t used_gpus,
                                     int64_t used_nics) const {
  FreeDevices free;
  int64_t unseen_gpus = used_gpus, unseen_nics = used_nics;
  if (topology_.allocatable) {
    // The agent's view, less what pods it has not seen yet hold.
    free.gpus = topology_.allocatable->gpus;
    free.rdma_nics = topology_.allocatable->rdma_nics;
    unseen_gpus -= gpuCount() - static_cast<int64_t>(free.gpus.size());
    unseen_nics -= nicCount() - static_cast<int64_t>(free.rdma_nics.size());
  } else {
    for (const auto& g : topology_.gpus) free.gpus.push_back(g.index);
    for (const auto& n : topology_.rdma_nics) free.rdma_nics.push_back(n.name);
  }
  unseen_gpus = std::max<int64_t>(0, unseen_gpus);
  unseen_nics = std::max<int64_t>(0, unseen_nics);
  if (unseen_gpus > 0 || unseen_nics > 0) {
    if (unseen_gpus > static_cast<int64_t>(free.gpus.size()) ||
        unseen_nics > static_cast<int64_t>(free.rdma_nics.size())) {
      return {};  // more in use than the node has: nothing can be aligned
    }
    std::optional<DeviceSelection> held = locality_.select(
        DeviceRequest{static_cast<int32_t>(unseen_gpus), static_cast<int32_t>(unseen_nics)},
        &free);
    if (!held) return {};
    take(&free, *held);
  }
  AlignedCapacity c;
  while (true) {
    std::optional<DeviceSelection> sel = locality_.select(per_pod, &free);
    if (!sel) break;
    if (sel->alignment > Alignment::kNUMANode) break;  // best first: nothing after is either
    if (sel->alignment == Alignment::kPCIeSwitch) ++c.pix;
    if (sel->alignment <= Alignment::kPCIeHierarchy) ++c.pcie;
    ++c.numa;
    take(&free, *sel);
  }
  return c;
}

absl::StatusOr<GpuNicAffinity> parseGpuNicAffinity(std::string_view value) {
  if (value == "required") return GpuNicAffinity::kRequired;
  if (value == "preferred") return GpuNicAffinity::kPreferred;
  return absl::InvalidArgumentError(absl::StrCat("annotation ", av(vocab::kGpuNicAffinityAnnotation),
                                                 " must be \"required\" or \"preferred\", got \"",
                                                 av(value), "\""));
}

}  // namespace muster::scheduler
