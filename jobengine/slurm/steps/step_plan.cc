#include "jobengine/slurm/steps/step_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/tasks.h"
#include "jobengine/slurm/core/util.h"
#include "jobengine/slurm/steps/process.h"

namespace muster::jobengine::slurm {
namespace {

std::optional<std::string> lookup(const Environment& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) return it->second;
  }
  return std::nullopt;
}

absl::Status unavailable(std::string_view prog, uint32_t job_id) {
  return absl::InvalidArgumentError(absl::StrCat(
      av(prog), ": error: Unable to create step for job ", job_id,
      ": Requested node configuration is not available"));
}

std::vector<int> parseIdList(std::string_view text) {
  std::vector<int> out;
  for (std::string_view part : splitAny(text, ",", true)) {
    std::optional<uint64_t> v = parseDigits(part);
    if (!v || *v > 1'000'000) return {};
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<int>> parseCountList(std::string_view text) {
  std::vector<int> out;
  auto bad = [&]() {
    return absl::InvalidArgumentError(absl::StrCat("invalid count list \"", av(text), "\""));
  };
  for (std::string_view part : splitAny(text, ",", false)) {
    uint64_t reps = 1;
    std::string_view count = part;
    if (size_t paren = part.find('('); paren != std::string_view::npos) {
      if (part.size() < paren + 4 || part.substr(paren, 2) != "(x" || part.back() != ')') {
        return bad();
      }
      std::optional<uint64_t> r = parseDigits(part.substr(paren + 2, part.size() - paren - 3));
      if (!r || *r == 0) return bad();
      reps = *r;
      count = part.substr(0, paren);
    }
    std::optional<uint64_t> c = parseDigits(count);
    if (!c || *c > 1'000'000) return bad();
    if (reps > kMaxHostlistSize || out.size() + reps > kMaxHostlistSize) return bad();
    out.insert(out.end(), static_cast<size_t>(reps), static_cast<int>(*c));
  }
  return out;
}

absl::StatusOr<Allocation> allocationFromEnvironment(const Environment& env,
                                                     std::string_view prog) {
  Allocation a;
  std::optional<std::string> job_id = lookup(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  std::optional<uint64_t> id = job_id ? parseDigits(*job_id) : std::nullopt;
  if (!id || *id > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(av(prog), ": error: invalid SLURM_JOB_ID \"", job_id.value_or(""), "\""));
  }
  a.job_id = static_cast<uint32_t>(*id);
  std::optional<std::string> nodelist = lookup(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!nodelist) {
    return absl::InvalidArgumentError(
        absl::StrCat(av(prog), ": error: SLURM_JOB_NODELIST is not set"));
  }
  absl::StatusOr<std::vector<std::string>> nodes = expandHostlist(*nodelist);
  if (!nodes.ok() || nodes->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        av(prog), ": error: invalid SLURM_JOB_NODELIST \"", *nodelist, "\""));
  }
  a.nodes = *std::move(nodes);
  if (std::optional<std::string> tpn = lookup(env, {"SLURM_TASKS_PER_NODE"})) {
    absl::StatusOr<std::vector<int>> counts = parseCountList(*tpn);
    if (counts.ok() && counts->size() == a.nodes.size()) a.tasks_per_node = *std::move(counts);
  }
  if (std::optional<std::string> cpn = lookup(env, {"SLURM_JOB_CPUS_PER_NODE"})) {
    absl::StatusOr<std::vector<int>> counts = parseCountList(*cpn);
    if (counts.ok() && counts->size() == a.nodes.size()) a.cpus_per_node = *std::move(counts);
  }
  if (a.cpus_per_node.empty()) {
    int cpt = 1;
    if (std::optional<std::string> c = lookup(env, {"SLURM_CPUS_PER_TASK"})) {
      std::optional<uint64_t> v = parseDigits(*c);
      if (v && *v > 0 && *v < 1'000'000) cpt = static_cast<int>(*v);
    }
    for (size_t i = 0; i < a.nodes.size(); ++i) {
      int tasks = a.tasks_per_node.empty() ? 1 : std::max(1, a.tasks_per_node[i]);
      a.cpus_per_node.push_back(tasks * cpt);
    }
  }
  if (std::optional<std::string> gpus =
          lookup(env, {"SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"})) {
    a.gpus = parseIdList(*gpus);
  }
  return a;
}

