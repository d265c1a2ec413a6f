#pragma once

// Helpers for the tests of muster_slurm_steps: run a function in a forked child with its
// stdout/stderr captured (the tools write to file descriptors 1 and 2, and some install signal
// handlers or become subreapers), and temporary directories.

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace muster::jobengine::slurm::testing {

struct Captured {
  int status = 0;  // wait status of the child
  std::string out, err;
  int exitCode() const { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
};

// fn runs in a child whose stdin is /dev/null and whose stdout/stderr are captured; its return
// value is the child's exit code.
inline Captured runCaptured(const std::function<int()>& fn) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) abort();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    close(out[1]);
    close(err[1]);
    _exit(fn());
  }
  close(out[1]);
  close(err[1]);
  Captured c;
  struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, 30000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      (i == 0 ? c.out : c.err).append(buf, static_cast<size_t>(n));
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  waitpid(pid, &c.status, 0);
  return c;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/muster-steps-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void writeFile(const std::string& path, const std::string& data, int mode = 0644) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  f.close();
  chmod(path.c_str(), static_cast<mode_t>(mode));
}

inline std::string readWholeFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace muster::jobengine::slurm::testing
