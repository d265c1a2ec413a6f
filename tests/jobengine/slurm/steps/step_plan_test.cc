#include "jobengine/slurm/steps/step_plan.h"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "jobengine/slurm/core/env.h"
#include "jobengine/slurm/core/options.h"
#include "jobengine/slurm/core/tasks.h"

namespace muster::jobengine::slurm {
namespace {

// The batch environment the engine gives node 0 of a job (env.h's batchEnvironment), plus
// what a user's submission environment typically holds.
Environment batchEnv(int nodes, std::optional<int> ntasks, std::optional<int> ntasks_per_node,
                     int cpus = 8, std::optional<int> cpus_per_task = std::nullopt) {
  JobEnvironmentInput job;
  job.job_id = 4242;
  job.job_name = "train";
  for (int i = 0; i < nodes; ++i) job.node_names.push_back("n" + std::to_string(i + 1));
  job.cpus_per_node.assign(static_cast<size_t>(nodes), cpus);
  job.ntasks = ntasks;
  job.ntasks_per_node = ntasks_per_node;
  job.cpus_per_task = cpus_per_task;
  int total = batchTaskCount(ntasks, ntasks_per_node, job.cpus_per_node, cpus_per_task.value_or(1));
  TaskLayoutRequest layout;
  layout.ntasks = total;
  layout.cpus_per_node = job.cpus_per_node;
  layout.cpus_per_task = cpus_per_task.value_or(1);
  job.tasks_per_node = blockTaskCounts(layout);
  job.submit_dir = "/home/user/project";
  Environment env = batchEnvironment(job, 0);
  env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  env["HOME"] = "/home/user";
  env["OMPI_MCA_foo"] = "bar";
  return env;
}

absl::StatusOr<StepPlan> plan(const Environment& env, const std::vector<std::string>& argv,
                              uint32_t step_id = 0) {
  absl::StatusOr<SrunOptions> from_env = srunOptionsFromEnvironment(env);
  REQUIRE(from_env.ok());
  absl::StatusOr<SrunOptions> cli = parseSrunArgs(argv);
  REQUIRE(cli.ok());
  absl::StatusOr<Allocation> alloc = allocationFromEnvironment(env);
  REQUIRE(alloc.ok());
  StepPlanInput input;
  input.options = mergeSrunOptions(*from_env, *cli);
  input.allocation = *alloc;
  input.step_id = step_id;
  input.environment = env;
  input.cwd = "/home/user/project";
  return planStep(input);
}

// Every task of the plan with its full environment, by procid.
std::map<int, Environment> tasksOf(const StepPlan& p) {
  std::map<int, Environment> out;
  for (const StepRequest& r : p.requests) {
    for (const StepTaskSpec& t : r.tasks) {
      REQUIRE(out.count(static_cast<int>(t.procid)) == 0);
      out[static_cast<int>(t.procid)] = taskEnvironment(r, t);
    }
  }
  return out;
}

TEST_CASE("count lists read back what formatTasksPerNode writes", "[step_plan]") {
  CHECK(*parseCountList("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(*parseCountList("8") == std::vector<int>{8});
  CHECK(*parseCountList(formatTasksPerNode({4, 4, 1, 3, 3})) == std::vector<int>{4, 4, 1, 3, 3});
  CHECK_FALSE(parseCountList("").ok());
  CHECK_FALSE(parseCountList("2(x)").ok());
  CHECK_FALSE(parseCountList("2(3)").ok());
  CHECK_FALSE(parseCountList("a").ok());
  CHECK_FALSE(parseCountList("1(x99999999999)").ok());
}

TEST_CASE("the allocation is read from the batch environment the engine sets", "[step_plan]") {
  absl::StatusOr<Allocation> a = allocationFromEnvironment(batchEnv(3, 6, std::nullopt));
  REQUIRE(a.ok());
  CHECK(a->job_id == 4242);
  CHECK(a->nodes == std::vector<std::string>{"n1", "n2", "n3"});
  CHECK(a->cpus_per_node == std::vector<int>{8, 8, 8});
  CHECK(a->tasks_per_node == std::vector<int>{2, 2, 2});

  Environment no_nodes = batchEnv(1, 1, std::nullopt);
  no_nodes.erase("SLURM_JOB_NODELIST");
  no_nodes.erase("SLURM_NODELIST");
  absl::StatusOr<Allocation> bad = allocationFromEnvironment(no_nodes);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "srun: error: SLURM_JOB_NODELIST is not set");
}

TEST_CASE("srun -n 6 in a 3-node job gives every rank 0..5 once, 2 per node", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, 6, std::nullopt), {"-n", "6", "hostname"}, 3);
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n1", "n2", "n3"});
  CHECK(p->tasks_per_node == std::vector<int>{2, 2, 2});
  std::map<int, Environment> tasks = tasksOf(*p);
  REQUIRE(tasks.size() == 6);
  for (int procid = 0; procid < 6; ++procid) {
    const Environment& e = tasks[procid];
    INFO("procid " << procid);
    CHECK(e.at("SLURM_PROCID") == std::to_string(procid));
    CHECK(e.at("SLURM_LOCALID") == std::to_string(procid % 2));
    CHECK(e.at("SLURM_NODEID") == std::to_string(procid / 2));
    CHECK(e.at("SLURMD_NODENAME") == "n" + std::to_string(procid / 2 + 1));
    CHECK(e.at("SLURM_STEP_ID") == "3");
    CHECK(e.at("SLURM_STEPID") == "3");
    CHECK(e.at("SLURM_STEP_NODELIST") == "n[1-3]");
    CHECK(e.at("SLURM_STEP_NUM_NODES") == "3");
    CHECK(e.at("SLURM_STEP_NUM_TASKS") == "6");
    CHECK(e.at("SLURM_STEP_TASKS_PER_NODE") == "2(x3)");
    CHECK(e.at("SLURM_JOB_ID") == "4242");
    // srun's own environment comes along.
    CHECK(e.at("OMPI_MCA_foo") == "bar");
    CHECK(e.at("PATH") == "/usr/local/bin:/usr/bin:/bin");
  }
  for (const StepRequest& r : p->requests) {
    CHECK(r.job_id == 4242);
    CHECK(r.step_id == 3);
    CHECK(r.argv == std::vector<std::string>{"hostname"});
    CHECK(r.cwd == "/home/user/project");
  }
  CHECK(p->requests[1].node_id == 1);
  CHECK(p->requests[1].node_name == "n2");
}

TEST_CASE("a bare srun uses the job's task count and every node", "[step_plan]") {
  // sbatch -N3 -n6: SLURM_NTASKS and SLURM_JOB_NUM_NODES are srun's -n and -N.
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, 6, std::nullopt), {"true"});
  REQUIRE(p.ok());
  CHECK(p->ntasks == 6);
  CHECK(p->tasks_per_node == std::vector<int>{2, 2, 2});
  // sbatch -N3 --ntasks-per-node=4.
  p = plan(batchEnv(3, std::nullopt, 4), {"true"});
  REQUIRE(p.ok());
  CHECK(p->tasks_per_node == std::vector<int>{4, 4, 4});
  // sbatch -N3 alone: no task count is known, one task per node (srun_job.c _set_ntasks).
  p = plan(batchEnv(3, std::nullopt, std::nullopt), {"true"});
  REQUIRE(p.ok());
  CHECK(p->tasks_per_node == std::vector<int>{1, 1, 1});
  // sbatch -N2 -n5: the block layout front-loads the first node.
  p = plan(batchEnv(2, 5, std::nullopt), {"true"});
  REQUIRE(p.ok());
  CHECK(p->tasks_per_node == std::vector<int>{3, 2});
}

