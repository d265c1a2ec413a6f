#pragma once

// The ParallelJob state machine as a pure function: what the controller observed about one job
// (the job, its pods, what it remembers about pods that vanished, which nodes exist) in, a Plan
// out. The controller (controller.h) executes plans; tests drive this directly.
//
// Level-triggered: the attempt in progress is status.restarts, its name status.jobGroupName, and
// the PodsCreated condition says whether all its pods were created. Every decision is derived
// from those and the pods, so a restart of the process neither loses nor duplicates an attempt:
//
//   (no phase) ──► Pending ──all pods Running──► Running ──launcher Succeeded──► Succeeded
//                     │                             │        (workers deleted)
//                     └──── any pod Failed, deleted or its node gone ────┐
//                                                                        ▼
//                   restarts < maxRestarts: status first (restarts+1, Restarting, new group),
//                   then the old attempt is deleted; the new one is created only when no pod
//                   of the old one is left. Otherwise: Failed, pods kept for `kubectl logs`.
//
// A pod evicted by Muster's own scheduler to roll back a gang (marked beforehand with the pod
// condition muster.dev/GangRollback=True) is not a failure: it is created again in the same
// attempt.
//
// A gang preempted by Muster's scheduler (its pods marked muster.dev/Preempted=True before they
// are evicted) is requeued, not restarted: restarts and maxRestarts are untouched.
//
//   Pending/Running ──a pod of the attempt marked Preempted (live, Failed, terminating, or seen
//        │            deleted with the mark)──► status first: Pending, preemptions+1, condition
//        │            Preempted=True (the mark's message, "Preempted by ns/gang"), PodsCreated=False
//        │            reason Preempted; Warning Event Preempted. Every pod of the attempt is deleted.
//        ▼
//   Pending (PodsCreated reason Preempted) ──no pod of the attempt left──► PodsCreated=False
//        CreatingPods, the same attempt's pods (same names) created again ──► gang-scheduled ──►
//        all Running: Running, Preempted=False reason Requeued.
// While the requeue is in progress a missing pod is created, whatever the process remembers of
// its deletion (the engine deletes the unmarked pods itself). A runtime may end the job instead
// (Runtime::requeueOnPreemption, Slurm's --no-requeue): Failed, reason Preempted, every pod deleted.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "jobengine/runtime.h"
#include "proto/objects.h"

namespace muster::jobengine {

namespace vocab = proto::vocabulary;  // the names Muster uses on API objects


// What the controller remembers about a pod of the job that was deleted (from the informer's
// delete notification), until the attempt ends.
struct DeletedPod {
  int32_t attempt = 0;
  int32_t index = 0;
  bool by_muster = false;  // an eviction by Muster's scheduler: recreate, do not restart
  // The pod carried muster.dev/Preempted=True: its gang was preempted; requeue, do not restart.
  bool preempted = false;
  std::string preempted_message;  // that condition's message ("Preempted by ns/gang")
};

struct Observation {
  const proto::ParallelJob* job = nullptr;
  std::vector<std::shared_ptr<const proto::Pod>> pods;  // controlled by the job
  std::map<std::string, DeletedPod> deleted;            // by pod name
  // Whether a node exists; nullptr while the node cache is not synced (nodes assumed present).
  std::function<bool(const std::string&)> node_exists;
  // The other jobs, for a start that waits on them (Runtime::startGate); may be null.
  const JobDirectory* jobs = nullptr;
  std::string now;  // RFC 3339
  absl::Time now_time = absl::InfinitePast();  // the same instant (InfinitePast: parse `now`)
};

struct EventSpec {
  std::string type;  // "Normal" or "Warning"
  std::string reason;
  std::string message;
};

struct PodRef {
  std::string name;
  std::string uid;
};

// An annotation to set on a live pod (Runtime::podAnnotations).
struct PodAnnotation {
  PodRef pod;
  std::string key;
  std::string value;
};

// The longest a plan waits before the job is reconciled again (Plan::requeue_after): a begin
// time centuries ahead, a retention or a time limit of years is looked at again after a day, and
// then again, until it is near. Longer waits overflowed the timer's nanoseconds (a begin time in
// 2400 became a negative delay, and the job reconciled in a hot loop: issue 43).
inline constexpr std::chrono::hours kMaxRequeueAfter{24};

struct Plan {
  AttemptInfo attempt;  // the attempt the actions below belong to
  // Written first (merge patch on the status subresource, with the observed resourceVersion as
  // precondition); when the write fails nothing else of the plan runs, except when the API
  // server refused the status for what it says (controller.h statusRefusedForGood): then the
  // deletes still run, and nothing is created.
  std::optional<proto::ParallelJobStatus> status;
  std::vector<EventSpec> events;  // about the job, after the status write
  std::vector<PodRef> delete_pods;
  std::vector<PodAnnotation> annotate_pods;  // merge patches, that pod's UID as precondition
  std::optional<AttemptInfo> delete_support;  // the support objects of that attempt
  bool create_pods_needed = false;            // create support objects (if absent) and:
  std::vector<int32_t> create_pods;           // these pod indices
  std::string why;                            // for logs
  // Reconcile again after this long even if nothing changes (a begin time, a time limit); at
  // least 1 ms, at most kMaxRequeueAfter.
  std::optional<std::chrono::milliseconds> requeue_after;
  // Delete the job itself (a finished job past the runtime's retention: Runtime::expiresAt).
  bool delete_job = false;
};

Plan reconcile(const Observation& obs, const RuntimeRegistry& runtimes);

// Helpers, exposed for tests.
bool isGangRollback(const proto::Pod& pod);
// The pod's muster.dev/Preempted condition when it is True, else nullptr.
const proto::PodCondition* preemptionMark(const proto::Pod& pod);
// Attempt and index from the pod's labels; false when it carries none.
bool attemptAndIndex(const proto::Pod& pod, int32_t* attempt, int32_t* index);
// "exit code 1 (Error)": the main container's termination, else the first non-zero one.
std::string describeTermination(const proto::Pod& pod);
// Sets or updates a condition; lastTransitionTime changes only when status does.
void setCondition(std::vector<proto::Condition>* conditions, const std::string& type,
                  const std::string& status, const std::string& reason,
                  const std::string& message, const std::string& now);
const proto::Condition* findCondition(const std::vector<proto::Condition>& conditions,
                                      std::string_view type);
bool sameStatus(const proto::ParallelJobStatus& a, const proto::ParallelJobStatus& b);
// `status` as that of a job that ended now (RFC 3339 `now`): phase Failed, condition Failed True
// with `reason` and `message`, Running False. What reconcile writes when it fails a job, and
// what the engine writes when a check before the pods fails it (ensureSupport).
proto::ParallelJobStatus failedStatus(proto::ParallelJobStatus status, const std::string& reason,
                                      const std::string& message, const std::string& now);

}  // namespace muster::jobengine
