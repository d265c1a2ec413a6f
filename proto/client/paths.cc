// Resource paths, URL encoding and the API server's URL.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "proto/client/internal.h"
#include "proto/strings.h"

namespace muster::proto {

namespace client_internal {
namespace {

bool isUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

std::string percentEncode(std::string_view s, std::string_view also_allowed) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (isUnreserved(c) || also_allowed.find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace

std::string encodeQuery(std::string_view s) { return percentEncode(s, ""); }
std::string encodeSegment(std::string_view s) { return percentEncode(s, "!$&'()*+,;=:@"); }

absl::StatusOr<ServerUrl> parseServer(std::string_view server) {
  constexpr std::string_view kHttps = "https://";
  if (!absl::StartsWithIgnoreCase(av(server), av(kHttps))) {
    if (absl::StartsWithIgnoreCase(av(server), "http://")) {
      return absl::InvalidArgumentError(strCat("server ", server, ": only https:// is supported"));
    }
    return absl::InvalidArgumentError(strCat("server \"", server, "\" is not an https:// URL"));
  }
  std::string_view rest = server.substr(kHttps.size());
  ServerUrl url;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    url.prefix = std::string(prefix);
  }
  if (authority.find('@') != std::string_view::npos) {
    return absl::InvalidArgumentError("server URL must not contain user information");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(strCat("server ", server, ": bad IPv6 address"));
    }
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return absl::InvalidArgumentError(strCat("server ", server, ": bad address"));
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) {
    return absl::InvalidArgumentError(strCat("server ", server, ": no host"));
  }
  url.port = port.empty() ? "443" : std::string(port);
  if (!std::all_of(url.port.begin(), url.port.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError(strCat("server ", server, ": bad port"));
  }
  const bool v6 = url.host.find(':') != std::string::npos;
  url.host_header = strCat(v6 ? "[" : "", url.host, v6 ? "]" : "", ":", url.port);
  return url;
}

bool isIpAddress(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string_view verbName(Verb verb) {
  switch (verb) {
    case Verb::kGet: return "GET";
    case Verb::kPost: return "POST";
    case Verb::kPut: return "PUT";
    case Verb::kPatch: return "PATCH";
    case Verb::kDelete: return "DELETE";
  }
  return "GET";
}

http::verb beastVerb(Verb verb) {
  switch (verb) {
    case Verb::kGet: return http::verb::get;
    case Verb::kPost: return http::verb::post;
    case Verb::kPut: return http::verb::put;
    case Verb::kPatch: return http::verb::patch;
    case Verb::kDelete: return http::verb::delete_;
  }
  return http::verb::get;
}

bool idempotent(Verb verb) { return verb != Verb::kPost; }

std::string describe(const Request& r) { return strCat(verbName(r.verb), " ", r.path); }

}  // namespace client_internal

using client_internal::encodeSegment;

std::string Resource::basePath() const {
  if (group_version.find('/') == std::string::npos) return strCat("/api/", group_version);
  return strCat("/apis/", group_version);
}

std::string Resource::collectionPath(std::string_view ns) const {
  if (namespaced && !ns.empty()) {
    return strCat(basePath(), "/namespaces/", encodeSegment(ns), "/", plural);
  }
  return strCat(basePath(), "/", plural);
}

std::string Resource::objectPath(std::string_view ns, std::string_view name,
                                 std::string_view subresource) const {
  std::string path = strCat(collectionPath(ns), "/", encodeSegment(name));
  if (!subresource.empty()) strAppend(&path, "/", subresource);
  return path;
}

namespace resources {
const Resource kPods{"v1", "pods", true};
const Resource kNodes{"v1", "nodes", false};
const Resource kEvents{"v1", "events", true};
const Resource kLeases{"coordination.k8s.io/v1", "leases", true};
const Resource kNamespaces{"v1", "namespaces", false};
const Resource kPodGroups{"scheduling.x-k8s.io/v1alpha1", "podgroups", true};
const Resource kWorkloadPodGroups{"scheduling.k8s.io/v1alpha2", "podgroups", true};
const Resource kParallelJobs{"preferred.jp/v1alpha1", "paralleljobs", true};
const Resource kServices{"v1", "services", true};
const Resource kSecrets{"v1", "secrets", true};
const Resource kConfigMaps{"v1", "configmaps", true};
const Resource kPersistentVolumeClaims{"v1", "persistentvolumeclaims", true};
const Resource kPersistentVolumes{"v1", "persistentvolumes", false};
const Resource kStorageClasses{"storage.k8s.io/v1", "storageclasses", false};
const Resource kCSINodes{"storage.k8s.io/v1", "csinodes", false};
const Resource kReplicationControllers{"v1", "replicationcontrollers", true};
const Resource kReplicaSets{"apps/v1", "replicasets", true};
const Resource kStatefulSets{"apps/v1", "statefulsets", true};
const Resource kPodDisruptionBudgets{"policy/v1", "poddisruptionbudgets", true};
}  // namespace resources

std::string_view contentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/json";
}

}  // namespace muster::proto
