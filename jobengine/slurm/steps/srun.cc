#include "jobengine/slurm/steps/srun.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "jobengine/slurm/core/filename.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/options.h"
#include "jobengine/slurm/core/step_record.h"
#include "jobengine/slurm/core/util.h"
#include "jobengine/slurm/steps/process.h"
#include "jobengine/slurm/steps/step_plan.h"

namespace muster::jobengine::slurm {
namespace {

using Clock = std::chrono::steady_clock;
using Env = std::map<std::string, std::string>;

// The Slurm release whose srun behaviour Muster follows; `srun --version` prints it (PRRTE reads
// it to decide whether --external-launcher is understood).
constexpr std::string_view kSlurmVersion = "24.11.0";
// How long a child's pipes may stay open after it was reaped (a leftover ssh mux, say).
constexpr std::chrono::milliseconds kReapedGrace(1000);
// Bytes accepted before the Hello frame (login-shell noise) before the node counts as broken.
constexpr size_t kMaxPreHello = 64u << 10;
constexpr uint32_t kKillWaitMs = 2000;
constexpr std::chrono::seconds kAbandonAfter(5);

std::optional<std::string> get(const Env& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

void writeErr(std::string_view line) {
  std::string s(line);
  if (s.empty() || s.back() != '\n') s.push_back('\n');
  (void)writeAll(2, s);
}

// Shows the start of unexpected bytes with control characters escaped.
std::string printable(std::string_view bytes, size_t limit = 120) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (bytes.size() > limit) out += "...";
  return out;
}

std::string shortHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

// Where one stream of each task goes.
struct IoRouting {
  std::vector<int> fds;  // per task; -1 discards
  std::vector<std::shared_ptr<Fd>> files;  // the files those descriptors belong to
};

struct Node {
  std::string name;
  std::vector<uint32_t> procids;
  bool local = false;
  pid_t pid = -1;
  Fd to_child, from_child, child_err;
  std::string outbound;
  size_t outbound_offset = 0;
  FrameReader reader;
  std::string pre_hello;
  bool hello = false;
  bool done = false;
  bool reaped = false;
  int status = 0;
  Clock::time_point reaped_at{};
  std::string err_buffer;    // stderr before the hello (shown or used in the error)
  std::string err_partial;   // an unterminated stderr line after the hello
  std::set<uint32_t> exited;
  std::string failure;       // why the node failed, when it did
  bool finished = false;

  void queue(std::string frame) {
    if (!to_child.valid()) return;
    outbound.append(frame);
  }
};

class Srun {
 public:
  Srun(SrunOptions options, StepPlan plan, Env env)
      : options_(std::move(options)), plan_(std::move(plan)), env_(std::move(env)) {}

  // The step's end as sacct shows it (step_record.h).
  void describeEnd(StepRecord* step) const {
    int max_code = rc_floor_, max_signal = 0;
    for (const TaskExit& e : exits_) {
      if (e.signal != 0) max_signal = std::max(max_signal, static_cast<int>(e.signal));
      else max_code = std::max(max_code, static_cast<int>(e.exit_code));
    }
    setStepEnd(max_code, max_signal, cancelled_, step);
  }

  int run() {
    // SIGCONT is left alone, as srun does (it only logs it).
    SignalPipe signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE});
    width_ = options_.label ? labelWidth(plan_.ntasks) : 0;
    for (const std::string& w : plan_.warnings) writeErr(w);
    if (!setupIo()) return 1;
    launch();  // a node that cannot be started is already reported and finished
    return loop(signals);
  }

 private:
  bool setupIo() {
    SrunIo out = classifySrunIo(options_.output ? std::optional<std::string_view>(*options_.output)
                                                : std::nullopt,
                                static_cast<uint32_t>(plan_.ntasks));
    std::optional<std::string_view> err_value;
    if (options_.error) err_value = *options_.error;
    SrunIo err = options_.error ? classifySrunIo(err_value, static_cast<uint32_t>(plan_.ntasks))
                                : out;
    if (!route(out, options_.output.value_or(""), 1, &out_)) return false;
    if (!options_.error && out.kind == SrunIo::Kind::kFile) {
      err_ = out_;  // stderr goes to the same files
    } else if (!route(err, options_.error.value_or(options_.output.value_or("")), 2, &err_)) {
      return false;
    }
    if (options_.input) {
      SrunIo in = classifySrunIo(std::string_view(*options_.input),
                                 static_cast<uint32_t>(plan_.ntasks));
      if (in.kind != SrunIo::Kind::kNone && in.kind != SrunIo::Kind::kAll && !options_.quiet) {
        writeErr("srun: warning: --input is not supported by Muster: the tasks read /dev/null");
      }
    }
    return true;
  }

