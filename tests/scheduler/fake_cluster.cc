#include "tests/scheduler/fake_cluster.h"

#include <chrono>

#include "proto/codec.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace muster::scheduler::testing {
namespace asio = proto::asio;

namespace {

std::string toJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  v.Accept(w);
  return std::string(out.GetString(), out.GetSize());
}

std::string keyOf(const rapidjson::Document& d) {
  const auto& meta = d["metadata"];
  std::string ns = meta.HasMember("namespace") ? meta["namespace"].GetString() : "";
  return proto::objectKey(ns, meta["name"].GetString());
}

}  // namespace

class FakeCluster::ListerWatcher final : public proto::ListerWatcher {
 public:
  ListerWatcher(FakeCluster* cluster, std::string resource)
      : cluster_(cluster), resource_(std::move(resource)) {}

  asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t, std::string) override {
    std::string out = "{\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"" +
                      std::to_string(cluster_->rv_) + "\"},\"items\":[";
    bool first = true;
    for (const auto& [key, json] : cluster_->stores_[resource_].objects) {
      if (!first) out += ",";
      first = false;
      out += json;
    }
    co_return out + "]}";
  }

  asio::awaitable<absl::Status> watch(std::string resource_version, int,
                                      std::function<absl::Status(std::string_view)> on_line) override {
    int64_t cursor = std::stoll(resource_version);
    auto executor = co_await asio::this_coro::executor;
    while (!cancelled_) {
      const auto& log = cluster_->stores_[resource_].log;
      for (size_t i = 0; i < log.size(); ++i) {
        if (log[i].rv <= cursor) continue;
        cursor = log[i].rv;
        std::string line = "{\"type\":\"" + log[i].type + "\",\"object\":" + log[i].json + "}";
        if (absl::Status s = on_line(line); !s.ok()) co_return s;
      }
      asio::steady_timer timer(executor, asio::steady_timer::time_point::max());
      timer_ = &timer;
      cluster_->waiting_.insert(&timer);
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      cluster_->waiting_.erase(&timer);
      timer_ = nullptr;
    }
    co_return absl::OkStatus();
  }

  void cancel() override {
    cancelled_ = true;
    if (timer_) timer_->cancel();
  }

 private:
  FakeCluster* cluster_;
  std::string resource_;
  bool cancelled_ = false;
  asio::steady_timer* timer_ = nullptr;
};

proto::ListerWatcherMaker FakeCluster::maker() {
  return [this](const proto::Resource& r, const proto::ListWatchOptions&) -> proto::ListerWatcherPtr {
    // Two APIs serve "podgroups": Kubernetes' own is stored as "workloadpodgroups" here.
    if (r.group_version == proto::resources::kWorkloadPodGroups.group_version)
      return std::make_unique<ListerWatcher>(this, "workloadpodgroups");
    return std::make_unique<ListerWatcher>(this, r.plural);
  };
}

void FakeCluster::publish(const std::string& resource, std::string type, std::string json) {
  stores_[resource].log.push_back({rv_, std::move(type), std::move(json)});
  for (auto* t : waiting_) t->cancel();
}

void FakeCluster::put(const std::string& resource, const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("metadata"))
    throw std::runtime_error("FakeCluster::put: not an object: " + json);
  const std::string key = keyOf(d);
  std::string rv = std::to_string(++rv_);
  auto& meta = d["metadata"];
  if (meta.HasMember("resourceVersion")) meta.RemoveMember("resourceVersion");
  meta.AddMember("resourceVersion", rapidjson::Value(rv.c_str(), d.GetAllocator()), d.GetAllocator());
  if (!meta.HasMember("uid"))
    meta.AddMember("uid", rapidjson::Value(("uid-" + key).c_str(), d.GetAllocator()), d.GetAllocator());
  std::string stored = toJson(d);
  auto& objects = stores_[resource].objects;
  const bool existed = objects.count(key) > 0;
  objects[key] = stored;
  publish(resource, existed ? "MODIFIED" : "ADDED", std::move(stored));
}

void FakeCluster::remove(const std::string& resource, const std::string& ns,
                         const std::string& name) {
  auto& objects = stores_[resource].objects;
  auto it = objects.find(proto::objectKey(ns, name));
  if (it == objects.end()) return;
  std::string last = it->second;
  objects.erase(it);
  ++rv_;
  publish(resource, "DELETED", std::move(last));
}

