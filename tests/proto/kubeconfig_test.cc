#include "proto/kubeconfig.h"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"

namespace muster::proto {
namespace {

namespace fs = std::filesystem;

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "muster-kubeconfig-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// Sets an environment variable for the scope of a test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const std::string kCaPem = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
const std::string kCertPem = "-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n";
const std::string kKeyPem = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n";

std::string kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
         "clusters:\n- name: c1\n  cluster:\n" +
         cluster +
         "users:\n- name: u1\n  user:\n" + user +
         "contexts:\n- name: main\n  context:\n    cluster: c1\n    user: u1\n" + extra;
}

TEST_CASE("a kubeconfig with inline base64 data yields the server, CA and client certificate",
          "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.write(
      "config",
      kubeconfig("    server: https://127.0.0.1:6443\n"
                 "    certificate-authority-data: " +
                     absl::Base64Escape(kCaPem) + "\n",
                 "    client-certificate-data: " + absl::Base64Escape(kCertPem) +
                     "\n    client-key-data: " + absl::Base64Escape(kKeyPem) + "\n"));
  auto config = loadKubeconfig(path);
  REQUIRE(config.ok());
  CHECK(config->server == "https://127.0.0.1:6443");
  CHECK(config->ca_pem == kCaPem);
  CHECK(config->client_cert_pem == kCertPem);
  CHECK(config->client_key_pem == kKeyPem);
  CHECK(config->bearer_token.empty());
  CHECK_FALSE(config->insecure_skip_tls_verify);
}

TEST_CASE("file references are resolved relative to the kubeconfig's directory", "[kubeconfig]") {
  TempDir dir;
  dir.write("pki/ca.crt", kCaPem);
  dir.write("pki/client.crt", kCertPem);
  const std::string key_path = dir.write("elsewhere/client.key", kKeyPem);
  const std::string path = dir.write(
      "kube/../config",  // the directory of the file, not the process' working directory
      kubeconfig("    server: https://api.example:443\n"
                 "    certificate-authority: pki/ca.crt\n"
                 "    tls-server-name: kubernetes.default\n",
                 "    client-certificate: pki/client.crt\n"
                 "    client-key: " +
                     key_path + "\n"));
  auto config = loadKubeconfig(path);
  REQUIRE(config.ok());
  CHECK(config->ca_pem == kCaPem);
  CHECK(config->client_cert_pem == kCertPem);
  CHECK(config->client_key_pem == kKeyPem);
  CHECK(config->tls_server_name == "kubernetes.default");
}

TEST_CASE("a token user and insecure-skip-tls-verify are read", "[kubeconfig]") {
  TempDir dir;
  const std::string path =
      dir.write("config", kubeconfig("    server: https://10.0.0.1:6443\n"
                                     "    insecure-skip-tls-verify: true\n",
                                     "    token: abc.def\n"));
  auto config = loadKubeconfig(path);
  REQUIRE(config.ok());
  CHECK(config->bearer_token == "abc.def");
  CHECK(config->token_file.empty());
  CHECK(config->insecure_skip_tls_verify);
}

TEST_CASE("a tokenFile is read, trimmed and kept for re-reading", "[kubeconfig]") {
  TempDir dir;
  dir.write("token", "from-file\n");
  const std::string path = dir.write(
      "config", kubeconfig("    server: https://10.0.0.1:6443\n", "    tokenFile: token\n"));
  auto config = loadKubeconfig(path);
  REQUIRE(config.ok());
  CHECK(config->bearer_token == "from-file");
  CHECK(config->token_file == (fs::path(dir.path()) / "token").string());
}

TEST_CASE("the context argument overrides current-context", "[kubeconfig]") {
  TempDir dir;
  const std::string text =
      "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
      "clusters:\n"
      "- name: c1\n  cluster:\n    server: https://one:6443\n"
      "- name: c2\n  cluster:\n    server: https://two:6443\n"
      "users:\n- name: u1\n  user:\n    token: t1\n"
      "contexts:\n"
      "- name: main\n  context:\n    cluster: c1\n    user: u1\n"
      "- name: other\n  context:\n    cluster: c2\n    user: u1\n";
  const std::string path = dir.write("config", text);
  auto current = loadKubeconfig(path);
  REQUIRE(current.ok());
  CHECK(current->server == "https://one:6443");
  auto other = loadKubeconfig(path, "other");
  REQUIRE(other.ok());
  CHECK(other->server == "https://two:6443");
}

TEST_CASE("a missing context is a clear error", "[kubeconfig]") {
  TempDir dir;
  const std::string path =
      dir.write("config", kubeconfig("    server: https://one:6443\n", "    token: t\n"));
  auto config = loadKubeconfig(path, "foo");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() == "kubeconfig " + path + ": context \"foo\" not found");
}

