#include "jobengine/slurm/runtime/runtime.h"

#include <algorithm>
#include <climits>

#include "jobengine/naming.h"
#include "jobengine/slurm/core/dependency.h"
#include "jobengine/slurm/core/env.h"
#include "jobengine/slurm/core/filename.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/limits.h"
#include "jobengine/slurm/core/signal_request.h"
#include "jobengine/slurm/core/step_record.h"
#include "jobengine/slurm/core/time.h"
#include "jobengine/slurm/runtime/submit.h"
#include "jobengine/ssh_attempt.h"
#include "proto/codec.h"
#include "proto/informer.h"
#include "proto/strings.h"
#include "proto/vocabulary.h"

namespace muster::jobengine::slurm {

using proto::PodTemplate;
using proto::strAppend;
using proto::strCat;
using proto::VolumeSource;

namespace {

constexpr char kBatchVolume[] = "muster-slurm-batch";
constexpr char kSignalVolume[] = "muster-slurm-signal";
constexpr char kToolsContainer[] = "muster-slurm-tools";

// Condition reasons the runtime ends jobs with (status.slurm.state follows from them).
constexpr char kBatchFailed[] = "BatchScriptFailed";
constexpr char kNodeFail[] = "NodeFail";
constexpr char kTimeLimit[] = "TimeLimitExceeded";
constexpr char kDependencyNever[] = "DependencyNeverSatisfied";
// The CRD's maxItems for status.slurm.steps.
constexpr size_t kStatusStepsMax = 256;

absl::Time parseTime(const std::string& s) {
  absl::Time t;
  std::string err;
  if (!s.empty() && absl::ParseTime(absl::RFC3339_full, s, &t, &err)) return t;
  return absl::InfinitePast();
}

// At most `max` characters of what a user wrote, for a message ("..." marks a cut).
std::string cut(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  return strCat(text.substr(0, max), "...");
}

// Muster's limits (limits.h) on what a job asks for, checked before anything is sized by it: the
// CRD refuses more, but a job may come from a CRD without the limits or an older Muster.
absl::Status checkLimits(const proto::SlurmJobSpec& s) {
  auto range = [](std::string_view field, std::optional<int64_t> value, int64_t min,
                  int64_t max) -> absl::Status {
    if (!value || (*value >= min && *value <= max)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        strCat("spec.slurm.", field, " is ", *value, ", outside ", min, "..", max,
               " (Muster's Slurm limits; sbatch and the ParallelJob CRD refuse it)"));
  };
  auto opt = [](const auto& v) { return v ? std::optional<int64_t>(*v) : std::nullopt; };
  std::vector<absl::Status> checks = {
      range("jobId", s.job_id, 1, kMaxJobId),
      range("ntasks", s.ntasks, 1, kMaxTasks),
      range("ntasksPerNode", opt(s.ntasks_per_node), 1, kMaxTasksPerNode),
      range("cpusPerTask", opt(s.cpus_per_task), 1, kMaxCpusPerTask),
      range("gpusPerNode", opt(s.gpus_per_node), 0, kMaxGpusPerNode),
      range("gpusPerTask", opt(s.gpus_per_task), 0, kMaxGpusPerNode),
      range("memPerNodeMB", s.mem_per_node_mb, 0, kMaxMemoryMb),
      range("memPerCpuMB", s.mem_per_cpu_mb, 0, kMaxMemoryMb),
      range("timeLimitSeconds", s.time_limit_seconds, 0, kMaxTimeLimitSeconds),
  };
  for (size_t i = 0; i < s.tasks_per_node.size(); ++i)
    checks.push_back(range(strCat("tasksPerNode[", i, "]"), s.tasks_per_node[i], 0, kMaxTasksPerNode));
  if (const auto& a = s.array) {
    checks.push_back(range("array.arrayJobId", a->array_job_id, 1, kMaxJobId));
    checks.push_back(range("array.taskId", a->task_id, 0, kMaxArrayTaskId));
    checks.push_back(range("array.taskCount", a->task_count, 0, kMaxArrayTaskId + 1));
    checks.push_back(range("array.taskMin", a->task_min, 0, kMaxArrayTaskId));
    checks.push_back(range("array.taskMax", a->task_max, 0, kMaxArrayTaskId));
    checks.push_back(range("array.taskStep", a->task_step, 0, kMaxArrayTaskId));
    checks.push_back(range("array.maxRunning", opt(a->max_running), 0, kMaxArrayTaskId + 1));
  }
  for (const absl::Status& c : checks)
    if (!c.ok()) return c;
  // A begin time that does not parse would be no begin time at all; one past 9999 cannot be
  // written back (RFC 3339).
  if (!s.begin_time.empty()) {
    const absl::Time begin = parseTime(s.begin_time);
    if (begin == absl::InfinitePast() || begin > kLatestTimestamp)
      return absl::InvalidArgumentError(
          strCat("spec.slurm.beginTime \"", cut(s.begin_time, 64),
                 "\" is not an RFC 3339 time up to 9999-12-31T23:59:59Z"));
  }
  return absl::OkStatus();
}

// A step's time as status holds it: the job wrote it, so it is kept to what an RFC 3339
// date-time can say (step_record.h reads it so already; this is the engine's own guard).
std::string stepTime(int64_t unix_seconds) {
  return proto::rfc3339(absl::FromUnixSeconds(std::clamp<int64_t>(unix_seconds, 0, kMaxStepTime)));
}

const proto::ContainerStatus* mainStatus(const proto::Pod& pod) {
  for (const auto& c : pod.status.container_statuses)
    if (c.name == "main") return &c;
  return nullptr;
}

// "code:signal" of the batch script: batch-step writes it as the termination message; else from
// the container's exit code (a code above 128 from a signal is reported as that signal).
std::string exitCodeOf(const proto::Pod& pod) {
  const proto::ContainerStatus* c = mainStatus(pod);
  if (c == nullptr || !c->exit_code) return "";
  if (std::optional<TerminationMessage> m = parseTerminationMessage(c->message)) return m->exit_code;
  if (c->signal && *c->signal > 0) return strCat(*c->exit_code, ":", *c->signal);
  if (*c->exit_code > 128 && *c->exit_code < 160) return strCat("0:", *c->exit_code - 128);
  return strCat(*c->exit_code, ":0");
}

// The steps srun recorded in the batch script's last run (step_record.h), from batch-step's
// termination message; nullopt when the batch container has not ended or did not write one.
std::optional<TerminationMessage> stepsOf(const proto::Pod& pod) {
  const proto::ContainerStatus* c = mainStatus(pod);
  if (c == nullptr || !c->exit_code) return std::nullopt;
  return parseTerminationMessage(c->message);
}

proto::SlurmStepStatus toStatus(const StepRecord& r) {
  proto::SlurmStepStatus s;
  s.id = static_cast<int32_t>(std::min<uint32_t>(r.id, INT32_MAX));
  s.name = r.name;
  s.state = r.state;
  s.exit_code = r.exit_code;
  s.start_time = stepTime(r.start);
  s.end_time = stepTime(r.end);
  s.nodes = r.nodes;
  s.tasks = r.tasks;
  s.cpus = r.cpus;
  s.node_list = r.node_list;
  return s;
}

// squeue's reason for a job whose gang waits for room, from Muster's PodScheduled message on its
// batch pod: nodes that would do are held for another gang ahead of it (the scheduler's
// reservation for a larger or higher-priority gang, as Slurm's backfill holds them) -> Priority;
// otherwise Resources.
// A job that names its nodes (-w) and waits because one of them is cordoned (drained) or not
// ready -> ReqNodeNotAvail, as slurmctld says of a required node that is down or drained.
// A job whose queue (its account, to Slurm) would go over its limit -> AssocGrpGRES, or
// AssocGrpCpuLimit / AssocGrpMemLimit where the limit is on cpu or memory; a queue that does not
// exist -> InvalidAccount.
std::string waitingReason(const proto::ParallelJob& job, const proto::Pod* batch_pod) {
  if (batch_pod == nullptr) return "Resources";
  const proto::PodCondition* c = batch_pod->findCondition(proto::vocabulary::kPodScheduledCondition);
  if (c == nullptr || c->status != "False" || c->reason != proto::vocabulary::kUnschedulableReason)
    return "Resources";
  if (c->message.find(proto::vocabulary::kReservedForAnotherGangReason) != std::string::npos)
    return "Priority";
  if (c->message.find(proto::vocabulary::kWaitingForQuotaMessage) != std::string::npos) {
    if (c->message.find(" cpu of its limit ") != std::string::npos) return "AssocGrpCpuLimit";
    if (c->message.find(" memory of its limit ") != std::string::npos) return "AssocGrpMemLimit";
    return "AssocGrpGRES";
  }
  if (c->message.find(proto::vocabulary::kNoSuchQueueMessage) != std::string::npos)
    return "InvalidAccount";
  if (!job.spec.slurm->required_nodes.empty())
    for (std::string_view unavailable : {"node(s) were unschedulable", "node.kubernetes.io/not-ready",
                                         "node.kubernetes.io/unreachable"})
      if (c->message.find(unavailable) != std::string::npos) return "ReqNodeNotAvail";
  return "Resources";
}

// The key singleton dependencies find a job under: its namespace, user and name.
std::string singletonKey(const proto::ParallelJob& job) {
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  return strCat("slurm-singleton:", job.meta.namespace_, "/", s.user, "/", s.job_name);
}

// The key every task of array `array_job_id` is known as (dependencies on the whole array).
std::string arrayKey(std::string_view ns, int64_t array_job_id) {
  return strCat("slurm-array:", ns, "/", array_job_id);
}

// The key a task of a throttled array is known as while it holds or frees a place under the
// throttle (it runs, has ended, is held or cancelled): the array's waiting tasks look again
// when such a task changes, not at every change of another waiting task.
std::string arraySlotKey(std::string_view ns, int64_t array_job_id) {
  return strCat("slurm-array-slot:", ns, "/", array_job_id);
}

// The user whose tasks make up array `array_job_id` (see evaluateJobDependency): the user of
// job slurm-<array_job_id> (the array's head) while it exists, else `fallback_user`.
std::string arrayOwner(std::string_view ns, int64_t array_job_id, const std::string& fallback_user,
                       const JobDirectory& jobs) {
  auto head = jobs.get(ns, jobObjectName(array_job_id));
  if (head != nullptr && head->spec.slurm && head->spec.slurm->job_id == array_job_id)
    return head->spec.slurm->user;
  return fallback_user;
}

// What a dependency sees of another Slurm job.
DependencyTargetState targetState(const proto::ParallelJob& job) {
  DependencyTargetState t;
  if (!job.status.slurm) return t;  // not yet reconciled: pending
  if (auto state = parseJobState(job.status.slurm->state)) t.state = *state;
  if (absl::Time start = parseTime(job.status.slurm->start_time); start != absl::InfinitePast())
    t.start_time = start;
  return t;
}

struct DependencyVerdict {
  DependencyEvaluation evaluation;
  DependencySpec spec;
  std::string error;  // the dependency does not parse
};

// Evaluates spec.slurm.dependency against the other jobs of the namespace.
std::optional<DependencyVerdict> evaluateJobDependency(const proto::ParallelJob& job,
                                                       absl::Time now, const JobDirectory& jobs) {
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  if (s.dependency.empty()) return std::nullopt;
  DependencyVerdict v;
  auto spec = parseDependency(s.dependency);
  if (!spec.ok()) {
    v.error = strCat("spec.slurm.dependency \"", cut(s.dependency, 64), "\": ", spec.status().message());
    v.evaluation.result = DependencyResult::kNeverSatisfied;
    return v;
  }
  v.spec = *std::move(spec);
  if (v.spec.items.empty()) return std::nullopt;
  DependencyContext context;
  context.now = now;
  if (s.array) context.own_array_task_id = static_cast<uint32_t>(s.array->task_id);
  // What the entries name, looked up once per job id and evaluation, and by task id: a
  // dependency on every task of an array asked the directory once per entry, and each time
  // went through all of the array's tasks (issue 43).
  struct ArrayTasks {
    std::map<int64_t, DependencyTargetState> by_task;  // the array's tasks (none: not an array)
    std::optional<DependencyTargetState> whole;         // summarizeArray of them, once asked for
  };
  std::map<uint32_t, ArrayTasks> arrays;
  std::map<uint32_t, std::optional<DependencyTargetState>> plain;
  auto arrayOf = [&](uint32_t id) -> ArrayTasks& {
    auto [it, added] = arrays.try_emplace(id);
    if (added) {
      // Whose tasks make up array `id` (issue 43): anyone may create a job that claims an
      // arrayJobId, so only tasks of the array's owner count, or a user could decide another
      // user's afterok/afterany with fake tasks. The owner is the user of job `id` itself (the
      // array's head: the first task takes the array's id, and its name slurm-<id> is unique
      // in the namespace); when that job is gone, the dependent job's own user (a fake task
      // then has to be created as that user, which the owner admission policy refuses).
      const std::string owner = arrayOwner(job.meta.namespace_, id, s.user, jobs);
      for (const auto& other : jobs.knownAs(arrayKey(job.meta.namespace_, id)))
        if (other->spec.slurm && other->spec.slurm->array &&
            other->spec.slurm->array->array_job_id == id && other->spec.slurm->user == owner)
          it->second.by_task.try_emplace(other->spec.slurm->array->task_id, targetState(*other));
    }
    return it->second;
  };
  context.lookup = [&](uint32_t id, std::optional<uint32_t> task,
                       bool all_tasks) -> std::optional<DependencyTargetState> {
    ArrayTasks& array = arrayOf(id);
    if (task) {
      auto t = array.by_task.find(*task);
      return t == array.by_task.end() ? std::nullopt : std::optional(t->second);
    }
    if (!array.by_task.empty()) {  // "123" of an array: all of its tasks
      if (!array.whole) {
        std::vector<DependencyTargetState> tasks;
        for (const auto& [task_id, state] : array.by_task) tasks.push_back(state);
        array.whole = summarizeArray(tasks);
      }
      return array.whole;
    }
    if (all_tasks) return std::nullopt;
    // A plain job id: its job is slurm-<id>, a name unique in the namespace (the CRD requires a
    // Slurm job's name to be slurm-<jobId>), so no other user's job can stand for it.
    auto [known, added] = plain.try_emplace(id);
    if (added) {
      auto target = jobs.get(job.meta.namespace_, jobObjectName(id));
      if (target != nullptr && target->spec.slurm) known->second = targetState(*target);
    }
    return known->second;  // nullopt: gone, which lifts the dependency
  };
  context.singleton_blocked = [&] {
    for (const auto& other : jobs.knownAs(singletonKey(job))) {
      if (other->meta.uid == job.meta.uid || !other->spec.slurm) continue;
      const DependencyTargetState t = targetState(*other);
      if (t.state == JobState::kRunning || t.state == JobState::kSuspended) return true;
      if (t.state == JobState::kPending && other->spec.slurm->job_id < s.job_id &&
          !other->spec.slurm->cancel)
        return true;
    }
    return false;
  };
  v.evaluation = evaluateDependency(v.spec, context);
  return v;
}

}  // namespace

std::vector<std::string> SlurmRuntime::nodeNames(const proto::ParallelJob& job,
                                                 const AttemptInfo& attempt) {
  std::vector<std::string> names;
  for (int32_t i = 0; i < job.spec.num_pods; ++i) names.push_back(podName(attempt.group, i));
  return names;
}

std::string SlurmRuntime::toolPath() const {
  return options_.slurm.tools_image.empty() ? kImageToolPath : strCat(kToolsDir, "/muster-slurm-steps");
}

absl::Status SlurmRuntime::check(const proto::ParallelJob& job, const Partition** partition) const {
  if (!job.spec.slurm)
    return absl::InvalidArgumentError(
        "spec.slurm is missing: Slurm jobs are submitted with sbatch (runtime slurm)");
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  if (absl::Status n = checkNumPods(job); !n.ok()) return n;
  if (absl::Status l = checkLimits(s); !l.ok()) return l;
  if (!s.tasks_per_node.empty() &&
      s.tasks_per_node.size() != static_cast<size_t>(job.spec.num_pods))
    return absl::InvalidArgumentError(
        strCat("spec.slurm.tasksPerNode has ", s.tasks_per_node.size(), " entries for ",
               job.spec.num_pods, " nodes"));
  if (!options_.slurm.enabled())
    return absl::FailedPreconditionError(
        "this Muster has no Slurm partitions configured (the slurm: section of its config)");
  *partition = options_.slurm.partition(s.partition);
  if (*partition == nullptr)
    return absl::InvalidArgumentError(
        strCat("partition \"", s.partition, "\" does not exist in this Muster's Slurm config"));
  if (s.batch_secret.empty())
    return absl::InvalidArgumentError("spec.slurm.batchSecret is missing");
  return absl::OkStatus();
}

std::map<std::string, std::string> SlurmRuntime::nodeEnvironment(const proto::ParallelJob& job,
                                                                 const AttemptInfo& attempt,
                                                                 int32_t index) const {
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  JobEnvironmentInput in;
  in.job_id = static_cast<uint32_t>(s.job_id);
  in.job_name = s.job_name;
  in.node_names = nodeNames(job, attempt);
  // check() held every count to limits.h; the arithmetic is 64-bit and clamped all the same.
  const int64_t cpus_per_task = s.cpus_per_task.value_or(1);
  for (int32_t i = 0; i < job.spec.num_pods; ++i) {
    const int tasks = i < static_cast<int32_t>(s.tasks_per_node.size()) ? s.tasks_per_node[i] : 1;
    in.tasks_per_node.push_back(tasks);
    in.cpus_per_node.push_back(
        static_cast<int>(std::clamp<int64_t>(int64_t{tasks} * cpus_per_task, 1, INT_MAX)));
  }
  // Only this node's GPU indices are read (every node of a job has the same).
  const int gpus = std::clamp(s.gpus_per_node.value_or(0), 0, kMaxGpusPerNode);
  if (gpus > 0 && index >= 0 && index < job.spec.num_pods) {
    in.gpus_on_node.resize(static_cast<size_t>(index) + 1);
    for (int g = 0; g < gpus; ++g) in.gpus_on_node.back().push_back(g);
  }
  in.ntasks = s.ntasks;
  if (s.ntasks_per_node) in.ntasks_per_node = *s.ntasks_per_node;
  if (s.cpus_per_task) in.cpus_per_task = *s.cpus_per_task;
  std::optional<std::string> type;
  if (!s.gpu_type.empty()) type = s.gpu_type;
  if (s.gpus_per_node) in.gpus_per_node = GpuRequest{type, *s.gpus_per_node};
  if (s.gpus_per_task) in.gpus_per_task = GpuRequest{type, *s.gpus_per_task};
  if (s.mem_per_node_mb) in.mem_per_node_mb = *s.mem_per_node_mb;
  if (s.mem_per_cpu_mb) in.mem_per_cpu_mb = *s.mem_per_cpu_mb;
  in.partition = s.partition.empty() && options_.slurm.partition("") != nullptr
                     ? options_.slurm.partition("")->name
                     : s.partition;
  in.submit_dir = s.submit_dir;
  in.submit_host = s.submit_host;
  // Slurm's restart_cnt: restarts, and requeues after a preemption (PreemptMode=REQUEUE).
  in.restart_count = static_cast<int>(
      std::min<int64_t>(int64_t{attempt.attempt} + job.status.preemptions, INT_MAX));
  in.cluster_name = options_.slurm.cluster_name;
  if (!s.account.empty()) in.account = s.account;
  if (!s.qos.empty()) in.qos = s.qos;
  if (!s.dependency.empty()) in.dependency = s.dependency;
  if (!s.user.empty()) in.user = s.user;
  if (s.array) {
    ArrayEnvironment& a = in.array.emplace();
    a.array_job_id = static_cast<uint32_t>(s.array->array_job_id);
    a.task_id = static_cast<uint32_t>(s.array->task_id);
    a.task_count = static_cast<uint32_t>(s.array->task_count);
    a.task_min = static_cast<uint32_t>(s.array->task_min);
    a.task_max = static_cast<uint32_t>(s.array->task_max);
    a.task_step = static_cast<uint32_t>(s.array->task_step);
  }
  Environment env = batchEnvironment(in, index);
  const std::string ssh_config = strCat(kRunMountPath, "/ssh/config");
  env["MUSTER_SLURM_RSH"] = strCat("ssh -F ", ssh_config);
  env["MUSTER_SLURM_BIN"] = toolPath();
  env["MUSTER_SLURM_STATE_DIR"] = kStateDir;
  if (index == 0) {
    env["MUSTER_SLURM_BATCH_DIR"] = kBatchMountPath;
    env["MUSTER_SLURM_WORKDIR"] = s.work_dir.empty() ? s.submit_dir : s.work_dir;
    env["MUSTER_SLURM_STDOUT"] = s.stdout_pattern.empty()
                                     ? std::string(defaultOutputPattern(s.array.has_value()))
                                     : s.stdout_pattern;
    if (!s.stderr_pattern.empty()) env["MUSTER_SLURM_STDERR"] = s.stderr_pattern;
    env["MUSTER_SLURM_STDIN"] = s.stdin_path.empty() ? "/dev/null" : s.stdin_path;
    env["MUSTER_SLURM_USER"] = s.user;
    env["MUSTER_SLURM_JOB_NAME"] = s.job_name;
  }
  return env;
}

absl::StatusOr<std::vector<ApiObject>> SlurmRuntime::buildSupport(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
  const Partition* partition = nullptr;
  if (absl::Status s = check(job, &partition); !s.ok()) return s;
  // The hostfile names the nodes as Slurm does (short names), the batch node first; the batch
  // pod's wait-for-peers init container reads it.
  std::string hostfile;
  const std::vector<std::string> names = nodeNames(job, attempt);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& tpn = job.spec.slurm->tasks_per_node;
    strAppend(&hostfile, names[i], " slots=", i < tpn.size() ? tpn[i] : 1, "\n");
  }
  return sshSupportObjects(job, attempt, sshConfigFiles({{"hostfile", hostfile}}));
}

