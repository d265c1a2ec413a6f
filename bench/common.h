#pragma once

// What the in-process benchmarks share: the synthetic cluster's nodes (block / spine / rack / host,
// 8 GPUs and 8 RDMA NICs each), its gangs' pods and percentiles.

#include <algorithm>
#include <string>
#include <vector>

#include "proto/objects.h"
#include "proto/quantity.h"
#include "proto/vocabulary.h"

namespace muster::bench {

inline constexpr int kNodesPerRack = 16;
inline constexpr int kRacksPerSpine = 8;
inline constexpr int kSpinesPerBlock = 8;
inline const std::vector<std::string> kLevels{"muster.dev/block", "muster.dev/spine",
                                              "muster.dev/rack"};

// Node i: "node-<i>", in rack i / 16, spine rack / 8, block spine / 8; 128 cpu, 1 TiB, 110 pods,
// 8 GPUs, 8 RDMA NICs; Ready.
inline proto::Node makeNode(int i) {
  auto q = [](const char* s) { return *proto::Quantity::parse(s); };
  proto::Node n;
  const int rack = i / kNodesPerRack;
  const int spine = rack / kRacksPerSpine;
  const int block = spine / kSpinesPerBlock;
  n.meta.name = "node-" + std::to_string(i);
  n.meta.labels["kubernetes.io/hostname"] = n.meta.name;
  n.meta.labels["muster.dev/block"] = "b" + std::to_string(block);
  n.meta.labels["muster.dev/spine"] = "s" + std::to_string(spine);
  n.meta.labels["muster.dev/rack"] = "r" + std::to_string(rack);
  n.status.allocatable = {{"cpu", q("128")},
                          {"memory", q("1Ti")},
                          {"pods", q("110")},
                          {"nvidia.com/gpu", q("8")},
                          {"preferred.jp/rdma", q("8")}};
  n.status.conditions.push_back({"Ready", "True", "KubeletReady", ""});
  return n;
}

// A pod of gang `gang` (gang_size members; none when 1) in namespace "bench": `gpus` GPUs and 12
// cpu per GPU, Running on `node` since `started` when a node is given, else Pending; in `queue`
// (the muster.dev/queue label) when one is given.
inline proto::Pod makeGangPod(const std::string& name, int gpus, int32_t priority,
                              const std::string& gang, int gang_size, const std::string& node = "",
                              const std::string& started = "", const std::string& queue = "") {
  proto::Pod p;
  p.meta.namespace_ = "bench";
  p.meta.name = name;
  p.meta.creation_timestamp = started;
  if (!queue.empty()) p.meta.labels[proto::vocabulary::kQueueLabel] = queue;
  p.spec.scheduler_name = "muster-scheduler";
  p.spec.node_name = node;
  p.spec.priority = priority;
  if (gang_size > 1) {
    p.meta.annotations["gang-scheduling.preferred.jp/gang-name"] = gang;
    p.meta.annotations["gang-scheduling.preferred.jp/gang-size"] = std::to_string(gang_size);
  }
  p.status.phase = node.empty() ? "Pending" : "Running";
  p.status.start_time = started;
  proto::Container c;
  c.name = "main";
  c.resources.requests = {{"cpu", proto::Quantity::fromValue(gpus * 12)},
                          {"nvidia.com/gpu", proto::Quantity::fromValue(gpus)}};
  p.spec.containers.push_back(std::move(c));
  return p;
}

// The p-quantile (0..1) of v, nearest rank; 0 for none.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace muster::bench
