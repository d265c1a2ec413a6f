#pragma once

// Small helpers shared by the Slurm parsers. Internal to muster_slurm (no behaviour of Slurm's
// lives here); the headers of the modules document what each parser accepts.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace muster::jobengine::slurm {

// Debian's abseil has its own absl::string_view, so std::string_view is converted for StrCat.
inline absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
// C's isspace() in the "C" locale: space, \t, \n, \v, \f, \r.
inline bool isSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
inline char toLowerAscii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Case-insensitive ASCII equality (Slurm's xstrcasecmp(...) == 0).
bool equalsIgnoreCase(std::string_view a, std::string_view b);
// Case-insensitive ASCII prefix test (Slurm's xstrncasecmp(s, prefix, strlen(prefix)) == 0).
bool startsWithIgnoreCase(std::string_view s, std::string_view prefix);

// A long option word: "--name=value" gives {"name", "value"}, "--name" {"name", nullopt}.
struct LongOption {
  std::string name;
  std::optional<std::string> value;
};
LongOption splitLongOption(std::string_view word);

// A non-empty run of decimal digits and nothing else, as an unsigned value; nullopt when the
// text is empty, holds anything but digits or does not fit in 64 bits.
std::optional<uint64_t> parseDigits(std::string_view s);

// The longest prefix of `s` that is a run of digits, parsed like parseDigits; `consumed` is set
// to its length (0 when `s` does not start with a digit; the result is then nullopt).
std::optional<uint64_t> parseLeadingDigits(std::string_view s, size_t* consumed);

// C's strtol(s, &end, 10) on a NUL-free string: optional leading whitespace, an optional sign,
// then digits. Returns the value and sets `consumed` to the characters read (0 when no digit
// was found, as strtol leaves end == s). Values outside int64 saturate, as strtol's do.
int64_t strtolPrefix(std::string_view s, size_t* consumed);

// `s` made safe to print to a terminal (issue 43, item 7): squeue, scontrol and sacct print other
// users' job names, comments, paths and messages, and a terminal obeys the escape sequences in
// them (ESC, CSI, OSC: cursor moves, screen rewrites, window titles, clipboard writes). Every
// control character becomes '?': the C0 bytes 0x00-0x1f (tab and newline included: one value
// must not start a line of its own), DEL (0x7f) and the C1 code points U+0080-U+009F in their
// UTF-8 form (0xc2 0x80-0x9f; a C1-aware terminal takes U+009B as CSI). A byte that is not part
// of valid UTF-8 (a stray continuation, a bad or overlong lead, a surrogate, above U+10FFFF)
// becomes '?' too, so a raw 0x9b cannot reach a terminal in an 8-bit mode. Valid printable
// UTF-8 is kept as it is. The caller's own command line is not its business: it is for values
// read from the cluster.
std::string terminalSafe(std::string_view s);

}  // namespace muster::jobengine::slurm
