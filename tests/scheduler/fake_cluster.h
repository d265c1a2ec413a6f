#pragma once

// An in-memory stand-in for the API server at the scheduler's two seams, so the whole Scheduler
// (informers, cache, queue, placement, binder, rollback, PodGroup status) runs in a unit test:
//
// - FakeCluster serves list and watch for every resource to the process's InformerFactory
//   (maker()), from objects the test puts in as JSON (put / remove), with resourceVersions and
//   watch events as the API server would send them.
// - FakeSchedulerApi is the SchedulerApi: it records every bind, condition, eviction and PodGroup
//   status write, applies them to the FakeCluster (a bind sets spec.nodeName, an eviction deletes
//   the pod), and fails the ones a test scripts to fail.
// - FakeEventSink records Events.
//
// Everything runs on one io_context driven by the test's thread (runUntil). This is a seam fake
// for unit tests; the real kube-apiserver is exercised by the end-to-end suites.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "proto/asio.h"
#include "proto/event_recorder.h"
#include "proto/informer_factory.h"
#include "proto/json.h"
#include "scheduler/api.h"

namespace muster::scheduler::testing {

class FakeCluster {
 public:
  explicit FakeCluster(proto::asio::io_context& io) : io_(io) {}

  proto::ListerWatcherMaker maker();

  // Adds or replaces an object ("pods", "nodes", "podgroups", "nodetopologies", ...) given as
  // JSON; its metadata.resourceVersion is set. ADDED or MODIFIED goes to every watch.
  void put(const std::string& resource, const std::string& json);
  void remove(const std::string& resource, const std::string& ns, const std::string& name);
  // The stored JSON, or nullopt.
  std::optional<std::string> get(const std::string& resource, const std::string& ns,
                                 const std::string& name) const;
  std::vector<std::string> list(const std::string& resource) const;
  // Edits a stored object in place (then MODIFIED). False when it does not exist.
  bool edit(const std::string& resource, const std::string& ns, const std::string& name,
            const std::function<void(rapidjson::Document&)>& change);

  // Runs the io_context until `done()` or the deadline (real time) passes; true when done.
  bool runUntil(const std::function<bool()>& done, double seconds = 10);
  // Runs whatever is ready now (and what that makes ready), without waiting.
  void settle();

 private:
  struct Event {
    int64_t rv;
    std::string type;
    std::string json;
  };
  struct Store {
    std::map<std::string, std::string> objects;  // "ns/name" -> JSON
    std::vector<Event> log;
  };
  class ListerWatcher;
  void publish(const std::string& resource, std::string type, std::string json);

  proto::asio::io_context& io_;
  int64_t rv_ = 100;
  std::map<std::string, Store> stores_;
  std::set<proto::asio::steady_timer*> waiting_;  // watches waiting for events
};

struct BindCall {
  std::string pod;  // "ns/name"
  std::string node;
};

class FakeSchedulerApi final : public SchedulerApi {
 public:
  explicit FakeSchedulerApi(FakeCluster& cluster) : cluster_(cluster) {}

  // Scripted answers: return a non-OK status to fail that call (called with the call's index
  // among calls of its kind); nullopt/OK means do it.
  std::function<absl::Status(const BindCall&, int index)> on_bind;
  std::function<absl::Status(const std::string& pod, int index)> on_evict;

  std::vector<BindCall> binds;           // every bind asked for, in order
  // With yield_in_bind, a bind lets everything else queued on the executor run before it
  // answers, as a real one waits on the network: binds_outstanding counts those begun and not
  // yet answered, most_binds_outstanding the most at once.
  bool yield_in_bind = false;
  int binds_outstanding = 0;
  int most_binds_outstanding = 0;
  std::vector<std::string> conditions;   // "ns/name Type=Status"
  std::vector<std::string> evictions;    // pods asked to be evicted
  std::vector<std::string> nominations;  // "ns/name node" ("ns/name " when cleared)
  std::vector<std::string> group_statuses;  // "ns/name phase scheduled"
  // scheduling.k8s.io/v1alpha2 PodGroups: "ns/name Type=Status Reason: message"
  std::vector<std::string> workload_conditions;
  std::vector<std::string> log;             // every call in order: "bind ns/name node", ...
  // "selected-node ns/claim node" and "claimRef volume ns/claim" ("" node or claim: cleared).
  std::vector<std::string> volume_writes;
  std::function<absl::Status(const std::string& write, int index)> on_volume_write;

