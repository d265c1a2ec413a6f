#include "jobengine/slurm/steps/process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/util.h"

extern char** environ;

namespace muster::jobengine::slurm {
namespace {

absl::Status errnoStatus(std::string_view what, int err) {
  return absl::InternalError(absl::StrCat(av(what), ": ", errnoDescription(err)));
}

// What the child reports through its close-on-exec pipe before execve.
struct ChildReport {
  int kind;  // kChdirFailed or kExecFailed
  int err;
};
constexpr int kChdirFailed = 1;
constexpr int kExecFailed = 2;

void childWrite(int fd, int kind, int err) {
  ChildReport r{kind, err};
  ssize_t ignored = write(fd, &r, sizeof r);
  (void)ignored;
}

// Makes `fd` a descriptor above 2 when it is one of the standard ones (so dup2 onto 0-2 cannot
// clobber a source that is still needed). Async-signal-safe.
int liftFd(int fd) {
  if (fd >= 0 && fd <= 2) return fcntl(fd, F_DUPFD, 3);
  return fd;
}

void markAllCloexec() {
#ifdef CLOSE_RANGE_CLOEXEC
  if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
  for (int fd = 3; fd < 4096; ++fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

int g_signal_write_fd = -1;
int g_signal_read_fd = -1;

void onSignal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  if (g_signal_write_fd >= 0) {
    ssize_t ignored = write(g_signal_write_fd, &b, 1);
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

void Fd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::StatusOr<Pipe> makePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errnoStatus("pipe", errno);
  Pipe p;
  p.read.reset(fds[0]);
  p.write.reset(fds[1]);
  return p;
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

absl::Status writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {fd, POLLOUT, 0};
      poll(&p, 1, 1000);
      continue;
    }
    return errnoStatus("write", n < 0 ? errno : EIO);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> readFile(const std::string& path, size_t limit) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errnoStatus(path, errno);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errnoStatus(path, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", limit, " bytes"));
    }
  }
  return out;
}

std::vector<std::string> environmentEntries(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(absl::StrCat(name, "=", value));
  return out;
}

std::map<std::string, std::string> environmentMap(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> out;
  for (const std::string& e : entries) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    out[e.substr(0, eq)] = e.substr(eq + 1);
  }
  return out;
}

std::map<std::string, std::string> currentEnvironment() {
  std::vector<std::string> entries;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) entries.emplace_back(*e);
  return environmentMap(entries);
}

std::vector<std::string> executableCandidates(const std::string& file,
                                              const std::optional<std::string>& path) {
  if (file.empty()) return {};
  if (file.find('/') != std::string::npos) return {file};
  std::string search = path.value_or("/bin:/usr/bin");
  std::vector<std::string> out;
  for (std::string_view dir : splitAny(search, ":", false)) {
    if (dir.empty()) {
      out.push_back(file);  // an empty entry is the current directory
    } else if (dir.back() == '/') {
      out.push_back(absl::StrCat(av(dir), file));
    } else {
      out.push_back(absl::StrCat(av(dir), "/", file));
    }
  }
  return out;
}

absl::StatusOr<SpawnResult> spawnProcess(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("spawn: empty argv");
  // Everything the child needs is prepared here: after fork only async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  std::optional<std::string> path;
  for (const std::string& e : options.env) {
    envp.push_back(const_cast<char*>(e.c_str()));
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  envp.push_back(nullptr);
  std::vector<std::string> candidates = executableCandidates(options.argv[0], path);
  if (options.try_cwd_last && options.argv[0].find('/') == std::string::npos) {
    candidates.push_back("./" + options.argv[0]);
  }
  // ENOEXEC: run the file with /bin/sh, as execvp does (the file is data, not a command line).
  std::vector<char*> sh_argv;
  sh_argv.push_back(const_cast<char*>("/bin/sh"));
  sh_argv.push_back(nullptr);  // replaced by the candidate
  for (size_t i = 1; i < options.argv.size(); ++i) {
    sh_argv.push_back(const_cast<char*>(options.argv[i].c_str()));
  }
  sh_argv.push_back(nullptr);

  Fd devnull;
  int stdin_fd = options.stdin_fd;
  if (stdin_fd < 0) {
    devnull.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    stdin_fd = devnull.get();
  }
  absl::StatusOr<Pipe> report = makePipe();
  if (!report.ok()) return report.status();

  pid_t pid = fork();
  if (pid < 0) return errnoStatus("fork", errno);
  if (pid == 0) {
    const int wfd = report->write.get();
    if (options.new_process_group) setpgid(0, 0);
    if (options.parent_death_signal) prctl(PR_SET_PDEATHSIG, *options.parent_death_signal);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int sources[3] = {liftFd(stdin_fd), liftFd(options.stdout_fd), liftFd(options.stderr_fd)};
    for (int target = 0; target < 3; ++target) {
      if (sources[target] < 0) continue;
      if (dup2(sources[target], target) < 0) {
        childWrite(wfd, kExecFailed, errno);
        _exit(127);
      }
    }
    markAllCloexec();
    if (options.cwd && chdir(options.cwd->c_str()) != 0) {
      int err = errno;
      if (!options.cwd_fallback || chdir(options.cwd_fallback->c_str()) != 0) {
        childWrite(wfd, kExecFailed, err);
        _exit(127);
      }
      childWrite(wfd, kChdirFailed, err);
    }
    int err = ENOENT;
    bool eacces = false;
    for (const std::string& c : candidates) {
      execve(c.c_str(), argv.data(), envp.data());
      err = errno;
      if (err == ENOEXEC) {
        sh_argv[1] = const_cast<char*>(c.c_str());
        execve("/bin/sh", sh_argv.data(), envp.data());
        err = errno;
        break;
      }
      if (err == EACCES) {
        eacces = true;
        continue;
      }
      if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV && err != ETIMEDOUT) {
        break;
      }
    }
    if (eacces && (err == ENOENT || err == ENOTDIR)) err = EACCES;
    childWrite(wfd, kExecFailed, err);
    _exit(127);
  }

  report->write.reset();
  SpawnResult result;
  result.pid = pid;
  for (;;) {
    ChildReport r;
    ssize_t n = read(report->read.get(), &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;  // EOF: execve succeeded
    if (r.kind == kChdirFailed) {
      result.chdir_failed = true;
      result.chdir_errno = r.err;
    } else if (r.kind == kExecFailed) {
      result.exec_errno = r.err;
    }
  }
  if (result.exec_errno != 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.pid = -1;
  }
  return result;
}

SignalPipe::SignalPipe(const std::vector<int>& signals) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    g_signal_read_fd = fds[0];
    g_signal_write_fd = fds[1];
  }
  for (int sig : signals) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    struct sigaction old;
    if (sigaction(sig, &sa, &old) == 0) saved_.emplace_back(sig, old);
  }
}

