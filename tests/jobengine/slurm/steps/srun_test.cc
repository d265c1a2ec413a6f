#include "jobengine/slurm/steps/srun.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "tests/jobengine/slurm/steps/steps_test_util.h"

namespace muster::jobengine::slurm {
namespace {

using testing::Captured;
using testing::runCaptured;
using testing::TempDir;

TEST_CASE("the label is as wide as the largest task id of the step", "[srun]") {
  // step_io.c _wid: digits of ntasks - 1.
  CHECK(labelWidth(1) == 1);
  CHECK(labelWidth(10) == 1);
  CHECK(labelWidth(11) == 2);
  CHECK(labelWidth(100) == 2);
  CHECK(labelWidth(101) == 3);
  CHECK(labelPrefix(3, 1) == "3: ");
  CHECK(labelPrefix(3, 2) == " 3: ");
  CHECK(labelPrefix(12, 3) == " 12: ");
}

TEST_CASE("srun -l labels every line and ends an unterminated one", "[srun]") {
  CHECK(formatTaskOutput("a\nb\n", true, 4, 2) == " 4: a\n 4: b\n");
  CHECK(formatTaskOutput("partial", true, 0, 1) == "0: partial\n");
  CHECK(formatTaskOutput("x\n\ny", true, 1, 1) == "1: x\n1: \n1: y\n");
  // Without -l the bytes are passed on untouched, partial lines included.
  CHECK(formatTaskOutput("partial", false, 0, 1) == "partial");
  CHECK(formatTaskOutput(std::string("a\0b\n", 4), false, 0, 1) == std::string("a\0b\n", 4));
}

TEST_CASE("srun exits with the highest task exit code", "[srun]") {
  CHECK(stepExitCode({}) == 0);
  CHECK(stepExitCode({{0, 0, 0, false}, {1, 3, 0, false}, {2, 1, 0, false}}) == 3);
}

TEST_CASE("a task killed by a signal makes srun exit with 128 + the highest signal", "[srun]") {
  // launch.c _task_finish: a signal outranks any exit code; fini_srun adds 128.
  CHECK(stepExitCode({{0, 200, 0, false}, {1, 0, 9, false}}) == 137);
  CHECK(stepExitCode({{0, 0, 15, false}, {1, 0, 9, false}, {2, 0, 2, false}}) == 143);
}

TEST_CASE("bad task ends are reported as srun reports them", "[srun]") {
  CHECK(taskEndMessage("n1", {3}, {3, 2, 0, false}) ==
        "srun: error: n1: task 3: Exited with exit code 2");
  CHECK(taskEndMessage("n2", {0}, {0, 0, 9, false}) == "srun: error: n2: task 0: Killed");
  CHECK(taskEndMessage("n2", {0}, {0, 0, 11, true}) ==
        "srun: error: n2: task 0: Segmentation fault (core dumped)");
  CHECK(taskEndMessage("n1", {0}, {0, 0, 0, false}).empty());
  // slurmstepd reports the tasks of a node that ended alike together.
  CHECK(taskEndMessage("n1", {4, 5, 6, 9}, {4, 1, 0, false}) ==
        "srun: error: n1: tasks 4-6,9: Exited with exit code 1");
}

TEST_CASE("task id lists print as Slurm's ranges", "[srun]") {
  CHECK(formatTaskIds({0, 1, 2, 3, 5}) == "0-3,5");
  CHECK(formatTaskIds({7}) == "7");
  CHECK(formatTaskIds({3, 1, 2, 2}) == "1-3");
  CHECK(formatTaskIds({}).empty());
}

TEST_CASE("MUSTER_SLURM_RSH is split into words", "[srun]") {
  CHECK(remoteShellWords({{"MUSTER_SLURM_RSH", "ssh -F /muster/ssh/config  -o BatchMode=yes"}}) ==
        std::vector<std::string>{"ssh", "-F", "/muster/ssh/config", "-o", "BatchMode=yes"});
  CHECK(remoteShellWords({{"MUSTER_SLURM_RSH", "  "}}).empty());
  CHECK(remoteShellWords({}).empty());
}

TEST_CASE("step ids count up from 0 per job", "[srun]") {
  TempDir dir;
  CHECK(*allocateStepId(dir.path(), 7) == 0);
  CHECK(*allocateStepId(dir.path(), 7) == 1);
  CHECK(*allocateStepId(dir.path(), 8) == 0);
  CHECK(*allocateStepId(dir.path(), 7) == 2);
  CHECK_FALSE(allocateStepId(dir.path() + "/missing", 7).ok());
}

TEST_CASE("concurrent sruns never get the same step id", "[srun]") {
  TempDir dir;
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string ids;
      for (int k = 0; k < 10; ++k) ids += std::to_string(*allocateStepId(dir.path(), 1)) + "\n";
      testing::writeFile(dir.file("ids." + std::to_string(i)), ids);
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  std::set<int> seen;
  for (int i = 0; i < 8; ++i) {
    std::istringstream in(testing::readWholeFile(dir.file("ids." + std::to_string(i))));
    int id;
    while (in >> id) CHECK(seen.insert(id).second);
  }
  CHECK(seen.size() == 80);
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == 79);
}

TEST_CASE("srun outside a batch job says how to run work", "[srun]") {
  Captured c = runCaptured([] { return srunMain({"hostname"}, {{"PATH", "/usr/bin"}}); });
  CHECK(c.exitCode() == 1);
  CHECK(c.err ==
        "srun: error: Muster runs srun only inside a batch job (SLURM_JOB_ID is not set); "
        "submit the work with sbatch\n");
}

std::map<std::string, std::string> jobEnv(const std::string& state_dir) {
  return {{"SLURM_JOB_ID", "9"},
          {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_TASKS_PER_NODE", "1(x2)"},
          {"SLURMD_NODENAME", "n1"},
          {"MUSTER_SLURM_STATE_DIR", state_dir},
          {"PATH", "/usr/bin:/bin"}};
}

TEST_CASE("srun refuses remote nodes when MUSTER_SLURM_RSH is not set", "[srun]") {
  TempDir dir;
  Captured c = runCaptured([&] { return srunMain({"true"}, jobEnv(dir.path())); });
  CHECK(c.exitCode() == 1);
  CHECK(c.err.find("srun: error: MUSTER_SLURM_RSH is not set, so srun cannot start tasks on "
                   "other nodes (n2)") != std::string::npos);
}

TEST_CASE("srun reports option and placement errors with Slurm's text", "[srun]") {
  TempDir dir;
  Captured c = runCaptured([&] { return srunMain({"-N1", "-w", "x7", "true"}, jobEnv(dir.path())); });
  CHECK(c.exitCode() == 1);
  CHECK(c.err ==
        "srun: error: Unable to create step for job 9: Requested node configuration is not "
        "available\n");
  c = runCaptured([&] { return srunMain({"--bogus", "true"}, jobEnv(dir.path())); });
  CHECK(c.exitCode() == 1);
  CHECK(c.err.find("srun: unrecognized option '--bogus'") != std::string::npos);
  c = runCaptured([&] { return srunMain({"-N1"}, jobEnv(dir.path())); });
  CHECK(c.exitCode() == 1);
  CHECK(c.err == "srun: fatal: No command given to execute.\n");
}

TEST_CASE("a node whose remote shell fails is an error that names the node", "[srun]") {
  TempDir dir;
  // A "remote shell" that fails like ssh does when the node's sshd is not there.
  testing::writeFile(dir.file("rsh"),
                     "#!/bin/sh\necho \"ssh: connect to host $1 port 2222: Connection refused\" >&2\n"
                     "exit 255\n",
                     0755);
  auto env = jobEnv(dir.path());
  env["MUSTER_SLURM_RSH"] = dir.file("rsh");
  Captured c = runCaptured([&] { return srunMain({"-N1", "-w", "n2", "true"}, env); });
  CHECK(c.exitCode() == 1);
  CHECK(c.err == "srun: error: n2: ssh: connect to host n2 port 2222: Connection refused\n");
}

}  // namespace
}  // namespace muster::jobengine::slurm
