// A batch script as sbatch reads it: the #SBATCH directives (parseBatchScript), the options they
// make (parseScriptOptions), then Slurm's precedence over them (resolveBatchOptions) and the
// raw values other parsers take later (--array, --dependency, -w/-x, -t).
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/core/dependency.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/options.h"
#include "jobengine/slurm/core/script.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<ScriptDirectives> directives =
      parseBatchScript(fuzz::asText(data, size), "job.sh");
  if (!directives.ok()) {
    FUZZ_CHECK(directives.status().code() == absl::StatusCode::kInvalidArgument,
               directives.status().ToString());
    return 0;
  }
  FUZZ_CHECK(directives->args.size() == directives->arg_lines.size(), "one line per word");
  for (int line : directives->arg_lines) FUZZ_CHECK(line >= 1, "lines count from 1");

  absl::StatusOr<BatchOptions> options = parseScriptOptions(*directives);
  if (!options.ok()) return 0;
  absl::StatusOr<BatchOptions> resolved = resolveBatchOptions(*options, {}, {});
  if (!resolved.ok()) return 0;
  (void)defaultJobName(*resolved);
  if (resolved->nodes_min && resolved->nodes_max && *resolved->nodes_max != 0) {
    FUZZ_CHECK(*resolved->nodes_min <= *resolved->nodes_max, "-N min-max is ordered");
  }
  if (resolved->array) (void)parseArraySpec(*resolved->array);
  if (resolved->dependency) (void)parseDependency(*resolved->dependency);
  if (resolved->nodelist) (void)expandHostlist(*resolved->nodelist);
  if (resolved->exclude) (void)expandHostlist(*resolved->exclude);
  return 0;
}
