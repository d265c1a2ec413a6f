// What a job's own processes hand to the job engine: srun's steps file (readStepRecords), the
// batch step's termination message (terminationMessage / parseTerminationMessage, read by the
// engine from the pod status) and the scancel --signal request file (parseSignalRequest). The
// first byte picks the parser. Steps read from a file survive the termination message whole (the
// ones that fit, the rest counted), within its limit; a request that parses formats back to the
// same text's meaning.
#include <cstddef>
#include <cstdint>

#include "jobengine/slurm/core/signal_request.h"
#include "jobengine/slurm/core/step_record.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text = fuzz::asText(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      const std::vector<StepRecord> steps = readStepRecords(text, 2000000000);
      const size_t limit = 256 + (data[0] >> 2) * 64;
      const std::string message = terminationMessage("1:0", steps, limit);
      FUZZ_CHECK(steps.empty() || message.size() <= limit,
                 fuzz::quote(text) + ": " + std::to_string(message.size()) + " bytes");
      std::optional<TerminationMessage> back = parseTerminationMessage(message);
      FUZZ_CHECK(back && back->exit_code == "1:0", fuzz::quote(message));
      FUZZ_CHECK(back->steps.size() + static_cast<size_t>(back->omitted) == steps.size(),
                 fuzz::quote(message));
      for (size_t i = 0; i < back->steps.size(); ++i) {
        const StepRecord& x = back->steps[i];
        const StepRecord& y = steps[i];
        FUZZ_CHECK(x.id == y.id && x.name == y.name && x.state == y.state &&
                       x.exit_code == y.exit_code && x.start == y.start && x.end == y.end &&
                       x.nodes == y.nodes && x.tasks == y.tasks && x.cpus == y.cpus &&
                       x.node_list == y.node_list,
                   fuzz::quote(text) + ": step " + std::to_string(i) + " of " + fuzz::quote(message));
      }
      break;
    }
    case 1:
      (void)parseTerminationMessage(text);
      break;
    default: {
      (void)parseSignalName(text);
      std::optional<SignalRequest> r = parseSignalRequest(text);
      if (r) {
        std::optional<SignalRequest> again = parseSignalRequest(formatSignalRequest(*r));
        FUZZ_CHECK(again && *again == *r, fuzz::quote(text) + " -> " + formatSignalRequest(*r));
      }
      break;
    }
  }
  return 0;
}
