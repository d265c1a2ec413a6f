// muster-slurm: Muster's Slurm commands in one binary, called as `muster-slurm <command> ...` or
// through a symlink named after the command (sbatch, squeue, scancel, sinfo, sacct, srun,
// scontrol); `muster-slurm --help` lists them (cli.cc).
// It also runs the step tools (batch-step, step-tasks, srun, scontrol's hostlist commands), as
// steps_main.cc's muster-slurm-steps does without the API code: a job's pods run that one when
// Muster's image provides their tools. `install-tools DIR` copies it into DIR with the symlinks
// (the login node's init container).
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "jobengine/slurm/cli/cli.h"
#include "jobengine/slurm/cli/jobs_cli.h"
#include "jobengine/slurm/cli/sbatch_cli.h"
#include "jobengine/slurm/steps/dispatch.h"
#include "jobengine/slurm/steps/install_tools.h"
#include "jobengine/slurm/steps/scontrol.h"

namespace muster::jobengine::slurm {
namespace {

// The commands a login node needs, as symlinks next to the copied binary (srun and scontrol's
// hostlist commands also run here, for a batch script on a partition image that has this binary).
constexpr const char* kTools[] = {"sbatch", "squeue", "scancel", "sinfo", "sacct", "srun", "scontrol"};

int installAll(const std::vector<std::string>& args) {
  constexpr char kUsage[] =
      "usage: muster-slurm install-tools DIR\n"
      "copies muster-slurm into DIR with the symlinks sbatch, squeue, scancel, sinfo, sacct, srun\n"
      "and scontrol (what the login node's init container runs; a job's pods get\n"
      "muster-slurm-steps-static's)\n";
  std::filesystem::path dir;
  if (auto done = installToolsDir(args, kUsage, std::cout, std::cerr, &dir)) return *done;
  const std::filesystem::path self = selfBinary();
  if (self.empty()) {
    std::cerr << "muster-slurm: cannot find its own binary (/proc/self/exe)\n";
    return 1;
  }
  return installTools(dir, {{self, "muster-slurm", {std::begin(kTools), std::end(kTools)}}},
                      "muster-slurm", std::cout, std::cerr);
}

int run(int argc, char** argv) {
  auto inv = parseInvocation(argc, argv);
  if (!inv.ok()) {
    std::cerr << inv.status().message() << "\n";
    return 2;
  }
  if (inv->help) {
    std::cout << musterSlurmUsage();
    return 0;
  }
  const auto env = processEnvironment();
  if (inv->command == "sbatch") return sbatchMain(inv->args, inv->global, env, std::cin, std::cout, std::cerr);
  if (inv->command == "squeue") return squeueMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "sinfo") return sinfoMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "sacct") return sacctMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "scancel") return scancelMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "scontrol") {
    // Its options come before the command and change nothing the job, node and config commands
    // print (scontrol.h); -h and -V are scontrolMain's.
    const std::vector<std::string> command = scontrolCommandWords(inv->args);
    if (isScontrolJobCommand(command))
      return scontrolJobMain(command, inv->global, env, std::cout, std::cerr);
  }
  if (inv->command == "install-tools") return installAll(inv->args);
  if (isStepTool(inv->command)) return runTool(inv->command, inv->args, env);
  std::cerr << "muster-slurm: unknown command \"" << inv->command
            << "\" (sbatch, squeue, scancel, sinfo, sacct, srun, scontrol)\n";
  return 2;
}

}  // namespace
}  // namespace muster::jobengine::slurm

int main(int argc, char** argv) { return muster::jobengine::slurm::run(argc, argv); }
