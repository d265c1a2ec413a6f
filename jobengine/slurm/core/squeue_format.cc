#include "jobengine/slurm/core/squeue_format.h"

#include <algorithm>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

struct FieldInfo {
  std::string_view name;
  char letter;
  std::string_view header;
  bool header_truncates;
  bool value_truncates;
};

// src/squeue/opts.c fmt_data_job, in its order (the first entry of a letter wins), with each
// field's header and whether print.c cuts its values.
constexpr FieldInfo kJobFields[] = {
    {"Account", 'a', "ACCOUNT", true, true},
    {"AccrueTime", '\0', "ACCRUE_TIME", true, true},
    {"admin_comment", '\0', "ADMIN_COMMENT", true, true},
    {"AllocNodes", '\0', "ALLOC_NODES", true, true},
    {"AllocSID", '\0', "ALLOC_SID", true, true},
    {"ArrayJobId", 'F', "ARRAY_JOB_ID", true, true},
    {"ArrayTaskId", 'K', "ARRAY_TASK_ID", true, true},
    {"AssocId", '\0', "ASSOC_ID", true, true},
    {"BatchFlag", '\0', "BATCH_FLAG", true, true},
    {"BatchHost", 'B', "EXEC_HOST", true, true},
    {"BoardsPerNode", '\0', "BOARDS_PER_NODE", true, true},
    {"BurstBuffer", '\0', "BURST_BUFFER", true, true},
    {"BurstBufferState", '\0', "BURST_BUFFER_STATE", true, true},
    {"Cluster", '\0', "CLUSTER", true, true},
    {"ClusterFeature", '\0', "CLUSTER_FEATURES", true, true},
    {"Command", 'o', "COMMAND", true, true},
    {"Comment", 'k', "COMMENT", true, true},
    {"Container", '\0', "CONTAINER", true, true},
    {"ContainerId", '\0', "CONTAINERID", true, true},
    {"Contiguous", 'O', "CONTIGUOUS", true, true},
    {"Cores", 'I', "CORES_PER_SOCKET", true, true},
    {"CoreSpec", 'X', "CORE_SPEC", true, true},
    {"CPUsPerTask", '\0', "CPUS_PER_TASK", true, true},
    {"cpus-per-task", '\0', "CPUS_PER_TASK", true, true},
    {"cpus-per-tres", '\0', "CPUS_PER_TRES", true, true},
    {"CronJob", '\0', "CRON_JOB", true, true},
    {"Deadline", '\0', "DEADLINE", true, true},
    {"DelayBoot", '\0', "DELAY_BOOT", true, true},
    {"Dependency", 'E', "DEPENDENCY", true, true},
    {"DerivedEC", '\0', "DERIVED_EC", true, true},
    {"EligibleTime", '\0', "ELIGIBLE_TIME", true, true},
    {"EndTime", 'e', "END_TIME", true, true},
    {"ExcNodes", 'x', "EXC_NODES", true, true},
    {"Exclusive", '\0', "EXCLUSIVE", true, true},
    {"exit_code", '\0', "EXIT_CODE", true, true},
    {"Feature", 'f', "FEATURES", true, true},
    {"Gres", 'b', "TRES_PER_NODE", true, true},
    {"GroupId", 'G', "GROUP", true, true},
    {"GroupName", 'g', "GROUP", true, true},
    {"HetJobId", '\0', "HET_JOB_ID", true, true},
    {"HetJobIdSet", '\0', "HET_JOB_ID_SET", true, true},
    {"HetJobOffset", '\0', "HET_JOB_OFFSET", true, true},
    {"JobArrayId", 'i', "JOBID", true, false},
    {"JobId", 'A', "JOBID", true, true},
    {"LastSchedEval", '\0', "LAST_SCHED_EVAL", true, true},
    {"Licenses", 'W', "LICENSES", true, true},
    {"LicensesAlloc", '\0', "LICENSES_ALLOC", true, true},
    {"MaxCPUs", '\0', "MAX_CPUS", true, true},
    {"MaxNodes", '\0', "MAX_NODES", true, true},
    {"mem-per-tres", '\0', "MEM_PER_TRES", true, true},
    {"MCSLabel", '\0', "MCSLABEL", true, true},
    {"MinCPUs", 'c', "MIN_CPUS", true, true},
    {"MinMemory", 'm', "MIN_MEMORY", true, true},
    {"MinTime", '\0', "TIME_MIN", true, true},
    {"MinTmpDisk", 'd', "MIN_TMP_DISK", true, true},
    {"Name", 'j', "NAME", true, true},
    {"Network", '\0', "NETWORK", true, true},
    {"Nice", 'y', "NICE", true, true},
    {"NodeList", 'N', "NODELIST", false, false},
    {"NTPerCore", '\0', "NTASKS_PER_CORE", true, true},
    {"NTPerNode", '\0', "NTASKS_PER_NODE", true, true},
    {"NTPerSocket", '\0', "NTASKS_PER_SOCKET", true, true},
    {"NTPerBoard", '\0', "NTASKS_PER_BOARD", true, true},
    {"NumCPUs", 'C', "CPUS", true, true},
    {"NumNodes", 'D', "NODES", true, true},
    {"NumTasks", '\0', "TASKS", true, true},
    {"Origin", '\0', "ORIGIN", true, true},
    {"OriginRaw", '\0', "ORIGIN_RAW", true, true},
    {"OverSubscribe", 'h', "OVER_SUBSCRIBE", true, true},
    {"PackJobId", '\0', "HET_JOB_ID", true, true},
    {"PackJobIdSet", '\0', "HET_JOB_ID_SET", true, true},
    {"PackJobOffset", '\0', "HET_JOB_OFFSET", true, true},
    {"Partition", 'P', "PARTITION", true, true},
    {"PendingTime", '\0', "PENDING_TIME", true, true},
    {"PreemptTime", '\0', "PREEMPT_TIME", true, true},
    {"Prefer", '\0', "PREFER", true, true},
    {"Priority", 'p', "PRIORITY", true, true},
    {"PriorityLong", 'Q', "PRIORITY", true, true},
    {"Profile", '\0', "PROFILE", true, true},
    {"QOS", 'q', "QOS", true, true},
    {"Reason", 'r', "REASON", true, true},
    {"ReasonList", 'R', "NODELIST(REASON)", false, false},
    {"Reboot", '\0', "REBOOT", true, true},
    {"ReqNodes", 'n', "REQ_NODES", true, true},
    {"ReqSwitch", '\0', "REQ_SWITCH", true, true},
    {"Requeue", '\0', "REQUEUE", true, true},
    {"Reservation", 'v', "RESERVATION", true, true},
    {"ResizeTime", '\0', "RESIZE_TIME", true, false},
    {"RestartCnt", '\0', "RESTART_COUNT", true, true},
    {"Runtime", '\0', "RUNTIME", true, true},
    {"SchedNodes", 'Y', "SCHEDNODES", false, false},
    {"SCT", 'z', "S:C:T", true, true},
    {"SegmentSize", '\0', "SEGMENT_SIZE", true, true},
    {"SiblingsActive", '\0', "ACTIVE_SIBLINGS", true, true},
    {"SiblingsActiveRaw", '\0', "ACTIVE_SIBLINGS_RAW", true, true},
    {"SiblingsViable", '\0', "VIABLE_SIBLINGS", true, true},
    {"SiblingsViableRaw", '\0', "VIALBLE_SIBLINGS_RAW", true, true},
    {"Shared", 'h', "OVER_SUBSCRIBE", true, true},
    {"SLUID", 's', "SLUID", true, true},
    {"Sockets", 'H', "SOCKETS_PER_NODE", true, true},
    {"SPerBoard", '\0', "SOCKETS_PER_BOARD", true, true},
    {"StartTime", 'S', "START_TIME", true, true},
    {"State", 'T', "STATE", true, true},
    {"StateCompact", 't', "ST", true, true},
    {"StdErr", '\0', "STDERR", true, true},
    {"StdIn", '\0', "STDIN", true, true},
    {"StdOut", '\0', "STDOUT", true, true},
    {"SubmitTime", 'V', "SUBMIT_TIME", true, true},
    {"system_comment", '\0', "SYSTEM_COMMENT", true, true},
    {"Threads", 'J', "THREADS_PER_CORE", true, true},
    {"TimeLeft", 'L', "TIME_LEFT", true, false},
    {"TimeLimit", 'l', "TIME_LIMIT", true, false},
    {"TimeUsed", 'M', "TIME", true, false},
    {"Tres", '\0', "TRES_ALLOC", true, true},
    {"tres-alloc", '\0', "TRES_ALLOC", true, true},
    {"tres-bind", '\0', "TRES_BIND", true, true},
    {"tres-freq", '\0', "TRES_FREQ", true, true},
    {"tres-per-job", '\0', "TRES_PER_JOB", true, true},
    {"tres-per-socket", '\0', "TRES_PER_SOCKET", true, true},
    {"tres-per-task", '\0', "TRES_PER_TASK", true, true},
    {"UserId", 'U', "UID", true, true},
    {"UserName", 'u', "USER", true, true},
    {"Wait4Switch", '\0', "WAIT4SWITCH", true, true},
    {"WCKey", 'w', "WCKEY", true, true},
    {"WorkDir", 'Z', "WORK_DIR", true, true},
};

