#pragma once

// A runtime turns a ParallelJob into the objects of one attempt. The controller (controller.h)
// decides when an attempt starts and ends; a runtime only says what an attempt is made of.
//
// Contract:
// - buildSupport() returns the objects created before the pods (Service, Secret, ConfigMap ...).
//   It may generate secrets, so it is called once per attempt by a given process; objects that
//   already exist are kept (creation is "create if absent").
// - buildPod() is deterministic: the same job and attempt give the same pod, so a pod that has to
//   be created again (after an eviction by Muster's scheduler) matches its siblings.
// - Both check what they need from the spec and return InvalidArgument with a message written for
//   the job's owner; the controller then fails the job without creating anything.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/naming.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "proto/client.h"
#include "proto/objects.h"

namespace muster::jobengine {

namespace vocab = proto::vocabulary;  // the names Muster uses on API objects


struct RuntimeOptions {
  std::string scheduler_name = proto::vocabulary::kDefaultSchedulerName;  // unless the pod template sets one
  std::string cluster_domain = kDefaultClusterDomain;  // jobEngine.clusterDomain
  // Muster's own image (it holds muster-topology). Pods asking for nvidia.com/gpu or
  // preferred.jp/rdma get a first init container from it that runs `muster-topology rdma-conf`.
  // Empty: no such init container is added (the NCCL/UCX files stay settings-free placeholders).
  std::string rdma_conf_image;
  slurm::SlurmConfig slurm;  // the Slurm partitions (the slurm runtime)
};

struct AttemptInfo {
  AttemptInfo() = default;
  AttemptInfo(int32_t attempt_in, std::string group_in, std::string ssh_secret_in = "")
      : attempt(attempt_in), group(std::move(group_in)), ssh_secret(std::move(ssh_secret_in)) {}

  int32_t attempt = 0;  // == status.restarts while the attempt runs
  std::string group;    // groupName(job, attempt)
  // The attempt's SSH Secret, named by the API server when it was created (generateName
  // secretNamePrefix(group)); "" before that. Pods mount it and record it (kSshSecretAnnotation).
  std::string ssh_secret;
};

// The most pods a ParallelJob may have (the CRD's spec.numPods maximum): every pod is one line of
// the hostfile ConfigMap, which must stay under the 1 MiB the API server allows. With the longest
// names Kubernetes allows and cluster.local a line is 216 bytes: 4096 lines are 864 KiB.
inline constexpr int32_t kMaxNumPods = 4096;
// What the API server accepts in one ConfigMap's data.
inline constexpr size_t kMaxConfigMapBytes = 1024 * 1024;
// InvalidArgument, written for the job's owner, when spec.numPods is outside 1..kMaxNumPods.
absl::Status checkNumPods(const proto::ParallelJob& job);

// One object to create: where, its name, and the JSON body.
struct ApiObject {
  const proto::Resource* resource = nullptr;
  std::string name;
  std::string body;
};

// What a part of an attempt that failed means for the job (Runtime::onFailure).
enum class FailureKind {
  kPodFailed,   // phase Failed
  kPodDeleted,  // deleted (not by Muster's gang rollback) or gone
  kNodeLost,    // bound to a node that no longer exists
};

struct FailureVerdict {
  bool restart = true;  // the whole job is run again while restarts are left
  // When the job ends now: the Failed condition's reason (CamelCase) and a note for the message.
  std::string reason = "MaxRestartsExceeded";
};

// The Failed condition's reason of a cancelled job (Runtime::cancelled).
inline constexpr char kReasonCancelled[] = "Cancelled";

// The job condition a preemption by Muster's scheduler sets (reconcile.h): True, reason
// Preempted, from the moment the engine sees a pod of the attempt marked with the pod condition
// vocab::kPreemptedCondition until the requeued attempt runs again (then False, reason
// Requeued). Also the Failed reason of a job that is not requeued (Runtime::requeueOnPreemption).
inline constexpr char kConditionPreempted[] = "Preempted";
inline constexpr char kReasonPreempted[] = "Preempted";
// Whether the status is that of a preempted job whose attempt's pods are still being deleted
// (condition Preempted True and PodsCreated False with reason Preempted): the requeued attempt's
// pods are created once none is left.
bool preemptedPodsGoing(const proto::ParallelJobStatus& status);

// Whether an attempt may create its pods now (Runtime::startGate).
struct StartGate {
  bool open = true;
  std::string reason;   // why not, CamelCase (JobHeldUser, BeginTime, Dependency)
  std::string message;  // for a person
  std::optional<absl::Duration> recheck_after;  // look again then (a begin time)
  // The job can never start (a dependency that can never be met): it ends now, Failed with
  // `reason`, and its pods are deleted.
  bool end_job = false;
};

// The other ParallelJobs a job's start may wait on (Slurm dependencies), as the controller's
// cache holds them. Keys are what Runtime::knownAs returns.
class JobDirectory {
 public:
  virtual ~JobDirectory() = default;
  virtual std::shared_ptr<const proto::ParallelJob> get(std::string_view ns,
                                                        std::string_view name) const = 0;
  virtual std::vector<std::shared_ptr<const proto::ParallelJob>> knownAs(
      const std::string& key) const = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string_view name() const = 0;
  virtual absl::StatusOr<std::vector<ApiObject>> buildSupport(const proto::ParallelJob& job,
                                                              const AttemptInfo& attempt) const = 0;
  virtual absl::StatusOr<std::string> buildPod(const proto::ParallelJob& job,
                                               const AttemptInfo& attempt, int32_t index) const = 0;

