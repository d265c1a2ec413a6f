#include "jobengine/slurm/core/filename.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

bool isWildcard(char c, bool srun) {
  switch (c) {
    case 'A':
    case 'a':
    case 'b':
    case 'J':
    case 'j':
    case 'r':
    case 's':
    case 'x':
      return true;
    case 'N':
    case 'n':
    case 't':
    case 'u':
      return !srun;  // srun leaves these to the per-task expansion
    default:
      return false;
  }
}

std::string padded(uint32_t value, int padding) { return absl::StrFormat("%0*u", padding, value); }

void expandWildcard(std::string& out, char c, int padding, const FilenameContext& ctx) {
  switch (c) {
    case 'A':
      out += padded(ctx.array_job_id.value_or(ctx.job_id), padding);
      break;
    case 'a':
      out += padded(ctx.array_task_id.value_or(kNoArrayTaskId), padding);
      break;
    case 'b':
      out += padded(ctx.array_task_id.value_or(kNoArrayTaskId) % 10, padding);
      break;
    case 'J':
    case 'j':
      out += padded(ctx.job_id, padding);
      if (c == 'J' && ctx.step_id) absl::StrAppend(&out, ".", *ctx.step_id);
      break;
    case 'N': {
      std::string_view node = ctx.node_name;
      out += std::string(node.substr(0, node.find('.')));
      break;
    }
    case 'n':
      out += padded(ctx.node_id, padding);
      break;
    case 'r':
      out += padded(ctx.restart_count, padding);
      break;
    case 's':
      out += ctx.step_id ? padded(*ctx.step_id, padding) : "batch";
      break;
    case 't':
      out += padded(ctx.task_id, padding);
      break;
    case 'u':
      out += ctx.user;
      break;
    case 'x':
      out += ctx.job_name;
      break;
    default:
      break;
  }
}

}  // namespace

std::string_view defaultOutputPattern(bool is_array) {
  return is_array ? kDefaultArrayBatchOutput : kDefaultBatchOutput;
}

std::string expandFilenamePattern(std::string_view pattern, const FilenameContext& ctx) {
  std::string out;
  if (pattern.empty()) return out;
  if (!ctx.srun && !ctx.work_dir.empty() && pattern[0] != '/') {
    out = ctx.work_dir;
    if (out.back() != '/') out += '/';
  }
  if (pattern.find('\\') != std::string_view::npos) {
    for (char c : pattern) {
      if (c != '\\') out += c;
    }
    return out;
  }
  size_t i = 0;
  while (i < pattern.size()) {
    char c = pattern[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    ++i;  // past '%'
    if (i >= pattern.size()) break;  // a final '%' is dropped
    if (pattern[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    int padding = 0;
    if (isDigit(pattern[i])) {
      size_t start = i;
      size_t consumed = 0;
      std::optional<uint64_t> n = parseLeadingDigits(pattern.substr(i), &consumed);
      i += consumed;
      padding = (!n || *n > 9) ? 10 : static_cast<int>(*n);
      if (i >= pattern.size() || !isWildcard(pattern[i], ctx.srun)) {
        // Not a wildcard: the '%', the digits and the next character stay as written.
        absl::StrAppend(&out, "%", av(pattern.substr(start, i - start)));
        if (i < pattern.size()) out += pattern[i++];
        continue;
      }
    }
    if (!isWildcard(pattern[i], ctx.srun)) {
      out += '%';
      out += pattern[i];
    } else {
      expandWildcard(out, pattern[i], padding, ctx);
    }
    ++i;
  }
  return out;
}

SrunIo classifySrunIo(std::optional<std::string_view> value, uint32_t task_count) {
  SrunIo io;
  if (!value || startsWithIgnoreCase(*value, "all") || value->substr(0, 1) == "-") return io;
  if (equalsIgnoreCase(*value, "none")) {
    io.kind = SrunIo::Kind::kNone;
    return io;
  }
  if (std::optional<uint64_t> task = parseDigits(*value); task && *task < task_count) {
    io.kind = SrunIo::Kind::kOneTask;
    io.task_id = static_cast<uint32_t>(*task);
    return io;
  }
  io.kind = SrunIo::Kind::kFile;
  // expand_stdio_fields with is_srun sets io_per_task when it meets one of these wildcards,
  // with or without a padding width; a backslash disables all expansion.
  if (value->find('\\') == std::string_view::npos) {
    for (size_t i = 0; i + 1 < value->size(); ++i) {
      if ((*value)[i] != '%') continue;
      size_t j = i + 1;
      if ((*value)[j] == '%') {
        i = j;
        continue;
      }
      while (j < value->size() && isDigit((*value)[j])) ++j;
      if (j < value->size() && !isWildcard((*value)[j], true) && isWildcard((*value)[j], false)) {
        io.per_task = true;
      }
      i = j;
    }
  }
  return io;
}

}  // namespace muster::jobengine::slurm
