// Slurm hostlist expressions (-w, -x, SLURM_JOB_NODELIST, scontrol show hostnames). Plain host
// names (letters, digits, '-', '.', '_') that expand compress back to an expression that expands
// to the same hosts, in each of the three compressions' orders. The first byte picks whether the
// rest is an expression or a plain list of host names (split at commas and newlines) to compress
// first.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>

#include "jobengine/slurm/core/hostlist.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;
using namespace muster::jobengine::slurm;

namespace {

// Expanding is capped at kMaxHostlistSize hosts; the round trips only run below this.
constexpr size_t kRoundTripHosts = 20000;

void roundTrip(const std::vector<std::string>& hosts, std::string_view origin) {
  if (hosts.size() > kRoundTripHosts) return;
  const std::string compressed = compressHostlist(hosts);
  absl::StatusOr<std::vector<std::string>> back = expandHostlist(compressed);
  const std::string what = fuzz::quote(origin) + " = " + fuzz::quote(hosts) + " -> " + fuzz::quote(compressed);
  FUZZ_CHECK(back.ok(), what + ": " + back.status().ToString());
  FUZZ_CHECK(*back == hosts, what + " -> " + fuzz::quote(*back));

  std::vector<std::string> sorted = hosts;
  std::stable_sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) {
    return naturalCompare(a, b) < 0;
  });
  const std::string sorted_text = compressHostlistSorted(hosts);
  absl::StatusOr<std::vector<std::string>> sorted_back = expandHostlist(sorted_text);
  FUZZ_CHECK(sorted_back.ok(), what + " sorted: " + fuzz::quote(sorted_text));
  std::multiset<std::string> want(hosts.begin(), hosts.end());
  std::multiset<std::string> got(sorted_back->begin(), sorted_back->end());
  FUZZ_CHECK(want == got, what + " sorted: " + fuzz::quote(sorted_text) + " lost or added hosts");

  const std::string unique_text = compressHostlistUnique(hosts);
  absl::StatusOr<std::vector<std::string>> unique_back = expandHostlist(unique_text);
  FUZZ_CHECK(unique_back.ok(), what + " unique: " + fuzz::quote(unique_text));
  std::set<std::string> want_unique(hosts.begin(), hosts.end());
  std::set<std::string> got_unique(unique_back->begin(), unique_back->end());
  FUZZ_CHECK(want_unique == got_unique && got_unique.size() == unique_back->size(),
             what + " unique: " + fuzz::quote(unique_text));
}

bool plainHostName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text = fuzz::asText(data + 1, size - 1);
  if (data[0] & 1) {
    std::vector<std::string> hosts;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find_first_of(",\n", start);
      if (end == std::string_view::npos) end = text.size();
      const std::string_view name = text.substr(start, end - start);
      if (!plainHostName(name)) return 0;
      hosts.emplace_back(name);
      start = end + 1;
    }
    roundTrip(hosts, text);
    return 0;
  }
  absl::StatusOr<std::vector<std::string>> hosts = expandHostlist(text);
  if (!hosts.ok()) {
    FUZZ_CHECK(hosts.status().message().rfind("Invalid hostlist", 0) == 0, hosts.status().ToString());
    return 0;
  }
  FUZZ_CHECK(hosts->size() <= kMaxHostlistSize, "the expansion is capped");
  // Slurm keeps what is not a valid bracket group as part of a name ("a[x" stays "a[x"); such
  // names have no compressed form, as in Slurm. Host names of real nodes are plain.
  for (const std::string& h : *hosts) {
    if (!plainHostName(h)) return 0;
  }
  roundTrip(*hosts, text);
  return 0;
}