  bool route(const SrunIo& io, const std::string& pattern, int own_fd, IoRouting* r) {
    r->fds.assign(static_cast<size_t>(plan_.ntasks), -1);
    switch (io.kind) {
      case SrunIo::Kind::kAll:
        std::fill(r->fds.begin(), r->fds.end(), own_fd);
        return true;
      case SrunIo::Kind::kNone:
        return true;
      case SrunIo::Kind::kOneTask:
        if (io.task_id < r->fds.size()) r->fds[io.task_id] = own_fd;
        return true;
      case SrunIo::Kind::kFile:
        break;
    }
    std::map<std::string, std::shared_ptr<Fd>> by_path;
    const std::string cwd = plan_.requests.empty() ? "" : plan_.requests[0].cwd;
    for (size_t k = 0; k < plan_.requests.size(); ++k) {
      for (const StepTaskSpec& t : plan_.requests[k].tasks) {
        FilenameContext c;
        c.job_id = plan_.job_id;
        c.step_id = plan_.step_id;
        c.node_name = plan_.nodes[k];
        c.node_id = static_cast<uint32_t>(k);
        c.task_id = t.procid;
        c.user = get(env_, "SLURM_JOB_USER").value_or(get(env_, "USER").value_or(""));
        c.job_name = get(env_, "SLURM_JOB_NAME").value_or("");
        c.work_dir = cwd;
        if (auto a = get(env_, "SLURM_ARRAY_JOB_ID")) {
          std::optional<uint64_t> v = parseDigits(*a);
          if (v) c.array_job_id = static_cast<uint32_t>(*v);
        }
        if (auto a = get(env_, "SLURM_ARRAY_TASK_ID")) {
          std::optional<uint64_t> v = parseDigits(*a);
          if (v) c.array_task_id = static_cast<uint32_t>(*v);
        }
        std::string path = expandFilenamePattern(pattern, c);
        auto it = by_path.find(path);
        if (it == by_path.end()) {
          // O_APPEND as slurmstepd opens them: -o and -e naming one file do not overwrite each
          // other.
          int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
          if (fd < 0) {
            writeErr(absl::StrCat("srun: error: Could not open ",
                                  own_fd == 1 ? "stdout" : "stderr", " file ", path, ": ",
                                  errnoDescription(errno)));
            return false;
          }
          it = by_path.emplace(path, std::make_shared<Fd>(fd)).first;
          r->files.push_back(it->second);
        }
        r->fds[t.procid] = it->second->get();
      }
    }
    return true;
  }

  void launch() {
    const std::string here = get(env_, "SLURMD_NODENAME").value_or(shortHostname());
    std::string bin = get(env_, "MUSTER_SLURM_BIN").value_or("");
    if (bin.empty()) bin = selfExecutable();
    const std::vector<std::string> rsh = remoteShellWords(env_);
    const std::vector<std::string> env_entries = environmentEntries(env_);

    nodes_.resize(plan_.requests.size());
    for (size_t k = 0; k < plan_.requests.size(); ++k) {
      Node& node = nodes_[k];
      node.name = plan_.nodes[k];
      for (const StepTaskSpec& t : plan_.requests[k].tasks) node.procids.push_back(t.procid);
      node.local = node.name == here;
    }
    bool need_rsh = false;
    for (const Node& n : nodes_) need_rsh = need_rsh || !n.local;
    if (need_rsh && rsh.empty()) {
      writeErr(absl::StrCat(
          "srun: error: MUSTER_SLURM_RSH is not set, so srun cannot start tasks on other nodes "
          "(",
          absl::StrJoin(remoteNames(), ","),
          "); Muster's Slurm job pods set it: run srun inside a job submitted with sbatch"));
      for (Node& n : nodes_) {
        n.failure = "not started";
        n.finished = true;
        n.reaped = true;
      }
      rc_floor_ = 1;
      return;
    }
    for (size_t k = 0; k < nodes_.size(); ++k) {
      Node& node = nodes_[k];
      std::vector<std::string> argv;
      if (!node.local) {
        argv = rsh;
        argv.push_back(node.name);
      }
      argv.push_back(bin);
      argv.push_back("step-tasks");
      absl::StatusOr<Pipe> in = makePipe();
      absl::StatusOr<Pipe> out = makePipe();
      absl::StatusOr<Pipe> err = makePipe();
      if (!in.ok() || !out.ok() || !err.ok()) {
        failNode(node, "cannot create pipes");
        continue;
      }
      SpawnOptions o;
      o.argv = argv;
      o.env = env_entries;
      o.stdin_fd = in->read.get();
      o.stdout_fd = out->write.get();
      o.stderr_fd = err->write.get();
      o.new_process_group = true;
      o.parent_death_signal = SIGTERM;
      absl::StatusOr<SpawnResult> spawned = spawnProcess(o);
      if (!spawned.ok() || spawned->pid < 0) {
        failNode(node, absl::StrCat("cannot run ", argv[0], ": ",
                                    spawned.ok() ? errnoDescription(spawned->exec_errno)
                                                 : std::string(spawned.status().message())));
        continue;
      }
      node.pid = spawned->pid;
      node.to_child = std::move(in->write);
      node.from_child = std::move(out->read);
      node.child_err = std::move(err->read);
      setNonBlocking(node.to_child.get());
      setNonBlocking(node.from_child.get());
      setNonBlocking(node.child_err.get());
      node.queue(encodeRequest(plan_.requests[k]));
    }
  }

