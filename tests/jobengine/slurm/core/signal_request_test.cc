// scancel --signal's request as it travels to the batch step (signal_request.h).
#include "jobengine/slurm/core/signal_request.h"

#include <catch2/catch.hpp>

#include <csignal>

namespace muster::jobengine::slurm {
namespace {

TEST_CASE("signal names are read as scancel reads them: with or without SIG, any case, or a number",
          "[slurm]") {
  CHECK(parseSignalName("USR1") == SIGUSR1);
  CHECK(parseSignalName("SIGUSR2") == SIGUSR2);
  CHECK(parseSignalName("term") == SIGTERM);
  CHECK(parseSignalName("SigKill") == SIGKILL);
  CHECK(parseSignalName("10") == 10);
  CHECK(parseSignalName("64") == 64);
  CHECK_FALSE(parseSignalName("0"));
  CHECK_FALSE(parseSignalName("65"));
  CHECK_FALSE(parseSignalName("USR3"));
  CHECK_FALSE(parseSignalName(""));
  CHECK_FALSE(parseSignalName("SIG"));
  CHECK_FALSE(parseSignalName("-9"));
}

TEST_CASE("a signal request survives its trip through the annotation and the file, and nothing "
          "else is read as one",
          "[slurm]") {
  const SignalRequest r{7, SIGUSR1, "batch"};
  CHECK(formatSignalRequest(r) == "7:10:batch");
  CHECK(parseSignalRequest("7:10:batch") == r);
  CHECK(parseSignalRequest("7:10:batch\n") == r);
  CHECK(parseSignalRequest("1:12:steps")->target == "steps");
  CHECK(parseSignalRequest("2:15:full")->number == SIGTERM);
  CHECK_FALSE(parseSignalRequest(""));
  CHECK_FALSE(parseSignalRequest("0:10:batch"));    // seq counts from 1
  CHECK_FALSE(parseSignalRequest("1:0:batch"));
  CHECK_FALSE(parseSignalRequest("1:99:batch"));
  CHECK_FALSE(parseSignalRequest("1:10:everyone"));
  CHECK_FALSE(parseSignalRequest("1:10"));
  CHECK_FALSE(parseSignalRequest("1:10:batch:x"));
  CHECK_FALSE(parseSignalRequest("-1:10:batch"));
  CHECK_FALSE(parseSignalRequest("99999999999999999999:10:batch"));
}

}  // namespace
}  // namespace muster::jobengine::slurm
