#pragma once

// Muster's API vocabulary: every annotation, label, condition, reason and resource name that
// Muster reads or writes on Kubernetes objects, spelled once. The scheduler, the job engine, the
// Slurm front end and the topology agent talk to each other only through these names on API
// objects (DESIGN.md §3), so a name is never defined in two modules.
//
// Users write many of these by hand (the gang annotations, the topology annotations); they are
// part of the contract documented in the reference pages (scheduler/README.md "Declaring a gang",
// "Topology levels", "GPU↔NIC alignment inside nodes"; jobengine/README.md) and must not change.

// Plain character arrays, so that each converts to std::string and std::string_view alike.

namespace muster::proto::vocabulary {

// --- extended resources (DESIGN.md §1: what the seed's pods request) --------------------------

inline constexpr char kGpuResource[] = "nvidia.com/gpu";
inline constexpr char kAmdGpuResource[] = "amd.com/gpu";  // AMD's device plugin (ROCm)
inline constexpr char kRdmaResource[] = "preferred.jp/rdma";

// --- gangs (DESIGN.md §4) ---------------------------------------------------------------------

// Pod label naming a scheduling.x-k8s.io/v1alpha1 PodGroup in the pod's namespace (coscheduling,
// kubeflow's mpi-operator).
inline constexpr char kPodGroupLabel[] = "scheduling.x-k8s.io/pod-group";
// The condition a scheduler sets on a scheduling.k8s.io/v1alpha2 PodGroup (Kubernetes 1.36):
// True (reason Scheduled) or False (reason Unschedulable).
inline constexpr char kPodGroupScheduledCondition[] = "PodGroupScheduled";
// PFN's gang annotations: name, size (a positive integer) and schedule timeout in seconds.
inline constexpr char kGangNameAnnotation[] = "gang-scheduling.preferred.jp/gang-name";
inline constexpr char kGangSizeAnnotation[] = "gang-scheduling.preferred.jp/gang-size";
inline constexpr char kGangTimeoutAnnotation[] =
    "gang-scheduling.preferred.jp/gang-schedule-timeout-seconds";

// --- topology (on pods, PodGroups and ParallelJobs) -----------------------------------------------

// A topology level's node label key the whole gang must fit inside / should fit inside.
inline constexpr char kTopologyRequiredAnnotation[] = "muster.dev/topology-required";
inline constexpr char kTopologyPreferredAnnotation[] = "muster.dev/topology-preferred";
// "required" | "preferred": whether a pod's GPUs and RDMA NICs must share a PCIe switch or NUMA
// node (a filter) or should (a score).
inline constexpr char kGpuNicAffinityAnnotation[] = "muster.dev/gpu-nic-affinity";
inline constexpr char kGpuNicAffinityRequired[] = "required";
inline constexpr char kGpuNicAffinityPreferred[] = "preferred";
// A fraction of one GPU (nvidia.com/gpu) for a pod that requests no whole GPU: a quantity
// greater than 0 and less than 1 ("0.5", "250m"). The scheduler packs such pods onto individual
// GPUs, never past one whole GPU, and writes the index of the GPU it chose into
// kGpuIndexAnnotation before the Binding, so that the container can read it at start through
// the downward API (NVIDIA_VISIBLE_DEVICES). Isolation (MPS, time-slicing) is the node's job.
inline constexpr char kGpuFractionAnnotation[] = "muster.dev/gpu-fraction";
inline constexpr char kGpuIndexAnnotation[] = "muster.dev/gpu-index";
// The implicit bottom topology level.
inline constexpr char kHostnameLabel[] = "kubernetes.io/hostname";

// In-tree volume plugins and the CSI drivers they migrate to (csi-translation-lib): the volume
// source's field, its provisioner name, the driver.
struct InTreeVolume {
  const char* field;
  const char* provisioner;
  const char* csi_driver;
};
inline constexpr InTreeVolume kInTreeVolumes[] = {
    {"awsElasticBlockStore", "kubernetes.io/aws-ebs", "ebs.csi.aws.com"},
    {"gcePersistentDisk", "kubernetes.io/gce-pd", "pd.csi.storage.gke.io"},
    {"azureDisk", "kubernetes.io/azure-disk", "disk.csi.azure.com"},
    {"cinder", "kubernetes.io/cinder", "cinder.csi.openstack.org"},
};

// The prefix of every label and annotation Muster owns; sinfo lists a node's muster.dev/ label
// values as its features.
inline constexpr char kMusterPrefix[] = "muster.dev/";

// The topology levels of the local cluster's simulated nodes, of the examples and of musterctl's
// default columns (a real cluster names its own in the scheduler's topologyLevels).
inline constexpr char kLabelBlock[] = "muster.dev/block";
inline constexpr char kLabelSpine[] = "muster.dev/spine";
inline constexpr char kLabelRack[] = "muster.dev/rack";

// Node labels the topology agent publishes.
inline constexpr char kLabelGpuCount[] = "muster.dev/gpu.count";
inline constexpr char kLabelGpuModel[] = "muster.dev/gpu.model";
// NVIDIA GPU feature discovery's label for the same (the product name).
inline constexpr char kLabelGpuProduct[] = "nvidia.com/gpu.product";
inline constexpr char kLabelRdmaCount[] = "muster.dev/rdma.count";
inline constexpr char kLabelRdmaLinkLayer[] = "muster.dev/rdma.link-layer";

// The queue (queues.muster.dev) a pod belongs to, on the pod or on its namespace (tenancy).
inline constexpr char kQueueLabel[] = "muster.dev/queue";

// "true" on a pod (from sbatch --exclusive, on a ParallelJob): the pod gets a node to itself -
// only a node without other pods (DaemonSet pods aside), and no other pod joins it there.
inline constexpr char kExclusiveAnnotation[] = "muster.dev/exclusive";

// --- pod conditions and reasons -------------------------------------------------------------------

// Kubernetes' own: the scheduler sets PodScheduled=False with reason Unschedulable.
inline constexpr char kPodScheduledCondition[] = "PodScheduled";
inline constexpr char kUnschedulableReason[] = "Unschedulable";
// In Muster's Unschedulable message when nodes that would do are held for a gang ahead of this
// one (the scheduler's reservation); squeue reads it as reason Priority.
inline constexpr char kReservedForAnotherGangReason[] = "node(s) were reserved for another gang";
// In Muster's Unschedulable message when the gang's queue (or one above it) would go over
// its limit; the message goes on `queue "Q" holds N <resource> of its limit of L, ...`. squeue
// reads it as AssocGrpGRES (AssocGrpCpuLimit, AssocGrpMemLimit for cpu and memory).
inline constexpr char kWaitingForQuotaMessage[] = "waiting for quota: ";
// In Muster's Unschedulable message when the gang names a queue that does not exist; squeue reads
// it as InvalidAccount.
inline constexpr char kNoSuchQueueMessage[] = "does not exist (queues.muster.dev)";
// PodScheduled=False while spec.schedulingGates is not empty (kube-scheduler's reason and words).
inline constexpr char kSchedulingGatedReason[] = "SchedulingGated";
inline constexpr char kSchedulingGatedMessage[] =
    "Scheduling is blocked due to non-empty scheduling gates";
// Set True by muster-scheduler (through pods/status) on a bound gang member before it evicts it
// because the rest of its gang cannot join it. The job engine recreates such a pod in the same
// attempt instead of counting a failure. No condition, no eviction.
inline constexpr char kGangRollbackCondition[] = "muster.dev/GangRollback";
inline constexpr char kGangRollbackReason[] = "GangRollback";
// Set True by muster-scheduler (through pods/status) on every member of a gang it preempts,
// before it evicts them: reason Preempted, message "Preempted by <namespace>/<gang>" naming the
// preemptor (the same words as the victim's Event). The whole gang is marked and evicted, never
// part of it. The job engine requeues a job whose pods carry it without counting a restart.
inline constexpr char kPreemptedCondition[] = "muster.dev/Preempted";

// Volume binding (as kube-scheduler's VolumeBinding): the node a WaitForFirstConsumer claim's
// volume must be provisioned for, and the provisioner that never provisions (static volumes only).
inline constexpr char kSelectedNodeAnnotation[] = "volume.kubernetes.io/selected-node";
inline constexpr char kNoProvisioner[] = "kubernetes.io/no-provisioner";
inline constexpr char kPreemptedReason[] = "Preempted";

// --- what the job engine creates (ParallelJob attempts) ---------------------------------------------

inline constexpr char kJobUidLabel[] = "muster.dev/paralleljob-uid";
inline constexpr char kJobNameLabel[] = "muster.dev/paralleljob";  // when a valid value
inline constexpr char kAttemptLabel[] = "muster.dev/attempt";
inline constexpr char kRoleLabel[] = "muster.dev/role";  // "launcher" or "worker"
inline constexpr char kIndexLabel[] = "muster.dev/index";
// JobSet's labels, which the seed's troubleshooting commands select on.
inline constexpr char kJobSetNameLabel[] = "jobset.sigs.k8s.io/jobset-name";
inline constexpr char kJobGlobalIndexLabel[] = "jobset.sigs.k8s.io/job-global-index";

// On a Slurm job's ParallelJob and pods: its Slurm job id.
inline constexpr char kSlurmJobIdLabel[] = "muster.dev/slurm-job-id";
// On every task of a Slurm job array (sbatch --array): the array's job id.
inline constexpr char kSlurmArrayJobIdLabel[] = "muster.dev/slurm-array-job-id";
// On a Slurm job's batch Secret (slurm-<id>-batch), written by sbatch: the submitting user.
// An admission policy lets only that user write it; the job engine runs the Secret only for a
// job of that spec.slurm.user which owns it (jobengine/slurm/runtime/runtime.h).
inline constexpr char kSlurmUserAnnotation[] = "muster.dev/slurm-user";
// On a Slurm job's batch pod, written by the job engine: the latest scancel --signal,
// "<seq>:<signal number>:<steps|batch|full>" (spec.slurm.signal). The pod reads it through a
// downward API volume; its batch step delivers each seq once.
inline constexpr char kSlurmSignalAnnotation[] = "muster.dev/slurm-signal";

// On every pod of a ParallelJob attempt: the name of the attempt's SSH Secret.
inline constexpr char kSshSecretAnnotation[] = "muster.dev/ssh-secret";

// On a node, written by scontrol's drain: the reason, who drained it and when (sinfo -R's
// REASON, USER, TIMESTAMP). Removed by State=RESUME.
inline constexpr char kSlurmDrainReasonAnnotation[] = "muster.dev/slurm-drain-reason";
inline constexpr char kSlurmDrainUserAnnotation[] = "muster.dev/slurm-drain-user";
inline constexpr char kSlurmDrainTimeAnnotation[] = "muster.dev/slurm-drain-time";

// ParallelJob status condition types.
inline constexpr char kConditionPodsCreated[] = "PodsCreated";
inline constexpr char kConditionRunning[] = "Running";
inline constexpr char kConditionSucceeded[] = "Succeeded";
inline constexpr char kConditionFailed[] = "Failed";

// --- defaults ---------------------------------------------------------------------------------------

inline constexpr char kDefaultSchedulerName[] = "muster-scheduler";

}  // namespace muster::proto::vocabulary

namespace muster::proto {
namespace vocab = vocabulary;
}  // namespace muster::proto
