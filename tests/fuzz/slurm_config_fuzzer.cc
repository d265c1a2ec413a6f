// The `slurm` section of muster-scheduler's config (partitions with PodTemplateSpecs written as
// YAML), as the sbatch CLI and the job engine read it. A config that parses validates, and every
// partition's template is a PodTemplate with a "main" container.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/runtime/cluster_config.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<SlurmConfig> config = parseSlurmSection(fuzz::asText(data, size));
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument,
               config.status().ToString());
    return 0;
  }
  FUZZ_CHECK(validateSlurmConfig(*config).ok(), "a parsed config is valid");
  for (const Partition& p : config->partitions) {
    FUZZ_CHECK(p.pod_template.has_value(), p.name);
    proto::PodTemplate t = *p.pod_template;
    FUZZ_CHECK(t.container("main").has_value(), p.name);
    FUZZ_CHECK(config->partition(p.name) != nullptr, p.name);
    (void)t.toPod(proto::ObjectMeta{});
  }
  if (config->enabled()) FUZZ_CHECK(config->partition("") != nullptr, "a default partition");
  return 0;
}
