#pragma once

// Plain value types for the Kubernetes objects Muster uses, holding only the fields it uses.
// proto/codec.h decodes and encodes them; nothing outside proto/ sees JSON field names.
// Timestamps stay the strings the API server sent (RFC 3339; MicroTime for Lease and eventTime).
// Every object type has `meta` (ObjectMeta), which the informer keys on.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/quantity.h"
#include "proto/selector.h"
#include "proto/vocabulary.h"

namespace muster::proto {

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  bool block_owner_deletion = false;
};

struct ObjectMeta {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  std::string generate_name;
  int64_t generation = 0;
  std::string creation_timestamp;
  std::optional<std::string> deletion_timestamp;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;

  // The owner reference with controller: true, or nullptr.
  const OwnerReference* controllerRef() const;
};

// The extended resources Muster's pods ask for (DESIGN.md §3): GPUs and RDMA NICs.
using vocabulary::kGpuResource;
using vocabulary::kRdmaResource;

// Resource name ("cpu", "memory", "nvidia.com/gpu") → amount.
using ResourceList = std::map<std::string, Quantity>;

struct ResourceRequirements {
  ResourceList requests;
  ResourceList limits;
};

struct ContainerPort {
  int32_t container_port = 0;
  int32_t host_port = 0;
  std::string host_ip;
  std::string protocol = "TCP";
};

struct Container {
  std::string name;
  std::string image;
  ResourceRequirements resources;
  std::vector<ContainerPort> ports;
  // Only on init containers: "Always" makes it a sidecar (a restartable init container, KEP-753)
  // that starts before the later init containers and runs beside the app containers.
  std::string restart_policy;

  bool isSidecar() const { return restart_policy == "Always"; }
};

struct Toleration {
  std::string key;
  std::string operator_ = "Equal";  // "Equal" or "Exists"
  std::string value;
  std::string effect;  // "" (all effects), "NoSchedule", "PreferNoSchedule", "NoExecute"
  std::optional<int64_t> toleration_seconds;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;
};

// Toleration.ToleratesTaint: an empty toleration effect matches every effect; an empty key
// matches every key; "Exists" matches every value, "Equal" (or "") needs equal values. The
// comparison operators "Gt"/"Lt" sit behind an alpha feature gate that is off by default in
// Kubernetes 1.36, so like kube-scheduler's default they tolerate nothing.
bool tolerates(const Toleration& toleration, const Taint& taint);
// The first taint with effect NoSchedule or NoExecute that no toleration tolerates (what
// kube-scheduler's TaintToleration filter rejects a node for), or nullptr.
const Taint* findUntoleratedTaint(const std::vector<Taint>& taints,
                                  const std::vector<Toleration>& tolerations);

struct NodeAffinity {
  // requiredDuringSchedulingIgnoredDuringExecution
  std::optional<NodeSelector> required;
  // preferredDuringSchedulingIgnoredDuringExecution
  std::vector<PreferredSchedulingTerm> preferred;
};

// core/v1 PodAffinityTerm: the pods it selects (labelSelector, in the namespaces named or selected)
// and the node label whose value they share with the pod's node (topologyKey).
struct PodAffinityTerm {
  std::optional<LabelSelector> label_selector;      // absent: selects no pod
  std::vector<std::string> namespaces;
  std::optional<LabelSelector> namespace_selector;  // absent: none; {}: every namespace
  std::string topology_key;
  // Already merged into labelSelector by the API server when the pod was created (GA in 1.33).
  std::vector<std::string> match_label_keys;
  std::vector<std::string> mismatch_label_keys;
};

struct WeightedPodAffinityTerm {
  int32_t weight = 0;
  PodAffinityTerm term;
};

// podAffinity or podAntiAffinity.
struct PodAffinity {
  std::vector<PodAffinityTerm> required;                // requiredDuringScheduling...
  std::vector<WeightedPodAffinityTerm> preferred;       // preferredDuringScheduling...
  bool empty() const { return required.empty() && preferred.empty(); }
};