std::optional<std::string> FakeCluster::get(const std::string& resource, const std::string& ns,
                                            const std::string& name) const {
  auto s = stores_.find(resource);
  if (s == stores_.end()) return std::nullopt;
  auto it = s->second.objects.find(proto::objectKey(ns, name));
  if (it == s->second.objects.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> FakeCluster::list(const std::string& resource) const {
  std::vector<std::string> out;
  auto s = stores_.find(resource);
  if (s == stores_.end()) return out;
  for (const auto& [key, json] : s->second.objects) out.push_back(json);
  return out;
}

bool FakeCluster::edit(const std::string& resource, const std::string& ns, const std::string& name,
                       const std::function<void(rapidjson::Document&)>& change) {
  auto current = get(resource, ns, name);
  if (!current) return false;
  rapidjson::Document d;
  d.Parse(current->c_str());
  change(d);
  put(resource, toJson(d));
  return true;
}

bool FakeCluster::runUntil(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io_.stopped()) io_.restart();
    io_.run_one_for(std::chrono::milliseconds(20));
  }
  return true;
}

void FakeCluster::settle() {
  if (io_.stopped()) io_.restart();
  while (io_.poll() > 0) {
  }
}

// --- FakeSchedulerApi ----------------------------------------------------------------------------

asio::awaitable<absl::Status> FakeSchedulerApi::bind(PodRef pod, std::string node) {
  BindCall call{pod.key(), node};
  const int index = static_cast<int>(binds.size());
  binds.push_back(call);
  log.push_back("bind " + call.pod + " " + node);
  if (yield_in_bind) {
    most_binds_outstanding = std::max(most_binds_outstanding, ++binds_outstanding);
    for (int i = 0; i < 3; ++i) co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    --binds_outstanding;
  }
  if (on_bind) {
    if (absl::Status s = on_bind(call, index); !s.ok()) co_return s;
  }
  bool found = cluster_.edit("pods", pod.namespace_, pod.name, [&](rapidjson::Document& d) {
    auto& a = d.GetAllocator();
    auto& spec = d["spec"];
    if (spec.HasMember("nodeName")) spec.RemoveMember("nodeName");
    spec.AddMember("nodeName", rapidjson::Value(node.c_str(), a), a);
  });
  co_return found ? absl::OkStatus() : absl::NotFoundError("pods \"" + pod.name + "\" not found");
}

