#include "jobengine/slurm/cli/job_view.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jobengine/naming.h"
#include "jobengine/slurm/core/filename.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/squeue_format.h"
#include "jobengine/slurm/core/time.h"
#include "jobengine/slurm/core/util.h"
#include "proto/json.h"

namespace muster::jobengine::slurm {
namespace {

absl::Time parseRfc3339(const std::string& s) {
  absl::Time t;
  std::string err;
  if (!s.empty() && absl::ParseTime(absl::RFC3339_full, s, &t, &err)) return t;
  return absl::InfinitePast();
}

std::string orNull(const std::string& s) { return s.empty() ? "(null)" : s; }

// TRES per node as squeue's %b prints it ("gres/gpu:8", "gres/gpu:a100:8"), N/A without GPUs.
std::string gresOf(const JobView& j) {
  if (!j.gpus_per_node || *j.gpus_per_node <= 0) return "N/A";
  return j.gpu_type.empty() ? absl::StrCat("gres/gpu:", *j.gpus_per_node)
                            : absl::StrCat("gres/gpu:", j.gpu_type, ":", *j.gpus_per_node);
}

// scontrol's TRES= (cpu=,mem=,node=,billing=,gres/gpu=).
std::string tresOf(const JobView& j) {
  std::string out = absl::StrCat("cpu=", j.num_cpus);
  if (j.mem_per_node_mb) absl::StrAppend(&out, ",mem=", *j.mem_per_node_mb * j.num_nodes, "M");
  absl::StrAppend(&out, ",node=", j.num_nodes, ",billing=", j.num_cpus);
  if (j.gpus_per_node && *j.gpus_per_node > 0)
    absl::StrAppend(&out, ",gres/gpu=", static_cast<int64_t>(*j.gpus_per_node) * j.num_nodes);
  return out;
}

// The first line of squeue -l: "Wed Dec  2 15:50:00 2026".
std::string formatTimestampLong(absl::Time t) {
  return absl::FormatTime("%a %b %e %H:%M:%S %Y", t, absl::UTCTimeZone());
}

std::string timestampOrNa(absl::Time t) {
  return t == absl::InfinitePast() ? "N/A" : formatTimestamp(t);
}

std::string timestampOrUnknown(absl::Time t) {
  return t == absl::InfinitePast() ? "Unknown" : formatTimestamp(t);
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(av(text), ',', absl::SkipEmpty()))
    out.emplace_back(part);
  return out;
}

absl::Status unrecognized(std::string_view option) {
  return absl::InvalidArgumentError(
      absl::StrCat("squeue: unrecognized option '", av(option), "'\nTry \"squeue --help\" for more information"));
}

absl::Status notSupported(std::string_view option, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("squeue: error: ", av(option), " is not supported by Muster's squeue (", av(why), ")"));
}

}  // namespace

