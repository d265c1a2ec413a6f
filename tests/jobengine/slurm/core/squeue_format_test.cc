#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "jobengine/slurm/core/squeue_format.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

SqueueField field(std::string name, char letter, int width, bool right, std::string suffix) {
  SqueueField f;
  f.name = std::move(name);
  f.letter = letter;
  f.width = width;
  f.right_justify = right;
  f.suffix = std::move(suffix);
  return f;
}

SqueueField literal(std::string text) {
  SqueueField f;
  f.literal = true;
  f.suffix = std::move(text);
  return f;
}

// A running job as squeue would see it, by -O name.
SqueueValue job(std::map<std::string, std::string> values,
                std::map<std::string, bool> truncate = {}) {
  return [values, truncate](const SqueueField& f) {
    SqueueCell c;
    if (auto it = values.find(f.name); it != values.end()) c.text = it->second;
    if (auto it = truncate.find(f.name); it != truncate.end()) c.truncate = it->second;
    return c;
  };
}

TEST_CASE("the default format parses into squeue's eight columns", "[squeue]") {
  SqueueFormat f = parseSqueueFormat(kSqueueDefaultFormat);
  CHECK(f.warnings.empty());
  CHECK(f.fields == std::vector<SqueueField>{
                        field("JobArrayId", 'i', 18, true, " "),
                        field("Partition", 'P', 9, true, " "),
                        field("Name", 'j', 8, true, " "),
                        field("UserName", 'u', 8, true, " "),
                        field("StateCompact", 't', 2, true, " "),
                        field("TimeUsed", 'M', 10, true, " "),
                        field("NumNodes", 'D', 6, true, " "),
                        field("ReasonList", 'R', 0, false, ""),
                    });
}

TEST_CASE("the -O defaults squeue uses are the same columns as the -o defaults", "[squeue]") {
  CHECK(parseSqueueLongFormat(kSqueueDefaultFormatLong).fields ==
        parseSqueueFormat(kSqueueDefaultFormat).fields);
  CHECK(parseSqueueLongFormat(kSqueueLongFormatLong).fields ==
        parseSqueueFormat(kSqueueLongFormat).fields);
}

TEST_CASE("the default header is squeue's", "[squeue]") {
  CHECK(renderSqueueHeader(parseSqueueFormat(kSqueueDefaultFormat)) ==
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)");
  CHECK(renderSqueueHeader(parseSqueueFormat(kSqueueLongFormat)) ==
        "             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES "
        "NODELIST(REASON)");
  CHECK(renderSqueueHeader(parseSqueueFormat(kSqueueStepsFormat, SqueueKind::kSteps),
                           SqueueKind::kSteps) ==
        "         STEPID     NAME PARTITION     USER      TIME NODELIST");
}

TEST_CASE("a job line pads and cuts as squeue does", "[squeue]") {
  SqueueFormat f = parseSqueueFormat(kSqueueDefaultFormat);
  std::map<std::string, std::string> v = {{"JobArrayId", "123"},  {"Partition", "gpu"},
                                          {"Name", "verylongjobname"}, {"UserName", "alice"},
                                          {"StateCompact", "R"},  {"TimeUsed", "1:02:03"},
                                          {"NumNodes", "2"},      {"ReasonList", "n[1-2]"}};
  CHECK(renderSqueueLine(f, job(v)) ==
        "               123       gpu verylong    alice  R    1:02:03      2 n[1-2]");
}

TEST_CASE("durations and node lists overflow their column instead of being cut", "[squeue]") {
  SqueueFormat f = parseSqueueFormat("%.4M|%.4l|%.4N|%.4j");
  CHECK(renderSqueueLine(f, job({{"TimeUsed", "1-00:00:00"},
                                 {"TimeLimit", "2-00:00:00"},
                                 {"NodeList", "n[1-100]"},
                                 {"Name", "training"}})) ==
        "1-00:00:00|2-00:00:00|n[1-100]|trai");
  // A caller may cut a value Slurm cuts, such as UNLIMITED in TIME_LIMIT.
  CHECK(renderSqueueLine(parseSqueueFormat("%.5l"),
                         job({{"TimeLimit", "UNLIMITED"}}, {{"TimeLimit", true}})) == "UNLIM");
}

