#include "proto/nodetopology.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "proto/codec.h"


namespace muster::proto {

namespace resources {
const Resource kNodeTopologies{std::string(kNodeTopologyApiVersion), "nodetopologies", false};
}  // namespace resources

namespace {


absl::Status readInt32List(const rapidjson::Value& object, const JsonPath& path,
                           std::string_view name, std::vector<int32_t>* out) {
  out->clear();
  return forEachElement(object, path, name, [out](const rapidjson::Value& e, const JsonPath& p) {
    if (!e.IsInt()) return typeError(p, "integer");
    out->push_back(e.GetInt());
    return absl::OkStatus();
  });
}

absl::Status decodeNuma(const rapidjson::Value& v, const JsonPath& path,
                        NodeTopologyNumaNode* out) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "id", &out->id));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "cpus", &out->cpus));
  return readInt64(v, path, "memoryBytes", &out->memory_bytes);
}

// The place fields sit in the device object itself (numaNode first, as the first schema had it).
absl::Status decodePlace(const rapidjson::Value& v, const JsonPath& path, NodeTopologyPlace* out) {
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "numaNode", &out->numa_node));
  MUSTER_RETURN_IF_ERROR(readInt32List(v, path, "numaNodes", &out->numa_nodes));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "package", &out->package));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "pcieSwitch", &out->pcie_switch));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "pcieRoot", &out->pcie_root));
  return readString(v, path, "hostBridge", &out->host_bridge);
}

absl::Status decodeGpu(const rapidjson::Value& v, const JsonPath& path, NodeTopologyGpu* out) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "index", &out->index));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "busId", &out->bus_id));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "vendor", &out->vendor));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "model", &out->model));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "uuid", &out->uuid));
  MUSTER_RETURN_IF_ERROR(decodePlace(v, path, &out->place));
  MUSTER_RETURN_IF_ERROR(readStringList(v, path, "osDevices", &out->os_devices));
  return forEachElement(v, path, "nicPaths", [out](const rapidjson::Value& e, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(expectObject(e, p));
    NodeTopologyNicPath& np = out->nic_paths.emplace_back();
    MUSTER_RETURN_IF_ERROR(readString(e, p, "rdmaNic", &np.rdma_nic));
    return readString(e, p, "path", &np.path);
  });
}

absl::Status decodePort(const rapidjson::Value& v, const JsonPath& path,
                        NodeTopologyRdmaPort* out) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "port", &out->port));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "state", &out->state));
  MUSTER_RETURN_IF_ERROR(readDouble(v, path, "rateGbps", &out->rate_gbps));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "linkLayer", &out->link_layer));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "gid", &out->gid));
  return readString(v, path, "guid", &out->guid);
}

absl::Status decodeNic(const rapidjson::Value& v, const JsonPath& path,
                       NodeTopologyRdmaNic* out) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "busId", &out->bus_id));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "model", &out->model));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "nodeGuid", &out->node_guid));
  MUSTER_RETURN_IF_ERROR(decodePlace(v, path, &out->place));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "kind", &out->kind));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "linkLayer", &out->link_layer));
  MUSTER_RETURN_IF_ERROR(readStringList(v, path, "netDevices", &out->net_devices));
  return forEachElement(v, path, "ports", [out](const rapidjson::Value& e, const JsonPath& p) {
    return decodePort(e, p, &out->ports.emplace_back());
  });
}

absl::Status decodeGroup(const rapidjson::Value& v, const JsonPath& path,
                         NodeTopologyGroup* out) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "id", &out->id));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "kind", &out->kind));
  MUSTER_RETURN_IF_ERROR(readInt32List(v, path, "gpus", &out->gpus));
  return readStringList(v, path, "rdmaNics", &out->rdma_nics);
}

