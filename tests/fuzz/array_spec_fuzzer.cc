// sbatch --array values and the job ids scancel/squeue/scontrol take. The task ids squeue prints
// for a parsed array must parse back to the same ids. The first byte picks the MaxArraySize
// (Slurm's default 1001, or up to 4000001 - the largest slurm.conf allows).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/array.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static constexpr uint32_t kSizes[] = {kDefaultMaxArraySize, 1, 2, 65536, 4000001};
  const uint32_t max_size = kSizes[data[0] % 5];
  const std::string_view text = fuzz::asText(data + 1, size - 1);

  absl::StatusOr<ArraySpec> spec = parseArraySpec(text, max_size);
  if (spec.ok()) {
    FUZZ_CHECK(!spec->task_ids.empty(), fuzz::quote(text));
    FUZZ_CHECK(std::is_sorted(spec->task_ids.begin(), spec->task_ids.end()), fuzz::quote(text));
    FUZZ_CHECK(std::adjacent_find(spec->task_ids.begin(), spec->task_ids.end()) == spec->task_ids.end(),
               fuzz::quote(text));
    FUZZ_CHECK(spec->maxTaskId() < max_size, fuzz::quote(text));
    const std::string printed = formatArrayTaskIds(spec->task_ids);
    absl::StatusOr<ArraySpec> back = parseArraySpec(printed, max_size);
    FUZZ_CHECK(back.ok() && back->task_ids == spec->task_ids, fuzz::quote(text) + " -> " + printed);
  }
  absl::StatusOr<std::vector<JobIdSpec>> ids = parseJobIdList(text);
  (void)ids;
  return 0;
}
