#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "jobengine/slurm/core/options.h"

namespace muster::jobengine::slurm {
namespace {

using Argv = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

BatchOptions sbatch(const Argv& argv) {
  absl::StatusOr<BatchOptions> o = parseSbatchArgs(argv);
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  return *o;
}

std::string sbatchError(const Argv& argv) {
  absl::StatusOr<BatchOptions> o = parseSbatchArgs(argv);
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(o.status().message());
}

SrunOptions srun(const Argv& argv) {
  absl::StatusOr<SrunOptions> o = parseSrunArgs(argv);
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  return *o;
}

std::string srunError(const Argv& argv) {
  absl::StatusOr<SrunOptions> o = parseSrunArgs(argv);
  REQUIRE_FALSE(o.ok());
  return std::string(o.status().message());
}

BatchOptions fromEnv(const Env& env) {
  absl::StatusOr<BatchOptions> o = optionsFromEnvironment(env);
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  return *o;
}

std::string usage(std::string_view prog, std::string_view line) {
  return std::string(prog) + ": " + std::string(line) + "\nTry \"" + std::string(prog) +
         " --help\" for more information";
}

TEST_CASE("short and long options take their value attached or as the next word", "[options]") {
  for (const Argv& argv : {Argv{"-N2"}, Argv{"-N", "2"}, Argv{"--nodes=2"}, Argv{"--nodes", "2"}}) {
    BatchOptions o = sbatch(argv);
    CHECK(o.nodes_min == 2);
    CHECK(o.nodes_max == 2);
  }
  BatchOptions o = sbatch({"-J", "train", "-n", "8", "--cpus-per-task=4", "-p", "gpu",
                           "--ntasks-per-node", "4", "-t", "1:00:00"});
  CHECK(o.job_name == "train");
  CHECK(o.ntasks == 8);
  CHECK(o.cpus_per_task == 4);
  CHECK(o.partition == "gpu");
  CHECK(o.ntasks_per_node == 4);
  CHECK(o.time_limit == std::optional<std::optional<int64_t>>(3600));
}

TEST_CASE("a required argument takes the next word even when it starts with a dash",
          "[options]") {
  CHECK(sbatch({"-J", "-x"}).job_name == "-x");
  CHECK(sbatch({"--comment", "--nodes=3"}).comment == "--nodes=3");
}

TEST_CASE("an optional argument is only taken after '='", "[options]") {
  BatchOptions bare = sbatch({"--exclusive", "user"});
  CHECK(bare.exclusive);
  CHECK(bare.exclusive_mode == "exclusive");
  CHECK(bare.positional == Argv{"user"});
  BatchOptions with = sbatch({"--exclusive=user"});
  CHECK(with.exclusive);
  CHECK(with.exclusive_mode == "user");
}

TEST_CASE("grouped short flags are read one by one", "[options]") {
  BatchOptions o = sbatch({"-vvH", "-vN2"});
  CHECK(o.verbose == 3);
  CHECK(o.hold);
  CHECK(o.nodes_min == 2);
}

TEST_CASE("a unique prefix of a long option is accepted as getopt_long does", "[options]") {
  CHECK(sbatch({"--ntasks-per-n=3"}).ntasks_per_node == 3);
  CHECK(sbatch({"--cpus-per-t", "4"}).cpus_per_task == 4);
  CHECK(sbatch({"--job=x"}).job_name == "x");  // only --job-name for sbatch (--jobid is srun's)
  CHECK(sbatch({"--tasks=2"}).ntasks_per_node == 2);  // --tasks-per-node
  CHECK(sbatch({"--wait"}).wait);  // an exact match wins over --wait-all-nodes
}

TEST_CASE("an ambiguous prefix lists the candidates in Slurm's table order", "[options]") {
  CHECK(srunError({"--job=3"}) ==
        usage("srun", "option '--job=3' is ambiguous; possibilities: '--jobid' '--job-name'"));
  // --cpu_bind is the same option as --cpu-bind, so glibc does not list it.
  CHECK(srunError({"--cpu", "none"}) ==
        usage("srun",
              "option '--cpu' is ambiguous; possibilities: '--cpu-bind' '--cpu-freq' "
              "'--cpus-per-gpu' '--cpus-per-task'"));
  CHECK(sbatchError({"--nod=3"}) ==
        usage("sbatch",
              "option '--nod=3' is ambiguous; possibilities: '--nodefile' '--nodelist' '--nodes'"));
  CHECK(sbatchError({"--wai"}) ==
        usage("sbatch", "option '--wai' is ambiguous; possibilities: '--wait' '--wait-all-nodes'"));
}

TEST_CASE("unknown options and missing arguments get glibc's messages", "[options]") {
  CHECK(sbatchError({"--foo"}) == usage("sbatch", "unrecognized option '--foo'"));
  CHECK(sbatchError({"--foo=bar"}) == usage("sbatch", "unrecognized option '--foo=bar'"));
  CHECK(sbatchError({"-z"}) == usage("sbatch", "invalid option -- 'z'"));
  CHECK(sbatchError({"-N"}) == usage("sbatch", "option requires an argument -- 'N'"));
  CHECK(sbatchError({"--nodes"}) == usage("sbatch", "option '--nodes' requires an argument"));
  CHECK(sbatchError({"--parsable=yes"}) ==
        usage("sbatch", "option '--parsable' doesn't allow an argument"));
  CHECK(srunError({"--foo"}) == usage("srun", "unrecognized option '--foo'"));
  // An option of the other program is unknown here.
  CHECK(srunError({"--array=1-3"}) == usage("srun", "unrecognized option '--array=1-3'"));
  CHECK(sbatchError({"--mpi=pmix"}) == usage("sbatch", "unrecognized option '--mpi=pmix'"));
}

TEST_CASE("sbatch stops at the script and leaves its arguments alone", "[options]") {
  BatchOptions o = sbatch({"-N2", "job.sh", "-N3", "--foo"});
  CHECK(o.nodes_min == 2);
  CHECK(o.positional == Argv{"job.sh", "-N3", "--foo"});
  CHECK(sbatch({"-N2", "--", "-x.sh", "a"}).positional == Argv{"-x.sh", "a"});
  CHECK(sbatch({"-"}).positional == Argv{"-"});  // a lone dash is an operand
}

TEST_CASE("without stopping at the script, operands are collected and options go on",
          "[options]") {
  absl::StatusOr<BatchOptions> o = parseSbatchArgs({"job.sh", "-N3", "x"}, false);
  REQUIRE(o.ok());
  CHECK(o->nodes_min == 3);
  CHECK(o->positional == Argv{"job.sh", "x"});
}

TEST_CASE("bad numbers are reported with Slurm's exact words", "[options]") {
  // proc_args.c parse_int.
  CHECK(sbatchError({"-n", "abc"}) == "sbatch: error: Invalid numeric value \"abc\" for --ntasks.");
  CHECK(sbatchError({"-n", "0"}) == "sbatch: error: Invalid numeric value \"0\" for --ntasks.");
  CHECK(sbatchError({"-c", "-2"}) ==
        "sbatch: error: Invalid numeric value \"-2\" for --cpus-per-task.");
  CHECK(sbatchError({"--ntasks-per-node=2x"}) ==
        "sbatch: error: Invalid numeric value \"2x\" for --ntasks-per-node.");
  CHECK(sbatchError({"-n", "99999999999"}) ==
        "sbatch: error: Numeric argument (99999999999) too large for --ntasks.");
  CHECK(srunError({"-n", "abc"}) == "srun: error: Invalid numeric value \"abc\" for --ntasks.");
}

TEST_CASE("node counts follow verify_node_count", "[options]") {
  CHECK(sbatchError({"-N", "abc"}) == "sbatch: error: \"abc\" is not a valid node count");
  CHECK(sbatchError({"-N", "4-2"}) ==
        "sbatch: error: Maximum node count 2 is less than minimum node count 4");
  // A missing maximum reads as -1 (str_to_nodes), which is less than the minimum.
  CHECK(sbatchError({"-N", "2-"}) ==
        "sbatch: error: Maximum node count -1 is less than minimum node count 2");
  CHECK(sbatchError({"-N", "2-x"}) == "sbatch: error: \"x\" is not a valid node count");
  BatchOptions range = sbatch({"-N", "2-4"});
  CHECK(range.nodes_min == 2);
  CHECK(range.nodes_max == 4);
  BatchOptions open = sbatch({"-N", "-4"});  // a missing minimum is 1
  CHECK(open.nodes_min == 1);
  CHECK(open.nodes_max == 4);
  CHECK(sbatch({"-N", "1k"}).nodes_min == 1024);
  // strtol saturates a long negative count; the suffixes must not scale it (signed overflow,
  // found by fuzz_srun_args), and it reads as an invalid -1 like any negative count.
  CHECK(sbatchError({"-N", "2--99999999999999999999999m"}) ==
        "sbatch: error: Maximum node count -1 is less than minimum node count 2");
  CHECK(sbatchError({"-N", "1,4"}).find("not supported by Muster") != std::string::npos);
}

TEST_CASE("time limits are read as sbatch -t does", "[options]") {
  CHECK(sbatch({"-t", "10"}).time_limit == std::optional<std::optional<int64_t>>(600));
  CHECK(sbatch({"-t", "0:30"}).time_limit == std::optional<std::optional<int64_t>>(60));
  BatchOptions unlimited = sbatch({"--time=UNLIMITED"});
  REQUIRE(unlimited.time_limit.has_value());
  CHECK(*unlimited.time_limit == std::nullopt);
  CHECK(sbatchError({"-t", "abc"}) == "sbatch: error: Invalid --time specification");
}

TEST_CASE("memory sizes are MiB by default with K, M, G and T suffixes", "[options]") {
  CHECK(sbatch({"--mem=4096"}).mem_mb == 4096);
  CHECK(sbatch({"--mem=4G"}).mem_mb == 4096);
  CHECK(sbatch({"--mem=4GB"}).mem_mb == 4096);
  CHECK(sbatch({"--mem=512m"}).mem_mb == 512);
  CHECK(sbatch({"--mem=2T"}).mem_mb == 2 * 1024 * 1024);
  CHECK(sbatch({"--mem=1K"}).mem_mb == 1);  // K rounds up
  CHECK(sbatch({"--mem=1025K"}).mem_mb == 2);
  CHECK(sbatch({"--mem=0"}).mem_mb == 0);  // all the memory of the node
  CHECK(sbatch({"--mem-per-cpu=500"}).mem_per_cpu_mb == 500);
  CHECK(sbatch({"--mem-per-gpu=80G"}).mem_per_gpu_mb == 80 * 1024);
  CHECK(sbatchError({"--mem=abc"}) == "sbatch: error: Invalid --mem specification");
  CHECK(sbatchError({"--mem=-1"}) == "sbatch: error: Invalid --mem specification");
  CHECK(sbatchError({"--mem=4X"}) == "sbatch: error: Invalid --mem specification");
  CHECK(sbatchError({"--mem=4GiB"}) == "sbatch: error: Invalid --mem specification");
  CHECK(sbatchError({"--mem-per-cpu=x"}) == "sbatch: error: Invalid --mem-per-cpu specification");
}

TEST_CASE("GPU requests take an optional type", "[options]") {
  CHECK(sbatch({"--gpus=4"}).gpus == GpuRequest{std::nullopt, 4});
  CHECK(sbatch({"-G", "a100:2"}).gpus == GpuRequest{"a100", 2});
  CHECK(sbatch({"--gpus-per-node=h100:8"}).gpus_per_node == GpuRequest{"h100", 8});
  CHECK(sbatch({"--gpus-per-task=1"}).gpus_per_task == GpuRequest{std::nullopt, 1});
  CHECK(sbatchError({"--gpus=a100"}) == "sbatch: error: Invalid --gpus specification");
  CHECK(sbatchError({"--gpus-per-task=:1"}) ==
        "sbatch: error: Invalid --gpus-per-task specification");
}

TEST_CASE("gres entries are name[[:type]:count] with a default count of 1", "[options]") {
  CHECK(sbatch({"--gres=gpu:2"}).gres == std::vector<Gres>{{"gpu", std::nullopt, 2}});
  CHECK(sbatch({"--gres=gpu:a100:2,nic:1"}).gres ==
        std::vector<Gres>{{"gpu", "a100", 2}, {"nic", std::nullopt, 1}});
  CHECK(sbatch({"--gres=gpu"}).gres == std::vector<Gres>{{"gpu", std::nullopt, 1}});
  CHECK(sbatch({"--gres=gpu:a100"}).gres == std::vector<Gres>{{"gpu", "a100", 1}});
  CHECK(sbatch({"--gres=gres/gpu:4"}).gres == std::vector<Gres>{{"gpu", std::nullopt, 4}});
  CHECK(sbatch({"--gres=bandwidth:10G"}).gres ==
        std::vector<Gres>{{"bandwidth", std::nullopt, int64_t{10} << 30}});
  BatchOptions none = sbatch({"--gres=none"});
  REQUIRE(none.gres.has_value());
  CHECK(none.gres->empty());
  CHECK(sbatchError({"--gres=gpu:a100:x"}) ==
        "sbatch: error: Invalid generic resource (gres) specification");
  CHECK(sbatchError({"--gres=:2"}) == "sbatch: error: Invalid generic resource (gres) specification");
}

TEST_CASE("exclusive values and oversubscribe share one setting", "[options]") {
  CHECK(sbatch({"--exclusive=mcs"}).exclusive_mode == "mcs");
  CHECK(sbatch({"--exclusive=TOPO"}).exclusive_mode == "topo");
  BatchOptions over = sbatch({"--exclusive", "-s"});
  CHECK_FALSE(over.exclusive);
  CHECK(over.exclusive_mode == "oversubscribe");
  CHECK_FALSE(sbatch({"--exclusive=oversubscribe"}).exclusive);
  CHECK(sbatchError({"--exclusive=bogus"}) == "sbatch: error: Invalid --exclusive specification");
}

TEST_CASE("requeue, no-requeue and kill-on-invalid-dep take their values", "[options]") {
  CHECK(sbatch({"--requeue"}).requeue == true);
  CHECK(sbatch({"--requeue", "--no-requeue"}).requeue == false);
  BatchOptions expedite = sbatch({"--requeue=expedite"});
  CHECK(expedite.requeue == true);
  CHECK(expedite.requeue_expedite);
  CHECK(sbatchError({"--requeue=x"}) == "sbatch: error: Invalid --requeue specification");
  CHECK(sbatch({"--kill-on-invalid-dep=yes"}).kill_on_invalid_dep == true);
  CHECK(sbatch({"--kill-on-invalid-dep=NO"}).kill_on_invalid_dep == false);
  CHECK(sbatchError({"--kill-on-invalid-dep=maybe"}) ==
        "sbatch: error: Invalid --kill-on-invalid-dep specification");
}

TEST_CASE("raw values are recorded for the modules that parse them", "[options]") {
  BatchOptions o = sbatch({"--array=0-15%4", "-d", "afterok:12", "-b", "now+1hour", "-C", "a100",
                           "-o", "out-%j.txt", "-e", "err-%j.txt", "-i", "in.txt", "-D", "/work",
                           "-A", "proj", "-q", "high", "--comment=hi", "-w", "n[1-4]", "-x", "n3",
                           "--open-mode=append", "--parsable"});
  CHECK(o.array == "0-15%4");
  CHECK(o.dependency == "afterok:12");
  CHECK(o.begin == "now+1hour");
  CHECK(o.constraint == "a100");
  CHECK(o.output == "out-%j.txt");
  CHECK(o.error == "err-%j.txt");
  CHECK(o.input == "in.txt");
  CHECK(o.chdir == "/work");
  CHECK(o.account == "proj");
  CHECK(o.qos == "high");
  CHECK(o.comment == "hi");
  CHECK(o.nodelist == "n[1-4]");
  CHECK(o.exclude == "n3");
  CHECK(o.open_mode == "append");
  CHECK(o.parsable);
  CHECK(sbatchError({"--begin=someday"}) == "sbatch: error: Invalid --begin specification");
  CHECK(sbatchError({"--open-mode=x"}) == "sbatch: error: Invalid --open-mode specification");
}

TEST_CASE("a node list naming a file is refused", "[options]") {
  CHECK(sbatchError({"-w", "/tmp/hosts"}) ==
        "sbatch: error: --nodelist=/tmp/hosts: reading host names from a file is not supported "
        "by Muster");
  CHECK(sbatchError({"--exclude=./bad"}).find("--exclude=./bad") != std::string::npos);
}

TEST_CASE("export forms are parsed in order", "[options]") {
  using Kind = ExportSpec::Item::Kind;
  CHECK(sbatch({"--export=ALL"}).export_env->mode == ExportSpec::Mode::kAll);
  CHECK(sbatch({"--export=NONE"}).export_env->mode == ExportSpec::Mode::kNone);
  CHECK(sbatch({"--export=nil"}).export_env->mode == ExportSpec::Mode::kNil);
  ExportSpec list = *sbatch({"--export=ALL,FOO=bar"}).export_env;
  CHECK(list.mode == ExportSpec::Mode::kList);
  CHECK(list.raw == "ALL,FOO=bar");
  CHECK(list.items == std::vector<ExportSpec::Item>{{Kind::kAll, "", ""},
                                                      {Kind::kAssignment, "FOO", "bar"}});
  CHECK(parseExportSpec("EDITOR,ARG1=test").items ==
        std::vector<ExportSpec::Item>{{Kind::kName, "EDITOR", ""},
                                      {Kind::kAssignment, "ARG1", "test"}});
  // Commas inside quotes do not split; only a wholly quoted entry loses its quotes.
  CHECK(parseExportSpec("A=\"x,y\",B").items ==
        std::vector<ExportSpec::Item>{{Kind::kAssignment, "A", "\"x,y\""}, {Kind::kName, "B", ""}});
  CHECK(parseExportSpec("'A=x,y',B").items ==
        std::vector<ExportSpec::Item>{{Kind::kAssignment, "A", "x,y"}, {Kind::kName, "B", ""}});
  CHECK(parseExportSpec("A,,B").items.size() == 2);
}

TEST_CASE("options Muster cannot honour are ignored with a warning or refused", "[options]") {
  BatchOptions o = sbatch({"--mail-type=END", "--nice", "-m", "cyclic"});
  REQUIRE(o.ignored.size() == 3);
  CHECK(o.ignored[0] == IgnoredOption{"--mail-type", "END",
                                      "sbatch: warning: ignoring --mail-type (not supported by "
                                      "Muster)"});
  CHECK(o.ignored[1].option == "--nice");
  CHECK(o.ignored[1].value == std::nullopt);
  CHECK(o.ignored[2].option == "--distribution");
  CHECK(o.ignored[2].value == "cyclic");
  CHECK(sbatchError({"--test-only"}) == "sbatch: error: --test-only is not supported by Muster");
  CHECK(sbatchError({"-F", "hosts"}) == "sbatch: error: --nodefile is not supported by Muster");
  CHECK(srunError({"--pty", "bash"}) == "srun: error: --pty is not supported by Muster");
}

TEST_CASE("wrap refuses script arguments and hetjob separators are refused", "[options]") {
  CHECK(sbatch({"--wrap", "hostname"}).wrap == "hostname");
  CHECK(sbatchError({"--wrap=hostname", "extra"}) ==
        "sbatch: error: Script arguments not permitted with --wrap option");
  CHECK(sbatchError({"-N1", ":", "-N2", "job.sh"}).find("heterogeneous") != std::string::npos);
}

TEST_CASE("help, usage and version are flags for the CLI to act on", "[options]") {
  BatchOptions o = sbatch({"--help", "--usage", "-V"});
  CHECK(o.help);
  CHECK(o.usage);
  CHECK(o.version);
  CHECK(sbatch({"-h"}).help);
}

TEST_CASE("#SBATCH words that are not options are invalid directives", "[options]") {
  ScriptDirectives d;
  d.args = {"-N", "2", "job.sh", "-n", "4"};
  absl::StatusOr<BatchOptions> o = parseScriptOptions(d);
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().message() == "sbatch: error: Invalid directive found in batch script: job.sh");
  d.args = {"--nodes=2", "--bogus"};
  CHECK(parseScriptOptions(d).status().message() ==
        usage("sbatch", "unrecognized option '--bogus'"));
  d.args = {"--nodes=2", "-t", "5"};
  absl::StatusOr<BatchOptions> ok = parseScriptOptions(d);
  REQUIRE(ok.ok());
  CHECK(ok->nodes_min == 2);
  CHECK(ok->time_limit == std::optional<std::optional<int64_t>>(300));
}

TEST_CASE("SBATCH_ variables set options as their options would", "[options]") {
  BatchOptions o = fromEnv({{"SBATCH_JOB_NAME", "envjob"},
                            {"SBATCH_PARTITION", "batch"},
                            {"SBATCH_TIMELIMIT", "1:00:00"},
                            {"SBATCH_EXPORT", "NONE"},
                            {"SBATCH_MEM_PER_NODE", "4G"},
                            {"SBATCH_GPUS_PER_TASK", "1"},
                            {"HOME", "/root"}});
  CHECK(o.job_name == "envjob");
  CHECK(o.partition == "batch");
  CHECK(o.time_limit == std::optional<std::optional<int64_t>>(3600));
  CHECK(o.export_env->mode == ExportSpec::Mode::kNone);
  CHECK(o.mem_mb == 4096);
  CHECK(o.gpus_per_task == GpuRequest{std::nullopt, 1});
  CHECK(o.ignored.empty());
}

TEST_CASE("a flag variable is set by empty, yes or a non-zero number", "[options]") {
  // slurm_process_option with set_by_env for no_argument options.
  CHECK(fromEnv({{"SBATCH_WAIT", ""}}).wait);
  CHECK(fromEnv({{"SBATCH_WAIT", "yes"}}).wait);
  CHECK(fromEnv({{"SBATCH_WAIT", "1"}}).wait);
  CHECK_FALSE(fromEnv({{"SBATCH_WAIT", "0"}}).wait);
  CHECK_FALSE(fromEnv({{"SBATCH_WAIT", "no"}}).wait);
  CHECK(fromEnv({{"SBATCH_NO_REQUEUE", "1"}}).requeue == false);
  // An empty value of an optional argument means no argument.
  BatchOptions excl = fromEnv({{"SBATCH_EXCLUSIVE", ""}});
  CHECK(excl.exclusive_mode == "exclusive");
  CHECK(fromEnv({{"SBATCH_REQUEUE", ""}}).requeue == true);
}

TEST_CASE("bad or unsupported SBATCH_ variables are reported like options", "[options]") {
  CHECK(optionsFromEnvironment({{"SBATCH_TIMELIMIT", "abc"}}).status().message() ==
        "sbatch: error: Invalid --time specification");
  CHECK(optionsFromEnvironment({{"SBATCH_CONTAINER", "/img"}}).status().message() ==
        "sbatch: error: SBATCH_CONTAINER (--container) is not supported by Muster");
  BatchOptions o = fromEnv({{"SBATCH_SIGNAL", "USR1@60"}, {"SBATCH_WAIT4SWITCH", "10"}});
  REQUIRE(o.ignored.size() == 2);
  CHECK(o.ignored[0].option == "--signal");
  CHECK(o.ignored[0].warning ==
        "sbatch: warning: ignoring SBATCH_SIGNAL (--signal is not supported by Muster)");
  CHECK(o.ignored[1].option == "SBATCH_WAIT4SWITCH");
}

TEST_CASE("the command line beats SBATCH_ variables which beat #SBATCH lines", "[options]") {
  ScriptDirectives d;
  d.args = {"-J", "fromscript", "-p", "p1", "-t", "10", "-N", "2-4", "--exclusive"};
  BatchOptions script = *parseScriptOptions(d);
  BatchOptions env = fromEnv({{"SBATCH_JOB_NAME", "fromenv"}, {"SBATCH_PARTITION", "p2"}});
  BatchOptions cli = sbatch({"-J", "fromcli", "-N3", "-s", "job.sh"});
  absl::StatusOr<BatchOptions> r = resolveBatchOptions(script, env, cli);
  REQUIRE(r.ok());
  CHECK(r->job_name == "fromcli");
  CHECK(r->partition == "p2");
  CHECK(r->time_limit == std::optional<std::optional<int64_t>>(600));
  CHECK(r->nodes_min == 3);  // -N moves as one field
  CHECK(r->nodes_max == 3);
  CHECK_FALSE(r->exclusive);
  CHECK(r->exclusive_mode == "oversubscribe");
  CHECK(r->positional == Argv{"job.sh"});
}

TEST_CASE("merging or-s flags, adds -v counts and keeps every ignored option", "[options]") {
  BatchOptions lo = sbatch({"-v", "--hold", "--mail-type=END"});
  BatchOptions hi = sbatch({"-v", "--parsable", "--nice"});
  BatchOptions m = mergeOptions(lo, hi);
  CHECK(m.verbose == 2);
  CHECK(m.hold);
  CHECK(m.parsable);
  REQUIRE(m.ignored.size() == 2);
  CHECK(m.ignored[0].option == "--mail-type");
  CHECK(m.ignored[1].option == "--nice");
}

TEST_CASE("two memory options from script and command line are mutually exclusive",
          "[options]") {
  ScriptDirectives d;
  d.args = {"--mem=4G"};
  BatchOptions script = *parseScriptOptions(d);
  CHECK(resolveBatchOptions(script, {}, sbatch({"--mem-per-cpu=1G"})).status().message() ==
        "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.");
  // The same option twice is not a conflict: the command line wins.
  CHECK(resolveBatchOptions(script, {}, sbatch({"--mem=8G"}))->mem_mb == 8192);
  // One given by the script discards the environment's.
  absl::StatusOr<BatchOptions> r =
      resolveBatchOptions(script, fromEnv({{"SBATCH_MEM_PER_CPU", "1G"}}), {});
  REQUIRE(r.ok());
  CHECK(r->mem_mb == 4096);
  CHECK(r->mem_per_cpu_mb == std::nullopt);
  CHECK(resolveBatchOptions({}, fromEnv({{"SBATCH_MEM_PER_CPU", "1G"}, {"SBATCH_MEM_PER_NODE", "4G"}}),
                            {})
            .status()
            .message() ==
        "sbatch: fatal: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually "
        "exclusive.");
}

TEST_CASE("gpus-per-node and a gpu gres are mutually exclusive", "[options]") {
  CHECK(resolveBatchOptions({}, {}, sbatch({"--gpus-per-node=2", "--gres=gpu:2"})).status().message() ==
        "sbatch: fatal: --gpus-per-node and --gres=gpu are mutually exclusive.");
  CHECK(resolveBatchOptions({}, {}, sbatch({"--gpus-per-node=2", "--gres=nic:1"})).ok());
}

TEST_CASE("the default job name is the script's base name, wrap or sbatch", "[options]") {
  CHECK(defaultJobName(sbatch({"--wrap=hostname"})) == "wrap");
  CHECK(defaultJobName(sbatch({"/home/u/train.sh", "a"})) == "train.sh");
  CHECK(defaultJobName(sbatch({"run.sh"})) == "run.sh");
  CHECK(defaultJobName(sbatch({})) == "sbatch");
}

TEST_CASE("srun takes Open MPI 4.1's plm/slurm command line", "[options]") {
  // orte/mca/plm/slurm/plm_slurm_module.c builds this argv.
  SrunOptions o = srun({"--ntasks-per-node=1", "--kill-on-bad-exit", "--cpu_bind=none",
                        "--nodes=2", "--nodelist=h1,h2", "--ntasks=2", "orted", "-mca", "ess",
                        "slurm", "-mca", "orte_ess_num_procs", "3"});
  CHECK(o.ntasks_per_node == 1);
  CHECK(o.kill_on_bad_exit == true);
  CHECK(o.cpu_bind == "none");
  CHECK(o.nodes_min == 2);
  CHECK(o.nodelist == "h1,h2");
  CHECK(o.ntasks == 2);
  CHECK(o.command ==
        Argv{"orted", "-mca", "ess", "slurm", "-mca", "orte_ess_num_procs", "3"});
  CHECK(o.ignored.empty());
}

TEST_CASE("srun takes PRRTE's launcher options", "[options]") {
  SrunOptions o = srun({"--ntasks-per-node=1", "--kill-on-bad-exit", "--external-launcher",
                        "--mpi=none", "--cpu-bind=none", "--ntasks=4", "prted", "--prtemca", "x"});
  CHECK(o.external_launcher);
  CHECK(o.mpi == "none");
  CHECK(o.cpu_bind == "none");
  CHECK(o.command == Argv{"prted", "--prtemca", "x"});
}

TEST_CASE("srun stops at the command and reads its own flags", "[options]") {
  SrunOptions o = srun({"-l", "-n4", "-c", "2", "--gpus-per-task=1", "-K0", "-W", "30", "--overlap",
                        "python", "-n", "3"});
  CHECK(o.label);
  CHECK(o.ntasks == 4);
  CHECK(o.cpus_per_task == 2);
  CHECK(o.gpus_per_task == GpuRequest{std::nullopt, 1});
  CHECK(o.kill_on_bad_exit == false);
  CHECK(o.wait_seconds == 30);
  CHECK(o.overlap);
  CHECK(o.command == Argv{"python", "-n", "3"});
  CHECK(srun({"-K", "true"}).kill_on_bad_exit == true);  // optional argument: "true" is the command
  CHECK(srun({"--kill-on-bad-exit=1", "a"}).kill_on_bad_exit == true);
  CHECK(srunError({"-Kx"}) == "srun: error: Invalid numeric value \"x\" for --kill-on-bad-exit.");
  CHECK(srun({"--parsable", "a"}).ignored.size() == 1);
  CHECK(srunError({"--mem=1G", "--mem-per-cpu=1G", "a"}) ==
        "srun: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.");
}

TEST_CASE("srun inherits the job's shape from SLURM_ variables", "[options]") {
  Env env = {{"SLURM_NTASKS", "8"},          {"SLURM_NPROCS", "8"},
             {"SLURM_JOB_NUM_NODES", "2"},   {"SLURM_NTASKS_PER_NODE", "4"},
             {"SLURM_CPUS_PER_TASK", "2"},   {"SLURM_CPU_BIND", "none"},
             {"SLURM_EXPORT_ENV", "NONE"},   {"SRUN_EXPORT_ENV", "ALL"},
             {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_JOB_ID", "42"}};
  absl::StatusOr<SrunOptions> e = srunOptionsFromEnvironment(env);
  REQUIRE(e.ok());
  CHECK(e->ntasks == 8);
  CHECK(e->nodes_min == 2);
  CHECK(e->ntasks_per_node == 4);
  CHECK(e->cpus_per_task == 2);
  CHECK(e->cpu_bind == "none");
  CHECK(e->export_env->mode == ExportSpec::Mode::kAll);  // SRUN_EXPORT_ENV comes later
  CHECK(e->jobid == "42");
  CHECK(e->nodelist == std::nullopt);  // SLURM_JOB_NODELIST is the allocation, not -w

  SrunOptions plain = mergeSrunOptions(*e, srun({"a.out"}));
  CHECK(plain.ntasks == 8);
  // -N from the command line with an inherited --ntasks-per-node drops the inherited -n.
  SrunOptions one_node = mergeSrunOptions(*e, srun({"-N1", "a.out"}));
  CHECK(one_node.nodes_min == 1);
  CHECK(one_node.ntasks == std::nullopt);
  CHECK(one_node.ntasks_per_node == 4);
  SrunOptions explicit_n = mergeSrunOptions(*e, srun({"-N1", "-n2", "a.out"}));
  CHECK(explicit_n.ntasks == 2);
  CHECK(explicit_n.command == Argv{"a.out"});
}

TEST_CASE("srun's memory option on the command line discards the inherited ones", "[options]") {
  absl::StatusOr<SrunOptions> e = srunOptionsFromEnvironment({{"SLURM_MEM_PER_NODE", "4096"}});
  REQUIRE(e.ok());
  SrunOptions m = mergeSrunOptions(*e, srun({"--mem-per-cpu=100", "a"}));
  CHECK(m.mem_mb == std::nullopt);
  CHECK(m.mem_per_cpu_mb == 100);
  CHECK(mergeSrunOptions(*e, srun({"a"})).mem_mb == 4096);
}

}  // namespace
}  // namespace muster::jobengine::slurm