std::optional<JobView> viewOf(const proto::ParallelJob& job) {
  if (!job.spec.slurm) return std::nullopt;
  const proto::SlurmJobSpec& s = *job.spec.slurm;
  JobView v;
  v.job_id = s.job_id;
  if (s.array) {
    v.array_job_id = s.array->array_job_id;
    v.array_task_id = s.array->task_id;
    v.array_max_running = s.array->max_running;
  }
  v.object_name = job.meta.name;
  v.name = s.job_name;
  v.partition = s.partition;
  v.user = s.user;
  v.account = s.account;
  v.qos = s.qos;
  v.comment = s.comment;
  v.command = s.command;
  v.work_dir = s.work_dir;
  v.submit_host = s.submit_host;
  v.num_nodes = job.spec.num_pods;
  v.required_nodes = s.required_nodes;
  v.excluded_nodes = s.excluded_nodes;
  v.num_tasks = s.ntasks;
  v.cpus_per_task = s.cpus_per_task.value_or(1);
  v.num_cpus = std::max<int32_t>(v.num_tasks, 1) * std::max<int32_t>(v.cpus_per_task, 1);
  v.batch_cpus = (s.tasks_per_node.empty() ? 1 : std::max<int32_t>(s.tasks_per_node.front(), 1)) *
                 std::max<int32_t>(v.cpus_per_task, 1);
  v.gpus_per_node = s.gpus_per_node;
  v.gpu_type = s.gpu_type;
  v.mem_per_node_mb = s.mem_per_node_mb;
  v.time_limit = s.time_limit_seconds;
  v.requeue = s.requeue;
  v.hold = s.hold;
  v.cancel_requested = s.cancel;
  if (s.signal) v.signal_seq = s.signal->seq;
  v.requeue_asked = s.requeue_attempt && *s.requeue_attempt == job.status.restarts;
  v.submit_time = parseRfc3339(job.meta.creation_timestamp);
  // Slurm's restart_cnt counts every requeue: restarts and those after a preemption.
  v.restarts = job.status.restarts + job.status.preemptions;
  v.message = job.status.message;
  v.reason = "None";
  std::string pending_reason;
  if (job.status.slurm) {
    const proto::SlurmJobStatus& st = *job.status.slurm;
    if (auto parsed = parseJobState(st.state)) v.state = *parsed;
    v.start_time = parseRfc3339(st.start_time);
    v.end_time = parseRfc3339(st.end_time);
    if (!st.exit_code.empty()) v.exit_code = st.exit_code;
    pending_reason = st.reason;
    v.dependency = st.dependency;
    for (const proto::SlurmStepStatus& step : st.steps) {
      JobView::Step& out = v.steps.emplace_back();
      out.id = static_cast<uint32_t>(std::max(step.id, 0));
      out.name = step.name;
      out.state = step.state;
      out.exit_code = step.exit_code;
      out.node_list = step.node_list;
      out.start_time = parseRfc3339(step.start_time);
      out.end_time = parseRfc3339(step.end_time);
      out.nodes = step.nodes;
      out.tasks = step.tasks;
      out.cpus = step.cpus;
    }
  }
  if (v.state == JobState::kPending)
    v.reason = !pending_reason.empty() ? pending_reason : s.hold ? "JobHeldUser" : "None";
  else if (pending_reason == "DependencyNeverSatisfied")
    v.reason = pending_reason;  // why the job was cancelled
  // The nodes are the pods of the run in progress (or of the last one): their host names.
  if (v.start_time != absl::InfinitePast() && !job.status.job_group_name.empty())
    for (int32_t i = 0; i < job.spec.num_pods; ++i)
      v.nodes.push_back(podName(job.status.job_group_name, i));
  FilenameContext fc;
  fc.job_id = static_cast<uint32_t>(s.job_id);
  if (s.array) {
    fc.array_job_id = static_cast<uint32_t>(s.array->array_job_id);
    fc.array_task_id = static_cast<uint32_t>(s.array->task_id);
  }
  fc.node_name = v.nodes.empty() ? "" : v.nodes.front();
  fc.restart_count = static_cast<uint32_t>(std::max<int32_t>(0, v.restarts));
  fc.user = s.user;
  fc.job_name = s.job_name;
  fc.work_dir = s.work_dir;
  const std::string out_pattern =
      s.stdout_pattern.empty() ? std::string(defaultOutputPattern(s.array.has_value())) : s.stdout_pattern;
  v.stdout_path = expandFilenamePattern(out_pattern, fc);
  v.stderr_path = s.stderr_pattern.empty() ? v.stdout_path : expandFilenamePattern(s.stderr_pattern, fc);
  v.stdin_path = s.stdin_path.empty() ? "/dev/null" : s.stdin_path;
  return v;
}

std::string jobIdText(const JobView& j) {
  if (!j.array_tasks.empty()) return absl::StrCat(j.job_id, "_[", j.array_tasks, "]");
  if (j.array_job_id && j.array_task_id) return absl::StrCat(*j.array_job_id, "_", *j.array_task_id);
  return absl::StrCat(j.job_id);
}

bool jobIdMatches(const JobView& j, const JobIdSpec& id) {
  const bool in_array = j.array_job_id && *j.array_job_id == id.job_id;
  if (id.array_task_id) return in_array && j.array_task_id == static_cast<int64_t>(*id.array_task_id);
  if (id.all_array_tasks) return in_array;
  return in_array || j.job_id == id.job_id;
}

bool jobIdMatchesAny(const JobView& j, const std::vector<JobIdSpec>& ids) {
  return std::any_of(ids.begin(), ids.end(), [&](const JobIdSpec& id) { return jobIdMatches(j, id); });
}

std::vector<JobView> collapseArrays(std::vector<JobView> jobs) {
  std::vector<JobView> out;
  std::vector<uint32_t> tasks;  // of out.back(), while it stands for several
  auto flush = [&] {
    if (tasks.size() < 2) return;
    JobView& row = out.back();
    row.array_tasks = formatArrayTaskIds(tasks);
    if (row.array_max_running) absl::StrAppend(&row.array_tasks, "%", *row.array_max_running);
    row.job_id = *row.array_job_id;
  };
  auto joins = [](const JobView& row, const JobView& j) {
    return row.array_job_id && j.array_job_id && *row.array_job_id == *j.array_job_id &&
           row.state == JobState::kPending && j.state == JobState::kPending &&
           row.reason == j.reason && row.start_time == absl::InfinitePast() &&
           j.start_time == absl::InfinitePast();
  };
  for (JobView& j : jobs) {
    if (!out.empty() && !tasks.empty() && joins(out.back(), j)) {
      tasks.push_back(static_cast<uint32_t>(*j.array_task_id));
      continue;
    }
    flush();
    tasks.clear();
    if (j.array_task_id) tasks.push_back(static_cast<uint32_t>(*j.array_task_id));
    out.push_back(std::move(j));
  }
  flush();
  return out;
}