absl::StatusOr<std::string> SlurmRuntime::buildPod(const proto::ParallelJob& job,
                                                   const AttemptInfo& attempt,
                                                   int32_t index) const {
  const Partition* partition = nullptr;
  if (absl::Status s = check(job, &partition); !s.ok()) return s;
  if (index < 0 || index >= job.spec.num_pods)
    return absl::InvalidArgumentError("pod index out of range");
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  auto requested = PodTemplate::parse(job.spec.launcher, "spec.launcher");
  if (!requested.ok()) return requested.status();
  std::optional<PodTemplate::Container> requested_main = requested->container("main");
  if (!requested_main)
    return absl::InvalidArgumentError(
        "spec.launcher.spec.containers must contain a container named \"main\"");

  PodTemplate pod = *partition->pod_template;
  proto::ObjectMeta meta = podMeta(job, attempt, index, pod, index == 0 ? "batch" : "node");
  meta.labels[proto::vocabulary::kSlurmJobIdLabel] = std::to_string(s.job_id);
  // A signal asked for before the pod exists is in it from the start (so its batch step takes
  // it as already delivered, not as a new request for this run).
  for (const auto& [key, value] : podAnnotations(job, index)) meta.annotations[key] = value;
  prepareSshPod(pod, job, attempt, meta.name, options_.scheduler_name);
  // A Slurm job's processes hold no Kubernetes credentials (the README's model): no token.
  pod.setAutomountServiceAccountToken(false, /*only_if_unset=*/false);
  // Short node names resolve through the headless Service's domain.
  pod.addDnsSearches({strCat(attempt.group, ".", job.meta.namespace_, ".svc.",
                             options_.cluster_domain)});
  // Node selection: the partition's nodes, and what the job asked for (-w, -x, -C), both: the
  // job's affinity is added to the partition template's, never replaces it (issue 43: -w, -x
  // and -C dropped the partition's node restriction).
  pod.addNodeSelector(partition->node_selector);
  pod.addNodeSelector(requested->nodeSelector());  // the partition's keys win over the job's
  if (absl::Status merged = pod.mergeAffinity(*requested); !merged.ok()) return merged;
  if (!partition->priority_class_name.empty()) pod.setPriorityClassName(partition->priority_class_name);
  if (std::optional<int64_t> limit = timeLimitSeconds(job))
    pod.setActiveDeadlineSeconds(*limit + 300);  // the engine stops it on time

  PodTemplate::Container partition_main = *pod.container("main");
  std::optional<PodTemplate::Container> main;
  if (index == 0) {
    main = partition_main;
    main->setCommand({toolPath(), "batch-step"});
    pod.addVolume(kBatchVolume, {VolumeSource::Kind::kSecret, s.batch_secret, 0444});
    main->addMount(kBatchVolume, kBatchMountPath, true);
    // scancel --signal reaches the batch step through the pod's own annotation.
    pod.addDownwardApiVolume(
        kSignalVolume,
        {{"signal", strCat("metadata.annotations['", proto::vocabulary::kSlurmSignalAnnotation, "']")}});
    main->addMount(kSignalVolume, kSignalMountPath, true);
    main->addEnv("MUSTER_SLURM_SIGNAL_FILE", kSignalFile);
  } else {
    // A node only serves SSH for srun; its main keeps the partition's image, env and mounts.
    PodTemplate base = pod;
    main = pod.setContainer("main");
    makeSshdMain(*main, *base.container("main"), /*keep_mounts=*/true);
  }
  // The job's requests and limits replace the partition's of the same resource; the partition's
  // others stay (a limit the partition sets on every job is not lost to a job's request).
  if (absl::Status merged = main->mergeResources(*requested_main); !merged.ok()) return merged;
  mountSsh(*main);
  for (const auto& [k, v] : nodeEnvironment(job, attempt, index)) main->addEnv(k, v);
  const bool accelerators = pod.requestsAny(deviceResources());
  if (accelerators) {
    main->addEnv("RDMA_NCCL_CONF", kNcclConfPath);
    main->addEnv("RDMA_UCX_CONF", kUcxConfPath);
  }
  if (index == 0 && job.spec.num_pods > 1) {
    PodTemplate::Container wait = addWaitForPeers(pod, *main);
    mountSsh(wait);
  }
  if (!options_.slurm.tools_image.empty()) {
    PodTemplate::Container tools = pod.prependInitContainer(kToolsContainer);
    tools.setImage(options_.slurm.tools_image);
    tools.setImagePullPolicy("IfNotPresent");
    tools.setCommand({kStaticToolPath, "install-tools", kToolsDir});
    tools.addMount(kRunVolume, kRunMountPath, false);
    tools.setRestrictedSecurityContext();
  }
  if (accelerators && !options_.rdma_conf_image.empty())
    addRdmaConfContainer(pod, *main, options_.rdma_conf_image);
  return pod.toPod(meta);
}

