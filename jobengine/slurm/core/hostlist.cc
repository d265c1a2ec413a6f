#include "jobengine/slurm/core/hostlist.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

constexpr std::string_view kSeparators = "\t, \n";

bool isSeparator(char c) { return kSeparators.find(c) != std::string_view::npos; }

// One element of Slurm's hostlist: a prefix with numbers lo..hi printed zero-padded to `width`,
// or (single) one host whose whole name is `prefix`.
struct HostRange {
  std::string prefix;
  uint64_t lo = 0;
  uint64_t hi = 0;
  int width = 0;
  bool single = false;

  uint64_t count() const { return single ? 1 : hi - lo + 1; }
};

int decimalDigits(uint64_t n) {
  int digits = 1;
  while (n /= 10) ++digits;
  return digits;
}

// Zeros needed to pad `num` to `width` (hostlist.c _zero_padded).
int zeroPadding(uint64_t num, int width) {
  int n = decimalDigits(num);
  return width > n ? width - n : 0;
}

// hostlist.c _width_equiv: two widths are equivalent when they are equal or when applying
// either one to both numbers changes the padding of neither; on success the widths are made
// equal (the change is invisible in the output).
bool widthEquivalent(uint64_t n, int* wn, uint64_t m, int* wm) {
  if (*wn == *wm) return true;
  int npad = zeroPadding(n, *wn);
  int nmpad = zeroPadding(n, *wm);
  int mpad = zeroPadding(m, *wm);
  int mnpad = zeroPadding(m, *wn);
  if (npad != nmpad && mpad != mnpad) return false;
  if (npad != nmpad) {
    *wm = *wn;
  } else {
    *wn = *wm;
  }
  return true;
}

bool widthCombine(HostRange& a, HostRange& b) { return widthEquivalent(a.lo, &a.width, b.lo, &b.width); }

bool widthCombinePure(const HostRange& a, const HostRange& b) {
  int wa = a.width, wb = b.width;
  return widthEquivalent(a.lo, &wa, b.lo, &wb);
}

// hostrange_prefix_cmp: natural order of the prefixes; with equal prefixes a single host sorts
// before a numbered range.
int prefixCompare(const HostRange& a, const HostRange& b) {
  int c = naturalCompare(a.prefix, b.prefix);
  return c == 0 ? static_cast<int>(b.single) - static_cast<int>(a.single) : c;
}

// hostrange_within_range: printed inside the same brackets.
bool withinRange(const HostRange& a, const HostRange& b) {
  return prefixCompare(a, b) == 0 && !a.single && !b.single;
}

// hostrange_cmp, without its side effect on the widths.
bool rangeLess(const HostRange& a, const HostRange& b) {
  int c = prefixCompare(a, b);
  if (c != 0) return c < 0;
  if (widthCombinePure(a, b)) return a.lo < b.lo;
  return a.width < b.width;
}

HostRange parseHostName(std::string_view name) {
  HostRange r;
  size_t end = name.size();
  size_t start = end;
  while (start > 0 && isDigit(name[start - 1])) --start;
  std::optional<uint64_t> num;
  if (start < end) num = parseDigits(name.substr(start));
  if (!num) {
    r.prefix = std::string(name);
    r.single = true;
    return r;
  }
  r.prefix = std::string(name.substr(0, start));
  r.lo = r.hi = *num;
  r.width = static_cast<int>(end - start);
  return r;
}

// hostlist_push_range: merge into the last range when this one continues it.
void pushRange(std::vector<HostRange>& list, HostRange r) {
  if (!list.empty()) {
    HostRange& tail = list.back();
    if (r.lo != 0 && tail.hi == r.lo - 1 && prefixCompare(tail, r) == 0 && widthCombine(tail, r)) {
      tail.hi = r.hi;
      return;
    }
  }
  list.push_back(std::move(r));
}

std::string formatNumber(uint64_t n, int width) { return absl::StrFormat("%0*u", width, n); }

// hostlist_ranged_string for a one-dimensional cluster.
std::string rangedString(const std::vector<HostRange>& list) {
  std::string out;
  size_t i = 0;
  while (i < list.size()) {
    if (i > 0) out += ',';
    size_t start = i;
    bool bracket = list[i].count() > 1 || (i + 1 < list.size() && withinRange(list[i], list[i + 1]));
    out += list[i].prefix;
    if (bracket) out += '[';
    do {
      if (i > start) out += ',';
      const HostRange& r = list[i];
      if (!r.single) {
        out += formatNumber(r.lo, r.width);
        if (r.lo < r.hi) absl::StrAppend(&out, "-", formatNumber(r.hi, r.width));
      }
    } while (++i < list.size() && withinRange(list[i], list[i - 1]));
    if (bracket) out += ']';
  }
  return out;
}

