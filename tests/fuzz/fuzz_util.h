#pragma once

// Helpers shared by the fuzz targets: invariant checks that abort (so libFuzzer saves the input),
// and small ways to cut one input into several values.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace muster::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* what,
                              std::string_view detail) {
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n%.*s\n", file, line, what,
               static_cast<int>(detail.size()), detail.data());
  std::fflush(stderr);
  std::abort();
}

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// `s` in double quotes with C escapes for what is not printable ASCII, for invariant messages.
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

inline std::string quote(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size() && i < 64; ++i) out += (i ? ", " : "") + quote(v[i]);
  return out + (v.size() > 64 ? ", ...]" : "]");
}

// The input cut at every NUL byte (an argv, or several independent fields).
inline std::vector<std::string> splitAtNul(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t nul = text.find('\0', start);
    if (nul == std::string_view::npos) {
      out.emplace_back(text.substr(start));
      return out;
    }
    out.emplace_back(text.substr(start, nul - start));
    start = nul + 1;
  }
}

}  // namespace muster::fuzz

// Aborts naming the condition and `detail` (a string) when `cond` is false.
#define FUZZ_CHECK(cond, detail)                                   \
  do {                                                             \
    if (!(cond)) ::muster::fuzz::fail(__FILE__, __LINE__, #cond, (detail)); \
  } while (false)