  proto::asio::awaitable<absl::Status> bind(PodRef pod, std::string node) override;
  proto::asio::awaitable<absl::Status> setPodCondition(PodRef pod,
                                                       proto::PodCondition condition) override;
  proto::asio::awaitable<absl::Status> setNominatedNodeName(PodRef pod, std::string node) override;
  proto::asio::awaitable<absl::Status> setPodAnnotation(PodRef pod, std::string key,
                                                        std::string value) override;
  proto::asio::awaitable<absl::Status> evict(PodRef pod) override;
  proto::asio::awaitable<absl::Status> setPodGroupStatus(std::string ns, std::string name,
                                                         proto::PodGroupStatus status) override;
  proto::asio::awaitable<absl::Status> setWorkloadPodGroupCondition(
      std::string ns, std::string name, proto::Condition condition,
      int64_t observed_generation) override;
  proto::asio::awaitable<absl::Status> setClaimSelectedNode(std::string ns, std::string claim,
                                                            std::string uid,
                                                            std::string node) override;
  proto::asio::awaitable<absl::Status> setVolumeClaimRef(std::string volume, std::string ns,
                                                         std::string claim, std::string uid,
                                                         std::string resource_version) override;

 private:
  FakeCluster& cluster_;
  int evict_calls_ = 0;
};

class FakeEventSink final : public proto::EventSink {
 public:
  std::vector<proto::Event> created;
  proto::asio::awaitable<absl::Status> create(const proto::Event& e) override {
    created.push_back(e);
    co_return absl::OkStatus();
  }
  proto::asio::awaitable<absl::Status> updateSeries(const proto::Event&) override {
    co_return absl::OkStatus();
  }
  // Events with this reason about the pod "ns/name" (or any object when empty).
  int count(const std::string& reason, const std::string& object = "") const;
};

// JSON for the objects scenarios need, built like prose:
//   nodeJson("n1").gpus(8).rack("r1")   podJson("w0").gpus(1).gang("train", 4).controlledBy("j")
class NodeJson {
 public:
  explicit NodeJson(std::string name) : name_(std::move(name)) {}
  NodeJson& gpus(int n) { gpus_ = n; return *this; }
  NodeJson& label(const std::string& k, const std::string& v) { labels_[k] = v; return *this; }
  NodeJson& rack(const std::string& v) { return label("muster.dev/rack", v); }
  // Another allocatable resource (an extended one: "example.com/fpga", "4").
  NodeJson& resource(const std::string& name, const std::string& v) { extra_[name] = v; return *this; }
  std::string json() const;
  operator std::string() const { return json(); }

 private:
  std::string name_;
  int gpus_ = 8;
  std::map<std::string, std::string> labels_, extra_;
};
inline NodeJson nodeJson(std::string name) { return NodeJson(std::move(name)); }

class PodJson {
 public:
  explicit PodJson(std::string name) : name_(std::move(name)) {}
  PodJson& ns(const std::string& v) { ns_ = v; return *this; }
  PodJson& gpus(int n) { gpus_ = n; return *this; }
  // Another request of container main ("example.com/fpga", "1").
  PodJson& request(const std::string& name, const std::string& v) { extra_[name] = v; return *this; }
  PodJson& gang(const std::string& name, int size) {
    annotations_["gang-scheduling.preferred.jp/gang-name"] = name;
    annotations_["gang-scheduling.preferred.jp/gang-size"] = std::to_string(size);
    return *this;
  }
  PodJson& podGroup(const std::string& group) {
    labels_["scheduling.x-k8s.io/pod-group"] = group;
    return *this;
  }
  // spec.schedulingGroup.podGroupName: a scheduling.k8s.io/v1alpha2 PodGroup.
  PodJson& schedulingGroup(const std::string& group) { scheduling_group_ = group; return *this; }
  PodJson& annotation(const std::string& k, const std::string& v) { annotations_[k] = v; return *this; }
  PodJson& controlledBy(const std::string& job) { owner_ = job; return *this; }
  // Controlled by another kind of object ("apps/v1", "ReplicaSet", "rs").
  PodJson& controlledBy(const std::string& api_version, const std::string& kind,
                        const std::string& name) {
    owner_api_ = api_version;
    owner_kind_ = kind;
    owner_ = name;
    return *this;
  }
  PodJson& label(const std::string& k, const std::string& v) { labels_[k] = v; return *this; }
  PodJson& boundTo(const std::string& node) { node_ = node; return *this; }
  PodJson& schedulerName(const std::string& v) { scheduler_ = v; return *this; }
  PodJson& phase(const std::string& v) { phase_ = v; return *this; }
  PodJson& priority(int32_t p) { priority_ = p; return *this; }
  PodJson& preemptionPolicy(const std::string& v) { preemption_policy_ = v; return *this; }
  // Carries muster.dev/Preempted=True, as Muster marks a victim before evicting it.
  PodJson& markedPreempted(const std::string& message) { preempted_ = message; return *this; }
  PodJson& gate(const std::string& name) { gates_.push_back(name); return *this; }
  // A volume using the PersistentVolumeClaim `claim`.
  PodJson& claim(const std::string& claim) { claims_.push_back(claim); return *this; }
  // A generic ephemeral volume `volume` (its claim is "<pod>-<volume>").
  PodJson& ephemeral(const std::string& volume) { ephemeral_.push_back(volume); return *this; }
  // A DRA claim in spec.resourceClaims.
  PodJson& resourceClaim(const std::string& name) { resource_claims_.push_back(name); return *this; }
  std::string json() const;
  operator std::string() const { return json(); }

