// -o/-e/-i filename patterns (%j, %A, %a, %N, %t, %5j, \\ escapes, ...) as sbatch and srun expand
// them, and srun's classification of those values. The first 16 bytes fill the job's numbers.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "jobengine/slurm/core/filename.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16) return 0;
  uint32_t n[4];
  std::memcpy(n, data, sizeof n);
  const std::string_view pattern = fuzz::asText(data + 16, size - 16);
  FilenameContext c;
  c.job_id = n[0];
  if (n[1] & 1) {
    c.array_job_id = n[0] - 1;
    c.array_task_id = n[1] >> 1;
  }
  if (n[2] & 1) c.step_id = n[2] >> 1;
  c.node_name = "node-7.cluster.local";
  c.node_id = n[3] & 0xffff;
  c.task_id = n[3] >> 16;
  c.restart_count = n[2] >> 24;
  c.user = "alice";
  c.job_name = "train";
  c.work_dir = n[3] & 1 ? "/home/alice" : "";
  c.srun = n[1] & 2;
  const std::string out = expandFilenamePattern(pattern, c);
  FUZZ_CHECK(out.size() <= 64 * pattern.size() + c.work_dir.size() + 64,
             "an expansion stays proportional to its pattern");
  (void)classifySrunIo(pattern, n[3] & 0xff);
  (void)classifySrunIo(std::nullopt, 4);
  return 0;
}
