#include "jobengine/slurm/core/signal_request.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

constexpr std::array<std::pair<std::string_view, int>, 24> kSignals{{
    {"HUP", SIGHUP},       {"INT", SIGINT},       {"QUIT", SIGQUIT},     {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT},     {"BUS", SIGBUS},       {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},     {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},     {"TERM", SIGTERM},     {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},       {"XCPU", SIGXCPU},     {"WINCH", SIGWINCH},
}};

}  // namespace

std::optional<int> parseSignalName(std::string_view name) {
  if (std::optional<uint64_t> n = parseDigits(name)) {
    if (*n >= 1 && *n <= 64) return static_cast<int>(*n);
    return std::nullopt;
  }
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string_view bare = upper;
  if (bare.rfind("SIG", 0) == 0) bare.remove_prefix(3);
  for (const auto& [n, number] : kSignals)
    if (n == bare) return number;
  return std::nullopt;
}

std::string formatSignalRequest(const SignalRequest& request) {
  return absl::StrCat(request.seq, ":", request.number, ":", request.target);
}

std::optional<SignalRequest> parseSignalRequest(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::vector<std::string_view> f;
  for (absl::string_view p : absl::StrSplit(av(text), ':')) f.emplace_back(p.data(), p.size());
  if (f.size() != 3) return std::nullopt;
  std::optional<uint64_t> seq = parseDigits(f[0]), number = parseDigits(f[1]);
  if (!seq || *seq == 0 || *seq > static_cast<uint64_t>(INT64_MAX) || !number || *number < 1 ||
      *number > 64)
    return std::nullopt;
  if (f[2] != "steps" && f[2] != "batch" && f[2] != "full") return std::nullopt;
  return SignalRequest{static_cast<int64_t>(*seq), static_cast<int>(*number), std::string(f[2])};
}

}  // namespace muster::jobengine::slurm
