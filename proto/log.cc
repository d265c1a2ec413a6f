#include "proto/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <mutex>

namespace muster::log {
namespace {
std::atomic<int> g_verbosity{0};
std::mutex g_mutex;
}  // namespace

void setVerbosity(int level) { g_verbosity.store(level, std::memory_order_relaxed); }
int verbosity() { return g_verbosity.load(std::memory_order_relaxed); }

namespace internal {
void emit(Severity severity, const char* file, int line, std::string_view message,
          const std::string& fields) {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm t{};
  localtime_r(&tv.tv_sec, &t);
  const char sev = severity == Severity::kInfo ? 'I' : severity == Severity::kWarning ? 'W' : 'E';
  std::string_view base(file);
  if (auto slash = base.rfind('/'); slash != std::string_view::npos) base.remove_prefix(slash + 1);
  std::ostringstream msg;
  appendValue(msg, message);
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %.*s:%d] %s%s\n", sev, t.tm_mon + 1,
               t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec),
               static_cast<int>(getpid()), static_cast<int>(base.size()), base.data(), line,
               msg.str().c_str(), fields.c_str());
}
}  // namespace internal
}  // namespace muster::log
