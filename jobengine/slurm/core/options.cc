#include "jobengine/slurm/core/options.h"

#include <array>
#include <climits>
#include <functional>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "jobengine/slurm/core/time.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

enum class Arg { kNone, kRequired, kOptional };

enum Program : unsigned { kSbatch = 1, kSrun = 2, kBoth = 3 };

// What Muster does with an option. Every handled option has its own id; kIgnore and kRefuse are
// shared by the options that are accepted-and-ignored or refused.
enum class Opt {
  kIgnore,
  kRefuse,
  kAccount,
  kArray,
  kBegin,
  kChdir,
  kComment,
  kConstraint,
  kCpuBind,
  kCpusPerTask,
  kDependency,
  kError,
  kExact,
  kExclude,
  kExclusive,
  kExport,
  kExternalLauncher,
  kGpus,
  kGpusPerNode,
  kGpusPerTask,
  kGres,
  kHelp,
  kHold,
  kInput,
  kJobName,
  kJobid,
  kKillOnBadExit,
  kKillOnInvalidDep,
  kLabel,
  kMem,
  kMemPerCpu,
  kMemPerGpu,
  kMpi,
  kMultiProg,
  kNoRequeue,
  kNodelist,
  kNodes,
  kNtasks,
  kNtasksPerNode,
  kOpenMode,
  kOutput,
  kOverlap,
  kOversubscribe,
  kParsable,
  kPartition,
  kPreserveEnv,
  kQos,
  kQuiet,
  kRequeue,
  kTime,
  kUnbuffered,
  kUsage,
  kVerbose,
  kVersion,
  kWait,
  kWaitSeconds,
  kWhole,
  kWrap,
};

struct Spec {
  std::string_view name;
  Arg arg;
  char short_name;  // '\0' for none
  unsigned programs;
  Opt id;
};

constexpr Arg N = Arg::kNone;
constexpr Arg R = Arg::kRequired;
constexpr Arg O = Arg::kOptional;

// Slurm's common_options[] (src/common/slurm_opt.c), in its order (which is the order glibc lists
// an ambiguous abbreviation's candidates in), restricted to the options sbatch or srun take.
constexpr std::array kSpecs = {
    Spec{"accel-bind", R, 0, kSrun, Opt::kIgnore},
    Spec{"account", R, 'A', kBoth, Opt::kAccount},
    Spec{"acctg-freq", R, 0, kBoth, Opt::kIgnore},
    Spec{"array", R, 'a', kSbatch, Opt::kArray},
    Spec{"async", N, 0, kSrun, Opt::kIgnore},
    Spec{"autocomplete", R, 0, kBoth, Opt::kRefuse},
    Spec{"batch", R, 0, kSbatch, Opt::kIgnore},
    Spec{"bcast", O, 0, kSrun, Opt::kIgnore},
    Spec{"bcast-exclude", R, 0, kSrun, Opt::kIgnore},
    Spec{"begin", R, 'b', kBoth, Opt::kBegin},
    Spec{"bb", R, 0, kBoth, Opt::kIgnore},
    Spec{"bbf", R, 0, kBoth, Opt::kIgnore},
    Spec{"cluster-constraint", R, 0, kBoth, Opt::kIgnore},
    Spec{"chdir", R, 'D', kBoth, Opt::kChdir},
    Spec{"cluster", R, 0, kBoth, Opt::kIgnore},
    Spec{"clusters", R, 'M', kBoth, Opt::kIgnore},
    Spec{"comment", R, 0, kBoth, Opt::kComment},
    Spec{"compress", O, 0, kSrun, Opt::kIgnore},
    Spec{"consolidate-segments", N, 0, kBoth, Opt::kIgnore},
    Spec{"container", R, 0, kBoth, Opt::kRefuse},
    Spec{"container-id", R, 0, kBoth, Opt::kIgnore},
    Spec{"context", R, 0, kBoth, Opt::kIgnore},
    Spec{"contiguous", N, 0, kBoth, Opt::kIgnore},
    Spec{"constraint", R, 'C', kBoth, Opt::kConstraint},
    Spec{"core-spec", R, 'S', kBoth, Opt::kIgnore},
    Spec{"cores-per-socket", R, 0, kBoth, Opt::kIgnore},
    Spec{"cpu-bind", R, 0, kSrun, Opt::kCpuBind},
    Spec{"cpu_bind", R, 0, kSrun, Opt::kCpuBind},
    Spec{"cpu-freq", R, 0, kBoth, Opt::kIgnore},
    Spec{"cpus-per-gpu", R, 0, kBoth, Opt::kIgnore},
    Spec{"cpus-per-task", R, 'c', kBoth, Opt::kCpusPerTask},
    Spec{"deadline", R, 0, kBoth, Opt::kIgnore},
    Spec{"debugger-test", N, 0, kSrun, Opt::kIgnore},
    Spec{"delay-boot", R, 0, kBoth, Opt::kIgnore},
    Spec{"dependency", R, 'd', kBoth, Opt::kDependency},
    Spec{"disable-status", N, 'X', kSrun, Opt::kIgnore},
    Spec{"distribution", R, 'm', kBoth, Opt::kIgnore},
    Spec{"epilog", R, 0, kSrun, Opt::kIgnore},
    Spec{"error", R, 'e', kBoth, Opt::kError},
    Spec{"exact", N, 0, kSrun, Opt::kExact},
    Spec{"exclude", R, 'x', kBoth, Opt::kExclude},
    Spec{"exclusive", O, 0, kBoth, Opt::kExclusive},
    Spec{"export", R, 0, kBoth, Opt::kExport},
    Spec{"export-file", R, 0, kSbatch, Opt::kRefuse},
    Spec{"external", N, 0, kSbatch, Opt::kRefuse},
    Spec{"external-launcher", O, 0, kSrun, Opt::kExternalLauncher},
    Spec{"extra", R, 0, kBoth, Opt::kIgnore},
    Spec{"extra-node-info", R, 'B', kBoth, Opt::kIgnore},
    Spec{"get-user-env", N, 0, kSbatch, Opt::kIgnore},
    Spec{"gid", R, 0, kSbatch, Opt::kRefuse},
    Spec{"gpu-bind", R, 0, kBoth, Opt::kIgnore},
    Spec{"gpu-freq", R, 0, kBoth, Opt::kIgnore},
    Spec{"gpus", R, 'G', kBoth, Opt::kGpus},
    Spec{"gpus-per-node", R, 0, kBoth, Opt::kGpusPerNode},
    Spec{"gpus-per-socket", R, 0, kBoth, Opt::kIgnore},
    Spec{"gpus-per-task", R, 0, kBoth, Opt::kGpusPerTask},
    Spec{"gres", R, 0, kBoth, Opt::kGres},
    Spec{"gres-flags", R, 0, kBoth, Opt::kIgnore},
    Spec{"help", N, 'h', kBoth, Opt::kHelp},
    Spec{"het-group", R, 0, kSrun, Opt::kRefuse},
    Spec{"hint", R, 0, kBoth, Opt::kIgnore},
    Spec{"hold", N, 'H', kBoth, Opt::kHold},
    Spec{"ignore-pbs", N, 0, kSbatch, Opt::kIgnore},
    Spec{"ignore-signals", R, 0, kSrun, Opt::kIgnore},
    Spec{"immediate", O, 'I', kSrun, Opt::kIgnore},
    Spec{"input", R, 'i', kBoth, Opt::kInput},
    Spec{"interactive", N, 0, kSrun, Opt::kIgnore},
    Spec{"jobid", R, 0, kSrun, Opt::kJobid},
    Spec{"job-name", R, 'J', kBoth, Opt::kJobName},
    Spec{"kill-on-bad-exit", O, 'K', kSrun, Opt::kKillOnBadExit},
    Spec{"kill-on-invalid-dep", R, 0, kSbatch, Opt::kKillOnInvalidDep},
    Spec{"label", N, 'l', kSrun, Opt::kLabel},
    Spec{"licenses", R, 'L', kBoth, Opt::kIgnore},
    Spec{"mail-type", R, 0, kBoth, Opt::kIgnore},
    Spec{"mail-user", R, 0, kBoth, Opt::kIgnore},
    Spec{"threads", R, 'T', kSrun, Opt::kIgnore},
    Spec{"mcs-label", R, 0, kBoth, Opt::kIgnore},
    Spec{"mem", R, 0, kBoth, Opt::kMem},
    Spec{"mem-bind", R, 0, kBoth, Opt::kIgnore},
    Spec{"mem-per-cpu", R, 0, kBoth, Opt::kMemPerCpu},
    Spec{"mem-per-gpu", R, 0, kBoth, Opt::kMemPerGpu},
    Spec{"mem-update", R, 0, kBoth, Opt::kIgnore},
    Spec{"mincpus", R, 0, kBoth, Opt::kIgnore},
    Spec{"mpi", R, 0, kSrun, Opt::kMpi},
    Spec{"msg-timeout", R, 0, kSrun, Opt::kIgnore},
    Spec{"multi-prog", N, 0, kSrun, Opt::kMultiProg},
    Spec{"network", R, 0, kBoth, Opt::kIgnore},
    Spec{"nice", O, 0, kBoth, Opt::kIgnore},
    Spec{"no-allocate", N, 'Z', kSrun, Opt::kRefuse},
    Spec{"no-kill", O, 'k', kBoth, Opt::kIgnore},
    Spec{"no-requeue", N, 0, kSbatch, Opt::kNoRequeue},
    Spec{"nodefile", R, 'F', kBoth, Opt::kRefuse},
    Spec{"nodelist", R, 'w', kBoth, Opt::kNodelist},
    Spec{"nodes", R, 'N', kBoth, Opt::kNodes},
    Spec{"ntasks", R, 'n', kBoth, Opt::kNtasks},
    Spec{"ntasks-per-core", R, 0, kBoth, Opt::kIgnore},
    Spec{"ntasks-per-gpu", R, 0, kBoth, Opt::kIgnore},
    Spec{"ntasks-per-node", R, 0, kBoth, Opt::kNtasksPerNode},
    Spec{"ntasks-per-socket", R, 0, kBoth, Opt::kIgnore},
    Spec{"ntasks-per-tres", R, 0, kBoth, Opt::kIgnore},
    Spec{"oom-kill-step", O, 0, kBoth, Opt::kIgnore},
    Spec{"open-mode", R, 0, kBoth, Opt::kOpenMode},
    Spec{"output", R, 'o', kBoth, Opt::kOutput},
    Spec{"overcommit", N, 'O', kBoth, Opt::kIgnore},
    Spec{"overlap", O, 0, kSrun, Opt::kOverlap},
    Spec{"oversubscribe", N, 's', kBoth, Opt::kOversubscribe},
    Spec{"pack-group", R, 0, kSrun, Opt::kRefuse},
    Spec{"parsable", N, 0, kBoth, Opt::kParsable},
    Spec{"partition", R, 'p', kBoth, Opt::kPartition},
    Spec{"prefer", R, 0, kBoth, Opt::kIgnore},
    Spec{"preserve-env", N, 'E', kSrun, Opt::kPreserveEnv},
    Spec{"priority", R, 0, kBoth, Opt::kIgnore},
    Spec{"profile", R, 0, kBoth, Opt::kIgnore},
    Spec{"prolog", R, 0, kSrun, Opt::kIgnore},
    Spec{"propagate", O, 0, kBoth, Opt::kIgnore},
    Spec{"pty", O, 0, kSrun, Opt::kRefuse},
    Spec{"qos", R, 'q', kBoth, Opt::kQos},
    Spec{"quiet", N, 'Q', kBoth, Opt::kQuiet},
    Spec{"quit-on-interrupt", N, 0, kSrun, Opt::kIgnore},
    Spec{"reboot", N, 0, kBoth, Opt::kIgnore},
    Spec{"relative", R, 'r', kSrun, Opt::kRefuse},
    Spec{"requeue", O, 0, kSbatch, Opt::kRequeue},
    Spec{"resources", R, 0, kBoth, Opt::kIgnore},
    Spec{"reservation", R, 0, kBoth, Opt::kIgnore},
    Spec{"resv-ports", O, 0, kBoth, Opt::kIgnore},
    Spec{"runtime", R, 0, kBoth, Opt::kIgnore},
    Spec{"segment", R, 0, kBoth, Opt::kIgnore},
    Spec{"send-libs", O, 0, kSrun, Opt::kIgnore},
    Spec{"signal", R, 0, kBoth, Opt::kIgnore},
    Spec{"slurmd-debug", R, 0, kSrun, Opt::kIgnore},
    Spec{"sockets-per-node", R, 0, kBoth, Opt::kIgnore},
    Spec{"spread-job", N, 0, kBoth, Opt::kIgnore},
    Spec{"spread-segments", N, 0, kBoth, Opt::kIgnore},
    Spec{"stepmgr", N, 0, kBoth, Opt::kIgnore},
    Spec{"switches", R, 0, kBoth, Opt::kIgnore},
    Spec{"task-epilog", R, 0, kSrun, Opt::kIgnore},
    Spec{"task-prolog", R, 0, kSrun, Opt::kIgnore},
    Spec{"tasks-per-node", R, 0, kBoth, Opt::kNtasksPerNode},
    Spec{"test-only", N, 0, kBoth, Opt::kRefuse},
    Spec{"thread-spec", R, 0, kBoth, Opt::kIgnore},
    Spec{"threads-per-core", R, 0, kBoth, Opt::kIgnore},
    Spec{"time", R, 't', kBoth, Opt::kTime},
    Spec{"time-min", R, 0, kBoth, Opt::kIgnore},
    Spec{"tmp", R, 0, kBoth, Opt::kIgnore},
    Spec{"treewidth", R, 0, kSrun, Opt::kIgnore},
    Spec{"tres-bind", R, 0, kBoth, Opt::kIgnore},
    Spec{"tres-per-task", R, 0, kBoth, Opt::kIgnore},
    Spec{"uid", R, 0, kSbatch, Opt::kRefuse},
    Spec{"unbuffered", N, 'u', kSrun, Opt::kUnbuffered},
    Spec{"use-min-nodes", N, 0, kBoth, Opt::kIgnore},
    Spec{"verbose", N, 'v', kBoth, Opt::kVerbose},
    Spec{"version", N, 'V', kBoth, Opt::kVersion},
    Spec{"usage", N, 0, kBoth, Opt::kUsage},
    Spec{"wait", N, 'W', kSbatch, Opt::kWait},
    Spec{"wait-all-nodes", R, 0, kSbatch, Opt::kIgnore},
    Spec{"wait", R, 'W', kSrun, Opt::kWaitSeconds},
    Spec{"wait-for-children", N, 0, kSrun, Opt::kIgnore},
    Spec{"wckey", R, 0, kBoth, Opt::kIgnore},
    Spec{"whole", N, 0, kSrun, Opt::kWhole},
    Spec{"wrap", R, 0, kSbatch, Opt::kWrap},
    Spec{"x11", O, 0, kSrun, Opt::kIgnore},
};

