// A kubeconfig file as proto::loadKubeconfig reads it (muster-scheduler --kubeconfig, musterctl,
// the Slurm CLI). The input is written to a file in a private temporary directory, so relative
// certificate and token paths resolve there (to nothing).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "proto/kubeconfig.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

namespace {

const std::string& kubeconfigPath() {
  static const std::string path = [] {
    char dir[] = "/tmp/muster-fuzz-kubeconfig-XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    return std::string(dir) + "/config";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = kubeconfigPath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  absl::StatusOr<proto::RestConfig> config = proto::loadKubeconfig(path);
  if (config.ok()) {
    FUZZ_CHECK(!config->server.empty(), "a loaded kubeconfig names a server");
    FUZZ_CHECK(config->client_cert_pem.empty() == config->client_key_pem.empty(),
               "a client certificate comes with its key");
  } else {
    FUZZ_CHECK(!config.status().message().empty(), "errors say something");
  }
  absl::StatusOr<proto::RestConfig> other = proto::loadKubeconfig(path, "other-context");
  (void)other;
  return 0;
}
