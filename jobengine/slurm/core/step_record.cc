#include "jobengine/slurm/core/step_record.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jobengine/slurm/core/job_state.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

// Printable ASCII only (a tab or newline would end the field or the line), cut to `max`.
std::string clean(std::string_view text, size_t max) {
  std::string out(text.substr(0, max));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return out;
}

bool isExitCode(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || s.size() > 16) return false;
  return parseDigits(s.substr(0, colon)) && parseDigits(s.substr(colon + 1));
}

bool isStepState(std::string_view s) {
  std::optional<JobState> state = parseJobState(s);
  return state && (*state == JobState::kRunning || *state == JobState::kCompleted ||
                   *state == JobState::kFailed || *state == JobState::kCancelled) &&
         jobStateName(*state) == s;
}

template <typename T>
bool readNumber(std::string_view s, T* out) {
  std::optional<uint64_t> v = parseDigits(s);
  if (!v || *v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
  *out = static_cast<T>(*v);
  return true;
}

// A time the job wrote, read as at most kMaxStepTime.
bool readTime(std::string_view s, int64_t* out) {
  if (!readNumber(s, out)) return false;
  *out = std::min(*out, kMaxStepTime);
  return true;
}

// Fields from `id` on, shared by the steps file's start line and the termination line.
std::string commonFields(const StepRecord& s) {
  return absl::StrCat(s.nodes, "\t", s.tasks, "\t", s.cpus, "\t",
                      clean(s.node_list, kStepNodeListMax), "\t", clean(s.name, kStepNameMax));
}

bool readCommonFields(const std::vector<std::string_view>& f, size_t at, StepRecord* s) {
  if (f.size() != at + 5) return false;
  if (!readNumber(f[at], &s->nodes) || !readNumber(f[at + 1], &s->tasks) ||
      !readNumber(f[at + 2], &s->cpus))
    return false;
  s->node_list = clean(f[at + 3], kStepNodeListMax);
  s->name = clean(f[at + 4], kStepNameMax);
  return true;
}

}  // namespace

std::string stepStartLine(const StepRecord& step) {
  return absl::StrCat("start\t", step.id, "\t", step.start, "\t", commonFields(step), "\n");
}

std::string stepEndLine(uint32_t id, int64_t end, std::string_view exit_code,
                        std::string_view state) {
  return absl::StrCat("end\t", id, "\t", end, "\t", av(exit_code), "\t", av(state), "\n");
}

void setStepEnd(int max_code, int max_signal, bool cancelled_by_srun, StepRecord* step) {
  if (max_signal > 0) {
    step->exit_code = absl::StrCat("0:", max_signal);
    step->state = cancelled_by_srun ? "CANCELLED" : "FAILED";
  } else if (max_code != 0) {
    step->exit_code = absl::StrCat(max_code, ":0");
    step->state = "FAILED";
  } else {
    step->exit_code = "0:0";
    step->state = "COMPLETED";
  }
}

std::vector<StepRecord> readStepRecords(std::string_view file_text, int64_t job_end) {
  std::map<uint32_t, StepRecord> steps;
  for (absl::string_view line : absl::StrSplit(av(file_text), '\n')) {
    std::vector<std::string_view> f;
    for (absl::string_view field : absl::StrSplit(line, '\t'))
      f.emplace_back(field.data(), field.size());
    uint32_t id = 0;
    int64_t when = 0;
    if (f.size() < 3 || !readNumber(f[1], &id) || !readTime(f[2], &when)) continue;
    if (f[0] == "start") {
      StepRecord s;
      s.id = id;
      s.start = when;
      if (readCommonFields(f, 3, &s)) steps[id] = std::move(s);
    } else if (f[0] == "end" && f.size() == 5 && isExitCode(f[3]) && isStepState(f[4])) {
      auto it = steps.find(id);
      if (it == steps.end()) continue;
      it->second.end = when;
      it->second.exit_code = std::string(f[3]);
      it->second.state = std::string(f[4]);
    }
  }
  std::vector<StepRecord> out;
  for (auto& [id, s] : steps) {
    if (s.end == 0) {
      s.end = std::max(job_end, s.start);
      s.state = "CANCELLED";
      s.exit_code = "0:15";
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string terminationMessage(std::string_view exit_code, const std::vector<StepRecord>& steps,
                               size_t limit) {
  // Without steps the message is the exit code alone, as before steps were recorded.
  if (steps.empty()) return std::string(exit_code);
  std::string out = absl::StrCat(av(exit_code), "\n");
  size_t i = 0;
  for (; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    std::string line = absl::StrCat("step\t", s.id, "\t", s.state, "\t", s.exit_code, "\t",
                                    s.start, "\t", s.end, "\t", commonFields(s), "\n");
    // Room for the "omitted" line when more steps follow.
    const size_t reserve = i + 1 < steps.size() ? 32 : 0;
    if (out.size() + line.size() + reserve > limit) break;
    out += line;
  }
  if (i < steps.size()) absl::StrAppend(&out, "omitted\t", steps.size() - i, "\n");
  return out;
}

std::optional<TerminationMessage> parseTerminationMessage(std::string_view message) {
  std::vector<std::string_view> lines;
  for (absl::string_view l : absl::StrSplit(av(message), '\n')) lines.emplace_back(l.data(), l.size());
  if (lines.empty() || !isExitCode(lines[0])) return std::nullopt;
  TerminationMessage out;
  out.exit_code = std::string(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string_view> f;
    for (absl::string_view field : absl::StrSplit(av(lines[i]), '\t'))
      f.emplace_back(field.data(), field.size());
    if (f.size() == 2 && f[0] == "omitted") {
      (void)readNumber(f[1], &out.omitted);
      continue;
    }
    StepRecord s;
    if (f.size() != 11 || f[0] != "step" || !readNumber(f[1], &s.id) || !isStepState(f[2]) ||
        !isExitCode(f[3]) || !readTime(f[4], &s.start) || !readTime(f[5], &s.end) ||
        !readCommonFields(f, 6, &s))
      continue;
    s.state = std::string(f[2]);
    s.exit_code = std::string(f[3]);
    out.steps.push_back(std::move(s));
  }
  return out;
}

}  // namespace muster::jobengine::slurm
