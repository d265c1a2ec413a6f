#include "jobengine/controller.h"

#include <algorithm>

#include "jobengine/attempt_objects.h"
#include "jobengine/naming.h"
#include "jobengine/ssh_attempt.h"
#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"

namespace muster::jobengine {
namespace asio = proto::asio;
using proto::Node;
using proto::ParallelJob;
using proto::Pod;

namespace {

// Indexes the job engine adds to the process's pod informer.
constexpr char kPodsByJobIndex[] = "jobengine:job-uid";
constexpr char kPodsOfJobsByNodeIndex[] = "jobengine:node";
// Indexes on the job informer: the keys a job's start waits on, and the keys it is known as
// (Runtime::waitsOn / knownAs).
constexpr char kJobsWaitingOnIndex[] = "jobengine:waits-on";
constexpr char kJobsKnownAsIndex[] = "jobengine:known-as";

class InformerJobDirectory final : public JobDirectory {
 public:
  explicit InformerJobDirectory(const proto::Informer<ParallelJob>& jobs) : jobs_(jobs) {}
  std::shared_ptr<const ParallelJob> get(std::string_view ns, std::string_view name) const override {
    return jobs_.get(ns, name);
  }
  std::vector<std::shared_ptr<const ParallelJob>> knownAs(const std::string& key) const override {
    return jobs_.byIndex(kJobsKnownAsIndex, key);
  }

