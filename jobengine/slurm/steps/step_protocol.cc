#include "jobengine/slurm/steps/step_protocol.h"

#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

constexpr uint32_t kFlagLabel = 1u << 0;
constexpr uint32_t kFlagKillOnBadExit = 1u << 1;
// Control frames and the Hello are tiny; the slack keeps later additions compatible.
constexpr size_t kMaxControlBytes = 64;

void putU32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>((v >> 24) & 0xff));
  out->push_back(static_cast<char>((v >> 16) & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
  out->push_back(static_cast<char>(v & 0xff));
}

void putString(std::string* out, std::string_view s) {
  putU32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

void putStrings(std::string* out, const std::vector<std::string>& list) {
  putU32(out, static_cast<uint32_t>(list.size()));
  for (const std::string& s : list) putString(out, s);
}

uint32_t getU32At(std::string_view s, size_t at) {
  return (uint32_t{static_cast<unsigned char>(s[at])} << 24) |
         (uint32_t{static_cast<unsigned char>(s[at + 1])} << 16) |
         (uint32_t{static_cast<unsigned char>(s[at + 2])} << 8) |
         uint32_t{static_cast<unsigned char>(s[at + 3])};
}

// Bounds-checked reading of one payload. Every failure names what was being read.
class PayloadReader {
 public:
  PayloadReader(std::string_view payload, std::string_view what) : in_(payload), what_(what) {}

  absl::StatusOr<uint32_t> u32(std::string_view field) {
    if (in_.size() - at_ < 4) return truncated(field);
    uint32_t v = getU32At(in_, at_);
    at_ += 4;
    return v;
  }

  absl::StatusOr<std::string> string(std::string_view field) {
    absl::StatusOr<uint32_t> n = u32(field);
    if (!n.ok()) return n.status();
    if (*n > in_.size() - at_) {
      return absl::InvalidArgumentError(absl::StrCat("step protocol: ", av(what_), ": ",
                                                     av(field), " claims ", *n, " bytes but only ",
                                                     in_.size() - at_, " are left"));
    }
    std::string s(in_.substr(at_, *n));
    at_ += *n;
    return s;
  }

  absl::StatusOr<std::vector<std::string>> strings(std::string_view field) {
    absl::StatusOr<uint32_t> n = u32(field);
    if (!n.ok()) return n.status();
    // Every entry takes at least its 4-byte length: a count beyond that is a lie.
    if (*n > (in_.size() - at_) / 4) return badCount(field, *n);
    std::vector<std::string> out;
    out.reserve(*n);
    for (uint32_t i = 0; i < *n; ++i) {
      absl::StatusOr<std::string> s = string(field);
      if (!s.ok()) return s.status();
      out.push_back(*std::move(s));
    }
    return out;
  }

  size_t left() const { return in_.size() - at_; }

  std::string_view rest() {
    std::string_view r = in_.substr(at_);
    at_ = in_.size();
    return r;
  }

  absl::Status finish() {
    if (at_ != in_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("step protocol: ", av(what_), " has ",
                                                     in_.size() - at_, " trailing bytes"));
    }
    return absl::OkStatus();
  }

  absl::Status badCount(std::string_view field, uint32_t n) const {
    return absl::InvalidArgumentError(absl::StrCat("step protocol: ", av(what_), ": ", av(field),
                                                   " count ", n, " exceeds the ", left(),
                                                   " bytes left"));
  }

 private:
  absl::Status truncated(std::string_view field) const {
    return absl::InvalidArgumentError(
        absl::StrCat("step protocol: ", av(what_), " is truncated at ", av(field)));
  }

  std::string_view in_;
  std::string_view what_;
  size_t at_ = 0;
};

#define MUSTER_ASSIGN_OR_RETURN_IMPL(var, expr, tmp) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  var = *std::move(tmp)
#define MUSTER_CONCAT_INNER(a, b) a##b
#define MUSTER_CONCAT(a, b) MUSTER_CONCAT_INNER(a, b)
#define ASSIGN_OR_RETURN(var, expr) \
  MUSTER_ASSIGN_OR_RETURN_IMPL(var, expr, MUSTER_CONCAT(status_or_, __LINE__))

}  // namespace

std::string encodeFrame(FrameType type, std::string_view payload) {
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  out.push_back(static_cast<char>(type));
  putU32(&out, static_cast<uint32_t>(payload.size()));
  out.append(payload.data(), payload.size());
  return out;
}