TEST_CASE("an exec plugin user is refused by name and the token is not leaked", "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.write(
      "config", kubeconfig("    server: https://one:6443\n",
                           "    token: s3cret\n"
                           "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                           "      command: aws\n"));
  auto config = loadKubeconfig(path);
  REQUIRE_FALSE(config.ok());
  CHECK(absl::StrContains(config.status().message(), "\"exec\" is not supported"));
  CHECK(absl::StrContains(config.status().message(), "user \"u1\""));
  CHECK_FALSE(absl::StrContains(config.status().message(), "s3cret"));
}

TEST_CASE("auth-provider and basic auth are refused", "[kubeconfig]") {
  TempDir dir;
  for (const std::string user :
       {"    auth-provider:\n      name: gcp\n", "    username: admin\n    password: pw\n"}) {
    const std::string path =
        dir.write("config", kubeconfig("    server: https://one:6443\n", user));
    auto config = loadKubeconfig(path);
    REQUIRE_FALSE(config.ok());
    CHECK(absl::StrContains(config.status().message(), "is not supported"));
    CHECK_FALSE(absl::StrContains(config.status().message(), "pw\""));
  }
}

TEST_CASE("bad base64 names the field", "[kubeconfig]") {
  TempDir dir;
  const std::string path =
      dir.write("config", kubeconfig("    server: https://one:6443\n"
                                     "    certificate-authority-data: '%%%not base64'\n",
                                     "    token: t\n"));
  auto config = loadKubeconfig(path);
  REQUIRE_FALSE(config.ok());
  CHECK(absl::StrContains(config.status().message(),
                          "certificate-authority-data is not valid base64"));
}

TEST_CASE("bad YAML is an error, not an exception", "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.write("config", "clusters: [unclosed\n  - {: :\n");
  auto config = loadKubeconfig(path);
  REQUIRE_FALSE(config.ok());
  CHECK(absl::StartsWith(config.status().message(), "kubeconfig " + path + ": invalid YAML"));

  const std::string wrong_types = dir.write(
      "config2",
      "current-context: main\ncontexts:\n- name: main\n  context:\n    cluster: c1\n"
      "clusters:\n- name: c1\n  cluster:\n    server: https://x\n"
      "    insecure-skip-tls-verify: [1, 2]\n");
  auto typed = loadKubeconfig(wrong_types);
  REQUIRE_FALSE(typed.ok());
  CHECK(absl::StartsWith(typed.status().message(), "kubeconfig " + wrong_types + ":"));
}

TEST_CASE("a missing kubeconfig file or referenced file is an error naming it", "[kubeconfig]") {
  TempDir dir;
  auto missing = loadKubeconfig(dir.path() + "/nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(absl::StrContains(missing.status().message(), dir.path() + "/nope"));

  const std::string path = dir.write(
      "config", kubeconfig("    server: https://one:6443\n    certificate-authority: ca.crt\n",
                           "    token: t\n"));
  auto no_ca = loadKubeconfig(path);
  REQUIRE_FALSE(no_ca.ok());
  CHECK(absl::StrContains(no_ca.status().message(), dir.path() + "/ca.crt"));
}

TEST_CASE("a client certificate without its key is refused", "[kubeconfig]") {
  TempDir dir;
  const std::string path = dir.write(
      "config", kubeconfig("    server: https://one:6443\n",
                           "    client-certificate-data: " + absl::Base64Escape(kCertPem) + "\n"));
  auto config = loadKubeconfig(path);
  REQUIRE_FALSE(config.ok());
  CHECK(absl::StrContains(config.status().message(), "both a certificate and a key"));
}

TEST_CASE("in-cluster configuration reads the service account and brackets IPv6",
          "[kubeconfig]") {
  TempDir dir;
  dir.write("token", "sa-token\n");
  dir.write("ca.crt", kCaPem);
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    auto config = inClusterConfig(dir.path());
    REQUIRE(config.ok());
    CHECK(config->server == "https://10.96.0.1:443");
    CHECK(config->bearer_token == "sa-token");
    CHECK(config->token_file == dir.path() + "/token");
    CHECK(config->ca_pem == kCaPem);
  }
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
    auto config = inClusterConfig(dir.path());
    REQUIRE(config.ok());
    CHECK(config->server == "https://[fd00::1]:6443");
  }
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    auto config = inClusterConfig(dir.path());
    REQUIRE_FALSE(config.ok());
    CHECK(absl::StrContains(config.status().message(), "KUBERNETES_SERVICE_HOST"));
  }
}

TEST_CASE("loadRestConfig prefers the explicit path, then $KUBECONFIG", "[kubeconfig]") {
  TempDir dir;
  const std::string a =
      dir.write("a", kubeconfig("    server: https://a:6443\n", "    token: t\n"));
  const std::string b =
      dir.write("b", kubeconfig("    server: https://b:6443\n", "    token: t\n"));
  ScopedEnv env("KUBECONFIG", (b + ":" + a).c_str());
  auto explicit_path = loadRestConfig(a);
  REQUIRE(explicit_path.ok());
  CHECK(explicit_path->server == "https://a:6443");
  auto from_env = loadRestConfig("");
  REQUIRE(from_env.ok());
  CHECK(from_env->server == "https://b:6443");
}

}  // namespace
}  // namespace muster::proto