struct Affinity {
  NodeAffinity node_affinity;
  PodAffinity pod_affinity;
  PodAffinity pod_anti_affinity;
  // A podAffinity / podAntiAffinity with at least one required or preferred term.
  bool has_pod_affinity = false;
  bool has_pod_anti_affinity = false;
};

// A status condition (PodCondition, and the conditions of ParallelJob status).
struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;
};
using PodCondition = Condition;

struct ContainerStatus {
  std::string name;
  bool ready = false;
  int32_t restart_count = 0;
  std::string state;  // "waiting", "running", "terminated", or "" when the server sent none
  std::optional<int32_t> exit_code;  // set when terminated
  std::string reason;  // state.terminated.reason, or state.waiting.reason ("CrashLoopBackOff")
  std::optional<int32_t> signal;  // state.terminated.signal, when the runtime reports one
  std::string message;  // state.terminated.message: the container's termination message
  // state.running.startedAt or state.terminated.startedAt (RFC 3339, the kubelet's clock); "".
  // (Initialized, so that aggregate initializations that end before it stay warning-free.)
  std::string started_at = {};
};

// core/v1 TopologySpreadConstraint.
struct TopologySpreadConstraint {
  // Not part of the API: the scheduler added it (kube-scheduler's System defaulting), and a node
  // missing its key is then not ranked lower.
  bool system_default = false;
  int32_t max_skew = 0;
  std::string topology_key;
  std::string when_unsatisfiable;  // "DoNotSchedule" or "ScheduleAnyway"
  std::optional<LabelSelector> label_selector;  // absent: selects no pod
  std::optional<int32_t> min_domains;
  std::string node_affinity_policy;  // "Honor" (default) or "Ignore"
  std::string node_taints_policy;    // "Ignore" (default) or "Honor"
  std::vector<std::string> match_label_keys;
};

struct PodSpec {
  std::string node_name;
  std::string scheduler_name;
  std::optional<int32_t> priority;
  std::string priority_class_name;
  // spec.preemptionPolicy: "PreemptLowerPriority" (the default, also when empty) or "Never".
  std::string preemption_policy;
  std::vector<Container> containers;
  std::vector<Container> init_containers;
  ResourceList overhead;
  std::map<std::string, std::string> node_selector;
  std::optional<Affinity> affinity;
  std::vector<Toleration> tolerations;
  bool host_network = false;
  bool has_topology_spread_constraints = false;
  std::vector<TopologySpreadConstraint> topology_spread_constraints;
  // Claims the pod's volumes need bound: persistentVolumeClaim.claimName, and for generic
  // ephemeral volumes the claim Kubernetes creates for them ("<pod name>-<volume name>").
  std::vector<std::string> pvc_claim_names;
  // Of those, the ones generic ephemeral volumes make: they must exist and be owned by the pod.
  std::vector<std::string> ephemeral_claim_names;
  // The CSI driver of each inline volume a node must attach: spec.volumes[].csi.driver, or the
  // driver an in-tree source migrates to (scheduler's volume limits count them).
  std::vector<std::string> inline_csi_drivers;
  std::string hostname;
  std::string subdomain;
  // spec.schedulingGates[].name: while any is present the pod must not be placed.
  std::vector<std::string> scheduling_gates;
  // spec.resourceClaims (dynamic resource allocation) is not empty.
  bool has_resource_claims = false;
  // spec.schedulingGroup.podGroupName: the scheduling.k8s.io/v1alpha2 PodGroup the pod belongs
  // to (Kubernetes 1.36); empty when not set.
  std::string scheduling_group;
};

