#pragma once

// Debian's abseil is built with its own absl::string_view (not std::string_view), so StrCat and
// heterogeneous lookups in absl containers need std::string_view converted.

#include <string_view>

#include "absl/strings/string_view.h"

namespace muster::scheduler {

inline absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace muster::scheduler
