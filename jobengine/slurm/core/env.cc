#include "jobengine/slurm/core/env.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/tasks.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

std::string joinIds(const std::vector<int>& ids) { return absl::StrJoin(ids, ","); }

bool isSlurmVariable(const std::string& name) {
  return name.rfind("SLURM", 0) == 0 || name.rfind("_SLURM_SPANK_OPTION_", 0) == 0;
}

const std::vector<int>& gpusOf(const JobEnvironmentInput& job, int node_index) {
  static const std::vector<int> kNone;
  if (node_index < 0 || static_cast<size_t>(node_index) >= job.gpus_on_node.size()) return kNone;
  return job.gpus_on_node[static_cast<size_t>(node_index)];
}

}  // namespace

std::string formatGpuRequest(const GpuRequest& gpus) {
  if (gpus.type) return absl::StrCat(*gpus.type, ":", gpus.count);
  return absl::StrCat(gpus.count);
}

Environment batchEnvironment(const JobEnvironmentInput& job, int node_index) {
  Environment env;
  const size_t nodes = job.node_names.size();
  const std::string nodelist = compressHostlist(job.node_names);
  env["SLURM_CLUSTER_NAME"] = job.cluster_name;
  env["SLURM_JOB_ID"] = absl::StrCat(job.job_id);
  env["SLURM_JOBID"] = absl::StrCat(job.job_id);
  env["SLURM_JOB_NAME"] = job.job_name;
  env["SLURM_JOB_NUM_NODES"] = absl::StrCat(nodes);
  env["SLURM_NNODES"] = absl::StrCat(nodes);
  env["SLURM_JOB_NODELIST"] = nodelist;
  env["SLURM_NODELIST"] = nodelist;
  env["SLURM_JOB_PARTITION"] = job.partition;
  env["SLURM_JOB_CPUS_PER_NODE"] = formatTasksPerNode(job.cpus_per_node);
  if (!job.tasks_per_node.empty()) {
    env["SLURM_TASKS_PER_NODE"] = formatTasksPerNode(job.tasks_per_node);
  }
  // env_array_for_batch_job: the task count, or --ntasks-per-node times the nodes.
  // In 64 bits: --ntasks-per-node times the nodes can be past INT_MAX.
  std::optional<int64_t> ntasks = job.ntasks;
  if (!ntasks && job.ntasks_per_node)
    ntasks = int64_t{*job.ntasks_per_node} * static_cast<int64_t>(nodes);
  if (ntasks) {
    env["SLURM_NTASKS"] = absl::StrCat(*ntasks);
    env["SLURM_NPROCS"] = absl::StrCat(*ntasks);
  }
  if (job.ntasks_per_node) env["SLURM_NTASKS_PER_NODE"] = absl::StrCat(*job.ntasks_per_node);
  if (job.cpus_per_task) env["SLURM_CPUS_PER_TASK"] = absl::StrCat(*job.cpus_per_task);
  if (node_index >= 0 && static_cast<size_t>(node_index) < job.cpus_per_node.size()) {
    env["SLURM_CPUS_ON_NODE"] = absl::StrCat(job.cpus_per_node[static_cast<size_t>(node_index)]);
  }
  env["SLURM_NODEID"] = absl::StrCat(node_index);
  if (node_index >= 0 && static_cast<size_t>(node_index) < nodes) {
    env["SLURMD_NODENAME"] = job.node_names[static_cast<size_t>(node_index)];
    env["HOSTNAME"] = job.node_names[static_cast<size_t>(node_index)];
  }
  env["SLURM_PROCID"] = "0";
  env["SLURM_LOCALID"] = "0";
  env["SLURM_SUBMIT_DIR"] = job.submit_dir;
  env["SLURM_SUBMIT_HOST"] = job.submit_host;
  env["SLURM_RESTART_COUNT"] = absl::StrCat(job.restart_count);
  env["ENVIRONMENT"] = "BATCH";
  if (job.gpus) env["SLURM_GPUS"] = formatGpuRequest(*job.gpus);
  if (job.gpus_per_node) env["SLURM_GPUS_PER_NODE"] = formatGpuRequest(*job.gpus_per_node);
  if (job.gpus_per_task) env["SLURM_GPUS_PER_TASK"] = formatGpuRequest(*job.gpus_per_task);
  const std::vector<int>& gpus = gpusOf(job, node_index);
  if (!gpus.empty()) {
    env["SLURM_GPUS_ON_NODE"] = absl::StrCat(gpus.size());
    env["SLURM_JOB_GPUS"] = joinIds(gpus);
    env["CUDA_VISIBLE_DEVICES"] = joinIds(gpus);
  }
  if (job.array) {
    env["SLURM_ARRAY_JOB_ID"] = absl::StrCat(job.array->array_job_id);
    env["SLURM_ARRAY_TASK_ID"] = absl::StrCat(job.array->task_id);
    env["SLURM_ARRAY_TASK_COUNT"] = absl::StrCat(job.array->task_count);
    env["SLURM_ARRAY_TASK_MIN"] = absl::StrCat(job.array->task_min);
    env["SLURM_ARRAY_TASK_MAX"] = absl::StrCat(job.array->task_max);
    env["SLURM_ARRAY_TASK_STEP"] = absl::StrCat(job.array->task_step);
  }
  if (job.account) env["SLURM_JOB_ACCOUNT"] = *job.account;
  if (job.qos) env["SLURM_JOB_QOS"] = *job.qos;
  if (job.mem_per_cpu_mb) {
    env["SLURM_MEM_PER_CPU"] = absl::StrCat(*job.mem_per_cpu_mb);
  } else if (job.mem_per_node_mb) {
    env["SLURM_MEM_PER_NODE"] = absl::StrCat(*job.mem_per_node_mb);
  }
  if (job.dependency) env["SLURM_JOB_DEPENDENCY"] = *job.dependency;
  // sbatch: "srun ignores ALL, it is the default".
  if (job.export_env && job.export_env->mode != ExportSpec::Mode::kAll) {
    env["SLURM_EXPORT_ENV"] = job.export_env->raw;
  }
  if (job.user) env["SLURM_JOB_USER"] = *job.user;
  if (job.uid) env["SLURM_JOB_UID"] = absl::StrCat(*job.uid);
  if (job.gid) env["SLURM_JOB_GID"] = absl::StrCat(*job.gid);
  if (job.start_time) env["SLURM_JOB_START_TIME"] = absl::StrCat(absl::ToUnixSeconds(*job.start_time));
  if (job.end_time) env["SLURM_JOB_END_TIME"] = absl::StrCat(absl::ToUnixSeconds(*job.end_time));
  return env;
}

