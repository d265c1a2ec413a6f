#pragma once

#include <atomic>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

// Structured key/value logging with Kubernetes-style verbosity (klog's format):
//   I1129 20:55:00.123456   1234 reflector.cc:88] "Watch closed" resource="pods" resourceVersion="812"
// V2: state changes and binds; V3: each attempt; V4: plugin decisions; V5: per-node detail.
// Messages have no trailing period. Never pass secrets.
namespace muster::log {

enum class Severity { kInfo, kWarning, kError };

void setVerbosity(int level);
int verbosity();
inline bool enabled(int level) { return verbosity() >= level; }

namespace internal {
void emit(Severity severity, const char* file, int line, std::string_view message,
          const std::string& fields);

inline void appendValue(std::ostringstream& out, std::string_view v) {
  out << '"';
  for (char c : v) {
    if (c == '"' || c == '\\') out << '\\' << c;
    else if (c == '\n') out << "\\n";
    else out << c;
  }
  out << '"';
}
inline void appendValue(std::ostringstream& out, const std::string& v) {
  appendValue(out, std::string_view(v));
}
inline void appendValue(std::ostringstream& out, const char* v) {
  appendValue(out, std::string_view(v));
}
template <class T>
void appendValue(std::ostringstream& out, const T& v) {
  out << v;
}

inline void appendFields(std::ostringstream&) {}
template <class V, class... Rest>
void appendFields(std::ostringstream& out, std::string_view key, const V& value, Rest&&... rest) {
  out << ' ' << key << '=';
  appendValue(out, value);
  appendFields(out, std::forward<Rest>(rest)...);
}

template <class... KV>
void log(Severity severity, const char* file, int line, std::string_view message, KV&&... kv) {
  std::ostringstream fields;
  appendFields(fields, std::forward<KV>(kv)...);
  emit(severity, file, line, message, fields.str());
}
}  // namespace internal

}  // namespace muster::log

// MUSTER_LOG_INFO(2, "Bound pod", "pod", key, "node", node);
#define MUSTER_LOG_INFO(level, ...)                                                         \
  do {                                                                                      \
    if (::muster::log::enabled(level))                                                      \
      ::muster::log::internal::log(::muster::log::Severity::kInfo, __FILE__, __LINE__,      \
                                   __VA_ARGS__);                                            \
  } while (0)
#define MUSTER_LOG_WARNING(...) \
  ::muster::log::internal::log(::muster::log::Severity::kWarning, __FILE__, __LINE__, __VA_ARGS__)
#define MUSTER_LOG_ERROR(...) \
  ::muster::log::internal::log(::muster::log::Severity::kError, __FILE__, __LINE__, __VA_ARGS__)
