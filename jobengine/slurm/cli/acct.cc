#include "jobengine/slurm/cli/acct.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/time.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

absl::Status invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("sacct: error: ", av(what)));
}

absl::Status notSupported(std::string_view option, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "sacct: error: ", av(option), " is not supported by Muster's sacct (", av(why), ")"));
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(av(text), ',', absl::SkipEmpty()))
    out.emplace_back(part);
  return out;
}

absl::StatusOr<std::vector<SacctField>> parseFields(std::string_view spec) {
  std::vector<SacctField> out;
  for (const std::string& item : splitList(spec)) {
    std::string name = item;
    std::optional<int> width;
    if (auto pct = item.find('%'); pct != std::string::npos) {
      name = item.substr(0, pct);
      int w = 0;
      // Muster's bound (Slurm has none): a width is at most 1024 characters either way.
      if (!absl::SimpleAtoi(item.substr(pct + 1), &w) || w < -1024 || w > 1024)
        return invalid(absl::StrCat("Invalid field width: ", item));
      if (w != 0) width = w;
    }
    auto known = std::find_if(sacctFields().begin(), sacctFields().end(),
                              [&](const SacctField& f) { return equalsIgnoreCase(f.name, name); });
    if (known == sacctFields().end())
      return invalid(absl::StrCat("Invalid field requested: \"", name, "\""));
    out.push_back({known->name, width.value_or(known->width)});
  }
  if (out.empty()) return invalid("No fields requested");
  return out;
}

// "16G" when whole GiB, else "4000M" (Slurm's TRES memory).
std::string memory(int64_t mb) {
  return mb % 1024 == 0 ? absl::StrCat(mb / 1024, "G") : absl::StrCat(mb, "M");
}

// sacct's AllocTRES/ReqTRES: names sorted (billing, cpu, gres/gpu, mem, node).
std::string tres(int64_t cpus, std::optional<int64_t> mem_mb, int64_t gpus, int64_t nodes,
                 bool billing) {
  std::vector<std::string> parts;
  if (billing) parts.push_back(absl::StrCat("billing=", cpus));
  parts.push_back(absl::StrCat("cpu=", cpus));
  if (gpus > 0) parts.push_back(absl::StrCat("gres/gpu=", gpus));
  if (mem_mb) parts.push_back("mem=" + memory(*mem_mb));
  parts.push_back(absl::StrCat("node=", nodes));
  return absl::StrJoin(parts, ",");
}

bool started(const JobView& j) { return j.start_time != absl::InfinitePast(); }
bool ended(const JobView& j) { return j.end_time != absl::InfinitePast(); }

