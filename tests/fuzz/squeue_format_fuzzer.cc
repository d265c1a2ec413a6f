// squeue -o and -O format strings (and SQUEUE_FORMAT/SQUEUE_FORMAT2), then a header and a line
// rendered with them. The first byte picks -o or -O and jobs or steps.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/squeue_format.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const SqueueKind kind = data[0] & 2 ? SqueueKind::kSteps : SqueueKind::kJobs;
  const std::string_view text = fuzz::asText(data + 1, size - 1);
  const SqueueFormat format = data[0] & 1 ? parseSqueueLongFormat(text, kind)
                                          : parseSqueueFormat(text, kind);
  (void)renderSqueueHeader(format, kind);
  const std::string line = renderSqueueLine(format, [&](const SqueueField& f) {
    SqueueCell cell;
    cell.text = f.name.empty() ? "x" : f.name + "-value";
    if (f.letter == 'R') cell.truncate = false;
    return cell;
  }, kind);
  FUZZ_CHECK(line.find('\n') == std::string::npos || text.find('\n') != std::string_view::npos,
             "a line break in the output comes from the format");
  return 0;
}
