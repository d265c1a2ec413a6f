// A stand-in for the muster-slurm binary's main() in tests: dispatches on the argv[0] basename
// (srun, scontrol, via symlinks) or on the first argument (`... step-tasks`, `... batch-step`),
// as the real main does for these tools.
#include <string>
#include <vector>

#include "jobengine/slurm/dispatch.h"
#include "jobengine/slurm/process.h"

int main(int argc, char** argv) {
  namespace slurm = muster::jobengine::slurm;
  std::string tool = argc > 0 ? argv[0] : "";
  if (size_t slash = tool.rfind('/'); slash != std::string::npos) tool = tool.substr(slash + 1);
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (!slurm::isStepTool(tool) && !args.empty()) {
    tool = args.front();
    args.erase(args.begin());
  }
  return slurm::runTool(tool, args, slurm::currentEnvironment());
}