// One line's value of a field: the job (step = false) or its batch step.
std::string valueOf(const std::string& n, const JobView& j, bool step, absl::Time now) {
  const int64_t elapsed = runSeconds(j, now);
  const int64_t gpus_per_node = j.gpus_per_node.value_or(0);
  const int32_t step_cpus = j.batch_cpus > 0 ? j.batch_cpus : j.num_cpus;
  if (n == "JobID" || n == "JobIDRaw") {
    const std::string id = n == "JobID" ? jobIdText(j) : absl::StrCat(j.job_id);
    return step ? id + ".batch" : id;
  }
  if (n == "JobName") return step ? "batch" : j.name;
  if (n == "Partition") return step ? "" : j.partition;
  if (n == "Account") return j.account;
  if (n == "User") return step ? "" : j.user;
  if (n == "Group") return step ? "" : j.user;
  if (n == "QOS") return step ? "" : (j.qos.empty() ? "normal" : j.qos);
  if (n == "AllocCPUS" || n == "NCPUS") return absl::StrCat(!started(j) ? 0 : step ? step_cpus : j.num_cpus);
  if (n == "ReqCPUS") return absl::StrCat(step ? step_cpus : j.num_cpus);
  if (n == "NNodes" || n == "AllocNodes") return absl::StrCat(step ? 1 : j.num_nodes);
  if (n == "ReqNodes") return absl::StrCat(j.num_nodes);
  if (n == "NTasks") return step ? "1" : "";
  if (n == "NodeList") {
    if (!started(j) || j.nodes.empty()) return "None assigned";
    return step ? j.nodes.front() : compressHostlist(j.nodes);
  }
  if (n == "State") return std::string(jobStateName(j.state));
  if (n == "ExitCode") return j.exit_code;
  if (n == "DerivedExitCode") return step ? "" : j.exit_code;
  if (n == "Reason") return step ? "" : j.reason;
  if (n == "Elapsed") return formatDurationHms(elapsed);
  if (n == "ElapsedRaw") return absl::StrCat(elapsed);
  if (n == "CPUTime") return formatDurationHms(elapsed * (step ? step_cpus : j.num_cpus));
  if (n == "CPUTimeRAW") return absl::StrCat(elapsed * (step ? step_cpus : j.num_cpus));
  if (n == "Submit" || n == "Eligible") return formatTimestamp(j.submit_time);
  if (n == "Start") return formatTimestamp(j.start_time);
  if (n == "End") return formatTimestamp(j.end_time);
  if (n == "Timelimit") return step ? "" : formatDurationHms(j.time_limit);
  if (n == "TimelimitRaw")
    return step ? "" : j.time_limit ? absl::StrCat(*j.time_limit / 60) : "UNLIMITED";
  if (n == "AllocTRES") {
    if (!started(j)) return "";
    if (step) {
      const std::optional<int64_t> mem = j.mem_per_node_mb;
      return tres(step_cpus, mem, gpus_per_node, 1, false);
    }
    return tres(j.num_cpus,
                j.mem_per_node_mb ? std::optional<int64_t>(*j.mem_per_node_mb * j.num_nodes) : std::nullopt,
                gpus_per_node * j.num_nodes, j.num_nodes, true);
  }
  if (n == "ReqTRES")
    return step ? "" : tres(j.num_cpus,
                            j.mem_per_node_mb ? std::optional<int64_t>(*j.mem_per_node_mb * j.num_nodes)
                                              : std::nullopt,
                            gpus_per_node * j.num_nodes, j.num_nodes, true);
  if (n == "ReqMem") return j.mem_per_node_mb ? memory(*j.mem_per_node_mb) : "0";
  if (n == "AllocGRES" || n == "ReqGRES")
    return step || gpus_per_node <= 0 ? "" : absl::StrCat("gpu:", gpus_per_node * j.num_nodes);
  if (n == "Comment") return step ? "" : j.comment;
  if (n == "WorkDir") return step ? "" : j.work_dir;
  if (n == "Priority") return step ? "" : "0";
  return "";
}

// One line's value of a field for a step srun ran (JobView::Step).
std::string stepValueOf(const std::string& n, const JobView& j, const JobView::Step& s) {
  const int64_t elapsed =
      s.end_time > s.start_time && s.start_time != absl::InfinitePast()
          ? absl::ToInt64Seconds(s.end_time - s.start_time)
          : 0;
  if (n == "JobID") return absl::StrCat(jobIdText(j), ".", s.id);
  if (n == "JobIDRaw") return absl::StrCat(j.job_id, ".", s.id);
  if (n == "JobName") return s.name;
  if (n == "Account") return j.account;
  if (n == "AllocCPUS" || n == "NCPUS" || n == "ReqCPUS") return absl::StrCat(s.cpus);
  if (n == "NNodes" || n == "AllocNodes" || n == "ReqNodes") return absl::StrCat(s.nodes);
  if (n == "NTasks") return absl::StrCat(s.tasks);
  if (n == "NodeList") return s.node_list;
  if (n == "State") return s.state;
  if (n == "ExitCode") return s.exit_code;
  if (n == "Elapsed") return formatDurationHms(elapsed);
  if (n == "ElapsedRaw") return absl::StrCat(elapsed);
  if (n == "CPUTime") return formatDurationHms(elapsed * s.cpus);
  if (n == "CPUTimeRAW") return absl::StrCat(elapsed * s.cpus);
  if (n == "Submit" || n == "Eligible" || n == "Start") return formatTimestamp(s.start_time);
  if (n == "End") return formatTimestamp(s.end_time);
  if (n == "AllocTRES") return tres(s.cpus, std::nullopt, 0, s.nodes, false);
  if (n == "ReqMem") return j.mem_per_node_mb ? memory(*j.mem_per_node_mb) : "0";
  return "";
}

