#pragma once

// The Debian-abseil string_view workaround (proto/strings.h), in the scheduler's namespace.

#include <cstddef>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "proto/strings.h"

namespace muster::scheduler {

using proto::av;
using proto::strCat;

// "n1, n2, n3 and 5 more": the first `shown` strings of `items`, and how many were left out (for
// messages naming nodes).
template <class Range>
std::string joinSome(const Range& items, size_t shown = 8) {
  std::string out;
  size_t i = 0;
  for (const std::string& item : items) {
    if (i == shown) {
      absl::StrAppend(&out, " and ", std::size(items) - shown, " more");
      break;
    }
    absl::StrAppend(&out, i++ ? ", " : "", item);
  }
  return out;
}

}  // namespace muster::scheduler
