// dieOnException: an exception escaping a spawned coroutine ends the process (never swallowed
// as asio::detached would), after logging what failed.
#include "proto/coroutine.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "proto/asio.h"

namespace muster::proto {
namespace {

asio::awaitable<void> fails() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  throw std::runtime_error("the loop broke");
}

asio::awaitable<int> succeeds() { co_return 7; }

// Runs `body` in a child process; returns its wait status, and its stderr in *err.
int inChild(void (*body)(), std::string* err) {
  char path[] = "/tmp/muster-coroutine-testXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child is not a test: no Catch2 signal handler, no report on stdout.
    std::signal(SIGABRT, SIG_DFL);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(fd, 2);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(fd);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  *err = s.str();
  unlink(path);
  return status;
}

TEST_CASE("an exception escaping a coroutine spawned with dieOnException aborts the process",
          "[coroutine]") {
  std::string err;
  int status = inChild(
      [] {
        asio::io_context io;
        asio::co_spawn(io, fails(), dieOnException("scheduling loop"));
        io.run();
      },
      &err);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(err.find("Uncaught exception in a coroutine, aborting") != std::string::npos);
  CHECK(err.find("scheduling loop") != std::string::npos);
  CHECK(err.find("the loop broke") != std::string::npos);
}

TEST_CASE("a coroutine that returns normally, with or without a value, is left alone",
          "[coroutine]") {
  std::string err;
  int status = inChild(
      [] {
        asio::io_context io;
        asio::co_spawn(io, succeeds(), dieOnException("value"));
        asio::co_spawn(io, []() -> asio::awaitable<void> { co_return; }, dieOnException("void"));
        io.run();
      },
      &err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace muster::proto