int64_t runSeconds(const JobView& job, absl::Time now) {
  if (job.start_time == absl::InfinitePast()) return 0;
  const absl::Time end = job.end_time != absl::InfinitePast() ? job.end_time : now;
  return std::max<int64_t>(0, absl::ToInt64Seconds(end - job.start_time));
}

namespace {

// Every option parseSqueueArgs below takes or refuses.
constexpr char kSqueueUsage[] =
    "Usage: squeue [OPTIONS]\n"
    "Muster's squeue: the Slurm jobs of the namespace (its ParallelJobs of runtime\n"
    "slurm); by default those pending or running, sorted by partition, state and\n"
    "job id.\n"
    "\n"
    "  -A, --account=accounts      only these accounts\n"
    "  -h, --noheader              no header line\n"
    "  -j, --jobs=job_ids          only these jobs (A, A_t, A_[1-3], A_*), in any\n"
    "                              state\n"
    "  -l, --long                  the long layout\n"
    "      --me                    only the caller's jobs (the Kubernetes user)\n"
    "  -n, --name=names            only jobs with these names\n"
    "  -o, --format=format         the layout by %letters of squeue(1) (or\n"
    "                              $SQUEUE_FORMAT)\n"
    "  -O, --Format=fields         the layout by field names (or $SQUEUE_FORMAT2)\n"
    "  -p, --partition=partitions  only these partitions\n"
    "  -q, --qos=qos               only these QOS\n"
    "  -r, --array                 one line per array task\n"
    "  -t, --states=states         only jobs in these states (names or codes, or all)\n"
    "  -u, --user=users            only these users' jobs\n"
    "      --json                  Slurm's data_parser JSON, on one line\n"
    "  -a, --all, -v, --verbose, --local, --federation, --sibling\n"
    "                              accepted; change nothing\n"
    "      --help, --usage         print this usage and exit\n"
    "  -V, --version               print the version and exit\n"
    "\n"
    "Refused (\"not supported by Muster's squeue\"): -i/--iterate, -L/--licenses,\n"
    "  -M/--clusters, -R/--reservation, -S/--sort, -s/--steps, --start,\n"
    "  -w/--nodelist, --yaml\n";

}  // namespace

std::string_view squeueUsage() { return kSqueueUsage; }