Environment stepTaskEnvironment(const JobEnvironmentInput& job, const StepEnvironmentInput& step,
                                int procid) {
  Environment env;
  std::vector<TaskPlacement> placements = taskPlacements(step.tasks_per_node);
  if (procid < 0 || static_cast<size_t>(procid) >= placements.size()) return env;
  const TaskPlacement& where = placements[static_cast<size_t>(procid)];
  const size_t step_nodes = step.tasks_per_node.size();
  const int job_node = static_cast<size_t>(where.node_index) < step.node_indices.size()
                           ? step.node_indices[static_cast<size_t>(where.node_index)]
                           : where.node_index;

  std::vector<std::string> names;
  for (int index : step.node_indices) {
    if (index >= 0 && static_cast<size_t>(index) < job.node_names.size()) {
      names.push_back(job.node_names[static_cast<size_t>(index)]);
    }
  }
  const std::string tasks_per_node = formatTasksPerNode(step.tasks_per_node);
  env["SLURM_STEP_ID"] = absl::StrCat(step.step_id);
  env["SLURM_STEPID"] = absl::StrCat(step.step_id);
  env["SLURM_STEP_NODELIST"] = compressHostlist(names);
  env["SLURM_STEP_NUM_NODES"] = absl::StrCat(step_nodes);
  env["SLURM_STEP_NUM_TASKS"] = absl::StrCat(placements.size());
  env["SLURM_STEP_TASKS_PER_NODE"] = tasks_per_node;
  if (!step.preserve_env) {
    env["SLURM_NNODES"] = absl::StrCat(step_nodes);
    env["SLURM_NTASKS"] = absl::StrCat(placements.size());
    env["SLURM_NPROCS"] = absl::StrCat(placements.size());
    env["SLURM_TASKS_PER_NODE"] = tasks_per_node;
  }
  env["SLURM_PROCID"] = absl::StrCat(procid);
  env["SLURM_LOCALID"] = absl::StrCat(where.local_id);
  env["SLURM_NODEID"] = absl::StrCat(where.node_index);
  env["SLURM_STEP_PROCID"] = absl::StrCat(procid);
  env["SLURM_STEP_LOCALID"] = absl::StrCat(where.local_id);
  env["SLURM_STEP_NODEID"] = absl::StrCat(where.node_index);
  env["SLURM_GTIDS"] =
      joinIds(taskIdsByNode(step.tasks_per_node)[static_cast<size_t>(where.node_index)]);
  if (job_node >= 0 && static_cast<size_t>(job_node) < job.node_names.size()) {
    env["SLURMD_NODENAME"] = job.node_names[static_cast<size_t>(job_node)];
  }
  if (job_node >= 0 && static_cast<size_t>(job_node) < job.cpus_per_node.size()) {
    env["SLURM_CPUS_ON_NODE"] = absl::StrCat(job.cpus_per_node[static_cast<size_t>(job_node)]);
  }
  if (step.cpus_per_task) env["SLURM_CPUS_PER_TASK"] = absl::StrCat(*step.cpus_per_task);
  if (step.gpus_per_task) env["SLURM_GPUS_PER_TASK"] = formatGpuRequest(*step.gpus_per_task);
  const std::vector<int>& gpus = gpusOf(job, job_node);
  if (!gpus.empty()) {
    env["SLURM_STEP_GPUS"] = joinIds(gpus);
    std::vector<int> visible = gpus;
    if (step.gpus_per_task && step.gpus_per_task->count > 0) {
      visible.clear();
      const int64_t g = step.gpus_per_task->count;
      for (int64_t k = 0; k < g; ++k) {
        size_t at = static_cast<size_t>((where.local_id * g + k) % static_cast<int64_t>(gpus.size()));
        visible.push_back(gpus[at]);
      }
    }
    env["CUDA_VISIBLE_DEVICES"] = joinIds(visible);
  }
  return env;
}

