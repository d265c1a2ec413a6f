#include "jobengine/naming.h"


#include <openssl/sha.h>

#include <cstdio>

namespace muster::jobengine {
namespace {

bool lowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool alnum(char c) { return lowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

std::string hash8(std::string_view s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  char out[9];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x", digest[0], digest[1], digest[2], digest[3]);
  return out;
}

}  // namespace

std::string groupName(std::string_view job_name, int32_t attempt) {
  const std::string suffix = "-" + std::to_string(attempt);
  std::string base(job_name);
  bool changed = false;
  for (char& c : base) {
    if (!lowerAlnum(c) && c != '-') {
      c = '-';
      changed = true;
    }
  }
  if (base.empty() || !(base[0] >= 'a' && base[0] <= 'z')) {
    base = "pj-" + base;
    changed = true;
  }
  if (!changed && base.size() + suffix.size() <= kMaxGroupNameLength) return base + suffix;
  const std::string hash = "-" + hash8(job_name);
  size_t keep = kMaxGroupNameLength - suffix.size() - hash.size();
  if (base.size() > keep) base.resize(keep);
  while (!base.empty() && base.back() == '-') base.pop_back();
  return base + hash + suffix;
}

std::string podName(std::string_view group, int32_t index) {
  return std::string(group) + "-" + std::to_string(index);
}
std::string secretNamePrefix(std::string_view group) { return std::string(group) + "-ssh-"; }
std::string legacySecretName(std::string_view group, std::string_view job_uid) {
  std::string out = secretNamePrefix(group);
  for (char c : job_uid) {
    if (out.size() == group.size() + 5 + 6) break;
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) out += c;
    else if (c >= 'A' && c <= 'F') out += static_cast<char>(c - 'A' + 'a');
  }
  return out;
}
std::string configMapName(std::string_view group) { return std::string(group) + "-mpi"; }

std::string podFqdn(std::string_view pod, std::string_view service, std::string_view ns,
                    std::string_view cluster_domain) {
  std::string out;
  out.append(pod).append(".").append(service).append(".").append(ns).append(".svc");
  if (!cluster_domain.empty()) out.append(".").append(cluster_domain);
  return out;
}

bool isDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63 || !lowerAlnum(s.front()) || !lowerAlnum(s.back())) return false;
  for (char c : s)
    if (!lowerAlnum(c) && c != '-') return false;
  return true;
}

bool isDns1035Label(std::string_view s) {
  return isDns1123Label(s) && s.front() >= 'a' && s.front() <= 'z';
}

bool isDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (!isDns1123Label(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool isLabelValue(std::string_view s) {
  if (s.empty()) return true;
  if (s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s)
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

}  // namespace muster::jobengine
