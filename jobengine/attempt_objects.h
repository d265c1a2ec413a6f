#pragma once

// Creating and deleting the objects of one attempt through the JobApi seam (api.h). The
// controller (controller.h) runs these on its strand; unit tests run them against a fake.
//
// - Pods are created in slow-start batches, as the Kubernetes Job controller does: one pod, then
//   2, 4, 8, ... up to kMaxPodCreateBatch at a time, and no further batch after one in which a
//   create failed. A failing API server (quota, admission webhook, overload) sees a handful of
//   requests per retry, not numPods. The gang is still complete as soon as every pod exists: the
//   scheduler binds none of it before then.
// - The SSH Secret is created with generateName: its name is chosen by the API server when it is
//   created, so nobody can create a Secret under that name beforehand for the engine to take as its
//   own (an owner reference proves nothing: whoever creates an object may write any). The name is
//   recorded on every pod of the attempt (annotation kSshSecretAnnotation) and in the controller's
//   memory. A crash between creating the Secret and creating the first pod leaves that Secret
//   unused; it is owned by the job and goes with it.
// - The headless Service and the ConfigMap have fixed names (the Service's is the pods' DNS
//   subdomain, the ConfigMap's is what users look up). One that exists is used only if its
//   controller is this job (same UID); the ConfigMap, whose scripts run in every pod, also only if
//   its data is exactly what this engine writes, or if pods of the attempt already use it. An owned
//   ConfigMap with other data and no pod using it (written by an older Muster) is deleted and
//   created again. One whose controller is an earlier ParallelJob of the same name (deleted and
//   created again before the garbage collector got to its objects) is deleted, by UID, and made
//   again: that job is gone, and the collector would delete it anyway. Anything else is a name
//   taken by a foreign object: nothing of it is used or touched, a Warning Event NameTaken says so
//   on the job, and the attempt waits (retried with backoff) until the name is free. The Secret is created last, once both names are settled.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jobengine/api.h"
#include "jobengine/reconcile.h"
#include "jobengine/runtime.h"
#include "proto/asio.h"
#include "proto/objects.h"

namespace muster::jobengine {

inline constexpr size_t kMaxPodCreateBatch = 256;

using Task = std::function<proto::asio::awaitable<absl::Status>()>;

// Runs every task concurrently on `strand` and waits for all; returns the first error.
proto::asio::awaitable<absl::Status> runAll(proto::asio::strand<proto::asio::any_io_executor> strand,
                                            std::vector<Task> tasks);

struct BatchResult {
  absl::Status status;  // the first error
  size_t started = 0;   // creates started (all of them when status is OK)
  std::vector<size_t> batches;  // the size of each batch, in order
};
// `create(index)` for every index, in slow-start batches (above), each batch concurrently.
proto::asio::awaitable<BatchResult> createInBatches(
    proto::asio::strand<proto::asio::any_io_executor> strand, const std::vector<int32_t>& indices,
    std::function<proto::asio::awaitable<absl::Status>(int32_t)> create,
    size_t max_batch = kMaxPodCreateBatch);

// The attempt's pods `indices` (bodies from runtime.buildPod), created in slow-start batches; a
// pod that exists already counts as created.
proto::asio::awaitable<BatchResult> createPodsInBatches(
    JobApi& api, proto::asio::strand<proto::asio::any_io_executor> strand,
    const proto::ParallelJob& job, const Runtime& runtime, const AttemptInfo& attempt,
    const std::vector<int32_t>& indices);

struct SupportResult {
  absl::Status status;
  std::string ssh_secret;         // the attempt's SSH Secret, when status is OK
  std::vector<EventSpec> events;  // for the job (NameTaken)
};
// Creates what `runtime` builds for the attempt before its pods (Service, SSH Secret, ConfigMap),
// as described above. `attempt.ssh_secret`, when set, is the attempt's Secret already (none is
// created); `attempt_has_pods` says whether pods of the attempt exist.
// First the Secret the job brings (Runtime::jobSecret, Slurm's batch Secret) is read: while it
// does not exist nothing is created (a Normal Event WaitingForSecret, an error: retried); when
// Runtime::checkJobSecret refuses it, the job's status is written Failed, reason InvalidSpec (at
// `now`), with a Warning Event InvalidSpec naming the Secret, and nothing is created.
proto::asio::awaitable<SupportResult> ensureSupport(JobApi& api, const proto::ParallelJob& job,
                                                    const Runtime& runtime,
                                                    const AttemptInfo& attempt,
                                                    bool attempt_has_pods,
                                                    absl::Time now = absl::Now());

// Deletes the attempt's Service and ConfigMap (only those whose controller is this job) and the
// named SSH Secrets (the ones recorded on its pods and in memory).
proto::asio::awaitable<absl::Status> deleteSupport(JobApi& api, const proto::ParallelJob& job,
                                                   const AttemptInfo& attempt,
                                                   const std::vector<std::string>& ssh_secrets);

}  // namespace muster::jobengine