std::vector<HostRange> rangesOf(const std::vector<std::string>& hosts) {
  std::vector<HostRange> list;
  for (const std::string& host : hosts) pushRange(list, parseHostName(host));
  return list;
}

// hostrange_intersect (both ranges numbered): the overlap of a and b when b starts inside a.
// Slurm asserts that a sorts before b, but hostrange_cmp orders by first number only where the
// widths can be made one and by width elsewhere, which is no strict weak order once padded and
// plain numbers mix: sorting f[1-53],f00,... left [53] right before [00], and taking that for an
// overlap turned f00 into f[00-53]. Only a b that starts at or after a's start overlaps here.
std::optional<HostRange> intersect(HostRange& a, HostRange& b) {
  if (a.single || b.single) return std::nullopt;
  if (a.lo <= b.lo && a.hi > b.lo && prefixCompare(a, b) == 0 && widthCombine(a, b)) {
    HostRange r = a;
    r.lo = b.lo;
    r.hi = std::min(a.hi, b.hi);
    return r;
  }
  return std::nullopt;
}

// hostlist_collapse: join neighbours that continue each other.
void collapse(std::vector<HostRange>& list) {
  for (size_t i = list.size(); i-- > 1;) {
    HostRange& prev = list[i - 1];
    HostRange& next = list[i];
    if (next.lo != 0 && prev.hi == next.lo - 1 && prefixCompare(prev, next) == 0 &&
        widthCombine(prev, next)) {
      prev.hi = next.hi;
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

// hostlist_coalesce: split overlapping neighbours into the overlap's single hosts, then collapse.
// Duplicates survive as separate single-number ranges, as in Slurm.
void coalesce(std::vector<HostRange>& list) {
  size_t i = list.size();
  while (i > 1) {
    --i;
    std::optional<HostRange> overlap = intersect(list[i - 1], list[i]);
    if (!overlap) continue;
    HostRange& prev = list[i - 1];
    HostRange& next = list[i];
    if (overlap->hi < prev.hi) next.hi = prev.hi;
    prev.hi = overlap->lo;
    next.lo = overlap->hi;
    uint64_t prev_hi = prev.hi;
    uint64_t next_lo = next.lo;
    std::vector<HostRange> inserted;
    for (uint64_t n = overlap->lo;; ++n) {
      HostRange one = *overlap;
      one.lo = one.hi = n;
      if (n > prev_hi) inserted.push_back(one);
      if (n < next_lo) inserted.push_back(one);
      if (n == overlap->hi) break;
    }
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(i), inserted.begin(), inserted.end());
    i = list.size();
  }
  collapse(list);
}

// hostrange_join for hostlist_uniq: -1 when a and b do not touch, else the duplicates removed.
int64_t join(HostRange& a, HostRange& b) {
  if (prefixCompare(a, b) != 0 || !widthCombine(a, b)) return -1;
  if (a.single && b.single) return 1;
  if (a.single || b.single) return -1;
  if (b.lo != 0 && a.hi == b.lo - 1) {
    a.hi = b.hi;
    return 0;
  }
  if (a.hi >= b.lo) {
    if (a.hi < b.hi) {
      int64_t dup = static_cast<int64_t>(a.hi - b.lo + 1);
      a.hi = b.hi;
      return dup;
    }
    return static_cast<int64_t>(b.count());
  }
  return -1;
}

// ---- expansion ----

struct NumberRange {
  uint64_t lo = 0;
  uint64_t hi = 0;
  int width = 0;
};

class Expander {
 public:
  explicit Expander(std::string_view input) : input_(input) {}

  absl::Status expand(std::vector<std::string>* out) {
    size_t pos = 0;
    while (true) {
      std::optional<std::string_view> token = nextToken(&pos);
      if (!token) break;
      if (absl::Status s = expandToken(*token, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status error(std::string_view detail) const {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid hostlist: ", av(input_), " (", av(detail), ")"));
  }

  // hostlist.c _next_tok: a token runs to the next separator outside brackets.
  std::optional<std::string_view> nextToken(size_t* pos) const {
    std::string_view s = input_;
    size_t p = *pos;
    while (p < s.size() && isSeparator(s[p])) ++p;
    if (p >= s.size()) {
      *pos = p;
      return std::nullopt;
    }
    size_t tok = p;
    size_t parse = tok;
    while (true) {
      while (p < s.size() && !isSeparator(s[p])) ++p;
      bool moved = false;
      while (true) {
        size_t open = s.find('[', parse);
        if (open == std::string_view::npos || open > p) break;
        size_t close = s.find(']', parse);
        if (close == std::string_view::npos || close < open) break;
        if (close < p) {
          parse = close + 1;
          continue;
        }
        p = close;
        moved = true;
        break;
      }
      if (!moved) break;
    }
    std::string_view token = s.substr(tok, p - tok);
    while (p < s.size() && isSeparator(s[p])) ++p;
    *pos = p;
    return token;
  }

  // hostlist.c _parse_single_range, with plain digits only.
  absl::Status parseSingleRange(std::string_view text, NumberRange* range) const {
    std::string bad = absl::StrCat("invalid range `", av(text), "'");
    if (text.find('x') != std::string_view::npos) return error(bad);
    std::string_view lo_text = text;
    std::string_view hi_text;
    bool has_dash = false;
    if (size_t dash = text.find('-'); dash != std::string_view::npos) {
      has_dash = true;
      lo_text = text.substr(0, dash);
      hi_text = text.substr(dash + 1);
      if (!hi_text.empty() && hi_text[0] == '-') return error(bad);  // negative numbers
    }
    std::optional<uint64_t> lo = parseDigits(lo_text);
    if (!lo) return error(bad);
    range->width = static_cast<int>(lo_text.size());
    range->lo = *lo;
    range->hi = *lo;
    if (has_dash && !hi_text.empty()) {
      std::optional<uint64_t> hi = parseDigits(hi_text);
      if (!hi) return error(bad);
      range->hi = *hi;
    }
    if (range->lo > range->hi) return error(bad);
    if (range->hi - range->lo + 1 > kMaxHostsPerRange) {
      return error(absl::StrCat("too many hosts in range `", av(text), "'"));
    }
    return absl::OkStatus();
  }

  absl::Status parseRangeList(std::string_view text, std::vector<NumberRange>* ranges) const {
    ranges->clear();
    size_t start = 0;
    while (true) {
      size_t comma = text.find(',', start);
      std::string_view part = text.substr(start, comma == std::string_view::npos
                                                     ? std::string_view::npos
                                                     : comma - start);
      NumberRange r;
      if (absl::Status s = parseSingleRange(part, &r); !s.ok()) return s;
      ranges->push_back(r);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return absl::OkStatus();
  }

  absl::Status add(std::vector<std::string>* out, std::string host) {
    if (out->size() >= kMaxHostlistSize) {
      return error(absl::StrCat("more than ", kMaxHostlistSize, " hosts"));
    }
    out->push_back(std::move(host));
    return absl::OkStatus();
  }

  // hostlist.c _push_range_list: the prefix may hold further bracket groups.
  absl::Status pushRangeList(const std::string& prefix, std::string_view suffix,
                             const std::vector<NumberRange>& ranges,
                             std::vector<std::string>* out) {
    size_t open = prefix.rfind('[');
    size_t close = open == std::string::npos ? std::string::npos : prefix.rfind(']');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      std::vector<NumberRange> prefix_ranges;
      if (absl::Status s = parseRangeList(std::string_view(prefix).substr(open + 1, close - open - 1),
                                          &prefix_ranges);
          !s.ok()) {
        return s;
      }
      uint64_t prefix_count = 0;
      for (const NumberRange& pr : prefix_ranges) {
        prefix_count += pr.hi - pr.lo + 1;
        if (prefix_count > kMaxPrefixCount) {
          return error("too many hosts in a prefix range");
        }
      }
      std::string head = prefix.substr(0, open);
      std::string tail = prefix.substr(close + 1);
      for (const NumberRange& pr : prefix_ranges) {
        for (uint64_t j = pr.lo;; ++j) {
          std::string new_prefix = absl::StrCat(head, formatNumber(j, pr.width), tail);
          if (absl::Status s = pushRangeList(new_prefix, suffix, ranges, out); !s.ok()) return s;
          if (j == pr.hi) break;
        }
      }
      return absl::OkStatus();
    }
    for (const NumberRange& r : ranges) {
      for (uint64_t n = r.lo;; ++n) {
        if (absl::Status s = add(out, absl::StrCat(prefix, formatNumber(n, r.width), av(suffix)));
            !s.ok()) {
          return s;
        }
        if (n == r.hi) break;
      }
    }
    return absl::OkStatus();
  }

  absl::Status expandToken(std::string_view token, std::vector<std::string>* out) {
    size_t open = token.rfind('[');
    if (open == std::string_view::npos) return add(out, std::string(token));
    std::string prefix(token.substr(0, open));
    std::string_view rest = token.substr(open + 1);
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return error("'[' without ']'");
    std::string_view suffix;
    if (close + 1 < rest.size() && rest[close + 1] != ',') suffix = rest.substr(close + 1);
    std::vector<NumberRange> ranges;
    if (absl::Status s = parseRangeList(rest.substr(0, close), &ranges); !s.ok()) return s;
    return pushRangeList(prefix, suffix, ranges, out);
  }

  std::string_view input_;
};

// strnatcmp helpers: characters past the end read as NUL.
char at(std::string_view s, size_t i) { return i < s.size() ? s[i] : '\0'; }

int compareRight(std::string_view a, size_t ai, std::string_view b, size_t bi) {
  int bias = 0;
  for (;; ++ai, ++bi) {
    char ca = at(a, ai), cb = at(b, bi);
    bool da = isDigit(ca), db = isDigit(cb);
    if (!da && !db) return bias;
    if (!da) return -1;
    if (!db) return +1;
    if (ca < cb) {
      if (!bias) bias = -1;
    } else if (ca > cb) {
      if (!bias) bias = +1;
    }
  }
}

int compareLeft(std::string_view a, size_t ai, std::string_view b, size_t bi) {
  for (;; ++ai, ++bi) {
    char ca = at(a, ai), cb = at(b, bi);
    bool da = isDigit(ca), db = isDigit(cb);
    if (!da && !db) return 0;
    if (!da) return -1;
    if (!db) return +1;
    if (ca < cb) return -1;
    if (ca > cb) return +1;
  }
}

}  // namespace

int naturalCompare(std::string_view a, std::string_view b) {
  size_t ai = 0, bi = 0;
  while (true) {
    char ca = at(a, ai), cb = at(b, bi);
    while (isSpace(ca)) ca = at(a, ++ai);
    while (isSpace(cb)) cb = at(b, ++bi);
    if (isDigit(ca) && isDigit(cb)) {
      bool fractional = ca == '0' || cb == '0';
      int result = fractional ? compareLeft(a, ai, b, bi) : compareRight(a, ai, b, bi);
      if (result != 0) return result;
    }
    if (ca == '\0' && cb == '\0') return 0;
    if (ca < cb) return -1;
    if (ca > cb) return +1;
    ++ai;
    ++bi;
  }
}

absl::StatusOr<std::vector<std::string>> expandHostlist(std::string_view hostlist) {
  if (hostlist.find('{') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Invalid hostlist: ", av(hostlist), " (hostlist functions {...} are not supported)"));
  }
  std::vector<std::string> hosts;
  Expander expander(hostlist);
  if (absl::Status s = expander.expand(&hosts); !s.ok()) return s;
  return hosts;
}

std::string compressHostlist(const std::vector<std::string>& hosts) {
  return rangedString(rangesOf(hosts));
}

std::string compressHostlistSorted(const std::vector<std::string>& hosts) {
  std::vector<HostRange> list = rangesOf(hosts);
  if (list.size() > 1) {
    std::stable_sort(list.begin(), list.end(), rangeLess);
    coalesce(list);
  }
  return rangedString(list);
}

std::string compressHostlistUnique(const std::vector<std::string>& hosts) {
  // Equal names go first: hostrange_cmp is no strict order when zero-padded and plain numbers mix
  // ("f1-93", "f00", "f93" sort in that order, and 93 is inside the first range but not next to
  // it), so dropping duplicates only between neighbours could keep a host twice.
  std::vector<std::string> distinct;
  distinct.reserve(hosts.size());
  std::set<std::string_view> seen;
  for (const std::string& h : hosts)
    if (seen.insert(h).second) distinct.push_back(h);
  std::vector<HostRange> list = rangesOf(distinct);
  if (list.size() > 1) {
    std::stable_sort(list.begin(), list.end(), rangeLess);
    size_t i = 1;
    while (i < list.size()) {
      if (join(list[i - 1], list[i]) >= 0) {
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  return rangedString(list);
}

}  // namespace muster::jobengine::slurm
