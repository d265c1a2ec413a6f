#include "jobengine/slurm/core/dependency.h"

#include <algorithm>
#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

absl::Status dependencyProblem() { return absl::InvalidArgumentError("Job dependency problem"); }
// Slurm's words, and why (Slurm has no such limit; see kMaxDependencyItems).
absl::Status tooManyEntries() {
  return absl::InvalidArgumentError(
      absl::StrCat("Job dependency problem (more than ", kMaxDependencyItems,
                   " entries once array ranges are expanded; name a whole array by its job id)"));
}

struct TypePrefix {
  std::string_view prefix;  // compared case-insensitively, as many characters as Slurm does
  DependencyType type;
};

// _parse_dependency_str's order (afterburstbuffer is matched on its first 11 characters).
constexpr std::array<TypePrefix, 7> kTypes = {{
    {"afternotok:", DependencyType::kAfterNotOk},
    {"aftercorr:", DependencyType::kAfterCorr},
    {"afterany:", DependencyType::kAfterAny},
    {"afterok:", DependencyType::kAfterOk},
    {"afterburstb", DependencyType::kAfterBurstBuffer},
    {"after:", DependencyType::kAfter},
    {"expand:", DependencyType::kExpand},
}};

enum class Sep { kAny, kAnd, kOr };

// _xlate_array_dep: "123_[1-3]" -> "123_1:123_2:123_3". At most kMaxDependencyItems ids in all:
// the expressions are counted before any is written out (each expands to at most
// max_array_size ids, so the output stays below kMaxDependencyItems x 22 bytes).
absl::StatusOr<std::string> expandArrayExpressions(std::string_view text, uint32_t max_array_size) {
  if (text.find("_[") == std::string_view::npos) return std::string(text);
  std::string out;
  size_t expanded = 0;  // ids the expressions so far expanded to
  constexpr size_t kNone = std::string_view::npos;
  size_t id_start = kNone;  // where the digits before a '_' began
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    out += c;
    if (isDigit(c)) {
      if (id_start == kNone) id_start = i;
    } else if (c == '_' && i + 1 < text.size() && text[i + 1] == '[' && id_start != kNone) {
      std::string_view job = text.substr(id_start, i - id_start);
      size_t close = text.find(']', i + 2);
      if (close == std::string_view::npos) return dependencyProblem();
      std::string_view inner = text.substr(i + 2, close - i - 2);
      // bit_unfmt: numbers and ranges only.
      if (inner.find_first_not_of("0123456789,-") != std::string_view::npos) {
        return dependencyProblem();
      }
      absl::StatusOr<ArraySpec> tasks = parseArraySpec(inner, max_array_size);
      if (!tasks.ok()) return dependencyProblem();
      expanded += tasks->task_ids.size();
      if (expanded > kMaxDependencyItems) return tooManyEntries();
      bool first = true;
      for (uint32_t t : tasks->task_ids) {
        if (first) {
          absl::StrAppend(&out, t);
          first = false;
        } else {
          absl::StrAppend(&out, ":", av(job), "_", t);
        }
      }
      i = close;
      id_start = kNone;
    } else {
      id_start = kNone;
    }
  }
  return out;
}

// _parse_dependency_job_array: "123", "123_4", "123_*". Advances `s`.
bool parseJobRef(std::string_view* s, Dependency* d) {
  size_t consumed = 0;
  std::optional<uint64_t> job = parseLeadingDigits(*s, &consumed);
  if (!job || *job == 0 || *job > UINT32_MAX) return false;
  d->job_id = static_cast<uint32_t>(*job);
  s->remove_prefix(consumed);
  if (!s->empty() && s->front() == '_') {
    s->remove_prefix(1);
    if (!s->empty() && s->front() == '*') {
      s->remove_prefix(1);
      d->all_array_tasks = true;
    } else {
      std::optional<uint64_t> task = parseLeadingDigits(*s, &consumed);
      if (!task || *task > UINT32_MAX) return false;
      d->array_task_id = static_cast<uint32_t>(*task);
      s->remove_prefix(consumed);
    }
  }
  return true;
}

