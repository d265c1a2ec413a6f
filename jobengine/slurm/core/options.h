#pragma once

// sbatch and srun command lines, #SBATCH directives and SBATCH_*/SLURM_* input variables, read as
// Slurm 24.x/25.x reads them (src/common/slurm_opt.c, src/common/proc_args.c, src/sbatch/opt.c,
// src/srun/opt.c).
//
// Option syntax is glibc getopt_long's with Slurm's "+" option string:
//   -N2, -N 2, --nodes=2, --nodes 2; grouped flags (-vvH); a long option may be abbreviated to
//   any unique prefix (--nod=2, --job=x); an ambiguous prefix is an error listing the
//   candidates; an optional argument is only taken with '=' (--exclusive=user) or attached
//   (-K1); a required argument takes the next word even if it starts with '-';
//   "--" ends the options; parsing stops at the first word that is not an option (the script
//   for sbatch, the command for srun) and everything after it is left alone.
//
// Errors are InvalidArgument whose message is the exact text Slurm writes to stderr (without
// the final newline), e.g.
//   "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information"
//   "sbatch: error: Invalid numeric value \"abc\" for --ntasks."
//   "sbatch: error: \"abc\" is not a valid node count"
// with the program name taken from the `prog` argument (so srun's errors say "srun:").
//
// Precedence (sbatch.1 "INPUT ENVIRONMENT VARIABLES"): #SBATCH directives < SBATCH_* variables <
// the command line, field by field (resolveBatchOptions). For srun: SLURM_* variables < the
// command line (mergeSrunOptions).
//
// Options Muster does not implement are either
//   - accepted and listed in `ignored` with a warning line for stderr (they do not change what
//     runs: --mail-type, --nice, --distribution, --cpu-freq, --hint, ...), or
//   - refused with "<prog>: error: --X is not supported by Muster" when ignoring them would run
//     something other than what was asked (--test-only, --nodefile, --export-file, --uid,
//     --het-group, --pty, a --nodelist naming a file, --nodes with a list of counts, ...).
// Each option's handling is in the table in options.cc.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jobengine/slurm/core/script.h"

namespace muster::jobengine::slurm {

// --gpus, --gpus-per-node, --gpus-per-task: "[type:]count".
struct GpuRequest {
  std::optional<std::string> type;
  int64_t count = 0;

  bool operator==(const GpuRequest&) const = default;
};

// One --gres entry: "name[[:type]:count]" (count defaults to 1, and may carry a K/M/G/T/P
// suffix as sbatch.1 says); a "gres/" prefix is accepted and dropped.
struct Gres {
  std::string name;
  std::optional<std::string> type;
  int64_t count = 1;

  bool operator==(const Gres&) const = default;
};

// --export={[ALL,]VAR[=value],...|ALL|NONE|NIL}, case-insensitive keywords. Applied by
// applyExport in env.h.
struct ExportSpec {
  enum class Mode {
    kAll,   // "ALL": the whole submission environment
    kNone,  // "NONE": only SLURM_* (and Slurm then loads the user's login environment)
    kNil,   // "NIL": only SLURM_*
    kList,  // names and assignments, optionally with ALL among them
  };
  struct Item {
    enum class Kind { kAll, kName, kAssignment };
    Kind kind = Kind::kName;
    std::string name;
    std::string value;  // kAssignment only

    bool operator==(const Item&) const = default;
  };
  Mode mode = Mode::kAll;
  std::vector<Item> items;  // kList: in the order written
  std::string raw;          // as given, for SLURM_EXPORT_ENV

  bool operator==(const ExportSpec&) const = default;
};

// An option accepted but not honoured.
struct IgnoredOption {
  std::string option;  // the long name with dashes, e.g. "--mail-type"
  std::optional<std::string> value;
  std::string warning;  // e.g. "sbatch: warning: ignoring --mail-type (not supported by Muster)"

