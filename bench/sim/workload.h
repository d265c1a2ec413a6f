#pragma once

// The simulation's inputs: a cluster (nodes with GPUs, cpu, memory and their place in a
// block / spine / rack topology) and a job stream (arrival, pods, GPUs per pod, duration,
// priority). Read from the Alibaba GPU cluster trace v2023 CSV format or made by a seeded
// generator. Plain data; no scheduler types.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muster::bench {

struct SimNode {
  std::string name;
  int gpus = 8;
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
absl::StatusOr<std::vector<SimNode>> readNodeCsv(const std::string& path, const TopologyShape& shape);

struct SimJob {
  std::string name;
  double arrival = 0;   // seconds from the start of the stream
  double duration = 0;  // seconds it runs once placed
  int pods = 1;         // gang size (1: a single pod)
  int gpus_per_pod = 0;
  int64_t cpu_milli_per_pod = 1000;
  int64_t memory_mib_per_pod = 1024;
  int32_t priority = 0;
  std::string gpu_model;  // required GPU model; "" for any
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

// openb_pod_list_*.csv: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
// creation_time,deletion_time,scheduled_time (header line required; columns found by name).
// Duration: deletion − scheduled (or − creation when never scheduled); a pod still running at the
// end of the trace runs until the last time in the file. Fractional GPUs (gpu_milli < 1000) count
// as one whole GPU: Muster allocates whole devices. qos → priority: LS 100, Guaranteed 50,
// Burstable 10, BE 0. gpu_spec naming exactly one model becomes a required node model; a list of
// models ("A|B") is no constraint.
absl::StatusOr<std::vector<SimJob>> readPodCsv(const std::string& path, const TraceOptions& options);

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

}  // namespace muster::bench
