#include "jobengine/slurm/steps/batch_step.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "jobengine/slurm/core/filename.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/signal_request.h"
#include "jobengine/slurm/core/step_record.h"
#include "jobengine/slurm/core/util.h"
#include "jobengine/slurm/steps/process.h"
#include "jobengine/slurm/steps/srun.h"

namespace muster::jobengine::slurm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kDefaultSshWait(600);
constexpr std::chrono::seconds kProgressEvery(15);
constexpr std::chrono::seconds kCheckTimeout(30);
constexpr std::chrono::seconds kLeftoverGrace(3);
constexpr size_t kMaxConcurrentChecks = 32;
// The tools a job's PATH offers (the binary answers to its argv[0]).
constexpr const char* kTools[] = {"srun", "scontrol", "sbatch", "squeue", "scancel", "sinfo", "sacct"};

std::string get(const Environment& env, const char* name, std::string fallback = "") {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return fallback;
  return it->second;
}

std::optional<uint32_t> getU32(const Environment& env, const char* name) {
  std::optional<uint64_t> v = parseDigits(get(env, name));
  if (!v || *v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

void say(int fd, std::string_view line) {
  std::string s(line);
  s.push_back('\n');
  (void)writeAll(fd, s);
}

std::string dirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool isExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

void mkdirs(const std::string& path) {
  std::string at;
  for (std::string_view part : splitAny(path, "/", false)) {
    at += "/";
    at.append(part.data(), part.size());
    if (!part.empty()) mkdir(at.c_str(), 0755);
  }
}

bool isWaitSignal(int sig) { return sig != SIGCHLD; }

// The directory that gives the script `srun` and `scontrol`.
std::string toolsDir(const std::string& bin, const std::string& state_dir, int notice_fd) {
  const std::string bin_dir = dirName(bin);
  if (isExecutable(bin_dir + "/srun") && isExecutable(bin_dir + "/scontrol")) return bin_dir;
  const std::string links = state_dir + "/bin";
  mkdirs(links);
  bool ok = true;
  for (const char* tool : kTools) {
    const std::string link = absl::StrCat(links, "/", tool);
    unlink(link.c_str());
    if (symlink(bin.c_str(), link.c_str()) != 0) ok = false;
  }
  if (!ok) {
    say(notice_fd, absl::StrCat("muster: batch-step: cannot create the srun/scontrol links in ",
                                links, ": ", errnoDescription(errno)));
    return bin_dir;
  }
  return links;
}

// One `<rsh> <node> true` check per node until each succeeds.
class SshWait {
 public:
  SshWait(std::vector<std::string> rsh, std::vector<std::string> nodes, const Environment& env,
          int progress_fd)
      : rsh_(std::move(rsh)), env_(environmentEntries(env)), progress_fd_(progress_fd) {
    for (std::string& n : nodes) {
      Check c;
      c.node = std::move(n);
      pending_.push_back(std::move(c));
    }
  }

  // true when every node answered; false on timeout or when a signal in `stop_signals` came
  // (*signal is set then).
  bool run(Clock::duration limit, SignalPipe& signals, int* signal) {
    const auto deadline = Clock::now() + limit;
    auto next_progress = Clock::now() + kProgressEvery;
    for (;;) {
      size_t running = 0, waiting = 0;
      for (Check& c : pending_) {
        if (c.done) continue;
        ++waiting;
        if (c.pid > 0) ++running;
      }
      if (waiting == 0) {
        say(progress_fd_, "muster: every node accepts SSH");
        return true;
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        for (Check& c : pending_) {
          if (c.done) continue;
          say(progress_fd_, absl::StrCat("muster: error: ", c.node, " did not accept SSH in ",
                                         std::chrono::duration_cast<std::chrono::seconds>(limit).count(),
                                         " s: ", c.last_error.empty() ? "no answer" : c.last_error));
        }
        stopAll();
        return false;
      }
      if (now >= next_progress) {
        for (Check& c : pending_) {
          if (!c.done) {
            say(progress_fd_, absl::StrCat("muster: waiting for ", c.node, " to accept SSH: ",
                                           c.last_error.empty() ? "no answer yet" : c.last_error));
          }
        }
        next_progress = now + kProgressEvery;
      }
      for (Check& c : pending_) {
        if (running >= kMaxConcurrentChecks) break;
        if (c.done || c.pid > 0 || now < c.next_try) continue;
        start(c);
        if (c.pid > 0) ++running;
      }
      for (Check& c : pending_) {
        if (c.pid > 0 && now - c.started > kCheckTimeout) kill(-c.pid, SIGKILL);
      }
      struct pollfd p = {signals.fd(), POLLIN, 0};
      poll(&p, 1, 200);
      for (int sig : signals.take()) {
        if (isWaitSignal(sig)) {
          *signal = sig;
          stopAll();
          return false;
        }
      }
      reap();
    }
  }

 private:
  struct Check {
    std::string node;
    pid_t pid = -1;
    Fd err;
    bool done = false;
    std::string last_error;
    Clock::time_point next_try{};
    Clock::time_point started{};
  };

  void start(Check& c) {
    absl::StatusOr<Pipe> err = makePipe();
    if (!err.ok()) return;
    Fd devnull(open("/dev/null", O_WRONLY | O_CLOEXEC));
    SpawnOptions o;
    o.argv = rsh_;
    o.argv.push_back(c.node);
    o.argv.push_back("true");
    o.env = env_;
    o.stdout_fd = devnull.get();
    o.stderr_fd = err->write.get();
    absl::StatusOr<SpawnResult> s = spawnProcess(o);
    c.started = Clock::now();
    if (!s.ok() || s->pid < 0) {
      c.last_error = absl::StrCat("cannot run ", rsh_[0], ": ",
                                  s.ok() ? errnoDescription(s->exec_errno)
                                         : std::string(s.status().message()));
      c.next_try = Clock::now() + std::chrono::seconds(1);
      return;
    }
    c.pid = s->pid;
    c.err = std::move(err->read);
    setNonBlocking(c.err.get());
  }

  void reap() {
    for (Check& c : pending_) {
      if (c.pid <= 0) continue;
      int status = 0;
      pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r != c.pid) continue;
      std::string text;
      char buf[4096];
      ssize_t n;
      while ((n = read(c.err.get(), buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
      c.err.reset();
      c.pid = -1;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        c.done = true;
        say(progress_fd_, absl::StrCat("muster: ", c.node, " accepts SSH"));
        continue;
      }
      std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
      c.last_error = lines.empty() ? (WIFEXITED(status)
                                          ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                          : std::string("killed"))
                                   : lines.back();
      c.next_try = Clock::now() + std::chrono::seconds(1);
    }
  }

  void stopAll() {
    for (Check& c : pending_) {
      if (c.pid > 0) {
        kill(-c.pid, SIGKILL);
        int status = 0;
        waitpid(c.pid, &status, 0);
        c.pid = -1;
      }
    }
  }

  std::vector<std::string> rsh_;
  std::vector<std::string> env_;
  int progress_fd_;
  std::vector<Check> pending_;
};

struct Output {
  Fd owned;
  int fd = -1;
};

Output openOutput(const std::string& path, bool append, int fallback_fd, std::string_view what) {
  Output out;
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC);
  out.owned.reset(open(path.c_str(), flags, 0644));
  if (out.owned.valid()) {
    out.fd = out.owned.get();
    return out;
  }
  say(2, absl::StrCat("muster: batch-step: cannot open the job's ", av(what), " file ", path, ": ",
                      errnoDescription(errno), "; it goes to this container's ", av(what),
                      " instead"));
  out.fd = fallback_fd;
  return out;
}

void writeTerminationLog(const std::string& path, const std::string& text) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid() || !writeAll(fd.get(), text).ok()) {
    say(2, absl::StrCat("muster: batch-step: cannot write the termination log ", path, ": ",
                        errnoDescription(errno)));
  }
}

