#pragma once

// Names of what one attempt of a ParallelJob creates. Every name stays within Kubernetes' rules
// for any ParallelJob name the API accepts (a DNS-1123 subdomain of up to 253 characters):
//
//   group    <job>-<attempt>   DNS-1035 label of at most kMaxGroupNameLength characters; it is
//                              status.jobGroupName, the headless Service's name, the pods'
//                              subdomain and the value of the jobset.sigs.k8s.io/jobset-name label.
//   pod      <group>-<index>   also the pod's hostname (a DNS label, at most 63 characters).
//   secret   <group>-ssh-<5 characters chosen by the API server> (generateName, so that no
//            Secret can be waiting under that name: the engine may not read Secrets, so it could not
//            tell a planted one from its own; attempt_objects.h)
//   configmap <group>-mpi
//
// A job name that is too long, contains dots or starts with a digit is shortened and made unique
// with a hash of the full name: "<prefix>-<8 hex digits>-<attempt>".

#include <cstdint>
#include <string>
#include <string_view>

namespace muster::jobengine {

// The cluster's DNS domain unless the config says otherwise (jobEngine.clusterDomain): every pod
// name the engine writes (hostfiles, DNS search paths) ends in it; nothing else spells it out.
inline constexpr char kDefaultClusterDomain[] = "cluster.local";

// Leaves room for "-<index>" with up to 10 digits inside a 63-character hostname.
inline constexpr size_t kMaxGroupNameLength = 52;

std::string groupName(std::string_view job_name, int32_t attempt);
std::string podName(std::string_view group, int32_t index);
// The generateName of the attempt's SSH Secret: "<group>-ssh-".
std::string secretNamePrefix(std::string_view group);
// The SSH Secret's name before generateName ("<group>-ssh-<first 6 hex digits of the job UID>"):
// used only for an attempt whose pods an older Muster created (they mount it and carry no
// kSshSecretAnnotation), so that a pod created again matches its siblings.
std::string legacySecretName(std::string_view group, std::string_view job_uid);
std::string configMapName(std::string_view group);
// "<pod>.<service>.<namespace>.svc.<cluster domain>": what the headless Service publishes.
std::string podFqdn(std::string_view pod, std::string_view service, std::string_view ns,
                    std::string_view cluster_domain);

// Kubernetes' validation rules, for tests and for checking names before creating objects.
bool isDns1123Label(std::string_view s);      // [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63
bool isDns1035Label(std::string_view s);      // [a-z]([-a-z0-9]*[a-z0-9])?, <= 63
bool isDns1123Subdomain(std::string_view s);  // dot-separated labels, <= 253
bool isLabelValue(std::string_view s);        // (([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?, <= 63

}  // namespace muster::jobengine