// print_fields.c: right-aligned (or left for a negative width), cut with '+'.
std::string cell(const std::string& text, int width) {
  const size_t w = static_cast<size_t>(width < 0 ? -width : width);
  std::string v = text.size() > w ? text.substr(0, w - 1) + "+" : text;
  std::string pad(w - v.size(), ' ');
  return width < 0 ? v + pad : pad + v;
}

std::string renderLine(const SacctOptions& o, const std::vector<std::string>& values,
                       bool header = false) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    // Values are other users' text (job names, comments, accounts, paths): no control character
    // reaches the terminal (util.h terminalSafe), nor a multi-byte character the width cut.
    const std::string value = terminalSafe(values[i]);
    if (o.parsable2) {
      if (i > 0) out += o.delimiter;
      out += value;
    } else if (o.parsable) {
      out += value + o.delimiter;
    } else {
      const int width = o.fields[i].width;
      // A header name is cut without '+'.
      const size_t w = static_cast<size_t>(width < 0 ? -width : width);
      out += terminalSafe(cell(header && value.size() > w ? value.substr(0, w) : value, width)) + " ";
    }
  }
  return out + "\n";
}

}  // namespace

const std::vector<SacctField>& sacctFields() {
  static const std::vector<SacctField> fields = {
      {"Account", 10},     {"AllocCPUS", 10}, {"AllocGRES", 12},  {"AllocNodes", 10},
      {"AllocTRES", 10},   {"Comment", 14},    {"CPUTime", 10},
      {"CPUTimeRAW", 10},  {"DerivedExitCode", 15}, {"Elapsed", 10}, {"ElapsedRaw", 10},
      {"Eligible", 19},    {"End", 19},       {"ExitCode", 8},    {"Group", 9},
      {"JobID", -12},      {"JobIDRaw", -12}, {"JobName", 10},    {"NCPUS", 10},
      {"NNodes", 8},       {"NodeList", 15},  {"NTasks", 8},      {"Priority", 10},
      {"Partition", 10},   {"QOS", 10},       {"Reason", 22},     {"ReqCPUS", 8},
      {"ReqGRES", 12},     {"ReqMem", 10},    {"ReqNodes", 8},    {"ReqTRES", 10},
      {"Start", 19},       {"State", 10},     {"Submit", 19},     {"Timelimit", 10},
      {"TimelimitRaw", 10}, {"User", 9},      {"WorkDir", 20},
  };
  return fields;
}

std::string_view sacctUsage() {
  // Every option of kOptions in parseSacctArgs below.
  return "Usage: sacct [OPTIONS]\n"
         "Muster's sacct: the namespace's Slurm jobs the API server keeps (until\n"
         "slurm.accountingRetention after they ended); by default the caller's jobs\n"
         "eligible from midnight today (UTC) until now.\n"
         "\n"
         "  -A, --accounts=accounts     only these accounts\n"
         "  -a, --allusers              every user's jobs\n"
         "  -b, --brief                 JobID, State and ExitCode only\n"
         "      --delimiter=chars       the delimiter of -p and -P (default |)\n"
         "  -E, --endtime=time          the window's end (default now)\n"
         "  -e, --helpformat            list the fields -o takes\n"
         "  -j, --jobs=job_ids          only these jobs (A, A_t, A.step), from the epoch\n"
         "                              on\n"
         "      --name=names            only jobs with these names\n"
         "  -n, --noheader              no header lines\n"
         "  -o, --format=fields         the fields, Name%N for a width (or $SACCT_FORMAT)\n"
         "  -P, --parsable2             the delimiter between fields, nothing cut\n"
         "  -p, --parsable              the delimiter after every field, nothing cut\n"
         "  -r, --partition=partitions  only these partitions\n"
         "  -S, --starttime=time        the window's start (default midnight today, UTC)\n"
         "  -s, --state=states          only jobs in these states during the window\n"
         "  -u, --user=users, --uid=users\n"
         "                              only these users' jobs\n"
         "  -X, --allocations           no step lines (<id>.batch, <id>.<step>)\n"
         "  -M, --clusters=names, -v, --verbose, --local\n"
         "                              accepted; change nothing\n"
         "  -h, --help, --usage         print this usage and exit\n"
         "  -V, --version               print the version and exit\n"
         "\n"
         "Refused (\"not supported by Muster's sacct\"): -B/--batch-script,\n"
         "  -c/--completion, -D/--duplicates, -K/--timelimit-max, -k/--timelimit-min,\n"
         "  -L/--allclusters, -l/--long, -N/--nodelist, -q/--qos, -T/--truncate,\n"
         "  -W/--wckeys, -x/--associations, --json, --units, --yaml\n";
}