asio::awaitable<absl::Status> FakeSchedulerApi::setPodCondition(PodRef pod,
                                                                proto::PodCondition condition) {
  conditions.push_back(pod.key() + " " + condition.type + "=" + condition.status);
  log.push_back("condition " + conditions.back());
  cluster_.edit("pods", pod.namespace_, pod.name, [&](rapidjson::Document& d) {
    auto& a = d.GetAllocator();
    if (!d.HasMember("status")) d.AddMember("status", rapidjson::Value(rapidjson::kObjectType), a);
    auto& status = d["status"];
    if (!status.HasMember("conditions"))
      status.AddMember("conditions", rapidjson::Value(rapidjson::kArrayType), a);
    auto& list = status["conditions"];
    for (auto it = list.Begin(); it != list.End(); ++it) {
      if (std::string((*it)["type"].GetString()) == condition.type) {
        list.Erase(it);
        break;
      }
    }
    rapidjson::Value c(rapidjson::kObjectType);
    c.AddMember("type", rapidjson::Value(condition.type.c_str(), a), a);
    c.AddMember("status", rapidjson::Value(condition.status.c_str(), a), a);
    c.AddMember("reason", rapidjson::Value(condition.reason.c_str(), a), a);
    c.AddMember("message", rapidjson::Value(condition.message.c_str(), a), a);
    list.PushBack(c, a);
  });
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> FakeSchedulerApi::setNominatedNodeName(PodRef pod, std::string node) {
  nominations.push_back(pod.key() + " " + node);
  log.push_back("nominate " + nominations.back());
  bool found = false;
  cluster_.edit("pods", pod.namespace_, pod.name, [&](rapidjson::Document& d) {
    found = true;
    auto& a = d.GetAllocator();
    if (!d.HasMember("status")) d.AddMember("status", rapidjson::Value(rapidjson::kObjectType), a);
    auto& status = d["status"];
    if (status.HasMember("nominatedNodeName")) status.RemoveMember("nominatedNodeName");
    if (!node.empty()) status.AddMember("nominatedNodeName", rapidjson::Value(node.c_str(), a), a);
  });
  co_return found ? absl::OkStatus() : absl::NotFoundError("pods \"" + pod.name + "\" not found");
}

asio::awaitable<absl::Status> FakeSchedulerApi::evict(PodRef pod) {
  evictions.push_back(pod.key());
  log.push_back("evict " + pod.key());
  if (on_evict) {
    if (absl::Status s = on_evict(pod.key(), evict_calls_++); !s.ok()) co_return s;
  }
  if (!cluster_.get("pods", pod.namespace_, pod.name))
    co_return absl::NotFoundError("pods \"" + pod.name + "\" not found");
  cluster_.remove("pods", pod.namespace_, pod.name);
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> FakeSchedulerApi::setWorkloadPodGroupCondition(
    std::string ns, std::string name, proto::Condition condition, int64_t observed_generation) {
  workload_conditions.push_back(proto::objectKey(ns, name) + " " + condition.type + "=" +
                                condition.status + " " + condition.reason + ": " +
                                condition.message);
  log.push_back("podgroup-condition " + proto::objectKey(ns, name));
  cluster_.edit("workloadpodgroups", ns, name, [&](rapidjson::Document& d) {
    rapidjson::Document patch;
    patch.Parse(proto::workloadPodGroupConditionPatch(condition, observed_generation).c_str());
    if (d.HasMember("status")) d.RemoveMember("status");
    d.AddMember("status", rapidjson::Value(patch["status"], d.GetAllocator()), d.GetAllocator());
  });
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> FakeSchedulerApi::setPodAnnotation(PodRef pod, std::string key,
                                                                 std::string value) {
  log.push_back("annotate " + pod.key() + " " + key + "=" + value);
  cluster_.edit("pods", pod.namespace_, pod.name, [&](rapidjson::Document& d) {
    auto& a = d.GetAllocator();
    rapidjson::Value& meta = d["metadata"];
    if (!meta.HasMember("annotations")) meta.AddMember("annotations", rapidjson::Value(rapidjson::kObjectType), a);
    rapidjson::Value& annotations = meta["annotations"];
    annotations.RemoveMember(key.c_str());
    annotations.AddMember(rapidjson::Value(key.c_str(), a), rapidjson::Value(value.c_str(), a), a);
  });
  co_return absl::OkStatus();
}

asio::awaitable<absl::Status> FakeSchedulerApi::setClaimSelectedNode(std::string ns,
                                                                     std::string claim,
                                                                     std::string, std::string node) {
  std::string write = "selected-node " + proto::objectKey(ns, claim) + " " + node;
  const int index = static_cast<int>(volume_writes.size());
  volume_writes.push_back(write);
  log.push_back(write);
  if (on_volume_write) {
    if (absl::Status s = on_volume_write(write, index); !s.ok()) co_return s;
  }
  const bool found = cluster_.edit("persistentvolumeclaims", ns, claim, [&](rapidjson::Document& d) {
    auto& a = d.GetAllocator();
    rapidjson::Value& meta = d["metadata"];
    if (!meta.HasMember("annotations")) meta.AddMember("annotations", rapidjson::Value(rapidjson::kObjectType), a);
    rapidjson::Value& annotations = meta["annotations"];
    annotations.RemoveMember("volume.kubernetes.io/selected-node");
    if (!node.empty())
      annotations.AddMember("volume.kubernetes.io/selected-node", rapidjson::Value(node.c_str(), a), a);
  });
  co_return found ? absl::OkStatus() : absl::NotFoundError("persistentvolumeclaim not found");
}

asio::awaitable<absl::Status> FakeSchedulerApi::setVolumeClaimRef(std::string volume, std::string ns,
                                                                  std::string claim, std::string,
                                                                  std::string) {
  std::string write = "claimRef " + volume + " " + (claim.empty() ? "" : proto::objectKey(ns, claim));
  const int index = static_cast<int>(volume_writes.size());
  volume_writes.push_back(write);
  log.push_back(write);
  if (on_volume_write) {
    if (absl::Status s = on_volume_write(write, index); !s.ok()) co_return s;
  }
  const bool found = cluster_.edit("persistentvolumes", "", volume, [&](rapidjson::Document& d) {
    auto& a = d.GetAllocator();
    rapidjson::Value& spec = d["spec"];
    spec.RemoveMember("claimRef");
    if (claim.empty()) return;
    rapidjson::Value ref(rapidjson::kObjectType);
    ref.AddMember("namespace", rapidjson::Value(ns.c_str(), a), a);
    ref.AddMember("name", rapidjson::Value(claim.c_str(), a), a);
    spec.AddMember("claimRef", ref, a);
  });
  co_return found ? absl::OkStatus() : absl::NotFoundError("persistentvolume not found");
}

asio::awaitable<absl::Status> FakeSchedulerApi::setPodGroupStatus(std::string ns, std::string name,
                                                                  proto::PodGroupStatus status) {
  group_statuses.push_back(proto::objectKey(ns, name) + " " + status.phase + " " +
                           std::to_string(status.scheduled));
  cluster_.edit("podgroups", ns, name, [&](rapidjson::Document& d) {
    rapidjson::Document patch;
    patch.Parse(proto::statusPatch(status).c_str());
    if (d.HasMember("status")) d.RemoveMember("status");
    d.AddMember("status", rapidjson::Value(patch["status"], d.GetAllocator()), d.GetAllocator());
  });
  co_return absl::OkStatus();
}

int FakeEventSink::count(const std::string& reason, const std::string& object) const {
  int n = 0;
  for (const auto& e : created) {
    if (e.reason != reason) continue;
    if (!object.empty() &&
        proto::objectKey(e.involved_object.namespace_, e.involved_object.name) != object)
      continue;
    ++n;
  }
  return n;
}

// --- JSON builders -------------------------------------------------------------------------------

std::string NodeJson::json() const {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Node");
  w.key("metadata").beginObject().stringField("name", name_);
  std::map<std::string, std::string> labels = labels_;
  labels["kubernetes.io/hostname"] = name_;
  w.stringMapField("labels", labels);
  w.endObject();
  w.key("spec").beginObject().endObject();
  w.key("status").beginObject();
  std::map<std::string, std::string> alloc = {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}};
  if (gpus_ > 0) alloc["nvidia.com/gpu"] = std::to_string(gpus_);
  for (const auto& [k, v] : extra_) alloc[k] = v;
  w.stringMapField("allocatable", alloc);
  w.stringMapField("capacity", alloc);
  w.key("conditions").beginArray().beginObject();
  w.stringField("type", "Ready").stringField("status", "True").stringField("reason", "KubeletReady");
  w.endObject().endArray();
  w.endObject().endObject();
  return w.str();
}

std::string PodJson::json() const {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Pod");
  w.key("metadata").beginObject().stringField("name", name_).stringField("namespace", ns_);
  w.stringField("uid", "uid-" + ns_ + "-" + name_);
  w.stringField("creationTimestamp", "2026-01-01T00:00:00Z");
  if (!labels_.empty()) w.stringMapField("labels", labels_);
  if (!annotations_.empty()) w.stringMapField("annotations", annotations_);
  if (!owner_.empty()) {
    w.key("ownerReferences").beginArray().beginObject();
    w.stringField("apiVersion", owner_api_).stringField("kind", owner_kind_).stringField("name", owner_);
    w.stringField("uid", "uid-job-" + owner_).booleanField("controller", true);
    w.endObject().endArray();
  }
  w.endObject();
  w.key("spec").beginObject();
  w.stringField("schedulerName", scheduler_);
  if (!node_.empty()) w.stringField("nodeName", node_);
  if (priority_) w.integerField("priority", *priority_);
  if (!preemption_policy_.empty()) w.stringField("preemptionPolicy", preemption_policy_);
  w.key("containers").beginArray().beginObject().stringField("name", "main");
  w.stringField("image", "busybox");
  w.key("resources").beginObject();
  std::map<std::string, std::string> req = {{"cpu", "1"}, {"memory", "1Gi"}};
  if (gpus_ > 0) req["nvidia.com/gpu"] = std::to_string(gpus_);
  for (const auto& [k, v] : extra_) req[k] = v;
  w.stringMapField("requests", req);
  w.endObject().endObject().endArray();
  auto named = [&](const char* field, const std::vector<std::string>& names) {
    if (names.empty()) return;
    w.key(field).beginArray();
    for (const auto& n : names) w.beginObject().stringField("name", n).endObject();
    w.endArray();
  };
  named("schedulingGates", gates_);
  if (!scheduling_group_.empty())
    w.key("schedulingGroup").beginObject().stringField("podGroupName", scheduling_group_).endObject();
  named("resourceClaims", resource_claims_);
  if (!claims_.empty() || !ephemeral_.empty()) {
    w.key("volumes").beginArray();
    for (const auto& c : claims_) {
      w.beginObject().stringField("name", "vol-" + c);
      w.key("persistentVolumeClaim").beginObject().stringField("claimName", c).endObject();
      w.endObject();
    }
    for (const auto& v : ephemeral_) {
      w.beginObject().stringField("name", v).key("ephemeral").beginObject();
      w.key("volumeClaimTemplate").beginObject().key("spec").beginObject();
      w.key("accessModes").beginArray().string("ReadWriteOnce").endArray();
      w.endObject().endObject().endObject().endObject();
    }
    w.endArray();
  }
  w.endObject();
  w.key("status").beginObject().stringField("phase", phase_);
  if (!preempted_.empty()) {
    w.key("conditions").beginArray().beginObject();
    w.stringField("type", "muster.dev/Preempted").stringField("status", "True");
    w.stringField("reason", "Preempted").stringField("message", preempted_);
    w.endObject().endArray();
  }
  w.endObject();
  w.endObject();
  return w.str();
}

std::string serviceJson(const std::string& name, const std::map<std::string, std::string>& selector,
                        const std::string& ns) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Service");
  w.key("metadata").beginObject().stringField("name", name).stringField("namespace", ns).endObject();
  w.key("spec").beginObject().stringMapField("selector", selector).endObject();
  w.endObject();
  return w.str();
}

std::string replicaSetJson(const std::string& name,
                           const std::map<std::string, std::string>& selector,
                           const std::string& ns) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "apps/v1").stringField("kind", "ReplicaSet");
  w.key("metadata").beginObject().stringField("name", name).stringField("namespace", ns).endObject();
  w.key("spec").beginObject().key("selector").beginObject().stringMapField("matchLabels", selector);
  w.endObject().endObject();
  w.endObject();
  return w.str();
}