// _parse_depend_state, for a "(state)" directly after an id.
bool parseState(std::string_view* s, Dependency* d) {
  if (s->empty() || s->front() != '(') return true;
  size_t close = s->find(')');
  if (close == std::string_view::npos) return false;
  d->initially_failed = equalsIgnoreCase(s->substr(1, close - 1), "failed");
  s->remove_prefix(close + 1);
  return true;
}

// _parse_dependency_sep: true when a separator was taken; an unexpected one is an error.
absl::StatusOr<bool> parseSeparator(std::string_view* s, Sep expected, Sep* sep_type) {
  Sep parsed;
  if (!s->empty() && s->front() == ',') {
    parsed = Sep::kAnd;
  } else if (!s->empty() && s->front() == '?') {
    parsed = Sep::kOr;
  } else {
    return false;
  }
  if (expected != Sep::kAny && expected != parsed) return dependencyProblem();
  s->remove_prefix(1);
  *sep_type = parsed;
  return true;
}

bool isCompleted(const DependencyTargetState& s) { return isFinished(s.state) && !s.completing; }
bool isPending(const DependencyTargetState& s) { return s.state == JobState::kPending || s.configuring; }

}  // namespace

std::string_view dependencyTypeName(DependencyType type) {
  switch (type) {
    case DependencyType::kAfter:
      return "after";
    case DependencyType::kAfterAny:
      return "afterany";
    case DependencyType::kAfterOk:
      return "afterok";
    case DependencyType::kAfterNotOk:
      return "afternotok";
    case DependencyType::kAfterCorr:
      return "aftercorr";
    case DependencyType::kAfterBurstBuffer:
      return "afterburstbuffer";
    case DependencyType::kExpand:
      return "expand";
    case DependencyType::kSingleton:
      return "singleton";
  }
  return "unknown";
}

bool isSupported(DependencyType type) {
  return type != DependencyType::kAfterBurstBuffer && type != DependencyType::kExpand;
}

