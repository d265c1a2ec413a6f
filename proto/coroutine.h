#pragma once

// Spawning coroutines that must not fail silently.
//
// asio::detached swallows an exception that escapes a coroutine: the scheduling loop could die
// while the process keeps its leader lease and /healthz stays green. Every co_spawn in Muster
// uses dieOnException(what) instead: such an exception is a bug, so it is logged (with `what`,
// the coroutine's job) and the process aborts. Kubernetes restarts it, the lease passes to a
// standby, and nothing half-done is left running.
//
//   asio::co_spawn(strand_, loop(), proto::dieOnException("scheduling loop"));

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "proto/log.h"

namespace muster::proto {

class DieOnException {
 public:
  explicit DieOnException(std::string what) : what_(std::move(what)) {}

  template <class... Results>
  void operator()(std::exception_ptr error, Results&&...) const {
    if (!error) return;
    std::string message = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    MUSTER_LOG_ERROR("Uncaught exception in a coroutine, aborting", "coroutine", what_, "error",
                     message);
    std::fflush(nullptr);
    std::abort();
  }

 private:
  std::string what_;
};

inline DieOnException dieOnException(std::string what) { return DieOnException(std::move(what)); }

}  // namespace muster::proto
