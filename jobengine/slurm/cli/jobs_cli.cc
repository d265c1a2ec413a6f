#include "jobengine/slurm/cli/jobs_cli.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jobengine/slurm/cli/acct.h"
#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/cli/job_view.h"
#include "jobengine/slurm/cli/node_view.h"
#include "jobengine/slurm/core/signal_request.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/time.h"
#include "jobengine/slurm/core/util.h"
#include "proto/codec.h"
#include "proto/json.h"

namespace muster::jobengine::slurm {
namespace {

// Every Slurm job of the session's namespace (ParallelJobs with spec.slurm); an error's message
// begins with `error_prefix` (Slurm's "slurm_load_jobs error: ").
absl::StatusOr<std::vector<JobView>> listJobs(ApiSession& session,
                                              std::string_view error_prefix = "slurm_load_jobs error: ") {
  auto jobs = listAll<proto::ParallelJob>(
      session, proto::resources::kParallelJobs.collectionPath(session.ns()), {});
  if (!jobs.ok())
    return absl::Status(jobs.status().code(), absl::StrCat(av(error_prefix), jobs.status().message()));
  std::vector<JobView> out;
  for (const proto::ParallelJob& job : *jobs)
    if (auto v = viewOf(job)) out.push_back(*std::move(v));
  return out;
}

absl::Status patchSlurmSpec(ApiSession& session, const JobView& job, std::string_view slurm_json) {
  proto::Request req;
  req.verb = proto::Verb::kPatch;
  req.path = proto::resources::kParallelJobs.objectPath(session.ns(), job.object_name);
  req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
  req.body = absl::StrCat(R"({"spec":{"slurm":)", av(slurm_json), "}}");
  auto body = session.client().callSync(std::move(req));
  if (body.ok()) return absl::OkStatus();
  // An admission policy's refusal (the chart's owner check) in its own words, as slurmctld
  // answers "Access/permission denied", without the request line around it.
  const std::string message(body.status().message());
  constexpr std::string_view kDenied = "denied request: ";
  if (auto at = message.find(kDenied); absl::IsPermissionDenied(body.status()) && at != std::string::npos) {
    std::string why = message.substr(at + kDenied.size());
    if (auto end = why.rfind(" (403 Forbidden)"); end != std::string::npos) why.erase(end);
    return absl::PermissionDeniedError(why);
  }
  return body.status();
}

// The jobs a job id word names (jobIdMatches: an array's id names all of its tasks).
std::vector<const JobView*> jobsNamed(const std::vector<JobView>& jobs, const JobIdSpec& id) {
  std::vector<const JobView*> out;
  for (const JobView& j : jobs)
    if (jobIdMatches(j, id)) out.push_back(&j);
  return out;
}

// As the user wrote it: "12", "12_3", "12_*".
std::string jobIdWord(const JobIdSpec& id);

// jobsNamed, and when `id` names no job Slurm's "<prefix>Invalid job id specified for job <id>"
// on `err` with *rc = 1.
std::vector<const JobView*> jobsNamedOrSay(const std::vector<JobView>& jobs, const JobIdSpec& id,
                                           std::string_view prefix, std::ostream& err, int* rc) {
  std::vector<const JobView*> named = jobsNamed(jobs, id);
  if (named.empty()) {
    err << prefix << "Invalid job id specified for job " << jobIdWord(id) << "\n";
    *rc = 1;
  }
  return named;
}

std::string jobIdWord(const JobIdSpec& id) {
  if (id.all_array_tasks) return absl::StrCat(id.job_id, "_*");
  if (id.array_task_id) return absl::StrCat(id.job_id, "_", *id.array_task_id);
  return absl::StrCat(id.job_id);
}

// One word of job ids ("12", "12,13", "12_3", "12_[1-3]", "12_*"; parseJobIdList's syntax).
// Steps are refused: Muster acts on whole jobs.
absl::StatusOr<std::vector<JobIdSpec>> parseJobIds(std::string_view command, std::string_view word) {
  auto specs = parseJobIdList(word);
  if (!specs.ok())
    return absl::InvalidArgumentError(absl::StrCat(av(command), ": error: ", specs.status().message()));
  for (const JobIdSpec& spec : *specs)
    if (spec.step_id)
      return absl::InvalidArgumentError(absl::StrCat(
          av(command), ": error: job step ", av(word), ": Muster acts on whole jobs, not steps"));
  return *std::move(specs);
}


// The cluster's nodes as Slurm nodes, with what is bound to each. Without permission to list
// pods cluster-wide the nodes show no allocation (`note` says so).
absl::StatusOr<std::vector<NodeView>> listNodes(ApiSession& session, std::string* note) {
  auto nodes = listAll<proto::Node>(session, proto::resources::kNodes.collectionPath(), {});
  if (!nodes.ok()) return nodes.status();
  std::map<std::string, std::vector<proto::Pod>> bound;
  auto pods = listAll<proto::Pod>(
      session, proto::resources::kPods.collectionPath(),
      {{"fieldSelector", "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"}});
  if (pods.ok()) {
    for (proto::Pod& p : *pods) bound[p.spec.node_name].push_back(std::move(p));
  } else if (note != nullptr) {
    *note = absl::StrCat("cannot list pods (", pods.status().message(),
                         "): nodes in use show as idle");
  }
  std::vector<NodeView> out;
  for (const proto::Node& n : *nodes) out.push_back(nodeViewOf(n, bound[n.meta.name]));
  return out;
}

int fail(std::ostream& err, const absl::Status& s) {
  err << s.message() << "\n";
  return 1;
}

// Every option scancelMain takes or refuses.
constexpr char kScancelUsage[] =
    "Usage: scancel [OPTIONS] [job_id[,job_id...]]\n"
    "Muster's scancel: ends the namespace's Slurm jobs CANCELLED and deletes their\n"
    "pods, or with -s signals a running job. Job ids: A, A_t, A_[1-3], A_*; the\n"
    "options select jobs too.\n"
    "\n"
    "  -A, --account=accounts      only jobs of these accounts\n"
    "  -b, --batch                 with -s: the signal to the batch shell alone\n"
    "  -f, --full                  with -s: to the batch script and all its processes\n"
    "  -i, --interactive           ask on the terminal before each job\n"
    "      --me                    only the caller's jobs\n"
    "  -n, --name=names, --jobname=names\n"
    "                              only jobs with these names\n"
    "  -p, --partition=partitions  only jobs of these partitions\n"
    "  -Q, --quiet                 no error message for jobs already ended\n"
    "  -q, --qos=qos               only jobs of these QOS\n"
    "  -s, --signal=name|number    send the signal instead of cancelling (default: to\n"
    "                              every srun step; KILL cancels)\n"
    "  -t, --state=states          only jobs in these states (PENDING, RUNNING,\n"
    "                              SUSPENDED)\n"
    "  -u, --user=users            only these users' jobs\n"
    "  -v, --verbose               name each job cancelled or signalled\n"
    "  -H, --hurry                 accepted; changes nothing\n"
    "      --help, --usage         print this usage and exit\n"
    "  -V, --version               print the version and exit\n"
    "\n"
    "Refused (\"not supported by Muster's scancel yet\"): -M/--clusters,\n"
    "  -R/--reservation, -w/--nodelist, --sibling, --wckey\n";

// --help/--usage print `usage`, -V/--version the version line: the command's exit code then;
// nullopt to go on.
std::optional<int> answerHelp(bool help, bool version, std::string_view usage, std::ostream& out) {
  if (help) out << usage;
  else if (version) out << kVersionLine;
  else return std::nullopt;
  return 0;
}

}  // namespace

int squeueMain(const std::vector<std::string>& args, const GlobalOptions& global,
               const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err) {
  auto options = parseSqueueArgs(args, env);
  if (!options.ok()) return fail(err, options.status());
  if (std::optional<int> done =
          answerHelp(options->help || options->usage, options->version, squeueUsage(), out))
    return *done;
  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto jobs = listJobs(**session);
  if (!jobs.ok()) return fail(err, jobs.status());
  if (!options->job_ids.empty() &&
      std::none_of(jobs->begin(), jobs->end(),
                   [&](const JobView& j) { return jobIdMatchesAny(j, options->job_ids); }))
    return fail(err, absl::NotFoundError("slurm_load_jobs error: Invalid job id specified"));
  const std::string me = options->me ? whoAmI(**session, env) : "";
  if (options->json) {
    auto config = loadSlurmConfig(**session, env);
    out << renderSqueueJson(*options, *std::move(jobs), me, absl::Now(),
                            config.ok() ? config->cluster_name : "");
    return 0;
  }
  out << renderSqueue(*options, *std::move(jobs), me, absl::Now());
  return 0;
}

int sacctMain(const std::vector<std::string>& args, const GlobalOptions& global,
              const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err) {
  const absl::Time now = absl::Now();
  auto options = parseSacctArgs(args, env, now);
  if (!options.ok()) return fail(err, options.status());
  if (std::optional<int> done =
          answerHelp(options->help || options->usage, options->version, sacctUsage(), out))
    return *done;
  if (options->helpformat) {
    std::string line;
    for (size_t i = 0; i < sacctFields().size(); ++i) {
      const std::string& name = sacctFields()[i].name;
      line += name + std::string(name.size() < 20 ? 20 - name.size() : 1, ' ');
      if (i % 4 == 3 || i + 1 == sacctFields().size()) {
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << "\n";
        line.clear();
      }
    }
    return 0;
  }
  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto jobs = listJobs(**session, "sacct: error: ");
  if (!jobs.ok()) return fail(err, jobs.status());
  const std::string me = options->all_users || !options->users.empty() ? "" : whoAmI(**session, env);
  out << renderSacct(*options, *std::move(jobs), me, now);
  return 0;
}

int scancelMain(const std::vector<std::string>& args, const GlobalOptions& global,
                const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err) {
  SqueueOptions filter;  // the same filters as squeue's
  std::vector<JobIdSpec> ids;
  bool quiet = false;
  int verbose = 0;
  bool any_filter = false;
  bool interactive = false;             // -i: ask before each job
  std::optional<int> signal;            // --signal (signal_request.h)
  std::string signal_target = "steps";  // -b: batch, -f: full
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        inline_value = a.substr(eq + 1);
        a = a.substr(0, eq);
      }
    } else if (a.size() > 2 && a[0] == '-' && std::string_view("untpAqsw").find(a[1]) != std::string_view::npos) {
      inline_value = a.substr(2);
      a = a.substr(0, 2);
    }
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 < args.size()) return args[++i];
      return std::nullopt;
    };
    auto list = [&](std::vector<std::string>* to) -> bool {
      auto v = value();
      if (!v) return false;
      for (absl::string_view p : absl::StrSplit(*v, ',', absl::SkipEmpty())) to->emplace_back(p);
      any_filter = true;
      return true;
    };
    auto missing = [&] {
      return fail(err, absl::InvalidArgumentError(absl::StrCat(
                           "scancel: option '", a, "' requires an argument\nTry \"scancel --help\" for more information")));
    };
    if (a == "-u" || a == "--user") { if (!list(&filter.users)) return missing(); }
    else if (a == "-n" || a == "--name" || a == "--jobname") { if (!list(&filter.names)) return missing(); }
    else if (a == "-p" || a == "--partition") { if (!list(&filter.partitions)) return missing(); }
    else if (a == "-A" || a == "--account") { if (!list(&filter.accounts)) return missing(); }
    else if (a == "-q" || a == "--qos") { if (!list(&filter.qos)) return missing(); }
    else if (a == "-t" || a == "--state") {
      auto v = value();
      if (!v) return missing();
      for (absl::string_view p : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
        auto st = parseJobState(std::string_view(p.data(), p.size()));
        if (!st || isFinished(*st))
          return fail(err, absl::InvalidArgumentError(absl::StrCat(
                               "scancel: error: Invalid job state specified: ", p,
                               "\nValid job states are PENDING, RUNNING, and SUSPENDED")));
        filter.states.insert(*st);
      }
      any_filter = true;
    } else if (a == "--me") { filter.me = true; any_filter = true; }
    else if (a == "-Q" || a == "--quiet") quiet = true;
    else if (a == "-v" || a == "--verbose") ++verbose;
    else if (a == "-f" || a == "--full") signal_target = "full";
    else if (a == "-b" || a == "--batch") signal_target = "batch";
    else if (a == "-H" || a == "--hurry") {}
    else if (a == "-s" || a == "--signal") {
      auto v = value();
      if (!v) return missing();
      signal = parseSignalName(*v);
      if (!signal)
        return fail(err, absl::InvalidArgumentError(
                             absl::StrCat("scancel: error: Invalid signal name: ", *v)));
    } else if (a == "-i" || a == "--interactive") {
      if (!isatty(STDIN_FILENO))
        return fail(err, absl::InvalidArgumentError(
                             "scancel: error: --interactive asks on a terminal, and standard input "
                             "is none: name the jobs to cancel without -i"));
      interactive = true;
    }
    else if (a == "-w" ||
             a == "--nodelist" || a == "--sibling" || a == "-M" || a == "--clusters" ||
             a == "-R" || a == "--reservation" || a == "--wckey")
      return fail(err, absl::InvalidArgumentError(absl::StrCat(
                           "scancel: error: ", a, " is not supported by Muster's scancel yet: it "
                           "cancels whole jobs (SIGTERM to every task, then SIGKILL)")));
    else if (a == "--help" || a == "--usage") {
      out << kScancelUsage;
      return 0;
    } else if (a == "-V" || a == "--version") {
      out << kVersionLine;
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return fail(err, absl::InvalidArgumentError(absl::StrCat(
                           "scancel: unrecognized option '", a, "'\nTry \"scancel --help\" for more information")));
    } else {
      auto parsed = parseJobIds("scancel", a);
      if (!parsed.ok()) return fail(err, parsed.status());
      ids.insert(ids.end(), parsed->begin(), parsed->end());
    }
  }
  if (ids.empty() && !any_filter)
    return fail(err, absl::InvalidArgumentError("scancel: error: No job identification provided"));

  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto jobs = listJobs(**session, "");
  if (!jobs.ok()) return fail(err, jobs.status());
  const std::string me = filter.me ? whoAmI(**session, env) : "";
  int rc = 0;
  auto active = [](const JobView& j) { return !isFinished(j.state) && !j.cancel_requested; };
  // SIGKILL is a cancel, as in Slurm; any other signal goes to a running job's batch pod.
  if (signal == SIGKILL) signal.reset();
  // -i: scancel.c's question, one job at a time; only y or Y goes ahead.
  auto confirmed = [&](const JobView& j) {
    if (!interactive) return true;
    out << (signal ? absl::StrCat("Signal ", *signal, " to") : std::string("Cancel"))
        << " job_id=" << jobIdText(j) << " name=" << terminalSafe(j.name)
        << " partition=" << terminalSafe(j.partition)
        << " [y/n]? " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer)) return false;
    return answer == "y" || answer == "Y";
  };
  auto cancel = [&](const JobView& j) {
    if (signal && j.state == JobState::kPending) {
      if (!ids.empty()) {  // a job named by id; filters pass pending jobs over
        err << "scancel: error: Kill job error on job id " << jobIdText(j)
            << ": Job is pending execution\n";
        rc = 1;
      }
      return;
    }
    if (!confirmed(j)) return;
    std::string patch = R"({"cancel":true})";
    if (signal) {
      patch = absl::StrCat(R"({"signal":{"seq":)", j.signal_seq + 1, R"(,"number":)", *signal,
                           R"(,"target":")", signal_target, R"("}})");
      if (verbose > 0)
        err << "scancel: Signal " << *signal << " to job " << jobIdText(j) << "\n";
    } else if (verbose > 0) {
      err << "scancel: Terminating job " << jobIdText(j) << "\n";
    }
    if (absl::Status s = patchSlurmSpec(**session, j, patch); !s.ok()) {
      err << "scancel: error: Kill job error on job id " << jobIdText(j) << ": " << terminalSafe(std::string(s.message())) << "\n";
      rc = 1;
    }
  };
  if (!ids.empty()) {
    for (const JobIdSpec& id : ids) {
      std::vector<const JobView*> named = jobsNamed(*jobs, id);
      if (named.empty()) {
        err << "scancel: error: Kill job error on job id " << jobIdWord(id)
            << ": Invalid job id specified\n";
        rc = 1;
        continue;
      }
      // With filters, an id names a job only when the job also passes them (scancel.1).
      if (any_filter)
        std::erase_if(named, [&](const JobView* j) { return !squeueSelects(filter, *j, me); });
      if (named.empty()) continue;
      // An array's tasks that have ended are passed over; an id whose jobs all have is an error.
      if (std::none_of(named.begin(), named.end(), [&](const JobView* j) { return active(*j); })) {
        if (!quiet)
          err << "scancel: error: Kill job error on job id " << jobIdWord(id)
              << ": Job/step already completing or completed\n";
        rc = 1;
        continue;
      }
      for (const JobView* j : named)
        if (active(*j)) cancel(*j);
    }
    return rc;
  }
  for (const JobView& j : *jobs)
    if (active(j) && squeueSelects(filter, j, me)) cancel(j);
  return rc;
}

