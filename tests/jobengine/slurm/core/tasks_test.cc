#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jobengine/slurm/core/tasks.h"

namespace muster::jobengine::slurm {
namespace {

using Counts = std::vector<int>;

std::vector<int> layout(std::vector<int> cpus, int ntasks, int cpus_per_task = 1,
                        std::optional<int> ntasks_per_node = std::nullopt) {
  TaskLayoutRequest r;
  r.ntasks = ntasks;
  r.cpus_per_node = std::move(cpus);
  r.cpus_per_task = cpus_per_task;
  r.ntasks_per_node = ntasks_per_node;
  return blockTaskCounts(r);
}

SrunOptions srun(const std::vector<std::string>& argv) {
  absl::StatusOr<SrunOptions> o = parseSrunArgs(argv);
  REQUIRE(o.ok());
  return *o;
}

TEST_CASE("block distribution front-loads uneven task counts", "[tasks]") {
  CHECK(blockTaskCounts(2, 5, 8) == Counts{3, 2});
  CHECK(blockTaskCounts(3, 7, 8) == Counts{3, 2, 2});
  CHECK(blockTaskCounts(4, 4, 8) == Counts{1, 1, 1, 1});
  CHECK(blockTaskCounts(4, 2, 8) == Counts{1, 1, 0, 0});
  CHECK(blockTaskCounts(2, 16, 8) == Counts{8, 8});
}

TEST_CASE("nodes with fewer CPUs stop taking tasks when they are full", "[tasks]") {
  // The example of slurm_step_layout.c _task_layout_cyclic: CPUs 4 2 4 2.
  CHECK(layout({4, 2, 4, 2}, 12) == Counts{4, 2, 4, 2});
  CHECK(layout({4, 2, 4, 2}, 8) == Counts{2, 2, 2, 2});
  CHECK(layout({4, 2, 4, 2}, 10) == Counts{3, 2, 3, 2});
  // Past every CPU, each node takes one more per round (oversubscription).
  CHECK(layout({4, 2, 4, 2}, 14) == Counts{5, 3, 4, 2});
}

TEST_CASE("cpus-per-task divides the slots of each node", "[tasks]") {
  CHECK(blockTaskCounts(2, 4, 8, 4) == Counts{2, 2});
  CHECK(blockTaskCounts(2, 6, 8, 4) == Counts{3, 3});  // oversubscribed
  CHECK(layout({2, 8}, 3, 4) == Counts{1, 2});         // a node too small for a task still gets one
}

TEST_CASE("a step's ntasks-per-node caps the slots as Slurm computes the cap", "[tasks]") {
  CHECK(layout({4, 1}, 4) == Counts{3, 1});
  CHECK(layout({4, 1}, 4, 1, 1) == Counts{2, 2});
  // _init_task_layout caps at ntasks_per_node * cpus_per_task slots: with -c2 a node of 8 CPUs
  // keeps 2 slots although --ntasks-per-node=1.
  CHECK(layout({8, 2}, 4, 2, 1) == Counts{3, 1});
}

TEST_CASE("zero tasks or no nodes lay out nothing", "[tasks]") {
  CHECK(blockTaskCounts(2, 0, 8) == Counts{0, 0});
  CHECK(blockTaskCounts(0, 3, 8).empty());
}

TEST_CASE("a batch job's task count comes from -n, then ntasks-per-node, then CPUs", "[tasks]") {
  CHECK(batchTaskCount(5, std::nullopt, {8, 8}, 1) == 5);
  CHECK(batchTaskCount(std::nullopt, 4, {8, 8, 8}, 1) == 12);
  CHECK(batchTaskCount(std::nullopt, std::nullopt, {8, 8}, 2) == 8);
  CHECK(batchTaskCount(std::nullopt, std::nullopt, {3, 5}, 2) == 3);
}

TEST_CASE("per-node counts compress runs like SLURM_TASKS_PER_NODE", "[tasks]") {
  CHECK(formatTasksPerNode({2, 2, 2, 1}) == "2(x3),1");
  CHECK(formatTasksPerNode({4}) == "4");
  CHECK(formatTasksPerNode({4, 4}) == "4(x2)");
  CHECK(formatTasksPerNode({1, 2, 1}) == "1,2,1");
  CHECK(formatTasksPerNode({}).empty());
}

TEST_CASE("ranks are numbered node by node", "[tasks]") {
  CHECK(taskPlacements({3, 2}) == std::vector<TaskPlacement>{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}});
  CHECK(taskPlacements({0, 1}) == std::vector<TaskPlacement>{{1, 0}});
  CHECK(taskIdsByNode({3, 2}) == std::vector<std::vector<int>>{{0, 1, 2}, {3, 4}});
}

TEST_CASE("srun -N alone runs one task per node", "[tasks]") {
  absl::StatusOr<StepShape> s = resolveStepShape(srun({"-N2", "a"}), 2);
  REQUIRE(s.ok());
  CHECK(s->nodes == 2);
  CHECK(s->ntasks == 2);
  absl::StatusOr<StepShape> w = resolveStepShape(srun({"-w", "n[1-3],n2", "a"}), 4);
  REQUIRE(w.ok());
  CHECK(w->nodes == 3);
  CHECK(w->ntasks == 3);
}

TEST_CASE("srun -n with -N keeps both and never uses more nodes than tasks", "[tasks]") {
  absl::StatusOr<StepShape> s = resolveStepShape(srun({"-N2", "-n5", "a"}), 2);
  REQUIRE(s.ok());
  CHECK(s->nodes == 2);
  CHECK(s->ntasks == 5);
  absl::StatusOr<StepShape> fewer = resolveStepShape(srun({"-N4", "-n2", "a"}), 4);
  REQUIRE(fewer.ok());
  CHECK(fewer->nodes == 2);
  CHECK(fewer->warnings ==
        std::vector<std::string>{
            "srun: warning: can't run 2 processes on 4 nodes, setting nnodes to 2"});
}

TEST_CASE("srun --ntasks-per-node multiplies the node count", "[tasks]") {
  absl::StatusOr<StepShape> s = resolveStepShape(srun({"-N2", "--ntasks-per-node=4", "a"}), 2);
  REQUIRE(s.ok());
  CHECK(s->ntasks == 8);
  // Open MPI's daemons: one per node on the nodes it names.
  absl::StatusOr<StepShape> ompi = resolveStepShape(
      srun({"--ntasks-per-node=1", "--nodes=2", "--nodelist=h1,h2", "--ntasks=2", "orted"}), 3);
  REQUIRE(ompi.ok());
  CHECK(ompi->nodes == 2);
  CHECK(ompi->ntasks == 2);
}

TEST_CASE("srun without -N spreads its tasks over the allocation", "[tasks]") {
  absl::StatusOr<StepShape> one = resolveStepShape(srun({"a"}), 3);
  REQUIRE(one.ok());
  CHECK(one->ntasks == 1);
  CHECK(one->nodes == 1);
  absl::StatusOr<StepShape> four = resolveStepShape(srun({"-n4", "a"}), 2);
  REQUIRE(four.ok());
  CHECK(four->nodes == 2);
  CHECK(four->ntasks == 4);
}

TEST_CASE("a step cannot ask for more nodes than the job has", "[tasks]") {
  absl::StatusOr<StepShape> s = resolveStepShape(srun({"-N5", "a"}), 2);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() ==
        "srun: error: Unable to create step for job: Requested node configuration is not "
        "available");
}

}  // namespace
}  // namespace muster::jobengine::slurm