 private:
  std::string name_, ns_ = "ml", node_, owner_, scheduler_ = "muster-scheduler", phase_ = "Pending";
  std::string scheduling_group_, preemption_policy_, preempted_;
  std::string owner_api_ = "batch/v1", owner_kind_ = "Job";
  std::optional<int32_t> priority_;
  int gpus_ = 1;
  std::map<std::string, std::string> labels_, annotations_, extra_;
  std::vector<std::string> gates_, claims_, resource_claims_, ephemeral_;
};
inline PodJson podJson(std::string name) { return PodJson(std::move(name)); }

std::string podGroupJson(const std::string& name, int min_member, const std::string& ns = "ml");
// A scheduling.k8s.io/v1alpha2 PodGroup (store "workloadpodgroups"): gang policy with minCount,
// or basic when min_count is 0; `topology_key` as spec.schedulingConstraints.topology[0].key.
std::string workloadPodGroupJson(const std::string& name, int min_count,
                                 const std::string& topology_key = "",
                                 const std::string& ns = "ml");
// A Service selecting `selector`; a ReplicaSet whose spec.selector matches `selector`.
std::string serviceJson(const std::string& name, const std::map<std::string, std::string>& selector,
                        const std::string& ns = "ml");
std::string replicaSetJson(const std::string& name,
                           const std::map<std::string, std::string>& selector,
                           const std::string& ns = "ml");
// A PersistentVolumeClaim, bound (to a volume) or pending.
std::string claimJson(const std::string& name, bool bound, const std::string& ns = "ml",
                      const std::string& access_mode = "ReadWriteOnce");
// The PersistentVolume "pv-<claim>" bound to that claim; with `nodes`, reachable only from those
// nodes (spec.nodeAffinity.required on kubernetes.io/hostname, as a local volume has).
std::string volumeJson(const std::string& claim, const std::vector<std::string>& nodes = {},
                       const std::string& ns = "ml");
// A StorageClass: `mode` "WaitForFirstConsumer" or "Immediate", `provisioner`
// ("kubernetes.io/no-provisioner": existing volumes only); allowedTopologies on these hostnames.
std::string storageClassJson(const std::string& name, const std::string& mode,
                             const std::string& provisioner,
                             const std::vector<std::string>& allowed_nodes = {});
// An unbound claim (uid "uid-claim-<ns>-<name>") of the class asking for `size`; with
// `owner_pod`, controlled by that pod (as the claim of an ephemeral volume is).
std::string pendingClaimJson(const std::string& name, const std::string& storage_class,
                             const std::string& size = "10Gi", const std::string& ns = "ml",
                             const std::string& owner_pod = "");
// An Available PersistentVolume `name` of the class with `capacity`, reachable from `nodes`
// only (or from every node).
std::string freeVolumeJson(const std::string& name, const std::string& storage_class,
                           const std::string& capacity, const std::vector<std::string>& nodes = {});

}  // namespace muster::scheduler::testing
