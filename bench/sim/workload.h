#pragma once

// The simulation's inputs: a cluster (nodes with GPUs, RDMA NICs, cpu, memory, their place in a
// block / spine / rack topology and the GPU↔NIC layout inside them) and a job stream (arrival,
// pods, GPUs and NICs per pod, duration, priority). Read from the Alibaba GPU cluster trace v2023
// CSV format or made by a seeded generator. Plain data; no scheduler types.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muster::bench {

// Where a node's GPUs and RDMA NICs sit (issue 6). Defined for an even number of GPUs g: g/2 NICs,
// GPUs 2p and 2p+1 and NIC p form pair p, two NUMA nodes, the lower half of the pairs on NUMA
// node 0 (an 8-GPU node: 4 NICs, GPUs 0-3 and NICs 0-1 on NUMA node 0).
//   kSwitch  each pair behind its own PCIe switch: every pod can get its GPUs and NICs behind
//            shared switches (the GPUDirect RDMA path)
//   kNuma    the same NUMA nodes, but every device on a root port of its own (no shared switch):
//            alignment on a NUMA node at best
//   kSplit   every GPU on NUMA node 0, every NIC on NUMA node 1: nothing can be aligned
//   kNone    no layout published (the scheduler knows nothing of the devices' places)
enum class NodeLayout { kNone, kSwitch, kNuma, kSplit };
const char* layoutName(NodeLayout layout);

struct SimNode {
  std::string name;
  int gpus = 8;
  int rdma_nics = 8;  // allocatable preferred.jp/rdma (assignLayouts sets the layout's count)
  NodeLayout layout = NodeLayout::kNone;
  int64_t cpu_milli = 64000;
  int64_t memory_mib = 512 * 1024;
  std::string model;  // GPU model ("V100M32"); "" when unknown
  int block = 0, spine = 0, rack = 0;  // global indices
};

struct TopologyShape {
  int nodes_per_rack = 8;
  int racks_per_spine = 4;
  int spines_per_block = 4;
};

// `count` identical 8-GPU nodes, in topology order (node i is in rack i / nodes_per_rack).
std::vector<SimNode> syntheticCluster(int count, const TopologyShape& shape);

// openb_node_list_*.csv: sn,cpu_milli,memory_mib,gpu,model (header line required). The trace has
// no network topology: nodes are assigned to racks in file order, racks to spines, spines to
// blocks (`shape`).
// Nodes get as many RDMA NICs as GPUs and no layout (assignLayouts gives them one).
absl::StatusOr<std::vector<SimNode>> readNodeCsv(const std::string& path, const TopologyShape& shape);

// A fleet's mix of layouts: each with a weight.
using LayoutMix = std::vector<std::pair<NodeLayout, double>>;
// "switch:2,numa:1,split:1" (weights default to 1: "switch,numa" is half and half), or "none"
// alone (an empty mix). "none" in a mix: nodes that publish no layout (but have the NICs).
// InvalidArgument naming the bad part otherwise.
absl::StatusOr<LayoutMix> parseLayoutMix(const std::string& spec);
// Gives every node with an even, non-zero number of GPUs a layout, in the mix's proportions
// (exact counts, largest remainder), at places drawn by a permutation seeded with `seed`, and the
// layout's NIC count as allocatable preferred.jp/rdma. Other nodes, and all with an empty mix,
// keep no layout and their NICs.
void assignLayouts(std::vector<SimNode>& nodes, const LayoutMix& mix, uint32_t seed);

struct SimJob {
  std::string name;
  double arrival = 0;   // seconds from the start of the stream
  double duration = 0;  // seconds it runs once placed
  int pods = 1;         // gang size (1: a single pod)
  int gpus_per_pod = 0;
  int rdma_per_pod = 0;  // preferred.jp/rdma (requestRdma fills it)
  int64_t cpu_milli_per_pod = 1000;
  int64_t memory_mib_per_pod = 1024;
  int32_t priority = 0;
  std::vector<std::string> gpu_models;  // any of these GPU models (node affinity In); empty: any
  // The share of each GPU the pod uses, in thousandths (the trace's gpu_milli; 1000: whole GPUs).
  // Without --gpu-sharing a fractional pod still takes one GPU; the simulator reports allocation
  // in both units.
  int64_t gpu_milli = 1000;
};