int sinfoMain(const std::vector<std::string>& args, const GlobalOptions& global,
              const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err) {
  auto options = parseSinfoArgs(args, env);
  if (!options.ok()) return fail(err, options.status());
  if (std::optional<int> done =
          answerHelp(options->help || options->usage, options->version, sinfoUsage(), out))
    return *done;
  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto config = loadSlurmConfig(**session, env);
  if (!config.ok()) return fail(err, config.status());
  std::string note;
  auto nodes = listNodes(**session, &note);
  if (!nodes.ok())
    return fail(err, absl::Status(nodes.status().code(),
                                  absl::StrCat("slurm_load_node error: ", nodes.status().message())));
  if (!note.empty()) err << "sinfo: " << note << "\n";
  out << renderSinfo(*options, *config, *nodes, absl::Now());
  return 0;
}

namespace {

// scontrol show node|partition, scontrol update NodeName=... State=...
int scontrolNodeMain(const std::vector<std::string>& args, const GlobalOptions& global,
                     const std::map<std::string, std::string>& env, std::ostream& out,
                     std::ostream& err) {
  const bool update = equalsIgnoreCase(args[0], "update");
  std::optional<NodeUpdate> change;
  if (update) {
    auto parsed = parseNodeUpdate(std::vector<std::string>(args.begin() + 1, args.end()));
    if (!parsed.ok()) return fail(err, parsed.status());
    change = *std::move(parsed);
  }
  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto config = loadSlurmConfig(**session, env);
  if (!config.ok()) return fail(err, config.status());
  if (change) {
    const std::string user = whoAmI(**session, env);
    const std::string when = formatTimestamp(absl::Now());
    int rc = 0;
    for (const std::string& name : change->nodes) {
      proto::Request req;
      req.verb = proto::Verb::kPatch;
      req.path = proto::resources::kNodes.objectPath("", name);
      req.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
      proto::JsonWriter w;
      w.beginObject();
      w.key("spec").beginObject().booleanField("unschedulable", change->drain).endObject();
      w.key("metadata").beginObject().key("annotations").beginObject();
      for (const auto& [key, text] : {std::pair{kDrainReasonAnnotation, change->reason},
                                      std::pair{kDrainUserAnnotation, user},
                                      std::pair{kDrainTimeAnnotation, when}}) {
        if (change->drain) w.stringField(key, text);
        else w.key(key).null();
      }
      w.endObject().endObject().endObject();
      req.body = w.str();
      auto body = (*session)->client().callSync(std::move(req));
      if (!body.ok()) {
        err << "slurm_update error: "
            << (proto::isNotFound(body.status()) ? "Invalid node name specified" : "node " + name)
            << ": " << body.status().message() << "\n";
        rc = 1;
      }
    }
    return rc;
  }
  std::string note;
  auto nodes = listNodes(**session, &note);
  if (!nodes.ok())
    return fail(err, absl::Status(nodes.status().code(),
                                  absl::StrCat("slurm_load_node error: ", nodes.status().message())));
  if (!note.empty()) err << "scontrol: " << note << "\n";
  const std::string what = args[1];
  const std::string name = args.size() >= 3 ? args[2] : "";
  std::sort(nodes->begin(), nodes->end(),
            [](const NodeView& a, const NodeView& b) { return naturalCompare(a.name, b.name) < 0; });
  if (startsWithIgnoreCase(what, "node")) {
    std::vector<std::string> wanted;
    if (!name.empty()) {
      auto hosts = expandHostlist(name);
      if (!hosts.ok()) return fail(err, absl::InvalidArgumentError("Node " + name + " not found"));
      wanted = *hosts;
    }
    bool first = true, any = false;
    for (const NodeView& n : *nodes) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), n.name) == wanted.end()) continue;
      out << (first ? "" : "\n") << renderShowNode(n, *config);
      first = false;
      any = true;
    }
    if (!any) return fail(err, absl::NotFoundError(name.empty() ? "No nodes in the system" : "Node " + name + " not found"));
    out << "\n";
    return 0;
  }
  bool first = true, any = false;
  for (const Partition& p : config->partitions) {
    if (!name.empty() && p.name != name) continue;
    std::vector<std::string> members;
    int64_t cpus = 0;
    for (const NodeView& n : *nodes)
      if (partitionHas(p, n)) {
        members.push_back(n.name);
        cpus += n.cpus;
      }
    out << (first ? "" : "\n") << "PartitionName=" << p.name << "\n"
        << "   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL\n"
        << "   Default=" << (p.name == config->default_partition ? "YES" : "NO")
        << " QoS=N/A PriorityClass=" << (p.priority_class_name.empty() ? "(null)" : p.priority_class_name) << "\n"
        << "   DefaultTime=" << (p.default_time_seconds ? formatDurationHms(p.default_time_seconds) : "NONE")
        << " MaxNodes=" << (p.max_nodes > 0 ? std::to_string(p.max_nodes) : "UNLIMITED")
        << " MaxTime=" << formatDurationHms(p.max_time_seconds) << " MinNodes=0\n"
        << "   Nodes=" << (members.empty() ? "(null)" : compressHostlist(members)) << "\n"
        << "   State=UP TotalCPUs=" << cpus << " TotalNodes=" << members.size() << "\n"
        << "   DefMemPerCPU=" << (p.default_mem_per_cpu_mb > 0 ? std::to_string(p.default_mem_per_cpu_mb) : "UNLIMITED")
        << "\n";
    first = false;
    any = true;
  }
  if (!any) return fail(err, absl::NotFoundError("Partition " + name + " not found"));
  out << "\n";
  return 0;
}

