#include "jobengine/mpi_openmpi.h"

#include <string>

#include "jobengine/naming.h"
#include "proto/pod_template.h"

namespace muster::jobengine {
namespace {

using proto::PodTemplate;

// Mounts and env the engine gives a container that takes part in MPI.
void wireContainer(PodTemplate::Container& c, const proto::ParallelJob& job, int32_t index,
                   bool accelerators) {
  mountSsh(c);
  const std::string hostfile = std::string(kConfigMountPath) + "/hostfile";
  const std::string rsh_args = std::string("-F ") + kRunMountPath + "/ssh/config";
  c.addEnv("OMPI_MCA_orte_default_hostfile", hostfile);  // Open MPI 4
  c.addEnv("OMPI_MCA_prte_default_hostfile", hostfile);  // Open MPI 5 (PRRTE)
  c.addEnv("PRTE_MCA_prte_default_hostfile", hostfile);
  c.addEnv("OMPI_MCA_plm_rsh_args", rsh_args);
  c.addEnv("PRTE_MCA_plm_ssh_args", rsh_args);
  // ssh, after copying the programs mpirun names by a relative path to the workers (scripts.h).
  const std::string rsh_agent = std::string(kConfigMountPath) + "/rsh.sh";
  c.addEnv("OMPI_MCA_plm_rsh_agent", rsh_agent);
  c.addEnv("PRTE_MCA_plm_ssh_agent", rsh_agent);
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

size_t digits(int64_t n) { return std::to_string(n).size(); }

}  // namespace

absl::Status OpenMpiRuntime::checkSpec(const proto::ParallelJob& job,
                                       const AttemptInfo& attempt) const {
  if (absl::Status s = checkNumPods(job); !s.ok()) return s;
  if (job.spec.num_proc_per_pod < 1)
    return absl::InvalidArgumentError("spec.numProcPerPod must be at least 1");
  if (job.spec.launcher.empty())
    return absl::InvalidArgumentError("spec.launcher is missing");
  if (std::find(job.spec.launcher_container_names.begin(),
                job.spec.launcher_container_names.end(),
                "main") == job.spec.launcher_container_names.end())
    return absl::InvalidArgumentError(
        "spec.launcher.spec.containers must contain a container named \"main\"");
  // Within kMaxNumPods the hostfile fits with cluster.local; a long clusterDomain can still make
  // it too big, and the ConfigMap would then be refused on every try.
  size_t config = hostfileSize(job, attempt);
  for (const auto& [name, text] : sshConfigFiles({})) config += name.size() + text.size();
  if (config > kMaxConfigMapBytes)
    return absl::InvalidArgumentError(
        "the hostfile of " + std::to_string(job.spec.num_pods) + " pods with cluster domain \"" +
        options_.cluster_domain + "\" would take " + std::to_string(config) +
        " bytes, more than a ConfigMap holds (" + std::to_string(kMaxConfigMapBytes) +
        "); use fewer pods");
  return absl::OkStatus();
}

size_t OpenMpiRuntime::hostfileSize(const proto::ParallelJob& job,
                                    const AttemptInfo& attempt) const {
  // "<group>-<i>.<group>.<ns>.svc[.<domain>] slots=<n>\n" for each pod.
  const size_t fixed = attempt.group.size() + 1 + 1 + attempt.group.size() + 1 +
                       job.meta.namespace_.size() + 4 +
                       (options_.cluster_domain.empty() ? 0 : 1 + options_.cluster_domain.size()) +
                       7 + digits(job.spec.num_proc_per_pod) + 1;
  size_t total = 0;
  for (int32_t i = 0; i < job.spec.num_pods; ++i) total += fixed + digits(i);
  return total;
}

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
  return sshConfigFiles({{"hostfile", hostfile(job, attempt)}});
}

absl::StatusOr<std::map<std::string, std::string>> OpenMpiRuntime::secretFiles(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
  return sshSecretFiles(job, attempt);
}

absl::StatusOr<std::vector<ApiObject>> OpenMpiRuntime::buildSupport(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
  if (absl::Status s = checkSpec(job, attempt); !s.ok()) return s;
  return sshSupportObjects(job, attempt, configFiles(job, attempt));
}

absl::StatusOr<std::string> OpenMpiRuntime::buildPod(const proto::ParallelJob& job,
                                                     const AttemptInfo& attempt,
                                                     int32_t index) const {
  if (absl::Status s = checkSpec(job, attempt); !s.ok()) return s;
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

  proto::ObjectMeta meta = podMeta(job, attempt, index, *pod, launcher ? "launcher" : "worker");
  prepareSshPod(*pod, job, attempt, meta.name, options_.scheduler_name);

  std::optional<PodTemplate::Container> main = pod->container("main");
  if (!launcher && !from_worker_tmpl) {
    // Inherited from the launcher: its main becomes the generated sshd main.
    main = pod->setContainer("main");
    makeSshdMain(*main, *launcher_main, /*keep_mounts=*/true);
  } else if (!launcher && !main) {
    main = pod->setContainer("main");
    makeSshdMain(*main, *launcher_main, /*keep_mounts=*/false);
  }
  const bool accelerators = pod->requestsAny(deviceResources());
  wireContainer(*main, job, index, accelerators);

  if (launcher && !pod->initContainer("muster-wait-workers")) {
    // Last init container: wait for every worker's sshd (and write the NCCL/UCX files).
    PodTemplate::Container wait = addWaitForPeers(*pod, *main);
    wireContainer(wait, job, index, accelerators);
  }
  if (accelerators && !options_.rdma_conf_image.empty()) {
    // First of all init containers, so setup.sh (in the wait container or main) finds its files.
    addRdmaConfContainer(*pod, *main, options_.rdma_conf_image);
  }
  return pod->toPod(meta);
}

}  // namespace muster::jobengine
