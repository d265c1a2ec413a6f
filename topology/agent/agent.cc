#include "topology/agent/agent.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "proto/log.h"
#include "topology/agent/rdma_conf.h"

namespace muster::topology {
namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

proto::Request request(proto::Verb verb, std::string path, std::string body = "",
                       std::string content_type = "application/json") {
  proto::Request r;
  r.verb = verb;
  r.path = std::move(path);
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

std::string mergePatchType() { return std::string(proto::contentType(proto::PatchType::kMerge)); }

}  // namespace

std::string labelValue(std::string_view text) {
  std::string out;
  for (char c : text) out += (alnum(c) || c == '.' || c == '_' || c == '-') ? c : '-';
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && !alnum(out.front())) out.erase(out.begin());
  while (!out.empty() && !alnum(out.back())) out.pop_back();
  return out;
}

std::map<std::string, std::optional<std::string>> nodeLabels(const Topology& topology) {
  std::map<std::string, std::optional<std::string>> labels;
  labels[std::string(vocab::kLabelGpuCount)] = std::to_string(topology.gpus.size());
  labels[std::string(vocab::kLabelRdmaCount)] = std::to_string(topology.rdma_nics.size());
  const std::string model = labelValue(gpuModelSummary(topology));
  labels[std::string(vocab::kLabelGpuModel)] =
      model.empty() ? std::nullopt : std::optional<std::string>(model);
  const std::string link = labelValue(linkLayerSummary(topology));
  labels[std::string(vocab::kLabelRdmaLinkLayer)] =
      link.empty() ? std::nullopt : std::optional<std::string>(link);
  return labels;
}

proto::Condition discoveredCondition(const Topology& topology) {
  proto::Condition c;
  c.type = "Discovered";
  c.status = "True";
  c.reason = topology.warnings.empty() ? "Discovered" : "DiscoveredWithWarnings";
  c.message = absl::StrCat(topology.gpus.size(), " GPUs, ", topology.rdma_nics.size(),
                           " RDMA NICs, ", topology.numa_nodes.size(), " NUMA nodes");
  if (!topology.warnings.empty()) {
    absl::StrAppend(&c.message, "; ", topology.warnings.size(),
                    " warnings (see spec.source.warnings)");
  }
  return c;
}

std::string nowRfc3339() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

absl::StatusOr<PublishResult> publish(proto::Client& client, const Topology& topology,
                                      std::string_view node_name, std::string_view now) {
  PublishResult result;
  const proto::Resource& r = proto::resources::kNodeTopologies;
  proto::NodeTopology desired = toNodeTopology(topology, node_name, kAgentVersion, now);

  // 0. The Node must exist: a NodeTopology without its Node is ignored by the scheduler, and a
  // wrong node name (NODE_NAME not from the downward API) should fail loudly.
  const proto::Resource& nodes = proto::resources::kNodes;
  absl::StatusOr<std::string> node_json =
      client.callSync(request(proto::Verb::kGet, nodes.objectPath("", node_name)));
  if (!node_json.ok()) {
    if (proto::isNotFound(node_json.status())) {
      return absl::NotFoundError(absl::StrCat("node ", std::string(node_name),
                                              " does not exist; nothing published"));
    }
    return node_json.status();
  }
  proto::Node node;
  if (absl::Status s = proto::decodeJson(*node_json, &node); !s.ok()) return s;

  // 1. The object: create, or patch the spec when the facts differ.
  proto::NodeTopology current;
  absl::StatusOr<std::string> got =
      client.callSync(request(proto::Verb::kGet, r.objectPath("", node_name)));
  if (!got.ok() && !proto::isNotFound(got.status())) return got.status();
  if (!got.ok()) {
    absl::StatusOr<std::string> created =
        client.callSync(request(proto::Verb::kPost, r.collectionPath(), proto::encode(desired)));
    if (!created.ok()) return created.status();
    if (absl::Status s = proto::decodeNodeTopologyJson(*created, &current); !s.ok()) return s;
    result.created = true;
    MUSTER_LOG_INFO(2, "Created NodeTopology", "node", node_name, "gpus", topology.gpus.size(),
                    "rdmaNics", topology.rdma_nics.size());
  } else {
    if (absl::Status s = proto::decodeNodeTopologyJson(*got, &current); !s.ok()) return s;
    if (!proto::sameFacts(desired.spec, current.spec)) {
      absl::StatusOr<std::string> patched = client.callSync(
          request(proto::Verb::kPatch, r.objectPath("", node_name),
                  proto::specPatch(desired.spec), mergePatchType()));
      if (!patched.ok()) return patched.status();
      if (absl::Status s = proto::decodeNodeTopologyJson(*patched, &current); !s.ok()) return s;
      result.spec_updated = true;
      MUSTER_LOG_INFO(2, "Updated NodeTopology", "node", node_name, "gpus", topology.gpus.size(),
                      "rdmaNics", topology.rdma_nics.size());
    }
  }

  // 2. Status: the Discovered condition, written when it or the generation changed.
  proto::Condition want = discoveredCondition(topology);
  const proto::Condition* have = nullptr;
  for (const proto::Condition& c : current.status.conditions) {
    if (c.type == want.type) have = &c;
  }
  const bool same_condition = have != nullptr && have->status == want.status &&
                              have->reason == want.reason && have->message == want.message;
  if (!same_condition || current.status.observed_generation != current.meta.generation) {
    want.last_transition_time = (have != nullptr && have->status == want.status)
                                    ? have->last_transition_time
                                    : std::string(now);
    if (want.last_transition_time.empty()) want.last_transition_time = std::string(now);
    proto::NodeTopologyStatus status;
    status.observed_generation = current.meta.generation;
    status.conditions.push_back(want);
    absl::StatusOr<std::string> patched = client.callSync(
        request(proto::Verb::kPatch, r.objectPath("", node_name, "status"),
                proto::statusPatch(status), mergePatchType()));
    if (!patched.ok()) return patched.status();
    result.status_updated = true;
  }

  // 3. Node labels.
  proto::JsonWriter w;
  w.beginObject().key("metadata").beginObject().key("labels").beginObject();
  bool change = false;
  for (const auto& [key, value] : nodeLabels(topology)) {
    auto it = node.meta.labels.find(key);
    if (value) {
      if (it != node.meta.labels.end() && it->second == *value) continue;
      w.stringField(key, *value);
    } else {
      if (it == node.meta.labels.end()) continue;
      w.key(key).null();
    }
    change = true;
  }
  w.endObject().endObject().endObject();
  if (change) {
    absl::StatusOr<std::string> patched = client.callSync(request(
        proto::Verb::kPatch, nodes.objectPath("", node_name), w.str(), mergePatchType()));
    if (!patched.ok()) return patched.status();
    result.labels_updated = true;
    MUSTER_LOG_INFO(2, "Updated node labels", "node", node_name);
  }
  return result;
}