// fmt_data_step.
constexpr FieldInfo kStepFields[] = {
    {"ArrayJobId", '\0', "ARRAY_JOB_ID", true, true},
    {"ArrayTaskId", '\0', "ARRAY_TASK_ID", true, true},
    {"Cluster", '\0', "CLUSTER", true, true},
    {"Container", '\0', "CONTAINER", true, true},
    {"ContainerId", '\0', "CONTAINERID", true, true},
    {"CPUFreq", '\0', "CPU_FREQ", true, true},
    {"cpus-per-tres", '\0', "CPUS_PER_TRES", true, true},
    {"Gres", '\0', "TRES_PER_JOB", true, true},
    {"JobId", '\0', "JOB_ID", true, true},
    {"mem-per-tres", '\0', "MEM_PER_TRES", true, true},
    {"Network", '\0', "NETWORK", true, true},
    {"Nodes", 'N', "NODELIST", false, false},
    {"NumCPUs", '\0', "NUM_CPUS", true, true},
    {"NumTasks", 'A', "TASKS", true, true},
    {"Partition", 'P', "PARTITION", true, true},
    {"ResvPorts", '\0', "RESERVED_PORTS", true, true},
    {"Runtime", '\0', "RUNTIME", true, true},
    {"StartTime", 'S', "START_TIME", true, true},
    {"StdErr", '\0', "STDERR", true, true},
    {"StdIn", '\0', "STDIN", true, true},
    {"StdOut", '\0', "STDOUT", true, true},
    {"StepId", 'i', "STEPID", true, true},
    {"StepName", 'j', "NAME", true, true},
    {"StepState", '\0', "STATE", true, true},
    {"TimeLimit", 'l', "TIME_LIMIT", true, false},
    {"TimeUsed", 'M', "TIME", true, false},
    {"tres-bind", '\0', "TRES_BIND", true, true},
    {"tres-freq", '\0', "TRES_FREQ", true, true},
    {"tres-per-job", '\0', "TRES_PER_STEP", true, true},
    {"tres-per-socket", '\0', "TRES_PER_SOCKET", true, true},
    {"tres-per-step", '\0', "TRES_PER_STEP", true, true},
    {"tres-per-task", '\0', "TRES_PER_TASK", true, true},
    {"UserId", 'U', "UID", true, true},
    {"UserName", 'u', "USER", true, true},
};

