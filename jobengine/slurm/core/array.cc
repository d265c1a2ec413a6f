#include "jobengine/slurm/core/array.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

absl::Status invalidArray() { return absl::InvalidArgumentError("Invalid job array specification"); }

// A run of digits at the start of `s` (nullopt if none), advancing `s` past it.
std::optional<uint64_t> takeNumber(std::string_view* s) {
  size_t consumed = 0;
  std::optional<uint64_t> n = parseLeadingDigits(*s, &consumed);
  if (consumed == 0) return std::nullopt;
  s->remove_prefix(consumed);
  return n;
}

void skipCloseBracket(std::string_view* s) {
  if (!s->empty() && s->front() == ']') s->remove_prefix(1);
}

bool atEntryEnd(std::string_view s) { return s.empty() || s.front() == '%'; }

// slurm_parse_array_tok for one comma-separated entry.
absl::Status parseEntry(std::string_view tok, uint32_t max, std::set<uint32_t>* ids) {
  if (!tok.empty() && tok.front() == '[') tok.remove_prefix(1);
  std::optional<uint64_t> first = takeNumber(&tok);
  if (!first) return invalidArray();
  skipCloseBracket(&tok);
  uint64_t last = *first;
  uint64_t step = 1;
  if (!tok.empty() && tok.front() == '-') {
    tok.remove_prefix(1);
    std::optional<uint64_t> l = takeNumber(&tok);
    if (!l) return invalidArray();
    last = *l;
    skipCloseBracket(&tok);
    if (!tok.empty() && tok.front() == ':') {
      tok.remove_prefix(1);
      std::optional<uint64_t> s = takeNumber(&tok);
      if (!s) return invalidArray();
      step = *s;
      skipCloseBracket(&tok);
      if (!atEntryEnd(tok)) return invalidArray();
      if (step == 0 || step >= max) return invalidArray();
    } else if (!atEntryEnd(tok)) {
      return invalidArray();
    }
    if (last < *first) return invalidArray();
  } else if (!atEntryEnd(tok)) {
    return invalidArray();
  }
  if (last >= max) return invalidArray();
  for (uint64_t i = *first; i <= last; i += step) ids->insert(static_cast<uint32_t>(i));
  return absl::OkStatus();
}

absl::Status invalidJobId(std::string_view word) {
  return absl::InvalidArgumentError(absl::StrCat("Invalid job id ", av(word)));
}

}  // namespace

absl::StatusOr<ArraySpec> parseArraySpec(std::string_view spec, uint32_t max_array_size) {
  if (spec.empty() || max_array_size == 0) return invalidArray();
  std::set<uint32_t> ids;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string_view tok =
        spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!tok.empty()) {  // strtok_r skips empty entries
      if (absl::Status s = parseEntry(tok, max_array_size, &ids); !s.ok()) return s;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (ids.empty()) return invalidArray();
  ArraySpec out;
  out.task_ids.assign(ids.begin(), ids.end());
  // _create_job_array: atoi() after the first '%' and the first ':'.
  if (size_t pct = spec.find('%'); pct != std::string_view::npos) {
    size_t consumed = 0;
    int64_t throttle = strtolPrefix(spec.substr(pct + 1), &consumed);
    if (throttle > 0) out.max_running = static_cast<uint32_t>(std::min<int64_t>(throttle, UINT32_MAX));
  }
  if (size_t colon = spec.find(':'); colon != std::string_view::npos) {
    size_t consumed = 0;
    int64_t step = strtolPrefix(spec.substr(colon + 1), &consumed);
    out.step = static_cast<uint32_t>(std::clamp<int64_t>(step, 0, UINT32_MAX));
  }
  return out;
}

std::string formatArrayTaskIds(const std::vector<uint32_t>& task_ids) {
  std::string out;
  size_t i = 0;
  while (i < task_ids.size()) {
    size_t j = i;
    while (j + 1 < task_ids.size() && task_ids[j + 1] == task_ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j > i) {
      absl::StrAppend(&out, task_ids[i], "-", task_ids[j]);
    } else {
      absl::StrAppend(&out, task_ids[i]);
    }
    i = j + 1;
  }
  return out;
}

absl::StatusOr<std::vector<JobIdSpec>> parseJobIdList(std::string_view word) {
  std::vector<JobIdSpec> out;
  std::string_view rest = word;
  while (true) {
    std::string_view current = rest;
    std::optional<uint64_t> job = takeNumber(&rest);
    if (!job || *job == 0 || *job > UINT32_MAX) return invalidJobId(current);
    JobIdSpec id;
    id.job_id = static_cast<uint32_t>(*job);
    if (rest.substr(0, 2) == "_[") {
      size_t close = rest.find(']', 2);
      if (close == std::string_view::npos || close + 1 != rest.size()) return invalidJobId(current);
      absl::StatusOr<std::vector<std::string>> tasks = expandHostlist(rest.substr(1));
      if (!tasks.ok() || tasks->empty()) return invalidJobId(current);
      for (const std::string& t : *tasks) {
        std::optional<uint64_t> task = parseDigits(t);
        if (!task || *task > UINT32_MAX) return invalidJobId(current);
        JobIdSpec each = id;
        each.array_task_id = static_cast<uint32_t>(*task);
        out.push_back(each);
      }
      return out;  // no step, nor more ids, after a bracketed range
    }
    if (rest.substr(0, 2) == "_*") {
      id.all_array_tasks = true;
      rest.remove_prefix(2);
    } else if (!rest.empty() && rest.front() == '_') {
      rest.remove_prefix(1);
      std::optional<uint64_t> task = takeNumber(&rest);
      if (!task || *task > UINT32_MAX) return invalidJobId(current);
      id.array_task_id = static_cast<uint32_t>(*task);
    } else if (!rest.empty() && rest.front() == '+') {
      return absl::InvalidArgumentError(absl::StrCat(
          "Invalid job id ", av(current), " (heterogeneous job components are not supported)"));
    }
    if (!rest.empty() && rest.front() == '.') {
      rest.remove_prefix(1);
      std::optional<uint64_t> step = takeNumber(&rest);
      if (!step || *step > UINT32_MAX) return invalidJobId(current);
      id.step_id = static_cast<uint32_t>(*step);
    }
    out.push_back(id);
    if (rest.empty()) return out;
    if (rest.front() != ',') return invalidJobId(current);
    rest.remove_prefix(1);
  }
}

}  // namespace muster::jobengine::slurm
