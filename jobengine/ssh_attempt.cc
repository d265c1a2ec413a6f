#include "jobengine/ssh_attempt.h"

#include <algorithm>

#include "jobengine/naming.h"
#include "jobengine/scripts.h"
#include "jobengine/ssh_keys.h"
#include "proto/vocabulary.h"

namespace muster::jobengine {

using proto::PodTemplate;
using proto::VolumeSource;

namespace {
constexpr char kSshVolume[] = "muster-ssh";
constexpr char kConfigVolume[] = "muster-mpi";
constexpr char kWaitContainer[] = "muster-wait-workers";
constexpr char kRdmaConfContainer[] = "muster-rdma-conf";
}  // namespace

const std::vector<std::string_view>& deviceResources() {
  static const std::vector<std::string_view> kDevices = {proto::kGpuResource,
                                                         proto::kRdmaResource};
  return kDevices;
}

proto::OwnerReference ownerOf(const proto::ParallelJob& job) {
  proto::OwnerReference ref;
  ref.api_version = "preferred.jp/v1alpha1";
  ref.kind = "ParallelJob";
  ref.name = job.meta.name;
  ref.uid = job.meta.uid;
  ref.controller = true;
  ref.block_owner_deletion = true;
  return ref;
}

proto::ObjectMeta attemptMeta(const proto::ParallelJob& job, const AttemptInfo& attempt,
                              std::string name) {
  proto::ObjectMeta meta;
  meta.name = std::move(name);
  meta.namespace_ = job.meta.namespace_;
  meta.labels = attemptLabels(job, attempt);
  meta.owner_references.push_back(ownerOf(job));
  return meta;
}

proto::ObjectMeta podMeta(const proto::ParallelJob& job, const AttemptInfo& attempt, int32_t index,
                          const PodTemplate& tmpl, std::string_view role) {
  proto::ObjectMeta meta = attemptMeta(job, attempt, podName(attempt.group, index));
  std::map<std::string, std::string> labels = tmpl.labels();
  for (auto& [k, v] : meta.labels) labels[k] = v;
  // The job's queue (muster.dev/queue) is its pods' queue, whatever their template says: the job
  // is what admission checked and what its owner named.
  if (auto it = job.meta.labels.find(proto::vocabulary::kQueueLabel); it != job.meta.labels.end())
    labels[proto::vocabulary::kQueueLabel] = it->second;
  labels[vocab::kRoleLabel] = std::string(role);
  labels[vocab::kIndexLabel] = std::to_string(index);
  labels[vocab::kJobGlobalIndexLabel] = std::to_string(index);
  meta.labels = std::move(labels);
  meta.annotations = tmpl.annotations();
  for (const char* key : {vocab::kTopologyRequiredAnnotation, vocab::kTopologyPreferredAnnotation,
                          vocab::kGpuNicAffinityAnnotation, vocab::kGangTimeoutAnnotation,
                          proto::vocabulary::kExclusiveAnnotation}) {
    if (auto it = job.meta.annotations.find(key); it != job.meta.annotations.end())
      meta.annotations[key] = it->second;
  }
  if (!attempt.ssh_secret.empty()) meta.annotations[kSshSecretAnnotation] = attempt.ssh_secret;
  meta.annotations[vocab::kGangNameAnnotation] = attempt.group;
  meta.annotations[vocab::kGangSizeAnnotation] = std::to_string(job.spec.num_pods);
  return meta;
}

absl::StatusOr<std::map<std::string, std::string>> sshSecretFiles(const proto::ParallelJob& job,
                                                                  const AttemptInfo& attempt) {
  const std::string comment = "muster-" + attempt.group + "@" + job.meta.namespace_;
  auto client = generateEd25519Key(comment);
  if (!client.ok()) return client.status();
  auto host = generateEd25519Key(comment + "-host");
  if (!host.ok()) return host.status();
  return std::map<std::string, std::string>{
      {"id_ed25519", client->private_key},
      {"id_ed25519.pub", client->public_key + "\n"},
      {"authorized_keys", client->public_key + "\n"},
      {"ssh_host_ed25519_key", host->private_key},
      {"ssh_host_ed25519_key.pub", host->public_key + "\n"},
      // Every host of the attempt presents this key, whatever name or port it is reached by.
      {"known_hosts", "* " + host->public_key + "\n"},
  };
}

std::map<std::string, std::string> sshConfigFiles(std::map<std::string, std::string> extra) {
  std::map<std::string, std::string> files = {
      {"ssh_config", scripts::kSshConfig}, {"sshd_config", scripts::kSshdConfig},
      {"setup.sh", scripts::kSetup},       {"wait-workers.sh", scripts::kWaitWorkers},
      {"sshd.sh", scripts::kSshd},         {"rsh.sh", scripts::kRshAgent}};
  for (auto& [k, v] : extra) files[k] = std::move(v);
  return files;
}

absl::StatusOr<std::vector<ApiObject>> sshSupportObjects(const proto::ParallelJob& job,
                                                         const AttemptInfo& attempt,
                                                         std::map<std::string, std::string> files) {
  std::vector<ApiObject> out;
  {  // Headless Service: stable names for every pod, published before the pods are Ready.
    proto::Service service;
    service.meta = attemptMeta(job, attempt, attempt.group);
    service.headless = true;
    service.publish_not_ready_addresses = true;
    service.selector = {{vocab::kJobUidLabel, job.meta.uid}, {vocab::kJobSetNameLabel, attempt.group}};
    service.ports.push_back({"ssh", kSshPort, kSshPort, "TCP"});
    out.push_back({&proto::resources::kServices, attempt.group, proto::encode(service)});
  }
  {
    auto keys = sshSecretFiles(job, attempt);
    if (!keys.ok()) return keys.status();
    proto::Secret secret;
    secret.meta = attemptMeta(job, attempt, "");
    secret.meta.generate_name = secretNamePrefix(attempt.group);  // the server picks the name
    secret.string_data = *std::move(keys);
    out.push_back({&proto::resources::kSecrets, "", proto::encode(secret)});
  }
  {
    proto::ConfigMap config;
    config.meta = attemptMeta(job, attempt, configMapName(attempt.group));
    config.data = std::move(files);
    out.push_back({&proto::resources::kConfigMaps, config.meta.name, proto::encode(config)});
  }
  return out;
}

void prepareSshPod(PodTemplate& pod, const proto::ParallelJob& /*job*/, const AttemptInfo& attempt,
                   std::string_view name, std::string_view scheduler_name) {
  pod.setHostname(name);
  pod.setSubdomain(attempt.group);
  pod.setSchedulerNameIfUnset(scheduler_name);
  pod.setRestartPolicyIfUnset("Never");
  // A job's pods hold no API credentials unless the template asks for them (issue 43): the
  // ServiceAccount token is not mounted when the template does not say (the Slurm runtime never
  // mounts it, whatever the partition's template says).
  pod.setAutomountServiceAccountToken(false, /*only_if_unset=*/true);
  // Owner-only (root; group read for the pod's fsGroup); setup.sh copies the keys to 0600 files
  // of the container's user.
  pod.addVolume(kSshVolume, {VolumeSource::Kind::kSecret, attempt.ssh_secret, kSshSecretMode});
  pod.addVolume(kConfigVolume, {VolumeSource::Kind::kConfigMap, configMapName(attempt.group), 0555});
  pod.addVolume(kRunVolume, {VolumeSource::Kind::kEmptyDir, "", -1});
}

void mountSsh(PodTemplate::Container& c) {
  c.addMount(kSshVolume, kSecretMountPath, true);
  c.addMount(kConfigVolume, kConfigMountPath, true);
  c.addMount(kRunVolume, kRunMountPath, false);
}

void makeSshdMain(PodTemplate::Container& c, const PodTemplate::Container& from, bool keep_mounts) {
  std::vector<std::string_view> fields = {"image",     "imagePullPolicy", "env",       "envFrom",
                                          "resources", "securityContext", "workingDir"};
  if (keep_mounts) fields.push_back("volumeMounts");
  c.copyFields(from, fields);
  c.setCommand({"/bin/sh", "/etc/muster/mpi/sshd.sh"});
  c.addPort("ssh", kSshPort);
  c.setTcpReadinessProbe(kSshPort, 2);
}

PodTemplate::Container addWaitForPeers(PodTemplate& pod, const PodTemplate::Container& main) {
  if (auto existing = pod.initContainer(kWaitContainer)) return *existing;
  PodTemplate::Container wait = pod.appendInitContainer(kWaitContainer);
  wait.copyFields(main, {"image", "imagePullPolicy", "securityContext"});
  wait.setCommand({"/bin/sh", "/etc/muster/mpi/wait-workers.sh"});
  // How long to wait for the workers (wait-workers.sh's default otherwise): set on main, where the
  // user's env lives.
  wait.copyEnv(main, kWaitWorkersTimeoutEnv);
  return wait;
}

// `muster-topology rdma-conf` from Muster's own image writes the NCCL/UCX files for the devices
// the pod got (setup.sh, later, keeps a non-empty file). argv only, no shell: nothing the user
// wrote reaches a command line.
//
// It asks for main's nvidia.com/gpu and preferred.jp/rdma (limits, and requests where main has
// them), as given: the kubelet's device manager lets app containers reuse the devices allocated to
// init containers, so rdma-conf sees the very GPUs and NICs main gets. main's cpu and memory are
// copied too, because an init container without cpu and memory limits would make a Guaranteed pod
// Burstable (the kubelet's CPU and memory managers reuse an init container's allocation as well).
// The pod's effective request does not change: it is the larger of the largest init container's
// and the sum of the app containers', and this one asks for no more than main alone. Being first,
// no sidecar (restartable init container) runs beside it to add to that.
void addRdmaConfContainer(PodTemplate& pod, const PodTemplate::Container& main,
                          std::string_view image) {
  if (pod.initContainer(kRdmaConfContainer)) return;  // the user's own one wins
  PodTemplate::Container c = pod.prependInitContainer(kRdmaConfContainer);
  c.setImage(image);
  c.setImagePullPolicy("IfNotPresent");
  c.setCommand({"muster-topology", "rdma-conf", "--nccl-out", kNcclConfPath, "--ucx-out",
                kUcxConfPath});
  c.addMount(kRunVolume, kRunMountPath, false);
  c.addEnv("RDMA_NCCL_CONF", kNcclConfPath);
  c.addEnv("RDMA_UCX_CONF", kUcxConfPath);
  // The user's choice of NICs, when main's env makes one (an entry copied as written).
  c.copyEnv(main, "MUSTER_RDMA_DEVICES");
  std::vector<std::string_view> copied = deviceResources();
  copied.push_back("cpu");
  copied.push_back("memory");
  c.copyResources(main, copied);
  c.setRestrictedSecurityContext();
}

}  // namespace muster::jobengine