absl::StatusOr<SqueueOptions> parseSqueueArgs(const std::vector<std::string>& args,
                                              const std::map<std::string, std::string>& env) {
  SqueueOptions o;
  // Options that take a value: short letter, long name.
  struct ValueOption {
    char letter;
    std::string_view name;
  };
  static constexpr ValueOption kValued[] = {
      {'o', "format"}, {'O', "Format"},   {'u', "user"},    {'j', "jobs"},  {'t', "states"},
      {'p', "partition"}, {'n', "name"},  {'A', "account"}, {'q', "qos"},   {'M', "clusters"},
      {'w', "nodelist"}, {'S', "sort"},   {'i', "iterate"}, {'L', "licenses"}, {'R', "reservation"},
  };
  auto apply = [&](std::string_view name, std::optional<std::string> value,
                   std::string_view shown) -> absl::Status {
    auto needs = [&]() -> absl::Status {
      if (!value) return absl::InvalidArgumentError(absl::StrCat(
          "squeue: option '", av(shown), "' requires an argument\nTry \"squeue --help\" for more information"));
      return absl::OkStatus();
    };
    auto list = [&](std::vector<std::string>* out) -> absl::Status {
      if (absl::Status s = needs(); !s.ok()) return s;
      std::vector<std::string> parts = splitList(*value);
      out->insert(out->end(), parts.begin(), parts.end());
      return absl::OkStatus();
    };
    if (name == "format") { if (auto s = needs(); !s.ok()) return s; o.format = *value; return absl::OkStatus(); }
    if (name == "Format") { if (auto s = needs(); !s.ok()) return s; o.long_format_spec = *value; return absl::OkStatus(); }
    if (name == "user") return list(&o.users);
    if (name == "name") return list(&o.names);
    if (name == "partition") return list(&o.partitions);
    if (name == "account") return list(&o.accounts);
    if (name == "qos") return list(&o.qos);
    if (name == "jobs") {
      if (auto s = needs(); !s.ok()) return s;
      auto ids = parseJobIdList(*value);
      if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("squeue: error: Invalid job id: ", *value));
      for (const JobIdSpec& id : *ids) {
        if (id.step_id) return notSupported(absl::StrCat("job step ", *value), "use -j with job ids");
        o.job_ids.push_back(id);
      }
      return absl::OkStatus();
    }
    if (name == "states") {
      if (auto s = needs(); !s.ok()) return s;
      for (const std::string& st : splitList(*value)) {
        if (equalsIgnoreCase(st, "all")) { o.all_states = true; continue; }
        auto parsed = parseJobState(st);
        if (!parsed)
          return absl::InvalidArgumentError(absl::StrCat("squeue: error: Invalid job state specified: ", st));
        o.states.insert(*parsed);
      }
      return absl::OkStatus();
    }
    if (name == "noheader") { o.noheader = true; return absl::OkStatus(); }
    if (name == "long") { o.long_format = true; return absl::OkStatus(); }
    if (name == "me") { o.me = true; return absl::OkStatus(); }
    if (name == "array") { o.array_tasks = true; return absl::OkStatus(); }
    if (name == "all" || name == "verbose" || name == "local" || name == "federation" ||
        name == "sibling")
      return absl::OkStatus();  // every partition is shown
    if (name == "help") { o.help = true; return absl::OkStatus(); }
    if (name == "usage") { o.usage = true; return absl::OkStatus(); }
    if (name == "version") { o.version = true; return absl::OkStatus(); }
    if (name == "json") { o.json = true; return absl::OkStatus(); }
    if (name == "yaml") return notSupported("--yaml", "use --json, -o, -O or kubectl get paralleljobs -o yaml");
    if (name == "iterate") return notSupported("-i/--iterate", "run it under watch(1)");
    if (name == "start") return notSupported("--start", "Muster does not predict start times");
    if (name == "steps") return notSupported("-s/--steps", "srun's steps are known once the batch script ended: sacct lists them");
    if (name == "sort") return notSupported("-S/--sort", "jobs are sorted by partition, state and job id");
    if (name == "clusters" || name == "nodelist" || name == "licenses" || name == "reservation")
      return notSupported(absl::StrCat("--", av(name)), "not written yet");
    return unrecognized(shown);
  };
  static constexpr std::pair<char, std::string_view> kFlags[] = {
      {'h', "noheader"}, {'l', "long"}, {'a', "all"}, {'r', "array"}, {'v', "verbose"},
      {'V', "version"}, {'s', "steps"}};
  static constexpr std::string_view kLongFlags[] = {
      "noheader", "long", "me", "all", "array", "verbose", "help", "usage", "version", "json",
      "yaml", "start", "steps", "local", "federation", "sibling"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      auto [name, value] = splitLongOption(a);
      const bool valued = std::any_of(std::begin(kValued), std::end(kValued),
                                      [&](const ValueOption& v) { return v.name == name; });
      const bool flag = std::find(std::begin(kLongFlags), std::end(kLongFlags), name) != std::end(kLongFlags);
      if (!valued && !flag) return unrecognized(a);
      if (valued && !value && i + 1 < args.size()) value = args[++i];
      if (flag && value)
        return absl::InvalidArgumentError(absl::StrCat(
            "squeue: option '--", name, "' doesn't allow an argument\nTry \"squeue --help\" for more information"));
      if (absl::Status s = apply(name, value, "--" + name); !s.ok()) return s;
      continue;
    }
    if (a.size() >= 2 && a[0] == '-') {
      for (size_t k = 1; k < a.size(); ++k) {
        const char c = a[k];
        auto v = std::find_if(std::begin(kValued), std::end(kValued),
                              [&](const ValueOption& x) { return x.letter == c; });
        if (v != std::end(kValued)) {
          std::optional<std::string> value;
          if (k + 1 < a.size()) value = a.substr(k + 1);
          else if (i + 1 < args.size()) value = args[++i];
          if (absl::Status s = apply(v->name, value, std::string("-") + c); !s.ok()) return s;
          break;
        }
        auto f = std::find_if(std::begin(kFlags), std::end(kFlags),
                              [&](const auto& x) { return x.first == c; });
        if (f == std::end(kFlags))
          return absl::InvalidArgumentError(absl::StrCat(
              "squeue: invalid option -- '", std::string(1, c), "'\nTry \"squeue --help\" for more information"));
        if (absl::Status s = apply(f->second, std::nullopt, std::string("-") + c); !s.ok()) return s;
      }
      continue;
    }
    // squeue takes no operands.
    std::string_view usage = kSqueueUsage;
    usage.remove_suffix(1);  // the status message has no final newline
    return absl::InvalidArgumentError(
        absl::StrCat("squeue: error: Unrecognized option: ", a, "\n", av(usage)));
  }
  if (!o.format && !o.long_format_spec) {
    if (auto it = env.find("SQUEUE_FORMAT"); it != env.end() && !it->second.empty()) o.format = it->second;
    else if (auto it2 = env.find("SQUEUE_FORMAT2"); it2 != env.end() && !it2->second.empty())
      o.long_format_spec = it2->second;
  }
  return o;
}

