#pragma once

// What every Kubernetes-facing Slurm command (sbatch now; squeue, scancel, ... next) needs: the
// cluster found like kubectl finds it, the namespace, the Slurm config, the user.
//
//   muster-slurm [--kubeconfig F] [--context C] [--namespace NS] <command> [args...]
//   sbatch [args...]          (a symlink to muster-slurm; then from the environment only)
//
// Cluster: --kubeconfig, else $KUBECONFIG, else the in-cluster service account, else
// ~/.kube/config. Namespace: --namespace, else $MUSTER_NAMESPACE, else the kubeconfig context's
// (or the service account's), else "default". The Slurm config (partitions): $MUSTER_SLURM_CONFIG
// = "configmap:<namespace>/<name>[:<key>]" (default configmap:muster-system/muster-scheduler,
// key config.yaml: the scheduler's own config, as the chart installs it) or "file:<path>" (or a
// path).

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "absl/strings/str_cat.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "proto/kubeconfig.h"

namespace muster::jobengine::slurm {

// What every command prints for -V/--version.
inline constexpr char kVersionLine[] = "slurm 24.05.0 (Muster 0.1)\n";

struct GlobalOptions {
  std::string kubeconfig;
  std::string context;
  std::string namespace_;
};

// An API client with its own I/O thread, for blocking calls (callSync) from the command.
class ApiSession {
 public:
  static absl::StatusOr<std::unique_ptr<ApiSession>> open(const GlobalOptions& options,
                                                          const std::map<std::string, std::string>& env);
  ~ApiSession();
  proto::Client& client() { return *client_; }
  const proto::RestConfig& config() const { return config_; }
  const std::string& ns() const { return namespace_; }

 private:
  ApiSession() = default;
  proto::asio::io_context io_;
  std::unique_ptr<proto::asio::executor_work_guard<proto::asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::shared_ptr<proto::Client> client_;
  proto::RestConfig config_;
  std::string namespace_;
};

// Every item of a paginated list (500 a page) at `path` with `query`, decoded as T; items that
// do not decode are skipped (the engine or the scheduler reports them).
template <typename T>
absl::StatusOr<std::vector<T>> listAll(ApiSession& session, const std::string& path,
                                       const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<T> out;
  std::string cont;
  do {
    proto::Request req;
    req.path = path;
    req.query = query;
    req.query.emplace_back("limit", "500");
    if (!cont.empty()) req.query.emplace_back("continue", cont);
    auto body = session.client().callSync(std::move(req));
    if (!body.ok()) return body.status();
    auto doc = proto::parseJson(*body);
    if (!doc.ok()) return doc.status();
    if (!doc->IsObject() || !doc->HasMember("items") || !(*doc)["items"].IsArray())
      return absl::InternalError(absl::StrCat("the API server's list of ", path, " has no items"));
    for (const auto& item : (*doc)["items"].GetArray()) {
      T object;
      if (proto::decode(item, &object).ok()) out.push_back(std::move(object));
    }
    cont.clear();
    if (auto m = doc->FindMember("metadata"); m != doc->MemberEnd() && m->value.IsObject())
      if (auto c = m->value.FindMember("continue"); c != m->value.MemberEnd() && c->value.IsString())
        cont = c->value.GetString();
  } while (!cont.empty());
  return out;
}

// The Slurm section of Muster's config, from $MUSTER_SLURM_CONFIG (see above).
absl::StatusOr<SlurmConfig> loadSlurmConfig(ApiSession& session,
                                            const std::map<std::string, std::string>& env);
// Where the config came from, for messages and for the job-id counter's default namespace.
std::string slurmConfigSource(const std::map<std::string, std::string>& env);

// The Kubernetes user name of the session (SelfSubjectReview); $USER when the API server does
// not say.
std::string whoAmI(ApiSession& session, const std::map<std::string, std::string>& env);

// Whether the session's user may `verb` the cluster-scoped `resource` of the core group
// (SelfSubjectAccessReview); false when the API server does not answer.
bool mayI(ApiSession& session, std::string_view verb, std::string_view resource);

// Splits "muster-slurm [global options] <command> ..." or "<command> ..." (argv[0] a symlink):
// the command, its arguments, and the global options. InvalidArgument for a bad global option,
// and with the usage for a missing command; `muster-slurm -h|--help` sets `help` instead.
struct Invocation {
  std::string command;
  std::vector<std::string> args;
  GlobalOptions global;
  bool help = false;
};
// What `muster-slurm --help` prints: the global options parseInvocation takes and the commands.
std::string_view musterSlurmUsage();
absl::StatusOr<Invocation> parseInvocation(int argc, char** argv);

}  // namespace muster::jobengine::slurm
