// muster-slurm: Muster's Slurm commands in one binary, called as `muster-slurm <command> ...` or
// through a symlink named after the command (sbatch, squeue, scancel, sinfo, sacct, srun,
// scontrol); `muster-slurm --help` lists them (cli.cc).
// In a job's pods it also runs the batch step (batch-step) and srun's remote side (step-tasks);
// `install-tools DIR` copies it into DIR with those symlinks (the job pods' first init container).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "jobengine/slurm/cli/cli.h"
#include "jobengine/slurm/cli/jobs_cli.h"
#include "jobengine/slurm/cli/sbatch_cli.h"
#include "jobengine/slurm/steps/dispatch.h"

extern char** environ;

namespace muster::jobengine::slurm {
namespace {

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// The commands a job's pods need, as symlinks next to the copied binary.
constexpr const char* kTools[] = {"sbatch", "squeue", "scancel", "sinfo", "sacct", "srun", "scontrol"};

int installTools(const std::vector<std::string>& args) {
  constexpr char kUsage[] =
      "usage: muster-slurm install-tools DIR\n"
      "copies muster-slurm into DIR with the symlinks sbatch, squeue, scancel, sinfo, sacct, srun\n"
      "and scontrol (what the tools init container of a Slurm job's pods runs)\n";
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.size() != 1 || args[0].starts_with("-")) {
    std::cerr << kUsage;
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = args[0];
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "muster-slurm: cannot create " << dir << ": " << ec.message() << "\n";
    return 1;
  }
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::cerr << "muster-slurm: cannot find its own binary: " << ec.message() << "\n";
    return 1;
  }
  const fs::path target = dir / "muster-slurm";
  fs::copy_file(self, target, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    std::cerr << "muster-slurm: cannot copy itself to " << target << ": " << ec.message() << "\n";
    return 1;
  }
  fs::permissions(target, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  for (const char* tool : kTools) {
    const fs::path link = dir / tool;
    fs::remove(link, ec);
    fs::create_symlink("muster-slurm", link, ec);
    if (ec) {
      std::cerr << "muster-slurm: cannot link " << link << ": " << ec.message() << "\n";
      return 1;
    }
  }
  std::cout << "muster-slurm: installed into " << dir.string() << "\n";
  return 0;
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
  const auto env = environment();
  if (inv->command == "sbatch") return sbatchMain(inv->args, inv->global, env, std::cin, std::cout, std::cerr);
  if (inv->command == "squeue") return squeueMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "sinfo") return sinfoMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "sacct") return sacctMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "scancel") return scancelMain(inv->args, inv->global, env, std::cout, std::cerr);
  if (inv->command == "scontrol") {
    // Its options come before the command and change nothing the job, node and config commands
    // print (scontrol.h); -h and -V are scontrolMain's.
    auto word = inv->args.begin();
    for (; word != inv->args.end() && word->size() >= 2 && (*word)[0] == '-'; ++word)
      if (*word == "--" || *word == "-h" || *word == "--help" || *word == "--usage" ||
          *word == "-V" || *word == "--version")
        break;
    const std::vector<std::string> command(word, inv->args.end());
    if (isScontrolJobCommand(command))
      return scontrolJobMain(command, inv->global, env, std::cout, std::cerr);
  }
  if (inv->command == "install-tools") return installTools(inv->args);
  if (isStepTool(inv->command)) return runTool(inv->command, inv->args, env);
  std::cerr << "muster-slurm: unknown command \"" << inv->command
            << "\" (sbatch, squeue, scancel, sinfo, sacct, srun, scontrol)\n";
  return 2;
}

}  // namespace
}  // namespace muster::jobengine::slurm

int main(int argc, char** argv) { return muster::jobengine::slurm::run(argc, argv); }