absl::StatusOr<DependencySpec> parseDependency(std::string_view text, uint32_t max_array_size) {
  DependencySpec spec;
  if (text.empty() || text == "0") return spec;
  absl::StatusOr<std::string> expanded = expandArrayExpressions(text, max_array_size);
  if (!expanded.ok()) return expanded.status();
  std::string_view tok = *expanded;
  Sep sep_type = Sep::kAny;
  while (true) {
    if (startsWithIgnoreCase(tok, "singleton")) {
      tok.remove_prefix(9);
      Dependency d;
      d.type = DependencyType::kSingleton;
      if (!parseState(&tok, &d)) return dependencyProblem();
      if (spec.items.size() == kMaxDependencyItems) return tooManyEntries();
      spec.items.push_back(d);
      absl::StatusOr<bool> more = parseSeparator(&tok, sep_type, &sep_type);
      if (!more.ok()) return more.status();
      if (*more) continue;
      break;
    }
    size_t colon = tok.find(':');
    if (colon == std::string_view::npos && !tok.empty() && isDigit(tok.front())) {
      // The old format: a bare job id, meaning afterany.
      Dependency d;
      d.type = DependencyType::kAfterAny;
      if (!parseJobRef(&tok, &d)) return dependencyProblem();
      if (spec.items.size() == kMaxDependencyItems) return tooManyEntries();
      spec.items.push_back(d);
      absl::StatusOr<bool> more = parseSeparator(&tok, Sep::kAnd, &sep_type);
      if (!more.ok()) return more.status();
      if (*more) continue;
      break;
    }
    if (colon == std::string_view::npos) return dependencyProblem();
    std::optional<DependencyType> type;
    for (const TypePrefix& p : kTypes) {
      if (startsWithIgnoreCase(tok, p.prefix)) {
        type = p.type;
        break;
      }
    }
    if (!type) return dependencyProblem();
    tok.remove_prefix(colon + 1);
    int64_t delay_seconds = 0;  // carries on to the following ids of this entry, as in Slurm
    while (true) {
      Dependency d;
      d.type = *type;
      if (!parseJobRef(&tok, &d)) return dependencyProblem();
      if (!tok.empty() && tok.front() == '+') {
        tok.remove_prefix(1);
        size_t consumed = 0;
        std::optional<uint64_t> minutes = parseLeadingDigits(tok, &consumed);
        if (!minutes || *minutes == 0 || *minutes > INT32_MAX) return dependencyProblem();
        tok.remove_prefix(consumed);
        delay_seconds = static_cast<int64_t>(*minutes) * 60;
      }
      d.delay_seconds = delay_seconds;
      if (!parseState(&tok, &d)) return dependencyProblem();
      if (spec.items.size() == kMaxDependencyItems) return tooManyEntries();
      spec.items.push_back(d);
      if (tok.empty() || tok.front() != ':') break;
      tok.remove_prefix(1);
    }
    absl::StatusOr<bool> more = parseSeparator(&tok, sep_type, &sep_type);
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  if (!tok.empty()) return dependencyProblem();
  spec.combine = sep_type == Sep::kOr ? DependencySpec::Combine::kAny : DependencySpec::Combine::kAll;
  return spec;
}

std::string formatDependency(const DependencySpec& spec, const std::vector<DependencyState>& states,
                             size_t max_length) {
  const std::string_view sep = spec.combine == DependencySpec::Combine::kAny ? "?" : ",";
  // The entries not yet fulfilled, each as squeue prints it.
  std::vector<std::string> entries;
  for (size_t i = 0; i < spec.items.size(); ++i) {
    DependencyState state = i < states.size() ? states[i] : DependencyState::kUnfulfilled;
    if (state == DependencyState::kFulfilled) continue;
    std::string_view state_name = state == DependencyState::kFailed ? "failed" : "unfulfilled";
    const Dependency& d = spec.items[i];
    std::string& e = entries.emplace_back();
    if (d.type == DependencyType::kSingleton) {
      absl::StrAppend(&e, "singleton(", av(state_name), ")");
      continue;
    }
    absl::StrAppend(&e, av(dependencyTypeName(d.type)), ":", d.job_id);
    if (d.all_array_tasks) {
      e += "_*";
    } else if (d.array_task_id) {
      absl::StrAppend(&e, "_", *d.array_task_id);
    }
    if (d.delay_seconds) absl::StrAppend(&e, "+", d.delay_seconds / 60);
    absl::StrAppend(&e, "(", av(state_name), ")");
  }
  std::string out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string_view lead = i == 0 ? std::string_view() : sep;
    // What follows when this entry is the last one shown: nothing, or "...(+N more)".
    const size_t rest = entries.size() - i - 1;
    const std::string more = rest == 0 ? "" : absl::StrCat(av(sep), "...(+", rest, " more)");
    if (max_length != std::string::npos &&
        out.size() + lead.size() + entries[i].size() + more.size() > max_length) {
      // Not even this one fits with its tail: end the list here.
      const std::string cut = absl::StrCat(out.empty() ? "" : av(sep), "...(+", entries.size() - i, " more)");
      if (out.size() + cut.size() <= max_length) out += cut;
      return out;
    }
    absl::StrAppend(&out, av(lead), entries[i]);
  }
  return out;
}

DependencyTargetState summarizeArray(const std::vector<DependencyTargetState>& tasks) {
  bool any_pending = false, all_completed = true, all_complete = true;
  std::optional<absl::Time> start;
  for (const DependencyTargetState& t : tasks) {
    any_pending = any_pending || isPending(t);
    all_completed = all_completed && isCompleted(t);
    all_complete = all_complete && t.state == JobState::kCompleted && !t.completing;
    if (t.start_time && (!start || *t.start_time < *start)) start = t.start_time;
  }
  DependencyTargetState s;
  s.start_time = start;
  if (any_pending) {
    s.state = JobState::kPending;
  } else if (!all_completed) {
    s.state = JobState::kRunning;
  } else {
    s.state = all_complete ? JobState::kCompleted : JobState::kFailed;
  }
  return s;
}

