#include "jobengine/slurm/cli/sbatch_cli.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "jobengine/slurm/cli/job_ids.h"
#include "jobengine/slurm/core/options.h"
#include "jobengine/ssh_attempt.h"
#include "jobengine/slurm/core/script.h"
#include "jobengine/slurm/runtime/submit.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "proto/quantity.h"
#include "proto/selector.h"
#include "proto/strings.h"

namespace muster::jobengine::slurm {

using proto::strCat;

namespace {

int fail(std::ostream& err, const absl::Status& status) {
  std::string m(status.message());
  if (m.rfind("sbatch: ", 0) != 0) m = "sbatch: error: " + m;
  err << m << "\n";
  return 1;
}

absl::StatusOr<std::string> readAll(std::istream& in) {
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

// The partition's nodes with their allocatable cpu, memory and GPUs; nullopt when the caller may
// not list nodes (the checks against them are skipped then).
std::optional<std::vector<NodeShape>> partitionNodes(ApiSession& session, const Partition& p,
                                                     int verbose, std::ostream& err) {
  std::string selector;
  for (const auto& [k, v] : p.node_selector) selector += (selector.empty() ? "" : ",") + k + "=" + v;
  std::vector<std::pair<std::string, std::string>> query;
  if (!selector.empty()) query.emplace_back("labelSelector", selector);
  auto nodes = listAll<proto::Node>(session, proto::resources::kNodes.collectionPath(), query);
  if (!nodes.ok()) {
    if (verbose > 0)
      err << "sbatch: cannot list the nodes of partition " << p.name
          << " to check the request (" << nodes.status().message() << "); the scheduler will\n";
    return std::nullopt;
  }
  std::vector<NodeShape> out;
  for (const proto::Node& node : *nodes) {
    NodeShape n;
    n.name = node.meta.name;
    n.labels = node.meta.labels;
    if (auto* c = node.allocatableOf("cpu")) n.cpu_millis = c->milliValue();
    if (auto* m = node.allocatableOf("memory")) n.memory_mb = m->value() / (1024 * 1024);
    if (auto* g = node.allocatableOf(proto::kGpuResource)) n.gpus = g->value();
    out.push_back(std::move(n));
  }
  return out;
}

// "code:signal" -> the exit status sbatch --wait returns (Slurm: the job's exit code).
int exitStatusOf(const std::string& exit_code, const std::string& state) {
  int code = 0, sig = 0;
  if (std::sscanf(exit_code.c_str(), "%d:%d", &code, &sig) < 1) code = 0;
  if (code == 0 && sig > 0) code = 128 + sig;
  if (code == 0 && state != "COMPLETED") code = 1;
  return code;
}

void removeJob(ApiSession& session, const std::string& name) {
  proto::Request remove;
  remove.verb = proto::Verb::kDelete;
  remove.path = proto::resources::kParallelJobs.objectPath(session.ns(), name);
  (void)session.client().callSync(std::move(remove));
}

// Creates the job and then its Secret, which the job owns (it goes when the job is deleted);
// without the Secret the job goes again. A name already taken (by someone else: ids come from
// the counter) is AlreadyExists, for submitAll to take fresh ids.
absl::Status createJob(ApiSession& session, Submission& submission) {
  proto::Request create_job;
  create_job.verb = proto::Verb::kPost;
  create_job.path = proto::resources::kParallelJobs.collectionPath(session.ns());
  create_job.body = proto::encode(submission.job);
  auto created = session.client().callSync(std::move(create_job));
  if (!created.ok())
    return absl::Status(proto::isAlreadyExists(created.status()) ? absl::StatusCode::kAlreadyExists
                                                                 : created.status().code(),
                        strCat("Batch job submission failed: ", created.status().message()));
  proto::ParallelJob job;
  if (absl::Status s = proto::decodeJson(*created, &job); !s.ok()) return s;
  proto::OwnerReference owner = ownerOf(job);
  // Blocking the job's deletion would need update on paralleljobs/finalizers, which a Slurm
  // user has no use for.
  owner.block_owner_deletion = false;
  submission.batch.meta.owner_references.push_back(owner);
  proto::Request create_secret;
  create_secret.verb = proto::Verb::kPost;
  create_secret.path = proto::resources::kSecrets.collectionPath(session.ns());
  create_secret.body = proto::encode(submission.batch);
  auto secret = session.client().callSync(std::move(create_secret));
  if (!secret.ok()) {
    removeJob(session, job.meta.name);
    return absl::Status(proto::isAlreadyExists(secret.status()) ? absl::StatusCode::kAlreadyExists
                                                                : secret.status().code(),
                        strCat("Batch job submission failed: cannot store the batch script: ",
                               secret.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace

int sbatchMain(const std::vector<std::string>& args, const GlobalOptions& global,
               const std::map<std::string, std::string>& env, std::istream& in, std::ostream& out,
               std::ostream& err) {
  auto cli = parseSbatchArgs(args);
  if (!cli.ok()) return fail(err, cli.status());
  if (cli->help || cli->usage) {
    out << sbatchUsage();
    return 0;
  }
  if (cli->version) {
    out << kVersionLine;
    return 0;
  }

  // The script: a file, --wrap, or stdin.
  SubmitContext ctx;
  ctx.environment = env;
  ctx.submit_host = hostName();
  std::error_code ec;
  ctx.submit_dir = std::filesystem::current_path(ec).string();
  ctx.now = absl::Now();
  BatchOptions from_script;
  if (!cli->wrap) {
    if (!cli->positional.empty()) {
      ctx.script_path = cli->positional[0];
      ctx.script_args.assign(cli->positional.begin() + 1, cli->positional.end());
      std::ifstream file(ctx.script_path, std::ios::binary);
      if (!file)
        return fail(err, absl::NotFoundError(strCat("Unable to open file ", ctx.script_path)));
      ctx.script = *readAll(file);
    } else {
      ctx.script = *readAll(in);
    }
    auto directives = parseBatchScript(ctx.script, ctx.script_path.empty() ? "(null)" : ctx.script_path);
    if (!directives.ok()) return fail(err, directives.status());
    for (const auto& w : directives->warnings) err << "sbatch: error: " << w << "\n";
    auto parsed = parseScriptOptions(*directives);
    if (!parsed.ok()) return fail(err, parsed.status());
    from_script = *std::move(parsed);
  }
  auto from_env = optionsFromEnvironment(env);
  if (!from_env.ok()) return fail(err, from_env.status());
  auto options = resolveBatchOptions(from_script, *from_env, *cli);
  if (!options.ok()) return fail(err, options.status());
  options->positional = cli->positional;
  for (const IgnoredOption& i : options->ignored) err << i.warning << "\n";

  auto session = ApiSession::open(global, env);
  if (!session.ok()) return fail(err, session.status());
  ctx.ns = (*session)->ns();
  auto config = loadSlurmConfig(**session, env);
  if (!config.ok()) return fail(err, config.status());
  if (const Partition* p = config->partition(options->partition.value_or("")))
    ctx.nodes = partitionNodes(**session, *p, options->verbose, err);
  // -d names jobs of this namespace; one that cannot be read for another reason than its absence
  // is taken to exist (the engine lifts a dependency on a job that is gone).
  ctx.job_exists = [&](int64_t id) {
    proto::Request get;
    get.path = proto::resources::kParallelJobs.objectPath(ctx.ns, jobObjectName(id));
    auto found = (*session)->client().callSync(std::move(get));
    return found.ok() || !proto::isNotFound(found.status());
  };
  // Everything is checked before anything is created (a job id included).
  if (absl::Status s = checkSubmission(*options, *config, ctx); !s.ok()) return fail(err, s);
  ctx.user = whoAmI(**session, env);

  SubmitSteps steps;
  steps.allocate_ids = [&](int64_t count) {
    return allocateJobIds((*session)->client(), config->job_ids, count);
  };
  steps.create = [&](Submission& submission) { return createJob(**session, submission); };
  steps.remove = [&](const std::string& name) { removeJob(**session, name); };
  auto submissions = submitAll(*options, *config, ctx, steps);
  if (!submissions.ok()) return fail(err, submissions.status());
  const int64_t id_value = submissions->front().job.spec.slurm->job_id;
  const int64_t* id = &id_value;
  std::vector<std::string> created;
  for (const Submission& s : *submissions) created.push_back(s.job.meta.name);
  const Submission* submission = &submissions->front();
  for (const std::string& note : submission->notes) err << note << "\n";
  if (options->parsable) out << *id << "\n";
  else out << "Submitted batch job " << *id << "\n";
  out.flush();
  if (!options->wait) return 0;

  // --wait: until the job (every task of an array) ends; its exit code is sbatch's (an array's:
  // the highest of its tasks', as Slurm's).
  int rc = 0;
  for (const std::string& name : created) {
    for (;;) {
      proto::Request get;
      get.path = proto::resources::kParallelJobs.objectPath(ctx.ns, name);
      auto body = (*session)->client().callSync(std::move(get));
      if (!body.ok()) {
        if (proto::isNotFound(body.status())) {
          err << "sbatch: error: job " << name << " was deleted\n";
          return 1;
        }
      } else {
        proto::ParallelJob now;
        if (proto::decodeJson(*body, &now).ok() && now.status.slurm) {
          const std::string& state = now.status.slurm->state;
          if (state != "PENDING" && state != "RUNNING" && !state.empty()) {
            rc = std::max(rc, exitStatusOf(now.status.slurm->exit_code, state));
            break;
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
  }
  return rc;
}

}  // namespace muster::jobengine::slurm
