#include "jobengine/slurm/steps/step_tasks.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/util.h"
#include "jobengine/slurm/steps/process.h"
#include "jobengine/slurm/steps/step_protocol.h"

namespace muster::jobengine::slurm {
namespace {

using Clock = std::chrono::steady_clock;

// Stop reading task output while this much is waiting to be written to srun (backpressure: the
// tasks block on their pipes, control frames are still handled).
constexpr size_t kHighWatermark = 4u << 20;
// How long output that is still open after every leader was reaped and its process group
// killed is waited for.
constexpr std::chrono::milliseconds kFinalDrain(500);

// Frames waiting to be written to srun, with their byte count.
class OutQueue {
 public:
  void push(std::string frame) {
    if (discard_) return;
    bytes_ += frame.size();
    frames_.push_back(std::move(frame));
  }
  bool empty() const { return frames_.empty(); }
  size_t bytes() const { return bytes_ - offset_; }
  const std::string& front() const { return frames_.front(); }
  size_t offset() const { return offset_; }
  // `n` more bytes of the front frame were written.
  void advance(size_t n) {
    offset_ += n;
    if (offset_ == frames_.front().size()) {
      bytes_ -= frames_.front().size();
      frames_.pop_front();
      offset_ = 0;
    }
  }
  // Nobody reads any more: drop what is queued and whatever comes later.
  void discardAll() {
    discard_ = true;
    frames_.clear();
    bytes_ = offset_ = 0;
  }

 private:
  std::deque<std::string> frames_;
  size_t bytes_ = 0, offset_ = 0;
  bool discard_ = false;
};

// Splits one stream of a task into frames of whole lines.
class LineFramer {
 public:
  LineFramer(uint32_t procid, bool stderr_stream) : procid_(procid), stderr_(stderr_stream) {}

  // Appends data; frames of complete lines (several per frame, up to kMaxOutputChunk) and pieces
  // of over-long lines go to `out`. An unterminated rest shorter than a chunk is kept.
  void add(std::string_view data, OutQueue* out) {
    pending_.append(data.data(), data.size());
    size_t start = 0;
    while (start < pending_.size()) {
      std::string_view rest = std::string_view(pending_).substr(start);
      std::string_view window = rest.substr(0, kMaxOutputChunk);
      size_t nl = window.rfind('\n');
      if (nl != std::string_view::npos) {
        emit(window.substr(0, nl + 1), out);
        start += nl + 1;
      } else if (rest.size() >= kMaxOutputChunk) {
        emit(window, out);
        start += window.size();
      } else {
        break;
      }
    }
    pending_.erase(0, start);
  }

  // The end of the stream: the unterminated last line, if any.
  void flush(OutQueue* out) {
    if (!pending_.empty()) emit(pending_, out);
    pending_.clear();
  }

 private:
  void emit(std::string_view data, OutQueue* out) {
    TaskOutput o;
    o.procid = procid_;
    o.stderr_stream = stderr_;
    o.data = std::string(data);
    out->push(encodeOutput(o));
  }

  uint32_t procid_;
  bool stderr_;
  std::string pending_;
};

struct Stream {
  Fd fd;
  std::unique_ptr<LineFramer> framer;
  bool open() const { return fd.valid(); }
};

struct Task {
  uint32_t procid = 0;
  pid_t pid = -1;  // also its process group
  bool reaped = false;
  Stream out, err;
};

class StepTasks {
 public:
  StepTasks(int in_fd, int out_fd, int err_fd) : in_fd_(in_fd), out_fd_(out_fd), err_fd_(err_fd) {}

  int run() {
    SignalPipe signals({SIGCHLD, SIGTERM, SIGINT, SIGHUP});
    struct sigaction ignore_pipe = {}, old_pipe = {};
    ignore_pipe.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore_pipe, &old_pipe);
    becomeSubreaper();
    setNonBlocking(in_fd_);
    setNonBlocking(out_fd_);
    queue_.push(encodeHello());

    int rc = loop(signals);

    sigaction(SIGPIPE, &old_pipe, nullptr);
    return rc;
  }