struct PodStatus {
  std::string phase;  // "Pending", "Running", "Succeeded", "Failed", "Unknown"
  std::vector<PodCondition> conditions;
  std::string pod_ip;
  // status.nominatedNodeName: where a scheduler means to put the pod (after preemption, or while
  // its binding waits), set before spec.nodeName.
  std::string nominated_node_name;
  std::string start_time;  // status.startTime: when the kubelet acknowledged the pod, RFC 3339
  std::string reason;   // "Evicted", ...
  std::string message;
  std::vector<ContainerStatus> container_statuses;
};

struct Pod {
  ObjectMeta meta;
  PodSpec spec;
  PodStatus status;

  const PodCondition* findCondition(std::string_view type) const;
};

struct NodeCondition {
  std::string type;
  std::string status;
  std::string reason;
  std::string message;
};

struct NodeSpec {
  bool unschedulable = false;
  std::vector<Taint> taints;
};

struct NodeStatus {
  ResourceList capacity;
  ResourceList allocatable;
  std::vector<NodeCondition> conditions;
};

struct Node {
  ObjectMeta meta;
  NodeSpec spec;
  NodeStatus status;

  // The Ready condition is "True".
  bool isReady() const;
  // status.allocatable[name], or nullptr when the node does not say.
  const Quantity* allocatableOf(std::string_view name) const;
};

// pods/binding: encode only. meta carries the pod's name, namespace and (optionally) uid, which
// the API server checks against the pod's.
struct Binding {
  ObjectMeta meta;
  std::string target_node;
};

// core/v1 ObjectReference as Event.involvedObject uses it.
struct ObjectReference {
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string api_version;
  std::string resource_version;
  std::string field_path;
};

// core/v1 Event.
struct Event {
  ObjectMeta meta;
  ObjectReference involved_object;
  std::string reason;
  std::string message;
  std::string type;  // "Normal" or "Warning"
  int32_t count = 0;
  std::string first_timestamp;
  std::string last_timestamp;
  // MicroTime. When set, the API server also requires reporting_component, reporting_instance
  // and action.
  std::optional<std::string> event_time;
  std::string source_component;
  std::string source_host;
  std::string reporting_component;
  std::string reporting_instance;
  std::string action;
};

// coordination.k8s.io/v1 Lease. Empty strings and absent optionals are not encoded.
struct LeaseSpec {
  std::string holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::string acquire_time;  // MicroTime "2024-01-02T03:04:05.000000Z"
  std::string renew_time;
  std::optional<int32_t> lease_transitions;
};

struct Lease {
  ObjectMeta meta;
  LeaseSpec spec;
};

// core/v1 PersistentVolumeClaim: whether it is bound, and what a volume for it must offer.
struct PersistentVolumeClaim {
  ObjectMeta meta;
  std::string volume_name;  // spec.volumeName
  std::string phase;        // status.phase: "Pending", "Bound", "Lost"
  std::vector<std::string> access_modes;  // spec.accessModes ("ReadWriteOncePod", ...)
  // spec.storageClassName; absent and "" both mean no class (kube-scheduler treats a claim
  // without a class as Immediate binding).
  std::string storage_class_name;
  Quantity storage_request;  // spec.resources.requests.storage
  std::string volume_mode;   // spec.volumeMode; "" is Filesystem
  std::optional<LabelSelector> selector;  // spec.selector: which PersistentVolumes may be bound

  bool isBound() const { return !volume_name.empty() && phase == "Bound"; }
};

// storage.k8s.io/v1 StorageClass: how claims of the class are bound.
struct StorageClass {
  ObjectMeta meta;
  std::string provisioner;
  std::string volume_binding_mode;  // "Immediate" (also when empty) or "WaitForFirstConsumer"
  // allowedTopologies as node selector terms (each matchLabelExpressions entry a key In values);
  // absent: every node.
  std::optional<NodeSelector> allowed_topologies;
};

// core/v1 Namespace: its labels are what inter-pod terms' namespaceSelector matches.
struct Namespace {
  ObjectMeta meta;
};

