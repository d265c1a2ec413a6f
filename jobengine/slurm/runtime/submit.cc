#include "jobengine/slurm/runtime/submit.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "jobengine/runtime.h"
#include "jobengine/slurm/core/dependency.h"
#include "jobengine/slurm/core/env.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/limits.h"
#include "jobengine/slurm/core/script.h"
#include "jobengine/slurm/core/tasks.h"
#include "jobengine/slurm/core/time.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "proto/strings.h"
#include "proto/vocabulary.h"

namespace muster::jobengine::slurm {

using proto::strCat;
using proto::strAppend;

namespace {

// Slurm's wording for a refused submission.
absl::Status refused(std::string_view why) {
  return absl::InvalidArgumentError(strCat("sbatch: error: Batch job submission failed: ", why));
}
absl::Status error(std::string_view what) {
  return absl::InvalidArgumentError(strCat("sbatch: error: ", what));
}

constexpr char kNodeConfigUnavailable[] = "Requested node configuration is not available";
constexpr auto& kGpuModelLabel = proto::vocabulary::kLabelGpuModel;

// Everything the request means, derived once and used by both the checks and the build.
struct Shape {
  const Partition* partition = nullptr;
  int nodes = 1;
  std::vector<int> tasks_per_node;
  int ntasks = 1;
  int cpus_per_task = 1;
  int max_tasks = 1;  // on the busiest node
  int64_t cpu_millis = 0;
  std::optional<int64_t> memory_mb;
  int64_t gpus = 0;
  std::string gpu_type;
  std::optional<int64_t> time_limit;  // seconds; nullopt: UNLIMITED
  std::string dependency;             // -d, checked
  std::vector<std::string> include, exclude;
  // -C as OR of AND-terms; each term: label -> value ("" for "exists").
  std::vector<std::map<std::string, std::string>> constraint;
  std::optional<absl::Time> begin;
  std::optional<ArraySpec> array;  // --array
};

absl::StatusOr<std::vector<std::map<std::string, std::string>>> parseConstraint(
    std::string_view text) {
  std::vector<std::map<std::string, std::string>> terms;
  if (text.empty()) return terms;
  if (text.find_first_of("[]*()") != std::string_view::npos)
    return error(strCat("Invalid feature specification: ", text,
                        " (Muster supports features joined with & , and |, no counts or brackets)"));
  for (absl::string_view alt : absl::StrSplit(proto::av(text), '|')) {
    std::map<std::string, std::string>& term = terms.emplace_back();
    for (absl::string_view feature : absl::StrSplit(alt, absl::ByAnyChar("&,"))) {
      std::string f(feature);
      if (f.empty()) return error(strCat("Invalid feature specification: ", text));
      if (auto eq = f.find('='); eq != std::string::npos) term[f.substr(0, eq)] = f.substr(eq + 1);
      else term[f] = "";
    }
  }
  return terms;
}

bool matchesTerm(const NodeShape& n, const std::map<std::string, std::string>& term) {
  for (const auto& [k, v] : term) {
    auto it = n.labels.find(k);
    if (it == n.labels.end() || (!v.empty() && it->second != v)) return false;
  }
  return true;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::StatusOr<Shape> shapeOf(const BatchOptions& o, const SlurmConfig& config,
                              const SubmitContext& ctx) {
  Shape s;
  if (!config.enabled())
    return error("this cluster has no Slurm partitions (Muster's config has no slurm: section)");
  s.partition = config.partition(o.partition.value_or(""));
  if (s.partition == nullptr)
    return o.partition ? refused("Invalid partition name specified")
                       : refused("No partition specified or system default partition");
  if (o.array) {
    auto array = parseArraySpec(*o.array);
    if (!array.ok()) return refused(std::string(array.status().message()));
    s.array = *std::move(array);
  }
  if (o.dependency) {
    auto dep = parseDependency(*o.dependency);
    // "Job dependency problem", with Muster's reason when it has one (too many entries).
    if (!dep.ok()) return refused(std::string(dep.status().message()));
    for (const Dependency& d : dep->items) {
      if (!isSupported(d.type))
        return error(strCat("--dependency ", dependencyTypeName(d.type),
                            " is not supported by Muster (it has no burst buffers and does not "
                            "grow jobs); nothing was submitted"));
      // A job Slurm does not know is refused (one that ended and was purged cannot be told
      // apart from one that never was).
      if (d.job_id != 0 && ctx.job_exists && !ctx.job_exists(d.job_id))
        return refused("Job dependency problem");
    }
    if (!dep->items.empty()) s.dependency = *o.dependency;
  }

  // Muster's limits (limits.h), before anything is computed from the numbers: more than any node
  // holds is what slurmctld calls a node configuration that is not available.
  auto over = [](const auto& value, int64_t max) {
    return value && (static_cast<int64_t>(*value) < 0 || static_cast<int64_t>(*value) > max);
  };
  auto overGpus = [&](const std::optional<GpuRequest>& g, int64_t max) {
    return g && (g->count < 0 || g->count > max);
  };
  bool gres_over = false;
  if (o.gres)
    for (const Gres& g : *o.gres) gres_over = gres_over || g.count < 0 || g.count > kMaxGpusPerNode;
  if (over(o.ntasks, kMaxTasks) || over(o.ntasks_per_node, kMaxTasksPerNode) ||
      over(o.cpus_per_task, kMaxCpusPerTask) || overGpus(o.gpus_per_node, kMaxGpusPerNode) ||
      overGpus(o.gpus_per_task, kMaxGpusPerNode) ||
      overGpus(o.gpus, int64_t{kMaxGpusPerNode} * kMaxNumPods) || gres_over ||
      over(o.mem_mb, kMaxMemoryMb) || over(o.mem_per_cpu_mb, kMaxMemoryMb) ||
      over(o.mem_per_gpu_mb, kMaxMemoryMb))
    return refused(kNodeConfigUnavailable);

  s.nodes = o.nodes_min.value_or(1);
  if (s.nodes < 1 || s.nodes > kMaxNumPods) return refused("Node count specification invalid");
  if (s.partition->max_nodes > 0 && s.nodes > s.partition->max_nodes)
    return refused("Node count specification invalid");
  s.cpus_per_task = o.cpus_per_task.value_or(1);
  if (o.ntasks && o.ntasks_per_node && *o.ntasks > *o.ntasks_per_node * s.nodes)
    s.nodes = static_cast<int>(ceilDiv(*o.ntasks, *o.ntasks_per_node));
  if (o.ntasks && !o.nodes_min && o.ntasks_per_node)
    s.nodes = static_cast<int>(ceilDiv(*o.ntasks, *o.ntasks_per_node));
  if (o.ntasks && *o.ntasks < s.nodes) {
    if (o.nodes_min) return refused("Node count specification invalid");
    s.nodes = *o.ntasks;
  }
  if (s.nodes > kMaxNumPods) return refused("Node count specification invalid");
  s.ntasks = o.ntasks ? *o.ntasks : (o.ntasks_per_node ? *o.ntasks_per_node * s.nodes : s.nodes);
  s.tasks_per_node = blockTaskCounts(s.nodes, s.ntasks, static_cast<int>(std::max<int64_t>(1, ceilDiv(s.ntasks, s.nodes))) * s.cpus_per_task,
                                     s.cpus_per_task, o.ntasks_per_node);
  s.max_tasks = s.tasks_per_node.empty() ? 1 : *std::max_element(s.tasks_per_node.begin(), s.tasks_per_node.end());
  s.max_tasks = std::max(1, s.max_tasks);
  if (s.max_tasks > kMaxTasksPerNode) return refused(kNodeConfigUnavailable);
  s.cpu_millis = int64_t{1000} * s.cpus_per_task * s.max_tasks;

  // GPUs per pod.
  if (o.gpus_per_node) {
    s.gpus = o.gpus_per_node->count;
    s.gpu_type = o.gpus_per_node->type.value_or("");
  }
  if (o.gres) {
    for (const Gres& g : *o.gres) {
      if (g.name != "gpu")
        return refused(strCat("Invalid generic resource (gres) specification: ", g.name,
                              " (Muster knows gres gpu only)"));
      s.gpus = g.count;
      s.gpu_type = g.type.value_or(s.gpu_type);
    }
  }
  if (o.gpus_per_task) {
    s.gpus = o.gpus_per_task->count * s.max_tasks;
    s.gpu_type = o.gpus_per_task->type.value_or(s.gpu_type);
  }
  if (o.gpus) {
    s.gpus = ceilDiv(o.gpus->count, s.nodes);
    s.gpu_type = o.gpus->type.value_or(s.gpu_type);
  }
  if (s.gpus > kMaxGpusPerNode) return refused(kNodeConfigUnavailable);
  // Memory per pod.
  if (o.mem_mb && *o.mem_mb > 0) s.memory_mb = *o.mem_mb;
  else if (o.mem_per_cpu_mb) s.memory_mb = *o.mem_per_cpu_mb * s.cpus_per_task * s.max_tasks;
  else if (o.mem_per_gpu_mb) s.memory_mb = *o.mem_per_gpu_mb * std::max<int64_t>(1, s.gpus);
  else if (!o.mem_mb && s.partition->default_mem_per_cpu_mb > 0)
    s.memory_mb = s.partition->default_mem_per_cpu_mb * s.cpus_per_task * s.max_tasks;

  // Time.
  // Slurm: without --time the partition's DefaultTime, else its MaxTime.
  s.time_limit = o.time_limit                             ? *o.time_limit
                 : s.partition->default_time_seconds      ? s.partition->default_time_seconds
                                                          : s.partition->max_time_seconds;
  if (s.partition->max_time_seconds &&
      (!s.time_limit || *s.time_limit > *s.partition->max_time_seconds))
    return refused("Requested time limit is invalid (missing or exceeds some limit)");

  // Nodes asked for and against.
  if (o.nodelist) {
    auto hosts = expandHostlist(*o.nodelist);
    if (!hosts.ok()) return refused("Invalid node name specified");
    s.include = *hosts;
  }
  if (o.exclude) {
    auto hosts = expandHostlist(*o.exclude);
    if (!hosts.ok()) return refused("Invalid node name specified");
    s.exclude = *hosts;
  }
  auto constraint = parseConstraint(o.constraint.value_or(""));
  if (!constraint.ok()) return constraint.status();
  s.constraint = *std::move(constraint);
  if (o.begin) {
    auto begin = parseTimestamp(*o.begin, ctx.now, /*past=*/false);
    if (!begin.ok()) return error(strCat("Invalid time specification ", *o.begin));
    s.begin = *begin;
  }

  // Can the partition ever hold it? Only with the partition's nodes listed.
  if (ctx.nodes) {
    int fitting = 0;
    std::vector<std::string> fitting_names;
    for (const NodeShape& n : *ctx.nodes) {
      if (std::find(s.exclude.begin(), s.exclude.end(), n.name) != s.exclude.end()) continue;
      if (!s.include.empty() &&
          std::find(s.include.begin(), s.include.end(), n.name) == s.include.end())
        continue;
      if (!s.constraint.empty() &&
          std::none_of(s.constraint.begin(), s.constraint.end(),
                       [&](const auto& term) { return matchesTerm(n, term); }))
        continue;
      if (!s.gpu_type.empty() && (!n.labels.count(kGpuModelLabel) || n.labels.at(kGpuModelLabel) != s.gpu_type))
        continue;
      if (n.cpu_millis < s.cpu_millis || n.gpus < s.gpus ||
          (s.memory_mb && n.memory_mb < *s.memory_mb))
        continue;
      ++fitting;
      fitting_names.push_back(n.name);
    }
    for (const std::string& name : s.include) {
      if (std::find(fitting_names.begin(), fitting_names.end(), name) == fitting_names.end())
        return refused(strCat("Requested node configuration is not available (node ", name,
                              " is not in partition ", s.partition->name, " or cannot hold a node of this job)"));
    }
    if (fitting == 0 || (o.exclusive && fitting < s.nodes))
      return refused(kNodeConfigUnavailable);
  }
  return s;
}

std::string memoryQuantity(int64_t mb) { return strCat(mb, "Mi"); }

// spec.launcher: what the job asks of each pod (the rest comes from the partition).
std::string launcherTemplate(const Shape& s) {
  proto::JsonWriter w;
  w.beginObject();
  w.key("metadata").beginObject().endObject();
  w.key("spec").beginObject();
  std::map<std::string, std::string> selector;
  if (!s.gpu_type.empty()) selector[kGpuModelLabel] = s.gpu_type;
  if (s.constraint.size() == 1)
    for (const auto& [k, v] : s.constraint[0])
      if (!v.empty()) selector[k] = v;
  if (!selector.empty()) w.stringMapField("nodeSelector", selector);
  // Node affinity for -w, -x and the parts of -C a nodeSelector cannot say.
  const bool exists_terms = s.constraint.size() > 1 ||
                            (s.constraint.size() == 1 &&
                             std::any_of(s.constraint[0].begin(), s.constraint[0].end(),
                                         [](const auto& kv) { return kv.second.empty(); }));
  if (!s.include.empty() || !s.exclude.empty() || exists_terms) {
    w.key("affinity").beginObject().key("nodeAffinity").beginObject();
    w.key("requiredDuringSchedulingIgnoredDuringExecution").beginObject();
    w.key("nodeSelectorTerms").beginArray();
    const size_t terms = std::max<size_t>(1, s.constraint.size());
    for (size_t t = 0; t < terms; ++t) {
      w.beginObject().key("matchExpressions").beginArray();
      auto expr = [&](std::string_view key, std::string_view op, const std::vector<std::string>& values) {
        w.beginObject().stringField("key", key).stringField("operator", op);
        if (!values.empty()) {
          w.key("values").beginArray();
          for (const auto& v : values) w.string(v);
          w.endArray();
        }
        w.endObject();
      };
      if (!s.include.empty()) expr(proto::vocabulary::kHostnameLabel, "In", s.include);
      if (!s.exclude.empty()) expr(proto::vocabulary::kHostnameLabel, "NotIn", s.exclude);
      if (t < s.constraint.size())
        for (const auto& [k, v] : s.constraint[t]) {
          if (v.empty()) expr(k, "Exists", {});
          else if (s.constraint.size() > 1) expr(k, "In", {v});
        }
      w.endArray().endObject();
    }
    w.endArray().endObject().endObject().endObject();
  }
  w.key("containers").beginArray().beginObject().stringField("name", "main");
  w.key("resources").beginObject();
  std::map<std::string, std::string> requests = {{"cpu", strCat(s.cpu_millis, "m")}};
  std::map<std::string, std::string> limits;
  if (s.memory_mb) requests["memory"] = memoryQuantity(*s.memory_mb);
  if (s.gpus > 0) {
    requests[proto::kGpuResource] = strCat(s.gpus);
    limits[proto::kGpuResource] = strCat(s.gpus);
  }
  w.stringMapField("requests", requests);
  if (!limits.empty()) w.stringMapField("limits", limits);
  w.endObject().endObject().endArray();
  w.endObject().endObject();
  return w.str();
}

std::string absolute(const std::string& path, const std::string& base) {
  if (path.empty() || path[0] == '/') return path;
  return base.empty() || base.back() == '/' ? base + path : base + "/" + path;
}

}  // namespace

std::string jobObjectName(int64_t job_id) { return strCat("slurm-", job_id); }
std::string batchSecretName(int64_t job_id) { return strCat("slurm-", job_id, "-batch"); }

std::string encodeEnvironment(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const auto& [k, v] : env) {
    out.append(k).append("=").append(v);
    out.push_back('\0');
  }
  return out;
}

absl::Status checkSubmission(const BatchOptions& options, const SlurmConfig& config,
                             const SubmitContext& context) {
  return shapeOf(options, config, context).status();
}

namespace {

// The submission of job `job_id`: the whole job, or task `task` of the array.
Submission buildOne(const BatchOptions& o, const Shape& s, const SubmitContext& ctx,
                    int64_t job_id, std::optional<proto::SlurmArrayTask> task) {
  Submission out;
  for (const IgnoredOption& ignored : o.ignored) out.notes.push_back(ignored.warning);

  proto::ParallelJob& job = out.job;
  job.meta.name = jobObjectName(job_id);
  job.meta.namespace_ = ctx.ns;
  job.meta.labels[proto::vocabulary::kSlurmJobIdLabel] = strCat(job_id);
  if (task)
    job.meta.labels[proto::vocabulary::kSlurmArrayJobIdLabel] = strCat(task->array_job_id);
  if (!s.partition->topology_required.empty())
    job.meta.annotations[proto::vocabulary::kTopologyRequiredAnnotation] = s.partition->topology_required;
  if (!s.partition->topology_preferred.empty())
    job.meta.annotations[proto::vocabulary::kTopologyPreferredAnnotation] = s.partition->topology_preferred;
  if (o.exclusive) job.meta.annotations[proto::vocabulary::kExclusiveAnnotation] = "true";
  job.spec.runtime_ref_name = "slurm";
  job.spec.num_pods = s.nodes;
  job.spec.num_proc_per_pod = s.max_tasks;
  job.spec.launcher = launcherTemplate(s);
  job.spec.launcher_container_names = {"main"};
  const bool requeue = o.requeue.value_or(true);
  job.spec.max_restarts = requeue ? 3 : 0;

  proto::SlurmJobSpec& j = job.spec.slurm.emplace();
  j.job_id = job_id;
  j.array = task;
  j.job_name = o.job_name.value_or(defaultJobName(o));
  j.partition = s.partition->name;
  j.user = ctx.user;
  j.account = o.account.value_or("");
  j.qos = o.qos.value_or("");
  j.comment = o.comment.value_or("");
  j.command = o.wrap ? "(wrap)" : (ctx.script_path.empty() ? "(stdin)" : absolute(ctx.script_path, ctx.submit_dir));
  j.submit_dir = ctx.submit_dir;
  j.submit_host = ctx.submit_host;
  j.work_dir = o.chdir ? absolute(*o.chdir, ctx.submit_dir) : ctx.submit_dir;
  j.stdout_pattern = o.output.value_or("");
  j.stderr_pattern = o.error.value_or("");
  j.stdin_path = o.input.value_or("");
  j.batch_secret = batchSecretName(job_id);
  j.ntasks = s.ntasks;
  if (o.ntasks_per_node) j.ntasks_per_node = *o.ntasks_per_node;
  if (o.cpus_per_task) j.cpus_per_task = *o.cpus_per_task;
  j.tasks_per_node.assign(s.tasks_per_node.begin(), s.tasks_per_node.end());
  if (s.gpus > 0) j.gpus_per_node = static_cast<int32_t>(s.gpus);
  if (o.gpus_per_task) j.gpus_per_task = static_cast<int32_t>(o.gpus_per_task->count);
  j.gpu_type = s.gpu_type;
  if (o.mem_mb && *o.mem_mb > 0) j.mem_per_node_mb = *o.mem_mb;
  if (o.mem_per_cpu_mb) j.mem_per_cpu_mb = *o.mem_per_cpu_mb;
  j.time_limit_seconds = s.time_limit;
  j.requeue = requeue;
  j.hold = o.hold;
  if (s.begin) j.begin_time = proto::rfc3339(*s.begin);
  j.dependency = s.dependency;
  j.kill_on_invalid_dep = o.kill_on_invalid_dep.value_or(true);
  j.exclusive = o.exclusive;
  j.required_nodes = s.include;
  j.excluded_nodes = s.exclude;

  // The Secret: the script, the environment after --export, the script's arguments.
  out.batch.meta.name = batchSecretName(job_id);
  out.batch.meta.namespace_ = ctx.ns;
  out.batch.meta.labels[proto::vocabulary::kSlurmJobIdLabel] = strCat(job_id);
  // Whose it is (admission lets only that user write the annotation), and never changed after
  // it is created: the job engine checks both before the job's pods mount it (issue 43).
  out.batch.meta.annotations[proto::vocabulary::kSlurmUserAnnotation] = ctx.user;
  out.batch.immutable = true;
  out.batch.string_data["script"] = o.wrap ? wrapScript(*o.wrap) : ctx.script;
  out.batch.string_data["environment"] = encodeEnvironment(applyExport(o.export_env, ctx.environment));
  std::string args;
  for (const std::string& a : ctx.script_args) {
    args.append(a);
    args.push_back('\0');
  }
  out.batch.string_data["args"] = args;
  return out;
}

}  // namespace

int64_t jobIdsNeeded(const BatchOptions& options) {
  if (!options.array) return 1;
  auto array = parseArraySpec(*options.array);
  return array.ok() ? array->taskCount() : 1;
}

absl::StatusOr<std::vector<Submission>> buildSubmissions(const BatchOptions& o,
                                                         const SlurmConfig& config,
                                                         const SubmitContext& ctx,
                                                         int64_t first_job_id) {
  auto shape = shapeOf(o, config, ctx);
  if (!shape.ok()) return shape.status();
  std::vector<Submission> out;
  if (!shape->array) {
    out.push_back(buildOne(o, *shape, ctx, first_job_id, std::nullopt));
    return out;
  }
  const ArraySpec& a = *shape->array;
  for (size_t k = 0; k < a.task_ids.size(); ++k) {
    proto::SlurmArrayTask task;
    task.array_job_id = first_job_id;
    task.task_id = a.task_ids[k];
    task.task_count = a.taskCount();
    task.task_min = a.minTaskId();
    task.task_max = a.maxTaskId();
    task.task_step = a.step;
    if (a.max_running) task.max_running = static_cast<int32_t>(*a.max_running);
    out.push_back(buildOne(o, *shape, ctx, first_job_id + static_cast<int64_t>(k), task));
  }
  return out;
}

absl::StatusOr<std::vector<Submission>> submitAll(const BatchOptions& o, const SlurmConfig& config,
                                                  const SubmitContext& ctx, const SubmitSteps& steps,
                                                  int tries) {
  std::vector<int64_t> taken;  // first ids of the tries whose names were taken
  for (int attempt = 0; attempt < std::max(1, tries); ++attempt) {
    auto id = steps.allocate_ids(jobIdsNeeded(o));
    if (!id.ok()) return id.status();
    auto submissions = buildSubmissions(o, config, ctx, *id);
    if (!submissions.ok()) return submissions.status();
    // An array's tasks are created in order; when one cannot be, those created go again, so
    // that no array is left half submitted.
    std::vector<std::string> created;
    absl::Status failed;
    for (Submission& submission : *submissions) {
      failed = steps.create(submission);
      if (!failed.ok()) break;
      created.push_back(submission.job.meta.name);
    }
    if (failed.ok()) return submissions;
    for (const std::string& name : created) steps.remove(name);
    if (failed.code() != absl::StatusCode::kAlreadyExists) return failed;
    taken.push_back(*id);  // a fresh id next time: the counter has moved past this one
  }
  std::string ids;
  for (int64_t id : taken) strAppend(&ids, ids.empty() ? "" : ", ", id);
  return absl::AlreadyExistsError(
      strCat("Batch job submission failed: the names of job ids ", ids, " (slurm-<id>, "
             "slurm-<id>-batch) were already taken in namespace ", ctx.ns,
             " by objects sbatch did not create; ask an administrator to remove them"));
}

absl::StatusOr<Submission> buildSubmission(const BatchOptions& o, const SlurmConfig& config,
                                           const SubmitContext& ctx, int64_t job_id) {
  auto all = buildSubmissions(o, config, ctx, job_id);
  if (!all.ok()) return all.status();
  return std::move(all->front());
}

}  // namespace muster::jobengine::slurm
