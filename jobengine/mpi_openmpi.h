#pragma once

// The `mpi-openmpi` runtime: one launcher (index 0, rank 0, the user's `main`) and numPods-1
// workers running sshd, which the launcher's mpirun reaches over SSH.
//
// An attempt is:
// - a headless Service <group> (publishNotReadyAddresses, so every pod's name resolves as soon as
//   the pod has an IP) that gives pod i the name <group>-i.<group>.<ns>.svc.<cluster domain>;
// - a Secret <group>-ssh-<xxxxx> (named by the API server) with a fresh Ed25519 client key, a host
//   key shared by the attempt's sshd, authorized_keys and known_hosts (so host keys are verified,
//   not ignored);
// - a ConfigMap <group>-mpi: the hostfile (launcher first, `<fqdn> slots=<numProcPerPod>`),
//   ssh_config, sshd_config and the scripts below;
// - numPods pods (one gang: gang-name <group>, gang-size numPods), at most kMaxNumPods; the job is
//   refused (InvalidSpec) when its hostfile would not fit into the ConfigMap.
//
// Scripts (in the ConfigMap, mounted at /etc/muster/mpi; paths overridable by env for tests):
// - setup.sh copies the keys into /muster/ssh (an emptyDir) with the modes OpenSSH requires, as
//   the container's own user, and writes the NCCL/UCX config files when the pod asked for them.
// - wait-workers.sh, the launcher's last init container: runs setup.sh, then waits until every
//   worker accepts SSH, at most MUSTER_WAIT_WORKERS_TIMEOUT seconds (default 600; copied from
//   main's env), then fails naming the workers that never answered. The user's `main` starts after
//   it, unchanged apart from mounts and env.
// - sshd.sh, the generated worker `main`: runs setup.sh, then sshd in the foreground on port 2222
//   (non-privileged, so it works for non-root users; root gets /run/sshd created).
//
// A pod asking for nvidia.com/gpu or preferred.jp/rdma gets, as its first init container,
// muster-rdma-conf: `muster-topology rdma-conf` from RuntimeOptions::rdma_conf_image (none when
// that is empty). It asks for main's GPU and RDMA (and cpu/memory) amounts, so the kubelet gives
// it main's devices, and writes the NCCL/UCX files into /muster/rdma; setup.sh keeps them.

#include "jobengine/runtime.h"
#include "jobengine/ssh_attempt.h"

namespace muster::jobengine {

class OpenMpiRuntime final : public Runtime {
 public:
  explicit OpenMpiRuntime(RuntimeOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "mpi-openmpi"; }
  absl::StatusOr<std::vector<ApiObject>> buildSupport(const proto::ParallelJob& job,
                                                      const AttemptInfo& attempt) const override;
  absl::StatusOr<std::string> buildPod(const proto::ParallelJob& job, const AttemptInfo& attempt,
                                       int32_t index) const override;

  // The hostfile: one line per pod, the launcher first.
  std::string hostfile(const proto::ParallelJob& job, const AttemptInfo& attempt) const;
  // hostfile(job, attempt).size(), computed without building it.
  size_t hostfileSize(const proto::ParallelJob& job, const AttemptInfo& attempt) const;
  // ConfigMap data: hostfile, ssh_config, sshd_config, setup.sh, wait-workers.sh, sshd.sh.
  std::map<std::string, std::string> configFiles(const proto::ParallelJob& job,
                                                 const AttemptInfo& attempt) const;
  // Secret data (fresh keys every call).
  absl::StatusOr<std::map<std::string, std::string>> secretFiles(const proto::ParallelJob& job,
                                                                 const AttemptInfo& attempt) const;

 private:
  absl::Status checkSpec(const proto::ParallelJob& job, const AttemptInfo& attempt) const;

  RuntimeOptions options_;
};

}  // namespace muster::jobengine