  std::vector<std::string> remoteNames() const {
    std::vector<std::string> out;
    for (const Node& n : nodes_) {
      if (!n.local) out.push_back(n.name);
    }
    return out;
  }

  // The node failed before or while running: report it, count its unreported tasks as failed and
  // end the rest of the step.
  void failNode(Node& node, const std::string& why) {
    if (!node.failure.empty()) return;
    node.failure = why.empty() ? "failed" : why;
    if (!why.empty()) writeErr(absl::StrCat("srun: error: ", node.name, ": ", why));
    std::vector<uint32_t> lost;
    for (uint32_t p : node.procids) {
      if (!node.exited.count(p)) lost.push_back(p);
    }
    if (!lost.empty() && node.hello) {
      writeErr(absl::StrCat("srun: error: ", node.name, ": ", lost.size() == 1 ? "task " : "tasks ",
                            formatTaskIds(lost), ": no exit status (the node's step-tasks ended)"));
    }
    for (uint32_t p : lost) {
      TaskExit e;
      e.procid = p;
      e.exit_code = 1;
      exits_.push_back(e);
      node.exited.insert(p);
    }
    if (node.pid < 0) {
      node.reaped = true;
      node.finished = true;
    } else if (!node.reaped) {
      kill(-node.pid, SIGTERM);  // a confused peer: end the session (its tasks end with it)
    }
    node.to_child.reset();
    terminateStep();
  }

  void terminateStep() {
    if (terminating_) return;
    terminating_ = true;
    for (Node& n : nodes_) n.queue(encodeTerminate());
  }

  // SIGKILL to every task now; nodes that still do not answer after kAbandonAfter are cut off
  // (their ssh or step-tasks killed), as srun gives up on a third Ctrl-C.
  void abandon() {
    forwardSignal(SIGKILL);
    if (!abandon_at_) abandon_at_ = Clock::now() + kAbandonAfter;
  }

  void forwardSignal(int sig) {
    for (Node& n : nodes_) n.queue(encodeSignal(sig));
  }

  void printStatus() {
    std::vector<uint32_t> running, exited, abnormal;
    std::map<uint32_t, const TaskExit*> by_id;
    for (const TaskExit& e : exits_) by_id[e.procid] = &e;
    for (int p = 0; p < plan_.ntasks; ++p) {
      auto it = by_id.find(static_cast<uint32_t>(p));
      if (it == by_id.end()) {
        running.push_back(static_cast<uint32_t>(p));
      } else if (it->second->exit_code != 0 || it->second->signal != 0) {
        abnormal.push_back(static_cast<uint32_t>(p));
      } else {
        exited.push_back(static_cast<uint32_t>(p));
      }
    }
    auto line = [&](const std::vector<uint32_t>& ids, std::string_view what) {
      if (ids.empty()) return;
      writeErr(absl::StrCat("srun: StepId=", plan_.job_id, ".", plan_.step_id,
                            ids.size() == 1 ? " task " : " tasks ", formatTaskIds(ids), ": ",
                            av(what)));
    };
    line(running, "running");
    line(abnormal, "exited abnormally");
    line(exited, "exited");
  }