TEST_CASE("text before the first % is printed and %% is not an escape", "[squeue]") {
  SqueueFormat f = parseSqueueFormat("Jobs: %i");
  CHECK(f.fields == std::vector<SqueueField>{literal("Jobs: "), field("JobArrayId", 'i', 0, false, "")});
  CHECK(renderSqueueLine(f, job({{"JobArrayId", "123"}})) == "Jobs: 123");
  // strtok at '%' swallows the second '%'.
  CHECK(parseSqueueFormat("a%%i").fields ==
        std::vector<SqueueField>{literal("a"), field("JobArrayId", 'i', 0, false, "")});
  CHECK(parseSqueueFormat("no fields").fields == std::vector<SqueueField>{literal("no fields")});
}

TEST_CASE("an unknown letter is printed literally with a warning", "[squeue]") {
  SqueueFormat f = parseSqueueFormat("%5!x%i");
  CHECK(f.fields == std::vector<SqueueField>{literal("%5!x"), field("JobArrayId", 'i', 0, false, "")});
  CHECK(f.warnings == std::vector<std::string>{"Invalid job format specification: !"});
  SqueueFormat steps = parseSqueueFormat("%z", SqueueKind::kSteps);
  CHECK(steps.warnings == std::vector<std::string>{"Invalid job step format specification: z"});
}

TEST_CASE("%all lists every field separated by bars", "[squeue]") {
  SqueueFormat f = parseSqueueFormat("%all");
  REQUIRE(f.fields.size() > 40);
  CHECK(f.fields.front() == field("Account", 'a', 0, false, "|"));
  CHECK(f.fields.back() == field("WorkDir", 'Z', 0, false, ""));
  CHECK(f.warnings.empty());
}

TEST_CASE("long format names take an optional width, justification and suffix", "[squeue]") {
  SqueueFormat f = parseSqueueLongFormat("jobid,NAME:10,state:.5 x,reasonlist:");
  CHECK(f.fields == std::vector<SqueueField>{
                        field("JobId", 'A', 20, false, ""),
                        field("Name", 'j', 10, false, ""),
                        field("State", 'T', 5, true, " x"),
                        field("ReasonList", 'R', 0, false, ""),
                    });
  SqueueFormat bad = parseSqueueLongFormat("bogus:5|,name");
  CHECK(bad.fields == std::vector<SqueueField>{literal("|"), field("Name", 'j', 20, false, "")});
  CHECK(bad.warnings == std::vector<std::string>{"Invalid job format specification: bogus"});
  CHECK(squeueHeader(field("TimeLeft", 'L', 0, false, "")) == "TIME_LEFT");
  CHECK(squeueHeader(literal("x")).empty());
}

TEST_CASE("fields pad and cut per _print_str", "[squeue]") {
  CHECK(padSqueueField("abc", 5, true, true) == "  abc");
  CHECK(padSqueueField("abcdef", 3, true, true) == "abc");
  CHECK(padSqueueField("abcdef", 3, true, false) == "abcdef");
  CHECK(padSqueueField("abcdef", 3, false, false) == "abc");  // left-justified always cuts
  CHECK(padSqueueField("ab", 4, false, true) == "ab  ");
  CHECK(padSqueueField("abc", 0, false, true) == "abc");
  CHECK(padSqueueField("abc", -1, false, true) == "abc ");
}

TEST_CASE("which fields Slurm cuts", "[squeue]") {
  CHECK(fieldTruncates(field("Name", 'j', 8, true, "")));
  CHECK_FALSE(fieldTruncates(field("TimeUsed", 'M', 8, true, "")));
  CHECK_FALSE(fieldTruncates(field("NodeList", 'N', 8, true, "")));
  CHECK_FALSE(fieldTruncates(field("ReasonList", 'R', 8, true, "")));
}