Environment applyExport(const std::optional<ExportSpec>& spec, const Environment& submit_env) {
  Environment env;
  if (!spec) {
    env = submit_env;
    env.erase("SLURM_JWT");  // DEF_ENV_EXCLUDE "^SLURM_JWT="
    return env;
  }
  auto mergeSlurm = [&]() {
    for (const auto& [name, value] : submit_env) {
      if (isSlurmVariable(name)) env[name] = value;
    }
  };
  switch (spec->mode) {
    case ExportSpec::Mode::kAll:
      return submit_env;
    case ExportSpec::Mode::kNil:
      mergeSlurm();
      return env;
    case ExportSpec::Mode::kNone:
      mergeSlurm();
      env["SLURM_GET_USER_ENV"] = "1";
      return env;
    case ExportSpec::Mode::kList:
      break;
  }
  for (const ExportSpec::Item& item : spec->items) {
    switch (item.kind) {
      case ExportSpec::Item::Kind::kAll:
        for (const auto& [name, value] : submit_env) env[name] = value;
        break;
      case ExportSpec::Item::Kind::kAssignment:
        env[item.name] = item.value;
        break;
      case ExportSpec::Item::Kind::kName:
        if (auto it = submit_env.find(item.name); it != submit_env.end()) env[item.name] = it->second;
        break;
    }
  }
  mergeSlurm();
  env["SLURM_GET_USER_ENV"] = "1";
  return env;
}

}  // namespace muster::jobengine::slurm
