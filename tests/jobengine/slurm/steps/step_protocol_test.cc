#include "jobengine/slurm/steps/step_protocol.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace muster::jobengine::slurm {
namespace {

using namespace std::string_literals;

StepRequest hostileRequest() {
  StepRequest r;
  r.job_id = 4294967295u;
  r.step_id = 7;
  r.node_id = 2;
  r.node_name = "gpu-node-2.train.default.svc";
  r.label = true;
  r.kill_on_bad_exit = true;
  r.kill_wait_ms = 1234;
  r.cwd = "/work/with space/and\nnewline";
  // orted's argv as Open MPI's plm/slurm writes it: quotes and semicolons are data.
  r.argv = {"orted", "-mca", "orte_hnp_uri", "\"3351.0;tcp://10.0.0.1:4711\"", "", "a\0b"s,
            std::string(100000, 'x')};
  r.env = {"PATH=/usr/bin:/bin", "EMPTY=", "MULTI=line1\nline2", "WEIRD=\xff\xfe\x01"};
  r.tasks = {{0, 0, {"SLURM_PROCID=0", "SLURM_LOCALID=0"}},
             {1, 1, {"SLURM_PROCID=1", "SLURM_LOCALID=1"}},
             {5, 2, {}}};
  return r;
}

Frame onlyFrame(const std::string& bytes) {
  FrameReader reader;
  reader.append(bytes);
  absl::StatusOr<std::optional<Frame>> f = reader.next();
  REQUIRE(f.ok());
  REQUIRE(f->has_value());
  REQUIRE(reader.buffered() == 0);
  return **f;
}

TEST_CASE("a request with NULs, newlines, empty and huge strings survives a round trip",
          "[step_protocol]") {
  const StepRequest r = hostileRequest();
  Frame f = onlyFrame(encodeRequest(r));
  CHECK(f.type == FrameType::kRequest);
  absl::StatusOr<StepRequest> back = decodeRequest(f.payload);
  REQUIRE(back.ok());
  CHECK(*back == r);
}

TEST_CASE("every reply frame survives a round trip", "[step_protocol]") {
  TaskOutput out{3, false, "line one\nline two\n"};
  TaskOutput err{4, true, "no newline \0 with NUL"s};
  TaskMessage msg{1, "execve(): nosuch: No such file or directory"};
  TaskMessage node_msg{-1, "the node is unhappy"};
  TaskExit exited{2, 3, 0, false};
  TaskExit killed{6, 0, 9, true};

  absl::StatusOr<TaskOutput> o = decodeOutput(FrameType::kStdout, onlyFrame(encodeOutput(out)).payload);
  REQUIRE(o.ok());
  CHECK(*o == out);
  Frame ef = onlyFrame(encodeOutput(err));
  CHECK(ef.type == FrameType::kStderr);
  CHECK(*decodeOutput(ef.type, ef.payload) == err);
  CHECK(*decodeMessage(onlyFrame(encodeMessage(msg)).payload) == msg);
  CHECK(*decodeMessage(onlyFrame(encodeMessage(node_msg)).payload) == node_msg);
  CHECK(*decodeExit(onlyFrame(encodeExit(exited)).payload) == exited);
  CHECK(*decodeExit(onlyFrame(encodeExit(killed)).payload) == killed);
  CHECK(*decodeSignal(onlyFrame(encodeSignal(10)).payload) == 10);
  CHECK(onlyFrame(encodeTerminate()).type == FrameType::kTerminate);
  CHECK(onlyFrame(encodeDone()).type == FrameType::kDone);
  CHECK(*decodeHello(onlyFrame(encodeHello()).payload) == kStepProtocolVersion);
}

TEST_CASE("frames fed one byte at a time come out whole and in order", "[step_protocol]") {
  std::string stream = encodeHello() + encodeOutput({0, false, "a\n"}) +
                       encodeExit({0, 0, 0, false}) + encodeDone();
  FrameReader reader;
  std::vector<FrameType> types;
  for (char c : stream) {
    reader.append(std::string_view(&c, 1));
    for (;;) {
      absl::StatusOr<std::optional<Frame>> f = reader.next();
      REQUIRE(f.ok());
      if (!f->has_value()) break;
      types.push_back((*f)->type);
    }
  }
  CHECK(types == std::vector<FrameType>{FrameType::kHello, FrameType::kStdout, FrameType::kExit,
                                        FrameType::kDone});
  CHECK(reader.buffered() == 0);
}

TEST_CASE("a request cut short anywhere is an error, never a crash", "[step_protocol]") {
  std::string payload = onlyFrame(encodeRequest(hostileRequest())).payload;
  // Every cut in the fixed part and around each variable field.
  for (size_t cut = 0; cut < payload.size(); cut += (cut < 200 ? 1 : 997)) {
    absl::StatusOr<StepRequest> r = decodeRequest(std::string_view(payload).substr(0, cut));
    INFO("cut at " << cut);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("a truncated frame waits for more bytes and stays buffered", "[step_protocol]") {
  std::string frame = encodeOutput({1, false, "hello\n"});
  FrameReader reader;
  reader.append(std::string_view(frame).substr(0, frame.size() - 1));
  absl::StatusOr<std::optional<Frame>> f = reader.next();
  REQUIRE(f.ok());
  CHECK_FALSE(f->has_value());
  CHECK(reader.buffered() == frame.size() - 1);
}

TEST_CASE("a frame header claiming more than its type's limit is refused before buffering",
          "[step_protocol]") {
  FrameReader reader;
  // 'O' with a 4 GiB length: refused at the header.
  reader.append("O\xff\xff\xff\xff"s);
  absl::StatusOr<std::optional<Frame>> f = reader.next();
  REQUIRE_FALSE(f.ok());
  CHECK(std::string(f.status().message()).find("exceeds the limit") != std::string::npos);
  // The error sticks.
  reader.append("more");
  CHECK_FALSE(reader.next().ok());

  FrameReader control;
  control.append("S\x00\x00\x10\x00"s);  // a 4 KiB signal frame
  CHECK_FALSE(control.next().ok());

  FrameReader request;
  request.append("R\x04\x00\x00\x01"s);  // 64 MiB + 1
  CHECK_FALSE(request.next().ok());
}

TEST_CASE("an unknown frame type is an error that names the byte", "[step_protocol]") {
  FrameReader reader;
  reader.append("hello world\n");  // a login shell's chatter instead of frames
  absl::StatusOr<std::optional<Frame>> f = reader.next();
  REQUIRE_FALSE(f.ok());
  CHECK(std::string(f.status().message()) == "step protocol: unknown frame type 0x68");
}

TEST_CASE("hostile counts and lengths inside a request are refused without allocating",
          "[step_protocol]") {
  auto u32 = [](uint32_t v) {
    std::string s(4, '\0');
    s[0] = static_cast<char>(v >> 24);
    s[1] = static_cast<char>(v >> 16);
    s[2] = static_cast<char>(v >> 8);
    s[3] = static_cast<char>(v);
    return s;
  };
  std::string head = u32(kStepProtocolVersion) + u32(1) + u32(0) + u32(0);
  // A node name claiming 2 GiB.
  absl::StatusOr<StepRequest> r = decodeRequest(head + u32(0x80000000u) + "n1");
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("node name claims 2147483648 bytes") !=
        std::string::npos);
  // An argv of a billion entries in a few bytes.
  std::string up_to_argv = head + u32(2) + "n1" + u32(0) + u32(0) + u32(1) + "/";
  r = decodeRequest(up_to_argv + u32(1000000000u) + u32(0));
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("argv count 1000000000") != std::string::npos);
  // A task count far beyond the bytes left.
  std::string with_env = up_to_argv + u32(1) + u32(4) + "true" + u32(0);
  r = decodeRequest(with_env + u32(0xffffffffu));
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("task count") != std::string::npos);
  // The same request with no tasks is fine; trailing bytes are not.
  CHECK(decodeRequest(with_env + u32(0)).ok());
  r = decodeRequest(with_env + u32(0) + "x");
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) == "step protocol: request has 1 trailing bytes");
}