// core/v1 PersistentVolume: where its data can be reached from (spec.nodeAffinity.required, a
// local or zonal volume) and the claim it is bound to (spec.claimRef).
struct PersistentVolume {
  ObjectMeta meta;
  std::optional<NodeSelector> node_affinity;
  std::string claim_namespace;
  std::string claim_name;
  std::string claim_uid;                  // spec.claimRef.uid
  std::string storage_class_name;         // spec.storageClassName
  Quantity capacity;                      // spec.capacity.storage
  std::vector<std::string> access_modes;  // spec.accessModes
  std::string volume_mode;                // spec.volumeMode; "" is Filesystem
  std::string phase;                      // status.phase: "Available", "Bound", "Released", ...
  // The CSI driver that attaches it: spec.csi.driver, or the driver an in-tree volume source
  // migrates to (awsElasticBlockStore, gcePersistentDisk, azureDisk, cinder); "" for others.
  std::string csi_driver;
};

// What a pod's default topology spread constraints count (kube-scheduler's DefaultSelector): the
// selectors of the Services, and of the ReplicationController, ReplicaSet or StatefulSet that
// controls it. core/v1 Service and ReplicationController select by a label map. The job engine
// creates Services (encode in proto/pod_template.h); decode reads only meta and selector.
struct ServicePort {
  std::string name;
  int32_t port = 0;
  int32_t target_port = 0;
  std::string protocol = "TCP";
};
struct Service {
  ObjectMeta meta;
  bool headless = false;                     // clusterIP: None
  bool publish_not_ready_addresses = false;  // names resolve before pods are Ready
  std::map<std::string, std::string> selector;  // spec.selector; empty selects no pod
  std::vector<ServicePort> ports;
};
struct ReplicationController {
  ObjectMeta meta;
  std::map<std::string, std::string> selector;  // spec.selector
};
// apps/v1 ReplicaSet and StatefulSet select by a LabelSelector.
struct ReplicaSet {
  ObjectMeta meta;
  std::optional<LabelSelector> selector;  // spec.selector
};
struct StatefulSet {
  ObjectMeta meta;
  std::optional<LabelSelector> selector;  // spec.selector
};

// storage.k8s.io/v1 CSINode: how many volumes of each CSI driver the node can attach.
struct CSINode {
  ObjectMeta meta;  // named after its node
  struct Driver {
    std::string name;
    std::optional<int32_t> allocatable_count;  // spec.drivers[].allocatable.count; absent: no limit
  };
  std::vector<Driver> drivers;
};

// policy/v1 PodDisruptionBudget: what the scheduler needs to predict whether the Eviction API
// would refuse to evict a pod (it refuses when status.disruptionsAllowed is used up).
struct PodDisruptionBudget {
  ObjectMeta meta;
  // spec.selector: absent matches no pod, empty ({}) every pod of its namespace (policy/v1).
  std::optional<LabelSelector> selector;
  int32_t disruptions_allowed = 0;        // status.disruptionsAllowed
};

// scheduling.x-k8s.io/v1alpha1 PodGroup (sigs.k8s.io/scheduler-plugins).
struct PodGroupSpec {
  int32_t min_member = 0;
  ResourceList min_resources;
  std::optional<int32_t> schedule_timeout_seconds;
};

struct PodGroupStatus {
  std::string phase;  // "Pending", "PreScheduling", "Scheduling", "Scheduled", "Running", ...
  std::string occupied_by;
  int32_t scheduled = 0;
  int32_t running = 0;
  int32_t succeeded = 0;
  int32_t failed = 0;
  std::string schedule_start_time;
};

struct PodGroup {
  ObjectMeta meta;
  PodGroupSpec spec;
  PodGroupStatus status;
};

