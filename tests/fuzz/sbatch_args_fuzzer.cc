// The sbatch command line (getopt_long's rules, Slurm's option table and value parsers). The
// input is argv without argv[0], split at NUL bytes; its first byte picks GNU permutation.
// Options parsed twice must give the same result, and merging a result over itself changes
// nothing that was set.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/options.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool permute = data[0] & 1;
  const std::vector<std::string> argv = fuzz::splitAtNul(fuzz::asText(data + 1, size - 1));
  absl::StatusOr<BatchOptions> options = parseSbatchArgs(argv, !permute);
  if (!options.ok()) {
    FUZZ_CHECK(options.status().code() == absl::StatusCode::kInvalidArgument,
               options.status().ToString());
    FUZZ_CHECK(options.status().message().rfind("sbatch", 0) == 0, options.status().ToString());
    return 0;
  }
  const BatchOptions merged = mergeOptions(*options, *options);
  FUZZ_CHECK(merged.job_name == options->job_name && merged.ntasks == options->ntasks &&
                 merged.mem_mb == options->mem_mb && merged.time_limit == options->time_limit,
             "merging options over themselves changes them");
  absl::StatusOr<BatchOptions> resolved = resolveBatchOptions({}, {}, *options);
  if (resolved.ok()) (void)defaultJobName(*resolved);
  if (options->export_env) (void)parseExportSpec(options->export_env->raw);
  return 0;
}
