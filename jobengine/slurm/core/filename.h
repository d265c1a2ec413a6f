#pragma once

// Output, error and input file name patterns of sbatch/srun -o/-e/-i (sbatch.1 "filename
// pattern"; src/common/print_fields.c expand_stdio_fields as slurmstepd applies it, and
// src/srun/fname.c for srun's special values).
//
//   %%  a '%'                          %A  array master job id (the job id if not an array)
//   %a  array task id                  %b  array task id modulo 10
//   %J  jobid.stepid ("128.0"; the job id alone for the batch step)
//   %j  job id                         %N  short name of the node (the batch script's node)
//   %n  node index within the job      %r  restart count
//   %s  step id ("batch" for the batch step)
//   %t  task id (rank)                 %u  user name          %x  job name
//
// A number between '%' and the letter zero-pads numbers to that width (at most 10: "%4j" ->
// "0128"); it is ignored for text (%N, %u, %x). Unknown letters are kept with their '%' ("%q",
// "%5q"); a '%' at the very end is dropped. If the pattern holds any backslash, nothing is
// expanded and every backslash is removed ("a\%j" -> "a%j"). A relative result is placed in the
// working directory.
//
// Slurm's quirks kept: %a of a job that is not an array prints 4294967294 (NO_VAL).
// Not supported: %S (the SLUID of Slurm 25.05) is kept literally.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace muster::jobengine::slurm {

// sbatch's defaults (read_config.h DEFAULT_BATCH_STDOUT_PATH, DEFAULT_BATCH_ARRAY_STDOUT_PATH).
inline constexpr std::string_view kDefaultBatchOutput = "slurm-%j.out";
inline constexpr std::string_view kDefaultArrayBatchOutput = "slurm-%A_%a.out";

// The default -o of a batch job (-e defaults to the same file).
std::string_view defaultOutputPattern(bool is_array);

// Slurm prints NO_VAL for %a of a job that is not an array.
inline constexpr uint32_t kNoArrayTaskId = 4294967294u;

struct FilenameContext {
  uint32_t job_id = 0;
  std::optional<uint32_t> array_job_id;   // set for array elements
  std::optional<uint32_t> array_task_id;  // set for array elements
  std::optional<uint32_t> step_id;        // nullopt: the batch step
  std::string node_name;                  // %N uses the part before the first '.'
  uint32_t node_id = 0;
  uint32_t task_id = 0;
  uint32_t restart_count = 0;
  std::string user;
  std::string job_name;
  std::string work_dir;  // relative results are placed under it; empty leaves them relative
  // srun's own pass (is_srun): %N, %n, %t and %u are left for the per-task expansion, and the
  // working directory is not prepended.
  bool srun = false;
};

std::string expandFilenamePattern(std::string_view pattern, const FilenameContext& context);

// What srun does with an -o/-e/-i value before expanding it (src/srun/fname.c fname_create).
struct SrunIo {
  enum class Kind {
    kAll,      // absent, "all" (any case, as a prefix) or "-": every task to srun's own stdio
    kNone,     // "none": /dev/null for every task
    kOneTask,  // a task number below the task count: only that task's stream
    kFile,     // a pattern: one file, or one per task when it names %N, %n, %t or %u
  };
  Kind kind = Kind::kAll;
  uint32_t task_id = 0;   // kOneTask
  bool per_task = false;  // kFile
};
SrunIo classifySrunIo(std::optional<std::string_view> value, uint32_t task_count);

}  // namespace muster::jobengine::slurm