absl::StatusOr<SacctOptions> parseSacctArgs(const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env,
                                            absl::Time now) {
  SacctOptions o;
  std::optional<std::string> format, start_text, end_text;
  bool brief = false;
  // Long names and their short letters; true: takes a value.
  struct Option {
    std::string_view name;
    char letter;
    bool valued;
  };
  static constexpr Option kOptions[] = {
      {"jobs", 'j', true},        {"user", 'u', true},       {"uid", 'u', true},
      {"allusers", 'a', false},   {"starttime", 'S', true},  {"endtime", 'E', true},
      {"state", 's', true},       {"name", '\0', true},      {"partition", 'r', true},
      {"accounts", 'A', true},    {"allocations", 'X', false}, {"format", 'o', true},
      {"brief", 'b', false},      {"parsable", 'p', false},  {"parsable2", 'P', false},
      {"delimiter", '\0', true},  {"noheader", 'n', false},  {"helpformat", 'e', false},
      {"help", 'h', false},       {"usage", '\0', false},    {"version", 'V', false},
      {"long", 'l', false},       {"json", '\0', false},     {"yaml", '\0', false},
      {"completion", 'c', false}, {"duplicates", 'D', false}, {"allclusters", 'L', false},
      {"nodelist", 'N', true},    {"truncate", 'T', false},  {"timelimit-min", 'k', true},
      {"timelimit-max", 'K', true}, {"qos", 'q', true},      {"wckeys", 'W', true},
      {"associations", 'x', true}, {"batch-script", 'B', false}, {"clusters", 'M', true},
      {"verbose", 'v', false},    {"units", '\0', true},     {"local", '\0', false},
  };
  auto apply = [&](const Option& opt, const std::optional<std::string>& value,
                   const std::string& shown) -> absl::Status {
    if (opt.valued && !value)
      return absl::InvalidArgumentError(absl::StrCat(
          "sacct: option '", shown, "' requires an argument\nTry \"sacct --help\" for more information"));
    const std::string_view n = opt.name;
    auto list = [&](std::vector<std::string>* to) {
      for (std::string& v : splitList(*value)) to->push_back(std::move(v));
      return absl::OkStatus();
    };
    if (n == "jobs") {
      for (const std::string& word : splitList(*value)) {
        auto specs = parseJobIdList(word);
        if (!specs.ok()) return invalid(std::string(specs.status().message()));
        o.job_ids.insert(o.job_ids.end(), specs->begin(), specs->end());
      }
      return absl::OkStatus();
    }
    if (n == "user" || n == "uid") return list(&o.users);
    if (n == "name") return list(&o.names);
    if (n == "partition") return list(&o.partitions);
    if (n == "accounts") return list(&o.accounts);
    if (n == "allusers") { o.all_users = true; return absl::OkStatus(); }
    if (n == "starttime") { start_text = *value; return absl::OkStatus(); }
    if (n == "endtime") { end_text = *value; return absl::OkStatus(); }
    if (n == "state") {
      for (const std::string& st : splitList(*value)) {
        auto parsed = parseJobState(st);
        if (!parsed) return invalid(absl::StrCat("Invalid state: ", st));
        o.states.insert(*parsed);
      }
      return absl::OkStatus();
    }
    if (n == "allocations") { o.allocations = true; return absl::OkStatus(); }
    if (n == "format") { format = *value; return absl::OkStatus(); }
    if (n == "brief") { brief = true; return absl::OkStatus(); }
    if (n == "parsable") { o.parsable = true; return absl::OkStatus(); }
    if (n == "parsable2") { o.parsable2 = true; return absl::OkStatus(); }
    if (n == "delimiter") { o.delimiter = *value; return absl::OkStatus(); }
    if (n == "noheader") { o.noheader = true; return absl::OkStatus(); }
    if (n == "helpformat") { o.helpformat = true; return absl::OkStatus(); }
    if (n == "help") { o.help = true; return absl::OkStatus(); }
    if (n == "usage") { o.usage = true; return absl::OkStatus(); }
    if (n == "version") { o.version = true; return absl::OkStatus(); }
    if (n == "verbose" || n == "local") return absl::OkStatus();
    if (n == "clusters") return absl::OkStatus();  // one cluster: the namespace's
    if (n == "long") return notSupported("-l/--long", "name the fields with -o; sacct -e lists them");
    if (n == "json" || n == "yaml")
      return notSupported(absl::StrCat("--", av(n)), "use -P, or kubectl get paralleljobs -o json");
    if (n == "nodelist" || n == "truncate" || n == "timelimit-min" || n == "timelimit-max" ||
        n == "qos" || n == "wckeys" || n == "associations" || n == "completion" ||
        n == "duplicates" || n == "allclusters" || n == "batch-script" || n == "units")
      return notSupported(absl::StrCat("--", av(n)), "not written yet");
    return absl::InvalidArgumentError(absl::StrCat("sacct: unrecognized option '", shown, "'"));
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      auto [name, value] = splitLongOption(a);
      auto opt = std::find_if(std::begin(kOptions), std::end(kOptions),
                              [&](const Option& x) { return x.name == name; });
      if (opt == std::end(kOptions))
        return absl::InvalidArgumentError(absl::StrCat(
            "sacct: unrecognized option '", a, "'\nTry \"sacct --help\" for more information"));
      if (opt->valued && !value && i + 1 < args.size()) value = args[++i];
      if (!opt->valued && value)
        return absl::InvalidArgumentError(absl::StrCat("sacct: option '--", name, "' doesn't allow an argument"));
      if (absl::Status s = apply(*opt, value, "--" + name); !s.ok()) return s;
      continue;
    }
    if (a.size() >= 2 && a[0] == '-') {
      for (size_t k = 1; k < a.size(); ++k) {
        const char c = a[k];
        auto opt = std::find_if(std::begin(kOptions), std::end(kOptions),
                                [&](const Option& x) { return x.letter == c; });
        if (opt == std::end(kOptions))
          return absl::InvalidArgumentError(absl::StrCat(
              "sacct: invalid option -- '", std::string(1, c), "'\nTry \"sacct --help\" for more information"));
        std::optional<std::string> value;
        if (opt->valued) {
          if (k + 1 < a.size()) value = a.substr(k + 1);
          else if (i + 1 < args.size()) value = args[++i];
        }
        if (absl::Status s = apply(*opt, value, std::string("-") + c); !s.ok()) return s;
        if (opt->valued) break;
      }
      continue;
    }
    return invalid(absl::StrCat("Unknown arguments: ", a));
  }
  if (!format) {
    if (auto it = env.find("SACCT_FORMAT"); it != env.end() && !it->second.empty() && !brief)
      format = it->second;
  }
  auto fields = parseFields(format.value_or(brief ? kSacctBriefFormat : kSacctDefaultFormat));
  if (!fields.ok()) return fields.status();
  o.fields = *std::move(fields);
  if (start_text) {
    auto t = parseTimestamp(*start_text, now, /*past=*/true);
    if (!t.ok()) return invalid(std::string(t.status().message()));
    o.start = *t;
  }
  if (end_text) {
    auto t = parseTimestamp(*end_text, now, /*past=*/true);
    if (!t.ok()) return invalid(std::string(t.status().message()));
    o.end = *t;
  }
  if (o.start && o.end && *o.end < *o.start)
    return invalid("Start time (-S) requested is after end time (-E)");
  return o;
}

