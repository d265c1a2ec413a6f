// muster-scheduler's configuration file (YAML: the process's keys, the scheduler's, the job
// engine's and the Slurm partitions), as cmd::parseProcessConfig reads it at startup. A config
// that parses must also pass validation (parse runs it) and configure sane values.
#include <cstddef>
#include <cstdint>

#include "scheduler/cmd/config.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<cmd::ProcessConfig> config = cmd::parseProcessConfig(fuzz::asText(data, size));
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument,
               config.status().ToString());
    return 0;
  }
  const absl::Status valid = cmd::validateProcessConfig(*config);
  FUZZ_CHECK(valid.ok(), valid.ToString());
  FUZZ_CHECK(config->scheduler.topology_levels.size() <= scheduler::kMaxTopologyLevels,
             "at most kMaxTopologyLevels levels");
  for (size_t i = 0; i < config->scheduler.topology_levels.size(); ++i) {
    FUZZ_CHECK(config->scheduler.levelIndex(config->scheduler.topology_levels[i]) == static_cast<int>(i),
               config->scheduler.topology_levels[i]);
  }
  return 0;
}
