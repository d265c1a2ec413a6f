#include "proto/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "proto/config_reader.h"
#include "proto/strings.h"

namespace muster::proto {
namespace {

namespace fs = std::filesystem;

// Reads a whole file. The error names the path and the reason, never the content.
absl::StatusOr<std::string> readFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(strCat("cannot read ", what, " ", path));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return absl::DataLossError(strCat("error reading ", what, " ", path));
  return out.str();
}

// Base64 as kubeconfig writes it (standard alphabet; line breaks and spaces tolerated).
absl::StatusOr<std::string> decodeBase64(std::string_view data) {
  std::string compact;
  compact.reserve(data.size());
  for (char c : data) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  std::string out;
  if (!absl::Base64Unescape(compact, &out)) return absl::InvalidArgumentError("invalid base64");
  return out;
}

// Finds `name` in a kubeconfig list like `clusters: [{name: x, cluster: {...}}]` and returns
// the inner map under `field`. Returns an undefined node when missing.
YAML::Node findNamed(const YAML::Node& list, std::string_view name, const char* field) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& entry : list) {
    if (!entry.IsMap()) continue;
    const YAML::Node n = entry["name"];
    if (n && n.IsScalar() && n.Scalar() == name) {
      const YAML::Node inner = entry[field];
      // An entry without its map (e.g. `user: {}` written as `user:`) is an empty map.
      if (!inner || inner.IsNull()) return YAML::Node(YAML::NodeType::Map);
      return inner;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::string scalar(const YAML::Node& map, const char* key) {
  const YAML::Node n = map[key];
  if (n && n.IsScalar()) return n.Scalar();
  return "";
}

bool has(const YAML::Node& map, const char* key) {
  const YAML::Node n = map[key];
  return n && !n.IsNull();
}

std::string resolve(const fs::path& dir, const std::string& file) {
  fs::path p(file);
  if (p.is_relative()) p = dir / p;
  return p.string();
}

// Trims surrounding whitespace (token files usually end with a newline).
std::string trimmed(std::string s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

class Loader {
 public:
  Loader(std::string path) : path_(std::move(path)) {
    dir_ = fs::path(path_).parent_path();
    if (dir_.empty()) dir_ = ".";
  }

  absl::StatusOr<RestConfig> load(const std::string& context_override) {
    auto text = readFile(path_, "kubeconfig");
    if (!text.ok()) return text.status();
    YAML::Node root;
    try {
      root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      // The YAML error names a position, not content; keep it.
      return error(strCat("invalid YAML: ", config::yamlErrorMessage(e), " at line ", e.mark.line + 1));
    }
    try {
      return fromRoot(root, context_override);
    } catch (const YAML::Exception& e) {
      return error(strCat("unexpected structure: ", e.msg));
    } catch (const std::exception& e) {
      return error(e.what());
    }
  }

 private:
  absl::Status error(std::string_view message) const {
    return absl::InvalidArgumentError(strCat("kubeconfig ", path_, ": ", message));
  }

  absl::StatusOr<RestConfig> fromRoot(const YAML::Node& root, const std::string& override_ctx) {
    if (!root.IsMap()) return error("not a kubeconfig (top level is not a map)");
    std::string context_name = override_ctx;
    if (context_name.empty()) context_name = scalar(root, "current-context");
    if (context_name.empty()) return error("no current-context set and no context given");

    const YAML::Node context = findNamed(root["contexts"], context_name, "context");
    if (!context.IsDefined()) {
      return error(strCat("context \"", context_name, "\" not found"));
    }
    if (!context.IsMap()) return error(strCat("context \"", context_name, "\" is not a map"));
    const std::string cluster_name = scalar(context, "cluster");
    const std::string user_name = scalar(context, "user");
    if (cluster_name.empty()) {
      return error(strCat("context \"", context_name, "\" names no cluster"));
    }
    const YAML::Node cluster = findNamed(root["clusters"], cluster_name, "cluster");
    if (!cluster.IsDefined() || !cluster.IsMap()) {
      return error(strCat("cluster \"", cluster_name, "\" (from context \"", context_name,
                                "\") not found"));
    }

    RestConfig config;
    config.namespace_ = scalar(context, "namespace");
    if (auto s = readCluster(cluster, cluster_name, config); !s.ok()) return s;
    if (!user_name.empty()) {
      const YAML::Node user = findNamed(root["users"], user_name, "user");
      if (!user.IsDefined() || !user.IsMap()) {
        return error(strCat("user \"", user_name, "\" (from context \"", context_name,
                                  "\") not found"));
      }
      if (auto s = readUser(user, user_name, config); !s.ok()) return s;
    }
    return config;
  }

  absl::Status readCluster(const YAML::Node& cluster, const std::string& name,
                           RestConfig& config) {
    const std::string where = strCat("cluster \"", name, "\"");
    config.server = scalar(cluster, "server");
    if (config.server.empty()) return error(strCat(where, ": no server"));
    if (has(cluster, "proxy-url")) {
      return error(strCat(where, ": proxy-url is not supported"));
    }
    if (has(cluster, "insecure-skip-tls-verify")) {
      config.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
    }
    config.tls_server_name = scalar(cluster, "tls-server-name");
    if (has(cluster, "certificate-authority-data")) {
      auto ca = decodeBase64(scalar(cluster, "certificate-authority-data"));
      if (!ca.ok()) {
        return error(strCat(where, ": certificate-authority-data is not valid base64"));
      }
      config.ca_pem = std::move(*ca);
    } else if (has(cluster, "certificate-authority")) {
      auto ca = readFile(resolve(dir_, scalar(cluster, "certificate-authority")),
                         "certificate-authority");
      if (!ca.ok()) return error(strCat(where, ": ", ca.status().message()));
      config.ca_pem = std::move(*ca);
    }
    return absl::OkStatus();
  }

  absl::Status readUser(const YAML::Node& user, const std::string& name, RestConfig& config) {
    const std::string where = strCat("user \"", name, "\"");
    for (const char* unsupported : {"exec", "auth-provider", "username", "password", "as",
                                    "as-groups", "as-uid"}) {
      if (has(user, unsupported)) {
        return error(strCat(where, ": \"", unsupported,
                                  "\" is not supported (use a token, tokenFile or a client "
                                  "certificate)"));
      }
    }
    if (has(user, "token")) config.bearer_token = trimmed(scalar(user, "token"));
    if (has(user, "tokenFile")) {
      config.token_file = resolve(dir_, scalar(user, "tokenFile"));
      auto token = readFile(config.token_file, "tokenFile");
      if (!token.ok()) return error(strCat(where, ": ", token.status().message()));
      config.bearer_token = trimmed(std::move(*token));
    }

    auto pem = [&](const char* data_key, const char* file_key,
                   std::string& out) -> absl::Status {
      if (has(user, data_key)) {
        auto v = decodeBase64(scalar(user, data_key));
        if (!v.ok()) return error(strCat(where, ": ", data_key, " is not valid base64"));
        out = std::move(*v);
      } else if (has(user, file_key)) {
        auto v = readFile(resolve(dir_, scalar(user, file_key)), file_key);
        if (!v.ok()) return error(strCat(where, ": ", v.status().message()));
        out = std::move(*v);
      }
      return absl::OkStatus();
    };
    if (auto s = pem("client-certificate-data", "client-certificate", config.client_cert_pem);
        !s.ok()) {
      return s;
    }
    if (auto s = pem("client-key-data", "client-key", config.client_key_pem); !s.ok()) return s;
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return error(strCat(where, ": a client certificate needs both a certificate and a "
                                       "key"));
    }
    return absl::OkStatus();
  }

  std::string path_;
  fs::path dir_;
};

std::string envOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

absl::StatusOr<RestConfig> loadKubeconfig(const std::string& path, const std::string& context) {
  try {
    return Loader(path).load(context);
  } catch (const std::exception& e) {
    return absl::InternalError(strCat("kubeconfig ", path, ": ", e.what()));
  }
}

absl::StatusOr<RestConfig> inClusterConfig(const std::string& sa_dir) {
  const std::string host = envOrEmpty("KUBERNETES_SERVICE_HOST");
  const std::string port = envOrEmpty("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  RestConfig config;
  const bool ipv6 = host.find(':') != std::string::npos;
  config.server = strCat("https://", ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", port);
  config.token_file = (fs::path(sa_dir) / "token").string();
  auto token = readFile(config.token_file, "service account token");
  if (!token.ok()) return absl::FailedPreconditionError(std::string(token.status().message()));
  config.bearer_token = trimmed(std::move(*token));
  auto ca = readFile((fs::path(sa_dir) / "ca.crt").string(), "service account CA");
  if (!ca.ok()) return absl::FailedPreconditionError(std::string(ca.status().message()));
  config.ca_pem = std::move(*ca);
  if (auto ns = readFile((fs::path(sa_dir) / "namespace").string(), "service account namespace");
      ns.ok())
    config.namespace_ = trimmed(std::move(*ns));
  return config;
}

absl::StatusOr<RestConfig> loadRestConfig(const std::string& kubeconfig_path,
                                          const std::string& context) {
  if (!kubeconfig_path.empty()) return loadKubeconfig(kubeconfig_path, context);
  const std::string env = envOrEmpty("KUBECONFIG");
  if (!env.empty()) {
    for (absl::string_view entry : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      return loadKubeconfig(std::string(entry), context);
    }
  }
  if (!envOrEmpty("KUBERNETES_SERVICE_HOST").empty()) return inClusterConfig();
  const std::string home = envOrEmpty("HOME");
  if (!home.empty()) {
    const std::string path = (fs::path(home) / ".kube" / "config").string();
    std::error_code ec;
    if (fs::exists(path, ec)) return loadKubeconfig(path, context);
  }
  return absl::FailedPreconditionError(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a cluster, or "
      "create ~/.kube/config");
}

}  // namespace muster::proto
