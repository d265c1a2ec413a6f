#pragma once

// The batch script as sbatch reads it (src/sbatch/sbatch.c _get_script_buffer and
// src/sbatch/opt.c _opt_batch_script / get_argument).
//
// Checks, in Slurm's order (validateBatchScript): empty, only whitespace, no "#!" at the very
// start, a NUL byte, a DOS line break "\r\n". The messages are Slurm's; each line of a message
// is what sbatch prints after "sbatch: error: ".
//
// Directives (parseBatchScript):
//   - Every line that starts with "#SBATCH" (case sensitive, at column 0) is a directive; the
//     text after those seven characters is split into words. "#SLURM" is accepted too, with
//     Slurm's warning. Indented "#SBATCH" lines are comments.
//   - Scanning stops at the first line holding anything other than blanks before a '#', i.e. the
//     first command. Blank lines and comments (the "#!" line too) do not stop it.
//   - Words: blanks separate; '...' and "..." group (the quotes are removed; the two kinds are
//     alike); a backslash makes the next character literal (\" \' \\ \# and "\ " for a blank);
//     an unquoted '#' starts a comment that runs to the end of the line.
//   - Slurm quirk kept: an argument that is only an empty pair of quotes ends the directive line
//     (get_argument returns NULL for it), so `#SBATCH --comment "" -N2` yields just
//     "--comment".
//   - Errors, as Slurm's fatal(): "<file>: line N: Unmatched `'` in [<rest of line>]" and
//     "<file>: line N: Unexpected `:` in [...]". Heterogeneous jobs ("#SBATCH hetjob", and its
//     old spelling "packjob") are not supported by Muster and are refused.
//   - Turning the words into options (and "Invalid directive found in batch script: X" for a
//     word that is not an option) is parseScriptOptions in options.h.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muster::jobengine::slurm {

// Slurm's MAX_BATCH_SCRIPT_SIZE (512 MiB): sbatch refuses to read a larger script. The CLI,
// which reads the file, enforces it.
inline constexpr size_t kMaxBatchScriptSize = 512 * 1024 * 1024;

struct ScriptDirectives {
  // Every word of every directive, in order, as argv words (without a program name).
  std::vector<std::string> args;
  // The 1-based script line each word of `args` came from.
  std::vector<int> arg_lines;
  // Lines to print as "sbatch: error: <line>" without failing (the #SLURM warning).
  std::vector<std::string> warnings;
};

// Slurm's sanity checks of a script read from a file or stdin (not applied to --wrap).
// InvalidArgument with Slurm's message on failure.
absl::Status validateBatchScript(std::string_view script);

// validateBatchScript, then the directives. `file_name` only appears in error messages (sbatch
// uses the script's path; Slurm prints "(null)" for a script read from stdin).
absl::StatusOr<ScriptDirectives> parseBatchScript(std::string_view script,
                                                  std::string_view file_name = "(null)");

// The script sbatch --wrap submits:
// "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n<command>\n".
std::string wrapScript(std::string_view command);

}  // namespace muster::jobengine::slurm
