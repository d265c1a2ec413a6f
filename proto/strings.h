#pragma once

// Debian's abseil (20220623) is built with its own absl::string_view rather than
// std::string_view, so absl::StrCat, absl::StrSplit and the heterogeneous lookups of absl
// containers do not take a std::string_view. The two small helpers every module uses instead:
//
//   av(sv)                 a std::string_view as an absl::string_view
//   strCat(a, b, 1, ...)   concatenation of std::string_view, const char*, std::string,
//                          absl::string_view and arithmetic values (std::to_string)

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace muster::proto {

inline absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view sv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

namespace strings_internal {
inline void appendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void appendPiece(std::string& out, const char* s) { out.append(s); }
inline void appendPiece(std::string& out, const std::string& s) { out.append(s); }
inline void appendPiece(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void appendPiece(std::string& out, char c) { out.push_back(c); }
template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, char>)
void appendPiece(std::string& out, T v) {
  out.append(std::to_string(v));
}
}  // namespace strings_internal

template <class... A>
std::string strCat(const A&... pieces) {
  std::string out;
  (strings_internal::appendPiece(out, pieces), ...);
  return out;
}
template <class... A>
void strAppend(std::string* out, const A&... pieces) {
  (strings_internal::appendPiece(*out, pieces), ...);
}

}  // namespace muster::proto