  bool hasIgnored(std::string_view option) const {
    for (const IgnoredOption& i : options_.ignored) {
      if (i.option == option) return true;
    }
    return false;
  }

  void onSignal(int sig) {
    switch (sig) {
      case SIGCHLD:
        reap();
        return;
      case SIGINT: {
        const auto now = Clock::now();
        const bool second = last_interrupt_ && now - *last_interrupt_ <= std::chrono::seconds(1);
        if (hasIgnored("--quit-on-interrupt") || second || hasIgnored("--disable-status")) {
          writeErr(absl::StrCat("srun: sending Ctrl-C to StepId=", plan_.job_id, ".",
                                plan_.step_id));
          forwardSignal(SIGINT);
          if (!hasIgnored("--disable-status") || second) {
            cancelled_ = true;
            if (!terminating_) {
              terminateStep();
            } else {
              abandon();
            }
          }
        } else {
          writeErr("srun: interrupt (one more within 1 sec to abort)");
          printStatus();
        }
        last_interrupt_ = now;
        return;
      }
      case SIGTERM:
      case SIGHUP:
      case SIGQUIT:
        if (sig == SIGQUIT) writeErr("srun: Quit");
        writeErr("srun: forcing job termination");
        cancelled_ = true;
        if (terminating_) {
          abandon();  // a second request: no more waiting
        } else {
          terminateStep();
        }
        return;
      case SIGPIPE:
        return;  // the failing write reports it
      default:
        forwardSignal(sig);
    }
  }

