#pragma once

// Names of what one attempt of a ParallelJob creates. Every name stays within Kubernetes' rules
// for any ParallelJob name the API accepts (a DNS-1123 subdomain of up to 253 characters):
//
//   group    <job>-<attempt>   DNS-1035 label of at most kMaxGroupNameLength characters; it is
//                              status.jobGroupName, the headless Service's name, the pods'
//                              subdomain and the value of the jobset.sigs.k8s.io/jobset-name label.
//   pod      <group>-<index>   also the pod's hostname (a DNS label, at most 63 characters).
//   secret   <group>-ssh-<first 6 hex digits of the job's UID>
//            (so the engine can take an existing one as its own without reading it: it is granted
//            no get on Secrets, which would let it read every Secret in the cluster)
//   configmap <group>-mpi
//
// A job name that is too long, contains dots or starts with a digit is shortened and made unique
// with a hash of the full name: "<prefix>-<8 hex digits>-<attempt>".

#include <cstdint>
#include <string>
#include <string_view>

namespace muster::jobengine {

// Leaves room for "-<index>" with up to 10 digits inside a 63-character hostname.
inline constexpr size_t kMaxGroupNameLength = 52;

std::string groupName(std::string_view job_name, int32_t attempt);
std::string podName(std::string_view group, int32_t index);
std::string secretName(std::string_view group, std::string_view job_uid);
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