std::string encodeRequest(const StepRequest& r) {
  std::string p;
  putU32(&p, r.version);
  putU32(&p, r.job_id);
  putU32(&p, r.step_id);
  putU32(&p, r.node_id);
  putString(&p, r.node_name);
  putU32(&p, (r.label ? kFlagLabel : 0) | (r.kill_on_bad_exit ? kFlagKillOnBadExit : 0));
  putU32(&p, r.kill_wait_ms);
  putString(&p, r.cwd);
  putStrings(&p, r.argv);
  putStrings(&p, r.env);
  putU32(&p, static_cast<uint32_t>(r.tasks.size()));
  for (const StepTaskSpec& t : r.tasks) {
    putU32(&p, t.procid);
    putU32(&p, t.localid);
    putStrings(&p, t.env);
  }
  return encodeFrame(FrameType::kRequest, p);
}

std::string encodeHello() {
  std::string p(kHelloMagic);
  putU32(&p, kStepProtocolVersion);
  return encodeFrame(FrameType::kHello, p);
}

std::string helloPrefix() {
  std::string hello = encodeHello();
  return hello.substr(0, kFrameHeaderBytes + kHelloMagic.size());
}

std::string encodeSignal(int signal) {
  std::string p;
  putU32(&p, static_cast<uint32_t>(signal));
  return encodeFrame(FrameType::kSignal, p);
}

std::string encodeTerminate() { return encodeFrame(FrameType::kTerminate, ""); }

std::string encodeOutput(const TaskOutput& o) {
  std::string p;
  putU32(&p, o.procid);
  p.append(o.data);
  return encodeFrame(o.stderr_stream ? FrameType::kStderr : FrameType::kStdout, p);
}

std::string encodeMessage(const TaskMessage& m) {
  std::string p;
  putU32(&p, static_cast<uint32_t>(m.procid));
  putString(&p, m.text);
  return encodeFrame(FrameType::kMessage, p);
}

std::string encodeExit(const TaskExit& e) {
  std::string p;
  putU32(&p, e.procid);
  putU32(&p, static_cast<uint32_t>(e.exit_code));
  putU32(&p, e.signal);
  putU32(&p, e.core_dumped ? 1 : 0);
  return encodeFrame(FrameType::kExit, p);
}

std::string encodeDone() { return encodeFrame(FrameType::kDone, ""); }

absl::StatusOr<StepRequest> decodeRequest(std::string_view payload) {
  PayloadReader in(payload, "request");
  StepRequest r;
  ASSIGN_OR_RETURN(r.version, in.u32("version"));
  if (r.version != kStepProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat("step protocol: request version ", r.version,
                                                   ", this muster-slurm speaks version ",
                                                   kStepProtocolVersion));
  }
  ASSIGN_OR_RETURN(r.job_id, in.u32("job id"));
  ASSIGN_OR_RETURN(r.step_id, in.u32("step id"));
  ASSIGN_OR_RETURN(r.node_id, in.u32("node id"));
  ASSIGN_OR_RETURN(r.node_name, in.string("node name"));
  uint32_t flags = 0;
  ASSIGN_OR_RETURN(flags, in.u32("flags"));
  r.label = (flags & kFlagLabel) != 0;
  r.kill_on_bad_exit = (flags & kFlagKillOnBadExit) != 0;
  ASSIGN_OR_RETURN(r.kill_wait_ms, in.u32("kill wait"));
  ASSIGN_OR_RETURN(r.cwd, in.string("cwd"));
  ASSIGN_OR_RETURN(r.argv, in.strings("argv"));
  ASSIGN_OR_RETURN(r.env, in.strings("environment"));
  uint32_t ntasks = 0;
  ASSIGN_OR_RETURN(ntasks, in.u32("task count"));
  // Each task takes at least 12 bytes (procid, localid, an empty list).
  if (ntasks > in.left() / 12) return in.badCount("task", ntasks);
  r.tasks.reserve(ntasks);
  for (uint32_t i = 0; i < ntasks; ++i) {
    StepTaskSpec t;
    ASSIGN_OR_RETURN(t.procid, in.u32("task procid"));
    ASSIGN_OR_RETURN(t.localid, in.u32("task localid"));
    ASSIGN_OR_RETURN(t.env, in.strings("task environment"));
    r.tasks.push_back(std::move(t));
  }
  if (absl::Status s = in.finish(); !s.ok()) return s;
  if (r.argv.empty()) {
    return absl::InvalidArgumentError("step protocol: request has an empty argv");
  }
  return r;
}

