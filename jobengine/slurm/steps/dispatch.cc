#include "jobengine/slurm/steps/dispatch.h"

#include <iostream>

#include "jobengine/slurm/steps/batch_step.h"
#include "jobengine/slurm/steps/scontrol.h"
#include "jobengine/slurm/steps/srun.h"
#include "jobengine/slurm/steps/step_tasks.h"

namespace muster::jobengine::slurm {

bool isStepTool(std::string_view tool) {
  return tool == "srun" || tool == "step-tasks" || tool == "batch-step" || tool == "scontrol";
}

int runTool(std::string_view tool, const std::vector<std::string>& args,
            const std::map<std::string, std::string>& env) {
  if (tool == "srun") return srunMain(args, env);
  if (tool == "scontrol") {
    int rc = scontrolMain(args, env, std::cin, std::cout, std::cerr);
    std::cout.flush();
    return rc;
  }
  if (tool == "step-tasks" || tool == "batch-step") {
    if (!args.empty()) {
      std::cerr << "muster-slurm " << tool << ": takes no arguments\n";
      return 2;
    }
    return tool == "step-tasks" ? stepTasksMain(0, 1, 2) : batchStepMain(env);
  }
  std::cerr << "muster-slurm: unknown tool \"" << tool << "\"\n";
  return 127;
}

}  // namespace muster::jobengine::slurm