absl::StatusOr<StepPlan> planStep(const StepPlanInput& input, std::string_view prog) {
  const SrunOptions& o = input.options;
  const Allocation& alloc = input.allocation;
  StepPlan plan;
  plan.job_id = alloc.job_id;
  plan.step_id = input.step_id;

  std::map<std::string, int> index_of;
  for (size_t i = 0; i < alloc.nodes.size(); ++i) index_of.emplace(alloc.nodes[i], static_cast<int>(i));

  std::set<int> excluded;
  if (o.exclude) {
    absl::StatusOr<std::vector<std::string>> hosts = expandHostlist(*o.exclude);
    if (!hosts.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(av(prog), ": error: ", hosts.status().message()));
    }
    for (const std::string& h : *hosts) {
      if (auto it = index_of.find(h); it != index_of.end()) excluded.insert(it->second);
    }
  }
  std::set<int> required;
  if (o.nodelist) {
    absl::StatusOr<std::vector<std::string>> hosts = expandHostlist(*o.nodelist);
    if (!hosts.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(av(prog), ": error: ", hosts.status().message()));
    }
    for (const std::string& h : *hosts) {
      auto it = index_of.find(h);
      if (it == index_of.end() || excluded.count(it->second)) return unavailable(prog, alloc.job_id);
      required.insert(it->second);
    }
  }
  std::vector<int> candidates;
  for (int i = 0; i < static_cast<int>(alloc.nodes.size()); ++i) {
    if (!excluded.count(i)) candidates.push_back(i);
  }
  if (candidates.empty()) return unavailable(prog, alloc.job_id);

  absl::StatusOr<StepShape> shape =
      resolveStepShape(o, static_cast<int>(candidates.size()), prog);
  if (!shape.ok()) {
    if (shape.status().message().find("Unable to create step") != std::string_view::npos) {
      return unavailable(prog, alloc.job_id);
    }
    return shape.status();
  }
  plan.warnings = shape->warnings;
  if (static_cast<int>(required.size()) > shape->nodes) return unavailable(prog, alloc.job_id);

  std::set<int> chosen = required;
  for (int i : candidates) {
    if (static_cast<int>(chosen.size()) >= shape->nodes) break;
    chosen.insert(i);
  }
  std::vector<int> step_nodes(chosen.begin(), chosen.end());  // allocation order

  TaskLayoutRequest layout;
  layout.ntasks = shape->ntasks;
  for (int i : step_nodes) layout.cpus_per_node.push_back(alloc.cpus_per_node[static_cast<size_t>(i)]);
  layout.cpus_per_task = o.cpus_per_task.value_or(1);
  layout.ntasks_per_node = o.ntasks_per_node;
  std::vector<int> counts = blockTaskCounts(layout);
  // A node the layout gives no task is not part of the step.
  for (size_t k = 0; k < step_nodes.size(); ++k) {
    if (counts[k] <= 0) continue;
    plan.node_indices.push_back(step_nodes[k]);
    plan.nodes.push_back(alloc.nodes[static_cast<size_t>(step_nodes[k])]);
    plan.tasks_per_node.push_back(counts[k]);
  }
  plan.ntasks = shape->ntasks;

  JobEnvironmentInput job;
  job.job_id = alloc.job_id;
  job.node_names = alloc.nodes;
  job.cpus_per_node = alloc.cpus_per_node;
  if (!alloc.gpus.empty()) job.gpus_on_node.assign(alloc.nodes.size(), alloc.gpus);
  StepEnvironmentInput step;
  step.step_id = input.step_id;
  step.node_indices = plan.node_indices;
  step.tasks_per_node = plan.tasks_per_node;
  step.cpus_per_task = o.cpus_per_task;
  step.gpus_per_task = o.gpus_per_task;
  step.preserve_env = o.preserve_env;

  const Environment common = applyExport(o.export_env, input.environment);
  const std::vector<std::string> common_entries = environmentEntries(common);
  const std::string cwd = o.chdir.value_or(input.cwd);
  const std::vector<std::vector<int>> ranks = taskIdsByNode(plan.tasks_per_node);
  for (size_t k = 0; k < plan.node_indices.size(); ++k) {
    StepRequest r;
    r.job_id = alloc.job_id;
    r.step_id = input.step_id;
    r.node_id = static_cast<uint32_t>(k);
    r.node_name = plan.nodes[k];
    r.label = o.label;
    r.kill_on_bad_exit = o.kill_on_bad_exit.value_or(false);
    r.kill_wait_ms = input.kill_wait_ms;
    r.cwd = cwd;
    r.argv = o.command;
    r.env = common_entries;
    for (size_t local = 0; local < ranks[k].size(); ++local) {
      const int procid = ranks[k][local];
      StepTaskSpec t;
      t.procid = static_cast<uint32_t>(procid);
      t.localid = static_cast<uint32_t>(local);
      t.env = environmentEntries(stepTaskEnvironment(job, step, procid));
      r.tasks.push_back(std::move(t));
    }
    plan.requests.push_back(std::move(r));
  }
  return plan;
}

Environment taskEnvironment(const StepRequest& request, const StepTaskSpec& task) {
  Environment env = environmentMap(request.env);
  for (const auto& [k, v] : environmentMap(task.env)) env[k] = v;
  return env;
}

}  // namespace muster::jobengine::slurm