 private:
  int loop(SignalPipe& signals) {
    for (;;) {
      if (started_ && allReaped() && !finishing_) beginFinish();
      if (finishing_ && (allStreamsClosed() || Clock::now() >= finish_deadline_)) {
        for (Task& t : tasks_) closeStreams(t);
        queue_.push(encodeDone());
        flushBlocking();
        return protocol_error_ ? 2 : 0;
      }
      if (protocol_error_ && !started_) {
        flushBlocking();
        return 2;
      }

      std::vector<struct pollfd> fds;
      std::vector<std::pair<Task*, bool>> stream_of;  // fds index - 3 -> (task, is stderr)
      fds.push_back({signals.fd(), POLLIN, 0});
      fds.push_back({in_open_ ? in_fd_ : -1, POLLIN, 0});
      fds.push_back({(!queue_.empty() && !out_broken_) ? out_fd_ : -1, POLLOUT, 0});
      const bool read_tasks = queuedBytes() < kHighWatermark || out_broken_;
      for (Task& t : tasks_) {
        for (bool is_err : {false, true}) {
          Stream& s = is_err ? t.err : t.out;
          if (!s.open()) continue;
          fds.push_back({read_tasks ? s.fd.get() : -1, POLLIN, 0});
          stream_of.emplace_back(&t, is_err);
        }
      }
      int timeout_ms = -1;
      auto until = [&](Clock::time_point when) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now()).count();
        int v = static_cast<int>(std::max<int64_t>(0, ms) + 1);
        if (timeout_ms < 0 || v < timeout_ms) timeout_ms = v;
      };
      if (terminating_ && !killed_) until(kill_deadline_);
      if (finishing_) until(finish_deadline_);
      int n = poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) {
        note(absl::StrCat("step-tasks: poll: ", errnoDescription(errno)));
        return 2;
      }
      if (terminating_ && !killed_ && Clock::now() >= kill_deadline_) killAll(SIGKILL);
      if (n <= 0) continue;