absl::Status decodeSpec(const rapidjson::Value& spec, const JsonPath& p, NodeTopologySpec* s) {
  MUSTER_RETURN_IF_ERROR(readString(spec, p, "nodeName", &s->node_name));
  MUSTER_RETURN_IF_ERROR(
      withObject(spec, p, "summary", [s](const rapidjson::Value& v, const JsonPath& vp) {
        MUSTER_RETURN_IF_ERROR(readInt32(v, vp, "gpus", &s->summary.gpus));
        MUSTER_RETURN_IF_ERROR(readInt32(v, vp, "rdmaNics", &s->summary.rdma_nics));
        MUSTER_RETURN_IF_ERROR(readString(v, vp, "gpuModel", &s->summary.gpu_model));
        return readString(v, vp, "linkLayer", &s->summary.link_layer);
      }));
  MUSTER_RETURN_IF_ERROR(
      forEachElement(spec, p, "numaNodes", [s](const rapidjson::Value& e, const JsonPath& ep) {
        return decodeNuma(e, ep, &s->numa_nodes.emplace_back());
      }));
  MUSTER_RETURN_IF_ERROR(
      forEachElement(spec, p, "gpus", [s](const rapidjson::Value& e, const JsonPath& ep) {
        return decodeGpu(e, ep, &s->gpus.emplace_back());
      }));
  MUSTER_RETURN_IF_ERROR(
      forEachElement(spec, p, "rdmaNics", [s](const rapidjson::Value& e, const JsonPath& ep) {
        return decodeNic(e, ep, &s->rdma_nics.emplace_back());
      }));
  MUSTER_RETURN_IF_ERROR(
      forEachElement(spec, p, "groups", [s](const rapidjson::Value& e, const JsonPath& ep) {
        return decodeGroup(e, ep, &s->groups.emplace_back());
      }));
  MUSTER_RETURN_IF_ERROR(
      withObject(spec, p, "allocatable", [s](const rapidjson::Value& v, const JsonPath& vp) {
        NodeTopologyAllocatable& a = s->allocatable.emplace();
        if (findField(v, "freeGpus") != nullptr) {
          MUSTER_RETURN_IF_ERROR(readInt32List(v, vp, "freeGpus", &a.free_gpus.emplace()));
        }
        if (findField(v, "freeRdmaNics") != nullptr) {
          return readStringList(v, vp, "freeRdmaNics", &a.free_rdma_nics.emplace());
        }
        return absl::OkStatus();
      }));
  return withObject(spec, p, "source", [s](const rapidjson::Value& v, const JsonPath& vp) {
    MUSTER_RETURN_IF_ERROR(readString(v, vp, "agentVersion", &s->source.agent_version));
    MUSTER_RETURN_IF_ERROR(readString(v, vp, "hwlocVersion", &s->source.hwloc_version));
    MUSTER_RETURN_IF_ERROR(readString(v, vp, "discoveredAt", &s->source.discovered_at));
    return readStringList(v, vp, "warnings", &s->source.warnings);
  });
}

// The shortest text that reads back as the same double ("100", "2.5").
std::string numberText(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "0";
  return std::string(buf, end);
}

void writeStringList(JsonWriter& w, std::string_view name, const std::vector<std::string>& list) {
  w.key(name).beginArray();
  for (const std::string& s : list) w.string(s);
  w.endArray();
}

void writeIntList(JsonWriter& w, std::string_view name, const std::vector<int32_t>& list) {
  w.key(name).beginArray();
  for (int32_t i : list) w.integer(i);
  w.endArray();
}

// Every field is written (strings empty rather than absent) except where the CRD constrains the
// value: busId has a pattern and linkLayer an enum, so an unknown one is left out (patches write
// null there). `for_patch` selects null over omission.
void writeOptionalString(JsonWriter& w, std::string_view name, std::string_view value,
                         bool for_patch) {
  if (!value.empty()) {
    w.stringField(name, value);
  } else if (for_patch) {
    w.key(name).null();
  }
}

void writePlace(JsonWriter& w, const NodeTopologyPlace& p) {
  w.integerField("numaNode", p.numa_node);
  writeIntList(w, "numaNodes", p.numa_nodes);
  w.integerField("package", p.package);
  w.stringField("pcieSwitch", p.pcie_switch).stringField("pcieRoot", p.pcie_root);
  w.stringField("hostBridge", p.host_bridge);
}

