// dieOnException: an exception escaping a spawned coroutine ends the process (never swallowed
// as asio::detached would), after logging what failed. forEachConcurrently: every item once, at
// most `limit` at once, and the wait ends after the last.
#include "proto/coroutine.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "proto/asio.h"
#include "proto/concurrently.h"

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

TEST_CASE("forEachConcurrently runs every item once, at most limit at a time, and returns after "
          "the last", "[coroutine]") {
  for (const size_t limit : {size_t{0}, size_t{1}, size_t{3}, size_t{32}}) {
    CAPTURE(limit);
    asio::io_context io;
    auto strand = asio::make_strand(io.get_executor());
    auto owner = std::make_shared<int>(0);  // captured by value: released once per copy
    std::vector<int> seen;
    size_t in_flight = 0, most = 0, done_when_returned = 0;
    bool returned = false;
    asio::co_spawn(
        strand,
        [&, owner]() -> asio::awaitable<void> {
          std::vector<int> items(10);
          for (int i = 0; i < 10; ++i) items[i] = i;
          auto fn = [&, owner](const int& item) -> asio::awaitable<void> {
            most = std::max(most, ++in_flight);
            asio::steady_timer t(co_await asio::this_coro::executor,
                                 std::chrono::milliseconds(1 + item % 3));
            co_await t.async_wait(asio::use_awaitable);
            --in_flight;
            seen.push_back(item);
          };
          co_await forEachConcurrently(strand, std::move(items), limit, std::move(fn));
          done_when_returned = seen.size();
          returned = true;
          // Empty: returns at once.
          auto none = [](const int&) -> asio::awaitable<void> { co_return; };
          std::vector<int> empty;
          co_await forEachConcurrently(strand, std::move(empty), limit, std::move(none));
        },
        dieOnException("test"));
    io.run();
    REQUIRE(returned);
    CHECK(done_when_returned == 10);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK(most == std::min<size_t>(std::max<size_t>(limit, 1), 10));
    CHECK(in_flight == 0);
    // Every copy of `owner` the coroutines made was released exactly once.
    CHECK(owner.use_count() == 1);
  }
}

}  // namespace
}  // namespace muster::proto