absl::StatusOr<uint32_t> decodeHello(std::string_view payload) {
  if (payload.size() < kHelloMagic.size() ||
      payload.substr(0, kHelloMagic.size()) != kHelloMagic) {
    return absl::InvalidArgumentError("step protocol: hello without the MUSTER-STEP magic");
  }
  PayloadReader in(payload.substr(kHelloMagic.size()), "hello");
  uint32_t version = 0;
  ASSIGN_OR_RETURN(version, in.u32("version"));
  // Later versions may append fields; the version alone decides compatibility.
  return version;
}

absl::StatusOr<int> decodeSignal(std::string_view payload) {
  PayloadReader in(payload, "signal");
  uint32_t sig = 0;
  ASSIGN_OR_RETURN(sig, in.u32("signal"));
  if (absl::Status s = in.finish(); !s.ok()) return s;
  if (sig == 0 || sig > 64) {
    return absl::InvalidArgumentError(absl::StrCat("step protocol: invalid signal ", sig));
  }
  return static_cast<int>(sig);
}

absl::StatusOr<TaskOutput> decodeOutput(FrameType type, std::string_view payload) {
  PayloadReader in(payload, "output");
  TaskOutput o;
  o.stderr_stream = type == FrameType::kStderr;
  ASSIGN_OR_RETURN(o.procid, in.u32("procid"));
  o.data = std::string(in.rest());
  return o;
}

absl::StatusOr<TaskMessage> decodeMessage(std::string_view payload) {
  PayloadReader in(payload, "message");
  TaskMessage m;
  uint32_t procid = 0;
  ASSIGN_OR_RETURN(procid, in.u32("procid"));
  m.procid = static_cast<int32_t>(procid);
  ASSIGN_OR_RETURN(m.text, in.string("text"));
  if (absl::Status s = in.finish(); !s.ok()) return s;
  return m;
}

absl::StatusOr<TaskExit> decodeExit(std::string_view payload) {
  PayloadReader in(payload, "exit");
  TaskExit e;
  uint32_t code = 0, core = 0;
  ASSIGN_OR_RETURN(e.procid, in.u32("procid"));
  ASSIGN_OR_RETURN(code, in.u32("exit code"));
  ASSIGN_OR_RETURN(e.signal, in.u32("signal"));
  ASSIGN_OR_RETURN(core, in.u32("core dumped"));
  if (absl::Status s = in.finish(); !s.ok()) return s;
  e.exit_code = static_cast<int32_t>(code);
  e.core_dumped = core != 0;
  if (e.exit_code < 0 || e.exit_code > 255 || e.signal > 64) {
    return absl::InvalidArgumentError(absl::StrCat("step protocol: invalid exit status ",
                                                   e.exit_code, ", signal ", e.signal));
  }
  return e;
}

std::optional<size_t> maxPayload(uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kRequest:
      return kMaxRequestBytes;
    case FrameType::kStdout:
    case FrameType::kStderr:
      return kMaxOutputChunk + 4;
    case FrameType::kMessage:
      return kMaxOutputChunk + 8;
    case FrameType::kSignal:
    case FrameType::kTerminate:
    case FrameType::kHello:
    case FrameType::kExit:
    case FrameType::kDone:
      return kMaxControlBytes;
  }
  return std::nullopt;
}

void FrameReader::append(std::string_view bytes) {
  if (!error_.ok()) return;
  // Drop consumed bytes before growing, so the buffer stays about one frame long.
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
}

absl::StatusOr<std::optional<Frame>> FrameReader::next() {
  if (!error_.ok()) return error_;
  std::string_view in(buffer_);
  in.remove_prefix(offset_);
  if (in.size() < kFrameHeaderBytes) return std::optional<Frame>();
  const uint8_t type = static_cast<uint8_t>(in[0]);
  const uint32_t length = getU32At(in, 1);
  std::optional<size_t> max = maxPayload(type);
  if (!max) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("step protocol: unknown frame type 0x", absl::Hex(type, absl::kZeroPad2)));
    return error_;
  }
  if (length > *max) {
    error_ = absl::InvalidArgumentError(absl::StrCat("step protocol: frame '",
                                                     std::string(1, static_cast<char>(type)),
                                                     "' of ", length, " bytes exceeds the limit of ",
                                                     *max));
    return error_;
  }
  if (in.size() - kFrameHeaderBytes < length) return std::optional<Frame>();
  Frame f;
  f.type = static_cast<FrameType>(type);
  f.payload = std::string(in.substr(kFrameHeaderBytes, length));
  offset_ += kFrameHeaderBytes + length;
  return std::optional<Frame>(std::move(f));
}

std::optional<size_t> findHello(std::string_view bytes) {
  const std::string prefix = helloPrefix();
  size_t at = bytes.find(prefix);
  if (at == std::string_view::npos) return std::nullopt;
  return at;
}

}  // namespace muster::jobengine::slurm