TEST_CASE("huge field widths are capped, so a short format cannot ask for gigabytes",
          "[squeue][limits]") {
  // An out-of-memory in fuzz_squeue_format: thirty "%99999999i" (301 bytes) built a 3 GB line.
  std::string format;
  for (int i = 0; i < 30; ++i) format += "%99999999i";
  SqueueFormat f = parseSqueueFormat(format);
  REQUIRE(f.fields.size() == 30);
  for (const SqueueField& field : f.fields) CHECK(field.width == kMaxSqueueFieldWidth);
  const std::string line = renderSqueueLine(f, job({{"JobArrayId", "42"}}));
  CHECK(line.size() == 30u * kMaxSqueueFieldWidth);
  CHECK(line.substr(0, 3) == "42 ");

  SqueueFormat o = parseSqueueLongFormat("jobid:.99999999999,name:-99999999999");
  REQUIRE(o.fields.size() == 2);
  CHECK(o.fields[0].width == kMaxSqueueFieldWidth);
  CHECK(o.fields[1].width == -kMaxSqueueFieldWidth);
  CHECK(padSqueueField("x", 1 << 30, true, false).size() == kMaxSqueueFieldWidth);
  // Widths up to the cap are kept as written.
  CHECK(parseSqueueFormat("%.10000i").fields[0].width == 10000);
  CHECK(parseSqueueFormat("%9999i").fields[0].width == 9999);
}

// Issue 43, item 7: other users' job names and comments reach squeue, scontrol and sacct, and a
// terminal obeys the escape sequences in them.
TEST_CASE("terminalSafe turns every control character and every byte that is not UTF-8 into '?'",
          "[squeue]") {
  // C0 (ESC, BEL, NUL, tab, newline, CR), DEL.
  CHECK(terminalSafe("\x1b]0;pwned\x07job\x1b[2J") == "?]0;pwned?job?[2J");
  CHECK(terminalSafe(std::string("a\0b\tc\nd\re\x7f", 10)) == "a?b?c?d?e?");
  // C1 controls in UTF-8 (U+009B is CSI, U+0085 NEL); the character just past them is kept.
  CHECK(terminalSafe("x\xc2\x9b" "31my\xc2\x85z\xc2\xa0") == "x?31my?z\xc2\xa0");
  // Printable UTF-8 is kept whole: 2, 3 and 4 bytes.
  CHECK(terminalSafe("caf\xc3\xa9 \xe5\xad\xa6\xe7\xbf\x92 \xf0\x9f\x9a\x80") ==
        "caf\xc3\xa9 \xe5\xad\xa6\xe7\xbf\x92 \xf0\x9f\x9a\x80");
  // Not UTF-8: a raw C1 byte (0x9b is CSI to an 8-bit terminal), a stray continuation, a lead
  // without its continuation, overlong forms, a surrogate, above U+10FFFF, 0xff.
  CHECK(terminalSafe("a\x9b" "b") == "a?b");
  CHECK(terminalSafe("\x80") == "?");
  CHECK(terminalSafe("\xc3") == "?");
  CHECK(terminalSafe("\xe5\xad") == "??");
  CHECK(terminalSafe("\xc0\x9b") == "??");
  CHECK(terminalSafe("\xe0\x82\x9b") == "???");
  CHECK(terminalSafe("\xed\xa0\x80") == "???");
  CHECK(terminalSafe("\xf4\x90\x80\x80") == "????");
  CHECK(terminalSafe("\xff") == "?");
  CHECK(terminalSafe("plain text, 100% safe") == "plain text, 100% safe");
  CHECK(terminalSafe("") == "");
}

TEST_CASE("a squeue value with control characters prints them as '?', its width kept",
          "[squeue]") {
  auto value = [](const SqueueField& f) {
    return SqueueCell{f.letter == 'j' ? "\x1b[2Jname" : "\xc2\x9b" "1;1H", std::nullopt};
  };
  CHECK(renderSqueueLine(parseSqueueFormat("%.10j|%k"), value) == "  ?[2Jname|?1;1H");
  // A cut through a multi-byte character leaves no lone byte behind ("\xe2\x9b\x94" is U+26D4;
  // its second byte alone is CSI to an 8-bit terminal).
  auto long_value = [](const SqueueField&) { return SqueueCell{"ab\xe2\x9b\x94", std::nullopt}; };
  CHECK(renderSqueueLine(parseSqueueFormat("%4j"), long_value) == "ab??");
}

}  // namespace
}  // namespace muster::jobengine::slurm