TEST_CASE("srun -N1 -n1 -w picks exactly that node", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, 6, std::nullopt), {"-N1", "-n1", "-w", "n2", "hostname"});
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n2"});
  std::map<int, Environment> tasks = tasksOf(*p);
  REQUIRE(tasks.size() == 1);
  CHECK(tasks[0].at("SLURMD_NODENAME") == "n2");
  CHECK(tasks[0].at("SLURM_NODEID") == "0");
  CHECK(tasks[0].at("SLURM_STEP_NODELIST") == "n2");
}

TEST_CASE("srun -w with the inherited node count keeps the named node and fills up", "[step_plan]") {
  // SLURM_JOB_NUM_NODES=3 is -N3, as in Slurm: -w n3 only makes n3 a member.
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, std::nullopt, std::nullopt), {"-w", "n3", "true"});
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n1", "n2", "n3"});
  p = plan(batchEnv(4, std::nullopt, std::nullopt), {"-N2", "-w", "n3", "true"});
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n1", "n3"});
}

TEST_CASE("a -w node outside the allocation is Slurm's step creation error", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, 6, std::nullopt), {"-N1", "-w", "n9", "true"});
  REQUIRE_FALSE(p.ok());
  CHECK(std::string(p.status().message()) ==
        "srun: error: Unable to create step for job 4242: Requested node configuration is not "
        "available");
  // Asking for more nodes than the job has.
  p = plan(batchEnv(2, 2, std::nullopt), {"-N3", "-n3", "true"});
  REQUIRE_FALSE(p.ok());
  CHECK(std::string(p.status().message()).find("Unable to create step for job 4242") !=
        std::string::npos);
}

TEST_CASE("fewer tasks than nodes lowers the node count with Slurm's warning", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, 2, std::nullopt), {"true"});
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(p->warnings ==
        std::vector<std::string>{"srun: warning: can't run 2 processes on 3 nodes, setting nnodes to 2"});
}

TEST_CASE("srun -x leaves the excluded nodes out of the step", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(3, std::nullopt, std::nullopt), {"-N2", "-x", "n1", "true"});
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n2", "n3"});
  CHECK(tasksOf(*p)[0].at("SLURMD_NODENAME") == "n2");
  CHECK_FALSE(plan(batchEnv(3, 6, std::nullopt), {"-N1", "-w", "n1", "-x", "n1", "true"}).ok());
}