struct TraceOptions {
  // Multi-GPU jobs (num_gpu >= min_gpus) become gangs of this many pods, each pod with the job's
  // num_gpu (the trace job scaled out to several nodes, as data-parallel training is). Several
  // sizes: chosen per job by a hash of its name, so the grouping is deterministic. {1}: no grouping.
  std::vector<int> gang_pods{1};
  int min_gpus = 2;
  double time_scale = 1.0;  // multiplies arrival times and durations
  int64_t limit = 0;        // at most this many rows (0: all)
};

// openb_pod_list_*.csv: name,cpu_milli,memory_mib,num_gpu,gpu_milli and optionally gpu_spec,qos,
// pod_phase,creation_time,deletion_time,scheduled_time (header line required; columns found by
// name; the multigpu files have only the first five). Duration: deletion − scheduled (or −
// creation when never scheduled); a pod still running at the end of the trace runs until the
// last time in the file; in a file without times every job arrives at 0 and runs a second (such
// files are for fillJobs). Fractional GPUs (gpu_milli < 1000) take one whole
// GPU (Muster allocates whole devices) and keep their gpu_milli. qos → priority: LS 100,
// Guaranteed 50, Burstable 10, BE 0. gpu_spec ("A" or "A|B") becomes the required GPU models, any
// of them.
absl::StatusOr<std::vector<SimJob>> readPodCsv(const std::string& path, const TraceOptions& options);

// FGD's fill mode (Weng et al., USENIX ATC '23, and its simulator): jobs drawn from `pool`
// uniformly with replacement (seeded) until their GPU demand, in thousandths of a GPU, reaches
// `target` × the cluster's GPUs, in random order, one a second, none ever leaving. `at_capacity`:
// the index of the job whose arrival brings the demand to the cluster's capacity (1.0), where the
// paper reads its figures.
std::vector<SimJob> fillJobs(const std::vector<SimJob>& pool, int64_t cluster_gpus, double target,
                             uint32_t seed, int64_t* at_capacity);

struct SyntheticOptions {
  uint32_t seed = 1;
  int jobs = 2000;
  // Offered load: expected GPU demand (arrival rate × GPUs × duration) / cluster GPUs.
  double load = 0.9;
  double mean_duration_s = 3600;
  // Gang sizes and their weights (a gang of 1 is a single pod).
  std::vector<std::pair<int, double>> sizes{{1, 0.40}, {8, 0.30}, {16, 0.12}, {64, 0.12}, {256, 0.06}};
  double high_priority_share = 0.1;  // jobs with priority 100
};

// A gang-heavy stream: Poisson arrivals at the rate that gives `load` on `cluster_gpus`; single
// pods ask for 1, 2, 4 or 8 GPUs; gang members for 8 (80 %) or 4; durations exponential.
std::vector<SimJob> syntheticJobs(const SyntheticOptions& options, int64_t cluster_gpus);

// Which pods ask for RDMA NICs: none, the members of gangs of more than one pod (the default:
// multi-node jobs are what GPUDirect RDMA is for; a single pod's GPUs talk over NVLink and PCIe),
// or every pod asking for GPUs.
enum class RdmaPods { kNone, kGangs, kAll };
// Each chosen pod asking for g GPUs asks for max(1, g/2) preferred.jp/rdma NICs too: one NIC per
// two GPUs, the ratio of every layout above (an 8-GPU pod takes all 4 NICs of an 8-GPU node).
void requestRdma(std::vector<SimJob>& jobs, RdmaPods pods);

}  // namespace muster::bench
