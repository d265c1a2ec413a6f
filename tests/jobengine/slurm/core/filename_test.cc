#include <catch2/catch.hpp>

#include <string>

#include "jobengine/slurm/core/filename.h"

namespace muster::jobengine::slurm {
namespace {

FilenameContext job() {
  FilenameContext c;
  c.job_id = 123;
  c.node_name = "n1.cluster.local";
  c.node_id = 3;
  c.task_id = 5;
  c.restart_count = 2;
  c.user = "alice";
  c.job_name = "train";
  return c;
}

FilenameContext arrayTask() {
  FilenameContext c = job();
  c.job_id = 130;
  c.array_job_id = 100;
  c.array_task_id = 17;
  return c;
}

std::string expand(std::string_view pattern, const FilenameContext& c = job()) {
  return expandFilenamePattern(pattern, c);
}

TEST_CASE("the default output names are sbatch's", "[filename]") {
  CHECK(defaultOutputPattern(false) == "slurm-%j.out");
  CHECK(defaultOutputPattern(true) == "slurm-%A_%a.out");
  CHECK(expand(defaultOutputPattern(false)) == "slurm-123.out");
  CHECK(expand(defaultOutputPattern(true), arrayTask()) == "slurm-100_17.out");
}

TEST_CASE("every documented letter expands", "[filename]") {
  CHECK(expand("%j") == "123");
  CHECK(expand("%J") == "123");  // the batch step has no ".step"
  CHECK(expand("%s") == "batch");
  CHECK(expand("%N") == "n1");   // the short name
  CHECK(expand("%n") == "3");
  CHECK(expand("%t") == "5");
  CHECK(expand("%u") == "alice");
  CHECK(expand("%x") == "train");
  CHECK(expand("%r") == "2");
  CHECK(expand("%A") == "123");  // not an array: the job id
  CHECK(expand("%a") == "4294967294");  // not an array: Slurm prints NO_VAL
  CHECK(expand("%a_%b", arrayTask()) == "17_7");
  FilenameContext step = job();
  step.step_id = 2;
  CHECK(expand("%J-%s", step) == "123.2-2");
}

TEST_CASE("a number after % zero-pads numbers up to ten digits", "[filename]") {
  // sbatch.1: job%4j.out -> job0128.out; job%2j-%2t.out -> job128-00.out.
  CHECK(expand("job%4j.out") == "job0123.out");
  CHECK(expand("job%2j-%2t.out") == "job123-05.out");
  CHECK(expand("%10j") == "0000000123");
  CHECK(expand("%12j") == "0000000123");  // more than 9 means 10
  CHECK(expand("%3a", arrayTask()) == "017");
  CHECK(expand("%4x-%8u-%6N") == "train-alice-n1");  // text is not padded
  FilenameContext step = job();
  step.step_id = 1;
  CHECK(expand("%6J", step) == "000123.1");
}

TEST_CASE("%% is a percent sign and unknown letters stay as written", "[filename]") {
  CHECK(expand("100%%-%j") == "100%-123");
  CHECK(expand("%q") == "%q");
  CHECK(expand("%5q-%j") == "%5q-123");
  CHECK(expand("a%") == "a");  // a final % is dropped
  CHECK(expand("a%5") == "a%5");
}

TEST_CASE("a backslash turns expansion off and is removed", "[filename]") {
  CHECK(expand("out\\_%j.txt") == "out_%j.txt");
  CHECK(expand("a\\\\b%%") == "ab%%");
}

TEST_CASE("relative names go under the working directory", "[filename]") {
  FilenameContext c = job();
  c.work_dir = "/home/alice";
  CHECK(expand("slurm-%j.out", c) == "/home/alice/slurm-123.out");
  CHECK(expand("/tmp/%j.out", c) == "/tmp/123.out");
  c.work_dir = "/home/alice/";
  CHECK(expand("x", c) == "/home/alice/x");
  CHECK(expand("", c).empty());
}

TEST_CASE("srun's own pass leaves the per-task letters alone", "[filename]") {
  FilenameContext c = job();
  c.srun = true;
  c.work_dir = "/home/alice";
  CHECK(expand("%j-%N-%t-%4t-%u-%n.out", c) == "123-%N-%t-%4t-%u-%n.out");
}

TEST_CASE("srun's special output values", "[filename]") {
  CHECK(classifySrunIo(std::nullopt, 4).kind == SrunIo::Kind::kAll);
  CHECK(classifySrunIo("all", 4).kind == SrunIo::Kind::kAll);
  CHECK(classifySrunIo("-", 4).kind == SrunIo::Kind::kAll);
  CHECK(classifySrunIo("NONE", 4).kind == SrunIo::Kind::kNone);
  SrunIo one = classifySrunIo("2", 4);
  CHECK(one.kind == SrunIo::Kind::kOneTask);
  CHECK(one.task_id == 2);
  CHECK(classifySrunIo("4", 4).kind == SrunIo::Kind::kFile);  // not a task: a file named "4"
  SrunIo shared = classifySrunIo("out-%j.txt", 4);
  CHECK(shared.kind == SrunIo::Kind::kFile);
  CHECK_FALSE(shared.per_task);
  CHECK(classifySrunIo("out-%t.txt", 4).per_task);
  CHECK(classifySrunIo("out-%3N.txt", 4).per_task);
  CHECK_FALSE(classifySrunIo("out-%%t.txt", 4).per_task);
  CHECK_FALSE(classifySrunIo("out\\-%t.txt", 4).per_task);
}

}  // namespace
}  // namespace muster::jobengine::slurm