  void reap() {
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) return;
      for (Node& n : nodes_) {
        if (n.pid == pid && !n.reaped) {
          n.reaped = true;
          n.status = status;
          n.reaped_at = Clock::now();
        }
      }
    }
  }

  void writeTaskOutput(const TaskOutput& o) {
    const IoRouting& r = o.stderr_stream ? err_ : out_;
    if (o.procid >= r.fds.size()) return;
    int fd = r.fds[o.procid];
    if (fd < 0 || output_broken_) return;
    absl::Status s = writeAll(fd, formatTaskOutput(o.data, options_.label, o.procid, width_));
    if (!s.ok() && (fd == 1 || fd == 2)) {
      // Nobody reads srun's output any more (srun ... | head): end the step, as Slurm does on
      // SIGPIPE.
      output_broken_ = true;
      terminateStep();
    }
  }

  void handleFrame(Node& node, const Frame& f) {
    switch (f.type) {
      case FrameType::kHello: {
        absl::StatusOr<uint32_t> v = decodeHello(f.payload);
        if (!v.ok() || *v != kStepProtocolVersion) {
          failNode(node, v.ok() ? absl::StrCat("muster-slurm there speaks step protocol version ",
                                               *v, ", this srun speaks ", kStepProtocolVersion)
                                : std::string(v.status().message()));
          return;
        }
        return;
      }
      case FrameType::kStdout:
      case FrameType::kStderr: {
        absl::StatusOr<TaskOutput> o = decodeOutput(f.type, f.payload);
        if (!o.ok()) {
          failNode(node, std::string(o.status().message()));
          return;
        }
        writeTaskOutput(*o);
        return;
      }
      case FrameType::kMessage: {
        absl::StatusOr<TaskMessage> m = decodeMessage(f.payload);
        if (!m.ok()) {
          failNode(node, std::string(m.status().message()));
          return;
        }
        if (m->procid >= 0) {
          writeErr(absl::StrCat("srun: error: ", node.name, ": task ", m->procid, ": ", m->text));
        } else {
          writeErr(absl::StrCat("srun: error: ", node.name, ": ", m->text));
        }
        return;
      }
      case FrameType::kExit: {
        absl::StatusOr<TaskExit> e = decodeExit(f.payload);
        if (!e.ok()) {
          failNode(node, std::string(e.status().message()));
          return;
        }
        if (!std::count(node.procids.begin(), node.procids.end(), e->procid) ||
            node.exited.count(e->procid)) {
          failNode(node, absl::StrCat("step protocol: unexpected exit of task ", e->procid));
          return;
        }
        node.exited.insert(e->procid);
        exits_.push_back(*e);
        if (options_.wait_seconds && *options_.wait_seconds > 0 && !first_exit_deadline_) {
          first_exit_deadline_ = Clock::now() + std::chrono::seconds(*options_.wait_seconds);
        }
        const bool bad = e->exit_code != 0 || e->signal != 0;
        // Tasks signalled because srun ended the step are expected, as in Slurm.
        if (bad && !(e->signal != 0 && cancelled_)) reportEnd(node.name, *e);
        if (bad && options_.kill_on_bad_exit.value_or(false)) terminateStep();
        return;
      }
      case FrameType::kDone:
        node.done = true;
        node.to_child.reset();  // lets ssh / step-tasks end
        return;
      default:
        failNode(node, absl::StrCat("step protocol: unexpected frame '",
                                    std::string(1, static_cast<char>(f.type)), "' from the node"));
    }
  }

  // Task ends with the same status on the same node, arriving together, make one line
  // ("tasks 0-3: Exited with exit code 1"), as slurmstepd's grouped exit messages do.
  void reportEnd(const std::string& node, const TaskExit& e) {
    for (PendingEnd& p : pending_ends_) {
      if (p.node == node && p.exit.exit_code == e.exit_code && p.exit.signal == e.signal &&
          p.exit.core_dumped == e.core_dumped) {
        p.procids.push_back(e.procid);
        return;
      }
    }
    pending_ends_.push_back(PendingEnd{node, e, {e.procid}});
  }

  void flushEnds() {
    for (const PendingEnd& p : pending_ends_) writeErr(taskEndMessage(p.node, p.procids, p.exit));
    pending_ends_.clear();
  }

  void readFromChild(Node& node) {
    char buf[65536];
    for (int rounds = 0; rounds < 8 && node.from_child.valid(); ++rounds) {
      ssize_t n = read(node.from_child.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        node.from_child.reset();
        return;
      }
      std::string_view data(buf, static_cast<size_t>(n));
      if (!node.hello) {
        node.pre_hello.append(data);
        std::optional<size_t> at = findHello(node.pre_hello);
        if (!at) {
          if (node.pre_hello.size() > kMaxPreHello) {
            failNode(node, absl::StrCat("the remote command does not speak the step protocol: ",
                                        printable(node.pre_hello)));
            node.from_child.reset();
          }
          continue;
        }
        if (*at > 0 && !options_.quiet) {
          writeErr(absl::StrCat("srun: warning: ", node.name,
                                ": ignoring output before step-tasks started: ",
                                printable(std::string_view(node.pre_hello).substr(0, *at))));
        }
        node.hello = true;
        if (!node.err_buffer.empty()) {
          (void)writeAll(2, node.err_buffer);
          node.err_buffer.clear();
        }
        node.reader.append(std::string_view(node.pre_hello).substr(*at));
        node.pre_hello.clear();
      } else {
        node.reader.append(data);
      }
      for (;;) {
        absl::StatusOr<std::optional<Frame>> f = node.reader.next();
        if (!f.ok()) {
          failNode(node, std::string(f.status().message()));
          node.from_child.reset();
          return;
        }
        if (!f->has_value()) break;
        handleFrame(node, **f);
      }
    }
  }

  void readChildErr(Node& node) {
    char buf[16384];
    ssize_t n = read(node.child_err.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      if (node.hello && !node.err_partial.empty()) {
        (void)writeAll(2, node.err_partial + "\n");
        node.err_partial.clear();
      }
      node.child_err.reset();
      return;
    }
    std::string_view data(buf, static_cast<size_t>(n));
    if (!node.hello) {
      node.err_buffer.append(data);
      if (node.err_buffer.size() > 16384) node.err_buffer.erase(0, node.err_buffer.size() - 16384);
      return;
    }
    // ssh's (or step-tasks') own messages: passed on whole lines at a time.
    node.err_partial.append(data);
    size_t nl = node.err_partial.rfind('\n');
    if (nl != std::string::npos) {
      (void)writeAll(2, std::string_view(node.err_partial).substr(0, nl + 1));
      node.err_partial.erase(0, nl + 1);
    }
  }

  void writeToChild(Node& node) {
    while (node.to_child.valid() && node.outbound_offset < node.outbound.size()) {
      ssize_t n = write(node.to_child.get(), node.outbound.data() + node.outbound_offset,
                        node.outbound.size() - node.outbound_offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        node.to_child.reset();  // the child is gone; its end is handled when it is reaped
        return;
      }
      node.outbound_offset += static_cast<size_t>(n);
    }
    if (node.outbound_offset == node.outbound.size()) {
      node.outbound.clear();
      node.outbound_offset = 0;
    }
  }

  std::string lastLine(const std::string& text) const {
    std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
    return lines.empty() ? "" : lines.back();
  }

  void checkFinished(Node& node) {
    if (node.finished || !node.reaped) return;
    const bool pipes_closed = !node.from_child.valid() && !node.child_err.valid();
    if (!pipes_closed && Clock::now() - node.reaped_at < kReapedGrace) return;
    if (node.from_child.valid()) readFromChild(node);
    node.from_child.reset();
    node.child_err.reset();
    node.to_child.reset();
    node.finished = true;
    if (!node.failure.empty()) return;
    std::string status;
    if (WIFEXITED(node.status)) {
      status = absl::StrCat("exit status ", WEXITSTATUS(node.status));
    } else if (WIFSIGNALED(node.status)) {
      status = absl::StrCat("killed by signal ", WTERMSIG(node.status));
    }
    if (!node.hello) {
      std::string why = lastLine(node.err_buffer);
      if (why.empty()) {
        why = absl::StrCat(node.local ? "step-tasks" : "the remote shell", " ended (", status,
                           ") before the step started");
      }
      failNode(node, why);
    } else if (!node.done) {
      if (!node.err_buffer.empty()) (void)writeAll(2, node.err_buffer);
      failNode(node, absl::StrCat("lost the connection to the node's step-tasks (", status, ")"));
    } else if (node.exited.size() < node.procids.size()) {
      failNode(node, "");  // step-tasks said why (a Message); its tasks did not run
    }
  }

  int loop(SignalPipe& signals) {
    for (;;) {
      flushEnds();
      const auto now = Clock::now();
      if (first_exit_deadline_ && now >= *first_exit_deadline_) {
        first_exit_deadline_.reset();
        if (exits_.size() < static_cast<size_t>(plan_.ntasks)) {
          writeErr(absl::StrCat("srun: First task exited ", *options_.wait_seconds, "s ago"));
          printStatus();
          terminateStep();
        }
      }
      if (abandon_at_ && now >= *abandon_at_) {
        for (Node& n : nodes_) {
          if (n.pid > 0 && !n.reaped) kill(-n.pid, SIGKILL);
        }
      }
      bool all_finished = true;
      for (Node& n : nodes_) {
        checkFinished(n);
        all_finished = all_finished && n.finished;
      }
      if (all_finished) break;
      flushEnds();

      std::vector<struct pollfd> fds;
      std::vector<std::pair<Node*, int>> owner;  // which node, 0 out / 1 err / 2 in
      fds.push_back({signals.fd(), POLLIN, 0});
      owner.emplace_back(nullptr, -1);
      for (Node& n : nodes_) {
        if (n.from_child.valid()) {
          fds.push_back({n.from_child.get(), POLLIN, 0});
          owner.emplace_back(&n, 0);
        }
        if (n.child_err.valid()) {
          fds.push_back({n.child_err.get(), POLLIN, 0});
          owner.emplace_back(&n, 1);
        }
        if (n.to_child.valid() && n.outbound_offset < n.outbound.size()) {
          fds.push_back({n.to_child.get(), POLLOUT, 0});
          owner.emplace_back(&n, 2);
        }
      }
      int r = poll(fds.data(), fds.size(), 100);
      if (r < 0 && errno != EINTR) break;
      if (r <= 0) {
        reap();  // a SIGCHLD may have raced with the poll set-up
        continue;
      }
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (owner[i].first == nullptr) {
          for (int sig : signals.take()) onSignal(sig);
          continue;
        }
        Node& n = *owner[i].first;
        switch (owner[i].second) {
          case 0:
            readFromChild(n);
            break;
          case 1:
            readChildErr(n);
            break;
          case 2:
            writeToChild(n);
            break;
        }
      }
    }
    flushEnds();
    return std::max(rc_floor_, stepExitCode(exits_));
  }

  struct PendingEnd {
    std::string node;
    TaskExit exit;
    std::vector<uint32_t> procids;
  };

  SrunOptions options_;
  StepPlan plan_;
  Env env_;
  int width_ = 0;
  IoRouting out_, err_;
  std::vector<Node> nodes_;
  std::vector<TaskExit> exits_;
  bool terminating_ = false;
  bool cancelled_ = false;
  bool output_broken_ = false;
  int rc_floor_ = 0;
  std::optional<Clock::time_point> last_interrupt_;
  std::optional<Clock::time_point> first_exit_deadline_;  // -W
  std::optional<Clock::time_point> abandon_at_;
  std::vector<PendingEnd> pending_ends_;
};

}  // namespace