std::string claimJson(const std::string& name, bool bound, const std::string& ns,
                      const std::string& access_mode) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "PersistentVolumeClaim");
  w.key("metadata").beginObject().stringField("name", name).stringField("namespace", ns);
  w.endObject();
  w.key("spec").beginObject();
  w.key("accessModes").beginArray().string(access_mode).endArray();
  if (bound) w.stringField("volumeName", "pv-" + name);
  w.endObject();
  w.key("status").beginObject().stringField("phase", bound ? "Bound" : "Pending").endObject();
  w.endObject();
  return w.str();
}

namespace {
void hostnameAffinity(proto::JsonWriter& w, const std::vector<std::string>& nodes) {
  w.key("nodeAffinity").beginObject().key("required").beginObject();
  w.key("nodeSelectorTerms").beginArray().beginObject();
  w.key("matchExpressions").beginArray().beginObject();
  w.stringField("key", "kubernetes.io/hostname").stringField("operator", "In");
  w.key("values").beginArray();
  for (const std::string& n : nodes) w.string(n);
  w.endArray().endObject().endArray().endObject().endArray();
  w.endObject().endObject();
}
}  // namespace

std::string storageClassJson(const std::string& name, const std::string& mode,
                             const std::string& provisioner,
                             const std::vector<std::string>& allowed_nodes) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "storage.k8s.io/v1").stringField("kind", "StorageClass");
  w.key("metadata").beginObject().stringField("name", name).endObject();
  w.stringField("provisioner", provisioner).stringField("volumeBindingMode", mode);
  if (!allowed_nodes.empty()) {
    w.key("allowedTopologies").beginArray().beginObject().key("matchLabelExpressions").beginArray();
    w.beginObject().stringField("key", "kubernetes.io/hostname").key("values").beginArray();
    for (const std::string& n : allowed_nodes) w.string(n);
    w.endArray().endObject().endArray().endObject().endArray();
  }
  w.endObject();
  return w.str();
}

