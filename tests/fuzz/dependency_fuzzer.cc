// sbatch -d/--dependency values (and spec.slurm.dependency, which anyone who may patch a job can
// write, up to the CRD's 4096 characters). What squeue's %E prints for a parsed dependency must
// parse back to the same entries (their states aside), and evaluating it never fails.
// Amplification (issue 43: 4 KiB expanded to 371,371 entries, ~0.9 s per evaluation): no input
// parses to more than kMaxDependencyItems entries, evaluation asks for each entry's job at most
// twice, and what is printed of it is bounded by the entries (and by kDependencyStatusMax where
// status is written). The target's -malloc_limit_mb (CMakeLists.txt) bounds each allocation.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/dependency.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

// The longest entry formatDependency prints: "afternotok:4294967295_4294967295+35791394(unfulfilled)"
// and a separator.
constexpr size_t kLongestEntry = 80;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::asText(data, size);
  absl::StatusOr<DependencySpec> spec = parseDependency(text);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument, spec.status().ToString());
    return 0;
  }
  FUZZ_CHECK(spec->items.size() <= kMaxDependencyItems,
             fuzz::quote(text) + " parsed to " + std::to_string(spec->items.size()) + " entries");
  const std::string printed = formatDependency(*spec);
  FUZZ_CHECK(printed.size() <= spec->items.size() * kLongestEntry, fuzz::quote(text) + " -> " + printed);
  if (!spec->items.empty()) {
    absl::StatusOr<DependencySpec> back = parseDependency(printed);
    FUZZ_CHECK(back.ok(), fuzz::quote(text) + " -> " + printed + ": " + back.status().ToString());
    DependencySpec want = *spec;
    for (Dependency& d : want.items) d.initially_failed = false;
    if (want.items.size() == 1) want.combine = back->combine;  // one entry: ',' and '?' agree
    FUZZ_CHECK(*back == want, fuzz::quote(text) + " -> " + printed);
  }
  DependencyContext context;
  context.now = absl::FromUnixSeconds(1'800'000'000);
  size_t lookups = 0;
  context.lookup = [&](uint32_t job_id, std::optional<uint32_t>, bool) -> std::optional<DependencyTargetState> {
    ++lookups;
    if (job_id % 3 == 0) return std::nullopt;
    DependencyTargetState s;
    s.state = job_id % 2 ? JobState::kCompleted : JobState::kRunning;
    s.start_time = absl::FromUnixSeconds(1'799'990'000);
    return s;
  };
  context.own_array_task_id = 1;  // aftercorr asks for the corresponding task too
  const DependencyEvaluation eval = evaluateDependency(*spec, context);
  FUZZ_CHECK(eval.states.size() == spec->items.size(), "one state per entry");
  FUZZ_CHECK(lookups <= 2 * spec->items.size(), std::to_string(lookups) + " lookups for " +
                                                    std::to_string(spec->items.size()) + " entries");
  const std::string status_text = formatDependency(*spec, eval.states, kDependencyStatusMax);
  FUZZ_CHECK(status_text.size() <= kDependencyStatusMax, fuzz::quote(text) + " -> " + status_text);
  return 0;
}