bool squeueSelects(const SqueueOptions& o, const JobView& j, const std::string& me) {
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  if (!o.job_ids.empty() && !jobIdMatchesAny(j, o.job_ids)) return false;
  if (o.me && j.user != me) return false;
  if (!in(o.users, j.user) || !in(o.names, j.name) || !in(o.partitions, j.partition) ||
      !in(o.accounts, j.account) || !in(o.qos, j.qos))
    return false;
  if (o.all_states) return true;
  if (!o.states.empty()) return o.states.count(j.state) > 0;
  // squeue.1: without -t, pending, running and completing jobs; a job asked for by id is shown
  // whatever its state.
  return !o.job_ids.empty() || !isFinished(j.state);
}

std::string renderSqueue(const SqueueOptions& o, std::vector<JobView> jobs, const std::string& me,
                         absl::Time now) {
  SqueueFormat format;
  if (o.format) format = parseSqueueFormat(*o.format);
  else if (o.long_format_spec) format = parseSqueueLongFormat(*o.long_format_spec);
  else format = parseSqueueFormat(o.long_format ? kSqueueLongFormat : kSqueueDefaultFormat);
  std::erase_if(jobs, [&](const JobView& j) { return !squeueSelects(o, j, me); });
  // squeue's default sort "P,t,-p": partition, then the compact state as text (sort.c compares
  // job_state_string_compact with strcmp: CA < CD < F < PD < R), then priority, which is equal
  // here; ties go by job id (Slurm leaves them in qsort's order).
  std::sort(jobs.begin(), jobs.end(), [](const JobView& a, const JobView& b) {
    if (a.partition != b.partition) return a.partition < b.partition;
    const std::string_view sa = jobStateCompact(a.state), sb = jobStateCompact(b.state);
    if (sa != sb) return sa < sb;
    if (a.array_job_id.value_or(a.job_id) != b.array_job_id.value_or(b.job_id))
      return a.array_job_id.value_or(a.job_id) < b.array_job_id.value_or(b.job_id);
    return a.job_id < b.job_id;
  });
  if (!o.array_tasks) jobs = collapseArrays(std::move(jobs));
  std::string out;
  for (const std::string& w : format.warnings) out += w + "\n";
  if (o.long_format) out += formatTimestampLong(now) + "\n";
  if (!o.noheader) out += renderSqueueHeader(format) + "\n";
  for (const JobView& j : jobs) {
    const int64_t used = runSeconds(j, now);
    const std::string nodelist = compressHostlist(j.nodes);
    // A value cut or not as fieldTruncates() says, or always cut (squeue cuts "(Reason)" and
    // "UNLIMITED" even where it does not cut the column's other values).
    auto cell = [](std::string text) { return SqueueCell{std::move(text), std::nullopt}; };
    auto cut = [](std::string text) { return SqueueCell{std::move(text), true}; };
    auto value = [&](const SqueueField& f) -> SqueueCell {
      const std::string& n = f.name;
      if (n == "JobArrayId") return cell(jobIdText(j));
      if (n == "JobId") return cell(absl::StrCat(j.job_id));
      if (n == "ArrayJobId") return cell(absl::StrCat(j.array_job_id.value_or(j.job_id)));
      if (n == "ArrayTaskId") {
        if (!j.array_tasks.empty()) return cell(j.array_tasks);
        return cell(j.array_task_id ? absl::StrCat(*j.array_task_id) : "N/A");
      }
      if (n == "Account") return cell(orNull(j.account));
      if (n == "Partition") return cell(j.partition);
      if (n == "Name") return cell(j.name);
      if (n == "UserName" || n == "UserId" || n == "GroupName" || n == "GroupId") return cell(j.user);
      if (n == "State") return cell(std::string(jobStateName(j.state)));
      if (n == "StateCompact") return cell(std::string(jobStateCompact(j.state)));
      if (n == "TimeUsed") return cell(formatDuration(used));
      if (n == "TimeLimit") return j.time_limit ? cell(formatTimeLimit(j.time_limit)) : cut("UNLIMITED");
      if (n == "TimeLeft") {
        if (!j.time_limit) return cut("UNLIMITED");
        return cell(formatDuration(std::max<int64_t>(0, *j.time_limit - used)));
      }
      if (n == "NumNodes") return cell(absl::StrCat(j.num_nodes));
      if (n == "NumCPUs" || n == "MinCPUs") return cell(absl::StrCat(n == "NumCPUs" ? j.num_cpus : j.cpus_per_task));
      if (n == "NumTasks") return cell(absl::StrCat(j.num_tasks));
      if (n == "CPUsPerTask" || n == "cpus-per-task") return cell(absl::StrCat(j.cpus_per_task));
      if (n == "MinMemory") return cell(j.mem_per_node_mb ? absl::StrCat(*j.mem_per_node_mb, "M") : "0");
      if (n == "Gres") return cell(gresOf(j));
      if (n == "Tres" || n == "tres-alloc") return cell(tresOf(j));
      if (n == "NodeList") return cell(nodelist);
      if (n == "BatchHost") return cell(j.nodes.empty() ? "n/a" : j.nodes.front());
      if (n == "ReasonList") {
        if (j.state == JobState::kPending) return cut("(" + j.reason + ")");
        return cell(nodelist);
      }
      if (n == "Reason") return cell(j.reason);
      if (n == "StartTime") return cell(timestampOrNa(j.start_time));
      if (n == "EndTime") return cell(timestampOrNa(j.end_time));
      if (n == "SubmitTime") return cell(timestampOrNa(j.submit_time));
      if (n == "Priority" || n == "PriorityLong") return cell("0");
      if (n == "Comment") return cell(orNull(j.comment));
      if (n == "Command") return cell(j.command);
      if (n == "WorkDir") return cell(j.work_dir);
      if (n == "QOS") return cell(j.qos.empty() ? "normal" : j.qos);
      if (n == "Dependency") return cell(orNull(j.dependency));
      if (n == "RestartCnt") return cell(absl::StrCat(j.restarts));
      if (n == "Requeue") return cell(j.requeue ? "1" : "0");
      if (n == "StdOut") return cell(j.stdout_path);
      if (n == "StdErr") return cell(j.stderr_path);
      if (n == "StdIn") return cell(j.stdin_path);
      if (n == "exit_code") return cell(j.exit_code);
      return cell("N/A");
    };
    out += renderSqueueLine(format, value) + "\n";
  }
  return out;
}

