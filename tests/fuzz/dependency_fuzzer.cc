// sbatch -d/--dependency values. What squeue's %E prints for a parsed dependency must parse back
// to the same entries (their states aside), and evaluating it never fails.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/dependency.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::asText(data, size);
  absl::StatusOr<DependencySpec> spec = parseDependency(text);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument, spec.status().ToString());
    return 0;
  }
  const std::string printed = formatDependency(*spec);
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
  context.lookup = [](uint32_t job_id, std::optional<uint32_t>, bool) -> std::optional<DependencyTargetState> {
    if (job_id % 3 == 0) return std::nullopt;
    DependencyTargetState s;
    s.state = job_id % 2 ? JobState::kCompleted : JobState::kRunning;
    s.start_time = absl::FromUnixSeconds(1'799'990'000);
    return s;
  };
  const DependencyEvaluation eval = evaluateDependency(*spec, context);
  FUZZ_CHECK(eval.states.size() == spec->items.size(), "one state per entry");
  (void)formatDependency(*spec, eval.states);
  return 0;
}
