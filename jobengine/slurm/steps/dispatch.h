#pragma once

// The in-allocation tools of the muster-slurm multi-call binary, by name: main() maps its
// argv[0] basename (srun, scontrol) or its first argument (`muster-slurm step-tasks`,
// `muster-slurm batch-step`) to runTool. srun starts `$MUSTER_SLURM_BIN step-tasks`, so the
// binary must accept the tool name as its first argument.
//
//   srun        srunMain (srun.h)
//   step-tasks  stepTasksMain on stdin/stdout (step_tasks.h); takes no arguments
//   batch-step  batchStepMain (batch_step.h); takes no arguments
//   scontrol    scontrolMain (scontrol.h) on std::cin/cout/cerr
//
// Returns the tool's exit code; an unknown tool prints an error and returns 127 (the caller may
// check isStepTool first to route other names elsewhere).

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace muster::jobengine::slurm {

bool isStepTool(std::string_view tool);

// args: without argv[0] (and without the tool name when it came as the first argument).
int runTool(std::string_view tool, const std::vector<std::string>& args,
            const std::map<std::string, std::string>& env);

}  // namespace muster::jobengine::slurm