namespace {

// data_parser's optional number: {"set": true, "infinite": false, "number": n}.
void optionalNumber(proto::JsonWriter& w, std::string_view name, std::optional<int64_t> n,
                    bool infinite = false) {
  w.key(name).beginObject().booleanField("set", n.has_value() || infinite);
  w.booleanField("infinite", infinite).integerField("number", n.value_or(0)).endObject();
}

std::optional<int64_t> unixSeconds(absl::Time t) {
  if (t == absl::InfinitePast()) return std::nullopt;
  return absl::ToUnixSeconds(t);
}

}  // namespace

std::string renderSqueueJson(const SqueueOptions& o, std::vector<JobView> jobs, const std::string& me,
                             absl::Time now, const std::string& cluster) {
  std::erase_if(jobs, [&](const JobView& j) { return !squeueSelects(o, j, me); });
  std::sort(jobs.begin(), jobs.end(), [](const JobView& a, const JobView& b) { return a.job_id < b.job_id; });
  proto::JsonWriter w;
  w.beginObject().key("jobs").beginArray();
  for (const JobView& j : jobs) {
    w.beginObject();
    w.stringField("account", j.account);
    optionalNumber(w, "array_job_id", j.array_job_id.value_or(0));
    optionalNumber(w, "array_task_id", j.array_task_id);
    optionalNumber(w, "array_max_tasks", j.array_max_running.value_or(0));
    w.stringField("batch_host", j.nodes.empty() ? "" : j.nodes.front());
    w.stringField("command", j.command);
    w.stringField("comment", j.comment);
    optionalNumber(w, "cpus", j.num_cpus);
    optionalNumber(w, "cpus_per_task", j.cpus_per_task);
    w.stringField("current_working_directory", j.work_dir);
    w.stringField("dependency", j.dependency);
    optionalNumber(w, "end_time", unixSeconds(j.end_time).value_or(0));
    {
      int code = 0, signal = 0;
      std::sscanf(j.exit_code.c_str(), "%d:%d", &code, &signal);
      w.key("exit_code").beginObject();
      w.key("status").beginArray();
      w.string(!isFinished(j.state) ? "PENDING" : signal ? "SIGNALED" : code ? "ERROR" : "SUCCESS");
      w.endArray();
      optionalNumber(w, "return_code", code);
      w.key("signal").beginObject();
      optionalNumber(w, "id", signal ? std::optional<int64_t>(signal) : std::nullopt);
      w.stringField("name", "").endObject();
      w.endObject();
    }
    w.stringField("group_name", j.user);
    w.booleanField("hold", j.hold);
    w.integerField("job_id", j.job_id);
    w.key("job_state").beginArray().string(jobStateName(j.state)).endArray();
    w.stringField("name", j.name);
    optionalNumber(w, "node_count", j.num_nodes);
    w.stringField("nodes", compressHostlist(j.nodes));
    w.stringField("partition", j.partition);
    w.stringField("qos", j.qos.empty() ? "normal" : j.qos);
    w.booleanField("requeue", j.requeue);
    w.integerField("restart_cnt", j.restarts);
    optionalNumber(w, "start_time", unixSeconds(j.start_time).value_or(0));
    w.stringField("standard_error", j.stderr_path);
    w.stringField("standard_input", j.stdin_path);
    w.stringField("standard_output", j.stdout_path);
    w.stringField("state_description", j.state == JobState::kPending ? j.message : "");
    w.stringField("state_reason", j.reason);
    optionalNumber(w, "submit_time", unixSeconds(j.submit_time).value_or(0));
    optionalNumber(w, "tasks", j.num_tasks);
    if (j.time_limit) optionalNumber(w, "time_limit", *j.time_limit / 60);
    else optionalNumber(w, "time_limit", std::nullopt, /*infinite=*/true);
    w.stringField("user_name", j.user);
    w.endObject();
  }
  w.endArray();
  optionalNumber(w, "last_update", absl::ToUnixSeconds(now));
  w.key("meta").beginObject();
  w.key("plugin").beginObject().stringField("type", "openapi/slurmctld");
  w.stringField("name", "Slurm OpenAPI slurmctld").stringField("data_parser", "data_parser/v0.0.41");
  w.stringField("accounting_storage", "accounting_storage/muster").endObject();
  w.key("command").beginArray().string("squeue").string("--json").endArray();
  w.key("slurm").beginObject().key("version").beginObject();
  w.stringField("major", "24").stringField("micro", "0").stringField("minor", "05").endObject();
  w.stringField("release", "24.05.0").stringField("cluster", cluster).endObject();
  w.endObject();
  w.key("errors").beginArray().endArray();
  w.key("warnings").beginArray().endArray();
  w.endObject();
  return w.str() + "\n";
}