bool sacctSelects(const SacctOptions& o, const JobView& j, const std::string& me, absl::Time now) {
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  if (!o.job_ids.empty() && !jobIdMatchesAny(j, o.job_ids)) return false;
  if (!o.users.empty()) {
    if (!in(o.users, j.user)) return false;
  } else if (!o.all_users && j.user != me) {
    return false;
  }
  if (!in(o.names, j.name) || !in(o.partitions, j.partition) || !in(o.accounts, j.account))
    return false;
  // sacct's window: midnight today (the epoch with -j; now with -s) to now.
  const absl::Time midnight = absl::FromCivil(absl::ToCivilDay(now, absl::UTCTimeZone()), absl::UTCTimeZone());
  const absl::Time start = o.start ? *o.start
                           : !o.states.empty()  ? now
                           : !o.job_ids.empty() ? absl::UnixEpoch()
                                                : midnight;
  const absl::Time end = o.end.value_or(now);
  const absl::Time job_end = ended(j) ? j.end_time : absl::InfiniteFuture();
  if (o.states.empty()) return j.submit_time <= end && job_end >= start;
  if (!o.states.count(j.state)) return false;
  // In that state during the window.
  if (isFinished(j.state)) return ended(j) && j.end_time <= end;
  if (j.state == JobState::kRunning || j.state == JobState::kSuspended)
    return started(j) && j.start_time <= end && job_end >= start;
  const absl::Time pending_until = started(j) ? j.start_time : absl::InfiniteFuture();
  return j.submit_time <= end && pending_until >= start;
}

