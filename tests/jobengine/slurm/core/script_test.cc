#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jobengine/slurm/core/script.h"

namespace muster::jobengine::slurm {
namespace {

using Args = std::vector<std::string>;

ScriptDirectives parse(std::string_view script) {
  absl::StatusOr<ScriptDirectives> d = parseBatchScript(script, "job.sh");
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  return *d;
}

Args args(std::string_view script) { return parse(script).args; }

std::string parseError(std::string_view script) {
  absl::StatusOr<ScriptDirectives> d = parseBatchScript(script, "job.sh");
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(d.status().message());
}

TEST_CASE("directives before the first command are read in order with their lines",
          "[script]") {
  ScriptDirectives d = parse(
      "#!/bin/bash\n"
      "#SBATCH -N 2\n"
      "#SBATCH --job-name=train\n"
      "\n"
      "# a comment\n"
      "#SBATCH -t 10\n"
      "srun hostname\n"
      "#SBATCH --partition=late\n");
  CHECK(d.args == Args{"-N", "2", "--job-name=train", "-t", "10"});
  CHECK(d.arg_lines == std::vector<int>{2, 2, 3, 6, 6});
  CHECK(d.warnings.empty());
}

TEST_CASE("scanning stops at the first command even if it is indented", "[script]") {
  CHECK(args("#!/bin/sh\n  echo hi\n#SBATCH -N2\n").empty());
  CHECK(args("#!/bin/sh\nexport A=1 # set\n#SBATCH -N2\n").empty());
}

TEST_CASE("blank lines, indented comments and a second #! do not stop scanning", "[script]") {
  CHECK(args("#!/bin/sh\n \t\n   # note\n#!/not/a/shebang\n#SBATCH -N2\n") == Args{"-N2"});
}

TEST_CASE("only #SBATCH at the start of a line, in capitals, is a directive", "[script]") {
  CHECK(args("#!/bin/sh\n#sbatch -N2\n  #SBATCH -N3\n#SBATCH -N4\n") == Args{"-N4"});
  // The magic word is a plain prefix: what follows it is split as it stands.
  CHECK(args("#!/bin/sh\n#SBATCH-N2\n#SBATCH\n") == Args{"-N2"});
}

TEST_CASE("an unquoted # ends a directive line", "[script]") {
  CHECK(args("#!/bin/sh\n#SBATCH -J a # the name\n") == Args{"-J", "a"});
  CHECK(args("#!/bin/sh\n#SBATCH -J a#b -N2\n") == Args{"-J", "a"});
  CHECK(args("#!/bin/sh\n#SBATCH --comment \"a # b\"\n") == Args{"--comment", "a # b"});
}

TEST_CASE("quotes group words and are removed", "[script]") {
  CHECK(args("#!/bin/sh\n#SBATCH --comment=\"hello world\" -J 'x y'\n") ==
        Args{"--comment=hello world", "-J", "x y"});
  CHECK(args("#!/bin/sh\n#SBATCH --comment=\"it's\"\n") == Args{"--comment=it's"});
  CHECK(args("#!/bin/sh\n#SBATCH --comment=a\"b c\"d\n") == Args{"--comment=ab cd"});
}

TEST_CASE("a backslash makes the next character literal", "[script]") {
  CHECK(args("#!/bin/sh\n#SBATCH --comment=a\\ b\n") == Args{"--comment=a b"});
  CHECK(args("#!/bin/sh\n#SBATCH --comment=\\\"q\\\"\n") == Args{"--comment=\"q\""});
  CHECK(args("#!/bin/sh\n#SBATCH --comment=a\\#b\n") == Args{"--comment=a#b"});
  CHECK(args("#!/bin/sh\n#SBATCH --comment=a\\\\b\n") == Args{"--comment=a\\b"});
}

TEST_CASE("an argument of only empty quotes ends the line, as in Slurm", "[script]") {
  CHECK(args("#!/bin/sh\n#SBATCH --comment \"\" -N2\n") == Args{"--comment"});
}

TEST_CASE("#SLURM lines are directives with Slurm's warning", "[script]") {
  ScriptDirectives d = parse("#!/bin/sh\n#SLURM -N2\n#SLURM -n4\n");
  CHECK(d.args == Args{"-N2", "-n4"});
  CHECK(d.warnings == std::vector<std::string>{
                          "Change from #SLURM to #SBATCH in your script and verify the options "
                          "are valid in sbatch"});
}

TEST_CASE("an unmatched quote names the file, the line and the rest of it", "[script]") {
  CHECK(parseError("#!/bin/sh\n#SBATCH -J 'abc\n") ==
        "job.sh: line 2: Unmatched `'` in [ 'abc]");
  CHECK(parseError("#!/bin/sh\n\n#SBATCH --comment=\"x\n") ==
        "job.sh: line 3: Unmatched `\"` in [--comment=\"x]");
}

TEST_CASE("a colon where a word should start is refused", "[script]") {
  CHECK(parseError("#!/bin/sh\n#SBATCH : -N2\n") == "job.sh: line 2: Unexpected `:` in [: -N2]");
}

TEST_CASE("heterogeneous job separators are refused", "[script]") {
  CHECK(parseError("#!/bin/sh\n#SBATCH -N1\n#SBATCH hetjob\n#SBATCH -N2\n")
            .find("not supported") != std::string::npos);
  parseError("#!/bin/sh\n#SBATCH packjob\n");
}

TEST_CASE("a script must start with #!", "[script]") {
  CHECK(parseError("echo hi\n") ==
        "This does not look like a batch script.  The first\n"
        "line must start with #! followed by the path to an interpreter.\n"
        "For instance: #!/bin/sh");
  CHECK(parseError(" #!/bin/sh\n").rfind("This does not look like a batch script.", 0) == 0);
}

TEST_CASE("empty and whitespace-only scripts get their own messages", "[script]") {
  CHECK(parseError("") == "Batch script is empty!");
  CHECK(parseError(" \n\t\n") == "Batch script contains only whitespace!");
  // Slurm reads the buffer as a C string for this check, so a leading NUL counts as empty text.
  CHECK(parseError(std::string_view("\0#!/bin/sh\n", 11)) ==
        "Batch script contains only whitespace!");
}

TEST_CASE("NUL bytes and DOS line breaks are refused with Slurm's words", "[script]") {
  CHECK(parseError(std::string_view("#!/bin/sh\necho a\0b\n", 19)) ==
        "The Slurm controller does not allow scripts that\ncontain a NULL character '\\0'.");
  CHECK(parseError("#!/bin/sh\r\necho hi\r\n") ==
        "Batch script contains DOS line breaks (\\r\\n)\n"
        "instead of expected UNIX line breaks (\\n).");
  // A lone carriage return is not a DOS line break.
  CHECK(args("#!/bin/sh\necho a\rb\n").empty());
  // The checks run in Slurm's order: no shebang is reported before the line breaks.
  CHECK(parseError("echo\r\n").rfind("This does not look", 0) == 0);
}

TEST_CASE("a script without a final newline is read to its end", "[script]") {
  CHECK(args("#!/bin/sh\n#SBATCH -N2") == Args{"-N2"});
}

TEST_CASE("wrap builds sbatch's own script", "[script]") {
  CHECK(wrapScript("hostname") ==
        "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nhostname\n");
  CHECK(validateBatchScript(wrapScript("srun a.out")).ok());
}

}  // namespace
}  // namespace muster::jobengine::slurm
