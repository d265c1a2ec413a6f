#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jobengine/slurm/core/env.h"

namespace muster::jobengine::slurm {
namespace {

// PyTorch minGPT-ddp's sbatch_run.sh: --nodes=4 --ntasks=4 --gpus-per-task=1 --cpus-per-task=4.
JobEnvironmentInput minGpt() {
  JobEnvironmentInput j;
  j.job_id = 42;
  j.job_name = "multinode-example";
  j.node_names = {"n1", "n2", "n3", "n4"};
  j.cpus_per_node = {4, 4, 4, 4};
  j.tasks_per_node = {1, 1, 1, 1};
  j.ntasks = 4;
  j.cpus_per_task = 4;
  j.gpus_per_task = GpuRequest{std::nullopt, 1};
  j.gpus_on_node = {{0}, {0}, {0}, {0}};
  j.partition = "gpu";
  j.submit_dir = "/home/alice/mingpt";
  j.submit_host = "login0";
  j.cluster_name = "muster";
  return j;
}

// Two nodes of eight CPUs and four GPUs each.
JobEnvironmentInput twoNodes() {
  JobEnvironmentInput j;
  j.job_id = 7;
  j.job_name = "train";
  j.node_names = {"n1", "n2"};
  j.cpus_per_node = {8, 8};
  j.tasks_per_node = {3, 2};
  j.ntasks = 5;
  j.gpus_on_node = {{0, 1, 2, 3}, {0, 1, 2, 3}};
  j.cluster_name = "muster";
  return j;
}

bool has(const Environment& env, const std::string& name) { return env.count(name) > 0; }

TEST_CASE("the batch script sees the job's Slurm variables", "[env]") {
  Environment env = batchEnvironment(minGpt());
  CHECK(env.at("SLURM_JOB_ID") == "42");
  CHECK(env.at("SLURM_JOBID") == "42");
  CHECK(env.at("SLURM_JOB_NAME") == "multinode-example");
  CHECK(env.at("SLURM_JOB_NODELIST") == "n[1-4]");
  CHECK(env.at("SLURM_NODELIST") == "n[1-4]");
  CHECK(env.at("SLURM_JOB_NUM_NODES") == "4");
  CHECK(env.at("SLURM_NNODES") == "4");
  CHECK(env.at("SLURM_NTASKS") == "4");
  CHECK(env.at("SLURM_NPROCS") == "4");
  CHECK(env.at("SLURM_TASKS_PER_NODE") == "1(x4)");
  CHECK(env.at("SLURM_JOB_CPUS_PER_NODE") == "4(x4)");
  CHECK(env.at("SLURM_CPUS_PER_TASK") == "4");
  CHECK(env.at("SLURM_CPUS_ON_NODE") == "4");
  CHECK(env.at("SLURM_GPUS_PER_TASK") == "1");
  CHECK(env.at("SLURM_GPUS_ON_NODE") == "1");
  CHECK(env.at("SLURM_JOB_GPUS") == "0");
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0");
  CHECK(env.at("SLURM_JOB_PARTITION") == "gpu");
  CHECK(env.at("SLURM_SUBMIT_DIR") == "/home/alice/mingpt");
  CHECK(env.at("SLURM_SUBMIT_HOST") == "login0");
  CHECK(env.at("SLURM_RESTART_COUNT") == "0");  // always set for batch jobs
  CHECK(env.at("SLURMD_NODENAME") == "n1");
  CHECK(env.at("HOSTNAME") == "n1");
  CHECK(env.at("SLURM_NODEID") == "0");
  CHECK(env.at("SLURM_PROCID") == "0");
  CHECK(env.at("SLURM_LOCALID") == "0");
  CHECK(env.at("SLURM_CLUSTER_NAME") == "muster");
  CHECK(env.at("ENVIRONMENT") == "BATCH");
  // Only when given.
  CHECK_FALSE(has(env, "SLURM_NTASKS_PER_NODE"));
  CHECK_FALSE(has(env, "SLURM_GPUS"));
  CHECK_FALSE(has(env, "SLURM_ARRAY_JOB_ID"));
  CHECK_FALSE(has(env, "SLURM_MEM_PER_NODE"));
  CHECK_FALSE(has(env, "SLURM_EXPORT_ENV"));
}

TEST_CASE("the task count comes from -n or ntasks-per-node times the nodes", "[env]") {
  JobEnvironmentInput j = twoNodes();
  j.ntasks.reset();
  j.ntasks_per_node = 4;
  Environment env = batchEnvironment(j);
  CHECK(env.at("SLURM_NTASKS") == "8");
  CHECK(env.at("SLURM_NTASKS_PER_NODE") == "4");
  j.ntasks_per_node.reset();
  Environment none = batchEnvironment(j);
  CHECK_FALSE(has(none, "SLURM_NTASKS"));
  CHECK_FALSE(has(none, "SLURM_NPROCS"));
}

TEST_CASE("the task count of many nodes times many tasks per node does not wrap around", "[env]") {
  JobEnvironmentInput j = twoNodes();
  j.ntasks.reset();
  j.ntasks_per_node = 1 << 30;
  j.node_names = {"n1", "n2", "n3", "n4"};
  Environment env = batchEnvironment(j);
  CHECK(env.at("SLURM_NTASKS") == "4294967296");
  CHECK(env.at("SLURM_NPROCS") == "4294967296");
}

TEST_CASE("another node index gives that node's view", "[env]") {
  JobEnvironmentInput j = twoNodes();
  j.cpus_per_node = {8, 6};
  Environment env = batchEnvironment(j, 1);
  CHECK(env.at("SLURMD_NODENAME") == "n2");
  CHECK(env.at("SLURM_NODEID") == "1");
  CHECK(env.at("SLURM_CPUS_ON_NODE") == "6");
  CHECK(env.at("SLURM_JOB_CPUS_PER_NODE") == "8,6");
}

TEST_CASE("array, memory, GPU, export and identity variables appear when known", "[env]") {
  JobEnvironmentInput j = twoNodes();
  j.array = ArrayEnvironment{100, 3, 16, 0, 15, 1};
  j.mem_per_node_mb = 4096;
  j.gpus = GpuRequest{"a100", 8};
  j.gpus_per_node = GpuRequest{std::nullopt, 4};
  j.export_env = parseExportSpec("NONE");
  j.account = "proj";
  j.qos = "high";
  j.dependency = "afterok:5";
  j.restart_count = 2;
  j.user = "alice";
  j.uid = 1000;
  j.gid = 100;
  j.start_time = absl::FromUnixSeconds(1700000000);
  Environment env = batchEnvironment(j);
  CHECK(env.at("SLURM_ARRAY_JOB_ID") == "100");
  CHECK(env.at("SLURM_ARRAY_TASK_ID") == "3");
  CHECK(env.at("SLURM_ARRAY_TASK_COUNT") == "16");
  CHECK(env.at("SLURM_ARRAY_TASK_MIN") == "0");
  CHECK(env.at("SLURM_ARRAY_TASK_MAX") == "15");
  CHECK(env.at("SLURM_ARRAY_TASK_STEP") == "1");
  CHECK(env.at("SLURM_MEM_PER_NODE") == "4096");
  CHECK(env.at("SLURM_GPUS") == "a100:8");
  CHECK(env.at("SLURM_GPUS_PER_NODE") == "4");
  CHECK(env.at("SLURM_GPUS_ON_NODE") == "4");
  CHECK(env.at("SLURM_JOB_GPUS") == "0,1,2,3");
  CHECK(env.at("SLURM_EXPORT_ENV") == "NONE");
  CHECK(env.at("SLURM_JOB_ACCOUNT") == "proj");
  CHECK(env.at("SLURM_JOB_QOS") == "high");
  CHECK(env.at("SLURM_JOB_DEPENDENCY") == "afterok:5");
  CHECK(env.at("SLURM_RESTART_COUNT") == "2");
  CHECK(env.at("SLURM_JOB_USER") == "alice");
  CHECK(env.at("SLURM_JOB_UID") == "1000");
  CHECK(env.at("SLURM_JOB_GID") == "100");
  CHECK(env.at("SLURM_JOB_START_TIME") == "1700000000");
  j.mem_per_cpu_mb = 512;
  Environment per_cpu = batchEnvironment(j);
  CHECK(per_cpu.at("SLURM_MEM_PER_CPU") == "512");
  CHECK_FALSE(has(per_cpu, "SLURM_MEM_PER_NODE"));
}

TEST_CASE("a task of a step gets its rank, node and the step's shape", "[env]") {
  StepEnvironmentInput step;
  step.step_id = 0;
  step.node_indices = {0, 1};
  step.tasks_per_node = {3, 2};
  step.cpus_per_task = 2;
  Environment env = stepTaskEnvironment(twoNodes(), step, 4);
  CHECK(env.at("SLURM_STEP_ID") == "0");
  CHECK(env.at("SLURM_STEPID") == "0");
  CHECK(env.at("SLURM_PROCID") == "4");
  CHECK(env.at("SLURM_LOCALID") == "1");
  CHECK(env.at("SLURM_NODEID") == "1");
  CHECK(env.at("SLURM_STEP_PROCID") == "4");
  CHECK(env.at("SLURM_STEP_LOCALID") == "1");
  CHECK(env.at("SLURM_STEP_NODEID") == "1");
  CHECK(env.at("SLURMD_NODENAME") == "n2");
  CHECK(env.at("SLURM_STEP_NODELIST") == "n[1-2]");
  CHECK(env.at("SLURM_STEP_NUM_NODES") == "2");
  CHECK(env.at("SLURM_STEP_NUM_TASKS") == "5");
  CHECK(env.at("SLURM_STEP_TASKS_PER_NODE") == "3,2");
  CHECK(env.at("SLURM_TASKS_PER_NODE") == "3,2");
  CHECK(env.at("SLURM_NTASKS") == "5");
  CHECK(env.at("SLURM_NPROCS") == "5");
  CHECK(env.at("SLURM_NNODES") == "2");
  CHECK(env.at("SLURM_GTIDS") == "3,4");
  CHECK(env.at("SLURM_CPUS_PER_TASK") == "2");
  CHECK(env.at("SLURM_CPUS_ON_NODE") == "8");
  CHECK(env.at("SLURM_STEP_GPUS") == "0,1,2,3");
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0,1,2,3");  // no --gpus-per-task: all of them
}

TEST_CASE("with --gpus-per-task each local task gets its own slice of the node's GPUs", "[env]") {
  StepEnvironmentInput step;
  step.node_indices = {0, 1};
  step.tasks_per_node = {3, 2};
  step.gpus_per_task = GpuRequest{std::nullopt, 1};
  CHECK(stepTaskEnvironment(twoNodes(), step, 0).at("CUDA_VISIBLE_DEVICES") == "0");
  CHECK(stepTaskEnvironment(twoNodes(), step, 2).at("CUDA_VISIBLE_DEVICES") == "2");
  CHECK(stepTaskEnvironment(twoNodes(), step, 4).at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK(stepTaskEnvironment(twoNodes(), step, 4).at("SLURM_GPUS_PER_TASK") == "1");
  step.gpus_per_task = GpuRequest{std::nullopt, 2};
  CHECK(stepTaskEnvironment(twoNodes(), step, 1).at("CUDA_VISIBLE_DEVICES") == "2,3");
  // More GPUs asked than the node has: the assignment wraps around.
  CHECK(stepTaskEnvironment(twoNodes(), step, 2).at("CUDA_VISIBLE_DEVICES") == "0,1");
}

TEST_CASE("a step on some of the job's nodes numbers them from zero", "[env]") {
  StepEnvironmentInput step;
  step.node_indices = {1};
  step.tasks_per_node = {2};
  Environment env = stepTaskEnvironment(twoNodes(), step, 1);
  CHECK(env.at("SLURM_NODEID") == "0");
  CHECK(env.at("SLURMD_NODENAME") == "n2");
  CHECK(env.at("SLURM_STEP_NODELIST") == "n2");
  CHECK(env.at("SLURM_LOCALID") == "1");
}

TEST_CASE("srun -E keeps the job's counts", "[env]") {
  StepEnvironmentInput step;
  step.node_indices = {0};
  step.tasks_per_node = {1};
  step.preserve_env = true;
  Environment env = stepTaskEnvironment(twoNodes(), step, 0);
  CHECK_FALSE(has(env, "SLURM_NNODES"));
  CHECK_FALSE(has(env, "SLURM_NTASKS"));
  CHECK_FALSE(has(env, "SLURM_TASKS_PER_NODE"));
  CHECK(env.at("SLURM_STEP_NUM_TASKS") == "1");
  CHECK(stepTaskEnvironment(twoNodes(), step, 1).empty());  // no such rank
}

const Environment kSubmit = {{"HOME", "/home/alice"},
                             {"EDITOR", "vi"},
                             {"SLURM_JWT", "secret"},
                             {"SLURM_CONF", "/etc/slurm.conf"},
                             {"SLURMD_DEBUG", "2"},
                             {"_SLURM_SPANK_OPTION_x", "1"}};

TEST_CASE("without --export everything but SLURM_JWT is exported", "[env]") {
  Environment env = applyExport(std::nullopt, kSubmit);
  CHECK(env.size() == kSubmit.size() - 1);
  CHECK_FALSE(has(env, "SLURM_JWT"));
  CHECK(env.at("HOME") == "/home/alice");
  CHECK(applyExport(parseExportSpec("ALL"), kSubmit) == kSubmit);
}

TEST_CASE("exporting NONE or NIL keeps only SLURM variables", "[env]") {
  Environment nil = applyExport(parseExportSpec("NIL"), kSubmit);
  CHECK(nil == Environment{{"SLURM_JWT", "secret"},
                           {"SLURM_CONF", "/etc/slurm.conf"},
                           {"SLURMD_DEBUG", "2"},
                           {"_SLURM_SPANK_OPTION_x", "1"}});
  Environment none = applyExport(parseExportSpec("NONE"), kSubmit);
  CHECK(none.at("SLURM_GET_USER_ENV") == "1");
  CHECK_FALSE(has(none, "HOME"));
}

TEST_CASE("export lists copy names, set values and always keep SLURM variables", "[env]") {
  Environment env = applyExport(parseExportSpec("EDITOR,ARG1=test,NOPE"), kSubmit);
  CHECK(env.at("EDITOR") == "vi");
  CHECK(env.at("ARG1") == "test");
  CHECK_FALSE(has(env, "NOPE"));
  CHECK_FALSE(has(env, "HOME"));
  CHECK(env.at("SLURM_CONF") == "/etc/slurm.conf");
  CHECK(env.at("SLURM_GET_USER_ENV") == "1");
}

TEST_CASE("with ALL in a list, later entries overwrite earlier ones", "[env]") {
  // env_merge_filter processes the entries in order, each overwriting.
  CHECK(applyExport(parseExportSpec("ALL,EDITOR=/bin/emacs"), kSubmit).at("EDITOR") ==
        "/bin/emacs");
  CHECK(applyExport(parseExportSpec("EDITOR=/bin/emacs,ALL"), kSubmit).at("EDITOR") == "vi");
  CHECK(applyExport(parseExportSpec("ALL,X=1"), kSubmit).at("HOME") == "/home/alice");
}

}  // namespace
}  // namespace muster::jobengine::slurm
