#include "jobengine/slurm/steps/step_tasks.h"

#include <catch2/catch.hpp>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "jobengine/slurm/steps/step_protocol.h"
#include "tests/jobengine/slurm/steps/steps_test_util.h"

namespace muster::jobengine::slurm {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

// step-tasks in a child process, driven over pipes exactly as srun drives it.
class Driver {
 public:
  Driver() {
    int in[2], out[2], err[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    REQUIRE(pipe(err) == 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(in[1]);
      close(out[0]);
      close(err[0]);
      _exit(stepTasksMain(in[0], out[1], err[1]));
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
  }
  ~Driver() {
    closeInput();
    if (out_ >= 0) close(out_);
    if (err_ >= 0) close(err_);
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void send(const std::string& bytes) { REQUIRE(write(in_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())); }
  void closeInput() {
    if (in_ >= 0) close(in_);
    in_ = -1;
  }

  // Frames until `stop` says so (or Done, or the stream ends, or 20 s pass).
  std::vector<Frame> readUntil(const std::function<bool(const Frame&)>& stop) {
    std::vector<Frame> got;
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      for (;;) {
        absl::StatusOr<std::optional<Frame>> f = reader_.next();
        REQUIRE(f.ok());
        if (!f->has_value()) break;
        got.push_back(**f);
        if (stop(got.back()) || got.back().type == FrameType::kDone) return got;
      }
      struct pollfd p = {out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[65536];
      ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return got;
      reader_.append(std::string_view(buf, static_cast<size_t>(n)));
    }
    FAIL("step-tasks did not finish in time");
    return got;
  }
  std::vector<Frame> readAll() {
    return readUntil([](const Frame&) { return false; });
  }

  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  bool waited_ = false;
  FrameReader reader_;
};

StepRequest request(std::vector<std::string> argv, int ntasks = 1) {
  StepRequest r;
  r.job_id = 1;
  r.step_id = 0;
  r.node_name = "n1";
  r.cwd = "/";
  r.argv = std::move(argv);
  r.env = {"PATH=/usr/bin:/bin"};
  r.kill_wait_ms = 300;
  for (int i = 0; i < ntasks; ++i) {
    r.tasks.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i),
                       {"SLURM_PROCID=" + std::to_string(i)}});
  }
  return r;
}

struct Result {
  std::map<uint32_t, std::string> out, err;
  std::map<uint32_t, TaskExit> exits;
  std::vector<TaskMessage> messages;
  std::vector<FrameType> order;
  std::vector<size_t> chunk_sizes;
};

Result collect(const std::vector<Frame>& frames) {
  Result r;
  for (const Frame& f : frames) {
    r.order.push_back(f.type);
    switch (f.type) {
      case FrameType::kStdout:
      case FrameType::kStderr: {
        TaskOutput o = *decodeOutput(f.type, f.payload);
        (o.stderr_stream ? r.err : r.out)[o.procid] += o.data;
        r.chunk_sizes.push_back(o.data.size());
        break;
      }
      case FrameType::kExit: {
        TaskExit e = *decodeExit(f.payload);
        CHECK(r.exits.count(e.procid) == 0);
        r.exits[e.procid] = e;
        break;
      }
      case FrameType::kMessage:
        r.messages.push_back(*decodeMessage(f.payload));
        break;
      default:
        break;
    }
  }
  return r;
}

Result runStep(const StepRequest& r, int* rc = nullptr) {
  Driver d;
  d.send(encodeRequest(r));
  std::vector<Frame> frames = d.readAll();
  REQUIRE_FALSE(frames.empty());
  CHECK(frames.front().type == FrameType::kHello);
  CHECK(frames.back().type == FrameType::kDone);
  d.closeInput();
  int code = d.wait();
  if (rc) *rc = code;
  return collect(frames);
}

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

std::vector<pid_t> pidsIn(const std::string& path) {
  std::vector<pid_t> pids;
  std::istringstream in(testing::readWholeFile(path));
  long p;
  while (in >> p) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

// Waits (bounded) until no process of `pids` is left.
bool allGone(const std::vector<pid_t>& pids) {
  for (int i = 0; i < 200; ++i) {
    bool any = false;
    for (pid_t p : pids) any = any || alive(p);
    if (!any) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST_CASE("every task runs with exactly the environment srun sent", "[step_tasks]") {
  StepRequest r = request({"/usr/bin/env"}, 2);
  r.env = {"PATH=/nowhere", "A=1", "B=two words", "SLURM_PROCID=common"};
  int rc = -1;
  Result res = runStep(r, &rc);
  CHECK(rc == 0);
  for (uint32_t p : {0u, 1u}) {
    std::vector<std::string> lines = absl::StrSplit(res.out[p], '\n', absl::SkipEmpty());
    std::set<std::string> env(lines.begin(), lines.end());
    CHECK(env == std::set<std::string>{"PATH=/nowhere", "A=1", "B=two words",
                                       "SLURM_PROCID=" + std::to_string(p)});
    CHECK(res.exits[p] == TaskExit{p, 0, 0, false});
  }
}

TEST_CASE("the command is searched in the task's PATH, not step-tasks' own", "[step_tasks]") {
  TempDir dir;
  testing::writeFile(dir.file("mytool"), "#!/bin/sh\necho \"mytool $1 in $(pwd)\"\n", 0755);
  StepRequest r = request({"mytool", "arg with space"});
  r.env = {"PATH=/nonexistent:" + dir.path() + ":/usr/bin:/bin"};
  r.cwd = dir.path();
  Result res = runStep(r);
  CHECK(res.out[0] == "mytool arg with space in " + dir.path() + "\n");
}

TEST_CASE("arguments with quotes and semicolons reach the task untouched", "[step_tasks]") {
  std::vector<std::string> argv = {"/usr/bin/printf", "%s|", "\"3351.0;tcp://10.0.0.1:4711\"",
                                   "$(reboot)", "a b", "'x'", ""};
  Result res = runStep(request(argv));
  CHECK(res.out[0] == "\"3351.0;tcp://10.0.0.1:4711\"|$(reboot)|a b|'x'||");
}

TEST_CASE("output comes back line by line, tagged, with the last partial line", "[step_tasks]") {
  Result res = runStep(request(
      {"/bin/sh", "-c", "echo out-$SLURM_PROCID; echo err-$SLURM_PROCID >&2; printf tail-$SLURM_PROCID"},
      3));
  for (uint32_t p = 0; p < 3; ++p) {
    CHECK(res.out[p] == "out-" + std::to_string(p) + "\ntail-" + std::to_string(p));
    CHECK(res.err[p] == "err-" + std::to_string(p) + "\n");
  }
}

TEST_CASE("NUL bytes and very long lines in task output survive, in pieces", "[step_tasks]") {
  // 200000 'x' and a newline, then a NUL in the middle of a line.
  Result res = runStep(request(
      {"/bin/sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo; printf 'a\\0b\\n'"}));
  CHECK(res.out[0] == std::string(200000, 'x') + "\n" + std::string("a\0b\n", 4));
  for (size_t size : res.chunk_sizes) CHECK(size <= kMaxOutputChunk);
}

TEST_CASE("a task's exit comes after everything it printed", "[step_tasks]") {
  Result res = runStep(request({"/bin/sh", "-c", "seq 1 2000; exit 4"}));
  CHECK(res.exits[0].exit_code == 4);
  std::string expected;
  for (int i = 1; i <= 2000; ++i) expected += std::to_string(i) + "\n";
  CHECK(res.out[0] == expected);
  // Nothing of task 0 after its exit.
  size_t exit_at = 0;
  for (size_t i = 0; i < res.order.size(); ++i) {
    if (res.order[i] == FrameType::kExit) exit_at = i;
  }
  for (size_t i = exit_at + 1; i < res.order.size(); ++i) CHECK(res.order[i] == FrameType::kDone);
}

TEST_CASE("a command that cannot be executed is reported like slurmstepd does", "[step_tasks]") {
  Result res = runStep(request({"no-such-command-anywhere"}, 2));
  REQUIRE(res.messages.size() == 2);
  CHECK(res.messages[0].procid == 0);
  CHECK(res.messages[0].text == "execve(): no-such-command-anywhere: No such file or directory");
  CHECK(res.exits[0].exit_code == ENOENT);
  CHECK(res.exits[1].exit_code == ENOENT);
}

TEST_CASE("a working directory that does not exist sends the task to /tmp", "[step_tasks]") {
  StepRequest r = request({"/bin/pwd"});
  r.cwd = "/does/not/exist";
  Result res = runStep(r);
  REQUIRE(res.messages.size() == 1);
  CHECK(res.messages[0].text ==
        "couldn't chdir to `/does/not/exist': No such file or directory: going to /tmp instead");
  CHECK(res.out[0] == "/tmp\n");
}

TEST_CASE("a signal frame reaches every task's process group", "[step_tasks]") {
  Driver d;
  StepRequest r = request({"/bin/sh", "-c", "trap 'echo got-usr1; exit 7' USR1; echo ready; "
                                            "while :; do sleep 0.05; done"},
                          2);
  d.send(encodeRequest(r));
  int ready = 0;
  d.readUntil([&](const Frame& f) {
    if (f.type == FrameType::kStdout) ++ready;
    return ready == 2;
  });
  d.send(encodeSignal(SIGUSR1));
  Result res = collect(d.readAll());
  CHECK(res.out[0] == "got-usr1\n");
  CHECK(res.out[1] == "got-usr1\n");
  CHECK(res.exits[0].exit_code == 7);
  CHECK(res.exits[1].exit_code == 7);
}

TEST_CASE("when srun goes away every task is killed", "[step_tasks]") {
  TempDir dir;
  Driver d;
  StepRequest r = request({"/bin/sh", "-c", "echo $$ >> " + dir.file("pids") + "; echo up; exec sleep 100"}, 3);
  d.send(encodeRequest(r));
  int up = 0;
  d.readUntil([&](const Frame& f) {
    if (f.type == FrameType::kStdout) ++up;
    return up == 3;
  });
  std::vector<pid_t> pids = pidsIn(dir.file("pids"));
  REQUIRE(pids.size() == 3);
  d.closeInput();  // the connection died
  Result res = collect(d.readAll());
  CHECK(d.wait() == 0);
  for (uint32_t p = 0; p < 3; ++p) CHECK(res.exits[p].signal == SIGTERM);
  CHECK(allGone(pids));
}

TEST_CASE("a task that ignores SIGTERM is killed after the kill wait", "[step_tasks]") {
  Driver d;
  StepRequest r = request({"/bin/sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.05; done"});
  r.kill_wait_ms = 200;
  d.send(encodeRequest(r));
  d.readUntil([](const Frame& f) { return f.type == FrameType::kStdout; });
  auto start = std::chrono::steady_clock::now();
  d.send(encodeTerminate());
  Result res = collect(d.readAll());
  CHECK(res.exits[0].signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - start >= 200ms);
}

TEST_CASE("with kill-on-bad-exit a failing task ends the others", "[step_tasks]") {
  StepRequest r = request({"/bin/sh", "-c", "if [ $SLURM_PROCID = 0 ]; then sleep 0.2; exit 3; fi; exec sleep 100"}, 3);
  r.kill_on_bad_exit = true;
  auto start = std::chrono::steady_clock::now();
  Result res = runStep(r);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(res.exits[0].exit_code == 3);
  CHECK(res.exits[1].signal == SIGTERM);
  CHECK(res.exits[2].signal == SIGTERM);
}

TEST_CASE("without kill-on-bad-exit the other tasks run to their end", "[step_tasks]") {
  Result res = runStep(request(
      {"/bin/sh", "-c", "if [ $SLURM_PROCID = 0 ]; then exit 3; fi; sleep 0.3; echo finished"}, 2));
  CHECK(res.exits[0].exit_code == 3);
  CHECK(res.exits[1].exit_code == 0);
  CHECK(res.out[1] == "finished\n");
}

TEST_CASE("processes a task leaves behind do not outlive the step", "[step_tasks]") {
  TempDir dir;
  // A background child in the task's group, and one that escapes it with setsid.
  const std::string script = "sleep 100 & echo $! >> " + dir.file("pids") +
                             "; setsid sleep 100 & echo $! >> " + dir.file("pids") + "; exit 0";
  Result res = runStep(request({"/bin/sh", "-c", script}));
  CHECK(res.exits[0].exit_code == 0);
  std::vector<pid_t> pids = pidsIn(dir.file("pids"));
  REQUIRE(pids.size() == 2);
  CHECK(allGone(pids));
}

TEST_CASE("garbage instead of a request is refused with a message", "[step_tasks]") {
  Driver d;
  d.send("echo hello; rm -rf /\n");
  std::vector<Frame> frames = d.readAll();
  d.closeInput();
  CHECK(d.wait() == 2);
  Result res = collect(frames);
  REQUIRE(res.messages.size() == 1);
  CHECK(res.messages[0].procid == -1);
  CHECK(res.messages[0].text.find("unknown frame type") != std::string::npos);
}

TEST_CASE("a request whose environment holds a NUL starts nothing", "[step_tasks]") {
  StepRequest r = request({"/bin/true"});
  r.env.push_back(std::string("BAD=a\0b", 7));
  Result res = runStep(r);
  CHECK(res.exits.empty());
  REQUIRE(res.messages.size() == 1);
  CHECK(res.messages[0].text == "an environment entry is not NAME=VALUE without NUL bytes");
}

}  // namespace
}  // namespace muster::jobengine::slurm
