#pragma once

#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace muster::proto {

// How to reach and authenticate to one API server. Secrets (token, key) are never logged.
struct RestConfig {
  std::string server;  // "https://127.0.0.1:6443"
  // PEM of the CA that must have signed the server certificate; empty means the system roots.
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;  // honoured only when the kubeconfig asks for it
  std::string tls_server_name;            // SNI / verified name override; empty = host of `server`
  // Bearer token. When token_file is set it wins and is re-read when it changes (service account
  // tokens rotate); `bearer_token` then holds the last value read.
  std::string bearer_token;
  std::string token_file;
  // Client certificate (PEM). Both or neither.
  std::string client_cert_pem;
  std::string client_key_pem;
  // The context's namespace (kubeconfig), or the service account's (in cluster); empty: none set.
  std::string namespace_;
};

// Reads a kubeconfig file. `context` overrides current-context when non-empty. File references
// (certificate-authority, client-certificate, client-key, tokenFile) are resolved relative to the
// kubeconfig's directory and read; inline *-data fields are base64-decoded.
absl::StatusOr<RestConfig> loadKubeconfig(const std::string& path, const std::string& context = "");

// In-cluster configuration: KUBERNETES_SERVICE_HOST/PORT and the service account files under
// `sa_dir` (token re-read on rotation, ca.crt).
absl::StatusOr<RestConfig> inClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// The usual precedence: explicit path, then $KUBECONFIG (first entry), then in-cluster, then
// ~/.kube/config.
absl::StatusOr<RestConfig> loadRestConfig(const std::string& kubeconfig_path,
                                          const std::string& context = "");

}  // namespace muster::proto