TEST_CASE("Open MPI 4.1's orted launch line runs one orted on each named node", "[step_plan]") {
  // plm_slurm_module.c launch_daemons, for the nodes other than mpirun's own.
  const std::vector<std::string> orted = {
      "orted", "-mca", "ess", "\"slurm\"", "-mca", "ess_base_jobid", "\"3351576576\"", "-mca",
      "orte_hnp_uri", "\"3351576576.0;tcp://10.0.0.1,172.17.0.2:41469\""};
  std::vector<std::string> argv = {"--ntasks-per-node=1", "--kill-on-bad-exit",
                                   "--cpu_bind=none",     "--nodes=2",
                                   "--nodelist=n2,n3",    "--ntasks=2"};
  argv.insert(argv.end(), orted.begin(), orted.end());
  Environment env = batchEnv(3, 6, std::nullopt);
  env["SLURM_CPU_BIND"] = "none";
  absl::StatusOr<StepPlan> p = plan(env, argv);
  REQUIRE(p.ok());
  CHECK(p->nodes == std::vector<std::string>{"n2", "n3"});
  CHECK(p->tasks_per_node == std::vector<int>{1, 1});
  for (const StepRequest& r : p->requests) {
    CHECK(r.argv == orted);
    CHECK(r.kill_on_bad_exit);
  }
  std::map<int, Environment> tasks = tasksOf(*p);
  // ess/slurm computes each orted's vpid from SLURM_NODEID and names its node SLURMD_NODENAME.
  CHECK(tasks[0].at("SLURM_NODEID") == "0");
  CHECK(tasks[0].at("SLURMD_NODENAME") == "n2");
  CHECK(tasks[1].at("SLURM_NODEID") == "1");
  CHECK(tasks[1].at("SLURMD_NODENAME") == "n3");
  // PRRTE's variant.
  p = plan(env, {"--external-launcher", "--mpi=none", "--ntasks-per-node=1", "--nodes=3",
                 "--ntasks=3", "prted"});
  REQUIRE(p.ok());
  CHECK(p->tasks_per_node == std::vector<int>{1, 1, 1});
}

TEST_CASE("srun --export=NONE gives the tasks only the SLURM variables", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(1, 1, std::nullopt), {"--export=NONE", "/bin/true"});
  REQUIRE(p.ok());
  Environment e = tasksOf(*p)[0];
  CHECK(e.count("PATH") == 0);
  CHECK(e.count("OMPI_MCA_foo") == 0);
  CHECK(e.at("SLURM_JOB_ID") == "4242");
  CHECK(e.at("SLURM_GET_USER_ENV") == "1");
  p = plan(batchEnv(1, 1, std::nullopt), {"--export=HOME,EXTRA=1", "/bin/true"});
  REQUIRE(p.ok());
  e = tasksOf(*p)[0];
  CHECK(e.at("HOME") == "/home/user");
  CHECK(e.at("EXTRA") == "1");
  CHECK(e.count("PATH") == 0);
}

TEST_CASE("srun -D, -c and --gpus-per-task shape the tasks' environment", "[step_plan]") {
  Environment env = batchEnv(2, 4, std::nullopt);
  env["SLURM_JOB_GPUS"] = "0,1,2,3";
  absl::StatusOr<StepPlan> p =
      plan(env, {"-D", "/scratch", "-c", "2", "--gpus-per-task=2", "-n", "4", "python", "x.py"});
  REQUIRE(p.ok());
  CHECK(p->tasks_per_node == std::vector<int>{2, 2});
  for (const StepRequest& r : p->requests) CHECK(r.cwd == "/scratch");
  std::map<int, Environment> tasks = tasksOf(*p);
  CHECK(tasks[0].at("SLURM_CPUS_PER_TASK") == "2");
  CHECK(tasks[0].at("CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK(tasks[1].at("CUDA_VISIBLE_DEVICES") == "2,3");
  CHECK(tasks[2].at("CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK(tasks[3].at("CUDA_VISIBLE_DEVICES") == "2,3");
}

TEST_CASE("the label and kill-on-bad-exit flags reach every node's request", "[step_plan]") {
  absl::StatusOr<StepPlan> p = plan(batchEnv(2, 2, std::nullopt), {"-l", "-K", "true"});
  REQUIRE(p.ok());
  for (const StepRequest& r : p->requests) {
    CHECK(r.label);
    CHECK(r.kill_on_bad_exit);
  }
  Environment env = batchEnv(2, 2, std::nullopt);
  env["SLURM_KILL_BAD_EXIT"] = "1";
  p = plan(env, {"true"});
  REQUIRE(p.ok());
  CHECK(p->requests[0].kill_on_bad_exit);
}

}  // namespace
}  // namespace muster::jobengine::slurm