JobView terminalSafeView(const JobView& job) {
  JobView j = job;
  for (std::string* s :
       {&j.array_tasks, &j.object_name, &j.name, &j.partition, &j.user, &j.account, &j.qos,
        &j.comment, &j.command, &j.work_dir, &j.submit_host, &j.stdout_path, &j.stderr_path,
        &j.stdin_path, &j.reason, &j.message, &j.dependency, &j.gpu_type, &j.exit_code})
    *s = terminalSafe(*s);
  for (auto* list : {&j.nodes, &j.required_nodes, &j.excluded_nodes})
    for (std::string& s : *list) s = terminalSafe(s);
  for (JobView::Step& step : j.steps)
    for (std::string* s : {&step.name, &step.state, &step.exit_code, &step.node_list})
      *s = terminalSafe(*s);
  return j;
}

std::string renderShowJob(const JobView& job, absl::Time now) {
  // Other users' text: no control character reaches the terminal.
  const JobView j = terminalSafeView(job);
  const std::string nodelist = j.nodes.empty() ? "(null)" : compressHostlist(j.nodes);
  std::string out;
  absl::StrAppend(&out, "JobId=", j.job_id);
  if (j.array_job_id && j.array_task_id) {
    absl::StrAppend(&out, " ArrayJobId=", *j.array_job_id, " ArrayTaskId=", *j.array_task_id);
    if (j.array_max_running) absl::StrAppend(&out, " ArrayTaskThrottle=", *j.array_max_running);
  }
  absl::StrAppend(&out, " JobName=", j.name, "\n");
  absl::StrAppend(&out, "   UserId=", j.user, " GroupId=", j.user, " MCS_label=N/A\n");
  absl::StrAppend(&out, "   Priority=0 Nice=0 Account=", orNull(j.account),
                  " QOS=", j.qos.empty() ? "normal" : j.qos, "\n");
  absl::StrAppend(&out, "   JobState=", av(jobStateName(j.state)),
                  " Reason=", j.reason, " Dependency=", orNull(j.dependency), "\n");
  absl::StrAppend(&out, "   Requeue=", j.requeue ? 1 : 0, " Restarts=", j.restarts,
                  " BatchFlag=1 Reboot=0 ExitCode=", j.exit_code, "\n");
  absl::StrAppend(&out, "   RunTime=", formatDurationHms(runSeconds(j, now)),
                  " TimeLimit=", formatDurationHms(j.time_limit), " TimeMin=N/A\n");
  absl::StrAppend(&out, "   SubmitTime=", timestampOrUnknown(j.submit_time),
                  " EligibleTime=", j.hold ? "Unknown" : timestampOrUnknown(j.submit_time), "\n");
  absl::StrAppend(&out, "   StartTime=", timestampOrUnknown(j.start_time),
                  " EndTime=", timestampOrUnknown(j.end_time), " Deadline=N/A\n");
  absl::StrAppend(&out, "   Partition=", j.partition, " AllocNode:Sid=", orNull(j.submit_host), ":0\n");
  absl::StrAppend(&out, "   ReqNodeList=", j.required_nodes.empty() ? "(null)" : compressHostlist(j.required_nodes),
                  " ExcNodeList=", j.excluded_nodes.empty() ? "(null)" : compressHostlist(j.excluded_nodes), "\n");
  absl::StrAppend(&out, "   NodeList=", nodelist, "\n");
  absl::StrAppend(&out, "   BatchHost=", j.nodes.empty() ? "(null)" : j.nodes.front(), "\n");
  absl::StrAppend(&out, "   NumNodes=", j.num_nodes, " NumCPUs=", j.num_cpus, " NumTasks=", j.num_tasks,
                  " CPUs/Task=", j.cpus_per_task, "\n");
  absl::StrAppend(&out, "   TRES=", tresOf(j), "\n");
  absl::StrAppend(&out, "   Comment=", orNull(j.comment), "\n");
  absl::StrAppend(&out, "   Command=", j.command, "\n");
  absl::StrAppend(&out, "   WorkDir=", j.work_dir, "\n");
  absl::StrAppend(&out, "   StdErr=", j.stderr_path, "\n");
  absl::StrAppend(&out, "   StdIn=", j.stdin_path, "\n");
  absl::StrAppend(&out, "   StdOut=", j.stdout_path, "\n");
  // Not a Slurm key: the job engine's own account of the job (why it waits, what failed).
  absl::StrAppend(&out, "   MusterJob=", j.object_name, " MusterMessage=", orNull(j.message), "\n");
  return out;
}