int labelWidth(int ntasks) {
  int width = 1;
  for (int n = ntasks - 1; n >= 10; n /= 10) ++width;
  return width;
}

std::string labelPrefix(uint32_t procid, int width) {
  return absl::StrFormat("%*u: ", width, procid);
}

std::string formatTaskOutput(std::string_view data, bool label, uint32_t procid, int width) {
  if (!label) return std::string(data);
  const std::string prefix = labelPrefix(procid, width);
  std::string out;
  out.reserve(data.size() + prefix.size() * 2);
  while (!data.empty()) {
    size_t nl = data.find('\n');
    out += prefix;
    if (nl == std::string_view::npos) {
      out.append(data.data(), data.size());
      out.push_back('\n');
      break;
    }
    out.append(data.data(), nl + 1);
    data.remove_prefix(nl + 1);
  }
  return out;
}

int stepExitCode(const std::vector<TaskExit>& exits) {
  int max_code = 0, max_signal = 0;
  for (const TaskExit& e : exits) {
    if (e.signal != 0) {
      max_signal = std::max(max_signal, static_cast<int>(e.signal));
    } else {
      max_code = std::max(max_code, static_cast<int>(e.exit_code));
    }
  }
  if (max_signal != 0) return 128 + max_signal;
  return max_code;
}

