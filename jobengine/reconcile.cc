#include "jobengine/reconcile.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "jobengine/naming.h"

namespace muster::jobengine {
namespace {

using proto::Pod;

bool terminal(const Pod& pod) {
  return pod.status.phase == "Succeeded" || pod.status.phase == "Failed";
}

bool podReady(const Pod& pod) {
  const auto* c = pod.findCondition("Ready");
  return c != nullptr && c->status == "True";
}

std::string role(int32_t index) { return index == 0 ? "launcher" : "worker " + std::to_string(index); }

std::string podLabel(const std::string& name, int32_t index) {
  return "pod " + name + " (" + role(index) + ")";
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

struct Failure {
  std::string what;  // "pod x (worker 1) failed: exit code 137 (OOMKilled)"
  FailureVerdict verdict;
};

// Plan::requeue_after for a wait of `d`: at least 1 ms, at most kMaxRequeueAfter (then the job
// is looked at again, and waits again).
std::chrono::milliseconds requeueAfter(absl::Duration d) {
  if (d >= absl::FromChrono(kMaxRequeueAfter)) return kMaxRequeueAfter;
  return std::max(std::chrono::milliseconds(1), absl::ToChronoMilliseconds(d));
}

absl::Time parseTime(const std::string& rfc3339) {
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) return t;
  return absl::InfinitePast();
}

// When the launcher pod's launcher container started (the job's first launcherContainerNames
// entry, else "main"), by the kubelet's report; InfinitePast when not reported.
absl::Time launcherStarted(const proto::ParallelJob& job, const Pod& launcher) {
  const std::string name = job.spec.launcher_container_names.empty()
                               ? std::string("main")
                               : job.spec.launcher_container_names.front();
  for (const auto& c : launcher.status.container_statuses)
    if (c.name == name && !c.started_at.empty()) return parseTime(c.started_at);
  return absl::InfinitePast();
}

}  // namespace

bool isGangRollback(const Pod& pod) {
  const auto* c = pod.findCondition(vocab::kGangRollbackCondition);
  return c != nullptr && c->status == "True";
}

const proto::PodCondition* preemptionMark(const Pod& pod) {
  const auto* c = pod.findCondition(vocab::kPreemptedCondition);
  return c != nullptr && c->status == "True" ? c : nullptr;
}

bool attemptAndIndex(const Pod& pod, int32_t* attempt, int32_t* index) {
  auto a = pod.meta.labels.find(vocab::kAttemptLabel);
  auto i = pod.meta.labels.find(vocab::kIndexLabel);
  if (a == pod.meta.labels.end() || i == pod.meta.labels.end()) return false;
  char* end = nullptr;
  long av = std::strtol(a->second.c_str(), &end, 10);
  if (a->second.empty() || *end != '\0' || av < 0) return false;
  long iv = std::strtol(i->second.c_str(), &end, 10);
  if (i->second.empty() || *end != '\0' || iv < 0) return false;
  *attempt = static_cast<int32_t>(av);
  *index = static_cast<int32_t>(iv);
  return true;
}

std::string describeTermination(const Pod& pod) {
  const proto::ContainerStatus* chosen = nullptr;
  for (const auto& c : pod.status.container_statuses) {
    if (!c.exit_code) continue;
    if (c.name == "main") {
      chosen = &c;
      break;
    }
    if (chosen == nullptr || (*chosen->exit_code == 0 && *c.exit_code != 0)) chosen = &c;
  }
  std::string out;
  if (chosen != nullptr) {
    out = "exit code " + std::to_string(*chosen->exit_code);
    if (chosen->name != "main") out += " in container " + chosen->name;
    std::string reason = !chosen->reason.empty() ? chosen->reason : pod.status.reason;
    if (!reason.empty()) out += " (" + reason + ")";
  } else {
    out = "no exit code";
    if (!pod.status.reason.empty()) out += " (" + pod.status.reason + ")";
  }
  if (!pod.status.message.empty()) out += ": " + pod.status.message;
  return out;
}

const proto::Condition* findCondition(const std::vector<proto::Condition>& conditions,
                                      std::string_view type) {
  for (const auto& c : conditions)
    if (c.type == type) return &c;
  return nullptr;
}

void setCondition(std::vector<proto::Condition>* conditions, const std::string& type,
                  const std::string& status, const std::string& reason,
                  const std::string& message, const std::string& now) {
  for (auto& c : *conditions) {
    if (c.type != type) continue;
    if (c.status != status || c.last_transition_time.empty()) c.last_transition_time = now;
    c.status = status;
    c.reason = reason;
    c.message = message;
    return;
  }
  conditions->push_back({type, status, reason, message, now});
}

bool sameStatus(const proto::ParallelJobStatus& a, const proto::ParallelJobStatus& b) {
  if (a.phase != b.phase || a.restarts != b.restarts || a.preemptions != b.preemptions ||
      a.job_group_name != b.job_group_name ||
      a.message != b.message || a.start_time != b.start_time ||
      a.completion_time != b.completion_time || a.pods_ready.value_or(0) != b.pods_ready.value_or(0) ||
      a.ready != b.ready ||
      a.pods != b.pods || a.conditions.size() != b.conditions.size() ||
      a.slurm.has_value() != b.slurm.has_value())
    return false;
  if (a.slurm && (a.slurm->state != b.slurm->state || a.slurm->reason != b.slurm->reason ||
                  a.slurm->exit_code != b.slurm->exit_code ||
                  a.slurm->start_time != b.slurm->start_time ||
                  a.slurm->end_time != b.slurm->end_time ||
                  a.slurm->dependency != b.slurm->dependency || a.slurm->steps != b.slurm->steps ||
                  a.slurm->steps_omitted != b.slurm->steps_omitted))
    return false;
  for (size_t i = 0; i < a.conditions.size(); ++i) {
    const auto& x = a.conditions[i];
    const auto& y = b.conditions[i];
    if (x.type != y.type || x.status != y.status || x.reason != y.reason ||
        x.message != y.message || x.last_transition_time != y.last_transition_time)
      return false;
  }
  return true;
}

proto::ParallelJobStatus failedStatus(proto::ParallelJobStatus status, const std::string& reason,
                                      const std::string& message, const std::string& now) {
  status.phase = "Failed";
  status.message = message;
  if (status.start_time.empty()) status.start_time = now;
  status.completion_time = now;
  setCondition(&status.conditions, vocab::kConditionFailed, "True", reason, message, now);
  if (findCondition(status.conditions, vocab::kConditionRunning))
    setCondition(&status.conditions, vocab::kConditionRunning, "False", "Failed", message, now);
  return status;
}

Plan reconcile(const Observation& obs, const RuntimeRegistry& runtimes) {
  const proto::ParallelJob& job = *obs.job;
  const auto& spec = job.spec;
  Plan plan;
  plan.attempt.attempt = job.status.restarts;
  plan.attempt.group = groupName(job.meta.name, job.status.restarts);
  const AttemptInfo& attempt = plan.attempt;
  proto::ParallelJobStatus desired = job.status;
  const Runtime* runtime = runtimes.find(spec.runtime_ref_name);
  const absl::Time now =
      obs.now_time != absl::InfinitePast() ? obs.now_time : parseTime(obs.now);
  const Pod* launcher_pod = nullptr;  // the attempt's pod 0, once known
  auto finish = [&](std::string why) {
    plan.why = std::move(why);
    if (runtime != nullptr) runtime->decorateStatus(job, launcher_pod, now, obs.jobs, &desired);
    // The READY column reads as a pod's does: "3/3" running, "0/3" once the job has ended.
    if (desired.pods_ready) desired.ready = absl::StrCat(*desired.pods_ready, "/", spec.num_pods);
    if (!sameStatus(desired, job.status)) plan.status = desired;
    return plan;
  };
  if (job.meta.deletion_timestamp) return finish("being deleted");
  // The PODS column: the job's pods that exist, any attempt, terminating ones too (after success
  // only the launcher is left).
  desired.pods = static_cast<int32_t>(obs.pods.size());

  // Pods of the attempt in progress, by index; pods of earlier attempts.
  std::map<int32_t, std::shared_ptr<const Pod>> current;
  std::vector<std::shared_ptr<const Pod>> previous;
  for (const auto& pod : obs.pods) {
    int32_t a = 0, i = 0;
    if (!attemptAndIndex(*pod, &a, &i)) continue;
    if (a == attempt.attempt && pod->meta.labels.count(vocab::kJobSetNameLabel) &&
        pod->meta.labels.at(vocab::kJobSetNameLabel) == attempt.group)
      current[i] = pod;
    else
      previous.push_back(pod);
  }

  // scontrol requeue: the attempt's pods go and the next attempt starts, also after the job
  // ended (Succeeded or Failed become Restarting), as slurmctld puts a requeued job back to
  // PENDING. The next reconcile waits for the old pods to be gone, then creates the new ones.
  if (runtime != nullptr && !job.status.phase.empty()) {
    if (std::optional<std::string> why = runtime->requeueRequested(job)) {
      const int32_t next = job.status.restarts + 1;
      const std::string next_group = groupName(job.meta.name, next);
      for (const auto& pod : obs.pods)
        if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
      desired.phase = "Restarting";
      desired.restarts = next;
      desired.job_group_name = next_group;
      desired.pods_ready = 0;
      desired.completion_time.clear();
      desired.message = *why + ": attempt " + attempt.group + " is deleted and " + next_group + " created";
      for (const char* type : {vocab::kConditionSucceeded, vocab::kConditionFailed})
        if (findCondition(desired.conditions, type))
          setCondition(&desired.conditions, type, "False", "Requeued", desired.message, obs.now);
      if (findCondition(desired.conditions, vocab::kConditionRunning))
        setCondition(&desired.conditions, vocab::kConditionRunning, "False", "Requeued", desired.message,
                     obs.now);
      setCondition(&desired.conditions, vocab::kConditionPodsCreated, "False", "CreatingPods",
                   "creating the " + std::to_string(spec.num_pods) + " pods of attempt " + next_group,
                   obs.now);
      plan.events.push_back({"Normal", "Requeued", desired.message});
      plan.delete_support = attempt;
      return finish("requeued");
    }
  }

  // A finished job is kept until the runtime's retention ends (Slurm's accounting), then deleted.
  if ((job.status.phase == "Succeeded" || job.status.phase == "Failed") && runtime != nullptr) {
    if (std::optional<absl::Time> expires = runtime->expiresAt(job)) {
      if (*expires <= now) {
        plan.delete_job = true;
        return finish("retention over: deleting the job");
      }
      plan.requeue_after = requeueAfter(*expires - now);
    }
  }
  if (job.status.phase == "Succeeded") {
    // Workers are removed once the launcher succeeded; the launcher stays for its logs.
    for (const auto& [i, pod] : current)
      if (i != 0 && !pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    for (const auto& pod : previous)
      if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    return finish("succeeded");
  }
  launcher_pod = current.count(0) ? current.at(0).get() : nullptr;
  // Pods a failed job does not keep (idle workers hold their nodes), deleted now and on every
  // later reconcile until they are gone.
  auto releaseAfterFailure = [&] {
    if (runtime == nullptr) return;
    for (const auto& [i, pod] : current) {
      if (runtime->keepOnFailure(i) || pod->meta.deletion_timestamp) continue;
      if (std::none_of(plan.delete_pods.begin(), plan.delete_pods.end(),
                       [&](const PodRef& r) { return r.uid == pod->meta.uid; }))
        plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    }
  };
  // A cancelled job keeps no pod; these deletions repeat until every pod is gone.
  auto deleteAll = [&] {
    for (const auto& pod : obs.pods)
      if (!pod->meta.deletion_timestamp &&
          std::none_of(plan.delete_pods.begin(), plan.delete_pods.end(),
                       [&](const PodRef& r) { return r.uid == pod->meta.uid; }))
        plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
  };
  if (job.status.phase == "Failed") {
    if (runtime != nullptr && runtime->cancelled(job)) deleteAll();
    else releaseAfterFailure();
    return finish("failed");
  }

  auto fail = [&](const std::string& reason, const std::string& message) {
    desired = failedStatus(std::move(desired), reason, message, obs.now);
    plan.events.push_back({"Warning", reason, message});
    releaseAfterFailure();
    return finish(message);
  };

  // scancel: the job ends now, every pod of it goes (the batch step gets SIGTERM, as from Slurm).
  if (runtime != nullptr) {
    if (std::optional<std::string> why = runtime->cancelled(job)) {
      deleteAll();
      desired.pods_ready = 0;
      return fail(kReasonCancelled, *why);
    }
  }

  if (runtime == nullptr) {
    return fail("UnknownRuntime", "unknown runtime \"" + spec.runtime_ref_name +
                                      "\" in spec.runtimeRef.name; this Muster knows: " +
                                      joinNames(runtimes.names()) + ". No pods were created");
  }

  // A template the API server accepted but the runtime cannot use fails the job before any pod.
  if (job.status.phase.empty()) {
    for (int32_t i = 0; i < std::max<int32_t>(1, std::min<int32_t>(spec.num_pods, 2)); ++i) {
      auto pod = runtime->buildPod(job, attempt, i);
      if (!pod.ok())
        return fail("InvalidSpec", "the job cannot run: " + std::string(pod.status().message()) +
                                       ". No pods were created");
    }
  }

  // A new job, or a group name not yet recorded: start the attempt in status first.
  if (job.status.phase.empty() || job.status.job_group_name != attempt.group) {
    const bool first = job.status.phase.empty() || job.status.phase == "Pending";
    desired.phase = first ? "Pending" : "Restarting";
    desired.job_group_name = attempt.group;
    if (desired.start_time.empty()) desired.start_time = obs.now;
    const std::string message = "creating the " + std::to_string(spec.num_pods) +
                                " pods of attempt " + attempt.group;
    if (first) desired.message = message;
    desired.pods_ready = 0;
    setCondition(&desired.conditions, vocab::kConditionPodsCreated, "False", "CreatingPods", message,
                 obs.now);
    if (job.status.phase.empty())
      plan.events.push_back({"Normal", "Created", "attempt " + attempt.group + ": " + message});
    return finish("starting attempt " + attempt.group);
  }

  // No pod of an earlier attempt may be alive when this one starts.
  if (!previous.empty()) {
    std::vector<std::string> names;
    for (const auto& pod : previous) {
      names.push_back(pod->meta.name);
      if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    }
    desired.pods_ready = 0;
    return finish("waiting for pods of earlier attempts to be deleted: " + joinNames(names));
  }

  // An attempt that has not started may have to wait (a hold, a begin time). A hold that comes
  // while the gang still waits for room takes its pods back, as long as none is bound: the job
  // has not been given nodes yet, as a pending Slurm job has not.
  const bool none_bound = std::none_of(current.begin(), current.end(), [](const auto& entry) {
    return !entry.second->spec.node_name.empty();
  });
  if (none_bound && job.status.phase != "Running") {
    StartGate gate = runtime->startGate(job, now, obs.jobs);
    if (!gate.open && gate.end_job) {
      deleteAll();
      desired.pods_ready = 0;
      return fail(gate.reason, gate.message);
    }
    if (!gate.open) {
      for (const auto& [i, pod] : current)
        if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
      desired.pods_ready = 0;
      desired.message = gate.message;
      if (gate.recheck_after)
        plan.requeue_after = requeueAfter(*gate.recheck_after);
      return finish("not started: " + gate.reason);
    }
  }

  // A preempted attempt (see the header): first every pod of it goes, then it is created again.
  const proto::Condition* created_cond = findCondition(job.status.conditions, vocab::kConditionPodsCreated);
  const bool all_created = created_cond != nullptr && created_cond->status == "True";
  const proto::Condition* preempted_cond = findCondition(job.status.conditions, kConditionPreempted);
  const bool requeued = preempted_cond != nullptr && preempted_cond->status == "True";
  if (preemptedPodsGoing(job.status)) {
    desired.pods_ready = 0;
    if (!current.empty()) {
      std::vector<std::string> names;
      for (const auto& [i, pod] : current) {
        names.push_back(pod->meta.name);
        if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
      }
      return finish("preempted: waiting for the pods of attempt " + attempt.group +
                    " to be deleted: " + joinNames(names));
    }
    const std::string message = "creating the " + std::to_string(spec.num_pods) + " pods of attempt " +
                                attempt.group + " again (requeued after a preemption)";
    desired.message = message;
    setCondition(&desired.conditions, vocab::kConditionPodsCreated, "False", "CreatingPods", message,
                 obs.now);
    plan.create_pods_needed = true;
    for (int32_t i = 0; i < spec.num_pods; ++i) plan.create_pods.push_back(i);
    return finish("requeued after a preemption: creating the attempt's pods again");
  }
  // A new preemption: a pod of the attempt carries the mark, or one seen deleted carried it
  // (while a requeue is still creating its pods, what the process remembers of deletions is from
  // before the requeue).
  std::optional<std::string> preempted_by;
  for (const auto& [i, pod] : current) {
    if (const auto* mark = preemptionMark(*pod)) {
      preempted_by = mark->message;
      break;
    }
  }
  if (!preempted_by && (all_created || !requeued)) {
    for (int32_t i = 0; i < spec.num_pods && !preempted_by; ++i) {
      if (current.count(i)) continue;
      auto d = obs.deleted.find(podName(attempt.group, i));
      if (d != obs.deleted.end() && d->second.attempt == attempt.attempt && d->second.preempted)
        preempted_by = d->second.preempted_message;
    }
  }
  if (preempted_by && preempted_by->empty()) preempted_by = "Preempted by Muster's scheduler";

  const auto* launcher = launcher_pod;
  // The launcher's success stands unless its own pod was preempted (a batch script may exit 0 on
  // the SIGTERM of an eviction).
  const bool launcher_done = launcher != nullptr && launcher->status.phase == "Succeeded" &&
                             preemptionMark(*launcher) == nullptr;
  if (preempted_by && !launcher_done) {
    if (!runtime->requeueOnPreemption(job)) {
      deleteAll();
      desired.pods_ready = 0;
      return fail(kReasonPreempted, *preempted_by + "; the job is not requeued, it ends here");
    }
    desired.phase = "Pending";
    desired.preemptions = job.status.preemptions + 1;
    desired.pods_ready = 0;
    desired.message = *preempted_by + ": requeued (restarts stay " +
                      std::to_string(job.status.restarts) + "); the pods of attempt " +
                      attempt.group + " are deleted and created again once all are gone";
    setCondition(&desired.conditions, kConditionPreempted, "True", kReasonPreempted, *preempted_by,
                 obs.now);
    setCondition(&desired.conditions, vocab::kConditionPodsCreated, "False", kReasonPreempted,
                 desired.message, obs.now);
    if (findCondition(desired.conditions, vocab::kConditionRunning))
      setCondition(&desired.conditions, vocab::kConditionRunning, "False", kReasonPreempted,
                   desired.message, obs.now);
    plan.events.push_back({"Warning", kReasonPreempted, *preempted_by});
    for (const auto& [i, pod] : current)
      if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    return finish("preempted: " + *preempted_by);
  }

  if (launcher_done) {
    desired.phase = "Succeeded";
    desired.completion_time = obs.now;
    desired.message = "launcher pod " + launcher->meta.name + " succeeded (attempt " +
                      attempt.group + ")";
    desired.pods_ready = 0;
    setCondition(&desired.conditions, vocab::kConditionSucceeded, "True", "LauncherSucceeded",
                 desired.message, obs.now);
    setCondition(&desired.conditions, vocab::kConditionRunning, "False", "Completed", desired.message,
                 obs.now);
    plan.events.push_back({"Normal", "Succeeded", desired.message});
    for (const auto& [i, pod] : current)
      if (i != 0 && !pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    return finish("launcher succeeded");
  }

  // Failures of the attempt, in index order; pods evicted by Muster are created again.
  std::optional<Failure> failure;
  std::vector<int32_t> missing;
  for (int32_t i = 0; i < spec.num_pods && !failure; ++i) {
    const std::string name = podName(attempt.group, i);
    auto it = current.find(i);
    if (it == current.end()) {
      auto d = obs.deleted.find(name);
      if (requeued && !all_created) {
        missing.push_back(i);  // a requeue creating its pods: deletions seen were before it
      } else if (d != obs.deleted.end() && d->second.attempt == attempt.attempt) {
        if (d->second.by_muster) missing.push_back(i);
        else failure = Failure{podLabel(name, i) + " was deleted",
                               runtime->onFailure(job, i, FailureKind::kPodDeleted, nullptr)};
      } else if (all_created) {
        failure = Failure{podLabel(name, i) + " is gone (deleted)",
                          runtime->onFailure(job, i, FailureKind::kPodDeleted, nullptr)};
      } else {
        missing.push_back(i);
      }
      continue;
    }
    const Pod& pod = *it->second;
    if (pod.status.phase == "Failed") {
      failure = Failure{podLabel(name, i) + " failed: " + describeTermination(pod),
                        runtime->onFailure(job, i, FailureKind::kPodFailed, &pod)};
    } else if (pod.meta.deletion_timestamp && !isGangRollback(pod) && !terminal(pod)) {
      failure = Failure{podLabel(name, i) + " was deleted",
                        runtime->onFailure(job, i, FailureKind::kPodDeleted, &pod)};
    } else if (!pod.spec.node_name.empty() && obs.node_exists &&
               !obs.node_exists(pod.spec.node_name)) {
      failure = Failure{podLabel(name, i) + " lost its node " + pod.spec.node_name +
                        " (the node was deleted)",
                        runtime->onFailure(job, i, FailureKind::kNodeLost, &pod)};
    }
  }
  // Pods of the attempt that never joined (none beyond numPods is ever created).
  for (const auto& [i, pod] : current)
    if (i >= spec.num_pods && !pod->meta.deletion_timestamp)
      plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});

  if (failure && !failure->verdict.restart) {
    return fail(failure->verdict.reason,
                failure->what + ". The job ends here (not restarted); the pods of attempt " +
                    attempt.group + " that hold nothing are kept for kubectl logs");
  }
  if (failure) {
    if (job.status.restarts >= spec.max_restarts) {
      return fail(failure->verdict.reason,
                  failure->what + "; no restarts left (maxRestarts " +
                      std::to_string(spec.max_restarts) + ", restarts " +
                      std::to_string(job.status.restarts) + "). The pods of attempt " +
                      attempt.group + " are kept for kubectl logs");
    }
    const int32_t next = job.status.restarts + 1;
    const std::string next_group = groupName(job.meta.name, next);
    desired.phase = "Restarting";
    desired.restarts = next;
    desired.job_group_name = next_group;
    desired.pods_ready = 0;
    desired.message = "restart " + std::to_string(next) + " of " +
                      std::to_string(spec.max_restarts) + ": " + failure->what +
                      "; attempt " + attempt.group + " is deleted and " + next_group +
                      " created";
    setCondition(&desired.conditions, vocab::kConditionPodsCreated, "False", "CreatingPods",
                 "creating the " + std::to_string(spec.num_pods) + " pods of attempt " + next_group,
                 obs.now);
    if (findCondition(desired.conditions, vocab::kConditionRunning))
      setCondition(&desired.conditions, vocab::kConditionRunning, "False", "Restarting", desired.message,
                   obs.now);
    plan.events.push_back({"Warning", "Restarting", desired.message});
    for (const auto& [i, pod] : current)
      if (!pod->meta.deletion_timestamp) plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
    plan.delete_support = attempt;
    return finish(failure->what);
  }

  if (!missing.empty()) {
    plan.create_pods_needed = true;
    plan.create_pods = missing;
  } else if (!all_created) {
    setCondition(&desired.conditions, vocab::kConditionPodsCreated, "True", "AllPodsCreated",
                 "all " + std::to_string(spec.num_pods) + " pods of attempt " + attempt.group +
                     " created",
                 obs.now);
  }

  // A running attempt past its time limit ends the job; its pods are stopped. The limit runs
  // from when the launcher's container started, as the kubelet reports it (issue 43: counted
  // from when all pods ran, by the engine's clock, it took the pods' start-up and the wait for
  // SSH out of the job's time). Only when no start is reported, from the Running condition.
  if (std::optional<absl::Duration> limit = runtime->timeLimit(job);
      limit && job.status.phase == "Running") {
    const proto::Condition* running_cond = findCondition(job.status.conditions, vocab::kConditionRunning);
    absl::Time since = running_cond != nullptr && running_cond->status == "True"
                           ? parseTime(running_cond->last_transition_time)
                           : absl::InfinitePast();
    if (since != absl::InfinitePast() && launcher_pod != nullptr)
      if (absl::Time started = launcherStarted(job, *launcher_pod); started != absl::InfinitePast())
        since = started;
    if (since != absl::InfinitePast()) {
      if (now - since >= *limit) {
        for (const auto& [i, pod] : current)
          if (!terminal(*pod) && !pod->meta.deletion_timestamp)
            plan.delete_pods.push_back({pod->meta.name, pod->meta.uid});
        return fail("TimeLimitExceeded", "the job ran for its whole time limit (" +
                                             absl::FormatDuration(*limit) + ") and was stopped");
      }
      plan.requeue_after = requeueAfter(since + *limit - now);
    }
  }

  // What the runtime keeps on the attempt's live pods (scancel --signal on the batch pod).
  for (const auto& [i, pod] : current) {
    if (terminal(*pod) || pod->meta.deletion_timestamp) continue;
    for (const auto& [key, value] : runtime->podAnnotations(job, i)) {
      auto have = pod->meta.annotations.find(key);
      if (have == pod->meta.annotations.end() || have->second != value)
        plan.annotate_pods.push_back({{pod->meta.name, pod->meta.uid}, key, value});
    }
  }

  int32_t running = 0, ready = 0;
  std::string unschedulable;
  for (const auto& [i, pod] : current) {
    if (pod->status.phase == "Running") ++running;
    if (podReady(*pod)) ++ready;
    if (const auto* c = pod->findCondition(proto::vocabulary::kPodScheduledCondition);
        unschedulable.empty() && c != nullptr && c->status == "False" && !c->message.empty())
      unschedulable = c->message;
  }
  desired.pods_ready = ready;
  if (running == spec.num_pods && missing.empty()) {
    if (desired.phase != "Running") {
      desired.phase = "Running";
      desired.message = "all " + std::to_string(spec.num_pods) + " pods of attempt " +
                        attempt.group + " are running";
      setCondition(&desired.conditions, vocab::kConditionRunning, "True", "AllPodsRunning",
                   desired.message, obs.now);
      if (requeued)
        setCondition(&desired.conditions, kConditionPreempted, "False", "Requeued",
                     preempted_cond->message + "; requeued, and " + desired.message + " again",
                     obs.now);
      plan.events.push_back({"Normal", "Running", desired.message});
    }
  } else if (desired.phase == "Pending") {
    desired.message = "attempt " + attempt.group +
                      (requeued ? " (requeued after a preemption)" : "") + ": " +
                      std::to_string(running) + " of " + std::to_string(spec.num_pods) +
                      " pods running";
    if (!unschedulable.empty()) desired.message += "; not scheduled yet: " + unschedulable;
  }
  return finish(missing.empty() ? "in progress" : "creating pods");
}

}  // namespace muster::jobengine