TEST_CASE("a request of another protocol version or without a command is refused",
          "[step_protocol]") {
  StepRequest r = hostileRequest();
  r.version = 2;
  absl::StatusOr<StepRequest> back = decodeRequest(onlyFrame(encodeRequest(r)).payload);
  REQUIRE_FALSE(back.ok());
  CHECK(std::string(back.status().message()) ==
        "step protocol: request version 2, this muster-slurm speaks version 1");
  r = hostileRequest();
  r.argv.clear();
  CHECK_FALSE(decodeRequest(onlyFrame(encodeRequest(r)).payload).ok());
}

TEST_CASE("exit and signal frames with impossible values are refused", "[step_protocol]") {
  CHECK_FALSE(decodeExit(onlyFrame(encodeExit({0, 300, 0, false})).payload).ok());
  CHECK_FALSE(decodeExit(onlyFrame(encodeExit({0, 0, 99, false})).payload).ok());
  CHECK_FALSE(decodeSignal(onlyFrame(encodeSignal(0)).payload).ok());
  CHECK_FALSE(decodeSignal("\x00\x00"s).ok());
  CHECK_FALSE(decodeHello("NOT-MUSTER\x00\x00\x00\x01"s).ok());
  CHECK_FALSE(decodeMessage("\x00\x00\x00\x01\x00\x00\x00\x09short"s).ok());
}

TEST_CASE("the hello is found after text a login shell printed first", "[step_protocol]") {
  const std::string hello = encodeHello();
  CHECK(findHello(hello) == std::optional<size_t>(0));
  CHECK(findHello("Welcome to the cluster!\n" + hello) == std::optional<size_t>(24));
  CHECK_FALSE(findHello("Welcome to the cluster!\n").has_value());
  CHECK_FALSE(findHello(hello.substr(0, 8)).has_value());
}

}  // namespace
}  // namespace muster::jobengine::slurm