std::string pendingClaimJson(const std::string& name, const std::string& storage_class,
                             const std::string& size, const std::string& ns,
                             const std::string& owner_pod) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "PersistentVolumeClaim");
  w.key("metadata").beginObject().stringField("name", name).stringField("namespace", ns);
  w.stringField("uid", "uid-claim-" + ns + "-" + name);
  if (!owner_pod.empty()) {
    w.key("ownerReferences").beginArray().beginObject().stringField("apiVersion", "v1");
    w.stringField("kind", "Pod").stringField("name", owner_pod);
    w.stringField("uid", "uid-" + ns + "-" + owner_pod).booleanField("controller", true);
    w.endObject().endArray();
  }
  w.endObject();
  w.key("spec").beginObject();
  w.key("accessModes").beginArray().string("ReadWriteOnce").endArray();
  w.stringField("storageClassName", storage_class);
  w.key("resources").beginObject().key("requests").beginObject().stringField("storage", size);
  w.endObject().endObject();
  w.endObject();
  w.key("status").beginObject().stringField("phase", "Pending").endObject();
  w.endObject();
  return w.str();
}

std::string freeVolumeJson(const std::string& name, const std::string& storage_class,
                           const std::string& capacity, const std::vector<std::string>& nodes) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "PersistentVolume");
  w.key("metadata").beginObject().stringField("name", name).endObject();
  w.key("spec").beginObject();
  w.key("accessModes").beginArray().string("ReadWriteOnce").endArray();
  w.stringField("storageClassName", storage_class);
  w.key("capacity").beginObject().stringField("storage", capacity).endObject();
  if (!nodes.empty()) hostnameAffinity(w, nodes);
  w.endObject();
  w.key("status").beginObject().stringField("phase", "Available").endObject();
  w.endObject();
  return w.str();
}

