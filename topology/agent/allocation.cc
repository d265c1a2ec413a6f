#include "topology/agent/allocation.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "topology/agent/rdma_conf.h"

namespace muster::topology {
namespace {

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Accounts for one resource: the devices containers hold and, when the kubelet reports the
// resource, the devices it can hand out. False (with a note) when an id names no device.
template <class Key, class MapFn>
bool account(const std::string& resource, const std::string& kind, const DeviceAllocations& in,
             MapFn map, std::set<Key>* held, std::optional<std::set<Key>>* allocatable,
             std::vector<std::string>* notes) {
  if (resource.empty()) {
    notes->push_back(absl::StrCat("no resource name given for ", kind, "; free ", kind,
                                  " not published"));
    return false;
  }
  std::set<std::string> unknown;
  auto add = [&](const std::string& id, std::set<Key>* into) {
    if (std::optional<Key> key = map(id)) {
      into->insert(*key);
    } else {
      unknown.insert(id);
    }
  };
  for (const ResourceDevices& r : in.allocated) {
    if (r.resource_name != resource) continue;
    for (const std::string& id : r.device_ids) add(id, held);
  }
  if (in.allocatable) {
    for (const ResourceDevices& r : *in.allocatable) {
      if (r.resource_name != resource) continue;
      if (!allocatable->has_value()) allocatable->emplace();
      for (const std::string& id : r.device_ids) add(id, &**allocatable);
    }
  }
  if (unknown.empty()) return true;
  std::vector<std::string> shown;
  for (const std::string& id : unknown) {
    if (shown.size() == 3) break;
    shown.push_back(absl::StrCat("\"", id, "\""));
  }
  std::string more;
  if (unknown.size() > shown.size()) {
    more = absl::StrCat(" and ", unknown.size() - shown.size(), " more");
  }
  notes->push_back(absl::StrCat(resource, " device ids ", absl::StrJoin(shown, ", "), more,
                                " name none of the node's ", kind, "; free ", kind,
                                " not published"));
  return false;
}

}  // namespace

std::optional<int32_t> mapGpuId(const Topology& topology, std::string_view id,
                                const std::map<std::string, std::string>& gpu_uuid_to_bus) {
  if (id.empty()) return std::nullopt;
  for (const Gpu& g : topology.gpus) {
    if (!g.uuid.empty() && equalsIgnoreCase(g.uuid, id)) return g.index;
  }
  if (allDigits(id) && id.size() <= 9) {
    int32_t index = 0;
    std::from_chars(id.data(), id.data() + id.size(), index);
    if (topology.findGpu(index) != nullptr) return index;
  }
  // A PCI address (AMD's device plugin names GPUs by theirs).
  if (id.find(':') != std::string_view::npos) {
    const std::string bus = normalizeBusId(std::string(id));
    for (const Gpu& g : topology.gpus) {
      if (!g.bus_id.empty() && g.bus_id == bus) return g.index;
    }
  }
  for (const auto& [uuid, bus] : gpu_uuid_to_bus) {
    if (!equalsIgnoreCase(uuid, id)) continue;
    const std::string want = normalizeBusId(bus);
    for (const Gpu& g : topology.gpus) {
      if (!g.bus_id.empty() && normalizeBusId(g.bus_id) == want) return g.index;
    }
  }
  return std::nullopt;
}

std::optional<std::string> mapRdmaId(const Topology& topology, std::string_view id) {
  if (id.empty()) return std::nullopt;
  if (const RdmaNic* nic = topology.findNic(id)) return nic->name;
  const std::string bus = normalizeBusId(std::string(id));
  for (const RdmaNic& n : topology.rdma_nics) {
    if (!n.bus_id.empty() && normalizeBusId(n.bus_id) == bus) return n.name;
  }
  return std::nullopt;
}

std::optional<FreeDevices> freeDevices(const Topology& topology,
                                       const DeviceAllocations& allocations,
                                       const DeviceMapping& mapping,
                                       std::vector<std::string>* notes) {
  std::vector<std::string> ignored;
  if (notes == nullptr) notes = &ignored;
  FreeDevices free;

  std::set<int32_t> held_gpus;
  std::optional<std::set<int32_t>> allocatable_gpus;
  free.gpus_known = account(
      mapping.gpu_resource, "GPUs", allocations,
      [&](const std::string& id) { return mapGpuId(topology, id, mapping.gpu_uuid_to_bus); },
      &held_gpus, &allocatable_gpus, notes);
  for (const Gpu& g : topology.gpus) {
    const bool usable = !free.gpus_known ||
                        (!held_gpus.contains(g.index) &&
                         (!allocatable_gpus || allocatable_gpus->contains(g.index)));
    if (usable) free.gpus.push_back(g.index);
  }

  std::set<std::string> held_nics;
  std::optional<std::set<std::string>> allocatable_nics;
  free.rdma_nics_known = account(
      mapping.rdma_resource, "RDMA NICs", allocations,
      [&](const std::string& id) { return mapRdmaId(topology, id); }, &held_nics,
      &allocatable_nics, notes);
  for (const RdmaNic& n : topology.rdma_nics) {
    const bool usable = !free.rdma_nics_known ||
                        (!held_nics.contains(n.name) &&
                         (!allocatable_nics || allocatable_nics->contains(n.name)));
    if (usable) free.rdma_nics.push_back(n.name);
  }

  if (!free.gpus_known && !free.rdma_nics_known) return std::nullopt;
  return free;
}

}  // namespace muster::topology
