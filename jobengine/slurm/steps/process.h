#pragma once

// POSIX process plumbing shared by srun, step-tasks and batch-step (internal to
// muster_slurm_steps): owned descriptors, pipes, a self-pipe for signals, fork+exec with an
// explicit environment and PATH search in that environment, and killing what is left of a step.
// No shell is involved anywhere: argv goes to execve as it is.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muster::jobengine::slurm {

// An owned file descriptor (-1: none).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read, write;
};
// A pipe with both ends close-on-exec.
absl::StatusOr<Pipe> makePipe();

void setNonBlocking(int fd);
// Writes everything, waiting (poll) while the descriptor is full. EPIPE and other errors are
// returned.
absl::Status writeAll(int fd, std::string_view data);
// Reads a whole file (at most `limit` bytes; more is an error).
absl::StatusOr<std::string> readFile(const std::string& path, size_t limit = 64u << 20);

// "NAME=VALUE" entries as an execve environment, and back.
std::vector<std::string> environmentEntries(const std::map<std::string, std::string>& env);
std::map<std::string, std::string> environmentMap(const std::vector<std::string>& entries);
// The process's own environment (environ).
std::map<std::string, std::string> currentEnvironment();

// The files execvp would try for `file` with this PATH (glibc's default "/bin:/usr/bin" when
// unset; an empty entry is the current directory); `file` itself when it contains a '/'.
std::vector<std::string> executableCandidates(const std::string& file,
                                              const std::optional<std::string>& path);

struct SpawnOptions {
  std::vector<std::string> argv;               // argv[0] is searched in env's PATH
  std::vector<std::string> env;                // exactly the child's environment
  std::optional<std::string> cwd;              // chdir before exec
  // When cwd fails: go to this directory instead (Slurm's "going to /tmp instead"); nullopt
  // makes a failed chdir a spawn failure.
  std::optional<std::string> cwd_fallback;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // -1: /dev/null (stdin) or inherit
  bool new_process_group = true;               // setpgid(0, 0): its own process group
  std::optional<int> parent_death_signal;      // PR_SET_PDEATHSIG
  // Also try argv[0] in the working directory when PATH has no such file (srun.1 "EXECUTABLE
  // PATH RESOLUTION", step 4).
  bool try_cwd_last = false;
};

struct SpawnResult {
  pid_t pid = -1;           // the child, running; -1 when exec failed (it was reaped)
  int exec_errno = 0;       // why execve failed (ENOENT, EACCES, ...)
  bool chdir_failed = false;  // cwd failed and the child runs in cwd_fallback
  int chdir_errno = 0;
};

// fork + execve. Signal dispositions and the mask are reset to their defaults in the child, and
// every descriptor but 0-2 is closed. An exec failure is reported, not returned as an error (the
// caller decides what a task that cannot start means); fork/pipe failures are errors.
absl::StatusOr<SpawnResult> spawnProcess(const SpawnOptions& options);

// A self-pipe for signals: handlers for the given signals write their numbers to a non-blocking
// pipe that a poll loop watches. One instance at a time per process; the previous dispositions
// come back when it is destroyed.
class SignalPipe {
 public:
  explicit SignalPipe(const std::vector<int>& signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const;
  // The signals received since the last call, in order.
  std::vector<int> take();

 private:
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// PR_SET_CHILD_SUBREAPER: orphaned descendants are reparented to this process (so they can be
// found and killed, and are reaped here).
void becomeSubreaper();
// The direct children of this process (from /proc/self/task/*/children).
std::vector<pid_t> childProcesses();
// Every descendant of this process (children, their children, ...) whose /proc/<pid>/comm is
// `comm` ("srun": the program's name as it was called).
std::vector<pid_t> descendantsNamed(std::string_view comm);
// SIGKILL every child of this process and their process groups, repeatedly, reaping them, until
// none is left or `deadline` passes (children of a subreaper include adopted orphans). Reaps with
// waitpid(-1): call it once the children the caller tracks are reaped.
void killRemainingChildren(std::chrono::steady_clock::time_point deadline);

// strsignal(), as srun prints a signalled task ("Killed", "Terminated", ...).
std::string signalDescription(int signal);
// strerror().
std::string errnoDescription(int err);

// `s` split at every byte in `separators` (std::string_view pieces; Debian's abseil splits into
// its own string_view type).
std::vector<std::string_view> splitAny(std::string_view s, std::string_view separators,
                                       bool skip_empty);

// The path of the running executable (/proc/self/exe).
std::string selfExecutable();

}  // namespace muster::jobengine::slurm
