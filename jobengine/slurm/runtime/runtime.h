#pragma once

// The `slurm` runtime: a Slurm batch job (what `sbatch` submitted: spec.slurm) as one gang of
// pods, one pod per Slurm node, built on the same SSH attempt machinery as mpi-openmpi
// (jobengine/ssh_attempt.h: headless Service, SSH keys, scripts, gang annotations, restarts).
//
// The pods start from the partition's pod template (jobengine/slurm/runtime/cluster_config.h:
// image, volumes incl. the shared one, security context, service account, node selector, priority
// class); from the job come the main container's resources and the node constraints (-w, -x, -C)
// in spec.launcher. Node names are the pods' host names (<group>-<index>); a DNS search entry
// for the headless Service makes them resolve, so `ssh <node>` and `srun -w <node>` work.
//
//   node 0   the batch pod: `muster-slurm batch-step` runs the batch script (mounted from the
//            job's Secret) with the job's environment, output to -o/-e on the shared volume;
//            its last init container waits until every other node accepts SSH.
//   node 1.. sshd, where srun starts tasks over the job's SSH.
// Every pod's container environment holds the job's SLURM_* variables for its node
// (jobengine/slurm/core/env.h batchEnvironment) and MUSTER_SLURM_RSH / _BIN / _STATE_DIR for srun.
// With slurm.toolsImage set (Muster's image), a first init container copies the static builds of
// muster-slurm-steps and muster-slurm into /muster/bin, so any Linux image can be a partition's;
// without it the image must have /usr/local/bin/muster-slurm.
//
// Slurm's job states (status.slurm):
//   batch script exit 0               COMPLETED, the other nodes are deleted
//   batch script exit != 0            FAILED with ExitCode code:signal (no requeue, as Slurm)
//   past --time                       TIMEOUT: the pods are stopped (the engine; the pods'
//                                     activeDeadlineSeconds is the kubelet's backstop)
//   a node (pod) lost, deleted,       NODE_FAIL: with --requeue (the default, Slurm's
//   failed or its K8s node gone       JobRequeue=1) the whole job runs again, SLURM_RESTART_COUNT
//                                     + 1, up to failurePolicy.maxRestarts; --no-requeue ends it
//   held (-H) / before --begin /      PENDING (JobHeldUser / BeginTime / Dependency): no pod is
//   waiting on -d                     created
//   preempted by Muster's scheduler   as Slurm's PreemptMode=REQUEUE: PENDING, reason BeginTime
//   (job condition Preempted)         while the preempted run's pods go, then Requeued until it
//                                     runs again; Restarts and SLURM_RESTART_COUNT count it
//                                     (status.preemptions), maxRestarts does not. --no-requeue:
//                                     PREEMPTED (ended; every pod deleted)
//   a -d that can never be met        CANCELLED, reason DependencyNeverSatisfied (with
//                                     --kill-on-invalid-dep=no it stays PENDING for that reason)
// A job that ends keeps only its batch pod (for kubectl logs); idle nodes are released.

#include "jobengine/runtime.h"
#include "jobengine/slurm/runtime/cluster_config.h"

namespace muster::jobengine::slurm {

inline constexpr char kBatchMountPath[] = "/etc/muster/slurm/batch";
inline constexpr char kToolsDir[] = "/muster/bin";
inline constexpr char kStateDir[] = "/muster/slurm";
// Where the batch pod sees scancel --signal (vocabulary kSlurmSignalAnnotation, through a
// downward API volume): batch_step.h reads $MUSTER_SLURM_SIGNAL_FILE.
inline constexpr char kSignalMountPath[] = "/etc/muster/slurm/signal";
inline constexpr char kSignalFile[] = "/etc/muster/slurm/signal/signal";
// Where muster-slurm is in a job pod: copied there by the tools init container, or (without a
// toolsImage) the partition's image must have it at this path.
inline constexpr char kImageToolPath[] = "/usr/local/bin/muster-slurm";
// The statically linked step tools in Muster's image (no API code: ../cmd/steps_main.cc), which the
// tools init container runs: it copies itself into kToolsDir as muster-slurm-steps (what the pod
// runs: batch-step, srun, step-tasks, scontrol) and muster-slurm-static as muster-slurm (sbatch,
// squeue, ... for a script that has its own credentials).
inline constexpr char kStaticToolPath[] = "/usr/local/bin/muster-slurm-steps-static";

class SlurmRuntime final : public Runtime {
 public:
  explicit SlurmRuntime(RuntimeOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "slurm"; }
  absl::StatusOr<std::vector<ApiObject>> buildSupport(const proto::ParallelJob& job,
                                                      const AttemptInfo& attempt) const override;
  absl::StatusOr<std::string> buildPod(const proto::ParallelJob& job, const AttemptInfo& attempt,
                                       int32_t index) const override;

