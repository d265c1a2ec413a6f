// The step records srun writes and batch-step hands to the job engine (step_record.h): the steps
// file, ends that never came, the termination message within the kubelet's 4,096 bytes.
#include "jobengine/slurm/core/step_record.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace muster::jobengine::slurm {
namespace {

StepRecord step(uint32_t id, std::string name, int32_t nodes, int32_t tasks, std::string list,
                int64_t start) {
  StepRecord s;
  s.id = id;
  s.name = std::move(name);
  s.nodes = nodes;
  s.tasks = tasks;
  s.cpus = tasks * 2;
  s.node_list = std::move(list);
  s.start = start;
  return s;
}

TEST_CASE("a step's end follows Slurm: a signal wins, a cancel by srun is CANCELLED", "[step_record]") {
  StepRecord s;
  setStepEnd(0, 0, false, &s);
  CHECK((s.state == "COMPLETED" && s.exit_code == "0:0"));
  setStepEnd(3, 0, false, &s);
  CHECK((s.state == "FAILED" && s.exit_code == "3:0"));
  setStepEnd(3, 9, false, &s);
  CHECK((s.state == "FAILED" && s.exit_code == "0:9"));
  setStepEnd(0, 15, true, &s);
  CHECK((s.state == "CANCELLED" && s.exit_code == "0:15"));
}

TEST_CASE("the steps file gives every step once with its end, and a step that never ended was cancelled",
          "[step_record]") {
  StepRecord a = step(0, "hostname", 2, 4, "n[1-2]", 1000);
  StepRecord b = step(1, "python train.py", 1, 1, "n1", 1010);
  StepRecord c = step(2, "sleep", 2, 2, "n[1-2]", 1020);
  std::string file = stepStartLine(a) + stepStartLine(b) + stepEndLine(0, 1005, "0:0", "COMPLETED") +
                     stepStartLine(c) + stepEndLine(1, 1100, "2:0", "FAILED");
  // A torn line from a killed srun, an end without its start and a bad end are skipped.
  file += "end\t9\t1200\t0:0\tCOMPLETED\nend\t2\t1300\tnonsense\tCOMPLETED\nstart\t7\t12";
  std::vector<StepRecord> steps = readStepRecords(file, 2000);
  REQUIRE(steps.size() == 3);
  CHECK((steps[0].id == 0 && steps[0].name == "hostname" && steps[0].state == "COMPLETED" &&
         steps[0].exit_code == "0:0" && steps[0].start == 1000 && steps[0].end == 1005 &&
         steps[0].nodes == 2 && steps[0].tasks == 4 && steps[0].cpus == 8 &&
         steps[0].node_list == "n[1-2]"));
  CHECK((steps[1].name == "python train.py" && steps[1].state == "FAILED" &&
         steps[1].exit_code == "2:0" && steps[1].end == 1100));
  CHECK((steps[2].id == 2 && steps[2].state == "CANCELLED" && steps[2].exit_code == "0:15" &&
         steps[2].end == 2000));
}

TEST_CASE("names and node lists cannot break a record: control characters become '?', long ones are cut",
          "[step_record]") {
  StepRecord s = step(0, std::string("a\tb\nc\x01") + std::string(300, 'x'), 1, 1, "n\t1", 5);
  const std::string line = stepStartLine(s);
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  std::vector<StepRecord> steps = readStepRecords(line + stepEndLine(0, 6, "0:0", "COMPLETED"), 9);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].name.substr(0, 6) == "a?b?c?");
  CHECK(steps[0].name.size() == kStepNameMax);
  CHECK(steps[0].node_list == "n?1");
}

TEST_CASE("the termination message carries the exit code and the steps, within 4096 bytes",
          "[step_record]") {
  // No steps: the exit code alone, as batch-step always wrote it.
  CHECK(terminationMessage("4:0", {}) == "4:0");
  auto plain = parseTerminationMessage("4:0");
  REQUIRE(plain);
  CHECK((plain->exit_code == "4:0" && plain->steps.empty() && plain->omitted == 0));
  CHECK(parseTerminationMessage("0:9\n")->exit_code == "0:9");

  std::vector<StepRecord> steps;
  for (uint32_t i = 0; i < 200; ++i) {
    StepRecord s = step(i, "step-" + std::to_string(i), 4, 32, "slurm-123-0-[0-3]", 1000 + i);
    setStepEnd(i % 7 == 0 ? 1 : 0, 0, false, &s);
    s.end = 1001 + i;
    steps.push_back(s);
  }
  const std::string m = terminationMessage("1:0", steps);
  CHECK(m.size() <= kTerminationMessageMax);
  auto back = parseTerminationMessage(m);
  REQUIRE(back);
  CHECK(back->exit_code == "1:0");
  REQUIRE(back->steps.size() > 20);
  CHECK(back->steps.size() + static_cast<size_t>(back->omitted) == steps.size());
  for (size_t i = 0; i < back->steps.size(); ++i) {
    const StepRecord& x = back->steps[i];
    const StepRecord& y = steps[i];
    CHECK((x.id == y.id && x.name == y.name && x.state == y.state && x.exit_code == y.exit_code &&
           x.start == y.start && x.end == y.end && x.nodes == y.nodes && x.tasks == y.tasks &&
           x.cpus == y.cpus && x.node_list == y.node_list));
  }
  // All of them when the limit allows.
  auto all = parseTerminationMessage(terminationMessage("1:0", steps, 1 << 20));
  CHECK((all->steps.size() == steps.size() && all->omitted == 0));
}

TEST_CASE("times a job writes into its own step records are kept between the epoch and 9999",
          "[step_record]") {
  // The steps file and the termination message are the job's own: it can write any number there.
  auto m = parseTerminationMessage(
      "0:0\nstep\t1\tCOMPLETED\t0:0\t253402300800\t9223372036854775807\t1\t1\t1\tn1\tx\n");
  REQUIRE(m);
  REQUIRE(m->steps.size() == 1);
  CHECK(m->steps[0].start == kMaxStepTime);
  CHECK(m->steps[0].end == kMaxStepTime);
  CHECK(kMaxStepTime == 253402300799);  // 9999-12-31T23:59:59Z
  const std::vector<StepRecord> read = readStepRecords(
      "start\t3\t99999999999999\t1\t1\t1\tn1\tx\nend\t3\t99999999999999\t0:0\tCOMPLETED\n", 5);
  REQUIRE(read.size() == 1);
  CHECK(read[0].start == kMaxStepTime);
  CHECK(read[0].end == kMaxStepTime);
}

TEST_CASE("a termination message batch-step did not write is not read as one", "[step_record]") {
  CHECK_FALSE(parseTerminationMessage(""));
  CHECK_FALSE(parseTerminationMessage("out of memory"));
  CHECK_FALSE(parseTerminationMessage("panic: 1:2"));
  CHECK_FALSE(parseTerminationMessage(":0"));
  // Lines after a good first line that are not records are ignored.
  auto m = parseTerminationMessage("0:0\nstep\t1\tWEIRD\t0:0\t1\t2\t1\t1\t1\tn1\tx\nhello\n");
  REQUIRE(m);
  CHECK(m->steps.empty());
}

}  // namespace
}  // namespace muster::jobengine::slurm