// glibc compares has_arg, flag and val to decide whether two abbreviation candidates are the
// same option; Slurm's val is the short letter or a LONG_OPT_* code shared only by aliases.
int getoptVal(const Spec& s) {
  if (s.short_name) return static_cast<unsigned char>(s.short_name);
  // Aliases of one handled option (--cpu-bind/--cpu_bind, --ntasks-per-node/--tasks-per-node)
  // share their id, as they share LONG_OPT_CPU_BIND / LONG_OPT_NTASKSPERNODE in Slurm.
  if (s.id != Opt::kIgnore && s.id != Opt::kRefuse) return 1000 + static_cast<int>(s.id);
  if (s.name == "pack-group" || s.name == "het-group") return 3000;  // LONG_OPT_HET_GROUP
  return 2000 + static_cast<int>(&s - kSpecs.data());
}

const Spec* findSpec(std::string_view name, unsigned program) {
  for (const Spec& s : kSpecs) {
    if ((s.programs & program) && s.name == name) return &s;
  }
  return nullptr;
}

struct Context {
  std::string_view prog;
  unsigned program;
  bool from_env = false;
  std::string_view env_var;  // when from_env
};

absl::Status usageError(const Context& ctx, std::string_view line) {
  return absl::InvalidArgumentError(absl::StrCat(
      av(ctx.prog), ": ", av(line), "\nTry \"", av(ctx.prog), " --help\" for more information"));
}

absl::Status error(const Context& ctx, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(av(ctx.prog), ": error: ", av(message)));
}

absl::Status fatal(std::string_view prog, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(av(prog), ": fatal: ", av(message)));
}

// ---- getopt_long ----

struct ParsedOption {
  const Spec* spec;
  std::optional<std::string> arg;
};

// Walks argv as glibc's getopt_long with a "+" option string does, calling `on_option` for each
// option in order. Returns the index of the first operand (argv.size() when there is none);
// without stop_at_positional, operands are appended to `operands` and parsing goes on.
absl::StatusOr<size_t> getoptLong(const Context& ctx, const std::vector<std::string>& argv,
                                  bool stop_at_positional, std::vector<std::string>* operands,
                                  const std::function<absl::Status(const ParsedOption&)>& on_option) {
  size_t i = 0;
  while (i < argv.size()) {
    const std::string& word = argv[i];
    if (word == "--") {
      ++i;
      if (!stop_at_positional) {
        for (; i < argv.size(); ++i) operands->push_back(argv[i]);
      }
      return i;
    }
    if (word.size() < 2 || word[0] != '-') {
      if (stop_at_positional) return i;
      operands->push_back(word);
      ++i;
      continue;
    }
    if (word[1] == '-') {
      // A long option, possibly abbreviated, possibly "--name=value".
      std::string_view rest = std::string_view(word).substr(2);
      size_t eq = rest.find('=');
      std::string_view name = rest.substr(0, eq);
      const Spec* found = nullptr;
      for (const Spec& s : kSpecs) {
        if ((s.programs & ctx.program) && s.name == name) {
          found = &s;
          break;
        }
      }
      if (!found) {
        std::vector<const Spec*> ambiguous;
        for (const Spec& s : kSpecs) {
          if (!(s.programs & ctx.program) || s.name.substr(0, name.size()) != name) continue;
          if (!found) {
            found = &s;
          } else if (found->arg != s.arg || getoptVal(*found) != getoptVal(s)) {
            if (ambiguous.empty()) ambiguous.push_back(found);
            ambiguous.push_back(&s);
          }
        }
        if (!ambiguous.empty()) {
          std::string line =
              absl::StrCat("option '--", av(rest), "' is ambiguous; possibilities:");
          for (const Spec* s : ambiguous) absl::StrAppend(&line, " '--", av(s->name), "'");
          return usageError(ctx, line);
        }
      }
      if (!found) return usageError(ctx, absl::StrCat("unrecognized option '--", av(rest), "'"));
      ParsedOption parsed{found, std::nullopt};
      ++i;
      if (eq != std::string_view::npos) {
        if (found->arg == Arg::kNone) {
          return usageError(ctx, absl::StrCat("option '--", av(found->name),
                                              "' doesn't allow an argument"));
        }
        parsed.arg = std::string(rest.substr(eq + 1));
      } else if (found->arg == Arg::kRequired) {
        if (i >= argv.size()) {
          return usageError(ctx, absl::StrCat("option '--", av(found->name),
                                              "' requires an argument"));
        }
        parsed.arg = argv[i++];
      }
      if (absl::Status s = on_option(parsed); !s.ok()) return s;
      continue;
    }
    // Short options, possibly grouped.
    ++i;
    for (size_t j = 1; j < word.size(); ++j) {
      char c = word[j];
      const Spec* found = nullptr;
      for (const Spec& s : kSpecs) {
        if ((s.programs & ctx.program) && s.short_name == c) {
          found = &s;
          break;
        }
      }
      if (!found) return usageError(ctx, absl::StrCat("invalid option -- '", std::string(1, c), "'"));
      ParsedOption parsed{found, std::nullopt};
      if (found->arg != Arg::kNone) {
        if (j + 1 < word.size()) {
          parsed.arg = word.substr(j + 1);
        } else if (found->arg == Arg::kRequired) {
          if (i >= argv.size()) {
            return usageError(ctx, absl::StrCat("option requires an argument -- '",
                                                std::string(1, c), "'"));
          }
          parsed.arg = argv[i++];
        }
        if (absl::Status s = on_option(parsed); !s.ok()) return s;
        break;
      }
      if (absl::Status s = on_option(parsed); !s.ok()) return s;
    }
  }
  return i;
}

