#pragma once

// Discrete-event simulation of one scheduler policy on one cluster and job stream. It drives the
// real scheduler code: ClusterCache (assume/forget), SchedulingQueue (priority order, backoff,
// unschedulable set, reservations) on a simulated clock, and place() for Muster; the baselines
// use the same cache, filters and queue and differ only in where they put a gang's pods:
//
//   muster     scheduler::place(): lowest topology domain that fits, tightest, fullest first
//   first-fit  each pod on the first node, in a fixed scan order, that passes the filters
//   best-fit   each pod on the feasible node with the least free GPUs left (most-allocated),
//              topology-blind (ties: scan order)
//
// The scan order of the baselines is a seeded permutation of the nodes, unrelated to topology,
// as a node list usually is. All are all-or-nothing for gangs (a baseline that cannot place every
// member places none), so the comparison isolates the choice of nodes.
//
// Nodes with a layout (SimNode::layout) get it as their NodeDevices, as if their node agent had
// published a NodeTopology without free devices: place() then prefers, inside the network domain
// it chose, nodes where pods asking for GPUs and RDMA NICs get them behind one PCIe switch or on
// one NUMA node. The baselines ignore layouts.
//
// Time is simulated: a decision takes no simulated time (its wall time is measured separately).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/sim/workload.h"

namespace muster::bench {

enum class Policy { kMuster, kFirstFit, kBestFit, kFgd };
const char* policyName(Policy policy);

struct SimOptions {
  Policy policy = Policy::kMuster;
  uint32_t seed = 1;              // the baselines' scan order
  double sample_interval_s = 0;   // 0: (last arrival) / 200
  double reservation_after_s = 300;
  double end_s = 0;  // stop at this simulated time (0: when every job has finished)
  // FGD's fill mode (workload.h fillJobs): the index of the job whose arrival brings the demand to
  // the cluster's capacity; SimResult::at_capacity is taken once it has been handled. -1: none.
  int64_t capacity_job = -1;
  // Pods asking for part of one GPU (gpu_milli < 1000) ask for that fraction (muster.dev/
  // gpu-fraction) and share GPUs, for every policy; false: they take a whole GPU each.
  bool gpu_sharing = false;
  // Tenancy on (scheduler/tenancy/), as muster-scheduler wires it: the cache's pod observer, the
  // queue's order across queues, the limit check before place() and fair share refreshed once a
  // simulated second. No Queue objects exist, so it must change nothing (--tenancy-check).
  bool tenancy = false;
};

// The cluster once the arrived demand equals its capacity (FGD's fill mode).
struct CapacitySnapshot {
  bool taken = false;
  double allocation = 0;        // allocated GPUs / GPUs (a fractional pod holds a whole GPU)
  double allocation_milli = 0;  // the pods' gpu_milli summed / (GPUs × 1000), the paper's unit
  int64_t free_gpus = 0;
  // Free GPUs on nodes whose free CPU or memory no GPU pod shape of the stream fits.
  int64_t stranded_gpus = 0;
  int64_t pods_placed = 0, pods_arrived = 0;
};

struct SizeStats {
  int64_t jobs = 0;
  int64_t placed = 0;
  double delay_mean_s = 0;
  double delay_p50_s = 0;
  double delay_p99_s = 0;
  // Gangs of more than one pod: blocks (top level) and racks (leaf level) spanned, and the
  // fewest that could have held the gang given the free capacity when it was placed.
  double top_mean = 0, top_min_mean = 0, top_at_min = 0;  // at_min: share of gangs at the minimum
  double leaf_mean = 0, leaf_min_mean = 0, leaf_at_min = 0;
  // Placed pods asking for GPUs and RDMA NICs, and how many of them could be aligned
  // (SimResult::gpu_nic_*).
  int64_t gpu_nic_pods = 0, gpu_nic_pcie = 0, gpu_nic_aligned = 0;
};

struct SimResult {
  std::string policy;
  int64_t nodes = 0;
  int64_t gpus = 0;
  int64_t jobs = 0;
  int64_t placed = 0;
  double horizon_s = 0;  // last arrival
  double makespan_s = 0;  // last completion
  // Time-weighted over [0, last arrival]: allocated GPUs / all GPUs, and fragmentation = share of
  // free GPUs on partly used nodes (a full-node pod cannot use them).
  double allocation_mean = 0;
  double fragmentation_mean = 0;
  std::vector<std::pair<double, double>> allocation_series;  // (t, allocation)
  std::vector<std::pair<double, double>> fragmentation_series;
  std::map<std::string, SizeStats> by_size;  // "1", "2-8", "9-16", "17-64", "65-256", ">256", "all"
  SizeStats gangs;                           // every gang of more than one pod
  // Placed pods asking for both GPUs and RDMA NICs, and how many of them were placed on a node
  // where an aligned allocation exists for them: behind one PCIe switch (pcie), behind one switch
  // or on one NUMA node (aligned, which includes pcie). Measured the same way for every policy, at
  // each decision from the node's layout and the GPUs and NICs in use on it just before: k such
  // pods on a node → min(k, AlignedCapacity::pcie) and min(k, AlignedCapacity::numa) (the rule of
  // GangPlacement::gpu_nic_*; unlike it, pods are counted when no node has a layout too).
  int64_t gpu_nic_pods = 0;
  int64_t gpu_nic_pcie = 0;
  int64_t gpu_nic_aligned = 0;
  int64_t decisions = 0;       // place() (or baseline) calls
  int64_t failed_decisions = 0;
  double decision_wall_ms = 0;  // summed wall time of the decisions (machine-dependent)
  // Every placement in the order made: (job, simulated time, nodes), hashed (FNV-1a).
  uint64_t placement_digest = 1469598103934665603ull;
  CapacitySnapshot at_capacity;
};

SimResult simulate(const std::vector<SimNode>& nodes, const std::vector<SimJob>& jobs,
                   const SimOptions& options);

// Gang-size bucket of a job for the by_size tables.
std::string sizeBucket(int pods);

}  // namespace muster::bench
