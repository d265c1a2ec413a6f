// The srun command line (inside a job, and as Open MPI's plm/slurm and PRRTE launch it). The
// input is argv without argv[0], split at NUL bytes.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/options.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> argv = fuzz::splitAtNul(fuzz::asText(data, size));
  absl::StatusOr<SrunOptions> options = parseSrunArgs(argv);
  if (!options.ok()) {
    FUZZ_CHECK(options.status().code() == absl::StatusCode::kInvalidArgument,
               options.status().ToString());
    FUZZ_CHECK(options.status().message().rfind("srun", 0) == 0, options.status().ToString());
    return 0;
  }
  const SrunOptions merged = mergeSrunOptions({}, *options);
  FUZZ_CHECK(merged.command == options->command, "merging over nothing keeps the command");
  if (options->export_env) (void)parseExportSpec(options->export_env->raw);
  // The environment srun reads, built from the same words: NAME=VALUE pairs.
  std::map<std::string, std::string> env;
  for (const std::string& word : argv) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos && eq > 0) env[word.substr(0, eq)] = word.substr(eq + 1);
  }
  absl::StatusOr<SrunOptions> from_env = srunOptionsFromEnvironment(env);
  if (from_env.ok()) (void)mergeSrunOptions(*from_env, *options);
  return 0;
}
