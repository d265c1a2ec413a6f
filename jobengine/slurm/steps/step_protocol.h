#pragma once

// The step protocol: how srun talks to `muster-slurm step-tasks` on each node of a step, over one
// byte stream in each direction (ssh's stdin/stdout for a remote node, two pipes for the local
// one). Muster runs no slurmd: srun starts `<MUSTER_SLURM_RSH...> <node> <MUSTER_SLURM_BIN>
// step-tasks` and everything the tasks need (argv, environment, working directory) travels as
// data in a Request frame, never as a shell command line.
//
// Framing (all integers unsigned 32-bit big-endian unless said otherwise):
//
//   frame   := type:u8 length:u32 payload[length]
//   string  := length:u32 bytes[length]          (any bytes: NULs and newlines included)
//   strings := count:u32 string[count]
//
// srun -> step-tasks
//   'R' Request    (first and only once)
//         version:u32 job_id:u32 step_id:u32 node_id:u32 node_name:string flags:u32
//         kill_wait_ms:u32 cwd:string argv:strings env:strings ntasks:u32
//         { procid:u32 localid:u32 env:strings }[ntasks]
//       flags: bit 0 --label, bit 1 --kill-on-bad-exit. `env` are "NAME=VALUE" entries: the
//       common environment of the step, then each task's own entries, which replace common
//       ones of the same name (stepTaskEnvironment's SLURM_PROCID, ...).
//   'S' Signal     signal:u32 - deliver to the process group of every task now.
//   'T' Terminate  (empty) - SIGCONT and SIGTERM to every task's process group, SIGKILL after
//       kill_wait_ms. End of input (srun or the connection died) does the same.
//
// step-tasks -> srun
//   'H' Hello      "MUSTER-STEP" version:u32 - the first bytes step-tasks writes, before it reads
//       the request: srun knows the node was reached (anything before it, e.g. text a login
//       shell printed, is skipped and reported; see findHello).
//   'O' Stdout, 'E' Stderr   procid:u32 data - output of one task: whole lines, or one piece of a
//       line longer than kMaxOutputChunk, or the last unterminated line when the stream ended.
//       A frame never holds a partial line followed by more data.
//   'M' Message    procid:i32 text:string - a problem starting a task (procid >= 0: "execve():
//       foo: No such file or directory", "couldn't chdir to ...") or the whole node (-1).
//   'X' Exit       procid:u32 exit_code:i32 signal:u32 core_dumped:u32 - one task ended.
//   'D' Done       (empty) - every task was reaped; nothing follows.
//
// Limits are checked on each frame header, before its payload is buffered: a Request up to
// kMaxRequestBytes, output and messages up to kMaxOutputChunk (+ procid), control frames a few
// bytes. Counts inside a payload are checked against the bytes left, so a hostile count never
// allocates. Unknown frame types, short payloads and trailing bytes are errors.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muster::jobengine::slurm {

inline constexpr uint32_t kStepProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 5;
inline constexpr size_t kMaxRequestBytes = 64u << 20;  // 64 MiB
inline constexpr size_t kMaxOutputChunk = 64u << 10;   // 64 KiB of task output per frame
inline constexpr std::string_view kHelloMagic = "MUSTER-STEP";

enum class FrameType : uint8_t {
  kRequest = 'R',
  kSignal = 'S',
  kTerminate = 'T',
  kHello = 'H',
  kStdout = 'O',
  kStderr = 'E',
  kMessage = 'M',
  kExit = 'X',
  kDone = 'D',
};

struct Frame {
  FrameType type = FrameType::kDone;
  std::string payload;
};

struct StepTaskSpec {
  uint32_t procid = 0;   // SLURM_PROCID
  uint32_t localid = 0;  // SLURM_LOCALID
  std::vector<std::string> env;  // "NAME=VALUE", over the common environment

  bool operator==(const StepTaskSpec&) const = default;
};

struct StepRequest {
  uint32_t version = kStepProtocolVersion;
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t node_id = 0;  // SLURM_NODEID: the node's index in the step
  std::string node_name;
  bool label = false;
  bool kill_on_bad_exit = false;
  uint32_t kill_wait_ms = 2000;
  std::string cwd;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // common to every task of the node
  std::vector<StepTaskSpec> tasks;

  bool operator==(const StepRequest&) const = default;
};

struct TaskOutput {
  uint32_t procid = 0;
  bool stderr_stream = false;
  std::string data;
  bool operator==(const TaskOutput&) const = default;
};

struct TaskMessage {
  int32_t procid = -1;  // -1: about the node, not one task
  std::string text;
  bool operator==(const TaskMessage&) const = default;
};

struct TaskExit {
  uint32_t procid = 0;
  int32_t exit_code = 0;  // WEXITSTATUS, when signal == 0
  uint32_t signal = 0;    // WTERMSIG, 0 when the task exited
  bool core_dumped = false;
  bool operator==(const TaskExit&) const = default;
};

// Whole frames, ready to write.
std::string encodeFrame(FrameType type, std::string_view payload);
std::string encodeRequest(const StepRequest& request);
std::string encodeHello();
std::string encodeSignal(int signal);
std::string encodeTerminate();
std::string encodeOutput(const TaskOutput& output);
std::string encodeMessage(const TaskMessage& message);
std::string encodeExit(const TaskExit& exit);
std::string encodeDone();

// Payload decoders (the payload of a frame of that type). InvalidArgument on short, long or
// inconsistent payloads; decodeRequest also on a version other than kStepProtocolVersion.
absl::StatusOr<StepRequest> decodeRequest(std::string_view payload);
absl::StatusOr<uint32_t> decodeHello(std::string_view payload);  // the peer's version
absl::StatusOr<int> decodeSignal(std::string_view payload);
absl::StatusOr<TaskOutput> decodeOutput(FrameType type, std::string_view payload);
absl::StatusOr<TaskMessage> decodeMessage(std::string_view payload);
absl::StatusOr<TaskExit> decodeExit(std::string_view payload);

// The largest payload a frame of `type` may carry; nullopt for a byte that is no frame type.
std::optional<size_t> maxPayload(uint8_t type);

// Incremental frame splitter for a non-blocking stream: append what read() returned, then take
// frames until none is complete. After an error every call returns it again.
class FrameReader {
 public:
  void append(std::string_view bytes);
  // A complete frame, nullopt when more bytes are needed, or the framing error.
  absl::StatusOr<std::optional<Frame>> next();
  // Bytes received and not yet returned as frames (a truncated frame at end of stream).
  size_t buffered() const { return buffer_.size() - offset_; }

 private:
  std::string buffer_;
  size_t offset_ = 0;
  absl::Status error_;
};

// Where the Hello frame starts in `bytes` (the first bytes a peer sent): 0 when it comes first,
// a larger offset when other output precedes it, nullopt when it is not (yet) there. Only the
// fixed prefix (type, length, magic) is matched.
std::optional<size_t> findHello(std::string_view bytes);

// The fixed first bytes of a Hello frame (type, length, magic).
std::string helloPrefix();

}  // namespace muster::jobengine::slurm