  FailureVerdict onFailure(const proto::ParallelJob& job, int32_t index, FailureKind kind,
                           const proto::Pod* pod) const override;
  StartGate startGate(const proto::ParallelJob& job, absl::Time now,
                      const JobDirectory* jobs) const override;
  std::vector<std::string> waitsOn(const proto::ParallelJob& job) const override;
  std::vector<std::string> knownAs(const proto::ParallelJob& job) const override;
  // The time limit the engine holds the job to: spec.slurm.timeLimitSeconds (0 or absent: none),
  // never past its partition's MaxTime, whoever raised it (scontrol lets only operators raise a
  // limit, but anyone who may patch the job can write the field). As Slurm: sbatch refuses a
  // limit over MaxTime (EnforcePartLimits), a pending job over it waits (PartitionTimeLimit,
  // partitionLimitGate), and a running job is stopped at MaxTime (TIMEOUT).
  std::optional<absl::Duration> timeLimit(const proto::ParallelJob& job) const override;
  std::optional<int64_t> timeLimitSeconds(const proto::ParallelJob& job) const;
  std::optional<std::string> cancelled(const proto::ParallelJob& job) const override;
  // The batch Secret (spec.slurm.batchSecret) holds a user's script and exported environment,
  // and any Secret of the namespace could be named there: it is mounted only when it is this
  // job's (issue 43), i.e. its annotation muster.dev/slurm-user is spec.slurm.user (an admission
  // policy lets only that user write it) and it has an owner reference with the job's uid.
  std::string jobSecret(const proto::ParallelJob& job) const override;
  absl::Status checkJobSecret(const proto::ParallelJob& job,
                              const proto::ObjectMeta& secret) const override;
  std::optional<std::string> requeueRequested(const proto::ParallelJob& job) const override;
  // PreemptMode=REQUEUE: requeued unless --no-requeue, which ends the job PREEMPTED.
  bool requeueOnPreemption(const proto::ParallelJob& job) const override;
  std::optional<absl::Time> expiresAt(const proto::ParallelJob& job) const override;
  bool keepOnFailure(int32_t index) const override { return index == 0; }
  // A pending job over its partition's MaxTime or MaxNodes (lowered after it was submitted):
  // reason PartitionTimeLimit / PartitionNodeLimit, as in Slurm; nullopt when within them.
  std::optional<StartGate> partitionLimitGate(const proto::ParallelJob& job) const;
  // The batch pod carries the latest scancel --signal ("<seq>:<number>:<target>").
  std::map<std::string, std::string> podAnnotations(const proto::ParallelJob& job,
                                                    int32_t index) const override;
  void decorateStatus(const proto::ParallelJob& job, const proto::Pod* launcher, absl::Time now,
                      const JobDirectory* jobs, proto::ParallelJobStatus* status) const override;

  // The node names of an attempt, in order.
  static std::vector<std::string> nodeNames(const proto::ParallelJob& job,
                                            const AttemptInfo& attempt);
  // The container environment of node `index` (SLURM_* and MUSTER_SLURM_*).
  std::map<std::string, std::string> nodeEnvironment(const proto::ParallelJob& job,
                                                     const AttemptInfo& attempt,
                                                     int32_t index) const;
  // Where muster-slurm is in the job's pods.
  std::string toolPath() const;

 private:
  absl::Status check(const proto::ParallelJob& job, const Partition** partition) const;
  RuntimeOptions options_;
};

}  // namespace muster::jobengine::slurm