std::string taskEndMessage(std::string_view node, const std::vector<uint32_t>& procids,
                           const TaskExit& e) {
  const std::string tasks =
      absl::StrCat(procids.size() == 1 ? "task " : "tasks ", formatTaskIds(procids));
  if (e.signal != 0) {
    return absl::StrCat("srun: error: ", av(node), ": ", tasks, ": ",
                        signalDescription(static_cast<int>(e.signal)),
                        e.core_dumped ? " (core dumped)" : "");
  }
  if (e.exit_code != 0) {
    return absl::StrCat("srun: error: ", av(node), ": ", tasks, ": Exited with exit code ",
                        e.exit_code);
  }
  return "";
}

std::string formatTaskIds(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, ids[i]);
    if (j > i) absl::StrAppend(&out, "-", ids[j]);
    i = j + 1;
  }
  return out;
}

std::vector<std::string> remoteShellWords(const std::map<std::string, std::string>& env) {
  auto it = env.find("MUSTER_SLURM_RSH");
  if (it == env.end()) return {};
  std::vector<std::string> words;
  for (std::string_view w : splitAny(it->second, " \t\n", true)) {
    words.emplace_back(w);
  }
  return words;
}

bool appendStepRecord(const std::string& path, const std::string& line) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid() || !writeAll(fd.get(), line).ok()) {
    writeErr(absl::StrCat("srun: warning: cannot record the step for sacct in ", path, ": ",
                          errnoDescription(errno)));
    return false;
  }
  return true;
}

absl::StatusOr<uint32_t> allocateStepId(const std::string& state_dir, uint32_t job_id) {
  const std::string path = absl::StrCat(state_dir, "/job-", job_id, ".next-step");
  Fd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return absl::InternalError(absl::StrCat(path, ": ", errnoDescription(errno)));
  }
  while (flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat(path, ": flock: ", errnoDescription(errno)));
    }
  }
  std::string text;
  char buf[64];
  for (;;) {
    ssize_t n = pread(fd.get(), buf, sizeof buf, static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 32) break;
  }
  while (!text.empty() && isSpace(text.back())) text.pop_back();
  uint32_t id = 0;
  if (!text.empty()) {
    std::optional<uint64_t> v = parseDigits(text);
    if (!v || *v >= 0xfffffff0u) {
      return absl::InternalError(absl::StrCat(path, ": not a step counter: \"", text, "\""));
    }
    id = static_cast<uint32_t>(*v);
  }
  const std::string next = absl::StrCat(id + 1, "\n");
  if (ftruncate(fd.get(), 0) != 0 ||
      pwrite(fd.get(), next.data(), next.size(), 0) != static_cast<ssize_t>(next.size())) {
    return absl::InternalError(absl::StrCat(path, ": ", errnoDescription(errno)));
  }
  return id;  // the lock goes with the descriptor
}