// ---- values ----

// proc_args.c parse_int.
absl::StatusOr<int> parseInt(const Context& ctx, std::string_view name, std::string_view val,
                             bool positive) {
  size_t consumed = 0;
  int64_t result = strtolPrefix(val, &consumed);
  bool junk = consumed == 0 ? !val.empty() : consumed != val.size();
  if (junk || result < 0 || (positive && result <= 0)) {
    return error(ctx, absl::StrCat("Invalid numeric value \"", av(val), "\" for ", av(name), "."));
  }
  if (result >= INT_MAX) {
    return error(ctx, absl::StrCat("Numeric argument (", result, ") too large for ", av(name), "."));
  }
  return static_cast<int>(result);
}

bool isWhitespaceText(std::string_view s) {
  for (char c : s) {
    if (!isSpace(c)) return false;
  }
  return true;
}

// proc_args.c str_to_nodes: a count with an optional k (1024) and/or m (1024*1024) suffix.
int strToNodes(std::string_view s, std::string_view* leftover) {
  size_t consumed = 0;
  int64_t num = strtolPrefix(s, &consumed);
  if (consumed == 0) {
    *leftover = s;
    return -1;
  }
  std::string_view rest = s.substr(consumed);
  // Only counts in [0, INT_MAX] are scaled: the rest are refused below, and scaling them could
  // overflow (strtol saturates "-999...9" at INT64_MIN).
  const auto scale = [&num](int64_t factor) {
    if (num >= 0 && num <= INT_MAX) num *= factor;
  };
  if (!rest.empty() && (rest[0] == 'k' || rest[0] == 'K')) {
    scale(1024);
    rest.remove_prefix(1);
  }
  if (!rest.empty() && (rest[0] == 'm' || rest[0] == 'M')) {
    scale(1024 * 1024);
    rest.remove_prefix(1);
  }
  *leftover = rest;
  if (num < 0 || num > INT_MAX) return -1;
  return static_cast<int>(num);
}

// proc_args.c verify_node_count for "N" and "min-max".
absl::Status parseNodeCount(const Context& ctx, std::string_view arg, int* min_nodes,
                            int* max_nodes) {
  if (arg.find(',') != std::string_view::npos || arg.find(':') != std::string_view::npos) {
    return error(ctx, absl::StrCat("--nodes=", av(arg),
                                   ": a list of node counts is not supported by Muster"));
  }
  std::string_view leftover;
  if (size_t dash = arg.find('-'); dash != std::string_view::npos) {
    std::string_view min_str = arg.substr(0, dash);
    *min_nodes = strToNodes(min_str, &leftover);
    if (!isWhitespaceText(leftover)) {
      return error(ctx, absl::StrCat("\"", av(min_str), "\" is not a valid node count"));
    }
    if (*min_nodes < 0) *min_nodes = 1;
    std::string_view max_str = arg.substr(dash + 1);
    *max_nodes = strToNodes(max_str, &leftover);
    if (!isWhitespaceText(leftover)) {
      return error(ctx, absl::StrCat("\"", av(max_str), "\" is not a valid node count"));
    }
  } else {
    *min_nodes = *max_nodes = strToNodes(arg, &leftover);
    if (!isWhitespaceText(leftover) || *min_nodes < 0) {
      return error(ctx, absl::StrCat("\"", av(arg), "\" is not a valid node count"));
    }
  }
  if (*max_nodes != 0 && *max_nodes < *min_nodes) {
    return error(ctx, absl::StrFormat("Maximum node count %d is less than minimum node count %d",
                                      *max_nodes, *min_nodes));
  }
  return absl::OkStatus();
}