// scheduling.k8s.io/v1alpha2 PodGroup: Kubernetes 1.36's own gang API (feature gate
// GenericWorkload), named by pods' spec.schedulingGroup.podGroupName.
struct WorkloadPodGroup {
  ObjectMeta meta;
  // spec.schedulingPolicy: exactly one of basic (pods placed one by one) and gang.
  bool basic = false;
  std::optional<int32_t> gang_min_count;  // spec.schedulingPolicy.gang.minCount
  // spec.schedulingConstraints.topology[].key: the pods must share one domain of each.
  std::vector<std::string> topology_keys;
  // status.conditions (PodGroupScheduled, DisruptionTarget, ...).
  std::vector<Condition> conditions;

  const Condition* condition(std::string_view type) const {
    for (const Condition& c : conditions)
      if (c.type == type) return &c;
    return nullptr;
  }
};

// spec.slurm of a ParallelJob with runtimeRef slurm: what `sbatch` was asked for, as the job
// engine's Slurm runtime needs it (jobengine/slurm/runtime/runtime.h). The pod resources, node
// selection and topology are already in spec.launcher; the batch script and the submission
// environment are in the Secret `batch_secret` (they may hold secrets).
// spec.slurm.array: the task of a job array (sbatch --array) this job is. Each task is a
// ParallelJob of its own, with its own job id; the array's job id is the first task's.
struct SlurmArrayTask {
  int64_t array_job_id = 0;  // SLURM_ARRAY_JOB_ID: the job id of the array's first task
  int64_t task_id = 0;       // SLURM_ARRAY_TASK_ID
  int64_t task_count = 0;    // SLURM_ARRAY_TASK_COUNT
  int64_t task_min = 0;      // SLURM_ARRAY_TASK_MIN
  int64_t task_max = 0;      // SLURM_ARRAY_TASK_MAX
  int64_t task_step = 1;     // SLURM_ARRAY_TASK_STEP
  std::optional<int32_t> max_running;  // the "%P" throttle: tasks of the array running at once
};

// spec.slurm.signal: the latest scancel --signal. The job engine hands it to the batch pod
// (vocabulary kSlurmSignalAnnotation), whose batch step delivers it once per `seq`. (At namespace
// scope: clang cannot default-construct a nested struct with member initializers in an optional
// member of the class that encloses it.)
struct SlurmSignal {
  int32_t seq = 0;     // counts up with each request
  int32_t number = 0;  // the signal's number (Linux)
  std::string target;  // "steps" (default: every srun step), "batch" (-b: the batch shell),
                       // "full" (-f: the batch script's whole process group)
  bool operator==(const SlurmSignal&) const = default;
};

struct SlurmJobSpec {
  int64_t job_id = 0;
  std::optional<SlurmArrayTask> array;  // a task of a job array
  std::string job_name;
  std::string partition;
  std::string user;  // who submitted (the Kubernetes user name)
  std::string account;
  std::string qos;
  std::string comment;
  std::string command;  // the batch script's path as submitted, or "(wrap)"
  std::string submit_dir;
  std::string submit_host;
  std::string work_dir;        // --chdir, else the submit dir
  std::string stdout_pattern;  // -o, unexpanded ("slurm-%j.out")
  std::string stderr_pattern;  // -e, unexpanded; empty: with stdout
  std::string stdin_path;      // -i; empty: /dev/null
  std::string batch_secret;    // Secret holding `script`, `environment`, `args`
  int32_t ntasks = 1;
  std::optional<int32_t> ntasks_per_node;
  std::optional<int32_t> cpus_per_task;
  std::vector<int32_t> tasks_per_node;  // tasks on each node, in node order
  std::optional<int32_t> gpus_per_node;
  std::optional<int32_t> gpus_per_task;
  std::string gpu_type;
  std::optional<int64_t> mem_per_node_mb;
  std::optional<int64_t> mem_per_cpu_mb;
  std::optional<int64_t> time_limit_seconds;  // absent: UNLIMITED
  bool requeue = true;                        // --requeue (Slurm's JobRequeue=1 default)
  bool hold = false;                          // -H: not started until released
  std::string begin_time;                     // --begin, RFC 3339; empty: at once
  std::string dependency;                     // -d, as given (jobengine/slurm/core/dependency.h)
  bool kill_on_invalid_dep = true;            // a -d never met ends the job (CANCELLED)
  bool exclusive = false;
  std::vector<std::string> required_nodes;  // -w: the nodes the job must use
  std::vector<std::string> excluded_nodes;  // -x
  bool cancel = false;  // scancel: the job ends CANCELLED, its pods are deleted
  // scontrol requeue: the attempt (status.restarts) to run again; once status.restarts has
  // passed it the request is done.
  std::optional<int32_t> requeue_attempt;
  // scancel --signal: the latest signal asked for (SlurmSignal).
  std::optional<SlurmSignal> signal;
};

