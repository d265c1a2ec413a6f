#pragma once

// Kubernetes nodes as Slurm's node records (sinfo, scontrol show node, scontrol update
// NodeName=... State=DRAIN|RESUME). Pure: no I/O.
//
// A node's state, from the API (sinfo.1 NODE STATE CODES):
//   down   not Ready, or tainted node.kubernetes.io/unreachable
//   drain  cordoned (spec.unschedulable) with no pod running on it; drng while pods still run
//   alloc  the pods bound to it request all its CPUs or all its GPUs
//   mix    they request some
//   idle   nothing is bound to it
// The reason of a drained node is what `scontrol update ... State=DRAIN Reason=...` wrote
// (annotations below), else "Kubernetes cordon" for a node cordoned another way.
//
// Deviations: S:C:T is 1:<cpus>:1 (Kubernetes does not say sockets or threads), TMP_DISK and
// WEIGHT print 0 and 1, AVAIL_FEATURES lists the node's muster.dev/* label values.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "proto/objects.h"
#include "proto/vocabulary.h"

namespace muster::jobengine::slurm {

// The annotations scontrol's drain writes on the node: the reason, who drained it and when
// (sinfo -R's REASON, USER, TIMESTAMP).
inline constexpr auto& kDrainReasonAnnotation = proto::vocabulary::kSlurmDrainReasonAnnotation;
inline constexpr auto& kDrainUserAnnotation = proto::vocabulary::kSlurmDrainUserAnnotation;
inline constexpr auto& kDrainTimeAnnotation = proto::vocabulary::kSlurmDrainTimeAnnotation;

enum class NodeState { kIdle, kMixed, kAllocated, kDrained, kDraining, kDown };

// "idle", "mix", "alloc", "drain", "drng", "down" (sinfo %t) and the long forms (%T: "idle",
// "mixed", "allocated", "drained", "draining", "down").
std::string_view nodeStateCompact(NodeState s);
std::string_view nodeStateLong(NodeState s);

struct NodeView {
  std::string name;
  NodeState state = NodeState::kIdle;
  int64_t cpus = 0;          // allocatable, whole CPUs
  int64_t cpus_alloc = 0;    // requested by bound pods (rounded up)
  int64_t memory_mb = 0;     // allocatable
  int64_t gpus = 0;          // allocatable nvidia.com/gpu
  int64_t gpus_alloc = 0;
  std::string gpu_type;      // label muster.dev/gpu.model
  std::string reason;        // why drained/down; empty otherwise
  std::string reason_user, reason_time;  // who drained it, when (Slurm's time format)
  std::vector<std::string> features;
  std::map<std::string, std::string> labels;
};

// `pods`: the pods bound to this node that are not finished (any namespace).
NodeView nodeViewOf(const proto::Node& node, const std::vector<proto::Pod>& pods);

// A partition's nodes: those its node selector matches.
bool partitionHas(const Partition& partition, const NodeView& node);

// `scontrol show config`: "Configuration data as of <time>", then "Key<padded to 23> = value"
// lines sorted by key, as Slurm prints them — the settings Muster's Slurm has (ClusterName,
// JobRequeue, MaxArraySize, MinJobAge from slurm.accountingRetention, the partitions, the job id
// counter, versions); the rest of slurm.conf does not exist here.
std::string renderShowConfig(const SlurmConfig& config, absl::Time now);

struct SinfoOptions {
  bool help = false, usage = false, version = false;
  bool noheader = false;
  bool node_oriented = false;  // -N
  bool long_format = false;    // -l
  bool reasons = false;        // -R
  bool summarize = false;      // -s
  std::optional<std::string> format;  // -o (or SINFO_FORMAT)
  std::vector<std::string> partitions;
  std::vector<NodeState> states;  // -t; empty: all
  std::vector<std::string> nodes;  // -n (hostlists expanded)
};

// What `sinfo --help` (and --usage) print: every option parseSinfoArgs takes, those it refuses
// too.
std::string_view sinfoUsage();

absl::StatusOr<SinfoOptions> parseSinfoArgs(const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env);

// The whole output of sinfo (header unless -h), lines ending in '\n'.
std::string renderSinfo(const SinfoOptions& options, const SlurmConfig& config,
                        const std::vector<NodeView>& nodes, absl::Time now);

// `scontrol show node`: one Key=Value block per node.
std::string renderShowNode(const NodeView& node, const SlurmConfig& config);

// `scontrol update NodeName=<hostlist> State=DRAIN|DOWN|RESUME|UNDRAIN [Reason=...]`: the nodes
// and what to do. InvalidArgument in scontrol's words ("Invalid node state specified", "You
// must specify a reason when DOWNING or DRAINING a node. Request denied").
struct NodeUpdate {
  std::vector<std::string> nodes;
  bool drain = false;  // false: resume
  std::string reason;
};
absl::StatusOr<NodeUpdate> parseNodeUpdate(const std::vector<std::string>& args);

}  // namespace muster::jobengine::slurm