std::span<const FieldInfo> fieldsOf(SqueueKind kind) {
  if (kind == SqueueKind::kSteps) return kStepFields;
  return kJobFields;
}

const FieldInfo* findField(const SqueueField& f, SqueueKind kind) {
  if (f.literal) return nullptr;
  for (const FieldInfo& info : fieldsOf(kind)) {
    if (info.name == f.name) return &info;
  }
  return nullptr;
}

std::string_view kindWord(SqueueKind kind) { return kind == SqueueKind::kSteps ? "job step " : "job "; }

SqueueField literalField(std::string text) {
  SqueueField f;
  f.literal = true;
  f.suffix = std::move(text);
  return f;
}

// One "%..." token of -o, without its '%'.
void parseToken(std::string_view token, SqueueKind kind, bool format_all, SqueueFormat* out) {
  SqueueField f;
  size_t i = 0;
  if (i < token.size() && token[i] == '.') {
    f.right_justify = true;
    ++i;
  }
  int width = 0;
  while (i < token.size() && isDigit(token[i])) {
    if (width <= kMaxSqueueFieldWidth) width = width * 10 + (token[i] - '0');
    ++i;
  }
  f.width = std::min(width, kMaxSqueueFieldWidth);
  char letter = i < token.size() ? token[i++] : '\0';
  f.suffix = std::string(token.substr(i));
  for (const FieldInfo& info : fieldsOf(kind)) {
    if (letter != '\0' && info.letter == letter) {
      f.name = std::string(info.name);
      f.letter = letter;
      out->fields.push_back(std::move(f));
      return;
    }
  }
  if (format_all) return;  // %all skips the letters without a field
  out->fields.push_back(literalField(absl::StrCat("%", av(token))));
  out->warnings.push_back(absl::StrCat("Invalid ", av(kindWord(kind)), "format specification: ",
                                       std::string(1, letter)));
}

}  // namespace