void writeSpec(JsonWriter& w, const NodeTopologySpec& s, bool for_patch) {
  w.beginObject();
  w.stringField("nodeName", s.node_name);
  w.key("summary").beginObject();
  w.integerField("gpus", s.summary.gpus).integerField("rdmaNics", s.summary.rdma_nics);
  writeOptionalString(w, "gpuModel", s.summary.gpu_model, for_patch);
  writeOptionalString(w, "linkLayer", s.summary.link_layer, for_patch);
  w.endObject();

  w.key("numaNodes").beginArray();
  for (const auto& n : s.numa_nodes) {
    w.beginObject().integerField("id", n.id).stringField("cpus", n.cpus);
    w.integerField("memoryBytes", n.memory_bytes).endObject();
  }
  w.endArray();

  w.key("gpus").beginArray();
  for (const auto& g : s.gpus) {
    w.beginObject().integerField("index", g.index);
    writeOptionalString(w, "busId", g.bus_id, false);
    w.stringField("vendor", g.vendor).stringField("model", g.model).stringField("uuid", g.uuid);
    writePlace(w, g.place);
    writeStringList(w, "osDevices", g.os_devices);
    w.key("nicPaths").beginArray();
    for (const auto& np : g.nic_paths) {
      w.beginObject().stringField("rdmaNic", np.rdma_nic).stringField("path", np.path).endObject();
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();

  w.key("rdmaNics").beginArray();
  for (const auto& n : s.rdma_nics) {
    w.beginObject().stringField("name", n.name);
    writeOptionalString(w, "busId", n.bus_id, false);
    w.stringField("model", n.model).stringField("nodeGuid", n.node_guid);
    writePlace(w, n.place);
    writeOptionalString(w, "kind", n.kind, false);
    writeOptionalString(w, "linkLayer", n.link_layer, false);
    writeStringList(w, "netDevices", n.net_devices);
    w.key("ports").beginArray();
    for (const auto& p : n.ports) {
      w.beginObject().integerField("port", p.port).stringField("state", p.state);
      if (p.rate_gbps > 0) w.key("rateGbps").raw(numberText(p.rate_gbps));
      writeOptionalString(w, "linkLayer", p.link_layer, false);
      w.stringField("gid", p.gid).stringField("guid", p.guid);
      w.endObject();
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();

  w.key("groups").beginArray();
  for (const auto& g : s.groups) {
    w.beginObject().stringField("id", g.id).stringField("kind", g.kind);
    writeIntList(w, "gpus", g.gpus);
    writeStringList(w, "rdmaNics", g.rdma_nics);
    w.endObject();
  }
  w.endArray();

  if (s.allocatable) {
    w.key("allocatable").beginObject();
    if (s.allocatable->free_gpus) {
      writeIntList(w, "freeGpus", *s.allocatable->free_gpus);
    } else if (for_patch) {
      w.key("freeGpus").null();
    }
    if (s.allocatable->free_rdma_nics) {
      writeStringList(w, "freeRdmaNics", *s.allocatable->free_rdma_nics);
    } else if (for_patch) {
      w.key("freeRdmaNics").null();
    }
    w.endObject();
  } else if (for_patch) {
    w.key("allocatable").null();
  }

  w.key("source").beginObject();
  w.stringField("agentVersion", s.source.agent_version);
  w.stringField("hwlocVersion", s.source.hwloc_version);
  writeOptionalString(w, "discoveredAt", s.source.discovered_at, for_patch);
  writeStringList(w, "warnings", s.source.warnings);
  w.endObject();
  w.endObject();
}

}  // namespace

bool sameFacts(const NodeTopologySpec& a, const NodeTopologySpec& b) {
  NodeTopologySpec a2 = a;
  a2.source.discovered_at = b.source.discovered_at;
  return a2 == b;
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeTopology* out) {
  *out = NodeTopology{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  if (const rapidjson::Value* meta = findField(v, "metadata"); meta != nullptr) {
    MUSTER_RETURN_IF_ERROR(decode(*meta, path.field("metadata"), &out->meta));
  }
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        return decodeSpec(spec, p, &out->spec);
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(
        readInt64(status, p, "observedGeneration", &out->status.observed_generation));
    return forEachElement(status, p, "conditions",
                          [out](const rapidjson::Value& e, const JsonPath& ep) {
                            return decode(e, ep, &out->status.conditions.emplace_back());
                          });
  });
}

absl::Status decode(const rapidjson::Value& v, NodeTopology* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decodeNodeTopologyJson(std::string_view json, NodeTopology* out) {
  absl::StatusOr<rapidjson::Document> doc = parseJson(json);
  if (!doc.ok()) return doc.status();
  return decode(*doc, out);
}

std::string encode(const NodeTopology& topology) {
  JsonWriter w;
  w.beginObject();
  w.stringField("apiVersion", kNodeTopologyApiVersion).stringField("kind", kNodeTopologyKind);
  w.key("metadata").beginObject().stringField("name", topology.meta.name);
  if (!topology.meta.labels.empty()) w.stringMapField("labels", topology.meta.labels);
  if (!topology.meta.annotations.empty()) {
    w.stringMapField("annotations", topology.meta.annotations);
  }
  w.endObject();
  w.key("spec");
  writeSpec(w, topology.spec, /*for_patch=*/false);
  w.endObject();
  return w.str();
}

std::string specPatch(const NodeTopologySpec& spec) {
  JsonWriter w;
  w.beginObject().key("spec");
  writeSpec(w, spec, /*for_patch=*/true);
  w.endObject();
  return w.str();
}

std::string statusPatch(const NodeTopologyStatus& status) {
  JsonWriter w;
  w.beginObject().key("status").beginObject();
  w.integerField("observedGeneration", status.observed_generation);
  writeConditions(w, status.conditions);
  w.endObject().endObject();
  return w.str();
}

}  // namespace muster::proto
