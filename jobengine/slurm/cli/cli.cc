#include "jobengine/slurm/cli/cli.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto/json.h"
#include "proto/strings.h"

namespace muster::jobengine::slurm {

using proto::strCat;

namespace {

std::string envOr(const std::map<std::string, std::string>& env, const std::string& key,
                  const std::string& fallback = "") {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

constexpr char kDefaultConfig[] = "configmap:muster-system/muster-scheduler";

}  // namespace

absl::StatusOr<std::unique_ptr<ApiSession>> ApiSession::open(
    const GlobalOptions& options, const std::map<std::string, std::string>& env) {
  std::string kubeconfig = options.kubeconfig;
  auto rest = proto::loadRestConfig(kubeconfig, options.context);
  if (!rest.ok()) return rest.status();
  std::unique_ptr<ApiSession> s(new ApiSession());
  s->config_ = *rest;
  s->namespace_ = !options.namespace_.empty() ? options.namespace_
                  : !envOr(env, "MUSTER_NAMESPACE").empty() ? envOr(env, "MUSTER_NAMESPACE")
                  : !rest->namespace_.empty() ? rest->namespace_
                                              : "default";
  proto::ClientOptions client_options;
  client_options.user_agent = "muster-slurm/0.1";
  client_options.max_retries = 3;
  auto client = proto::Client::create(s->io_.get_executor(), *rest, client_options);
  if (!client.ok()) return client.status();
  s->client_ = *client;
  s->work_ = std::make_unique<proto::asio::executor_work_guard<proto::asio::io_context::executor_type>>(
      s->io_.get_executor());
  s->thread_ = std::thread([io = &s->io_] { io->run(); });
  return s;
}

ApiSession::~ApiSession() {
  if (client_) client_->shutdown();
  work_.reset();
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

std::string slurmConfigSource(const std::map<std::string, std::string>& env) {
  return envOr(env, "MUSTER_SLURM_CONFIG", kDefaultConfig);
}

absl::StatusOr<SlurmConfig> loadSlurmConfig(ApiSession& session,
                                            const std::map<std::string, std::string>& env) {
  const std::string source = slurmConfigSource(env);
  std::string text;
  std::string default_ns;
  if (source.rfind("configmap:", 0) == 0) {
    std::string ref = source.substr(10);
    std::string key = "config.yaml";
    if (auto colon = ref.find(':'); colon != std::string::npos) {
      key = ref.substr(colon + 1);
      ref = ref.substr(0, colon);
    }
    auto slash = ref.find('/');
    if (slash == std::string::npos)
      return absl::InvalidArgumentError(
          strCat("MUSTER_SLURM_CONFIG=", source, ": want configmap:<namespace>/<name>[:<key>]"));
    const std::string ns = ref.substr(0, slash), name = ref.substr(slash + 1);
    default_ns = ns;
    proto::Request req;
    req.path = proto::resources::kConfigMaps.objectPath(ns, name);
    auto body = session.client().callSync(std::move(req));
    if (!body.ok())
      return absl::Status(body.status().code(),
                          strCat("cannot read Muster's Slurm config (ConfigMap ", ns, "/", name,
                                 "; set MUSTER_SLURM_CONFIG): ", body.status().message()));
    auto doc = proto::parseJson(*body);
    if (!doc.ok() || !doc->IsObject()) return absl::InternalError("the config ConfigMap is not JSON");
    auto data = doc->FindMember("data");
    if (data == doc->MemberEnd() || !data->value.IsObject() ||
        !data->value.HasMember(key.c_str()) || !data->value[key.c_str()].IsString())
      return absl::NotFoundError(strCat("ConfigMap ", ns, "/", name, " has no key ", key));
    text = data->value[key.c_str()].GetString();
  } else {
    const std::string path = source.rfind("file:", 0) == 0 ? source.substr(5) : source;
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(strCat("cannot read Muster's Slurm config ", path));
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    default_ns = session.ns();
  }
  auto config = parseSlurmSection(text);
  if (!config.ok())
    return absl::Status(config.status().code(),
                        strCat("Muster's Slurm config (", source, "): ", config.status().message()));
  if (config->job_ids.namespace_.empty()) config->job_ids.namespace_ = default_ns;
  return config;
}

std::string whoAmI(ApiSession& session, const std::map<std::string, std::string>& env) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
  req.body = R"({"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"})";
  auto body = session.client().callSync(std::move(req));
  if (body.ok()) {
    auto doc = proto::parseJson(*body);
    if (doc.ok() && doc->IsObject()) {
      auto st = doc->FindMember("status");
      if (st != doc->MemberEnd() && st->value.IsObject()) {
        auto ui = st->value.FindMember("userInfo");
        if (ui != st->value.MemberEnd() && ui->value.IsObject()) {
          auto u = ui->value.FindMember("username");
          if (u != ui->value.MemberEnd() && u->value.IsString()) return u->value.GetString();
        }
      }
    }
  }
  return envOr(env, "USER", "unknown");
}

bool mayI(ApiSession& session, std::string_view verb, std::string_view resource) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
  proto::JsonWriter w;
  w.beginObject().stringField("apiVersion", "authorization.k8s.io/v1");
  w.stringField("kind", "SelfSubjectAccessReview");
  w.key("spec").beginObject().key("resourceAttributes").beginObject();
  w.stringField("verb", verb).stringField("resource", resource);
  w.endObject().endObject().endObject();
  req.body = w.str();
  auto body = session.client().callSync(std::move(req));
  if (!body.ok()) return false;
  auto doc = proto::parseJson(*body);
  if (!doc.ok() || !doc->IsObject()) return false;
  auto st = doc->FindMember("status");
  if (st == doc->MemberEnd() || !st->value.IsObject()) return false;
  auto allowed = st->value.FindMember("allowed");
  return allowed != st->value.MemberEnd() && allowed->value.IsBool() && allowed->value.GetBool();
}

namespace {

// Every global option parseInvocation below takes, and the commands cmd/main.cc runs.
constexpr char kUsage[] =
    "usage: muster-slurm [--kubeconfig PATH] [--context NAME] [-n|--namespace NS]\n"
    "                    COMMAND [ARGS...]\n"
    "       COMMAND [ARGS...]   (through a symlink named after the command)\n"
    "\n"
    "Muster's Slurm commands in one binary (COMMAND --help prints its options):\n"
    "  sbatch    submit a batch script as a ParallelJob\n"
    "  srun      run a job step inside a batch job\n"
    "  squeue    the namespace's Slurm jobs\n"
    "  scancel   cancel or signal jobs\n"
    "  sinfo     the partitions over the cluster's nodes\n"
    "  sacct     accounting of the jobs the API server keeps\n"
    "  scontrol  show hostnames/hostlist/job/node/partition/config, hold, release,\n"
    "            requeue, update\n"
    "  install-tools DIR   copy this binary into DIR with a symlink for each command\n"
    "  (batch-step and step-tasks are run by Muster inside a job's pods)\n"
    "\n"
    "  --kubeconfig PATH    the cluster (default: $KUBECONFIG, then the in-cluster\n"
    "                       service account, then ~/.kube/config)\n"
    "  --context NAME       the kubeconfig context (default: its current-context)\n"
    "  -n, --namespace NS   the jobs' namespace (default: $MUSTER_NAMESPACE, else the\n"
    "                       context's, else default)\n"
    "  -h, --help           print this usage and exit\n"
    "\n"
    "Through a symlink only the environment says these. Muster's Slurm config (the\n"
    "partitions): $MUSTER_SLURM_CONFIG, configmap:NS/NAME[:KEY] or file:PATH (default\n"
    "configmap:muster-system/muster-scheduler, key config.yaml).\n";

}  // namespace

std::string_view musterSlurmUsage() { return kUsage; }

absl::StatusOr<Invocation> parseInvocation(int argc, char** argv) {
  Invocation inv;
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string self = std::filesystem::path(argv[0]).filename().string();
  size_t i = 0;
  if (self.rfind("muster-slurm", 0) != 0) {  // muster-slurm, muster-slurm-static
    inv.command = self;
    inv.args = args;
    return inv;
  }
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag, std::string* out) -> bool {
      if (a == flag && i + 1 < args.size()) {
        *out = args[++i];
        return true;
      }
      if (a.rfind(flag + "=", 0) == 0) {
        *out = a.substr(flag.size() + 1);
        return true;
      }
      return false;
    };
    if (value("--kubeconfig", &inv.global.kubeconfig) || value("--context", &inv.global.context) ||
        value("--namespace", &inv.global.namespace_) || value("-n", &inv.global.namespace_))
      continue;
    if (a == "-h" || a == "--help") {
      inv.help = true;
      return inv;
    }
    if (!a.empty() && a[0] == '-')
      return absl::InvalidArgumentError(strCat("muster-slurm: unknown option ", a));
    break;
  }
  if (i >= args.size()) {
    std::string usage = kUsage;
    usage.pop_back();  // the caller adds the newline
    return absl::InvalidArgumentError(usage);
  }
  inv.command = args[i];
  inv.args.assign(args.begin() + static_cast<long>(i) + 1, args.end());
  return inv;
}

}  // namespace muster::jobengine::slurm