      if (fds[0].revents & POLLIN) {
        for (int sig : signals.take()) {
          if (sig == SIGCHLD) {
            reap();
          } else {
            startTermination();
          }
        }
      }
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) readControl();
      if (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) writeQueued();
      for (size_t i = 3; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          auto [task, is_err] = stream_of[i - 3];
          readStream(*task, is_err ? task->err : task->out, /*until_empty=*/false);
        }
      }
    }
  }

  void note(const std::string& text) {
    std::string line = text + "\n";
    ssize_t ignored = write(err_fd_, line.data(), line.size());
    (void)ignored;
  }

  void sendMessage(int32_t procid, std::string text) {
    TaskMessage m;
    m.procid = procid;
    m.text = std::move(text);
    queue_.push(encodeMessage(m));
  }

  size_t queuedBytes() const { return queue_.bytes(); }

  void writeQueued() {
    while (!queue_.empty() && !out_broken_) {
      const std::string& front = queue_.front();
      ssize_t n = write(out_fd_, front.data() + queue_.offset(), front.size() - queue_.offset());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        // srun is gone: nobody will read what the tasks print, and nobody may leave them behind.
        out_broken_ = true;
        queue_.discardAll();
        startTermination();
        return;
      }
      queue_.advance(static_cast<size_t>(n));
    }
  }

  void flushBlocking() {
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!queue_.empty() && !out_broken_ && Clock::now() < deadline) {
      writeQueued();
      if (queue_.empty() || out_broken_) break;
      struct pollfd p = {out_fd_, POLLOUT, 0};
      poll(&p, 1, 100);
    }
  }

  void readControl() {
    char buf[65536];
    for (;;) {
      ssize_t n = read(in_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        in_open_ = false;
        if (!started_) {
          if (!protocol_error_) {
            note("step-tasks: input ended before a request arrived");
            protocol_error_ = true;
          }
        } else {
          startTermination();
        }
        break;
      }
      reader_.append(std::string_view(buf, static_cast<size_t>(n)));
    }
    for (;;) {
      absl::StatusOr<std::optional<Frame>> frame = reader_.next();
      if (!frame.ok()) {
        protocolError(std::string(frame.status().message()));
        return;
      }
      if (!frame->has_value()) return;
      handleFrame(**frame);
    }
  }

  void protocolError(const std::string& text) {
    note(absl::StrCat("step-tasks: ", text));
    sendMessage(-1, text);
    protocol_error_ = true;
    in_open_ = false;
    if (started_) startTermination();
  }

  void handleFrame(const Frame& frame) {
    if (!started_) {
      if (frame.type != FrameType::kRequest) {
        protocolError("step protocol: expected a request first");
        return;
      }
      absl::StatusOr<StepRequest> request = decodeRequest(frame.payload);
      if (!request.ok()) {
        protocolError(std::string(request.status().message()));
        return;
      }
      start(*std::move(request));
      return;
    }
    switch (frame.type) {
      case FrameType::kSignal: {
        absl::StatusOr<int> sig = decodeSignal(frame.payload);
        if (!sig.ok()) {
          protocolError(std::string(sig.status().message()));
          return;
        }
        signalAll(*sig);
        return;
      }
      case FrameType::kTerminate:
        startTermination();
        return;
      default:
        protocolError(absl::StrCat("step protocol: unexpected frame '",
                                   std::string(1, static_cast<char>(frame.type)),
                                   "' after the request"));
    }
  }

  static std::optional<std::string> invalidString(const StepRequest& r) {
    auto hasNul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
    for (const std::string& a : r.argv) {
      if (hasNul(a)) return "an argument contains a NUL byte";
    }
    if (r.argv[0].empty()) return "the command is empty";
    if (hasNul(r.cwd)) return "the working directory contains a NUL byte";
    auto badEnv = [&](const std::vector<std::string>& env) {
      for (const std::string& e : env) {
        if (hasNul(e) || e.find('=') == std::string::npos || e[0] == '=') return true;
      }
      return false;
    };
    if (badEnv(r.env)) return "an environment entry is not NAME=VALUE without NUL bytes";
    for (const StepTaskSpec& t : r.tasks) {
      if (badEnv(t.env)) return "an environment entry is not NAME=VALUE without NUL bytes";
    }
    return std::nullopt;
  }

  void start(StepRequest request) {
    started_ = true;
    request_ = std::move(request);
    if (std::optional<std::string> bad = invalidString(request_)) {
      // No task can start; srun reports them as not started.
      sendMessage(-1, *bad);
      return;
    }
    tasks_.reserve(request_.tasks.size());  // the poll loop holds pointers into it
    std::map<std::string, std::string> common = environmentMap(request_.env);
    for (const StepTaskSpec& spec : request_.tasks) {
      std::map<std::string, std::string> env = common;
      for (const auto& [k, v] : environmentMap(spec.env)) env[k] = v;
      spawnTask(spec.procid, environmentEntries(env));
    }
  }

  void spawnTask(uint32_t procid, std::vector<std::string> env) {
    Task task;
    task.procid = procid;
    absl::StatusOr<Pipe> out = makePipe();
    absl::StatusOr<Pipe> err = makePipe();
    if (!out.ok() || !err.ok()) {
      sendMessage(static_cast<int32_t>(procid), "cannot create pipes for the task");
      sendExit(procid, 1, 0, false);
      return;
    }
    SpawnOptions options;
    options.argv = request_.argv;
    options.env = std::move(env);
    if (!request_.cwd.empty()) options.cwd = request_.cwd;
    options.cwd_fallback = "/tmp";
    options.stdout_fd = out->write.get();
    options.stderr_fd = err->write.get();
    options.new_process_group = true;
    options.parent_death_signal = SIGKILL;
    options.try_cwd_last = true;
    absl::StatusOr<SpawnResult> spawned = spawnProcess(options);
    if (!spawned.ok()) {
      sendMessage(static_cast<int32_t>(procid), std::string(spawned.status().message()));
      sendExit(procid, 1, 0, false);
      return;
    }
    if (spawned->chdir_failed) {
      sendMessage(static_cast<int32_t>(procid),
                  absl::StrCat("couldn't chdir to `", request_.cwd, "': ",
                               errnoDescription(spawned->chdir_errno), ": going to /tmp instead"));
    }
    if (spawned->pid < 0) {
      sendMessage(static_cast<int32_t>(procid),
                  absl::StrCat("execve(): ", request_.argv[0], ": ",
                               errnoDescription(spawned->exec_errno)));
      sendExit(procid, spawned->exec_errno & 0xff, 0, false);
      if (request_.kill_on_bad_exit) startTermination();
      return;
    }
    task.pid = spawned->pid;
    if (terminating_) {
      // kill-on-bad-exit fired (or srun went away) while the node's tasks were being started.
      kill(-task.pid, SIGCONT);
      kill(-task.pid, killed_ ? SIGKILL : SIGTERM);
    }
    out->write.reset();
    err->write.reset();
    setNonBlocking(out->read.get());
    setNonBlocking(err->read.get());
    task.out.fd = std::move(out->read);
    task.out.framer = std::make_unique<LineFramer>(procid, false);
    task.err.fd = std::move(err->read);
    task.err.framer = std::make_unique<LineFramer>(procid, true);
    tasks_.push_back(std::move(task));
  }

  void sendExit(uint32_t procid, int code, int sig, bool core) {
    TaskExit e;
    e.procid = procid;
    e.exit_code = code;
    e.signal = static_cast<uint32_t>(sig);
    e.core_dumped = core;
    queue_.push(encodeExit(e));
  }

  // Reads what is available; at end of stream the partial line is flushed and the pipe closed.
  void readStream(Task& task, Stream& s, bool until_empty) {
    (void)task;
    char buf[65536];
    for (int rounds = 0; s.open(); ++rounds) {
      ssize_t n = read(s.fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        s.framer->flush(&queue_);
        s.fd.reset();
        return;
      }
      s.framer->add(std::string_view(buf, static_cast<size_t>(n)), &queue_);
      // Let other tasks have their turn; "until empty" is bounded too (a process left behind
      // may keep writing).
      if (rounds >= (until_empty ? 64 : 4)) return;
    }
  }

  void closeStreams(Task& t) {
    for (Stream* s : {&t.out, &t.err}) {
      if (!s->open()) continue;
      readStream(t, *s, true);
      if (s->open()) {
        s->framer->flush(&queue_);
        s->fd.reset();
      }
    }
  }

  void reap() {
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) return;
      for (Task& t : tasks_) {
        if (t.pid != pid || t.reaped) continue;
        t.reaped = true;
        // What the task wrote before it ended is in the pipes: send it before its exit.
        readStream(t, t.out, true);
        readStream(t, t.err, true);
        int code = 0, sig = 0;
        bool core = false;
        if (WIFEXITED(status)) {
          code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          sig = WTERMSIG(status);
          core = WCOREDUMP(status);
        }
        sendExit(t.procid, code, sig, core);
        if ((code != 0 || sig != 0) && request_.kill_on_bad_exit) startTermination();
      }
    }
  }

  bool allReaped() const {
    for (const Task& t : tasks_) {
      if (!t.reaped) return false;
    }
    return true;
  }

  bool allStreamsClosed() const {
    for (const Task& t : tasks_) {
      if (t.out.open() || t.err.open()) return false;
    }
    return true;
  }

  void signalAll(int sig) {
    for (const Task& t : tasks_) {
      if (t.pid > 0) kill(-t.pid, sig);
    }
  }

  void startTermination() {
    if (terminating_) return;
    terminating_ = true;
    signalAll(SIGCONT);
    signalAll(SIGTERM);
    kill_deadline_ = Clock::now() + std::chrono::milliseconds(request_.kill_wait_ms);
  }

  void killAll(int sig) {
    killed_ = true;
    signalAll(sig);
  }

  void beginFinish() {
    finishing_ = true;
    // The step is over: what is left of it goes (Slurm's proctrack does the same).
    signalAll(SIGKILL);
    killRemainingChildren(Clock::now() + std::chrono::seconds(1));
    finish_deadline_ = Clock::now() + kFinalDrain;
  }

  int in_fd_, out_fd_, err_fd_;
  FrameReader reader_;
  StepRequest request_;
  std::vector<Task> tasks_;
  OutQueue queue_;
  bool in_open_ = true;
  bool out_broken_ = false;
  bool started_ = false;
  bool protocol_error_ = false;
  bool terminating_ = false;
  bool killed_ = false;
  bool finishing_ = false;
  Clock::time_point kill_deadline_{};
  Clock::time_point finish_deadline_{};
};

}  // namespace

int stepTasksMain(int in_fd, int out_fd, int err_fd) {
  StepTasks step(in_fd, out_fd, err_fd);
  return step.run();
}

}  // namespace muster::jobengine::slurm