DependencyState evaluateDependencyItem(const Dependency& d, const DependencyContext& ctx) {
  if (d.initially_failed) return DependencyState::kFailed;
  if (d.type == DependencyType::kSingleton) {
    return ctx.singleton_blocked && ctx.singleton_blocked() ? DependencyState::kUnfulfilled
                                                            : DependencyState::kFulfilled;
  }
  std::optional<DependencyTargetState> target =
      ctx.lookup ? ctx.lookup(d.job_id, d.array_task_id, d.all_array_tasks) : std::nullopt;
  if (!target) return DependencyState::kFulfilled;  // the job is gone: dependency lifted
  const bool completed = isCompleted(*target);
  const bool complete = target->state == JobState::kCompleted && completed;
  switch (d.type) {
    case DependencyType::kAfter:
      if (isPending(*target)) return DependencyState::kUnfulfilled;
      if (d.delay_seconds == 0 ||
          (target->start_time && ctx.now - *target->start_time >= absl::Seconds(d.delay_seconds))) {
        return DependencyState::kFulfilled;
      }
      return DependencyState::kUnfulfilled;
    case DependencyType::kAfterAny:
    case DependencyType::kAfterBurstBuffer:
      return completed ? DependencyState::kFulfilled : DependencyState::kUnfulfilled;
    case DependencyType::kAfterNotOk:
      if (target->special_exit) return DependencyState::kFulfilled;
      if (!completed) return DependencyState::kUnfulfilled;
      return complete ? DependencyState::kFailed : DependencyState::kFulfilled;
    case DependencyType::kAfterOk:
      if (!completed) return DependencyState::kUnfulfilled;
      return complete ? DependencyState::kFulfilled : DependencyState::kFailed;
    case DependencyType::kAfterCorr: {
      if (ctx.own_array_task_id && ctx.lookup) {
        std::optional<DependencyTargetState> corresponding =
            ctx.lookup(d.job_id, ctx.own_array_task_id, false);
        if (corresponding) {
          if (!isCompleted(*corresponding)) return DependencyState::kUnfulfilled;
          return corresponding->state == JobState::kCompleted ? DependencyState::kFulfilled
                                                              : DependencyState::kFailed;
        }
      }
      if (!completed) return DependencyState::kUnfulfilled;
      return complete ? DependencyState::kFulfilled : DependencyState::kFailed;
    }
    case DependencyType::kExpand:
      return DependencyState::kFailed;  // not supported by Muster
    case DependencyType::kSingleton:
      break;
  }
  return DependencyState::kUnfulfilled;
}

DependencyEvaluation evaluateDependency(const DependencySpec& spec, const DependencyContext& ctx) {
  DependencyEvaluation e;
  bool any_fulfilled = false, any_unfulfilled = false, any_failed = false;
  for (const Dependency& d : spec.items) {
    DependencyState s = evaluateDependencyItem(d, ctx);
    e.states.push_back(s);
    any_fulfilled = any_fulfilled || s == DependencyState::kFulfilled;
    any_unfulfilled = any_unfulfilled || s == DependencyState::kUnfulfilled;
    any_failed = any_failed || s == DependencyState::kFailed;
  }
  if (spec.items.empty()) {
    e.result = DependencyResult::kSatisfied;
  } else if (spec.combine == DependencySpec::Combine::kAny) {
    e.result = any_fulfilled     ? DependencyResult::kSatisfied
               : any_unfulfilled ? DependencyResult::kWaiting
                                 : DependencyResult::kNeverSatisfied;
  } else {
    e.result = any_failed        ? DependencyResult::kNeverSatisfied
               : any_unfulfilled ? DependencyResult::kWaiting
                                 : DependencyResult::kSatisfied;
  }
  return e;
}

}  // namespace muster::jobengine::slurm
