#include "jobengine/slurm/steps/batch_step.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/jobengine/slurm/steps/steps_test_util.h"

namespace muster::jobengine::slurm {
namespace {

using testing::Captured;
using testing::readWholeFile;
using testing::runCaptured;
using testing::TempDir;
using testing::writeFile;

int statusOf(const std::function<void()>& child) {
  pid_t pid = fork();
  if (pid == 0) {
    child();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST_CASE("NUL-separated files split like /proc/<pid>/environ", "[batch_step]") {
  using V = std::vector<std::string>;
  CHECK(splitNulEntries(std::string("A=1\0B=2\0", 8)) == V{"A=1", "B=2"});
  CHECK(splitNulEntries(std::string("A=1\0B=x\ny", 9)) == V{"A=1", "B=x\ny"});
  CHECK(splitNulEntries("").empty());
  CHECK(splitNulEntries(std::string("\0", 1)) == V{""});
}

TEST_CASE("the job's SLURM variables win over the submission environment", "[batch_step]") {
  const Environment submission = {{"SLURM_JOB_ID", "1"},       // stale, from the login node
                                  {"SLURM_CONF", "/etc/slurm"},  // the user's own, kept
                                  {"HOME", "/home/u"},
                                  {"CUDA_VISIBLE_DEVICES", "5"},
                                  {"PATH", "/home/u/bin:/usr/bin"}};
  const Environment own = {{"SLURM_JOB_ID", "42"},
                           {"SLURMD_NODENAME", "n1"},
                           {"ENVIRONMENT", "BATCH"},
                           {"HOSTNAME", "n1"},
                           {"CUDA_VISIBLE_DEVICES", "0,1"},
                           {"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                           {"MUSTER_SLURM_RSH", "ssh -F /muster/ssh/config"},
                           {"MUSTER_SLURM_BIN", "/muster/bin/muster-slurm"},
                           {"MUSTER_SLURM_STATE_DIR", "/muster/slurm"},
                           {"MUSTER_SLURM_BATCH_DIR", "/etc/muster/batch"},
                           {"PATH", "/opt/conda/bin:/usr/bin:/bin"}};
  Environment e = scriptEnvironment(submission, own, "/muster/bin");
  CHECK(e.at("SLURM_JOB_ID") == "42");
  CHECK(e.at("SLURM_CONF") == "/etc/slurm");
  CHECK(e.at("SLURMD_NODENAME") == "n1");
  CHECK(e.at("ENVIRONMENT") == "BATCH");
  CHECK(e.at("HOSTNAME") == "n1");
  CHECK(e.at("CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK(e.at("HOME") == "/home/u");
  CHECK(e.at("MUSTER_SLURM_RSH") == "ssh -F /muster/ssh/config");
  CHECK(e.at("MUSTER_SLURM_BIN") == "/muster/bin/muster-slurm");
  CHECK(e.at("MUSTER_SLURM_STATE_DIR") == "/muster/slurm");
  // The container's own settings are not the user's environment.
  CHECK(e.count("KUBERNETES_SERVICE_HOST") == 0);
  CHECK(e.count("MUSTER_SLURM_BATCH_DIR") == 0);
  // The tools first, the submission PATH, then what only the image has.
  CHECK(e.at("PATH") == "/muster/bin:/home/u/bin:/usr/bin:/opt/conda/bin:/bin");
}

TEST_CASE("with --export=NONE the container's environment stands in for a login shell",
          "[batch_step]") {
  const Environment submission = {{"SLURM_GET_USER_ENV", "1"}, {"SLURM_EXPORT_ENV", "NONE"}};
  const Environment own = {{"SLURM_JOB_ID", "42"},
                           {"HOME", "/root"},
                           {"LANG", "C.UTF-8"},
                           {"MUSTER_SLURM_BATCH_DIR", "/etc/muster/batch"},
                           {"PATH", "/usr/bin:/bin"}};
  Environment e = scriptEnvironment(submission, own, "/muster/slurm/bin");
  CHECK(e.at("HOME") == "/root");
  CHECK(e.at("LANG") == "C.UTF-8");
  CHECK(e.at("SLURM_EXPORT_ENV") == "NONE");
  CHECK(e.count("MUSTER_SLURM_BATCH_DIR") == 0);
  CHECK(e.at("PATH") == "/muster/slurm/bin:/usr/bin:/bin");
}

TEST_CASE("the output file defaults to slurm-<job id>.out in the work dir", "[batch_step]") {
  BatchPaths p = batchPaths({{"SLURM_JOB_ID", "1234"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}, "/w");
  CHECK(p.stdout_path == "/w/slurm-1234.out");
  CHECK(p.stderr_path == "/w/slurm-1234.out");
  CHECK(p.stdin_path == "/dev/null");
}

TEST_CASE("output patterns expand job id, name, user, first node and array ids", "[batch_step]") {
  const Environment own = {{"SLURM_JOB_ID", "77"},
                           {"SLURM_JOB_NODELIST", "gpu[3-4]"},
                           {"SLURMD_NODENAME", "gpu3"},
                           {"MUSTER_SLURM_JOB_NAME", "train"},
                           {"MUSTER_SLURM_USER", "alice"},
                           {"MUSTER_SLURM_STDOUT", "logs/%x-%u-%N-%j.out"},
                           {"MUSTER_SLURM_STDERR", "/abs/%j.%%.err"},
                           {"MUSTER_SLURM_STDIN", "in-%4j"}};
  BatchPaths p = batchPaths(own, "/home/alice");
  CHECK(p.stdout_path == "/home/alice/logs/train-alice-gpu3-77.out");
  CHECK(p.stderr_path == "/abs/77.%.err");
  CHECK(p.stdin_path == "/home/alice/in-0077");

  const Environment array = {{"SLURM_JOB_ID", "80"},
                             {"SLURM_ARRAY_JOB_ID", "78"},
                             {"SLURM_ARRAY_TASK_ID", "2"},
                             {"SLURM_JOB_NODELIST", "n1"}};
  CHECK(batchPaths(array, "/w").stdout_path == "/w/slurm-78_2.out");
}

TEST_CASE("the termination log has Slurm's ExitCode form", "[batch_step]") {
  int exited3 = statusOf([] { _exit(3); });
  int killed9 = statusOf([] { raise(SIGKILL); });
  int clean = statusOf([] {});
  CHECK(exitCodeText(clean) == "0:0");
  CHECK(exitCodeText(exited3) == "3:0");
  CHECK(exitCodeText(killed9) == "0:9");
  CHECK(exitCodeOf(exited3) == 3);
  CHECK(exitCodeOf(killed9) == 137);
}

// A one-node job for batchStepMain (no other node: no SSH wait).
struct Job {
  TempDir dir;
  Environment env;

  explicit Job(const std::string& script) {
    mkdir(dir.file("batch").c_str(), 0755);
    mkdir(dir.file("work").c_str(), 0755);
    mkdir(dir.file("state").c_str(), 0755);
    writeFile(dir.file("batch/script"), script);
    writeFile(dir.file("batch/environment"),
              std::string("HOME=/home/u\0PATH=/usr/bin:/bin\0SUBMIT_ONLY=yes\0", 48));
    writeFile(dir.file("batch/args"), std::string("first arg\0second\0", 17));
    env = {{"SLURM_JOB_ID", "55"},
           {"SLURM_JOB_NODELIST", "n1"},
           {"SLURMD_NODENAME", "n1"},
           {"SLURM_JOB_NAME", "demo"},
           {"MUSTER_SLURM_BATCH_DIR", dir.file("batch")},
           {"MUSTER_SLURM_WORKDIR", dir.file("work")},
           {"MUSTER_SLURM_STATE_DIR", dir.file("state")},
           {"MUSTER_SLURM_BIN", "/nonexistent/muster-slurm"},
           {"MUSTER_TERMINATION_LOG", dir.file("termination-log")},
           {"PATH", "/usr/bin:/bin"}};
  }
  Captured run() {
    return runCaptured([this] { return batchStepMain(env); });
  }
};

TEST_CASE("batch-step runs the script in the work dir with its args and env", "[batch_step]") {
  Job job(
      "#!/bin/sh\n"
      "echo \"args: $1 | $2\"\n"
      "echo \"pwd: $(pwd)\"\n"
      "echo \"job: $SLURM_JOB_ID $SUBMIT_ONLY\"\n"
      "echo \"path: $PATH\"\n"
      "echo to-stderr >&2\n"
      "exit 4\n");
  Captured c = job.run();
  CHECK(c.exitCode() == 4);
  const std::string out = readWholeFile(job.dir.file("work/slurm-55.out"));
  CHECK(out.find("args: first arg | second\n") != std::string::npos);
  CHECK(out.find("pwd: " + job.dir.file("work") + "\n") != std::string::npos);
  CHECK(out.find("job: 55 yes\n") != std::string::npos);
  // srun and scontrol links in the state dir come first (the bin dir has none).
  CHECK(out.find("path: " + job.dir.file("state/bin") + ":/usr/bin:/bin\n") != std::string::npos);
  CHECK(out.find("to-stderr\n") != std::string::npos);
  CHECK(readWholeFile(job.dir.file("termination-log")) == "4:0");
  char target[4096] = {};
  CHECK(readlink(job.dir.file("state/bin/srun").c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target) == "/nonexistent/muster-slurm");
  // The script ran from a private copy.
  struct stat st;
  REQUIRE(stat(job.dir.file("state/slurm_script").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("separate -o and -e files get their own streams", "[batch_step]") {
  Job job("#!/bin/sh\necho out\necho err >&2\n");
  job.env["MUSTER_SLURM_STDOUT"] = "%x-%j.out";
  job.env["MUSTER_SLURM_STDERR"] = "%x-%j.err";
  CHECK(job.run().exitCode() == 0);
  CHECK(readWholeFile(job.dir.file("work/demo-55.out")) == "out\n");
  CHECK(readWholeFile(job.dir.file("work/demo-55.err")) == "err\n");
  CHECK(readWholeFile(job.dir.file("termination-log")) == "0:0");
}

TEST_CASE("an output directory that does not exist sends the output to the container's stdout",
          "[batch_step]") {
  Job job("#!/bin/sh\necho visible-in-kubectl-logs\n");
  job.env["MUSTER_SLURM_STDOUT"] = "missing-dir/%j.out";
  Captured c = job.run();
  CHECK(c.exitCode() == 0);
  CHECK(c.out == "visible-in-kubectl-logs\n");
  CHECK(c.err.find("muster: batch-step: cannot open the job's stdout file " +
                   job.dir.file("work/missing-dir/55.out") +
                   ": No such file or directory; it goes to this container's stdout instead") !=
        std::string::npos);
}

TEST_CASE("a work dir that does not exist runs the script in /tmp, as Slurm does",
          "[batch_step]") {
  Job job("#!/bin/sh\npwd\n");
  job.env["MUSTER_SLURM_WORKDIR"] = job.dir.file("gone");
  job.env["MUSTER_SLURM_STDOUT"] = job.dir.file("out.txt");
  CHECK(job.run().exitCode() == 0);
  CHECK(readWholeFile(job.dir.file("out.txt")) ==
        "slurmstepd: error: couldn't chdir to `" + job.dir.file("gone") +
            "': No such file or directory: going to /tmp instead\n/tmp\n");
}

TEST_CASE("a script killed by a signal gives 128 + signal and code 0:signal", "[batch_step]") {
  Job job("#!/bin/sh\nkill -9 $$\n");
  Captured c = job.run();
  CHECK(c.exitCode() == 137);
  CHECK(readWholeFile(job.dir.file("termination-log")) == "0:9");
}

TEST_CASE("SIGTERM to batch-step reaches the script's process group", "[batch_step]") {
  Job job(
      "#!/bin/sh\n"
      "trap 'echo got-term; exit 9' TERM\n"
      "sleep 100 &\n"
      "echo $! > " + std::string("SLEEPER") + "\n"
      "touch started\n"
      "wait\n");
  // The sleeper's pid lands in the work dir.
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    _exit(batchStepMain(job.env));
  }
  for (int i = 0; i < 500 && access(job.dir.file("work/started").c_str(), F_OK) != 0; ++i) {
    usleep(10000);
  }
  REQUIRE(access(job.dir.file("work/started").c_str(), F_OK) == 0);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WEXITSTATUS(status) == 9);
  // The script's trap ran last. Before it, sh may or may not report its background job killed by
  // the same signal ("Terminated"): that depends on which it notices first.
  const std::string out = readWholeFile(job.dir.file("work/slurm-55.out"));
  CHECK((out == "got-term\n" || out == "Terminated\ngot-term\n"));
  CHECK(readWholeFile(job.dir.file("termination-log")) == "9:0");
  pid_t sleeper = static_cast<pid_t>(std::stol(readWholeFile(job.dir.file("work/SLEEPER"))));
  CHECK(kill(sleeper, 0) != 0);
}

TEST_CASE("a job without its batch dir fails with a termination log", "[batch_step]") {
  Job job("#!/bin/sh\n");
  job.env.erase("MUSTER_SLURM_BATCH_DIR");
  Captured c = job.run();
  CHECK(c.exitCode() == 1);
  CHECK(c.err == "muster: batch-step: MUSTER_SLURM_BATCH_DIR is not set\n");
  CHECK(readWholeFile(job.dir.file("termination-log")) == "1:0");
}

}  // namespace
}  // namespace muster::jobengine::slurm