  bool operator==(const IgnoredOption&) const = default;
};

// Everything is optional; unset = not given (Slurm's default applies).
struct BatchOptions {
  std::optional<std::string> job_name;  // -J, --job-name
  // -N, --nodes=N or N-M. Both are set together; nodes_max == 0 means no maximum ("2-0").
  std::optional<int> nodes_min, nodes_max;
  std::optional<int> ntasks;           // -n, --ntasks
  std::optional<int> ntasks_per_node;  // --ntasks-per-node, --tasks-per-node
  std::optional<int> cpus_per_task;    // -c, --cpus-per-task
  std::optional<GpuRequest> gpus, gpus_per_node, gpus_per_task;  // -G, --gpus-per-*
  std::optional<std::vector<Gres>> gres;  // --gres; an empty list for --gres=none
  // --mem, --mem-per-cpu, --mem-per-gpu in MiB; K/M/G/T suffixes (K rounds up), MiB by default.
  // --mem=0 asks for all the memory of each node.
  std::optional<int64_t> mem_mb, mem_per_cpu_mb, mem_per_gpu_mb;
  // -t, --time in seconds, rounded up to whole minutes; the inner nullopt is UNLIMITED.
  std::optional<std::optional<int64_t>> time_limit;
  std::optional<std::string> partition;  // -p
  // -w, --nodelist and -x, --exclude: raw hostlist expressions (expand with hostlist.h). A value
  // with '/' (Slurm reads it as a file of host names) is refused.
  std::optional<std::string> nodelist, exclude;
  // --exclusive[=exclusive|user|mcs|topo|allocation] and -s/--oversubscribe: exclusive_mode is
  // the last value given ("exclusive" for a bare --exclusive, "oversubscribe" for -s or
  // --exclusive=oversubscribe); exclusive is true for every mode but "oversubscribe".
  bool exclusive = false;
  std::optional<std::string> exclusive_mode;
  std::optional<std::string> constraint;     // -C, --constraint (raw)
  std::optional<std::string> output, error, input;  // -o, -e, -i: filename patterns
  std::optional<std::string> chdir;          // -D, --chdir
  std::optional<ExportSpec> export_env;      // --export
  std::optional<std::string> wrap;           // --wrap
  bool parsable = false;                     // --parsable
  bool wait = false;                         // -W, --wait
  bool hold = false;                         // -H, --hold
  std::optional<bool> requeue;               // --requeue (true) / --no-requeue (false)
  bool requeue_expedite = false;             // --requeue=expedite
  std::optional<std::string> comment, account, qos;  // --comment, -A, -q
  std::optional<std::string> array;          // -a, --array: raw, parsed by array.h
  std::optional<std::string> dependency;     // -d, --dependency: raw, parsed by dependency.h
  std::optional<bool> kill_on_invalid_dep;   // --kill-on-invalid-dep=yes|no
  std::optional<std::string> begin;          // -b, --begin: raw; parseTimestamp(past=false)
  std::optional<std::string> open_mode;      // --open-mode=append|truncate
  int verbose = 0;                           // -v, repeatable
  bool quiet = false;                        // -Q
  bool help = false, usage = false, version = false;  // -h/--help, --usage, -V/--version
  std::vector<IgnoredOption> ignored;
  // The script path and its arguments (command line only; empty for --wrap or stdin).
  std::vector<std::string> positional;
};

// The sbatch command line, without argv[0]. With stop_at_positional (sbatch's behaviour) the
// first non-option and everything after it go to `positional`; without it, non-options are
// collected and option parsing goes on (GNU permutation; for tools that need it).
// Also refuses script arguments together with --wrap ("Script arguments not permitted with
// --wrap option") and heterogeneous-job separators (":").
absl::StatusOr<BatchOptions> parseSbatchArgs(const std::vector<std::string>& argv,
                                             bool stop_at_positional = true,
                                             std::string_view prog = "sbatch");

// The words of the #SBATCH lines. A word that is not an option stops them and is an error:
// "sbatch: error: Invalid directive found in batch script: <word>".
absl::StatusOr<BatchOptions> parseScriptOptions(const ScriptDirectives& directives,
                                                std::string_view prog = "sbatch");

// The SBATCH_* input variables sbatch reads (src/sbatch/opt.c env_vars). Those mapping to options
// Muster honours: SBATCH_ACCOUNT, SBATCH_ARRAY_INX, SBATCH_CONSTRAINT, SBATCH_ERROR,
// SBATCH_EXCLUSIVE, SBATCH_EXPORT, SBATCH_GPUS, SBATCH_GPUS_PER_NODE, SBATCH_GPUS_PER_TASK,
// SBATCH_GRES, SBATCH_INPUT, SBATCH_JOB_NAME, SBATCH_MEM_PER_CPU, SBATCH_MEM_PER_GPU,
// SBATCH_MEM_PER_NODE, SBATCH_NO_REQUEUE, SBATCH_OPEN_MODE, SBATCH_OUTPUT, SBATCH_PARTITION,
// SBATCH_QOS, SBATCH_REQUEUE, SBATCH_TIMELIMIT, SBATCH_WAIT (and SBATCH_DEBUG as -v). The other
// variables of that table are accepted into `ignored` like their options.
// As in Slurm, a variable for a flag sets it when its value is empty, "yes" or a non-zero
// number, and otherwise leaves it unset; an empty value for an optional argument means none.
absl::StatusOr<BatchOptions> optionsFromEnvironment(const std::map<std::string, std::string>& env,
                                                    std::string_view prog = "sbatch");

// `higher` over `lower`, field by field: a field set in `higher` wins; flags are or-ed; -v counts
// add up; `ignored` lists are concatenated; the node range (-N) and the exclusive setting move as
// one field each.
BatchOptions mergeOptions(const BatchOptions& lower, const BatchOptions& higher);

// Slurm's precedence and its checks across the three sources:
//   merge(merge(script, env), command line), then
//   - --mem, --mem-per-cpu and --mem-per-gpu given together in the script and/or on the command
//     line: "<prog>: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.";
//     one of them given there discards the others coming from the environment; two from the
//     environment alone: "... SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are
//     mutually exclusive.";
//   - --gpus-per-node with --gres=gpu...: "<prog>: fatal: --gpus-per-node and --gres=gpu are
//     mutually exclusive."
absl::StatusOr<BatchOptions> resolveBatchOptions(const BatchOptions& from_script,
                                                 const BatchOptions& from_env,
                                                 const BatchOptions& from_command_line,
                                                 std::string_view prog = "sbatch");

// The job name sbatch uses when -J is not given: "wrap" for --wrap, the base name of the
// script, or "sbatch" for a script read from stdin (sbatch.1 --job-name).
std::string defaultJobName(const BatchOptions& options);

// srun inside a job (or as Open MPI's plm/slurm launches it:
// "srun --ntasks-per-node=1 --kill-on-bad-exit --cpu_bind=none --nodes=N --nodelist=h1,h2
//  --ntasks=N orted ..." for Open MPI 4.1, and PRRTE's "--external-launcher --mpi=none"
// variants; SLURM_CPU_BIND=none in the environment).
struct SrunOptions {
  std::optional<std::string> job_name;
  std::optional<int> nodes_min, nodes_max;  // as in BatchOptions
  std::optional<int> ntasks;
  std::optional<int> ntasks_per_node;
  std::optional<int> cpus_per_task;
  std::optional<GpuRequest> gpus, gpus_per_node, gpus_per_task;
  std::optional<std::vector<Gres>> gres;
  std::optional<int64_t> mem_mb, mem_per_cpu_mb, mem_per_gpu_mb;
  std::optional<std::optional<int64_t>> time_limit;
  std::optional<std::string> partition, nodelist, exclude, constraint, account, qos, comment;
  std::optional<std::string> dependency;
  std::optional<std::string> output, error, input;  // srun's own patterns (%t, %n per task)
  std::optional<std::string> chdir;
  std::optional<ExportSpec> export_env;
  bool exclusive = false;
  std::optional<std::string> exclusive_mode;
  bool label = false;                      // -l, --label
  std::optional<bool> kill_on_bad_exit;    // -K, --kill-on-bad-exit[=0|1]
  std::optional<std::string> mpi;          // --mpi=none|pmi2|pmix|...|list
  std::optional<std::string> cpu_bind;     // --cpu-bind, --cpu_bind (raw, e.g. "none")
  bool external_launcher = false;          // --external-launcher
  bool overlap = false;                    // --overlap
  bool exact = false;                      // --exact
  bool whole = false;                      // --whole
  bool unbuffered = false;                 // -u, --unbuffered
  bool preserve_env = false;               // -E, --preserve-env
  bool multi_prog = false;                 // --multi-prog: the command is a configuration file
  std::optional<std::string> jobid;        // --jobid
  std::optional<int> wait_seconds;         // -W, --wait
  int verbose = 0;
  bool quiet = false;
  bool help = false, usage = false, version = false;
  std::vector<IgnoredOption> ignored;
  std::vector<std::string> command;  // the program and its arguments
};

// The srun command line without argv[0]; options stop at the first non-option (the command).
absl::StatusOr<SrunOptions> parseSrunArgs(const std::vector<std::string>& argv,
                                          std::string_view prog = "srun");

// The SLURM_* variables srun reads as options (src/srun/opt.c env_vars): SLURM_ACCOUNT,
// SLURM_CONSTRAINT, SLURM_CPU_BIND, SLURM_CPUS_PER_TASK, SLURM_DEPENDENCY, SLURM_EXACT,
// SLURM_EXCLUSIVE, SLURM_EXPORT_ENV (overridden by SRUN_EXPORT_ENV), SLURM_EXTERNAL_LAUNCHER,
// SLURM_GPUS, SLURM_GPUS_PER_NODE, SLURM_GPUS_PER_TASK, SLURM_GRES, SLURM_JOB_ID (--jobid),
// SLURM_JOB_NAME, SLURM_JOB_NUM_NODES (-N), SLURM_KILL_BAD_EXIT, SLURM_LABELIO, SLURM_MEM_PER_CPU,
// SLURM_MEM_PER_GPU, SLURM_MEM_PER_NODE, SLURM_MPI_TYPE, SLURM_NPROCS and SLURM_NTASKS (-n),
// SLURM_NTASKS_PER_NODE, SLURM_OVERLAP, SLURM_PARTITION, SLURM_QOS, SLURM_REMOTE_CWD and
// SLURM_WORKING_DIR (-D), SLURM_STDERRMODE, SLURM_STDINMODE, SLURM_STDOUTMODE, SLURM_TIMELIMIT,
// SLURM_UNBUFFEREDIO, SLURM_WAIT. Note that SLURM_JOB_NODELIST is the allocation, not -w.
absl::StatusOr<SrunOptions> srunOptionsFromEnvironment(
    const std::map<std::string, std::string>& env, std::string_view prog = "srun");

// The command line over the environment, field by field, with srun's rule (src/srun/opt.c
// _opt_verify): when --ntasks came from the environment, -N from the command line and
// --ntasks-per-node is set, the inherited --ntasks is dropped so that -N x --ntasks-per-node
// decides; and one of --mem/--mem-per-cpu/--mem-per-gpu on the command line discards the
// others from the environment.
SrunOptions mergeSrunOptions(const SrunOptions& from_env, const SrunOptions& from_command_line);

// What `sbatch --help` and `srun --help` print, made from the option table the parsers read (in
// options.cc): every option the program takes is named, with what it means in Muster, or in the
// lists of options it reads without effect, ignores with a warning, or refuses.
std::string sbatchUsage();
std::string srunUsage();

// --export's value (also SBATCH_EXPORT, SLURM_EXPORT_ENV). Entries are split at commas outside
// quotes; an entry wholly wrapped in matching quotes loses them (env.c find_quote_token).
ExportSpec parseExportSpec(std::string_view value);

}  // namespace muster::jobengine::slurm