// scontrol update JobId=... TimeLimit=...: spec.slurm.timeLimitSeconds of each job named. An
// operator is who may patch nodes (the chart's slurm.operators, who also drain them).
int scontrolUpdateJobMain(const std::vector<std::string>& args, const GlobalOptions& global,
                          const std::map<std::string, std::string>& env, std::ostream& err) {
  auto update = parseJobUpdate(std::vector<std::string>(args.begin() + 1, args.end()));
  if (!update.ok()) return fail(err, update.status());
  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto jobs = listJobs(**session);
  if (!jobs.ok()) return fail(err, jobs.status());
  std::optional<bool> is_operator;  // asked once, when a limit would go up
  int rc = 0;
  for (const JobIdSpec& id : update->ids) {
    std::vector<const JobView*> named = jobsNamedOrSay(*jobs, id, "slurm_update error: ", err, &rc);
    if (named.empty()) continue;
    for (const JobView* j : named) {
      auto limit = updatedTimeLimit(*j, *update, /*is_operator=*/false);
      if (!limit.ok() && absl::IsPermissionDenied(limit.status()) && !isFinished(j->state)) {
        if (!is_operator) is_operator = mayI(**session, "patch", "nodes");
        if (*is_operator) limit = updatedTimeLimit(*j, *update, true);
      }
      if (!limit.ok()) {
        err << limit.status().message() << "\n";
        rc = 1;
        continue;
      }
      if (*limit == j->time_limit) continue;
      const std::string patch =
          *limit ? absl::StrCat(R"({"timeLimitSeconds":)", **limit, "}") : R"({"timeLimitSeconds":null})";
      if (absl::Status s = patchSlurmSpec(**session, *j, patch); !s.ok()) {
        err << "slurm_update error: job " << jobIdText(*j) << ": " << terminalSafe(std::string(s.message())) << "\n";
        rc = 1;
      }
    }
  }
  return rc;
}

}  // namespace

