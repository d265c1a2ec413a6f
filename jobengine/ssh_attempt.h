#pragma once

// What every SSH-connected runtime (mpi-openmpi, slurm) builds for one attempt, written once:
//
// - a headless Service <group> (publishNotReadyAddresses, so every pod's name resolves as soon as
//   the pod has an IP) that gives pod i the name <group>-i.<group>.<ns>.svc.<cluster domain>;
// - a Secret with a fresh Ed25519 client key, a host key shared by the attempt's sshd,
//   authorized_keys and known_hosts (so host keys are verified, not ignored), named by the API
//   server (generateName <group>-ssh-; attempt_objects.h says why) and mounted 0400;
// - a ConfigMap <group>-mpi: ssh_config, sshd_config, the scripts of jobengine/scripts.h and
//   whatever the runtime adds (the hostfile);
// - on the pods: the three volumes (the Secret, the ConfigMap, the /muster emptyDir), the mounts,
//   the labels and the gang annotations (gang-name <group>, gang-size numPods), the generated
//   sshd main of a node that only serves SSH, the wait-for-peers init container, and for pods
//   asking for GPUs or RDMA NICs the muster-rdma-conf init container.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jobengine/runtime.h"
#include "proto/objects.h"
#include "proto/pod_template.h"
#include "proto/vocabulary.h"

namespace muster::jobengine {

inline constexpr int kSshPort = 2222;
inline constexpr char kConfigMountPath[] = "/etc/muster/mpi";
inline constexpr char kSecretMountPath[] = "/etc/muster/ssh";
inline constexpr char kRunMountPath[] = "/muster";
inline constexpr char kNcclConfPath[] = "/muster/rdma/nccl.conf";
inline constexpr char kUcxConfPath[] = "/muster/rdma/ucx.conf";
inline constexpr char kRunVolume[] = "muster-run";
// The SSH Secret's files: readable by the file's owner (root) only. The kubelet adds group read
// for the pod's fsGroup (spec.securityContext.fsGroup), which is how a non-root container reads
// them; setup.sh then copies them as that user with 0600, as OpenSSH requires.
inline constexpr int kSshSecretMode = 0400;
// On every pod of an attempt: the name of the attempt's SSH Secret (AttemptInfo::ssh_secret).
inline constexpr auto& kSshSecretAnnotation = proto::vocabulary::kSshSecretAnnotation;
// Seconds the launcher's wait-for-peers init container waits for every worker's SSH before it
// fails the pod (scripts::kWaitWorkers, default 600). Copied from the env of the launcher's main
// container, where the user sets it.
inline constexpr char kWaitWorkersTimeoutEnv[] = "MUSTER_WAIT_WORKERS_TIMEOUT";

// The resources that make a pod get the muster-rdma-conf init container.
const std::vector<std::string_view>& deviceResources();

// The owner reference every object of an attempt carries.
proto::OwnerReference ownerOf(const proto::ParallelJob& job);
// Name, namespace, attempt labels and owner reference of an attempt's object.
proto::ObjectMeta attemptMeta(const proto::ParallelJob& job, const AttemptInfo& attempt,
                              std::string name);
// A pod's metadata: the template's labels and annotations, then the engine's (attempt labels,
// role, index, jobset labels; the job's topology/alignment/timeout annotations; the gang).
proto::ObjectMeta podMeta(const proto::ParallelJob& job, const AttemptInfo& attempt, int32_t index,
                          const proto::PodTemplate& tmpl, std::string_view role);

// Fresh keys (every call): id_ed25519(.pub), authorized_keys, ssh_host_ed25519_key(.pub),
// known_hosts.
absl::StatusOr<std::map<std::string, std::string>> sshSecretFiles(const proto::ParallelJob& job,
                                                                  const AttemptInfo& attempt);
// ssh_config, sshd_config, setup.sh, wait-workers.sh, sshd.sh, plus `extra` (e.g. the hostfile).
std::map<std::string, std::string> sshConfigFiles(std::map<std::string, std::string> extra);
// The Service, the Secret and the ConfigMap of the attempt.
absl::StatusOr<std::vector<ApiObject>> sshSupportObjects(const proto::ParallelJob& job,
                                                         const AttemptInfo& attempt,
                                                         std::map<std::string, std::string> files);

// Hostname, subdomain, scheduler name and restart policy (when the template has none),
// automountServiceAccountToken false (when the template has none), and the three volumes.
void prepareSshPod(proto::PodTemplate& pod, const proto::ParallelJob& job,
                   const AttemptInfo& attempt, std::string_view name,
                   std::string_view scheduler_name);
// The mounts every container taking part needs.
void mountSsh(proto::PodTemplate::Container& c);
// A node's main that only serves SSH: sshd.sh in `from`'s image, with its resources, env and
// security context (and its mounts when `keep_mounts`).
void makeSshdMain(proto::PodTemplate::Container& c, const proto::PodTemplate::Container& from,
                  bool keep_mounts);
// The last init container: waits until every host of the hostfile but the first accepts SSH.
// `wire` gives it the env of `main`'s kind.
proto::PodTemplate::Container addWaitForPeers(proto::PodTemplate& pod,
                                              const proto::PodTemplate::Container& main);
// The first init container of a pod asking for GPUs or RDMA: muster-topology rdma-conf.
void addRdmaConfContainer(proto::PodTemplate& pod, const proto::PodTemplate::Container& main,
                          std::string_view image);

}  // namespace muster::jobengine