// status.slurm: the job as Slurm's tools show it.
// One step srun ran in a Slurm job (sacct's "<id>.<step>" line), from the batch pod's
// termination message once the batch step ended (jobengine/slurm/core/step_record.h).
struct SlurmStepStatus {
  int32_t id = 0;
  std::string name;
  std::string state;       // COMPLETED FAILED CANCELLED
  std::string exit_code;   // "code:signal"
  std::string start_time;  // RFC 3339
  std::string end_time;    // RFC 3339
  int32_t nodes = 0;
  int32_t tasks = 0;
  int32_t cpus = 0;
  std::string node_list;   // compressed hostlist

  bool operator==(const SlurmStepStatus&) const = default;
};

struct SlurmJobStatus {
  std::string state;      // PENDING RUNNING COMPLETED FAILED TIMEOUT NODE_FAIL CANCELLED ...
  std::string reason;     // squeue's REASON for a pending job (JobHeldUser, BeginTime, ...)
  std::string exit_code;  // "code:signal" of the batch script, once it ended
  std::string start_time;  // when the current (or last) run began, RFC 3339; empty: not yet
  std::string end_time;    // when the job ended, RFC 3339; empty: not yet
  std::string dependency;  // the -d entries not yet met, with their state (squeue %E)
  std::vector<SlurmStepStatus> steps;  // the srun steps of the last run, once its batch step ended
  int32_t steps_omitted = 0;  // steps that did not fit in the termination message
};

// preferred.jp/v1alpha1 ParallelJob.
struct ParallelJobSpec {
  std::string runtime_ref_name;  // spec.runtimeRef.name, e.g. "mpi-openmpi"
  int32_t num_pods = 0;
  int32_t num_proc_per_pod = 0;
  // spec.launcher, a PodTemplateSpec, as compact JSON with member order preserved ("" if absent),
  // and the names of its spec.containers.
  std::string launcher;
  std::vector<std::string> launcher_container_names;
  std::optional<std::string> worker;  // spec.worker as compact JSON, when given
  int32_t max_restarts = 3;  // spec.failurePolicy.maxRestarts
  std::optional<SlurmJobSpec> slurm;  // spec.slurm: set by sbatch for runtimeRef slurm
};

using ParallelJobCondition = Condition;

struct ParallelJobStatus {
  std::string phase;  // "Pending", "Running", "Restarting", "Succeeded", "Failed"
  int32_t restarts = 0;
  // status.preemptions: times muster-scheduler preempted the job and it was requeued (not
  // restarts); written only when above 0.
  int32_t preemptions = 0;
  std::string job_group_name;
  std::string message;
  std::string start_time;
  std::string completion_time;
  std::vector<ParallelJobCondition> conditions;
  std::optional<int32_t> pods_ready;  // status.podsReady; written only when set
  std::string ready;  // status.ready, the READY column: "<podsReady>/<spec.numPods>"; written when set
  std::optional<int32_t> pods;        // status.pods: the job's pods that exist; written only when set
  std::optional<SlurmJobStatus> slurm;  // status.slurm; written only when set
};

struct ParallelJob {
  ObjectMeta meta;
  ParallelJobSpec spec;
  ParallelJobStatus status;
};

}  // namespace muster::proto
