#include "jobengine/runtime.h"

#include "jobengine/mpi_openmpi.h"
#include "jobengine/naming.h"
#include "jobengine/slurm/runtime/runtime.h"

namespace muster::jobengine {

void RuntimeRegistry::add(RuntimePtr runtime) {
  std::string name(runtime->name());
  runtimes_[name] = std::move(runtime);
}

const Runtime* RuntimeRegistry::find(std::string_view name) const {
  auto it = runtimes_.find(name);
  return it == runtimes_.end() ? nullptr : it->second.get();
}

std::vector<std::string> RuntimeRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, runtime] : runtimes_) out.push_back(name);
  return out;
}

absl::Status checkNumPods(const proto::ParallelJob& job) {
  if (job.spec.num_pods < 1) return absl::InvalidArgumentError("spec.numPods must be at least 1");
  if (job.spec.num_pods > kMaxNumPods)
    return absl::InvalidArgumentError(
        "spec.numPods is " + std::to_string(job.spec.num_pods) + ", more than the " +
        std::to_string(kMaxNumPods) +
        " pods a ParallelJob may have (its hostfile must fit into one ConfigMap)");
  return absl::OkStatus();
}

bool preemptedPodsGoing(const proto::ParallelJobStatus& status) {
  bool preempted = false, going = false;
  for (const proto::Condition& c : status.conditions) {
    if (c.type == kConditionPreempted) preempted = c.status == "True";
    if (c.type == vocab::kConditionPodsCreated)
      going = c.status == "False" && c.reason == kReasonPreempted;
  }
  return preempted && going;
}

RuntimeRegistry defaultRuntimes(const RuntimeOptions& options) {
  RuntimeRegistry registry;
  registry.add(std::make_unique<OpenMpiRuntime>(options));
  registry.add(std::make_unique<slurm::SlurmRuntime>(options));
  return registry;
}

std::map<std::string, std::string> attemptLabels(const proto::ParallelJob& job,
                                                 const AttemptInfo& attempt) {
  std::map<std::string, std::string> labels = {
      {vocab::kJobUidLabel, job.meta.uid},
      {vocab::kAttemptLabel, std::to_string(attempt.attempt)},
      {vocab::kJobSetNameLabel, attempt.group},
  };
  if (isLabelValue(job.meta.name)) labels[vocab::kJobNameLabel] = job.meta.name;
  return labels;
}

}  // namespace muster::jobengine