SqueueFormat parseSqueueFormat(std::string_view format, SqueueKind kind) {
  SqueueFormat out;
  std::string expanded;
  bool format_all = equalsIgnoreCase(format, "%all");
  if (format_all) {
    expanded = "%a";
    for (char c = 'b'; c <= 'z'; ++c) absl::StrAppend(&expanded, "|%", std::string(1, c));
    for (char c = 'A'; c <= 'Z'; ++c) absl::StrAppend(&expanded, "|%", std::string(1, c));
    format = expanded;
  }
  size_t first = format.find('%');
  if (first != 0) {
    out.fields.push_back(literalField(std::string(format.substr(0, first))));
    if (first == std::string_view::npos) return out;
  }
  // strtok(..., "%"): runs of '%' separate, empty tokens do not exist.
  size_t pos = first;
  while (pos < format.size()) {
    while (pos < format.size() && format[pos] == '%') ++pos;
    if (pos >= format.size()) break;
    size_t end = format.find('%', pos);
    if (end == std::string_view::npos) end = format.size();
    parseToken(format.substr(pos, end - pos), kind, format_all, &out);
    pos = end;
  }
  return out;
}

SqueueFormat parseSqueueLongFormat(std::string_view format, SqueueKind kind) {
  SqueueFormat out;
  size_t pos = 0;
  while (pos < format.size()) {
    while (pos < format.size() && format[pos] == ',') ++pos;
    if (pos >= format.size()) break;
    size_t end = format.find(',', pos);
    if (end == std::string_view::npos) end = format.size();
    std::string_view token = format.substr(pos, end - pos);
    pos = end;

    SqueueField f;
    std::string_view name = token;
    if (size_t colon = token.find(':'); colon != std::string_view::npos) {
      name = token.substr(0, colon);
      std::string_view rest = token.substr(colon + 1);
      if (!rest.empty() && rest.front() == '.') {
        f.right_justify = true;
        rest.remove_prefix(1);
      }
      size_t consumed = 0;
      int64_t width = strtolPrefix(rest, &consumed);
      f.width = static_cast<int>(std::clamp<int64_t>(width, -kMaxSqueueFieldWidth, kMaxSqueueFieldWidth));
      f.suffix = std::string(rest.substr(consumed));
    } else {
      f.width = 20;
    }
    const FieldInfo* found = nullptr;
    for (const FieldInfo& info : fieldsOf(kind)) {
      if (equalsIgnoreCase(name, info.name)) {
        found = &info;
        break;
      }
    }
    if (!found) {
      out.fields.push_back(literalField(f.suffix));
      out.warnings.push_back(
          absl::StrCat("Invalid ", av(kindWord(kind)), "format specification: ", av(name)));
      continue;
    }
    f.name = std::string(found->name);
    f.letter = found->letter;
    out.fields.push_back(std::move(f));
  }
  return out;
}

std::string_view squeueHeader(const SqueueField& field, SqueueKind kind) {
  const FieldInfo* info = findField(field, kind);
  return info ? info->header : std::string_view();
}

bool fieldTruncates(const SqueueField& field, SqueueKind kind) {
  const FieldInfo* info = findField(field, kind);
  return info ? info->value_truncates : true;
}

std::string padSqueueField(std::string_view text, int width, bool right_justify, bool truncate) {
  width = std::min(width, kMaxSqueueFieldWidth);
  std::string out;
  if (width < 0) return absl::StrCat(av(text), " ");
  if (width == 0) return std::string(text);
  if (right_justify) {
    out = absl::StrFormat("%*s", width, av(text));
    if (truncate && out.size() > static_cast<size_t>(width)) out.resize(static_cast<size_t>(width));
  } else {
    // "%.Ns" cuts whether or not the field is one Slurm cuts.
    out = std::string(text.substr(0, static_cast<size_t>(width)));
  }
  if (out.size() < static_cast<size_t>(width)) out.append(static_cast<size_t>(width) - out.size(), ' ');
  return out;
}

std::string renderSqueueLine(const SqueueFormat& format, const SqueueValue& value, SqueueKind kind) {
  std::string line;
  for (const SqueueField& f : format.fields) {
    if (!f.literal) {
      SqueueCell cell = value ? value(f) : SqueueCell{};
      bool truncate = cell.truncate.value_or(fieldTruncates(f, kind));
      // Values are other users' text (job names, comments, reasons): no control character
      // reaches the terminal (util.h terminalSafe), nor a multi-byte character the width cut.
      line += terminalSafe(
          padSqueueField(terminalSafe(cell.text), f.width, f.right_justify, truncate));
    }
    line += f.suffix;
  }
  return line;
}

std::string renderSqueueHeader(const SqueueFormat& format, SqueueKind kind) {
  std::string line;
  for (const SqueueField& f : format.fields) {
    if (!f.literal) {
      const FieldInfo* info = findField(f, kind);
      line += padSqueueField(info ? info->header : "", f.width, f.right_justify,
                             info ? info->header_truncates : true);
    }
    line += f.suffix;
  }
  return line;
}

}  // namespace muster::jobengine::slurm