std::map<std::string, std::string> SlurmRuntime::podAnnotations(const proto::ParallelJob& job,
                                                                int32_t index) const {
  if (index != 0 || !job.spec.slurm || !job.spec.slurm->signal) return {};
  const proto::SlurmSignal& sig = *job.spec.slurm->signal;
  SignalRequest request{sig.seq, sig.number, sig.target.empty() ? "steps" : sig.target};
  return {{proto::vocabulary::kSlurmSignalAnnotation, formatSignalRequest(request)}};
}

FailureVerdict SlurmRuntime::onFailure(const proto::ParallelJob& job, int32_t index,
                                       FailureKind kind, const proto::Pod* pod) const {
  const bool requeue = !job.spec.slurm || job.spec.slurm->requeue;
  if (index == 0 && kind == FailureKind::kPodFailed && pod != nullptr) {
    // The batch script ran and ended: its own exit decides, as in Slurm (no requeue).
    if (pod->status.reason == "DeadlineExceeded") return {false, kTimeLimit};
    const proto::ContainerStatus* c = mainStatus(*pod);
    if (c != nullptr && c->exit_code) return {false, kBatchFailed};
  }
  return {requeue, kNodeFail};
}

std::vector<std::string> SlurmRuntime::waitsOn(const proto::ParallelJob& job) const {
  if (!job.spec.slurm) return {};
  std::vector<std::string> keys;
  if (const auto& a = job.spec.slurm->array; a && a->max_running)
    keys.push_back(arraySlotKey(job.meta.namespace_, a->array_job_id));
  if (job.spec.slurm->dependency.empty()) return keys;
  auto spec = parseDependency(job.spec.slurm->dependency);
  if (!spec.ok()) return keys;
  for (const Dependency& d : spec->items) {
    if (d.type == DependencyType::kSingleton) {
      keys.push_back(singletonKey(job));
      continue;
    }
    keys.push_back(proto::objectKey(job.meta.namespace_, jobObjectName(d.job_id)));
    keys.push_back(arrayKey(job.meta.namespace_, d.job_id));  // the id may be an array's
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

std::vector<std::string> SlurmRuntime::knownAs(const proto::ParallelJob& job) const {
  if (!job.spec.slurm) return {};
  std::vector<std::string> keys{singletonKey(job)};
  if (const auto& a = job.spec.slurm->array) {
    keys.push_back(arrayKey(job.meta.namespace_, a->array_job_id));
    const JobState state = targetState(job).state;
    if (a->max_running && (state != JobState::kPending || job.spec.slurm->hold || job.spec.slurm->cancel))
      keys.push_back(arraySlotKey(job.meta.namespace_, a->array_job_id));
  }
  return keys;
}

namespace {

// The start gate of a Slurm job, given its dependency's verdict (evaluated once by the caller;
// `have_jobs` false: no cache of other jobs to evaluate it against).
// The "%P" throttle of an array: the tasks that run count against P, and the places left go to
// the waiting tasks (not held, not cancelled) in ascending task id order. Deterministic, so
// that tasks reconciled one after another agree on who may start; a task whose gang is
// already bound is not looked at again (it runs). nullopt: this task may start.
std::optional<StartGate> throttleGate(const proto::ParallelJob& job, const JobDirectory& jobs) {
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  if (!s.array || !s.array->max_running) return std::nullopt;
  const proto::SlurmArrayTask& a = *s.array;
  int64_t running = 0;
  std::vector<int64_t> waiting{a.task_id};
  // Only tasks of this task's own user count (issue 43): anyone may create a job that claims
  // this arrayJobId, and a fake task of another user that "runs" or waits ahead would hold the
  // throttle's places. A real array's tasks are all of one user (sbatch submits them at once).
  for (const auto& other : jobs.knownAs(arrayKey(job.meta.namespace_, a.array_job_id))) {
    if (other->meta.uid == job.meta.uid || !other->spec.slurm || !other->spec.slurm->array ||
        other->spec.slurm->array->array_job_id != a.array_job_id || other->spec.slurm->user != s.user)
      continue;
    const JobState state = targetState(*other).state;
    if (isFinished(state)) continue;
    if (state != JobState::kPending) ++running;
    else if (!other->spec.slurm->hold && !other->spec.slurm->cancel)
      waiting.push_back(other->spec.slurm->array->task_id);
  }
  std::sort(waiting.begin(), waiting.end());
  const int64_t ahead = std::lower_bound(waiting.begin(), waiting.end(), a.task_id) - waiting.begin();
  if (running + ahead < *a.max_running) return std::nullopt;
  return StartGate{false, "JobArrayTaskLimit",
                   strCat("task ", a.task_id, " of array job ", a.array_job_id, " waits: at most ",
                          *a.max_running, " of its tasks run at once (--array ...%",
                          *a.max_running, "); ", running, " run, ", ahead, " wait ahead of it"),
                   std::nullopt};
}

StartGate gateOf(const proto::ParallelJob& job, absl::Time now, const JobDirectory* jobs,
                 const std::optional<DependencyVerdict>& v) {
  const bool have_jobs = jobs != nullptr;
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  if (s.hold)
    return {false, "JobHeldUser",
            strCat("job ", s.job_id, " is held (sbatch -H); release it to let it start"),
            std::nullopt};
  const absl::Time begin = parseTime(s.begin_time);
  if (begin != absl::InfinitePast() && begin > now)
    return {false, "BeginTime",
            strCat("job ", s.job_id, " starts no earlier than ", s.begin_time, " (--begin)"),
            begin - now};
  auto throttled = [&]() -> StartGate {
    if (s.array && s.array->max_running && !have_jobs)
      return {false, "JobArrayTaskLimit",
              strCat("task ", s.array->task_id, " of array job ", s.array->array_job_id,
                     " waits for a place under the array's throttle"),
              std::nullopt};
    if (have_jobs)
      if (std::optional<StartGate> gate = throttleGate(job, *jobs)) return *gate;
    return {};
  };
  if (s.dependency.empty()) return throttled();
  if (!have_jobs)
    return {false, "Dependency",
            strCat("job ", s.job_id, " waits for its dependency ", cut(s.dependency, kDependencyStatusMax)),
            std::nullopt};
  if (!v || v->evaluation.result == DependencyResult::kSatisfied) return throttled();
  if (v->evaluation.result == DependencyResult::kWaiting) {
    StartGate gate{false, "Dependency",
                   strCat("job ", s.job_id, " waits for its dependency ",
                          formatDependency(v->spec, v->evaluation.states, kDependencyStatusMax)),
                   std::nullopt};
    // An "after:<id>+<minutes>" entry is met by time alone once its job runs.
    for (const Dependency& d : v->spec.items)
      if (d.delay_seconds > 0) gate.recheck_after = absl::Seconds(15);
    return gate;
  }
  StartGate gate{false, kDependencyNever,
                 v->error.empty() ? strCat("job ", s.job_id, "'s dependency can never be satisfied: ",
                                           formatDependency(v->spec, v->evaluation.states,
                                                            kDependencyStatusMax))
                                  : v->error,
                 std::nullopt};
  if (s.kill_on_invalid_dep) {
    gate.end_job = true;
    gate.message += "; the job is cancelled (sbatch --kill-on-invalid-dep=no keeps it pending)";
  }
  return gate;
}

std::optional<DependencyVerdict> verdictOf(const proto::ParallelJob& job, absl::Time now,
                                           const JobDirectory* jobs) {
  if (jobs == nullptr) return std::nullopt;
  return evaluateJobDependency(job, now, *jobs);
}

}  // namespace

std::optional<StartGate> SlurmRuntime::partitionLimitGate(const proto::ParallelJob& job) const {
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  const Partition* p = options_.slurm.partition(s.partition);
  if (p == nullptr || s.hold) return std::nullopt;  // a held job is JobHeldUser first
  // sbatch refuses what is over the limits (EnforcePartLimits=ALL); a job still over them was
  // submitted before an operator lowered them, or written past them (spec.slurm.timeLimitSeconds
  // 0 is UNLIMITED, as sbatch --time=0), and waits as in Slurm until one side changes.
  const std::optional<int64_t> limit =
      s.time_limit_seconds && *s.time_limit_seconds > 0 ? s.time_limit_seconds : std::nullopt;
  if (p->max_time_seconds && (!limit || *limit > *p->max_time_seconds))
    return StartGate{false, "PartitionTimeLimit",
                     strCat("job ", s.job_id, "'s time limit (",
                            formatTimeLimit(limit), ") is over partition ",
                            p->name, "'s MaxTime (", formatTimeLimit(p->max_time_seconds),
                            "): lower it with scontrol update JobId=", s.job_id,
                            " TimeLimit=..., or raise the partition's maxTime"),
                     std::nullopt};
  if (p->max_nodes > 0 && job.spec.num_pods > p->max_nodes)
    return StartGate{false, "PartitionNodeLimit",
                     strCat("job ", s.job_id, " asks for ", job.spec.num_pods,
                            " nodes, over partition ", p->name, "'s MaxNodes (", p->max_nodes, ")"),
                     std::nullopt};
  return std::nullopt;
}

StartGate SlurmRuntime::startGate(const proto::ParallelJob& job, absl::Time now,
                                  const JobDirectory* jobs) const {
  if (!job.spec.slurm) return {};
  if (std::optional<StartGate> limit = partitionLimitGate(job)) return *limit;
  return gateOf(job, now, jobs, verdictOf(job, now, jobs));
}

std::string SlurmRuntime::jobSecret(const proto::ParallelJob& job) const {
  return job.spec.slurm ? job.spec.slurm->batch_secret : "";
}

absl::Status SlurmRuntime::checkJobSecret(const proto::ParallelJob& job,
                                          const proto::ObjectMeta& secret) const {
  if (!job.spec.slurm) return absl::OkStatus();
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  const std::string what = strCat("the batch Secret ", proto::objectKey(job.meta.namespace_, secret.name));
  auto user = secret.annotations.find(proto::vocabulary::kSlurmUserAnnotation);
  if (user == secret.annotations.end())
    return absl::InvalidArgumentError(
        strCat(what, " has no annotation ", proto::vocabulary::kSlurmUserAnnotation,
               ": it was not written by sbatch for this job, and is not mounted"));
  if (user->second != s.user)
    return absl::InvalidArgumentError(
        strCat(what, " belongs to user \"", cut(user->second, 256), "\", not to the job's user \"",
               cut(s.user, 256), "\" (annotation ", proto::vocabulary::kSlurmUserAnnotation,
               "), and is not mounted"));
  const bool owned = std::any_of(secret.owner_references.begin(), secret.owner_references.end(),
                                 [&](const proto::OwnerReference& r) { return r.uid == job.meta.uid; });
  if (!owned)
    return absl::InvalidArgumentError(
        strCat(what, " is not owned by this job (no owner reference with its uid ", job.meta.uid,
               "): it was written for another job, and is not mounted"));
  return absl::OkStatus();
}

std::optional<std::string> SlurmRuntime::cancelled(const proto::ParallelJob& job) const {
  if (!job.spec.slurm || !job.spec.slurm->cancel) return std::nullopt;
  return strCat("job ", job.spec.slurm->job_id, " was cancelled (scancel)");
}

std::optional<std::string> SlurmRuntime::requeueRequested(const proto::ParallelJob& job) const {
  if (!job.spec.slurm || job.spec.slurm->cancel || !job.spec.slurm->requeue_attempt ||
      *job.spec.slurm->requeue_attempt != job.status.restarts)
    return std::nullopt;
  return strCat("job ", job.spec.slurm->job_id, " was requeued (scontrol requeue)");
}

bool SlurmRuntime::requeueOnPreemption(const proto::ParallelJob& job) const {
  return !job.spec.slurm || job.spec.slurm->requeue;
}

std::optional<absl::Time> SlurmRuntime::expiresAt(const proto::ParallelJob& job) const {
  if (!job.spec.slurm || !job.status.slurm || !options_.slurm.accounting_retention_seconds)
    return std::nullopt;
  const absl::Time end = parseTime(job.status.slurm->end_time);
  if (end == absl::InfinitePast()) return std::nullopt;
  return end + absl::Seconds(*options_.slurm.accounting_retention_seconds);
}

std::optional<int64_t> SlurmRuntime::timeLimitSeconds(const proto::ParallelJob& job) const {
  if (!job.spec.slurm) return std::nullopt;
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  std::optional<int64_t> limit;
  if (s.time_limit_seconds && *s.time_limit_seconds > 0)
    limit = std::min(*s.time_limit_seconds, kMaxTimeLimitSeconds);
  const Partition* p = options_.slurm.partition(s.partition);
  if (p != nullptr && p->max_time_seconds && *p->max_time_seconds > 0 &&
      (!limit || *limit > *p->max_time_seconds))
    limit = *p->max_time_seconds;
  return limit;
}

std::optional<absl::Duration> SlurmRuntime::timeLimit(const proto::ParallelJob& job) const {
  if (std::optional<int64_t> seconds = timeLimitSeconds(job)) return absl::Seconds(*seconds);
  return std::nullopt;
}

void SlurmRuntime::decorateStatus(const proto::ParallelJob& job, const proto::Pod* launcher,
                                  absl::Time now, const JobDirectory* jobs,
                                  proto::ParallelJobStatus* status) const {
  if (!job.spec.slurm) return;
  proto::SlurmJobStatus out;
  const proto::SlurmJobStatus before = job.status.slurm.value_or(proto::SlurmJobStatus{});
  const std::string now_text = proto::rfc3339(now);
  const auto* failed = [&]() -> const proto::Condition* {
    for (const auto& c : status->conditions)
      if (c.type == proto::vocabulary::kConditionFailed && c.status == "True") return &c;
    return nullptr;
  }();
  if (status->phase == "Succeeded") {
    out.state = "COMPLETED";
    out.exit_code = launcher != nullptr ? exitCodeOf(*launcher) : "0:0";
    if (out.exit_code.empty()) out.exit_code = "0:0";
  } else if (status->phase == "Failed") {
    const std::string reason = failed != nullptr ? failed->reason : "";
    if (reason == kReasonCancelled || reason == kDependencyNever) out.state = "CANCELLED";
    else if (reason == kReasonPreempted) out.state = "PREEMPTED";
    else if (reason == kTimeLimit) out.state = "TIMEOUT";
    else if (reason == kNodeFail || reason == "MaxRestartsExceeded") out.state = "NODE_FAIL";
    else out.state = "FAILED";
    out.reason = reason;
    if (launcher != nullptr) out.exit_code = exitCodeOf(*launcher);
    // A job cancelled before it ran has no batch exit; one cancelled while running got SIGTERM.
    if ((out.state == "CANCELLED" || out.state == "PREEMPTED") && out.exit_code.empty())
      out.exit_code = before.start_time.empty() ? "0:0" : "0:15";
    if (out.exit_code.empty()) out.exit_code = out.state == "TIMEOUT" ? "0:15" : "1:0";
  } else if (status->phase == "Running") {
    out.state = "RUNNING";
  } else {
    out.state = "PENDING";
    const std::optional<DependencyVerdict> verdict = verdictOf(job, now, jobs);
    StartGate gate = partitionLimitGate(job).value_or(gateOf(job, now, jobs, verdict));
    if (!gate.open) out.reason = gate.reason;
    // Preempted: Slurm's requeue sets the job's begin time past the cleanup of its old
    // allocation; here that is while the preempted run's pods are being deleted.
    else if (preemptedPodsGoing(*status)) out.reason = "BeginTime";
    else if (status->phase == "Restarting" || status->restarts > 0 || status->preemptions > 0)
      out.reason = "Requeued";
    else out.reason = waitingReason(job, launcher);
    // The entries not met yet, while the job waits for them (squeue %E, scontrol Dependency=).
    if (verdict && verdict->error.empty() &&
        verdict->evaluation.result != DependencyResult::kSatisfied)
      out.dependency = formatDependency(verdict->spec, verdict->evaluation.states, kDependencyStatusMax);
  }
  // StartTime: when this run began (a requeued job starts again); EndTime: when it ended.
  if (out.state == "RUNNING") out.start_time = before.start_time.empty() ? now_text : before.start_time;
  else if (out.state != "PENDING") out.start_time = before.start_time;
  if (out.state != "RUNNING" && out.state != "PENDING")
    out.end_time = !before.end_time.empty()         ? before.end_time
                   : !status->completion_time.empty() ? status->completion_time
                                                      : now_text;
  // The steps of the run that ended (none are known while a run goes on).
  if (out.state != "RUNNING" && out.state != "PENDING") {
    std::optional<TerminationMessage> m = launcher != nullptr ? stepsOf(*launcher) : std::nullopt;
    if (m) {
      for (const StepRecord& r : m->steps) {
        if (out.steps.size() >= kStatusStepsMax) {
          ++m->omitted;
          continue;
        }
        out.steps.push_back(toStatus(r));
      }
      out.steps_omitted = static_cast<int32_t>(std::min<int64_t>(m->omitted, INT32_MAX));
    } else {
      out.steps = before.steps;
      out.steps_omitted = before.steps_omitted;
    }
  }
  status->slurm = std::move(out);
}

}  // namespace muster::jobengine::slurm
