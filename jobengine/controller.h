#pragma once

// The ParallelJob controller: the process's shared informers on ParallelJobs, pods (those a
// ParallelJob controls, by owner reference and the muster.dev/paralleljob-uid label) and nodes
// feed a work queue of job keys; each key is reconciled by at most one coroutine at a time
// (reconcile.h decides, this class executes the plan). The queue is fair between the jobs' owners
// (fair_queue.h, jobOwner below): one owner's thousands of queued jobs delay another owner's job
// by one reconcile per owner with work, not by thousands. Events go through the process's
// EventRecorder.
//
// Threading: all state below lives on strand_. Informer handlers post to it; reconciles run as
// coroutines on it and await API calls. A job whose reconcile fails is retried with exponential
// backoff (0.5 s → 30 s) without holding up other jobs; conflicts on the status write are retried
// at once with the newer object. Every job is also re-reconciled every `resync` as a safety net.
//
// Nothing is reconciled before all informers have synced, so a pod that merely is not listed yet
// is never taken for a deleted one.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "jobengine/api.h"
#include "jobengine/fair_queue.h"
#include "jobengine/reconcile.h"
#include "jobengine/runtime.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "proto/clock.h"
#include "proto/event_recorder.h"
#include "proto/informer.h"
#include "proto/informer_factory.h"
#include "proto/objects.h"

namespace muster::jobengine {

// Whether the API server refused a status write for what it says (400 Bad Request, 413 Request
// Entity Too Large, 422 Invalid: a value outside the CRD's schema), so that the same status would
// be refused again. The plan's deletes still run then: a job whose status cannot be written must
// not keep its nodes (issue 43: a time a job wrote into its own step records made the status
// unwritable, and scancel could no longer free the job's nodes). Its creates wait, since they
// need the attempt recorded first. Conflicts, timeouts and server errors are retried whole.
bool statusRefusedForGood(const absl::Status& write);

// Whose job this is, for the work queue's fairness: the Slurm user (spec.slurm.user) of a Slurm
// job, else the job's namespace. The namespace is Kubernetes' unit of tenancy (quotas, RBAC), so
// it is the owner of ordinary ParallelJobs; Slurm users share their namespaces, and for Slurm the
// user is the unit (as Slurm's own fair share is per user), so one Slurm user's held jobs do not
// delay another's. A Slurm owner is namespaced ("<ns>/<user>") and cannot collide with a
// namespace owner; that spec.slurm.user is the creator's is the admission policy's to enforce
// (manifests' slurm-owners policy).
std::string jobOwner(const proto::ParallelJob& job);
// The owner of a key whose job is not in the cache (deleted, or not listed yet): its namespace.
std::string keyOwner(const std::string& key);

struct ControllerOptions {
  RuntimeOptions runtime;
  std::string identity;  // Events' reporting instance
  int max_concurrent_reconciles = 8;
  bool watch_nodes = true;  // notice pods whose node was deleted
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::seconds resync{300};
  proto::Clock clock = proto::realClock();  // the times written into status
};

class Controller {
 public:
  // Registers handlers and indexes on the factory's informers (paralleljobs, pods, nodes).
  Controller(std::shared_ptr<proto::Client> client, proto::InformerFactory& informers,
             proto::EventRecorder& events, proto::asio::any_io_executor executor,
             ControllerOptions options);
  // The same with the API calls behind the JobApi seam (tests use a fake).
  Controller(JobApiPtr api, proto::InformerFactory& informers, proto::EventRecorder& events,
             proto::asio::any_io_executor executor, ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts reconciling once the informers have synced. Call once.
  void start();
  // Stops at once: no reconcile starts after this returns (one in flight ends at its next step).
  void stop();
  // Informers synced and reconciling.
  bool ready() const { return ready_.load(); }

 private:
  struct KeyState {
    bool queued = false;  // in queue_
    bool running = false;
    bool dirty = false;
    int failures = 0;
    std::shared_ptr<proto::asio::steady_timer> timer;
    std::optional<std::chrono::milliseconds> requeue_after;  // the last plan's
  };
  enum class Outcome { kDone, kRetry, kError };

  // --- on strand_ ---
  proto::asio::awaitable<void> waitForSync();
  proto::asio::awaitable<void> resyncLoop();
  void enqueue(const std::string& key);
  void enqueueAfter(const std::string& key, std::chrono::milliseconds delay);
  void pump();
  proto::asio::awaitable<void> process(std::string key);
  proto::asio::awaitable<Outcome> reconcileKey(const std::string& key);
  // Support objects (if this process has not made them yet) and pods `indices` of the attempt;
  // `pods` are the job's.
  proto::asio::awaitable<absl::Status> createAttempt(
      const proto::ParallelJob& job, const Runtime& runtime, AttemptInfo attempt,
      const std::vector<std::shared_ptr<const proto::Pod>>& pods,
      const std::vector<int32_t>& indices);
  proto::asio::awaitable<absl::Status> deleteAttemptSupport(
      const proto::ParallelJob& job, const AttemptInfo& attempt,
      const std::vector<std::shared_ptr<const proto::Pod>>& pods);
  void onPodDeleted(const proto::Pod& pod);
  std::string ownerKey(const proto::Pod& pod) const;

  JobApiPtr api_;
  proto::asio::any_io_executor executor_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  ControllerOptions options_;
  RuntimeRegistry runtimes_;
  proto::EventRecorder& events_;

  proto::Informer<proto::ParallelJob>& jobs_;
  proto::Informer<proto::Pod>& pods_;
  proto::Informer<proto::Node>* nodes_ = nullptr;  // when options_.watch_nodes
  std::unique_ptr<JobDirectory> directory_;  // over jobs_

  // On strand_.
  std::map<std::string, KeyState> keys_;
  FairQueue queue_;  // keys by owner (jobOwner), popped round-robin across owners
  int active_ = 0;
  bool synced_ = false;
  // Pods of a job (by job uid) deleted while this process watched, by pod name.
  std::map<std::string, std::map<std::string, DeletedPod>> deleted_;
  // Support objects created (or found) by this process: "<job uid>/<group>" -> the SSH Secret.
  std::map<std::string, std::string> support_created_;

  std::atomic<bool> started_{false};
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace muster::jobengine
