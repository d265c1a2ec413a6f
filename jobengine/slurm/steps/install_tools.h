#pragma once

// `install-tools DIR`, shared by the two multi-call binaries (../README.md, "The binaries"): copies
// binaries into DIR, each with the symlinks through which its commands are called. What the tools
// init container of a Slurm job's pods runs (muster-slurm-steps-static: the step tools, and the API
// commands' binary beside it when there is one) and what the login node's init container runs
// (muster-slurm-static: every command).
//
// No shell: the copies are std::filesystem calls; a link that exists is replaced.

#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::jobengine::slurm {

// One binary to copy: from `source` to DIR/`name`, with DIR/<link> -> `name` for each link.
struct ToolCopy {
  std::filesystem::path source;
  std::string name;
  std::vector<std::string> links;
};

// Copies each binary (mode 0755) and makes its links; prints one line naming DIR on `out`, or why
// not on `err` (prefixed `program: `). Returns the exit code: 0, or 1 when a step failed.
int installTools(const std::filesystem::path& dir, const std::vector<ToolCopy>& copies,
                 std::string_view program, std::ostream& out, std::ostream& err);

// The DIR of `install-tools ARGS` in *dir, or the exit code when there is nothing to install: 0
// after printing `usage` on `out` for --help or -h, 2 after printing it on `err` for anything but
// one directory.
std::optional<int> installToolsDir(const std::vector<std::string>& args, std::string_view usage,
                                   std::ostream& out, std::ostream& err,
                                   std::filesystem::path* dir);

// The running binary (/proc/self/exe), or an empty path when it cannot be read.
std::filesystem::path selfBinary();

// The process's environment as a map (what each command is given).
std::map<std::string, std::string> processEnvironment();

}  // namespace muster::jobengine::slurm
