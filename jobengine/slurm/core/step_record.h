#pragma once

// What srun records of its steps for accounting (sacct's "<id>.<step>" lines). Muster runs no
// slurmctld and job pods hold no API credentials, so a step's record travels the way the batch
// script's exit code does:
//
//   1. srun appends a start line when it launches a step and an end line when the step ends to
//      $MUSTER_SLURM_STATE_DIR/job-<id>.steps (stepStartLine, stepEndLine; one write each, the
//      file opened O_APPEND, so concurrent sruns do not interleave);
//   2. when the script ends, batch-step reads that file (readStepRecords: a step that never
//      wrote its end was ended with the job: CANCELLED at the job's end) and writes the records
//      after the "code:signal" line of the termination log (terminationMessage), in the 4,096
//      bytes the kubelet keeps of it: the first steps that fit, then "omitted N";
//   3. the job engine reads the launcher's termination message (parseTerminationMessage) into
//      the ParallelJob's status.slurm.steps, where sacct reads them.
//
// So steps appear in sacct once the batch step ended, not while the job runs, and a job whose
// container was killed without ending its script (SIGKILL, node loss) has none.
//
// Formats, one record per line, fields separated by tabs (names and node lists carry no tab,
// newline or other control character: each is written as '?'):
//   steps file:   start <id> <start unix s> <nodes> <tasks> <cpus> <node list> <name>
//                 end <id> <end unix s> <code>:<signal> <state>
//   termination:  <code>:<signal>
//                 step <id> <state> <code>:<signal> <start> <end> <nodes> <tasks> <cpus> <node list> <name>
//                 omitted <count>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobengine/slurm/core/limits.h"

namespace muster::jobengine::slurm {

// Bounds on what a record carries (longer text is cut).
inline constexpr size_t kStepNameMax = 128;
inline constexpr size_t kStepNodeListMax = 512;
// What the kubelet keeps of a termination message.
inline constexpr size_t kTerminationMessageMax = 4096;
// The latest time a record carries, 9999-12-31T23:59:59Z: the last an RFC 3339 date-time (the
// ParallelJob's status) can hold. The records are the job's own writing; a later time is read as
// this one, so that status.slurm.steps can always be written (issue 43).
inline constexpr int64_t kMaxStepTime = kLatestUnixSeconds;

struct StepRecord {
  uint32_t id = 0;
  std::string name;             // srun -J, else the program's base name
  std::string state = "RUNNING";  // RUNNING, COMPLETED, FAILED, CANCELLED
  std::string exit_code = "0:0";  // "code:signal", as sacct prints it
  int64_t start = 0;            // unix seconds
  int64_t end = 0;              // unix seconds; 0: not ended
  int32_t nodes = 0, tasks = 0, cpus = 0;
  std::string node_list;        // compressed hostlist
};

// The two lines srun appends (each ends with '\n').
std::string stepStartLine(const StepRecord& step);
std::string stepEndLine(uint32_t id, int64_t end, std::string_view exit_code,
                        std::string_view state);

// The step's state and "code:signal" from the highest exit code and signal of its tasks, as
// Slurm's step completion reports them: a signal -> "0:<sig>" (CANCELLED when srun itself
// ended the step, FAILED otherwise); a non-zero code -> "<code>:0" FAILED; else COMPLETED.
void setStepEnd(int max_code, int max_signal, bool cancelled_by_srun, StepRecord* step);

// The steps of a steps file, by id. Lines that do not parse are skipped (the file is the job's
// own, written by srun; a torn last line from a killed srun is not an error). A step without
// an end line ends at `job_end` as CANCELLED with "0:15" (batch-step ended it with the job).
std::vector<StepRecord> readStepRecords(std::string_view file_text, int64_t job_end);

// The termination log: `exit_code` on the first line, then as many steps as fit in `limit`
// bytes (in id order), then "omitted N" when some did not. Without steps: `exit_code` alone.
std::string terminationMessage(std::string_view exit_code, const std::vector<StepRecord>& steps,
                               size_t limit = kTerminationMessageMax);

struct TerminationMessage {
  std::string exit_code;  // the first line when it is "<digits>:<digits>"; else empty
  std::vector<StepRecord> steps;
  int64_t omitted = 0;
};
// Reads a termination message; nullopt when its first line is not "code:signal" (a message a
// container wrote itself, not batch-step's).
std::optional<TerminationMessage> parseTerminationMessage(std::string_view message);

}  // namespace muster::jobengine::slurm