std::string volumeJson(const std::string& claim, const std::vector<std::string>& nodes,
                       const std::string& ns) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "PersistentVolume");
  w.key("metadata").beginObject().stringField("name", "pv-" + claim).endObject();
  w.key("spec").beginObject();
  w.key("claimRef").beginObject().stringField("namespace", ns).stringField("name", claim).endObject();
  if (!nodes.empty()) hostnameAffinity(w, nodes);
  w.endObject();
  w.key("status").beginObject().stringField("phase", "Bound").endObject();
  w.endObject();
  return w.str();
}

std::string podGroupJson(const std::string& name, int min_member, const std::string& ns) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "scheduling.x-k8s.io/v1alpha1");
  w.stringField("kind", "PodGroup");
  w.key("metadata").beginObject().stringField("name", name).stringField("namespace", ns);
  w.endObject();
  w.key("spec").beginObject().integerField("minMember", min_member).endObject();
  w.endObject();
  return w.str();
}

}  // namespace muster::scheduler::testing

namespace muster::scheduler::testing {

std::string workloadPodGroupJson(const std::string& name, int min_count,
                                 const std::string& topology_key, const std::string& ns) {
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "scheduling.k8s.io/v1alpha2");
  w.stringField("kind", "PodGroup");
  w.key("metadata").beginObject().stringField("name", name).stringField("namespace", ns);
  w.integerField("generation", 1);
  w.endObject();
  w.key("spec").beginObject().key("schedulingPolicy").beginObject();
  if (min_count > 0) w.key("gang").beginObject().integerField("minCount", min_count).endObject();
  else w.key("basic").beginObject().endObject();
  w.endObject();
  if (!topology_key.empty()) {
    w.key("schedulingConstraints").beginObject().key("topology").beginArray();
    w.beginObject().stringField("key", topology_key).endObject();
    w.endArray().endObject();
  }
  w.endObject();
  w.endObject();
  return w.str();
}

}  // namespace muster::scheduler::testing
