#pragma once

// Slurm hostlists: "n[01-04,07],gpu[1-2]x" and back, exactly as Slurm's src/common/hostlist.c
// (one-dimensional clusters, the only kind Muster models) and as scontrol prints them:
//
//   scontrol show hostnames EXPR     -> expandHostlist(EXPR), one name per line
//   scontrol show hostlist A,B,...   -> compressHostlist({A, B, ...})
//   scontrol show hostlistsorted ... -> compressHostlistSorted({A, B, ...})
//   squeue's NODELIST, sinfo         -> compressHostlistUnique(...) (Slurm's hostset: sorted and
//                                       without duplicates)
//
// Expansion (hostlist_create):
//   - Tokens are separated by ',', ' ', '\t' or '\n' (runs of them count as one); a separator
//     inside brackets does not split ("n[1, 3]" is one token, but see the deviations below).
//   - A token without '[' is one host name, verbatim.
//   - Otherwise its last "[...]" group is a comma list of numbers and ranges lo-hi; the number of
//     digits written for lo is the zero-padding width of every host of that range ("n[01-10]"
//     gives n01..n10, "n[1-010]" gives n1..n10). Text after ']' is a suffix ("n[1-2]-ib").
//     Earlier groups in the prefix multiply out: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2. Slurm
//     takes the prefix's groups from its right end, so with three or more groups the one just
//     before the last varies slowest: "a[1-2]b[1-2]c[1]" -> a1b1c1 a2b1c1 a1b2c1 a2b2c1.
//   - "lo-" alone means lo (Slurm's parser reads a missing hi as hi = lo).
//   - Errors, as Slurm: '[' without ']', an empty or non-numeric range, "x" in a range (boxes
//     are for multi-dimensional clusters), a negative number, lo > hi, more than 65536 hosts in
//     one range (MAX_RANGE) or 65536 values in one prefix group (MAX_PREFIX_CNT).
//   - Duplicates are kept and the order is the order written.
//
// Compression (hostlist_push_host + hostlist_ranged_string): each name is split into a prefix and
// a numeric suffix (the trailing digits; their count is the width). A name is merged into the
// previous range only when it continues it (same prefix, next number, compatible zero padding),
// so order is kept: {n3, n1, n2} -> "n[3,1-2]". Neighbouring ranges with the same prefix share one
// bracket. Widths round-trip: {n09, n10} -> "n[09-10]", {n9, n10} -> "n[9-10]", {n1, n02} ->
// "n[1,02]".
//
// Deviations from Slurm (stricter, never silently different):
//   - Range bounds must be plain digits: Slurm's strtoul also takes leading blanks and a '+'
//     ("n[ 1]" would give the two-character width " 1"), and ignores junk after lo ("n[1a-3]");
//     both are errors here.
//   - An invalid group in the prefix of a name with three or more groups is an error; Slurm
//     silently drops those hosts.
//   - The whole expansion is capped at kMaxHostlistSize hosts (Slurm's bound is 64Ki * 64Ki).
//   - Host names whose numeric suffix does not fit in 64 bits are kept as plain names (Slurm's
//     strtoul saturates them).
//   - Hostlist functions ("{...}", expanded by slurmctld) are refused.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muster::jobengine::slurm {

// Slurm's MAX_RANGE (MAX_SLURM_NODES): hosts in one lo-hi range.
inline constexpr uint64_t kMaxHostsPerRange = 65536;
// Slurm's MAX_PREFIX_CNT: values in one bracket group of a prefix ("a[0-65535]b[1]").
inline constexpr uint64_t kMaxPrefixCount = 64 * 1024;
// Muster's own cap on the hosts one expression may expand to (memory and time: a million took
// 4.5 s under ASan, a fuzz timeout; the largest clusters have well under 200,000 nodes).
inline constexpr size_t kMaxHostlistSize = 200'000;

// The host names of a hostlist expression, in Slurm's order, duplicates kept. An empty or
// all-separator expression gives an empty list. Errors are InvalidArgument with a message that
// starts "Invalid hostlist: <expression>".
absl::StatusOr<std::vector<std::string>> expandHostlist(std::string_view hostlist);

// What `scontrol show hostlist` prints for these names: order kept, consecutive names merged.
std::string compressHostlist(const std::vector<std::string>& hosts);

// What `scontrol show hostlistsorted` prints: hostlist_sort (natural order of prefixes, then
// numbers) and its coalescing of overlapping ranges; duplicates are kept (n1,n1 -> "n[1,1]").
std::string compressHostlistSorted(const std::vector<std::string>& hosts);

// Slurm's hostset / hostlist_uniq: sorted and without duplicates (squeue's NODELIST column).
std::string compressHostlistUnique(const std::vector<std::string>& hosts);

// Slurm's strnatcmp: digit runs compare as numbers ("rack2" < "rack10"), runs with a leading
// zero compare digit by digit, blanks are skipped. Negative, zero or positive like strcmp.
int naturalCompare(std::string_view a, std::string_view b);

}  // namespace muster::jobengine::slurm