SignalPipe::~SignalPipe() {
  for (auto& [sig, old] : saved_) sigaction(sig, &old, nullptr);
  if (g_signal_read_fd >= 0) close(g_signal_read_fd);
  if (g_signal_write_fd >= 0) close(g_signal_write_fd);
  g_signal_read_fd = g_signal_write_fd = -1;
}

int SignalPipe::fd() const { return g_signal_read_fd; }

std::vector<int> SignalPipe::take() {
  std::vector<int> out;
  unsigned char buf[64];
  for (;;) {
    ssize_t n = read(g_signal_read_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) out.push_back(buf[i]);
  }
  return out;
}

void becomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

std::vector<pid_t> childProcesses() {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (struct dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    absl::StatusOr<std::string> text =
        readFile(absl::StrCat("/proc/self/task/", e->d_name, "/children"), 1u << 20);
    if (!text.ok()) continue;
    for (std::string_view word : splitAny(*text, " \n", true)) {
      std::optional<uint64_t> pid = parseDigits(word);
      if (pid) out.push_back(static_cast<pid_t>(*pid));
    }
  }
  closedir(dir);
  return out;
}

std::vector<pid_t> descendantsNamed(std::string_view comm) {
  std::vector<pid_t> out;
  std::vector<pid_t> todo{getpid()};
  std::set<pid_t> seen;
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (!seen.insert(pid).second) continue;
    const std::string dir = absl::StrCat("/proc/", pid, "/task");
    DIR* tasks = opendir(dir.c_str());
    if (tasks == nullptr) continue;
    while (struct dirent* e = readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      absl::StatusOr<std::string> text =
          readFile(absl::StrCat(dir, "/", e->d_name, "/children"), 1u << 20);
      if (!text.ok()) continue;
      for (std::string_view word : splitAny(*text, " \n", true)) {
        std::optional<uint64_t> child = parseDigits(word);
        if (!child) continue;
        todo.push_back(static_cast<pid_t>(*child));
        absl::StatusOr<std::string> name = readFile(absl::StrCat("/proc/", *child, "/comm"), 64);
        if (name.ok() && absl::StripTrailingAsciiWhitespace(*name) == av(comm))
          out.push_back(static_cast<pid_t>(*child));
      }
    }
    closedir(tasks);
  }
  return out;
}

void killRemainingChildren(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    std::vector<pid_t> children = childProcesses();
    for (pid_t pid : children) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
    }
    int status = 0;
    while (waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (children.empty() || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string signalDescription(int signal) {
  const char* s = strsignal(signal);
  return s != nullptr ? std::string(s) : absl::StrCat("Signal ", signal);
}

std::string errnoDescription(int err) {
  char buf[256];
  // GNU strerror_r returns the message (which may not be buf).
  return std::string(strerror_r(err, buf, sizeof buf));
}

std::vector<std::string_view> splitAny(std::string_view s, std::string_view separators,
                                       bool skip_empty) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find_first_of(separators, start);
    std::string_view piece = s.substr(start, at == std::string_view::npos ? std::string_view::npos
                                                                          : at - start);
    if (!piece.empty() || !skip_empty) out.push_back(piece);
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

std::string selfExecutable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace muster::jobengine::slurm
