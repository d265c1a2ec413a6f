#include "jobengine/attempt_objects.h"

#include <algorithm>
#include <map>
#include <memory>

#include "jobengine/naming.h"
#include "proto/codec.h"
#include "proto/concurrently.h"
#include "proto/coroutine.h"
#include "proto/informer.h"
#include "proto/json.h"
#include "proto/log.h"

namespace muster::jobengine {
namespace asio = proto::asio;

namespace {

std::string kindOf(const proto::Resource& r) {
  if (&r == &proto::resources::kServices) return "Service";
  if (&r == &proto::resources::kSecrets) return "Secret";
  if (&r == &proto::resources::kConfigMaps) return "ConfigMap";
  return r.plural;
}

absl::StatusOr<proto::ObjectMeta> metaOf(const rapidjson::Value& doc, std::string_view what) {
  proto::ObjectMeta meta;
  const rapidjson::Value* m = proto::findField(doc, "metadata");
  if (m == nullptr || !proto::decode(*m, &meta).ok())
    return absl::InternalError("cannot read the metadata of " + std::string(what));
  return meta;
}

// The metadata of the object `name` (GET, then its metadata decoded); the API's status as it came
// (NotFound included) when it cannot be read.
asio::awaitable<absl::StatusOr<proto::ObjectMeta>> getMeta(JobApi& api, const proto::Resource& resource,
                                                           const std::string& ns, const std::string& name,
                                                           std::string_view what) {
  auto got = co_await api.get(resource, ns, name);
  if (!got.ok()) co_return got.status();
  auto doc = proto::parseJson(*got);
  if (!doc.ok()) co_return doc.status();
  co_return metaOf(*doc, what);
}

// Deletes the object that stands under obj's name (only the one with `uid`) and creates obj.
asio::awaitable<absl::Status> recreate(JobApi& api, const ApiObject& obj, const std::string& ns,
                                       const std::string& uid) {
  auto removed = co_await api.remove(*obj.resource, ns, obj.name, uid);
  if (!removed.ok() && !proto::isNotFound(removed.status())) co_return removed.status();
  auto again = co_await api.create(*obj.resource, ns, obj.body);
  co_return again.status();
}

// The ConfigMap's `data` as this engine writes it and as the API server has it.
bool sameData(const rapidjson::Value& ours, const rapidjson::Value& theirs) {
  const rapidjson::Value* a = proto::findField(ours, "data");
  const rapidjson::Value* b = proto::findField(theirs, "data");
  if (a == nullptr || b == nullptr) return a == b;
  return *a == *b;  // deep, member order does not matter
}

std::string describeController(const proto::ObjectMeta& meta) {
  const proto::OwnerReference* ref = meta.controllerRef();
  if (ref == nullptr) return "it has no controller";
  return "its controller is " + ref->kind + " " + ref->name + " (uid " + ref->uid + ")";
}

// Whether `ref` names an earlier ParallelJob of `job`'s name (same namespace: owner references
// never cross one). Names are unique, so that job no longer exists.
bool leftByEarlierJob(const proto::OwnerReference& ref, const proto::ParallelJob& job) {
  return ref.kind == "ParallelJob" && ref.name == job.meta.name &&
         ref.api_version.rfind("preferred.jp/", 0) == 0;
}

asio::awaitable<absl::Status> createOne(JobApi& api, std::string ns, std::string name,
                                        std::string body) {
  auto created = co_await api.create(proto::resources::kPods, ns, std::move(body));
  if (created.ok()) {
    MUSTER_LOG_INFO(3, "Created pod", "pod", proto::objectKey(ns, name));
    co_return absl::OkStatus();
  }
  // Already there: the informer has not shown it yet; it will.
  if (proto::isAlreadyExists(created.status())) co_return absl::OkStatus();
  co_return created.status();
}

// The job's own Secret (Runtime::jobSecret), read before anything of the attempt is created.
// OK: it may be mounted. Otherwise `result` says why not: the Secret is not there yet (the
// attempt waits, retried), or the runtime refuses it (the job is failed here, reason InvalidSpec,
// with a Warning Event naming the Secret; no pod is created).
asio::awaitable<bool> jobSecretUsable(JobApi& api, const proto::ParallelJob& job,
                                      const Runtime& runtime, absl::Time now,
                                      SupportResult& result) {
  const std::string name = runtime.jobSecret(job);
  if (name.empty()) co_return true;
  const std::string& ns = job.meta.namespace_;
  const std::string what = "Secret " + proto::objectKey(ns, name);
  auto meta = co_await getMeta(api, proto::resources::kSecrets, ns, name, what);
  if (!meta.ok()) {
    if (proto::isNotFound(meta.status())) {
      std::string message = what + ", which the job's pods mount, does not exist yet; no pod is "
                            "created until it does (sbatch creates it right after the job)";
      result.events.push_back({"Normal", "WaitingForSecret", message});
      result.status = absl::UnavailableError(message);
    } else {
      result.status = meta.status();
    }
    co_return false;
  }
  if (meta->name.empty()) meta->name = name;
  absl::Status checked = runtime.checkJobSecret(job, *meta);
  if (checked.ok()) co_return true;
  if (checked.code() != absl::StatusCode::kInvalidArgument) {
    result.status = checked;
    co_return false;
  }
  const std::string message = "the job cannot run: " + std::string(checked.message()) +
                              ". No pods were created";
  result.events.push_back({"Warning", "InvalidSpec", message});
  // The job ends as reconcile ends one with an invalid spec; the next reconcile sees it Failed.
  proto::ParallelJobStatus failed = failedStatus(job.status, "InvalidSpec", message, proto::rfc3339(now));
  auto written = co_await api.patchStatus(proto::resources::kParallelJobs, ns, job.meta.name,
                                          proto::statusPatch(failed));
  if (!written.ok() && !proto::isNotFound(written.status())) {
    result.status = written.status();
    co_return false;
  }
  MUSTER_LOG_INFO(2, "Failed ParallelJob: its Secret may not be mounted", "paralleljob",
                  proto::objectKey(job), "secret", proto::objectKey(ns, name), "why",
                  checked.message());
  result.status = absl::FailedPreconditionError(message);
  co_return false;
}

}  // namespace

asio::awaitable<absl::Status> runAll(asio::strand<asio::any_io_executor> strand,
                                     std::vector<Task> tasks) {
  absl::Status first_error;
  const size_t all = tasks.size();
  auto run = [&first_error](const Task& task) -> asio::awaitable<void> {
    absl::Status s = co_await task();
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  };
  co_await proto::forEachConcurrently(std::move(strand), std::move(tasks), all, std::move(run));
  co_return first_error;
}

asio::awaitable<BatchResult> createInBatches(
    asio::strand<asio::any_io_executor> strand, const std::vector<int32_t>& indices,
    std::function<asio::awaitable<absl::Status>(int32_t)> create, size_t max_batch) {
  BatchResult result;
  size_t next = 0;
  size_t size = 1;
  max_batch = std::max<size_t>(1, max_batch);
  while (next < indices.size()) {
    const size_t n = std::min({size, max_batch, indices.size() - next});
    std::vector<Task> tasks;
    for (size_t k = 0; k < n; ++k)
      tasks.push_back([&create, index = indices[next + k]] { return create(index); });
    next += n;
    result.started += n;
    result.batches.push_back(n);
    absl::Status s = co_await runAll(strand, std::move(tasks));
    if (!s.ok()) {
      result.status = std::move(s);
      co_return result;
    }
    size = std::min(size * 2, max_batch);
  }
  co_return result;
}

asio::awaitable<SupportResult> ensureSupport(JobApi& api, const proto::ParallelJob& job,
                                             const Runtime& runtime, const AttemptInfo& attempt,
                                             bool attempt_has_pods, absl::Time now) {
  SupportResult result;
  result.ssh_secret = attempt.ssh_secret;
  const std::string& ns = job.meta.namespace_;
  auto objects = runtime.buildSupport(job, attempt);
  if (!objects.ok()) {
    result.status = objects.status();
    co_return result;
  }
  const bool usable = co_await jobSecretUsable(api, job, runtime, now, result);
  if (!usable) co_return result;
  // The objects with fixed names first: when one of those names is taken the attempt waits, and
  // no Secret is created on each retry meanwhile.
  std::stable_partition(objects->begin(), objects->end(), [](const ApiObject& o) {
    return o.resource != &proto::resources::kSecrets;
  });
  for (const ApiObject& obj : *objects) {
    const bool secret = obj.resource == &proto::resources::kSecrets;
    if (secret && !result.ssh_secret.empty()) continue;  // the attempt has its Secret
    auto created = co_await api.create(*obj.resource, ns, obj.body);
    if (created.ok()) {
      std::string name = obj.name;
      if (secret) {
        auto doc = proto::parseJson(*created);
        if (!doc.ok()) {
          result.status = doc.status();
          co_return result;
        }
        auto meta = metaOf(*doc, "the created Secret");
        if (!meta.ok() || meta->name.empty()) {
          result.status = absl::InternalError("the API server returned no name for the SSH Secret");
          co_return result;
        }
        name = result.ssh_secret = meta->name;
      }
      MUSTER_LOG_INFO(3, "Created", "resource", obj.resource->plural, "object",
                      proto::objectKey(ns, name));
      continue;
    }
    // generateName never meets an existing name: anything else is an error (retried).
    if (secret || !proto::isAlreadyExists(created.status())) {
      result.status = created.status();
      co_return result;
    }
    const std::string what = kindOf(*obj.resource) + " " + proto::objectKey(ns, obj.name);
    auto existing = co_await api.get(*obj.resource, ns, obj.name);
    if (!existing.ok()) {
      // Deleted meanwhile: created on the next try.
      result.status = existing.status();
      co_return result;
    }
    auto theirs = proto::parseJson(*existing);
    if (!theirs.ok()) {
      result.status = theirs.status();
      co_return result;
    }
    auto meta = metaOf(*theirs, what);
    if (!meta.ok()) {
      result.status = meta.status();
      co_return result;
    }
    const proto::OwnerReference* ref = meta->controllerRef();
    if (ref != nullptr && ref->uid != job.meta.uid && leftByEarlierJob(*ref, job)) {
      // An earlier ParallelJob of this name owned it; that job is gone (this one holds the name
      // now), so the garbage collector is about to delete the object. Deleting it now, by UID, is
      // all the collector would do, and spares a job deleted and created again a wait with
      // backoff.
      MUSTER_LOG_INFO(2, "Deleting what an earlier ParallelJob of the same name left",
                      "object", what, "owner", ref->uid);
      result.status = co_await recreate(api, obj, ns, meta->uid);
      if (!result.status.ok()) co_return result;
      continue;
    }
    if (ref == nullptr || ref->uid != job.meta.uid) {
      std::string message = what + " already exists and is not this ParallelJob's (" +
                            describeController(*meta) +
                            "): the job engine does not use it and creates no pods until the name "
                            "is free; delete or rename that object";
      result.events.push_back({"Warning", "NameTaken", message});
      result.status = absl::FailedPreconditionError(message);
      co_return result;
    }
    if (meta->deletion_timestamp) {
      result.status = absl::UnavailableError(what + " is being deleted; created again once gone");
      co_return result;
    }
    if (obj.resource != &proto::resources::kConfigMaps) continue;  // ours: kept as it is
    auto ours = proto::parseJson(obj.body);
    if (!ours.ok()) {
      result.status = ours.status();
      co_return result;
    }
    if (sameData(*ours, *theirs)) continue;
    if (attempt_has_pods) {
      // The attempt's pods already run with it: a pod created again must match its siblings.
      MUSTER_LOG_INFO(2, "Keeping the attempt's ConfigMap, which pods use, though its data differs",
                      "configmap", proto::objectKey(ns, obj.name));
      continue;
    }
    // This job's, but not what this engine writes (an older Muster), and no pod uses it yet.
    MUSTER_LOG_INFO(2, "Replacing the attempt's ConfigMap: its data is not what this engine writes",
                    "configmap", proto::objectKey(ns, obj.name));
    result.status = co_await recreate(api, obj, ns, meta->uid);
    if (!result.status.ok()) co_return result;
  }
  co_return result;
}

asio::awaitable<absl::Status> deleteSupport(JobApi& api, const proto::ParallelJob& job,
                                            const AttemptInfo& attempt,
                                            const std::vector<std::string>& ssh_secrets) {
  absl::Status result;
  const std::string& ns = job.meta.namespace_;
  const std::pair<const proto::Resource*, std::string> named[] = {
      {&proto::resources::kServices, attempt.group},
      {&proto::resources::kConfigMaps, configMapName(attempt.group)}};
  for (const auto& [resource, name] : named) {
    auto meta = co_await getMeta(api, *resource, ns, name, name);
    if (!meta.ok()) {
      if (!proto::isNotFound(meta.status())) result.Update(meta.status());
      continue;
    }
    const proto::OwnerReference* ref = meta->controllerRef();
    if (ref == nullptr || ref->uid != job.meta.uid) continue;  // not ours: never touched
    auto r = co_await api.remove(*resource, ns, name, meta->uid);
    if (!r.ok() && !proto::isNotFound(r.status()) && !proto::isConflict(r.status()))
      result.Update(r.status());
  }
  for (const std::string& name : ssh_secrets) {
    auto r = co_await api.remove(proto::resources::kSecrets, ns, name, "");
    if (!r.ok() && !proto::isNotFound(r.status())) result.Update(r.status());
  }
  co_return result;
}

asio::awaitable<BatchResult> createPodsInBatches(JobApi& api,
                                                 asio::strand<asio::any_io_executor> strand,
                                                 const proto::ParallelJob& job,
                                                 const Runtime& runtime,
                                                 const AttemptInfo& attempt,
                                                 const std::vector<int32_t>& indices) {
  std::map<int32_t, std::string> bodies;
  for (int32_t index : indices) {
    auto body = runtime.buildPod(job, attempt, index);
    if (!body.ok()) {
      BatchResult failed;
      failed.status = body.status();
      co_return failed;
    }
    bodies[index] = *std::move(body);
  }
  const std::string ns = job.meta.namespace_;
  co_return co_await createInBatches(
      strand, indices, [&api, &bodies, &ns, &attempt](int32_t index) {
        return createOne(api, ns, podName(attempt.group, index), bodies.at(index));
      });
}

}  // namespace muster::jobengine