// proc_args.c str_to_mbytes: MiB by default; K (rounded up), M, G, T, each optionally followed by
// "B".
std::optional<int64_t> strToMbytes(std::string_view arg) {
  size_t consumed = 0;
  int64_t result = strtolPrefix(arg, &consumed);
  if (consumed == 0) return std::nullopt;
  if (result == std::numeric_limits<int64_t>::max() ||
      result == std::numeric_limits<int64_t>::min() || result < 0) {
    return std::nullopt;
  }
  std::string_view unit = arg.substr(consumed);
  if (unit.empty()) return result;
  bool ends_on_byte =
      unit.size() == 1 || (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b'));
  if (!ends_on_byte) return std::nullopt;
  switch (unit[0]) {
    case 'k':
    case 'K':
      return (result + 1023) / 1024;
    case 'm':
    case 'M':
      return result;
    case 'g':
    case 'G':
      if (result > std::numeric_limits<int64_t>::max() / 1024) return std::nullopt;
      return result * 1024;
    case 't':
    case 'T':
      if (result > std::numeric_limits<int64_t>::max() / (1024 * 1024)) return std::nullopt;
      return result * 1024 * 1024;
    default:
      return std::nullopt;
  }
}

// A gres count: digits with an optional K/M/G/T/P suffix (multiples of 1024).
std::optional<int64_t> parseGresCount(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int64_t multiplier = 1;
  switch (s.back()) {
    case 'k':
    case 'K':
      multiplier = int64_t{1} << 10;
      break;
    case 'm':
    case 'M':
      multiplier = int64_t{1} << 20;
      break;
    case 'g':
    case 'G':
      multiplier = int64_t{1} << 30;
      break;
    case 't':
    case 'T':
      multiplier = int64_t{1} << 40;
      break;
    case 'p':
    case 'P':
      multiplier = int64_t{1} << 50;
      break;
    default:
      break;
  }
  if (multiplier != 1) s.remove_suffix(1);
  std::optional<uint64_t> v = parseDigits(s);
  if (!v || *v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / multiplier)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(*v) * multiplier;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(
        s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

absl::StatusOr<std::vector<Gres>> parseGresList(const Context& ctx, std::string_view arg) {
  std::vector<Gres> out;
  if (equalsIgnoreCase(arg, "none")) return out;
  for (std::string_view entry : split(arg, ',')) {
    if (startsWithIgnoreCase(entry, "gres/")) entry.remove_prefix(5);
    std::vector<std::string_view> parts = split(entry, ':');
    Gres g;
    bool ok = !parts[0].empty() && parts.size() <= 3;
    if (ok) {
      g.name = std::string(parts[0]);
      if (parts.size() == 2) {
        if (std::optional<int64_t> count = parseGresCount(parts[1])) {
          g.count = *count;
        } else {
          ok = !parts[1].empty();
          g.type = std::string(parts[1]);
        }
      } else if (parts.size() == 3) {
        std::optional<int64_t> count = parseGresCount(parts[2]);
        ok = !parts[1].empty() && count.has_value();
        g.type = std::string(parts[1]);
        if (count) g.count = *count;
      }
    }
    if (!ok) return error(ctx, "Invalid generic resource (gres) specification");
    out.push_back(std::move(g));
  }
  return out;
}

absl::StatusOr<GpuRequest> parseGpus(const Context& ctx, std::string_view option,
                                     std::string_view arg) {
  GpuRequest r;
  std::string_view count = arg;
  if (size_t colon = arg.rfind(':'); colon != std::string_view::npos) {
    r.type = std::string(arg.substr(0, colon));
    count = arg.substr(colon + 1);
  }
  std::optional<uint64_t> n = parseDigits(count);
  if (arg.find(',') != std::string_view::npos || (r.type && r.type->empty()) || !n ||
      *n > static_cast<uint64_t>(INT_MAX)) {
    return error(ctx, absl::StrCat("Invalid ", av(option), " specification"));
  }
  r.count = static_cast<int64_t>(*n);
  return r;
}

absl::Status checkNotAFile(const Context& ctx, std::string_view option, std::string_view arg) {
  if (arg.find('/') != std::string_view::npos) {
    return error(ctx, absl::StrCat(av(option), "=", av(arg),
                                   ": reading host names from a file is not supported by Muster"));
  }
  return absl::OkStatus();
}

std::string displayName(const Spec& spec) { return absl::StrCat("--", av(spec.name)); }

IgnoredOption ignoredOption(const Context& ctx, const Spec& spec, const std::optional<std::string>& arg) {
  IgnoredOption ig;
  ig.option = displayName(spec);
  ig.value = arg;
  if (ctx.from_env) {
    ig.warning = absl::StrCat(av(ctx.prog), ": warning: ignoring ", av(ctx.env_var), " (",
                              ig.option, " is not supported by Muster)");
  } else {
    ig.warning = absl::StrCat(av(ctx.prog), ": warning: ignoring ", ig.option,
                              " (not supported by Muster)");
  }
  return ig;
}

absl::Status refused(const Context& ctx, const Spec& spec) {
  if (ctx.from_env) {
    return error(ctx, absl::StrCat(av(ctx.env_var), " (", displayName(spec),
                                   ") is not supported by Muster"));
  }
  return error(ctx, absl::StrCat(displayName(spec), " is not supported by Muster"));
}

template <typename Options>
absl::Status applyExclusive(const Context& ctx, Options& o, const std::optional<std::string>& arg) {
  std::string mode;
  if (!arg || equalsIgnoreCase(*arg, "exclusive")) {
    mode = "exclusive";
  } else if (equalsIgnoreCase(*arg, "allocation")) {
    mode = "allocation";
  } else if (equalsIgnoreCase(*arg, "oversubscribe")) {
    mode = "oversubscribe";
  } else if (equalsIgnoreCase(*arg, "user")) {
    mode = "user";
  } else if (equalsIgnoreCase(*arg, "mcs")) {
    mode = "mcs";
  } else if (equalsIgnoreCase(*arg, "topo")) {
    mode = "topo";
  } else {
    return error(ctx, "Invalid --exclusive specification");
  }
  o.exclusive = mode != "oversubscribe";
  o.exclusive_mode = mode;
  return absl::OkStatus();
}

// One option into BatchOptions or SrunOptions.
template <typename Options>
absl::Status applyOption(const Context& ctx, Options& o, const Spec& spec,
                         const std::optional<std::string>& arg) {
  constexpr bool kBatch = std::is_same_v<Options, BatchOptions>;
  const std::string value = arg.value_or("");
  switch (spec.id) {
    case Opt::kRefuse:
      return refused(ctx, spec);
    case Opt::kJobName:
      o.job_name = value;
      return absl::OkStatus();
    case Opt::kNodes: {
      int min_nodes = 0, max_nodes = 0;
      if (absl::Status s = parseNodeCount(ctx, value, &min_nodes, &max_nodes); !s.ok()) return s;
      o.nodes_min = min_nodes;
      o.nodes_max = max_nodes;
      return absl::OkStatus();
    }
    case Opt::kNtasks: {
      absl::StatusOr<int> n = parseInt(ctx, "--ntasks", value, true);
      if (!n.ok()) return n.status();
      o.ntasks = *n;
      return absl::OkStatus();
    }
    case Opt::kNtasksPerNode: {
      absl::StatusOr<int> n = parseInt(ctx, "--ntasks-per-node", value, true);
      if (!n.ok()) return n.status();
      o.ntasks_per_node = *n;
      return absl::OkStatus();
    }
    case Opt::kCpusPerTask: {
      absl::StatusOr<int> n = parseInt(ctx, "--cpus-per-task", value, true);
      if (!n.ok()) return n.status();
      o.cpus_per_task = *n;
      return absl::OkStatus();
    }
    case Opt::kGpus:
    case Opt::kGpusPerNode:
    case Opt::kGpusPerTask: {
      absl::StatusOr<GpuRequest> g = parseGpus(ctx, displayName(spec), value);
      if (!g.ok()) return g.status();
      if (spec.id == Opt::kGpus) o.gpus = *g;
      if (spec.id == Opt::kGpusPerNode) o.gpus_per_node = *g;
      if (spec.id == Opt::kGpusPerTask) o.gpus_per_task = *g;
      return absl::OkStatus();
    }
    case Opt::kGres: {
      absl::StatusOr<std::vector<Gres>> g = parseGresList(ctx, value);
      if (!g.ok()) return g.status();
      o.gres = std::move(*g);
      return absl::OkStatus();
    }
    case Opt::kMem:
    case Opt::kMemPerCpu:
    case Opt::kMemPerGpu: {
      std::optional<int64_t> mb = strToMbytes(value);
      if (!mb) return error(ctx, absl::StrCat("Invalid ", displayName(spec), " specification"));
      if (spec.id == Opt::kMem) {
        o.mem_mb = *mb;
        // srun's --mem silently discards an inherited --mem-per-cpu (arg_set_mem).
        if constexpr (!kBatch) o.mem_per_cpu_mb.reset();
      }
      if (spec.id == Opt::kMemPerCpu) o.mem_per_cpu_mb = *mb;
      if (spec.id == Opt::kMemPerGpu) o.mem_per_gpu_mb = *mb;
      return absl::OkStatus();
    }
    case Opt::kTime: {
      absl::StatusOr<std::optional<int64_t>> t = parseTimeLimit(value);
      if (!t.ok()) return error(ctx, "Invalid --time specification");
      o.time_limit = *t;
      return absl::OkStatus();
    }
    case Opt::kPartition:
      o.partition = value;
      return absl::OkStatus();
    case Opt::kNodelist:
      if (absl::Status s = checkNotAFile(ctx, "--nodelist", value); !s.ok()) return s;
      o.nodelist = value;
      return absl::OkStatus();
    case Opt::kExclude:
      if (absl::Status s = checkNotAFile(ctx, "--exclude", value); !s.ok()) return s;
      o.exclude = value;
      return absl::OkStatus();
    case Opt::kExclusive:
      return applyExclusive(ctx, o, arg);
    case Opt::kOversubscribe:
      o.exclusive = false;
      o.exclusive_mode = "oversubscribe";
      return absl::OkStatus();
    case Opt::kConstraint:
      o.constraint = value;
      return absl::OkStatus();
    case Opt::kOutput:
      o.output = value;
      return absl::OkStatus();
    case Opt::kError:
      o.error = value;
      return absl::OkStatus();
    case Opt::kInput:
      o.input = value;
      return absl::OkStatus();
    case Opt::kChdir:
      o.chdir = value;
      return absl::OkStatus();
    case Opt::kExport:
      o.export_env = parseExportSpec(value);
      return absl::OkStatus();
    case Opt::kAccount:
      o.account = value;
      return absl::OkStatus();
    case Opt::kQos:
      o.qos = value;
      return absl::OkStatus();
    case Opt::kComment:
      o.comment = value;
      return absl::OkStatus();
    case Opt::kDependency:
      o.dependency = value;
      return absl::OkStatus();
    case Opt::kVerbose:
      ++o.verbose;
      return absl::OkStatus();
    case Opt::kQuiet:
      o.quiet = true;
      return absl::OkStatus();
    case Opt::kHelp:
      o.help = true;
      return absl::OkStatus();
    case Opt::kUsage:
      o.usage = true;
      return absl::OkStatus();
    case Opt::kVersion:
      o.version = true;
      return absl::OkStatus();
    default:
      break;
  }
  if constexpr (kBatch) {
    switch (spec.id) {
      case Opt::kWrap:
        o.wrap = value;
        return absl::OkStatus();
      case Opt::kParsable:
        o.parsable = true;
        return absl::OkStatus();
      case Opt::kWait:
        o.wait = true;
        return absl::OkStatus();
      case Opt::kHold:
        o.hold = true;
        return absl::OkStatus();
      case Opt::kRequeue:
        if (!value.empty()) {
          if (!equalsIgnoreCase(value, "expedite")) {
            return error(ctx, "Invalid --requeue specification");
          }
          o.requeue_expedite = true;
        }
        o.requeue = true;
        return absl::OkStatus();
      case Opt::kNoRequeue:
        o.requeue = false;
        return absl::OkStatus();
      case Opt::kArray:
        o.array = value;
        return absl::OkStatus();
      case Opt::kKillOnInvalidDep:
        if (equalsIgnoreCase(value, "yes")) {
          o.kill_on_invalid_dep = true;
        } else if (equalsIgnoreCase(value, "no")) {
          o.kill_on_invalid_dep = false;
        } else {
          return error(ctx, "Invalid --kill-on-invalid-dep specification");
        }
        return absl::OkStatus();
      case Opt::kBegin: {
        // Slurm checks the syntax when the option is read (parse_time(arg, 0)); the time itself
        // is taken against the real clock later, so any fixed reference does for the check.
        absl::Time reference = absl::FromUnixSeconds(1700000000);
        if (!parseTimestamp(value, reference, false).ok()) {
          return error(ctx, "Invalid --begin specification");
        }
        o.begin = value;
        return absl::OkStatus();
      }
      case Opt::kOpenMode:
        if (!value.empty() && (value[0] == 'a' || value[0] == 'A')) {
          o.open_mode = "append";
        } else if (!value.empty() && (value[0] == 't' || value[0] == 'T')) {
          o.open_mode = "truncate";
        } else {
          return error(ctx, "Invalid --open-mode specification");
        }
        return absl::OkStatus();
      default:
        break;
    }
  } else {
    switch (spec.id) {
      case Opt::kLabel:
        o.label = true;
        return absl::OkStatus();
      case Opt::kKillOnBadExit: {
        if (!arg) {
          o.kill_on_bad_exit = true;
          return absl::OkStatus();
        }
        absl::StatusOr<int> n = parseInt(ctx, "--kill-on-bad-exit", value, false);
        if (!n.ok()) return n.status();
        o.kill_on_bad_exit = *n != 0;
        return absl::OkStatus();
      }
      case Opt::kMpi:
        o.mpi = value;
        return absl::OkStatus();
      case Opt::kCpuBind:
        o.cpu_bind = value;
        return absl::OkStatus();
      case Opt::kExternalLauncher:
        o.external_launcher = true;
        return absl::OkStatus();
      case Opt::kOverlap:
        o.overlap = true;
        return absl::OkStatus();
      case Opt::kExact:
        o.exact = true;
        return absl::OkStatus();
      case Opt::kWhole:
        o.whole = true;
        return absl::OkStatus();
      case Opt::kUnbuffered:
        o.unbuffered = true;
        return absl::OkStatus();
      case Opt::kPreserveEnv:
        o.preserve_env = true;
        return absl::OkStatus();
      case Opt::kMultiProg:
        o.multi_prog = true;
        return absl::OkStatus();
      case Opt::kJobid:
        o.jobid = value;
        return absl::OkStatus();
      case Opt::kWaitSeconds: {
        absl::StatusOr<int> n = parseInt(ctx, "--wait", value, false);
        if (!n.ok()) return n.status();
        o.wait_seconds = *n;
        return absl::OkStatus();
      }
      default:
        break;
    }
  }
  // Accepted but not honoured (including options of the other program's handled set, such as
  // srun --parsable).
  o.ignored.push_back(ignoredOption(ctx, spec, arg));
  return absl::OkStatus();
}

template <typename Options>
absl::StatusOr<Options> parseArgs(const Context& ctx, const std::vector<std::string>& argv,
                                  bool stop_at_positional, std::vector<std::string>* operands,
                                  size_t* first_operand) {
  Options o;
  absl::StatusOr<size_t> end = getoptLong(
      ctx, argv, stop_at_positional, operands,
      [&](const ParsedOption& p) { return applyOption(ctx, o, *p.spec, p.arg); });
  if (!end.ok()) return end.status();
  *first_operand = *end;
  return o;
}

// ---- environment ----

struct EnvVar {
  std::string_view var;
  std::string_view option;  // the long option it stands for; empty for variables without one
};

// src/sbatch/opt.c early_env_vars and env_vars, in order (a later one overrides an earlier one).
constexpr std::array kSbatchEnv = {
    EnvVar{"SBATCH_IGNORE_PBS", "ignore-pbs"},
    EnvVar{"SBATCH_DEBUG", "verbose"},
    EnvVar{"SBATCH_ACCOUNT", "account"},
    EnvVar{"SBATCH_ARRAY_INX", "array"},
    EnvVar{"SBATCH_ACCTG_FREQ", "acctg-freq"},
    EnvVar{"SBATCH_BATCH", "batch"},
    EnvVar{"SBATCH_BURST_BUFFER", "bb"},
    EnvVar{"SBATCH_CLUSTER_CONSTRAINT", "cluster-constraint"},
    EnvVar{"SBATCH_CLUSTERS", "clusters"},
    EnvVar{"SLURM_CLUSTERS", "clusters"},
    EnvVar{"SBATCH_CONSOLIDATE_SEGMENTS", "consolidate-segments"},
    EnvVar{"SBATCH_CONTAINER", "container"},
    EnvVar{"SBATCH_CONTAINER_ID", "container-id"},
    EnvVar{"SBATCH_RUNTIME", "runtime"},
    EnvVar{"SBATCH_CONSTRAINT", "constraint"},
    EnvVar{"SBATCH_CORE_SPEC", "core-spec"},
    EnvVar{"SBATCH_CPU_FREQ_REQ", "cpu-freq"},
    EnvVar{"SBATCH_CPUS_PER_GPU", "cpus-per-gpu"},
    EnvVar{"SBATCH_DELAY_BOOT", "delay-boot"},
    EnvVar{"SBATCH_DISTRIBUTION", "distribution"},
    EnvVar{"SBATCH_EXCLUSIVE", "exclusive"},
    EnvVar{"SBATCH_EXPORT", "export"},
    EnvVar{"SBATCH_GET_USER_ENV", "get-user-env"},
    EnvVar{"SBATCH_GRES", "gres"},
    EnvVar{"SBATCH_GRES_FLAGS", "gres-flags"},
    EnvVar{"SBATCH_GPUS", "gpus"},
    EnvVar{"SBATCH_GPU_BIND", "gpu-bind"},
    EnvVar{"SBATCH_GPU_FREQ", "gpu-freq"},
    EnvVar{"SBATCH_GPUS_PER_NODE", "gpus-per-node"},
    EnvVar{"SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"},
    EnvVar{"SBATCH_GPUS_PER_TASK", "gpus-per-task"},
    EnvVar{"SLURM_HINT", "hint"},
    EnvVar{"SBATCH_HINT", "hint"},
    EnvVar{"SBATCH_JOB_NAME", "job-name"},
    EnvVar{"SBATCH_MEM_BIND", "mem-bind"},
    EnvVar{"SBATCH_MEM_PER_CPU", "mem-per-cpu"},
    EnvVar{"SBATCH_MEM_PER_GPU", "mem-per-gpu"},
    EnvVar{"SBATCH_MEM_PER_NODE", "mem"},
    EnvVar{"SBATCH_NETWORK", "network"},
    EnvVar{"SBATCH_NO_KILL", "no-kill"},
    EnvVar{"SBATCH_NO_REQUEUE", "no-requeue"},
    EnvVar{"SBATCH_OPEN_MODE", "open-mode"},
    EnvVar{"SBATCH_OVERCOMMIT", "overcommit"},
    EnvVar{"SBATCH_PARTITION", "partition"},
    EnvVar{"SBATCH_POWER", ""},
    EnvVar{"SBATCH_PROFILE", "profile"},
    EnvVar{"SBATCH_QOS", "qos"},
    EnvVar{"SBATCH_REQ_SWITCH", ""},
    EnvVar{"SBATCH_REQUEUE", "requeue"},
    EnvVar{"SBATCH_RESERVATION", "reservation"},
    EnvVar{"SBATCH_SEGMENT_SIZE", "segment"},
    EnvVar{"SBATCH_SIGNAL", "signal"},
    EnvVar{"SBATCH_SPREAD_JOB", "spread-job"},
    EnvVar{"SBATCH_SPREAD_SEGMENTS", "spread-segments"},
    EnvVar{"SBATCH_THREAD_SPEC", "thread-spec"},
    EnvVar{"SBATCH_THREADS_PER_CORE", "threads-per-core"},
    EnvVar{"SBATCH_TIMELIMIT", "time"},
    EnvVar{"SBATCH_TRES_BIND", "tres-bind"},
    EnvVar{"SBATCH_TRES_PER_TASK", "tres-per-task"},
    EnvVar{"SBATCH_USE_MIN_NODES", "use-min-nodes"},
    EnvVar{"SBATCH_WAIT", "wait"},
    EnvVar{"SBATCH_WAIT_ALL_NODES", "wait-all-nodes"},
    EnvVar{"SBATCH_WAIT4SWITCH", ""},
    EnvVar{"SBATCH_WCKEY", "wckey"},
    EnvVar{"SBATCH_ERROR", "error"},
    EnvVar{"SBATCH_INPUT", "input"},
    EnvVar{"SBATCH_OUTPUT", "output"},
};

// src/srun/opt.c env_vars, in order.
constexpr std::array kSrunEnv = {
    EnvVar{"SLURM_ACCOUNT", "account"},
    EnvVar{"SLURM_ACCTG_FREQ", "acctg-freq"},
    EnvVar{"SLURM_BCAST", "bcast"},
    EnvVar{"SLURM_BCAST_EXCLUDE", "bcast-exclude"},
    EnvVar{"SLURM_BURST_BUFFER", "bb"},
    EnvVar{"SLURM_CLUSTERS", "clusters"},
    EnvVar{"SLURM_CLUSTER_CONSTRAINT", "cluster-constraint"},
    EnvVar{"SLURM_COMPRESS", "compress"},
    EnvVar{"SLURM_CONSOLIDATE_SEGMENTS", "consolidate-segments"},
    EnvVar{"SLURM_CONSTRAINT", "constraint"},
    EnvVar{"SLURM_CORE_SPEC", "core-spec"},
    EnvVar{"SLURM_CPUS_PER_TASK", "cpus-per-task"},
    EnvVar{"SLURM_CPU_BIND", "cpu-bind"},
    EnvVar{"SLURM_CPU_FREQ_REQ", "cpu-freq"},
    EnvVar{"SLURM_CPUS_PER_GPU", "cpus-per-gpu"},
    EnvVar{"SLURM_DELAY_BOOT", "delay-boot"},
    EnvVar{"SLURM_DEPENDENCY", "dependency"},
    EnvVar{"SLURM_DISABLE_STATUS", "disable-status"},
    EnvVar{"SLURM_DISTRIBUTION", "distribution"},
    EnvVar{"SLURM_EPILOG", "epilog"},
    EnvVar{"SLURM_EXACT", "exact"},
    EnvVar{"SLURM_EXCLUSIVE", "exclusive"},
    EnvVar{"SLURM_EXPORT_ENV", "export"},
    EnvVar{"SRUN_EXPORT_ENV", "export"},
    EnvVar{"SLURM_EXTERNAL_LAUNCHER", "external-launcher"},
    EnvVar{"SLURM_GPUS", "gpus"},
    EnvVar{"SLURM_GPU_BIND", "gpu-bind"},
    EnvVar{"SLURM_GPU_FREQ", "gpu-freq"},
    EnvVar{"SLURM_GPUS_PER_NODE", "gpus-per-node"},
    EnvVar{"SLURM_GPUS_PER_SOCKET", "gpus-per-socket"},
    EnvVar{"SLURM_GPUS_PER_TASK", "gpus-per-task"},
    EnvVar{"SLURM_GRES", "gres"},
    EnvVar{"SLURM_GRES_FLAGS", "gres-flags"},
    EnvVar{"SLURM_HINT", "hint"},
    EnvVar{"SLURM_JOB_ID", "jobid"},
    EnvVar{"SLURM_JOB_NAME", "job-name"},
    EnvVar{"SLURM_JOB_NUM_NODES", "nodes"},
    EnvVar{"SLURM_KILL_BAD_EXIT", "kill-on-bad-exit"},
    EnvVar{"SLURM_LABELIO", "label"},
    EnvVar{"SLURM_MEM_BIND", "mem-bind"},
    EnvVar{"SLURM_MEM_PER_CPU", "mem-per-cpu"},
    EnvVar{"SLURM_MEM_PER_GPU", "mem-per-gpu"},
    EnvVar{"SLURM_MEM_PER_NODE", "mem"},
    EnvVar{"SLURM_MPI_TYPE", "mpi"},
    EnvVar{"SLURM_NCORES_PER_SOCKET", "cores-per-socket"},
    EnvVar{"SLURM_NETWORK", "network"},
    EnvVar{"SLURM_NO_KILL", "no-kill"},
    EnvVar{"SLURM_NPROCS", "ntasks"},
    EnvVar{"SLURM_NTASKS", "ntasks"},
    EnvVar{"SLURM_NSOCKETS_PER_NODE", "sockets-per-node"},
    EnvVar{"SLURM_NTASKS_PER_CORE", "ntasks-per-core"},
    EnvVar{"SLURM_NTASKS_PER_NODE", "ntasks-per-node"},
    EnvVar{"SLURM_NTASKS_PER_GPU", "ntasks-per-gpu"},
    EnvVar{"SLURM_NTASKS_PER_TRES", "ntasks-per-tres"},
    EnvVar{"SLURM_OOM_KILL_STEP", "oom-kill-step"},
    EnvVar{"SLURM_OPEN_MODE", "open-mode"},
    EnvVar{"SLURM_OVERCOMMIT", "overcommit"},
    EnvVar{"SLURM_OVERLAP", "overlap"},
    EnvVar{"SLURM_PARTITION", "partition"},
    EnvVar{"SLURM_POWER", ""},
    EnvVar{"SLURM_PROFILE", "profile"},
    EnvVar{"SLURM_PROLOG", "prolog"},
    EnvVar{"SLURM_QOS", "qos"},
    EnvVar{"SLURM_REMOTE_CWD", "chdir"},
    EnvVar{"SLURM_REQ_SWITCH", ""},
    EnvVar{"SLURM_RESERVATION", "reservation"},
    EnvVar{"SLURM_RESV_PORTS", "resv-ports"},
    EnvVar{"SLURM_SEND_LIBS", "send-libs"},
    EnvVar{"SLURM_SIGNAL", "signal"},
    EnvVar{"SLURM_SPREAD_JOB", "spread-job"},
    EnvVar{"SLURM_SPREAD_SEGMENTS", "spread-segments"},
    EnvVar{"SLURM_SRUN_MULTI", "multi-prog"},
    EnvVar{"SLURM_STDERRMODE", "error"},
    EnvVar{"SLURM_STDINMODE", "input"},
    EnvVar{"SLURM_STDOUTMODE", "output"},
    EnvVar{"SLURM_TASK_EPILOG", "task-epilog"},
    EnvVar{"SLURM_TASK_PROLOG", "task-prolog"},
    EnvVar{"SLURM_THREAD_SPEC", "thread-spec"},
    EnvVar{"SLURM_THREADS", "threads"},
    EnvVar{"SLURM_THREADS_PER_CORE", "threads-per-core"},
    EnvVar{"SLURM_TIMELIMIT", "time"},
    EnvVar{"SLURM_TRES_BIND", "tres-bind"},
    EnvVar{"SLURM_TRES_PER_TASK", "tres-per-task"},
    EnvVar{"SLURM_UNBUFFEREDIO", "unbuffered"},
    EnvVar{"SLURM_USE_MIN_NODES", "use-min-nodes"},
    EnvVar{"SLURM_WAIT", "wait"},
    EnvVar{"SLURM_WAIT4SWITCH", ""},
    EnvVar{"SLURM_WCKEY", "wckey"},
    EnvVar{"SLURM_WORKING_DIR", "chdir"},
    EnvVar{"SLURMD_DEBUG", "slurmd-debug"},
    EnvVar{"SRUN_CONTAINER", "container"},
    EnvVar{"SRUN_CONTAINER_ID", "container-id"},
    EnvVar{"SRUN_RUNTIME", "runtime"},
    EnvVar{"SLURM_DEBUG", "verbose"},
    EnvVar{"SRUN_ERROR", "error"},
    EnvVar{"SRUN_INPUT", "input"},
    EnvVar{"SRUN_OUTPUT", "output"},
    EnvVar{"SRUN_SEGMENT_SIZE", "segment"},
};

// slurm_process_option with set_by_env: a flag is set by "", "yes" or a non-zero number and left
// unset otherwise; an empty value for an optional argument means no argument.
template <typename Options, size_t kN>
absl::StatusOr<Options> fromEnvironment(const std::array<EnvVar, kN>& table, unsigned program,
                                        const std::map<std::string, std::string>& env,
                                        std::string_view prog) {
  Options o;
  for (const EnvVar& e : table) {
    auto it = env.find(std::string(e.var));
    if (it == env.end()) continue;
    const std::string& value = it->second;
    Context ctx{prog, program, true, e.var};
    if (e.option.empty()) {
      IgnoredOption ig;
      ig.option = std::string(e.var);
      ig.value = value;
      ig.warning = absl::StrCat(av(prog), ": warning: ignoring ", av(e.var),
                                " (not supported by Muster)");
      o.ignored.push_back(std::move(ig));
      continue;
    }
    const Spec* spec = findSpec(e.option, program);
    if (!spec) continue;
    std::optional<std::string> arg = value;
    if (spec->arg == Arg::kNone) {
      size_t consumed = 0;
      bool set = value.empty() || equalsIgnoreCase(value, "yes") ||
                 (strtolPrefix(value, &consumed) != 0 && consumed == value.size());
      if (!set) continue;
      arg.reset();
    } else if (spec->arg == Arg::kOptional && value.empty()) {
      arg.reset();
    }
    if (absl::Status s = applyOption(ctx, o, *spec, arg); !s.ok()) return s;
  }
  return o;
}

template <typename T>
void pick(std::optional<T>& out, const std::optional<T>& lower, const std::optional<T>& higher) {
  out = higher.has_value() ? higher : lower;
}

// The fields BatchOptions and SrunOptions share, merged `higher` over `lower`.
template <typename Options>
void mergeCommon(Options& m, const Options& lo, const Options& hi) {
  pick(m.job_name, lo.job_name, hi.job_name);
  if (hi.nodes_min) {
    m.nodes_min = hi.nodes_min;
    m.nodes_max = hi.nodes_max;
  } else {
    m.nodes_min = lo.nodes_min;
    m.nodes_max = lo.nodes_max;
  }
  pick(m.ntasks, lo.ntasks, hi.ntasks);
  pick(m.ntasks_per_node, lo.ntasks_per_node, hi.ntasks_per_node);
  pick(m.cpus_per_task, lo.cpus_per_task, hi.cpus_per_task);
  pick(m.gpus, lo.gpus, hi.gpus);
  pick(m.gpus_per_node, lo.gpus_per_node, hi.gpus_per_node);
  pick(m.gpus_per_task, lo.gpus_per_task, hi.gpus_per_task);
  pick(m.gres, lo.gres, hi.gres);
  pick(m.mem_mb, lo.mem_mb, hi.mem_mb);
  pick(m.mem_per_cpu_mb, lo.mem_per_cpu_mb, hi.mem_per_cpu_mb);
  pick(m.mem_per_gpu_mb, lo.mem_per_gpu_mb, hi.mem_per_gpu_mb);
  pick(m.time_limit, lo.time_limit, hi.time_limit);
  pick(m.partition, lo.partition, hi.partition);
  pick(m.nodelist, lo.nodelist, hi.nodelist);
  pick(m.exclude, lo.exclude, hi.exclude);
  if (hi.exclusive_mode) {
    m.exclusive = hi.exclusive;
    m.exclusive_mode = hi.exclusive_mode;
  } else {
    m.exclusive = lo.exclusive;
    m.exclusive_mode = lo.exclusive_mode;
  }
  pick(m.constraint, lo.constraint, hi.constraint);
  pick(m.output, lo.output, hi.output);
  pick(m.error, lo.error, hi.error);
  pick(m.input, lo.input, hi.input);
  pick(m.chdir, lo.chdir, hi.chdir);
  pick(m.export_env, lo.export_env, hi.export_env);
  pick(m.comment, lo.comment, hi.comment);
  pick(m.account, lo.account, hi.account);
  pick(m.qos, lo.qos, hi.qos);
  pick(m.dependency, lo.dependency, hi.dependency);
  m.verbose = lo.verbose + hi.verbose;
  m.quiet = lo.quiet || hi.quiet;
  m.help = lo.help || hi.help;
  m.usage = lo.usage || hi.usage;
  m.version = lo.version || hi.version;
  m.ignored = lo.ignored;
  m.ignored.insert(m.ignored.end(), hi.ignored.begin(), hi.ignored.end());
}

int memoryOptionCount(const std::optional<int64_t>& a, const std::optional<int64_t>& b,
                      const std::optional<int64_t>& c) {
  return static_cast<int>(a.has_value()) + static_cast<int>(b.has_value()) +
         static_cast<int>(c.has_value());
}

}  // namespace

ExportSpec parseExportSpec(std::string_view value) {
  ExportSpec spec;
  spec.raw = std::string(value);
  if (equalsIgnoreCase(value, "ALL")) {
    spec.mode = ExportSpec::Mode::kAll;
    return spec;
  }
  if (equalsIgnoreCase(value, "NONE")) {
    spec.mode = ExportSpec::Mode::kNone;
    return spec;
  }
  if (equalsIgnoreCase(value, "NIL")) {
    spec.mode = ExportSpec::Mode::kNil;
    return spec;
  }
  spec.mode = ExportSpec::Mode::kList;
  // env.c find_quote_token: commas inside quotes do not split; a token wholly in quotes loses
  // them.
  size_t start = 0;
  while (start < value.size()) {
    bool in_single = false, in_double = false;
    size_t i = start;
    for (; i < value.size(); ++i) {
      char c = value[i];
      if (c == '\'') {
        in_single = !in_single;
      } else if (c == '"') {
        in_double = !in_double;
      } else if (c == ',' && !in_single && !in_double) {
        break;
      }
    }
    std::string_view token = value.substr(start, i - start);
    start = i + 1;
    if (token.size() >= 2 && (token.front() == '\'' || token.front() == '"') &&
        token.back() == token.front()) {
      token = token.substr(1, token.size() - 2);
    }
    if (token.empty()) continue;
    ExportSpec::Item item;
    if (equalsIgnoreCase(token, "ALL")) {
      item.kind = ExportSpec::Item::Kind::kAll;
    } else if (size_t eq = token.find('='); eq != std::string_view::npos) {
      item.kind = ExportSpec::Item::Kind::kAssignment;
      item.name = std::string(token.substr(0, eq));
      item.value = std::string(token.substr(eq + 1));
    } else {
      item.kind = ExportSpec::Item::Kind::kName;
      item.name = std::string(token);
    }
    spec.items.push_back(std::move(item));
  }
  return spec;
}

absl::StatusOr<BatchOptions> parseSbatchArgs(const std::vector<std::string>& argv,
                                             bool stop_at_positional, std::string_view prog) {
  Context ctx{prog, kSbatch, false, ""};
  for (const std::string& word : argv) {
    if (word == ":") {
      return error(ctx, "heterogeneous jobs (\":\" between components) are not supported by Muster");
    }
  }
  std::vector<std::string> operands;
  size_t first_operand = 0;
  absl::StatusOr<BatchOptions> o =
      parseArgs<BatchOptions>(ctx, argv, stop_at_positional, &operands, &first_operand);
  if (!o.ok()) return o.status();
  if (stop_at_positional) {
    o->positional.assign(argv.begin() + static_cast<std::ptrdiff_t>(first_operand), argv.end());
  } else {
    o->positional = std::move(operands);
  }
  if (o->wrap && !o->positional.empty()) {
    return error(ctx, "Script arguments not permitted with --wrap option");
  }
  return o;
}

absl::StatusOr<BatchOptions> parseScriptOptions(const ScriptDirectives& directives,
                                                std::string_view prog) {
  Context ctx{prog, kSbatch, false, ""};
  std::vector<std::string> operands;
  size_t first_operand = 0;
  absl::StatusOr<BatchOptions> o =
      parseArgs<BatchOptions>(ctx, directives.args, true, &operands, &first_operand);
  if (!o.ok()) return o.status();
  if (first_operand < directives.args.size()) {
    return error(ctx, absl::StrCat("Invalid directive found in batch script: ",
                                   directives.args[first_operand]));
  }
  return o;
}

absl::StatusOr<BatchOptions> optionsFromEnvironment(const std::map<std::string, std::string>& env,
                                                    std::string_view prog) {
  return fromEnvironment<BatchOptions>(kSbatchEnv, kSbatch, env, prog);
}

BatchOptions mergeOptions(const BatchOptions& lower, const BatchOptions& higher) {
  BatchOptions m;
  mergeCommon(m, lower, higher);
  pick(m.wrap, lower.wrap, higher.wrap);
  m.parsable = lower.parsable || higher.parsable;
  m.wait = lower.wait || higher.wait;
  m.hold = lower.hold || higher.hold;
  if (higher.requeue) {
    m.requeue = higher.requeue;
    m.requeue_expedite = higher.requeue_expedite;
  } else {
    m.requeue = lower.requeue;
    m.requeue_expedite = lower.requeue_expedite;
  }
  pick(m.array, lower.array, higher.array);
  pick(m.kill_on_invalid_dep, lower.kill_on_invalid_dep, higher.kill_on_invalid_dep);
  pick(m.begin, lower.begin, higher.begin);
  pick(m.open_mode, lower.open_mode, higher.open_mode);
  m.positional = higher.positional.empty() ? lower.positional : higher.positional;
  return m;
}

absl::StatusOr<BatchOptions> resolveBatchOptions(const BatchOptions& from_script,
                                                 const BatchOptions& from_env,
                                                 const BatchOptions& from_command_line,
                                                 std::string_view prog) {
  // Options from the script count as "set by the command line" in Slurm (set_by_env is false).
  BatchOptions cli = mergeOptions(from_script, from_command_line);
  int cli_memory = memoryOptionCount(cli.mem_mb, cli.mem_per_cpu_mb, cli.mem_per_gpu_mb);
  if (cli_memory > 1) {
    return fatal(prog, "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.");
  }
  BatchOptions env = from_env;
  if (cli_memory == 1) {
    env.mem_mb.reset();
    env.mem_per_cpu_mb.reset();
    env.mem_per_gpu_mb.reset();
  } else if (memoryOptionCount(env.mem_mb, env.mem_per_cpu_mb, env.mem_per_gpu_mb) > 1) {
    return fatal(prog,
                 "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually "
                 "exclusive.");
  }
  BatchOptions merged = mergeOptions(mergeOptions(from_script, env), from_command_line);
  if (cli_memory == 1) {
    merged.mem_mb = cli.mem_mb;
    merged.mem_per_cpu_mb = cli.mem_per_cpu_mb;
    merged.mem_per_gpu_mb = cli.mem_per_gpu_mb;
  }
  if (merged.gpus_per_node && merged.gres) {
    for (const Gres& g : *merged.gres) {
      if (g.name == "gpu") {
        return fatal(prog, "--gpus-per-node and --gres=gpu are mutually exclusive.");
      }
    }
  }
  return merged;
}

std::string defaultJobName(const BatchOptions& options) {
  if (options.wrap) return "wrap";
  if (!options.positional.empty()) {
    const std::string& script = options.positional.front();
    size_t slash = script.rfind('/');
    return slash == std::string::npos ? script : script.substr(slash + 1);
  }
  return "sbatch";
}

absl::StatusOr<SrunOptions> parseSrunArgs(const std::vector<std::string>& argv,
                                          std::string_view prog) {
  Context ctx{prog, kSrun, false, ""};
  std::vector<std::string> operands;
  size_t first_operand = 0;
  absl::StatusOr<SrunOptions> o =
      parseArgs<SrunOptions>(ctx, argv, true, &operands, &first_operand);
  if (!o.ok()) return o.status();
  if (memoryOptionCount(o->mem_mb, o->mem_per_cpu_mb, o->mem_per_gpu_mb) > 1) {
    return fatal(prog, "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.");
  }
  o->command.assign(argv.begin() + static_cast<std::ptrdiff_t>(first_operand), argv.end());
  return o;
}

absl::StatusOr<SrunOptions> srunOptionsFromEnvironment(
    const std::map<std::string, std::string>& env, std::string_view prog) {
  return fromEnvironment<SrunOptions>(kSrunEnv, kSrun, env, prog);
}

SrunOptions mergeSrunOptions(const SrunOptions& from_env, const SrunOptions& from_command_line) {
  const SrunOptions& lo = from_env;
  const SrunOptions& hi = from_command_line;
  SrunOptions m;
  mergeCommon(m, lo, hi);
  if (memoryOptionCount(hi.mem_mb, hi.mem_per_cpu_mb, hi.mem_per_gpu_mb) > 0) {
    m.mem_mb = hi.mem_mb;
    m.mem_per_cpu_mb = hi.mem_per_cpu_mb;
    m.mem_per_gpu_mb = hi.mem_per_gpu_mb;
  }
  m.label = lo.label || hi.label;
  pick(m.kill_on_bad_exit, lo.kill_on_bad_exit, hi.kill_on_bad_exit);
  pick(m.mpi, lo.mpi, hi.mpi);
  pick(m.cpu_bind, lo.cpu_bind, hi.cpu_bind);
  m.external_launcher = lo.external_launcher || hi.external_launcher;
  m.overlap = lo.overlap || hi.overlap;
  m.exact = lo.exact || hi.exact;
  m.whole = lo.whole || hi.whole;
  m.unbuffered = lo.unbuffered || hi.unbuffered;
  m.preserve_env = lo.preserve_env || hi.preserve_env;
  m.multi_prog = lo.multi_prog || hi.multi_prog;
  pick(m.jobid, lo.jobid, hi.jobid);
  pick(m.wait_seconds, lo.wait_seconds, hi.wait_seconds);
  m.command = hi.command.empty() ? lo.command : hi.command;
  // src/srun/opt.c: -N from the command line with --ntasks-per-node makes an inherited -n moot.
  if (hi.nodes_min && !hi.ntasks && lo.ntasks && m.ntasks_per_node) {
    m.ntasks.reset();
  }
  return m;
}


// ---- usage ----

namespace {

// What --help says of an option, by its long name and program (srun reads some of sbatch's
// options differently). An option of the table with no entry here is one Muster ignores with a
// warning; an entry with an empty text one it reads but that changes nothing there (srun's
// options for a job's resources: a step runs in the job's allocation as it is).
struct OptionHelp {
  std::string_view name;
  unsigned programs;
  std::string_view arg;  // the argument's name, shown as "=arg" or "[=arg]"; empty for a flag
  std::string_view text;
};

constexpr std::array kHelp = {
    OptionHelp{"account", kSbatch, "name", "the account, recorded (squeue %a, sacct)"},
    OptionHelp{"account", kSrun, "name", ""},
    OptionHelp{"array", kSbatch, "indexes", "a job array: 0-15%4, 1,3,5-9:2 (%N: N run at once)"},
    OptionHelp{"begin", kSbatch, "time",
               "hold the job until then (HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], now+N[units], ...)"},
    OptionHelp{"chdir", kSbatch, "path", "the batch script's working directory (default: here)"},
    OptionHelp{"chdir", kSrun, "path", "the tasks' working directory"},
    OptionHelp{"comment", kSbatch, "text", "a comment, recorded"},
    OptionHelp{"comment", kSrun, "text", ""},
    OptionHelp{"constraint", kSbatch, "list",
               "node labels the nodes need: a&b, a,b, a|b, key=value or key"},
    OptionHelp{"constraint", kSrun, "list", ""},
    OptionHelp{"cpu-bind", kSrun, "type", ""},
    OptionHelp{"cpu_bind", kSrun, "type", ""},
    OptionHelp{"cpus-per-task", kBoth, "ncpus", "CPUs per task"},
    OptionHelp{"dependency", kSbatch, "list",
               "after, afterany, afterok, afternotok, aftercorr:id[+min], singleton; ',' all, '?' "
               "any"},
    OptionHelp{"dependency", kSrun, "list", ""},
    OptionHelp{"disable-status", kSrun, "", "Ctrl-C sends SIGINT to the tasks at once"},
    OptionHelp{"error", kSbatch, "pattern", "the batch script's stderr (%j %x %u %N %A %a %%)"},
    OptionHelp{"error", kSrun, "pattern", "the tasks' stderr: none, a task number, or a file (%t %n %N)"},
    OptionHelp{"exact", kSrun, "", ""},
    OptionHelp{"exclude", kSbatch, "hosts", "never these (Kubernetes) nodes"},
    OptionHelp{"exclude", kSrun, "hosts", "not these nodes of the job"},
    OptionHelp{"exclusive", kSbatch, "mode", "each node (pod) gets a Kubernetes node to itself"},
    OptionHelp{"exclusive", kSrun, "mode", ""},
    OptionHelp{"export", kBoth, "ALL|NONE|[ALL,]VAR[=value],...", "the environment passed on"},
    OptionHelp{"external-launcher", kSrun, "", ""},
    OptionHelp{"gpus", kSbatch, "[type:]n", "GPUs for the whole job (a type selects nodes by "
                                            "muster.dev/gpu.model)"},
    OptionHelp{"gpus", kSrun, "[type:]n", ""},
    OptionHelp{"gpus-per-node", kSbatch, "[type:]n", "GPUs per node"},
    OptionHelp{"gpus-per-node", kSrun, "[type:]n", ""},
    OptionHelp{"gpus-per-task", kSbatch, "[type:]n", "GPUs per task"},
    OptionHelp{"gpus-per-task", kSrun, "[type:]n", "GPUs per task (each task's CUDA_VISIBLE_DEVICES)"},
    OptionHelp{"gres", kSbatch, "list", "generic resources: gpu[:type]:n"},
    OptionHelp{"gres", kSrun, "list", ""},
    OptionHelp{"help", kBoth, "", "print this usage and exit"},
    OptionHelp{"hold", kSbatch, "", "submit the job held (scontrol release starts it)"},
    OptionHelp{"input", kSbatch, "pattern", "the batch script's stdin"},
    OptionHelp{"input", kSrun, "none", "the tasks' stdin: only none (they read /dev/null)"},
    OptionHelp{"jobid", kSrun, "id", "the job to run in: only the one srun runs in (SLURM_JOB_ID)"},
    OptionHelp{"job-name", kSbatch, "name", "the job's name"},
    OptionHelp{"job-name", kSrun, "name", "the step's name (sacct)"},
    OptionHelp{"kill-on-bad-exit", kSrun, "0|1", "end the step when a task exits non-zero"},
    OptionHelp{"kill-on-invalid-dep", kSbatch, "yes|no",
               "cancel the job when its dependency can never be met (default yes)"},
    OptionHelp{"label", kSrun, "", "prefix each output line with its task number"},
    OptionHelp{"mem", kSbatch, "size[units]", "memory per node (K, M, G, T; 0: all of a node's)"},
    OptionHelp{"mem", kSrun, "size[units]", ""},
    OptionHelp{"mem-per-cpu", kSbatch, "size[units]", "memory per CPU"},
    OptionHelp{"mem-per-cpu", kSrun, "size[units]", ""},
    OptionHelp{"mem-per-gpu", kSbatch, "size[units]", "memory per GPU"},
    OptionHelp{"mem-per-gpu", kSrun, "size[units]", ""},
    OptionHelp{"mpi", kSrun, "type", ""},
    OptionHelp{"multi-prog", kSrun, "", "refused: Muster runs one program per step"},
    OptionHelp{"no-requeue", kSbatch, "", "never run the job again after a node failure"},
    OptionHelp{"nodelist", kSbatch, "hosts", "run on these (Kubernetes) nodes"},
    OptionHelp{"nodelist", kSrun, "hosts", "the step's nodes include these"},
    OptionHelp{"nodes", kSbatch, "N[-M]", "number of nodes (pods; N-M takes N)"},
    OptionHelp{"nodes", kSrun, "N[-M]", "number of nodes of the step"},
    OptionHelp{"ntasks", kBoth, "N", "number of tasks"},
    OptionHelp{"ntasks-per-node", kBoth, "N", "tasks per node"},
    OptionHelp{"open-mode", kSbatch, "append|truncate", "how the output and error files are opened"},
    OptionHelp{"output", kSbatch, "pattern",
               "the batch script's stdout (default slurm-%j.out, slurm-%A_%a.out for arrays)"},
    OptionHelp{"output", kSrun, "pattern", "the tasks' stdout: none, a task number, or a file (%t %n %N)"},
    OptionHelp{"overlap", kSrun, "", ""},
    OptionHelp{"oversubscribe", kSbatch, "", "nodes may be shared (undoes --exclusive)"},
    OptionHelp{"oversubscribe", kSrun, "", ""},
    OptionHelp{"parsable", kSbatch, "", "print only the job id"},
    OptionHelp{"partition", kSbatch, "partition", "the partition (default: the config's default)"},
    OptionHelp{"partition", kSrun, "partition", ""},
    OptionHelp{"preserve-env", kSrun, "", "the tasks keep the job's SLURM_NNODES and SLURM_NTASKS"},
    OptionHelp{"qos", kSbatch, "qos", "the quality of service, recorded"},
    OptionHelp{"qos", kSrun, "qos", ""},
    OptionHelp{"quiet", kBoth, "", "no warnings"},
    OptionHelp{"quit-on-interrupt", kSrun, "", "the first Ctrl-C ends the step"},
    OptionHelp{"requeue", kSbatch, "expedite", "run the job again after a node failure (default)"},
    OptionHelp{"tasks-per-node", kBoth, "N", "the same as --ntasks-per-node"},
    OptionHelp{"time", kSbatch, "time",
               "time limit (min, min:sec, h:min:sec, d-h[:min[:sec]], UNLIMITED; default: the "
               "partition's DefaultTime, else its MaxTime)"},
    OptionHelp{"time", kSrun, "time", ""},
    OptionHelp{"unbuffered", kSrun, "", ""},
    OptionHelp{"usage", kBoth, "", "print this usage and exit"},
    OptionHelp{"verbose", kBoth, "", "more messages (repeatable)"},
    OptionHelp{"version", kBoth, "", "print the version and exit"},
    OptionHelp{"wait", kSbatch, "", "wait until the job (every task of an array) ended; its exit code"},
    OptionHelp{"wait", kSrun, "seconds", "once a task ended, the others get this many seconds"},
    OptionHelp{"whole", kSrun, "", ""},
    OptionHelp{"wrap", kSbatch, "command", "the batch script is \"#!/bin/sh\" and this command"},
};

// Every entry of kHelp names an option its programs take (a renamed or removed option leaves no
// text behind).
constexpr bool everyHelpNamesAnOption() {
  for (const OptionHelp& h : kHelp) {
    bool found = false;
    for (const Spec& s : kSpecs) found = found || ((s.programs & h.programs) == h.programs && s.name == h.name);
    if (!found) return false;
  }
  return true;
}
static_assert(everyHelpNamesAnOption(), "an entry of kHelp names no option of kSpecs");

const OptionHelp* findHelp(const Spec& spec, unsigned program) {
  for (const OptionHelp& h : kHelp) {
    if ((h.programs & program) && h.name == spec.name) return &h;
  }
  return nullptr;
}

// "-N, --nodes=N[-M]", "    --exclusive[=mode]", "    --bcast": how --help names an option.
std::string optionSynopsis(const Spec& spec, std::string_view arg) {
  std::string out = spec.short_name ? absl::StrCat("-", std::string(1, spec.short_name), ", ")
                                    : std::string("    ");
  absl::StrAppend(&out, "--", av(spec.name));
  if (spec.arg == Arg::kRequired) absl::StrAppend(&out, "=", av(arg.empty() ? "value" : arg));
  if (spec.arg == Arg::kOptional) absl::StrAppend(&out, "[=", av(arg.empty() ? "value" : arg), "]");
  return out;
}

// Names separated by ", ", wrapped before 80 columns and indented by two spaces.
std::string wrapNames(const std::vector<std::string>& names) {
  std::string out, line = " ";
  for (size_t i = 0; i < names.size(); ++i) {
    std::string word = absl::StrCat(" ", names[i], i + 1 < names.size() ? "," : "");
    if (line.size() + word.size() > 79) {
      absl::StrAppend(&out, line, "\n");
      line = " ";
    }
    line += word;
  }
  if (line.size() > 1) absl::StrAppend(&out, line, "\n");
  return out;
}

std::string usageOf(unsigned program, std::string_view header) {
  std::string described;
  std::vector<std::string> no_effect, ignored, refused;
  for (const Spec& spec : kSpecs) {
    if (!(spec.programs & program)) continue;
    std::string name = spec.short_name
                           ? absl::StrCat("-", std::string(1, spec.short_name), "/--", av(spec.name))
                           : absl::StrCat("--", av(spec.name));
    const OptionHelp* help = findHelp(spec, program);
    if (spec.id == Opt::kRefuse) {
      refused.push_back(std::move(name));
    } else if (help == nullptr) {
      ignored.push_back(std::move(name));
    } else if (help->text.empty()) {
      no_effect.push_back(std::move(name));
    } else {
      // The synopsis, then the text from column 32 (on the next line when the synopsis reaches
      // it), wrapped before column 80.
      constexpr size_t kColumn = 32;
      std::string line = absl::StrCat("  ", optionSynopsis(spec, help->arg));
      if (line.size() + 1 > kColumn) {
        absl::StrAppend(&described, line, "\n");
        line.clear();
      }
      line.resize(kColumn, ' ');
      bool first = true;
      for (absl::string_view word : absl::StrSplit(av(help->text), ' ')) {
        if (!first && line.size() + 1 + word.size() > 79) {
          absl::StrAppend(&described, line, "\n");
          line = std::string(kColumn, ' ');
          first = true;
        }
        absl::StrAppend(&line, first ? "" : " ", word);
        first = false;
      }
      absl::StrAppend(&described, line, "\n");
    }
  }
  std::string out = absl::StrCat(av(header), "\n", described);
  if (!no_effect.empty())
    absl::StrAppend(&out, "\nRead, but without effect in the job's allocation:\n", wrapNames(no_effect));
  if (!ignored.empty())
    absl::StrAppend(&out, "\nAccepted and ignored, with a warning on stderr:\n", wrapNames(ignored));
  if (!refused.empty())
    absl::StrAppend(&out, "\nRefused (\"not supported by Muster\"):\n", wrapNames(refused));
  return out;
}

}  // namespace

std::string sbatchUsage() {
  return usageOf(kSbatch,
                 "Usage: sbatch [OPTIONS...] [script [args...]]\n"
                 "Muster's sbatch submits the script (or --wrap, or standard input) as a\n"
                 "ParallelJob of runtime slurm. Options also come from #SBATCH lines and SBATCH_*\n"
                 "variables (command line over environment over script).\n");
}

std::string srunUsage() {
  return usageOf(kSrun,
                 "Usage: srun [OPTIONS...] executable [args...]\n"
                 "Muster's srun runs a job step inside a batch job (SLURM_JOB_ID set): the tasks\n"
                 "on the job's nodes, over its SSH. Options also come from SLURM_* variables.\n");
}

}  // namespace muster::jobengine::slurm