 private:
  const proto::Informer<ParallelJob>& jobs_;
};

struct Metrics {
  metrics::Family<metrics::Counter>& reconciles = metrics::defaultRegistry().counter(
      "muster_paralleljob_reconciles_total", "ParallelJob reconciles by result.", {"result"});
  metrics::Histogram& duration =
      metrics::defaultRegistry()
          .histogram("muster_paralleljob_reconcile_duration_seconds",
                     "Time to reconcile one ParallelJob, API calls included.",
                     metrics::exponentialBuckets(0.001, 2, 14))
          .with();
  metrics::Family<metrics::Counter>& transitions = metrics::defaultRegistry().counter(
      "muster_paralleljob_transitions_total", "ParallelJob phase transitions by new phase.",
      {"phase"});
  metrics::Counter& restarts = metrics::defaultRegistry()
                                   .counter("muster_paralleljob_restarts_total",
                                            "Whole-job restarts after a failure.")
                                   .with();
  metrics::Counter& preemptions =
      metrics::defaultRegistry()
          .counter("muster_paralleljob_preemptions_total",
                   "Jobs requeued (not restarted) because Muster's scheduler preempted their gang.")
          .with();
};

Metrics& m() {
  static Metrics* metrics = new Metrics();
  return *metrics;
}

std::pair<std::string, std::string> splitKey(const std::string& key) {
  auto slash = key.find('/');
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string statusPatchWithPrecondition(const proto::ParallelJobStatus& status,
                                        const std::string& resource_version) {
  std::string patch = proto::statusPatch(status);  // {"status":{...}}
  if (resource_version.empty()) return patch;
  proto::JsonWriter w;
  w.beginObject().key("metadata").beginObject().stringField("resourceVersion", resource_version);
  w.endObject().endObject();
  std::string meta = w.str();  // {"metadata":{...}}
  meta.pop_back();
  return meta + "," + patch.substr(1);
}

}  // namespace

std::string jobOwner(const ParallelJob& job) {
  if (job.spec.slurm && !job.spec.slurm->user.empty())
    return "slurm-user:" + job.meta.namespace_ + "/" + job.spec.slurm->user;
  return "namespace:" + job.meta.namespace_;
}

std::string keyOwner(const std::string& key) {
  return "namespace:" + splitKey(key).first;
}

bool statusRefusedForGood(const absl::Status& write) {
  const int code = proto::httpStatusOf(write);
  return code == 400 || code == 413 || code == 422;
}

Controller::Controller(std::shared_ptr<proto::Client> client, proto::InformerFactory& informers,
                       proto::EventRecorder& events, asio::any_io_executor executor,
                       ControllerOptions options)
    : Controller(makeClientJobApi(std::move(client)), informers, events, std::move(executor),
                 std::move(options)) {}

Controller::Controller(JobApiPtr api, proto::InformerFactory& informers,
                       proto::EventRecorder& events, asio::any_io_executor executor,
                       ControllerOptions options)
    : api_(std::move(api)),
      executor_(executor),
      strand_(asio::make_strand(executor)),
      options_(std::move(options)),
      runtimes_(defaultRuntimes(options_.runtime)),
      events_(events),
      jobs_(informers.informer<ParallelJob>(proto::resources::kParallelJobs)),
      pods_(informers.informer<Pod>(proto::resources::kPods)) {
  for (const char* r : {"done", "retry", "error"}) m().reconciles.with({r});
  pods_.addIndex(kPodsByJobIndex, [](const Pod& pod) {
    auto it = pod.meta.labels.find(vocab::kJobUidLabel);
    return it == pod.meta.labels.end() ? std::vector<std::string>{}
                                       : std::vector<std::string>{it->second};
  });
  pods_.addIndex(kPodsOfJobsByNodeIndex, [](const Pod& pod) {
    if (pod.spec.node_name.empty() || !pod.meta.labels.count(vocab::kJobUidLabel))
      return std::vector<std::string>{};
    return std::vector<std::string>{pod.spec.node_name};
  });

  jobs_.addIndex(kJobsWaitingOnIndex, [this](const ParallelJob& job) {
    const Runtime* runtime = runtimes_.find(job.spec.runtime_ref_name);
    return runtime == nullptr ? std::vector<std::string>{} : runtime->waitsOn(job);
  });
  jobs_.addIndex(kJobsKnownAsIndex, [this](const ParallelJob& job) {
    const Runtime* runtime = runtimes_.find(job.spec.runtime_ref_name);
    return runtime == nullptr ? std::vector<std::string>{} : runtime->knownAs(job);
  });
  directory_ = std::make_unique<InformerJobDirectory>(jobs_);
  // A job that changes (or goes) is reconciled, and so is every job whose start waits on it.
  auto on_job = [this](const std::shared_ptr<const ParallelJob>& job) {
    std::vector<std::string> keys{proto::objectKey(*job)};
    std::vector<std::string> as{keys[0]};
    if (const Runtime* runtime = runtimes_.find(job->spec.runtime_ref_name))
      for (std::string& k : runtime->knownAs(*job)) as.push_back(std::move(k));
    for (const std::string& k : as)
      for (const auto& waiting : jobs_.byIndex(kJobsWaitingOnIndex, k))
        keys.push_back(proto::objectKey(*waiting));
    asio::post(strand_, [this, keys = std::move(keys)] {
      for (const std::string& key : keys) enqueue(key);
    });
  };
  jobs_.addHandlers({on_job,
                     [on_job](const auto&, const std::shared_ptr<const ParallelJob>& job) {
                       on_job(job);
                     },
                     [this, on_job](const std::shared_ptr<const ParallelJob>& job) {
                       on_job(job);  // its dependents: a job that is gone lifts a dependency
                       asio::post(strand_, [this, key = proto::objectKey(*job), uid = job->meta.uid] {
                         deleted_.erase(uid);
                         for (auto it = support_created_.lower_bound(uid + "/");
                              it != support_created_.end() && it->first.rfind(uid + "/", 0) == 0;)
                           it = support_created_.erase(it);
                         if (auto k = keys_.find(key); k != keys_.end() && k->second.timer)
                           k->second.timer->cancel();
                       });
                     }});
  // The pod informer is the process's, holding every pod: only those a ParallelJob controls
  // matter here.
  auto on_pod = [this](const std::shared_ptr<const Pod>& pod) {
    if (ownerKey(*pod).empty()) return;
    asio::post(strand_, [this, pod] { enqueue(ownerKey(*pod)); });
  };
  pods_.addHandlers({on_pod,
                     [on_pod](const auto&, const std::shared_ptr<const Pod>& pod) { on_pod(pod); },
                     [this](const std::shared_ptr<const Pod>& pod) {
                       if (ownerKey(*pod).empty()) return;
                       asio::post(strand_, [this, pod] { onPodDeleted(*pod); });
                     }});
  if (options_.watch_nodes) {
    nodes_ = &informers.informer<Node>(proto::resources::kNodes);
    nodes_->addHandlers({nullptr, nullptr, [this](const std::shared_ptr<const Node>& node) {
                           asio::post(strand_, [this, name = node->meta.name] {
                             for (const auto& pod : pods_.byIndex(kPodsOfJobsByNodeIndex, name))
                               if (auto key = ownerKey(*pod); !key.empty()) enqueue(key);
                           });
                         }});
  }
}

Controller::~Controller() { stop(); }

void Controller::start() {
  if (started_.exchange(true)) return;
  asio::co_spawn(strand_, waitForSync(), proto::dieOnException("job engine sync"));
}

void Controller::stop() {
  if (stopping_.exchange(true)) return;
  ready_ = false;
  asio::post(strand_, [this] {
    for (auto& [key, state] : keys_)
      if (state.timer) state.timer->cancel();
  });
}

asio::awaitable<void> Controller::waitForSync() {
  asio::steady_timer timer(strand_);
  while (!stopping_) {
    if (jobs_.hasSynced() && pods_.hasSynced() && (!nodes_ || nodes_->hasSynced())) break;
    timer.expires_after(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (stopping_) co_return;
  synced_ = true;
  ready_ = true;
  MUSTER_LOG_INFO(0, "Job engine caches synced", "paralleljobs", jobs_.size(), "pods",
                  pods_.size());
  for (const auto& job : jobs_.list()) enqueue(proto::objectKey(*job));
  pump();
  asio::co_spawn(strand_, resyncLoop(), proto::dieOnException("job engine resync"));
}

asio::awaitable<void> Controller::resyncLoop() {
  asio::steady_timer timer(strand_);
  while (!stopping_) {
    timer.expires_after(options_.resync);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) break;
    for (const auto& job : jobs_.list()) enqueue(proto::objectKey(*job));
  }
}

std::string Controller::ownerKey(const Pod& pod) const {
  const proto::OwnerReference* ref = pod.meta.controllerRef();
  if (ref == nullptr || ref->kind != "ParallelJob") return "";
  return proto::objectKey(pod.meta.namespace_, ref->name);
}

void Controller::onPodDeleted(const Pod& pod) {
  const proto::OwnerReference* ref = pod.meta.controllerRef();
  int32_t attempt = 0, index = 0;
  if (ref != nullptr && attemptAndIndex(pod, &attempt, &index)) {
    auto& deleted = deleted_[ref->uid];
    // Forget pods of earlier attempts: only the attempt in progress matters.
    for (auto it = deleted.begin(); it != deleted.end();)
      it = it->second.attempt < attempt ? deleted.erase(it) : std::next(it);
    // The pod's last state: the scheduler's marks were set before it evicted the pod.
    DeletedPod& d = deleted[pod.meta.name] = DeletedPod{};
    d.attempt = attempt;
    d.index = index;
    d.by_muster = isGangRollback(pod);
    if (const proto::PodCondition* mark = preemptionMark(pod)) {
      d.preempted = true;
      d.preempted_message = mark->message;
    }
    MUSTER_LOG_INFO(3, "ParallelJob pod deleted", "pod", proto::objectKey(pod), "attempt", attempt,
                    "byMuster", isGangRollback(pod) ? "true" : "false", "preempted",
                    d.preempted ? "true" : "false");
  }
  if (auto key = ownerKey(pod); !key.empty()) enqueue(key);
}

void Controller::enqueue(const std::string& key) {
  if (stopping_) return;
  KeyState& s = keys_[key];
  if (s.running) {
    s.dirty = true;
    return;
  }
  if (s.queued) return;
  s.queued = true;
  // The owner as the cache has the job now; a key whose job is gone goes under its namespace.
  auto [ns, name] = splitKey(key);
  std::shared_ptr<const ParallelJob> job = jobs_.get(ns, name);
  queue_.push(job ? jobOwner(*job) : keyOwner(key), key);
  pump();
}

void Controller::enqueueAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (stopping_) return;
  KeyState& s = keys_[key];
  if (s.timer) s.timer->cancel();
  // Bounded, so that the timer's nanoseconds cannot overflow (reconcile.h kMaxRequeueAfter).
  delay = std::clamp<std::chrono::milliseconds>(delay, std::chrono::milliseconds(0), kMaxRequeueAfter);
  s.timer = std::make_shared<asio::steady_timer>(strand_, delay);
  s.timer->async_wait([this, key, timer = s.timer](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    if (auto it = keys_.find(key); it != keys_.end() && it->second.timer == timer)
      it->second.timer.reset();
    enqueue(key);
  });
}

void Controller::pump() {
  if (!synced_) return;
  while (active_ < options_.max_concurrent_reconciles && !queue_.empty() && !stopping_) {
    std::string key = *queue_.pop();
    KeyState& s = keys_[key];
    s.queued = false;
    s.running = true;
    ++active_;
    asio::co_spawn(strand_, process(std::move(key)), proto::dieOnException("job reconcile"));
  }
}

asio::awaitable<void> Controller::process(std::string key) {
  auto started = std::chrono::steady_clock::now();
  Outcome outcome = Outcome::kError;
  try {
    outcome = co_await reconcileKey(key);
  } catch (const std::exception& e) {
    MUSTER_LOG_ERROR("ParallelJob reconcile threw", "paralleljob", key, "error", e.what());
  }
  m().duration.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  --active_;
  KeyState& s = keys_[key];
  s.running = false;
  switch (outcome) {
    case Outcome::kDone:
      m().reconciles.with({"done"}).inc();
      s.failures = 0;
      if (s.requeue_after) enqueueAfter(key, *s.requeue_after);
      break;
    case Outcome::kRetry:
      m().reconciles.with({"retry"}).inc();
      s.failures = 0;
      enqueueAfter(key, std::chrono::milliseconds(100));
      break;
    case Outcome::kError: {
      m().reconciles.with({"error"}).inc();
      auto delay = options_.initial_backoff * (1LL << std::min(s.failures, 10));
      s.failures++;
      enqueueAfter(key, std::min<std::chrono::milliseconds>(delay, options_.max_backoff));
      break;
    }
  }
  if (s.dirty) {
    s.dirty = false;
    enqueue(key);
  }
  pump();
}

asio::awaitable<Controller::Outcome> Controller::reconcileKey(const std::string& key) {
  auto [ns, name] = splitKey(key);
  std::shared_ptr<const ParallelJob> job = jobs_.get(ns, name);
  if (!job) {
    keys_.erase(key);  // safe: process() re-creates the entry it needs
    co_return Outcome::kDone;
  }
  Observation obs;
  obs.job = job.get();
  for (auto& pod : pods_.byIndex(kPodsByJobIndex, job->meta.uid)) {
    const proto::OwnerReference* ref = pod->meta.controllerRef();
    if (ref != nullptr && ref->uid == job->meta.uid) obs.pods.push_back(std::move(pod));
  }
  if (auto it = deleted_.find(job->meta.uid); it != deleted_.end()) obs.deleted = it->second;
  if (nodes_ && nodes_->hasSynced())
    obs.node_exists = [this](const std::string& node) { return nodes_->get("", node) != nullptr; };
  obs.jobs = directory_.get();
  obs.now_time = options_.clock();
  obs.now = proto::rfc3339(obs.now_time);

  Plan plan = reconcile(obs, runtimes_);
  keys_[key].requeue_after = plan.requeue_after;
  MUSTER_LOG_INFO(4, "Reconciled ParallelJob", "paralleljob", key, "attempt", plan.attempt.group,
                  "why", plan.why);

  // Whether the status was refused for what it says; the plan's deletes still run then.
  bool status_refused = false;
  if (plan.status) {
    auto written = co_await api_->patchStatus(
        proto::resources::kParallelJobs, ns, name,
        statusPatchWithPrecondition(*plan.status, job->meta.resource_version));
    if (!written.ok()) {
      if (proto::isConflict(written.status())) {
        MUSTER_LOG_INFO(3, "ParallelJob status conflict, retrying", "paralleljob", key);
        co_return Outcome::kRetry;
      }
      if (proto::isNotFound(written.status())) co_return Outcome::kDone;
      MUSTER_LOG_WARNING("ParallelJob status write failed", "paralleljob", key, "error",
                         written.status().ToString());
      if (!statusRefusedForGood(written.status())) co_return Outcome::kError;
      // The same status would be refused again: the job must not keep its nodes for it.
      status_refused = true;
      events_.event(*job, "Warning", "StatusRefused",
                    "the API server refused the job's status (" +
                        std::string(written.status().message()).substr(0, 512) +
                        "); its pods are still deleted as planned, nothing is created until the "
                        "status can be written");
    }
  }
  if (status_refused) {
    plan.events.clear();  // they describe a status that was not written
    plan.annotate_pods.clear();
    plan.delete_job = false;
    plan.create_pods_needed = false;
  } else if (plan.status) {
    if (plan.status->phase != job->status.phase) {
      m().transitions.with({plan.status->phase}).inc();
      MUSTER_LOG_INFO(2, "ParallelJob phase changed", "paralleljob", key, "from",
                      job->status.phase.empty() ? "<new>" : job->status.phase, "to",
                      plan.status->phase, "restarts", plan.status->restarts, "group",
                      plan.status->job_group_name, "message", plan.status->message);
    }
    if (plan.status->restarts > job->status.restarts) m().restarts.inc();
    if (plan.status->preemptions > job->status.preemptions) m().preemptions.inc();
  }
  for (auto& e : plan.events) events_.event(*job, e.type, e.reason, e.message);

  absl::Status result;
  std::vector<std::function<asio::awaitable<absl::Status>()>> deletes;
  for (const PodRef& pod : plan.delete_pods) {
    deletes.push_back([this, ns = ns, pod]() -> asio::awaitable<absl::Status> {
      auto r = co_await api_->remove(proto::resources::kPods, ns, pod.name, pod.uid);
      if (r.ok() || proto::isNotFound(r.status()) || proto::isConflict(r.status()))
        co_return absl::OkStatus();
      co_return r.status();
    });
  }
  if (!deletes.empty()) {
    MUSTER_LOG_INFO(2, "Deleting ParallelJob pods", "paralleljob", key, "count", deletes.size(),
                    "why", plan.why);
    result.Update(co_await runAll(strand_, std::move(deletes)));
  }
  if (plan.delete_support)
    result.Update(co_await deleteAttemptSupport(*job, *plan.delete_support, obs.pods));
  for (const PodAnnotation& a : plan.annotate_pods) {
    // The pod's UID in the patch: a pod replaced under the same name refuses it.
    proto::JsonWriter w;
    w.beginObject().key("metadata").beginObject().stringField("uid", a.pod.uid);
    w.key("annotations").beginObject().stringField(a.key, a.value).endObject();
    w.endObject().endObject();
    auto r = co_await api_->patch(proto::resources::kPods, ns, a.pod.name, w.str());
    if (r.ok())
      MUSTER_LOG_INFO(2, "Annotated ParallelJob pod", "paralleljob", key, "pod", a.pod.name,
                      "annotation", a.key, "value", a.value);
    else if (!proto::isNotFound(r.status()) && !proto::isConflict(r.status()))
      result.Update(r.status());
  }

  if (plan.delete_job && result.ok()) {
    auto r = co_await api_->remove(proto::resources::kParallelJobs, ns, name, job->meta.uid);
    if (r.ok() || proto::isNotFound(r.status()) || proto::isConflict(r.status()))
      MUSTER_LOG_INFO(2, "Deleted ParallelJob", "paralleljob", key, "why", plan.why);
    else
      result.Update(r.status());
  }
  if (plan.create_pods_needed) {
    const Runtime* runtime = runtimes_.find(job->spec.runtime_ref_name);
    if (runtime != nullptr)
      result.Update(co_await createAttempt(*job, *runtime, plan.attempt, obs.pods, plan.create_pods));
  }
  if (!result.ok()) {
    MUSTER_LOG_WARNING("ParallelJob reconcile incomplete", "paralleljob", key, "error",
                       result.ToString());
    co_return Outcome::kError;
  }
  co_return status_refused ? Outcome::kError : Outcome::kDone;  // the status again, with backoff
}

namespace {

bool ofAttempt(const Pod& pod, const AttemptInfo& attempt) {
  auto it = pod.meta.labels.find(vocab::kJobSetNameLabel);
  return it != pod.meta.labels.end() && it->second == attempt.group;
}

// The SSH Secret the attempt's pods mount: recorded on them, or, on pods an older Muster created,
// the name it used. "" when the attempt has no pod.
std::string secretOfPods(const ParallelJob& job, const AttemptInfo& attempt,
                         const std::vector<std::shared_ptr<const Pod>>& pods) {
  bool any = false;
  for (const auto& pod : pods) {
    if (!ofAttempt(*pod, attempt)) continue;
    any = true;
    auto it = pod->meta.annotations.find(kSshSecretAnnotation);
    if (it != pod->meta.annotations.end() && !it->second.empty()) return it->second;
  }
  return any ? legacySecretName(attempt.group, job.meta.uid) : "";
}

}  // namespace

asio::awaitable<absl::Status> Controller::createAttempt(
    const ParallelJob& job, const Runtime& runtime, AttemptInfo attempt,
    const std::vector<std::shared_ptr<const Pod>>& pods, const std::vector<int32_t>& indices) {
  const std::string memo = job.meta.uid + "/" + attempt.group;
  if (auto it = support_created_.find(memo); it != support_created_.end()) {
    attempt.ssh_secret = it->second;
  } else {
    attempt.ssh_secret = secretOfPods(job, attempt, pods);
    const bool has_pods = std::any_of(pods.begin(), pods.end(),
                                      [&](const auto& pod) { return ofAttempt(*pod, attempt); });
    SupportResult support = co_await ensureSupport(*api_, job, runtime, attempt, has_pods);
    for (const EventSpec& e : support.events) events_.event(job, e.type, e.reason, e.message);
    if (!support.status.ok()) co_return support.status;
    attempt.ssh_secret = support.ssh_secret;
    support_created_[memo] = support.ssh_secret;
  }
  MUSTER_LOG_INFO(2, "Creating ParallelJob pods", "paralleljob", proto::objectKey(job), "attempt",
                  attempt.group, "count", indices.size());
  BatchResult created =
      co_await createPodsInBatches(*api_, strand_, job, runtime, attempt, indices);
  if (!created.status.ok() && created.started < indices.size()) {
    MUSTER_LOG_INFO(2, "Stopped creating ParallelJob pods after a batch with an error",
                    "paralleljob", proto::objectKey(job), "started", created.started, "of",
                    indices.size(), "error", created.status.ToString());
  }
  co_return created.status;
}

asio::awaitable<absl::Status> Controller::deleteAttemptSupport(
    const ParallelJob& job, const AttemptInfo& attempt,
    const std::vector<std::shared_ptr<const Pod>>& pods) {
  const std::string memo = job.meta.uid + "/" + attempt.group;
  std::vector<std::string> secrets;
  if (auto it = support_created_.find(memo); it != support_created_.end()) {
    if (!it->second.empty()) secrets.push_back(it->second);
    support_created_.erase(it);
  }
  if (std::string s = secretOfPods(job, attempt, pods);
      !s.empty() && std::find(secrets.begin(), secrets.end(), s) == secrets.end())
    secrets.push_back(s);
  co_return co_await deleteSupport(*api_, job, attempt, secrets);
}

}  // namespace muster::jobengine