std::string renderSacct(const SacctOptions& o, std::vector<JobView> jobs, const std::string& me,
                        absl::Time now) {
  std::erase_if(jobs, [&](const JobView& j) { return !sacctSelects(o, j, me, now); });
  std::sort(jobs.begin(), jobs.end(),
            [](const JobView& a, const JobView& b) { return a.job_id < b.job_id; });
  std::string out;
  if (!o.noheader) {
    std::vector<std::string> names;
    for (const SacctField& f : o.fields) names.push_back(f.name);
    out += renderLine(o, names, /*header=*/true);
    if (!o.parsable && !o.parsable2) {
      for (const SacctField& f : o.fields)
        out += std::string(static_cast<size_t>(f.width < 0 ? -f.width : f.width), '-') + " ";
      out += "\n";
    }
  }
  for (const JobView& j : jobs) {
    // -j <id>.<step> names a step alone; <id> (or no -j) the job with all its lines.
    bool whole = o.job_ids.empty();
    std::set<uint32_t> steps_named;
    for (const JobIdSpec& id : o.job_ids) {
      if (!jobIdMatches(j, id)) continue;
      if (id.step_id) steps_named.insert(*id.step_id);
      else whole = true;
    }
    for (bool step : {false, true}) {
      if (!whole || (step && (o.allocations || !started(j)))) continue;
      std::vector<std::string> values;
      for (const SacctField& f : o.fields) values.push_back(valueOf(f.name, j, step, now));
      out += renderLine(o, values);
    }
    if (o.allocations) continue;
    for (const JobView::Step& step : j.steps) {
      if (!whole && !steps_named.contains(step.id)) continue;
      std::vector<std::string> values;
      for (const SacctField& f : o.fields) values.push_back(stepValueOf(f.name, j, step));
      out += renderLine(o, values);
    }
  }
  return out;
}

}  // namespace muster::jobengine::slurm