int scontrolJobMain(const std::vector<std::string>& args, const GlobalOptions& global,
                    const std::map<std::string, std::string>& env, std::ostream& out,
                    std::ostream& err) {
  if (args.size() >= 2 && equalsIgnoreCase(args[0], "show") && equalsIgnoreCase(args[1], "config")) {
    auto session = ApiSession::open(global, env);
    if (!session.ok()) return fail(err, session.status());
    auto config = loadSlurmConfig(**session, env);
    if (!config.ok()) return fail(err, config.status());
    out << renderShowConfig(*config, absl::Now());
    return 0;
  }
  if (equalsIgnoreCase(args[0], "update") && args.size() >= 2 && startsWithIgnoreCase(args[1], "JobId="))
    return scontrolUpdateJobMain(args, global, env, err);
  if (equalsIgnoreCase(args[0], "update") ||
      (args.size() >= 2 && (startsWithIgnoreCase(args[1], "node") || startsWithIgnoreCase(args[1], "partition"))))
    return scontrolNodeMain(args, global, env, out, err);
  const bool show = equalsIgnoreCase(args[0], "show");
  const bool hold = equalsIgnoreCase(args[0], "hold") || equalsIgnoreCase(args[0], "uhold");
  std::vector<JobIdSpec> ids;
  for (size_t i = show ? 2 : 1; i < args.size(); ++i) {
    auto parsed = parseJobIds("scontrol", args[i]);
    if (!parsed.ok()) return fail(err, parsed.status());
    ids.insert(ids.end(), parsed->begin(), parsed->end());
  }
  if (!show && ids.empty())
    return fail(err, absl::InvalidArgumentError(absl::StrCat(
                         "scontrol: error: too few arguments for keyword:", args[0])));
  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  auto jobs = listJobs(**session);
  if (!jobs.ok()) return fail(err, jobs.status());
  if (show) {
    std::vector<const JobView*> chosen;
    for (const JobView& j : *jobs)
      if (ids.empty() || jobIdMatchesAny(j, ids)) chosen.push_back(&j);
    if (chosen.empty()) {
      if (ids.empty()) {
        out << "No jobs in the system\n";
        return 0;
      }
      return fail(err, absl::NotFoundError("slurm_load_jobs error: Invalid job id specified"));
    }
    std::sort(chosen.begin(), chosen.end(),
              [](const JobView* a, const JobView* b) { return a->job_id < b->job_id; });
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < chosen.size(); ++i) out << (i ? "\n" : "") << renderShowJob(*chosen[i], now);
    out << "\n";
    return 0;
  }
  int rc = 0;
  if (equalsIgnoreCase(args[0], "requeue") || equalsIgnoreCase(args[0], "requeuehold")) {
    const bool and_hold = equalsIgnoreCase(args[0], "requeuehold");
    for (const JobIdSpec& id : ids) {
      std::vector<const JobView*> named = jobsNamedOrSay(*jobs, id, "slurm_requeue error: ", err, &rc);
      if (named.empty()) continue;
      for (const JobView* j : named) {
        const std::optional<std::string> refused = requeueRefusal(*j);
        if (refused) {
          // An array's tasks that wait are passed over when the id names several.
          if (named.size() > 1 && j->state == JobState::kPending) continue;
          err << "slurm_requeue error: " << *refused << " for job " << jobIdText(*j) << "\n";
          rc = 1;
          continue;
        }
        const std::string patch = absl::StrCat(R"({"requeueAttempt":)", j->restarts,
                                               and_hold ? R"(,"hold":true})" : "}");
        if (absl::Status s = patchSlurmSpec(**session, *j, patch); !s.ok()) {
          err << "slurm_requeue error: job " << jobIdText(*j) << ": " << terminalSafe(std::string(s.message())) << "\n";
          rc = 1;
        }
      }
    }
    return rc;
  }
  for (const JobIdSpec& id : ids) {
    std::vector<const JobView*> named = jobsNamedOrSay(*jobs, id, "", err, &rc);
    if (named.empty()) continue;
    // An array's tasks that no longer wait are passed over; an id with none waiting is an error.
    std::erase_if(named, [](const JobView* j) {
      return j->state != JobState::kPending || j->cancel_requested;
    });
    if (named.empty()) {
      err << "Job is no longer pending execution for job " << jobIdWord(id) << "\n";
      rc = 1;
      continue;
    }
    for (const JobView* j : named) {
      if (j->hold == hold) continue;
      if (absl::Status s = patchSlurmSpec(**session, *j, hold ? R"({"hold":true})" : R"({"hold":false})");
          !s.ok()) {
        err << "scontrol: error: job " << jobIdText(*j) << ": " << terminalSafe(std::string(s.message())) << "\n";
        rc = 1;
      }
    }
  }
  return rc;
}

}  // namespace muster::jobengine::slurm