std::optional<std::string> requeueRefusal(const JobView& j) {
  if (j.requeue_asked) return "Job is requeued already (the job engine has not restarted it yet)";
  if (j.state == JobState::kPending) return "Job is pending execution";
  if (!j.requeue) return "Requested operation is presently disabled (the job was submitted with --no-requeue)";
  if (j.state == JobState::kCancelled || j.cancel_requested)
    return "Requested operation is presently disabled (a cancelled job stays cancelled in Muster: submit it again)";
  return std::nullopt;
}

absl::StatusOr<JobUpdate> parseJobUpdate(const std::vector<std::string>& args) {
  JobUpdate u;
  bool have_limit = false;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid input: ", a, "\nRequest aborted"));
    const std::string key = a.substr(0, eq);
    std::string value = a.substr(eq + 1);
    if (equalsIgnoreCase(key, "JobId")) {
      auto ids = parseJobIdList(value);
      if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid job id ", value));
      for (const JobIdSpec& id : *ids) {
        if (id.step_id)
          return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid job id ", value));
        u.ids.push_back(id);
      }
    } else if (equalsIgnoreCase(key, "TimeLimit")) {
      if (!value.empty() && (value[0] == '+' || value[0] == '-')) {
        u.adjust = value[0] == '+' ? JobUpdate::Adjust::kAdd : JobUpdate::Adjust::kSubtract;
        value.erase(0, 1);
      }
      auto limit = parseTimeLimit(value);
      if (!limit.ok() || (u.adjust != JobUpdate::Adjust::kSet && !*limit))
        return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid TimeLimit value: ", a.substr(eq + 1)));
      u.time_limit = *limit;
      have_limit = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "scontrol: error: Update of ", key, " is not supported by Muster's scontrol (JobId and TimeLimit are)"));
    }
  }
  if (u.ids.empty())
    return absl::InvalidArgumentError("scontrol: error: No valid entity in update command\nRequest aborted");
  if (!have_limit)
    return absl::InvalidArgumentError("scontrol: error: Update of a job needs TimeLimit=");
  return u;
}

absl::StatusOr<std::optional<int64_t>> updatedTimeLimit(const JobView& j, const JobUpdate& u,
                                                        bool is_operator) {
  const std::string job = jobIdText(j);
  auto denied = [&](std::string_view slurm_words, std::string_view why) {
    return absl::PermissionDeniedError(
        absl::StrCat("slurm_update error: ", av(slurm_words), " for job ", job, av(why)));
  };
  if (isFinished(j.state) || j.cancel_requested)
    return denied("Job/step already completing or completed", "");
  std::optional<int64_t> next = u.time_limit;
  if (u.adjust != JobUpdate::Adjust::kSet) {
    if (!j.time_limit) return j.time_limit;  // UNLIMITED stays UNLIMITED, as in Slurm
    next = u.adjust == JobUpdate::Adjust::kAdd ? *j.time_limit + *u.time_limit
                                               : std::max<int64_t>(60, *j.time_limit - *u.time_limit);
  }
  const bool raises = !next ? j.time_limit.has_value() : j.time_limit && *next > *j.time_limit;
  if (!raises) return next;
  if (!is_operator)
    return denied("Access/permission denied", " (only an operator may raise a time limit)");
  // Pods exist once the job runs or its gang waits for room; their activeDeadlineSeconds holds.
  static constexpr std::string_view kPodsExist[] = {
      "Resources",       "Priority",         "Requeued",      "ReqNodeNotAvail",
      "AssocGrpGRES",    "AssocGrpCpuLimit", "AssocGrpMemLimit", "InvalidAccount"};
  if (j.state != JobState::kPending || std::ranges::find(kPodsExist, j.reason) != std::end(kPodsExist))
    return denied("Requested operation not supported on this job",
                  absl::StrCat(" (its pods exist, and their activeDeadlineSeconds can only be lowered",
                               j.state == JobState::kPending ? ": scontrol hold it, raise the limit, release it)" : ")"));
  return next;
}

}  // namespace muster::jobengine::slurm
