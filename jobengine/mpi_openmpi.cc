#include "jobengine/mpi_openmpi.h"

#include <string>

#include "jobengine/naming.h"
#include "jobengine/scripts.h"
#include "jobengine/ssh_keys.h"
#include "proto/pod_template.h"

namespace muster::jobengine {
namespace {

using proto::PodTemplate;
using proto::VolumeSource;

constexpr char kSshVolume[] = "muster-ssh";
constexpr char kConfigVolume[] = "muster-mpi";
constexpr char kRunVolume[] = "muster-run";
constexpr char kWaitContainer[] = "muster-wait-workers";
constexpr char kRdmaConfContainer[] = "muster-rdma-conf";
const std::vector<std::string_view> kDeviceResources = {proto::kGpuResource, proto::kRdmaResource};

// Mounts and env the engine gives a container that takes part in MPI.
void wireContainer(PodTemplate::Container& c, const proto::ParallelJob& job, int32_t index,
                   bool accelerators) {
  c.addMount(kSshVolume, kSecretMountPath, true);
  c.addMount(kConfigVolume, kConfigMountPath, true);
  c.addMount(kRunVolume, kRunMountPath, false);
  const std::string hostfile = std::string(kConfigMountPath) + "/hostfile";
  const std::string rsh_args = std::string("-F ") + kRunMountPath + "/ssh/config";
  c.addEnv("OMPI_MCA_orte_default_hostfile", hostfile);  // Open MPI 4
  c.addEnv("OMPI_MCA_prte_default_hostfile", hostfile);  // Open MPI 5 (PRRTE)
  c.addEnv("PRTE_MCA_prte_default_hostfile", hostfile);
  c.addEnv("OMPI_MCA_plm_rsh_args", rsh_args);
  c.addEnv("PRTE_MCA_plm_ssh_args", rsh_args);
  // Keep the hostfile's names as written: the short name alone does not resolve in a pod.
  c.addEnv("OMPI_MCA_orte_keep_fqdn_hostnames", "true");
  c.addEnv("PRTE_MCA_prte_keep_fqdn_hostnames", "true");
  c.addEnv("MUSTER_HOSTFILE", hostfile);
  c.addEnv("MUSTER_NUM_PODS", std::to_string(job.spec.num_pods));
  c.addEnv("MUSTER_NUM_PROC_PER_POD", std::to_string(job.spec.num_proc_per_pod));
  c.addEnv("MUSTER_POD_INDEX", std::to_string(index));
  if (accelerators) {
    c.addEnv("RDMA_NCCL_CONF", kNcclConfPath);
    c.addEnv("RDMA_UCX_CONF", kUcxConfPath);
  }
}

// The first init container of a pod asking for GPUs or RDMA: `muster-topology rdma-conf` from
// Muster's own image writes the NCCL/UCX files for the devices the pod got (setup.sh, later, keeps
// a non-empty file). argv only, no shell: nothing the user wrote reaches a command line.
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
  std::vector<std::string_view> copied = kDeviceResources;
  copied.push_back("cpu");
  copied.push_back("memory");
  c.copyResources(main, copied);
  c.setRestrictedSecurityContext();
}

// The worker's `main`: sshd in the launcher's image, with its resources, env and security context.
void generateWorkerMain(PodTemplate::Container& c, const PodTemplate::Container& launcher_main,
                        bool keep_mounts) {
  std::vector<std::string_view> fields = {"image",     "imagePullPolicy", "env",       "envFrom",
                                          "resources", "securityContext", "workingDir"};
  if (keep_mounts) fields.push_back("volumeMounts");
  c.copyFields(launcher_main, fields);
  c.setCommand({"/bin/sh", "/etc/muster/mpi/sshd.sh"});
  c.addPort("ssh", kSshPort);
  c.setTcpReadinessProbe(kSshPort, 2);
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

absl::Status checkSpec(const proto::ParallelJob& job) {
  if (job.spec.num_pods < 1)
    return absl::InvalidArgumentError("spec.numPods must be at least 1");
  if (job.spec.num_proc_per_pod < 1)
    return absl::InvalidArgumentError("spec.numProcPerPod must be at least 1");
  if (job.spec.launcher.empty())
    return absl::InvalidArgumentError("spec.launcher is missing");
  if (std::find(job.spec.launcher_container_names.begin(),
                job.spec.launcher_container_names.end(),
                "main") == job.spec.launcher_container_names.end())
    return absl::InvalidArgumentError(
        "spec.launcher.spec.containers must contain a container named \"main\"");
  return absl::OkStatus();
}

}  // namespace

std::string OpenMpiRuntime::hostfile(const proto::ParallelJob& job,
                                     const AttemptInfo& attempt) const {
  std::string out;
  for (int32_t i = 0; i < job.spec.num_pods; ++i) {
    out += podFqdn(podName(attempt.group, i), attempt.group, job.meta.namespace_,
                   options_.cluster_domain);
    out += " slots=" + std::to_string(job.spec.num_proc_per_pod) + "\n";
  }
  return out;
}

std::map<std::string, std::string> OpenMpiRuntime::configFiles(const proto::ParallelJob& job,
                                                               const AttemptInfo& attempt) const {
  return {{"hostfile", hostfile(job, attempt)},  {"ssh_config", scripts::kSshConfig},
          {"sshd_config", scripts::kSshdConfig}, {"setup.sh", scripts::kSetup},
          {"wait-workers.sh", scripts::kWaitWorkers}, {"sshd.sh", scripts::kSshd}};
}

absl::StatusOr<std::map<std::string, std::string>> OpenMpiRuntime::secretFiles(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
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

absl::StatusOr<std::vector<ApiObject>> OpenMpiRuntime::buildSupport(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
  if (absl::Status s = checkSpec(job); !s.ok()) return s;
  std::vector<ApiObject> out;
  {  // Headless Service: stable names for every pod, published before the pods are Ready.
    proto::Service service;
    service.meta = attemptMeta(job, attempt, attempt.group);
    service.headless = true;
    service.publish_not_ready_addresses = true;
    service.selector = {{kJobUidLabel, job.meta.uid}, {kJobSetNameLabel, attempt.group}};
    service.ports.push_back({"ssh", kSshPort, kSshPort, "TCP"});
    out.push_back({&proto::resources::kServices, attempt.group, proto::encode(service)});
  }
  {
    auto files = secretFiles(job, attempt);
    if (!files.ok()) return files.status();
    proto::Secret secret;
    secret.meta = attemptMeta(job, attempt, secretName(attempt.group, job.meta.uid));
    secret.string_data = *std::move(files);
    out.push_back({&proto::resources::kSecrets, secret.meta.name, proto::encode(secret)});
  }
  {
    proto::ConfigMap config;
    config.meta = attemptMeta(job, attempt, configMapName(attempt.group));
    config.data = configFiles(job, attempt);
    out.push_back({&proto::resources::kConfigMaps, config.meta.name, proto::encode(config)});
  }
  return out;
}

absl::StatusOr<std::string> OpenMpiRuntime::buildPod(const proto::ParallelJob& job,
                                                     const AttemptInfo& attempt,
                                                     int32_t index) const {
  if (absl::Status s = checkSpec(job); !s.ok()) return s;
  if (index < 0 || index >= job.spec.num_pods)
    return absl::InvalidArgumentError("pod index out of range");
  const bool launcher = index == 0;
  auto launcher_tmpl = PodTemplate::parse(job.spec.launcher, "spec.launcher");
  if (!launcher_tmpl.ok()) return launcher_tmpl.status();
  std::optional<PodTemplate::Container> launcher_main = launcher_tmpl->container("main");
  if (!launcher_main)
    return absl::InvalidArgumentError(
        "spec.launcher.spec.containers must contain a container named \"main\"");
  const bool from_worker_tmpl = !launcher && job.spec.worker.has_value();
  absl::StatusOr<PodTemplate> pod = *launcher_tmpl;
  if (from_worker_tmpl) pod = PodTemplate::parse(*job.spec.worker, "spec.worker");
  if (!pod.ok()) return pod.status();

  // metadata: the template's labels and annotations, then the engine's.
  const std::string name = podName(attempt.group, index);
  proto::ObjectMeta meta = attemptMeta(job, attempt, name);
  std::map<std::string, std::string> labels = pod->labels();
  for (auto& [k, v] : meta.labels) labels[k] = v;
  labels[kRoleLabel] = launcher ? "launcher" : "worker";
  labels[kIndexLabel] = std::to_string(index);
  labels[kJobGlobalIndexLabel] = std::to_string(index);
  meta.labels = std::move(labels);
  meta.annotations = pod->annotations();
  for (const char* key : {kTopologyRequiredAnnotation, kTopologyPreferredAnnotation,
                          kGpuNicAffinityAnnotation, kGangTimeoutAnnotation}) {
    if (auto it = job.meta.annotations.find(key); it != job.meta.annotations.end())
      meta.annotations[key] = it->second;
  }
  meta.annotations[kGangNameAnnotation] = attempt.group;
  meta.annotations[kGangSizeAnnotation] = std::to_string(job.spec.num_pods);

  pod->setHostname(name);
  pod->setSubdomain(attempt.group);
  pod->setSchedulerNameIfUnset(options_.scheduler_name);
  pod->setRestartPolicyIfUnset("Never");
  // The keys are copied to 0600 files by setup.sh.
  pod->addVolume(kSshVolume, {VolumeSource::Kind::kSecret,
                              secretName(attempt.group, job.meta.uid), 0444});
  pod->addVolume(kConfigVolume, {VolumeSource::Kind::kConfigMap, configMapName(attempt.group), 0555});
  pod->addVolume(kRunVolume, {VolumeSource::Kind::kEmptyDir, "", -1});

  std::optional<PodTemplate::Container> main = pod->container("main");
  if (!launcher && !from_worker_tmpl) {
    // Inherited from the launcher: its main becomes the generated sshd main.
    main = pod->setContainer("main");
    generateWorkerMain(*main, *launcher_main, /*keep_mounts=*/true);
  } else if (!launcher && !main) {
    main = pod->setContainer("main");
    generateWorkerMain(*main, *launcher_main, /*keep_mounts=*/false);
  }
  const bool accelerators = pod->requestsAny(kDeviceResources);
  wireContainer(*main, job, index, accelerators);

  if (launcher && !pod->initContainer(kWaitContainer)) {
    // Last init container: wait for every worker's sshd (and write the NCCL/UCX files).
    PodTemplate::Container wait = pod->appendInitContainer(kWaitContainer);
    wait.copyFields(*main, {"image", "imagePullPolicy", "securityContext"});
    wait.setCommand({"/bin/sh", "/etc/muster/mpi/wait-workers.sh"});
    wireContainer(wait, job, index, accelerators);
  }
  if (accelerators && !options_.rdma_conf_image.empty()) {
    // First of all init containers, so setup.sh (in the wait container or main) finds its files.
    addRdmaConfContainer(*pod, *main, options_.rdma_conf_image);
  }
  return pod->toPod(meta);
}

}  // namespace muster::jobengine