int srunMain(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  absl::StatusOr<SrunOptions> cli = parseSrunArgs(argv);
  if (!cli.ok()) {
    writeErr(std::string(cli.status().message()));
    return 1;
  }
  if (cli->help || cli->usage) {
    (void)writeAll(1, srunUsage());
    return 0;
  }
  if (cli->version) {
    (void)writeAll(1, absl::StrCat("slurm ", av(kSlurmVersion), "\n"));
    return 0;
  }
  auto job_id = env.find("SLURM_JOB_ID");
  if (job_id == env.end() || job_id->second.empty()) job_id = env.find("SLURM_JOBID");
  if (job_id == env.end() || job_id->second.empty()) {
    writeErr(
        "srun: error: Muster runs srun only inside a batch job (SLURM_JOB_ID is not set); "
        "submit the work with sbatch");
    return 1;
  }
  absl::StatusOr<SrunOptions> from_env = srunOptionsFromEnvironment(env);
  if (!from_env.ok()) {
    writeErr(std::string(from_env.status().message()));
    return 1;
  }
  SrunOptions options = mergeSrunOptions(*from_env, *cli);
  if (!options.quiet) {
    for (const IgnoredOption& i : options.ignored) {
      // Honoured by srun.cc itself (signals), so not worth a warning.
      if (i.option == "--disable-status" || i.option == "--quit-on-interrupt") continue;
      writeErr(i.warning);
    }
  }
  if (options.command.empty()) {
    writeErr("srun: fatal: No command given to execute.");
    return 1;
  }
  if (options.multi_prog) {
    writeErr("srun: error: --multi-prog is not supported by Muster");
    return 1;
  }
  if (options.jobid && *options.jobid != job_id->second) {
    writeErr(absl::StrCat("srun: error: --jobid=", *options.jobid,
                          ": Muster runs steps only in the job srun runs in (SLURM_JOB_ID=",
                          job_id->second, ")"));
    return 1;
  }
  absl::StatusOr<Allocation> alloc = allocationFromEnvironment(env);
  if (!alloc.ok()) {
    writeErr(std::string(alloc.status().message()));
    return 1;
  }
  std::string state_dir = "/tmp";
  if (auto it = env.find("MUSTER_SLURM_STATE_DIR"); it != env.end() && !it->second.empty()) {
    state_dir = it->second;
  }
  absl::StatusOr<uint32_t> step_id = allocateStepId(state_dir, alloc->job_id);
  if (!step_id.ok()) {
    writeErr(absl::StrCat("srun: error: cannot allocate a step id: ", step_id.status().message()));
    return 1;
  }
  char cwd_buf[8192];
  StepPlanInput input;
  input.options = options;
  input.allocation = *std::move(alloc);
  input.step_id = *step_id;
  input.environment = env;
  input.cwd = getcwd(cwd_buf, sizeof cwd_buf) != nullptr ? cwd_buf : "/";
  input.kill_wait_ms = kKillWaitMs;
  absl::StatusOr<StepPlan> plan = planStep(input);
  if (!plan.ok()) {
    writeErr(std::string(plan.status().message()));
    return 1;
  }
  // The step's accounting record (step_record.h): a start line now, an end line when it ends.
  StepRecord record;
  record.id = plan->step_id;
  record.name = cli->job_name.value_or("");
  if (record.name.empty()) {
    const std::string& program = options.command.front();
    record.name = program.substr(program.rfind('/') == std::string::npos ? 0 : program.rfind('/') + 1);
  }
  record.start = absl::ToUnixSeconds(absl::Now());
  record.nodes = static_cast<int32_t>(plan->nodes.size());
  record.tasks = plan->ntasks;
  record.cpus = plan->ntasks * std::max(1, options.cpus_per_task.value_or(1));
  record.node_list = compressHostlist(plan->nodes);
  const std::string steps_file = absl::StrCat(state_dir, "/job-", plan->job_id, ".steps");
  const bool recorded = appendStepRecord(steps_file, stepStartLine(record));
  Srun srun(std::move(options), *std::move(plan), env);
  const int rc = srun.run();
  if (recorded) {
    srun.describeEnd(&record);
    (void)appendStepRecord(steps_file, stepEndLine(record.id, absl::ToUnixSeconds(absl::Now()),
                                                   record.exit_code, record.state));
  }
  return rc;
}

}  // namespace muster::jobengine::slurm
