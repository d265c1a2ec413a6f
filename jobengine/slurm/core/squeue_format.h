#pragma once

// squeue's output formats (src/squeue/opts.c parse_format / parse_long_format, print.c
// _print_str; squeue.1 -o/--format and -O/--Format).
//
// -o "%[.][size]type[suffix]...": text before the first '%' is printed as is; each '%' starts a
// field: '.' right-justifies, the number is the width, one letter picks the field, and the rest
// up to the next '%' is printed after it. "%all" means every letter, each followed by '|'.
// Slurm splits the string with strtok at '%', so "%%" is not an escape: "a%%i" is "a" then %i.
// An unknown letter prints "%<token>" literally (with Slurm's warning
// "Invalid job format specification: <letter>").
// -O "name[:[.]size][suffix],...": names are case-insensitive; without ":size" the width is 20,
// left-justified; "name:" is width 0 (as wide as the value). An unknown name prints only its
// suffix ("Invalid job format specification: <name>").
//
// Padding and truncation (_print_str): left-justified fields are cut to their width and padded
// with blanks; right-justified fields are padded on the left, and cut (keeping the first `width`
// characters) only for the fields Slurm cuts; width 0 prints the value as is. Slurm does not cut
// node lists and durations (NODELIST, the nodes of NODELIST(REASON), SCHEDNODES, TIME,
// TIME_LIMIT, TIME_LEFT, RESIZE_TIME, and JOBID of a pending array), so a long value overflows
// the column there; fieldTruncates() says which, and a renderer callback may override it per
// value (squeue cuts "(Reason)" and "UNLIMITED" but not a node list or "1-00:00:00").
//
// Deviation: widths are capped at kMaxSqueueFieldWidth. Slurm prints a field straight to stdout
// (and a cut one through a stack buffer of the width, which a huge width overflows); Muster builds
// the line first, and "%99999999i" repeated in a 300-byte SQUEUE_FORMAT asked for gigabytes.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::jobengine::slurm {

// The widest column a format may ask for (far wider than any terminal).
inline constexpr int kMaxSqueueFieldWidth = 10000;

// squeue.1: the default formats with various options.
inline constexpr std::string_view kSqueueDefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
inline constexpr std::string_view kSqueueLongFormat =
    "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
inline constexpr std::string_view kSqueueStepsFormat = "%.15i %.8j %.9P %.8u %.9M %N";
// squeue --start.
inline constexpr std::string_view kSqueueStartFormat =
    "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
// What squeue itself uses when no format is given (squeue.c): the -O forms of the defaults.
inline constexpr std::string_view kSqueueDefaultFormatLong =
    "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,statecompact:.2 ,timeused:.10 ,"
    "numnodes:.6 ,reasonlist:0";
inline constexpr std::string_view kSqueueLongFormatLong =
    "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,state:.8 ,timeused:.10 ,"
    "timelimit:.9 ,numnodes:.6 ,reasonlist:0";

// Jobs (the default) or job steps (squeue -s) use different field tables.
enum class SqueueKind { kJobs, kSteps };

struct SqueueField {
  std::string name;         // the canonical -O name ("JobArrayId"); empty for literal text
  char letter = '\0';       // the -o letter, when the field has one
  int width = 0;            // 0: as wide as the value; negative: value and one blank (-O)
  bool right_justify = false;
  std::string suffix;       // printed after the field (for literal text: the text itself)
  bool literal = false;     // prefix text or an invalid spec: only `suffix` is printed

  bool operator==(const SqueueField&) const = default;
};

struct SqueueFormat {
  std::vector<SqueueField> fields;
  std::vector<std::string> warnings;  // "Invalid job format specification: ..." lines
};

SqueueFormat parseSqueueFormat(std::string_view format, SqueueKind kind = SqueueKind::kJobs);
SqueueFormat parseSqueueLongFormat(std::string_view format, SqueueKind kind = SqueueKind::kJobs);

// The column title ("JOBID", "NODELIST(REASON)", ...); empty for literal items.
std::string_view squeueHeader(const SqueueField& field, SqueueKind kind = SqueueKind::kJobs);
// Whether Slurm cuts this field's values to the width when right-justified.
bool fieldTruncates(const SqueueField& field, SqueueKind kind = SqueueKind::kJobs);

struct SqueueCell {
  std::string text;
  std::optional<bool> truncate;  // unset: fieldTruncates()
};
using SqueueValue = std::function<SqueueCell(const SqueueField&)>;

// One line, without the newline squeue prints after it. Each value is printed terminalSafe
// (util.h): a control character in a job's name or comment prints as '?'.
std::string renderSqueueLine(const SqueueFormat& format, const SqueueValue& value,
                             SqueueKind kind = SqueueKind::kJobs);
// The header line (squeue -h omits it).
std::string renderSqueueHeader(const SqueueFormat& format, SqueueKind kind = SqueueKind::kJobs);

// _print_str: `text` in a column of `width` (at most kMaxSqueueFieldWidth).
std::string padSqueueField(std::string_view text, int width, bool right_justify, bool truncate);

}  // namespace muster::jobengine::slurm