// Ends the job without running the script (setup failed).
int failJob(const Environment& own, int err_fd, const std::string& message, int code = 1) {
  say(err_fd, message);
  if (err_fd != 2) say(2, message);
  writeTerminationLog(get(own, "MUSTER_TERMINATION_LOG", "/dev/termination-log"),
                      absl::StrCat(code, ":0"));
  return code;
}

void appendPath(std::vector<std::string>* entries, std::set<std::string>* seen,
                std::string_view path) {
  for (std::string_view e : splitAny(path, ":", true)) {
    std::string s(e);
    if (seen->insert(s).second) entries->push_back(s);
  }
}

// The request in $MUSTER_SLURM_SIGNAL_FILE; nullopt without one (no file, empty, unreadable).
std::optional<SignalRequest> readSignalRequest(const std::string& path) {
  if (path.empty()) return std::nullopt;
  absl::StatusOr<std::string> text = readFile(path, 256);
  if (!text.ok()) return std::nullopt;
  return parseSignalRequest(*text);
}

// scancel --signal as slurmstepd delivers it (signal_request.h), said on the container's stderr.
void deliverSignalRequest(const SignalRequest& r, pid_t script_pid) {
  const std::string what = absl::StrCat(signalDescription(r.number), " (signal ", r.number, ")");
  if (r.target == "batch") {
    say(2, absl::StrCat("muster: batch-step: scancel --signal: ", what, " to the batch shell"));
    kill(script_pid, r.number);
  } else if (r.target == "full") {
    say(2, absl::StrCat("muster: batch-step: scancel --signal: ", what,
                        " to the batch script and all its processes"));
    kill(-script_pid, r.number);
  } else {
    const std::vector<pid_t> steps = descendantsNamed("srun");
    say(2, absl::StrCat("muster: batch-step: scancel --signal: ", what, " to ", steps.size(),
                        " running srun step(s)"));
    for (pid_t pid : steps) kill(pid, r.number);
  }
}

}  // namespace