  // Optional policy, with the Open MPI runtime's behaviour as the default:
  //
  // How a failure of pod `index` is handled: by default every failure restarts the whole job.
  virtual FailureVerdict onFailure(const proto::ParallelJob& /*job*/, int32_t /*index*/,
                                   FailureKind /*kind*/, const proto::Pod* /*pod*/) const {
    return {};
  }
  // Whether the attempt's pods may be created now (default: always). `jobs` is null when no
  // cache of other jobs is at hand (a job that waits on others then stays closed).
  virtual StartGate startGate(const proto::ParallelJob& /*job*/, absl::Time /*now*/,
                              const JobDirectory* /*jobs*/) const {
    return {};
  }
  // Keys of the jobs this one's start waits on: "namespace/name" of a ParallelJob, or a key
  // another job is knownAs. When such a job changes, this one is reconciled again.
  virtual std::vector<std::string> waitsOn(const proto::ParallelJob& /*job*/) const { return {}; }
  // Keys, beyond "namespace/name", under which other jobs may wait on this one.
  virtual std::vector<std::string> knownAs(const proto::ParallelJob& /*job*/) const { return {}; }
  // Whether the job was cancelled (scancel): a message for the Failed condition (reason
  // Cancelled); the job ends at once and every pod of it is deleted. nullopt: not cancelled.
  virtual std::optional<std::string> cancelled(const proto::ParallelJob& /*job*/) const {
    return std::nullopt;
  }
  // Whether the attempt in progress (or the one the job ended with) is to run again (scontrol
  // requeue): a message; its pods are deleted and the next attempt starts, whatever the phase
  // and maxRestarts. nullopt: not asked.
  virtual std::optional<std::string> requeueRequested(const proto::ParallelJob& /*job*/) const {
    return std::nullopt;
  }
  // Whether a job that Muster's scheduler preempted is requeued (its attempt's pods deleted and
  // created again, restarts unchanged) rather than ended Failed with reason Preempted. Default:
  // requeued.
  virtual bool requeueOnPreemption(const proto::ParallelJob& /*job*/) const { return true; }
  // How long an attempt may run; nullopt: no limit. It runs from when the launcher pod's launcher
  // container started, as the kubelet reports it (startedAt), or, while none is reported, from
  // when all its pods ran. Past it the job ends with reason TimeLimitExceeded and its pods are
  // deleted.
  virtual std::optional<absl::Duration> timeLimit(const proto::ParallelJob& /*job*/) const {
    return std::nullopt;
  }
  // When a job that ended is deleted (Slurm's accounting retention); nullopt: never.
  virtual std::optional<absl::Time> expiresAt(const proto::ParallelJob& /*job*/) const {
    return std::nullopt;
  }
  // Annotations the engine keeps on pod `index` of the attempt while it runs (written at
  // creation, and patched on a live pod whose value differs): requests that reach a running
  // pod through a downward API volume, such as scancel --signal. Default: none.
  virtual std::map<std::string, std::string> podAnnotations(const proto::ParallelJob& /*job*/,
                                                            int32_t /*index*/) const {
    return {};
  }
  // Whether the pods of the last attempt stay when the job fails (for kubectl logs). The default
  // keeps them all; a runtime whose idle pods hold nodes (workers running sshd) keeps fewer.
  virtual bool keepOnFailure(int32_t /*index*/) const { return true; }
  // A Secret the job brings for its pods to mount (Slurm's batch Secret, spec.slurm.batchSecret):
  // its name, "" for none (the default). The engine reads it (ensureSupport, attempt_objects.h)
  // before it creates anything of an attempt: while it does not exist the attempt waits
  // (retried), and when checkJobSecret refuses it the job fails, reason InvalidSpec.
  virtual std::string jobSecret(const proto::ParallelJob& /*job*/) const { return ""; }
  // Whether the job may mount that Secret, given its metadata as the API server has it: OK, or
  // InvalidArgument with a message for the job's owner that names the Secret and says why not.
  virtual absl::Status checkJobSecret(const proto::ParallelJob& /*job*/,
                                      const proto::ObjectMeta& /*secret*/) const {
    return absl::OkStatus();
  }
  // Adds runtime-specific status (status.slurm) to the status the engine is about to write.
  // `launcher` is the attempt's pod 0 when it exists.
  virtual void decorateStatus(const proto::ParallelJob& /*job*/, const proto::Pod* /*launcher*/,
                              absl::Time /*now*/, const JobDirectory* /*jobs*/,
                              proto::ParallelJobStatus* /*status*/) const {}
};
using RuntimePtr = std::unique_ptr<Runtime>;

class RuntimeRegistry {
 public:
  void add(RuntimePtr runtime);
  const Runtime* find(std::string_view name) const;  // nullptr when unknown
  std::vector<std::string> names() const;

 private:
  std::map<std::string, RuntimePtr, std::less<>> runtimes_;
};

// Every runtime Muster ships: mpi-openmpi and slurm.
RuntimeRegistry defaultRuntimes(const RuntimeOptions& options);

// The labels every object of an attempt carries (uid, job name when valid, attempt, jobset-name).
std::map<std::string, std::string> attemptLabels(const proto::ParallelJob& job,
                                                 const AttemptInfo& attempt);

}  // namespace muster::jobengine