AgentLoop::AgentLoop(Options options, DiscoverFn discover, PublishFn publish,
                     DeviceAllocationSourcePtr source)
    : options_(std::move(options)),
      discover_(std::move(discover)),
      publish_(std::move(publish)),
      source_(std::move(source)) {}

void AgentLoop::readAllocations() {
  std::vector<std::string> notes;
  std::optional<FreeDevices> free;
  if (source_ == nullptr) {
    notes.push_back(options_.no_source_reason);
  } else {
    absl::StatusOr<DeviceAllocations> allocations = source_->read();
    if (!allocations.ok()) {
      notes.push_back(std::string(allocations.status().message()));
    } else {
      free = topology::freeDevices(*topology_, *allocations, options_.mapping, &notes);
    }
  }
  free_ = std::move(free);
  std::string note = absl::StrJoin(notes, "; ");
  if (noted_ && note == note_) return;
  noted_ = true;
  note_ = std::move(note);
  if (note_.empty()) {
    MUSTER_LOG_INFO(1, "Publishing free devices from the kubelet's pod-resources API", "gpus",
                    free_->gpus.size(), "rdmaNics", free_->rdma_nics.size());
  } else if (source_ == nullptr) {
    MUSTER_LOG_INFO(1, "Free devices not published", "reason", note_);
  } else {
    MUSTER_LOG_WARNING(free_ ? "Free devices partly published" : "Free devices not published",
                       "reason", note_);
  }
}

AgentLoop::Step AgentLoop::step(Clock::time_point now) {
  Step r;
  bool discovered = false;
  if (!topology_ || now >= next_discovery_) {
    absl::StatusOr<Topology> t = discover_();
    if (t.ok()) {
      topology_ = std::move(*t);
      topology_->allocatable.reset();
      options_.mapping.gpu_uuid_to_bus = readNvidiaProcGpus(options_.proc_root, nullptr);
      discovered = true;
    } else {
      r.status = t.status();
    }
  }
  if (r.status.ok() && topology_) {
    bool publish_now = discovered || dirty_;
    if (publish_now || (source_ != nullptr && now >= next_poll_)) {
      readAllocations();
      next_poll_ = now + options_.allocation_interval;
      if (free_ != published_free_) publish_now = true;
    }
    if (publish_now) {
      Topology t = *topology_;
      t.allocatable = free_;
      absl::StatusOr<PublishResult> published = publish_(t);
      if (published.ok()) {
        r.result = *published;
        published_free_ = free_;
        dirty_ = false;
      } else {
        r.status = published.status();
        dirty_ = true;
      }
    }
  }
  if (r.status.ok()) {
    backoff_ = std::chrono::seconds(1);
    if (discovered) next_discovery_ = now + options_.interval;
  } else {
    next_discovery_ = now + std::min(backoff_, options_.interval);
    backoff_ = std::min(backoff_ * 2, std::chrono::seconds(60));
  }
  r.next = next_discovery_;
  if (source_ != nullptr && topology_ && r.status.ok()) r.next = std::min(r.next, next_poll_);
  return r;
}

}  // namespace muster::topology