std::vector<std::string> splitNulEntries(std::string_view data) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < data.size()) {
    size_t nul = data.find('\0', start);
    if (nul == std::string_view::npos) nul = data.size();
    out.emplace_back(data.substr(start, nul - start));
    start = nul + 1;
  }
  return out;
}

Environment scriptEnvironment(const Environment& submission, const Environment& own,
                              const std::string& tools_dir) {
  Environment env;
  auto it = submission.find("SLURM_GET_USER_ENV");
  if (it != submission.end() && it->second == "1") {
    for (const auto& [name, value] : own) {
      if (name.rfind("MUSTER_", 0) != 0) env[name] = value;
    }
  }
  for (const auto& [name, value] : submission) env[name] = value;
  for (const auto& [name, value] : own) {
    if (name.rfind("SLURM", 0) == 0 || name == "ENVIRONMENT" || name == "HOSTNAME" ||
        name == "CUDA_VISIBLE_DEVICES") {
      env[name] = value;
    }
  }
  for (const char* name : {"MUSTER_SLURM_RSH", "MUSTER_SLURM_BIN", "MUSTER_SLURM_STATE_DIR"}) {
    if (auto o = own.find(name); o != own.end()) env[name] = o->second;
  }
  std::vector<std::string> path;
  std::set<std::string> seen;
  appendPath(&path, &seen, tools_dir);
  if (auto p = submission.find("PATH"); p != submission.end()) appendPath(&path, &seen, p->second);
  if (auto p = own.find("PATH"); p != own.end()) {
    appendPath(&path, &seen, p->second);
  } else if (submission.find("PATH") == submission.end()) {
    appendPath(&path, &seen, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  }
  env["PATH"] = absl::StrJoin(path, ":");
  return env;
}

BatchPaths batchPaths(const Environment& own, const std::string& work_dir) {
  FilenameContext c;
  c.job_id = getU32(own, "SLURM_JOB_ID").value_or(getU32(own, "SLURM_JOBID").value_or(0));
  c.array_job_id = getU32(own, "SLURM_ARRAY_JOB_ID");
  c.array_task_id = getU32(own, "SLURM_ARRAY_TASK_ID");
  std::string first_node = get(own, "SLURMD_NODENAME");
  if (absl::StatusOr<std::vector<std::string>> nodes =
          expandHostlist(get(own, "SLURM_JOB_NODELIST", get(own, "SLURM_NODELIST")));
      nodes.ok() && !nodes->empty()) {
    first_node = nodes->front();
  }
  c.node_name = first_node;
  c.node_id = 0;
  c.task_id = 0;
  c.restart_count = getU32(own, "SLURM_RESTART_COUNT").value_or(0);
  c.user = get(own, "MUSTER_SLURM_USER", get(own, "SLURM_JOB_USER"));
  c.job_name = get(own, "MUSTER_SLURM_JOB_NAME", get(own, "SLURM_JOB_NAME"));
  c.work_dir = work_dir;
  const bool is_array = c.array_job_id.has_value() && c.array_task_id.has_value();
  BatchPaths p;
  p.stdout_path = expandFilenamePattern(
      get(own, "MUSTER_SLURM_STDOUT", std::string(defaultOutputPattern(is_array))), c);
  const std::string err = get(own, "MUSTER_SLURM_STDERR");
  p.stderr_path = err.empty() ? p.stdout_path : expandFilenamePattern(err, c);
  p.stdin_path = expandFilenamePattern(get(own, "MUSTER_SLURM_STDIN", "/dev/null"), c);
  return p;
}

std::string exitCodeText(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("0:", WTERMSIG(status));
  if (WIFEXITED(status)) return absl::StrCat(WEXITSTATUS(status), ":0");
  return "0:0";
}

int exitCodeOf(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 1;
}

int batchStepMain(const std::map<std::string, std::string>& own) {
  SignalPipe signals({SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2});
  becomeSubreaper();
  const std::string batch_dir = get(own, "MUSTER_SLURM_BATCH_DIR");
  if (batch_dir.empty()) {
    return failJob(own, 2, "muster: batch-step: MUSTER_SLURM_BATCH_DIR is not set");
  }
  std::string state_dir = get(own, "MUSTER_SLURM_STATE_DIR");
  if (state_dir.empty()) {
    char tmpl[] = "/tmp/muster-slurm.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      return failJob(own, 2, absl::StrCat("muster: batch-step: mkdtemp: ", errnoDescription(errno)));
    }
    state_dir = tmpl;
  }
  mkdirs(state_dir);

  // The script's environment.
  Environment submission;
  if (absl::StatusOr<std::string> text = readFile(batch_dir + "/environment"); text.ok()) {
    submission = environmentMap(splitNulEntries(*text));
  } else {
    say(2, absl::StrCat("muster: batch-step: no submission environment: ", text.status().message()));
  }
  std::vector<std::string> args;
  if (absl::StatusOr<std::string> text = readFile(batch_dir + "/args"); text.ok()) {
    args = splitNulEntries(*text);
  }
  std::string bin = get(own, "MUSTER_SLURM_BIN");
  if (bin.empty()) bin = selfExecutable();
  Environment script_env = scriptEnvironment(submission, own, toolsDir(bin, state_dir, 2));
  if (script_env.find("MUSTER_SLURM_STATE_DIR") == script_env.end()) {
    script_env["MUSTER_SLURM_STATE_DIR"] = state_dir;
  }

  // Work dir, then the output files (relative to it, as slurmstepd opens them).
  const std::string work_dir =
      get(own, "MUSTER_SLURM_WORKDIR", get(own, "SLURM_SUBMIT_DIR", get(submission, "PWD", "/")));
  std::string chdir_error;
  std::string cwd = work_dir;
  if (chdir(work_dir.c_str()) != 0) {
    chdir_error = absl::StrCat("slurmstepd: error: couldn't chdir to `", work_dir, "': ",
                               errnoDescription(errno), ": going to /tmp instead");
    cwd = "/tmp";
    if (chdir("/tmp") != 0) {
      return failJob(own, 2, absl::StrCat(chdir_error, "\nslurmstepd: error: couldn't chdir to "
                                                       "/tmp either. dying."));
    }
  }
  script_env["PWD"] = cwd;
  const BatchPaths paths = batchPaths(own, work_dir);
  const bool append = get(own, "MUSTER_SLURM_OPEN_MODE") == "append";
  Output out = openOutput(paths.stdout_path, append, 1, "stdout");
  Output err;
  if (paths.stderr_path == paths.stdout_path) {
    err.fd = out.fd == 1 ? 2 : out.fd;
  } else {
    err = openOutput(paths.stderr_path, append, 2, "stderr");
  }
  Fd in(open(paths.stdin_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) {
    say(err.fd, absl::StrCat("slurmstepd: error: Could not open stdin file ", paths.stdin_path,
                             ": ", errnoDescription(errno), "; the script reads /dev/null"));
    in.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  if (!chdir_error.empty()) say(err.fd, chdir_error);

  // Every other node must accept SSH before the script's first srun.
  std::vector<std::string> others;
  const std::string self = get(own, "SLURMD_NODENAME");
  if (absl::StatusOr<std::vector<std::string>> nodes =
          expandHostlist(get(own, "SLURM_JOB_NODELIST", get(own, "SLURM_NODELIST")));
      nodes.ok()) {
    for (size_t i = 0; i < nodes->size(); ++i) {
      const std::string& n = (*nodes)[i];
      if (self.empty() ? i > 0 : n != self) others.push_back(n);
    }
  }
  if (!others.empty()) {
    std::vector<std::string> rsh = remoteShellWords(own);
    if (rsh.empty()) {
      say(2, "muster: batch-step: MUSTER_SLURM_RSH is not set: srun will not reach the other nodes");
    } else {
      std::chrono::seconds limit = kDefaultSshWait;
      if (std::optional<uint32_t> s = getU32(own, "MUSTER_SLURM_SSH_WAIT_SECONDS")) {
        limit = std::chrono::seconds(*s);
      }
      SshWait wait(rsh, others, own, 2);
      int sig = 0;
      if (!wait.run(limit, signals, &sig)) {
        if (sig != 0) {
          say(2, absl::StrCat("muster: batch-step: got signal ", sig,
                              " while waiting for the nodes; the script did not run"));
          writeTerminationLog(get(own, "MUSTER_TERMINATION_LOG", "/dev/termination-log"),
                              absl::StrCat("0:", sig));
          return 128 + sig;
        }
        return failJob(own, err.fd,
                       absl::StrCat("muster: error: not every node of the job accepts SSH "
                                    "after ", limit.count(), " s; the batch script did not run"));
      }
    }
  }

  // The script, as submitted, executed directly.
  absl::StatusOr<std::string> script = readFile(batch_dir + "/script");
  if (!script.ok()) {
    return failJob(own, err.fd, absl::StrCat("muster: batch-step: cannot read the batch script: ",
                                             script.status().message()));
  }
  const std::string script_path = state_dir + "/slurm_script";
  unlink(script_path.c_str());
  {
    Fd fd(open(script_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700));
    if (!fd.valid() || !writeAll(fd.get(), *script).ok() || fchmod(fd.get(), 0700) != 0) {
      return failJob(own, err.fd, absl::StrCat("muster: batch-step: cannot write ", script_path,
                                               ": ", errnoDescription(errno)));
    }
  }
  SpawnOptions o;
  o.argv.push_back(script_path);
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = environmentEntries(script_env);
  o.stdin_fd = in.get();
  o.stdout_fd = out.fd;
  o.stderr_fd = err.fd;
  o.new_process_group = true;
  absl::StatusOr<SpawnResult> spawned = spawnProcess(o);
  if (!spawned.ok()) {
    return failJob(own, err.fd, absl::StrCat("muster: batch-step: ", spawned.status().message()));
  }
  if (spawned->pid < 0) {
    return failJob(own, err.fd,
                   absl::StrCat("slurmstepd: error: execve(): ", script_path, ": ",
                                errnoDescription(spawned->exec_errno)),
                   spawned->exec_errno & 0xff);
  }
  const pid_t script_pid = spawned->pid;
  // scancel --signal (signal_request.h): what the file holds now was asked before this run.
  const std::string signal_file = get(own, "MUSTER_SLURM_SIGNAL_FILE");
  int64_t signal_seq = 0;
  if (std::optional<SignalRequest> r = readSignalRequest(signal_file)) signal_seq = r->seq;
  int status = 0;
  bool exited = false;
  while (!exited) {
    struct pollfd p = {signals.fd(), POLLIN, 0};
    poll(&p, 1, 1000);
    if (std::optional<SignalRequest> r = readSignalRequest(signal_file); r && r->seq > signal_seq) {
      signal_seq = r->seq;
      deliverSignalRequest(*r, script_pid);
    }
    for (int sig : signals.take()) {
      if (sig == SIGCHLD) continue;
      say(2, absl::StrCat("muster: batch-step: forwarding ", signalDescription(sig), " (signal ",
                          sig, ") to the batch script"));
      kill(-script_pid, sig);
    }
    for (;;) {
      int st = 0;
      pid_t r = waitpid(-1, &st, WNOHANG);
      if (r <= 0) break;
      if (r == script_pid) {
        status = st;
        exited = true;
      }
    }
  }

  // What the script left behind goes: its process group first gently, then everything.
  if (kill(-script_pid, SIGTERM) == 0) {
    const auto deadline = Clock::now() + kLeftoverGrace;
    while (Clock::now() < deadline && kill(-script_pid, 0) == 0) {
      int st = 0;
      while (waitpid(-1, &st, WNOHANG) > 0) {
      }
      struct pollfd p = {signals.fd(), POLLIN, 0};
      poll(&p, 1, 50);
      (void)signals.take();
    }
  }
  kill(-script_pid, SIGKILL);
  killRemainingChildren(Clock::now() + std::chrono::seconds(1));

  // The steps srun recorded go with the exit code (step_record.h), for sacct.
  std::vector<StepRecord> steps;
  const std::string steps_file =
      absl::StrCat(get(script_env, "MUSTER_SLURM_STATE_DIR", state_dir), "/job-",
                   getU32(script_env, "SLURM_JOB_ID").value_or(0), ".steps");
  if (absl::StatusOr<std::string> text = readFile(steps_file, 16u << 20); text.ok()) {
    steps = readStepRecords(*text, absl::ToUnixSeconds(absl::Now()));
  }
  writeTerminationLog(get(own, "MUSTER_TERMINATION_LOG", "/dev/termination-log"),
                      terminationMessage(exitCodeText(status), steps));
  return exitCodeOf(status);
}

}  // namespace muster::jobengine::slurm
