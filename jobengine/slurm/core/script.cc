#include "jobengine/slurm/core/script.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

constexpr std::string_view kMagic = "#SBATCH";
constexpr std::string_view kOldMagic = "#SLURM";

bool onlyWhitespace(std::string_view s) {
  // xstring_is_whitespace reads the buffer as a C string: it stops at the first NUL.
  for (char c : s) {
    if (c == '\0') break;
    if (!isSpace(c)) return false;
  }
  return true;
}

bool startsWithWord(std::string_view s, std::string_view word) {
  return startsWithIgnoreCase(s, word) && (s.size() == word.size() || isSpace(s[word.size()]));
}

struct ArgumentResult {
  std::optional<std::string> argument;
  size_t skipped = 0;
};

// opt.c get_argument: one word of a directive line.
absl::StatusOr<ArgumentResult> getArgument(std::string_view file, int lineno,
                                           std::string_view line) {
  size_t ptr = 0;
  while (ptr < line.size() && isSpace(line[ptr])) ++ptr;
  if (ptr < line.size() && line[ptr] == ':') {
    return absl::InvalidArgumentError(absl::StrCat(av(file), ": line ", lineno,
                                                   ": Unexpected `:` in [", av(line), "]"));
  }
  ArgumentResult result;
  if (ptr >= line.size()) return result;
  std::string argument;
  bool have_argument = false;
  bool quoted = false;
  bool escape = false;
  char quote = '\0';
  while (ptr < line.size() && (quoted || !isSpace(line[ptr]))) {
    char c = line[ptr];
    if (escape) {
      escape = false;
    } else if (c == '\\') {
      ++ptr;
      if (ptr < line.size() && line[ptr] == ' ') {
        argument += ' ';
        have_argument = true;
        ++ptr;
      } else {
        escape = true;
      }
      continue;
    } else if (quoted) {
      if (c == quote) {
        quoted = false;
        ++ptr;
        continue;
      }
    } else if (c == '"' || c == '\'') {
      quoted = true;
      quote = c;
      ++ptr;
      continue;
    } else if (c == '#') {
      break;  // an unescaped '#': the rest of the line is a comment
    }
    argument += c;
    have_argument = true;
    ++ptr;
  }
  if (quoted) {
    return absl::InvalidArgumentError(absl::StrCat(av(file), ": line ", lineno, ": Unmatched `",
                                                   std::string(1, quote), "` in [", av(line),
                                                   "]"));
  }
  result.skipped = ptr;
  if (have_argument) result.argument = std::move(argument);
  return result;
}

}  // namespace

absl::Status validateBatchScript(std::string_view script) {
  if (script.empty()) return absl::InvalidArgumentError("Batch script is empty!");
  if (onlyWhitespace(script)) {
    return absl::InvalidArgumentError("Batch script contains only whitespace!");
  }
  if (script.size() < 2 || script[0] != '#' || script[1] != '!') {
    return absl::InvalidArgumentError(
        "This does not look like a batch script.  The first\n"
        "line must start with #! followed by the path to an interpreter.\n"
        "For instance: #!/bin/sh");
  }
  if (script.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        "The Slurm controller does not allow scripts that\n"
        "contain a NULL character '\\0'.");
  }
  if (script.find("\r\n") != std::string_view::npos) {
    return absl::InvalidArgumentError(
        "Batch script contains DOS line breaks (\\r\\n)\n"
        "instead of expected UNIX line breaks (\\n).");
  }
  return absl::OkStatus();
}

absl::StatusOr<ScriptDirectives> parseBatchScript(std::string_view script,
                                                  std::string_view file_name) {
  if (absl::Status s = validateBatchScript(script); !s.ok()) return s;
  ScriptDirectives out;
  bool warned = false;
  int lineno = 0;
  size_t start = 0;
  while (start < script.size()) {
    size_t end = script.find('\n', start);
    std::string_view line =
        script.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? script.size() : end + 1;
    ++lineno;

    std::string_view rest;
    if (line.substr(0, kMagic.size()) == kMagic) {
      rest = line.substr(kMagic.size());
    } else if (line.substr(0, kOldMagic.size()) == kOldMagic) {
      rest = line.substr(kOldMagic.size());
      if (!warned) {
        out.warnings.push_back(
            "Change from #SLURM to #SBATCH in your script and verify the options are valid in "
            "sbatch");
        warned = true;
      }
    } else {
      // Stop at the first command; blank lines and comments do not count.
      bool is_command = false;
      for (char c : line) {
        if (isSpace(c)) continue;
        is_command = c != '#';
        break;
      }
      if (is_command) break;
      continue;
    }

    size_t p = 0;
    while (p < rest.size() && isSpace(rest[p])) ++p;
    std::string_view words = rest.substr(p);
    if (startsWithWord(words, "hetjob") || startsWithWord(words, "packjob")) {
      return absl::InvalidArgumentError(absl::StrCat(
          av(file_name), ": line ", lineno,
          ": heterogeneous jobs (#SBATCH hetjob) are not supported by Muster"));
    }
    while (true) {
      absl::StatusOr<ArgumentResult> arg = getArgument(file_name, lineno, words);
      if (!arg.ok()) return arg.status();
      if (!arg->argument) break;
      out.args.push_back(std::move(*arg->argument));
      out.arg_lines.push_back(lineno);
      words = words.substr(arg->skipped);
    }
  }
  return out;
}

std::string wrapScript(std::string_view command) {
  return absl::StrCat("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n", av(command),
                      "\n");
}

}  // namespace muster::jobengine::slurm
