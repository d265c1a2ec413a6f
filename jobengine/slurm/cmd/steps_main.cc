// muster-slurm-steps: the Slurm tools a job's pods run, without the API code of muster-slurm
// (main.cc): the batch step (batch-step), srun and its remote side (step-tasks), and scontrol's
// hostlist commands (../steps/). Called as `muster-slurm-steps <tool> ...` or through a symlink
// named after the tool.
//
// The commands that need the API server (sbatch, squeue, scancel, sinfo, sacct, scontrol's job and
// node commands) are passed on to the muster-slurm binary beside this one, when there is one: it
// is exec'd with the same arguments, as `muster-slurm <command> ARGS...`.
//
// `install-tools DIR` is what the tools init container of a Slurm job's pods runs
// (/usr/local/bin/muster-slurm-steps-static in Muster's image): it copies this binary into DIR as
// muster-slurm-steps with the links srun and scontrol, and the API commands' binary beside it
// (muster-slurm-static, else muster-slurm) as muster-slurm with the links sbatch, squeue, scancel,
// sinfo and sacct.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "jobengine/slurm/steps/dispatch.h"
#include "jobengine/slurm/steps/install_tools.h"
#include "jobengine/slurm/steps/scontrol.h"

namespace muster::jobengine::slurm {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: muster-slurm-steps TOOL [ARGS...]\n"
    "       TOOL [ARGS...]   (through a symlink named after the tool)\n"
    "\n"
    "The Slurm tools inside a Muster job's pods (TOOL --help prints its options):\n"
    "  srun      run a job step inside a batch job\n"
    "  scontrol  show hostnames/hostlist/hostlistsorted (its job and node commands are\n"
    "            muster-slurm's)\n"
    "  install-tools DIR   copy this binary into DIR with the links srun and scontrol, and\n"
    "                      muster-slurm beside it with sbatch, squeue, scancel, sinfo, sacct\n"
    "  (batch-step and step-tasks are run by Muster inside a job's pods)\n"
    "\n"
    "sbatch, squeue, scancel, sinfo and sacct are passed on to the muster-slurm beside\n"
    "this binary.\n";

// The step tools' links, and the API commands' (to the muster-slurm copy).
constexpr const char* kStepLinks[] = {"srun", "scontrol"};
constexpr const char* kApiLinks[] = {"sbatch", "squeue", "scancel", "sinfo", "sacct"};

int installSteps(const std::vector<std::string>& args) {
  constexpr char kInstallUsage[] =
      "usage: muster-slurm-steps install-tools DIR\n"
      "copies muster-slurm-steps into DIR with the symlinks srun and scontrol, and the\n"
      "muster-slurm-static (else muster-slurm) beside it as muster-slurm with the symlinks\n"
      "sbatch, squeue, scancel, sinfo and sacct (what the tools init container of a Slurm\n"
      "job's pods runs)\n";
  fs::path dir;
  if (auto done = installToolsDir(args, kInstallUsage, std::cout, std::cerr, &dir)) return *done;
  const fs::path self = selfBinary();
  if (self.empty()) {
    std::cerr << "muster-slurm-steps: cannot find its own binary (/proc/self/exe)\n";
    return 1;
  }
  std::vector<ToolCopy> copies = {
      {self, "muster-slurm-steps", {std::begin(kStepLinks), std::end(kStepLinks)}}};
  std::error_code ec;
  for (const char* api : {"muster-slurm-static", "muster-slurm"}) {
    const fs::path candidate = self.parent_path() / api;
    if (fs::is_regular_file(candidate, ec)) {
      copies.push_back({candidate, "muster-slurm", {std::begin(kApiLinks), std::end(kApiLinks)}});
      break;
    }
  }
  if (copies.size() == 1)
    std::cerr << "muster-slurm-steps: no muster-slurm beside " << self.string()
              << ": the job's pods get srun and scontrol only\n";
  return installTools(dir, copies, "muster-slurm-steps", std::cout, std::cerr);
}

// `muster-slurm COMMAND ARGS...` from beside this binary, in place of this process.
int passOn(const std::string& command, const std::vector<std::string>& args) {
  const fs::path self = selfBinary();
  const fs::path api = self.empty() ? fs::path() : self.parent_path() / "muster-slurm";
  std::error_code ec;
  if (api.empty() || !fs::is_regular_file(api, ec)) {
    std::cerr << command << ": error: needs muster-slurm (Muster's API commands), which is not "
              << "installed beside " << (self.empty() ? "muster-slurm-steps" : self.string())
              << "\n";
    return 1;
  }
  std::vector<std::string> words = {"muster-slurm", command};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  execv(api.c_str(), argv.data());
  std::cerr << command << ": error: cannot run " << api.string() << ": " << std::strerror(errno)
            << "\n";
  return 1;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command = fs::path(argc > 0 ? argv[0] : "").filename().string();
  if (command.starts_with("muster-slurm")) {  // muster-slurm-steps[-static] TOOL ARGS...
    if (args.empty() || args[0] == "-h" || args[0] == "--help") {
      (args.empty() ? std::cerr : std::cout) << kUsage;
      return args.empty() ? 2 : 0;
    }
    command = args[0];
    args.erase(args.begin());
  }
  if (command == "install-tools") return installSteps(args);
  if (command == "scontrol" && isScontrolJobCommand(scontrolCommandWords(args)))
    return passOn(command, args);
  if (isStepTool(command)) return runTool(command, args, processEnvironment());
  for (const char* api : kApiLinks)
    if (command == api) return passOn(command, args);
  std::cerr << "muster-slurm-steps: unknown tool \"" << command
            << "\" (srun, scontrol, install-tools; sbatch, squeue, scancel, sinfo, sacct through "
               "muster-slurm)\n";
  return 2;
}

}  // namespace
}  // namespace muster::jobengine::slurm

int main(int argc, char** argv) { return muster::jobengine::slurm::run(argc, argv); }
