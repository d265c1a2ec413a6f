// In-process placement benchmark (no API server): a synthetic GPU cluster in a 4-level topology
// (block / spine / rack / host) with random background occupancy, and a seeded stream of gangs of
// 1, 8, 64, 256 and 512 pods (8 GPUs per pod, or 1-4) fed through the real place() + assume path.
// Reports per-gang decision latency (p50/p99 by gang size), decision throughput in pods/s and peak
// RSS, as JSON lines and a table, next to the targets. See bench/placement/README.md.
//
//   muster_placement_bench [--nodes 5000,10000] [--seed 1] [--scale 1.0] [--layouts none|switch]
//                          [--verify]
//
// --verify places the same stream a second time, on a second cache, with the free-GPU index off
// (PlacementOptions::gpu_index = false: every node visited), and compares every decision: the
// exit status is 1 when any placement differs (the timings then include both searches).
//
// --layouts switch gives every node a NodeTopology-like device layout (4 PCIe switches, each with
// 2 GPUs and 2 RDMA NICs, 2 switches per NUMA node; one NodeDevices per node, as the scheduler
// keeps them), so every pod (it asks for GPUs and as many NICs) goes through GPU↔NIC alignment.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/common.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "topology/model/topology.h"

namespace {

using muster::proto::Quantity;
using namespace muster::scheduler;

using muster::bench::kLevels;
using muster::bench::makeNode;
using muster::bench::percentile;

muster::proto::Pod makePod(const std::string& ns, const std::string& name, int gpus,
                           const std::string& node = "") {
  muster::proto::Pod p;
  p.meta.namespace_ = ns;
  p.meta.name = name;
  p.spec.scheduler_name = "muster-scheduler";
  p.spec.node_name = node;
  p.status.phase = node.empty() ? "Pending" : "Running";
  muster::proto::Container c;
  c.name = "main";
  std::string g = std::to_string(gpus);
  c.resources.requests = {{"cpu", Quantity::fromValue(gpus * 12)},
                          {"memory", Quantity::fromValue(int64_t{gpus} * 100 * 1024 * 1024 * 1024,
                                                         Quantity::Format::kBinarySI)},
                          {"nvidia.com/gpu", Quantity::fromValue(gpus)},
                          {"preferred.jp/rdma", Quantity::fromValue(gpus)}};
  c.resources.limits = {{"nvidia.com/gpu", Quantity::fromValue(gpus)}};
  p.spec.containers.push_back(std::move(c));
  return p;
}

// 8 GPUs and 8 NICs: switch s holds GPUs 2s, 2s+1 and NICs mlx5_2s, mlx5_2s+1; NUMA node s / 2.
muster::topology::Topology switchLayout() {
  muster::topology::Topology t;
  for (int s = 0; s < 4; ++s) {
    std::string sw = "0000:" + std::to_string(10 + s) + ":00.0";
    for (int k = 0; k < 2; ++k) {
      muster::topology::Gpu g;
      g.index = 2 * s + k;
      g.pcie_switch = sw;
      g.numa_node = s / 2;
      t.gpus.push_back(g);
      muster::topology::RdmaNic n;
      n.name = "mlx5_" + std::to_string(2 * s + k);
      n.pcie_switch = sw;
      n.numa_node = s / 2;
      t.rdma_nics.push_back(n);
    }
  }
  muster::topology::computeGroups(&t);
  return t;
}

struct Stats {
  std::vector<double> ms;
  int64_t pods = 0;
  double total_ms = 0;
  int failures = 0;
};

long peakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

struct RunResult {
  int nodes;
  std::map<int, Stats> by_size;
  Stats all;
  double load_ms;
  int64_t compared = 0;  // --verify: decisions compared with the exhaustive search
  int64_t differed = 0;
};

RunResult run(int nodes, uint32_t seed, double scale, bool layouts, bool verify) {
  std::mt19937 rng(seed);
  RunResult result{nodes, {}, {}, 0};
  ClusterCache cache(kLevels);
  // --verify: the same cluster, searched exhaustively.
  std::optional<ClusterCache> scanned;
  if (verify) scanned.emplace(kLevels);
  PlacementOptions exhaustive;
  exhaustive.gpu_index = false;
  auto t0 = std::chrono::steady_clock::now();
  const muster::topology::Topology layout = switchLayout();
  for (int i = 0; i < nodes; ++i) {
    for (ClusterCache* c : {&cache, scanned ? &*scanned : nullptr}) {
      if (c == nullptr) continue;
      c->addNode(makeNode(i));
      if (layouts) c->setNodeDevices("node-" + std::to_string(i), std::make_shared<const NodeDevices>(layout));
    }
  }
  // Background: 0-60% of each node's GPUs used by pods of other schedulers (1-GPU pods).
  int bg = 0;
  std::uniform_int_distribution<int> used(0, 4);  // 0..4 of 8 GPUs ≈ 0-50%, mean 25%
  std::uniform_real_distribution<double> extra(0, 1);
  for (int i = 0; i < nodes; ++i) {
    int g = used(rng) + (extra(rng) < 0.2 ? 1 : 0);  // up to 5 of 8 (62%)
    for (int k = 0; k < g; ++k) {
      muster::proto::Pod p = makePod("bg", "bg-" + std::to_string(bg++), 1, "node-" + std::to_string(i));
      cache.addPod(p);
      if (scanned) scanned->addPod(p);
    }
  }
  cache.topology();
  result.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  // The gang stream: counts per size, shuffled deterministically.
  const std::vector<std::pair<int, int>> mix{{1, 20000}, {8, 2000}, {64, 300}, {256, 60}, {512, 30}};
  std::vector<int> sizes;
  for (auto [size, count] : mix) {
    int n = std::max(1, static_cast<int>(count * scale));
    sizes.insert(sizes.end(), n, size);
  }
  std::shuffle(sizes.begin(), sizes.end(), rng);

  // Workload GPUs held by placed gangs, kept under ~30% of the cluster by finishing the oldest.
  const int64_t cap_gpus = int64_t{nodes} * 8 * 30 / 100;
  int64_t held = 0;
  struct Placed {
    std::vector<std::string> pods;
    int64_t gpus;
  };
  std::deque<Placed> running;
  auto finishOldest = [&] {
    Placed& p = running.front();
    for (const std::string& k : p.pods) {
      (void)cache.forget(k);
      if (scanned) (void)scanned->forget(k);
    }
    held -= p.gpus;
    running.pop_front();
  };

  std::uniform_int_distribution<int> small(1, 4);
  int gang_id = 0;
  for (int size : sizes) {
    int gpus = size == 1 ? small(rng) : (extra(rng) < 0.7 ? 8 : small(rng));
    GangRequest req;
    req.key = GangKey{"bench", "g" + std::to_string(gang_id), size == 1};
    req.min_member = size;
    if (size > 1 && extra(rng) < 0.3) req.preferred_level = 2;  // some ask for a rack
    for (int i = 0; i < size; ++i) {
      req.members.push_back(*makePodInfo(
          makePod("bench", "g" + std::to_string(gang_id) + "-" + std::to_string(i), gpus)));
    }
    ++gang_id;
    while (held + int64_t{size} * gpus > cap_gpus && !running.empty()) finishOldest();

    for (int attempt = 0; attempt < 2; ++attempt) {
      auto start = std::chrono::steady_clock::now();
      PlacementResult r = place(req, cache);
      const GangPlacement* p = std::get_if<GangPlacement>(&r);
      if (p) {
        for (size_t i = 0; i < p->assignments.size(); ++i) {
          (void)cache.assume(*req.members[i], p->assignments[i].node);
        }
      }
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (scanned) {
        PlacementResult q = place(req, *scanned, exhaustive);
        const GangPlacement* e = std::get_if<GangPlacement>(&q);
        ++result.compared;
        if ((p == nullptr) != (e == nullptr) || (p && p->assignments != e->assignments)) {
          if (++result.differed <= 5)
            std::fprintf(stderr, "verify: gang %s (%d pods) placed differently by the exhaustive search\n",
                         req.key.name.c_str(), size);
        }
        // The indexed search's decision is applied to both, so they stay equal after a difference.
        if (p) {
          for (size_t i = 0; i < p->assignments.size(); ++i)
            (void)scanned->assume(*req.members[i], p->assignments[i].node);
        }
      }
      Stats& s = result.by_size[size];
      s.ms.push_back(ms);
      s.total_ms += ms;
      result.all.total_ms += ms;
      if (p) {
        s.pods += size;
        result.all.pods += size;
        Placed placed{{}, int64_t{size} * gpus};
        for (const Assignment& a : p->assignments) placed.pods.push_back(a.pod_key);
        running.push_back(std::move(placed));
        held += int64_t{size} * gpus;
        break;
      }
      ++s.failures;
      // Fragmented: finish half of what runs and try once more.
      for (size_t k = running.size() / 2; k > 0; --k) finishOldest();
    }
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> node_counts{5000, 10000};
  uint32_t seed = 1;
  double scale = 1.0;
  bool layouts = false;
  bool verify = false;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--verify") {
      verify = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) flag = "";
    if (flag == "--nodes") {
      node_counts.clear();
      std::string list = argv[i + 1];
      size_t pos = 0;
      while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        node_counts.push_back(std::atoi(list.substr(pos, comma - pos).c_str()));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (flag == "--seed") {
      seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    } else if (flag == "--scale") {
      scale = std::atof(argv[i + 1]);
    } else if (flag == "--layouts" && (std::string(argv[i + 1]) == "none" ||
                                       std::string(argv[i + 1]) == "switch")) {
      layouts = std::string(argv[i + 1]) == "switch";
    } else {
      std::fprintf(stderr,
                   "usage: %s [--nodes 5000,10000] [--seed 1] [--scale 1.0] [--layouts none|switch] "
                   "[--verify]\n",
                   argv[0]);
      return 2;
    }
  }
  std::vector<RunResult> results;
  for (int n : node_counts) {
    results.push_back(run(n, seed, scale, layouts, verify));
    const RunResult& r = results.back();
    if (verify) {
      std::printf("{\"bench\":\"placement\",\"nodes\":%d,\"verify\":{\"compared\":%lld,\"differed\":%lld}}\n",
                  r.nodes, static_cast<long long>(r.compared), static_cast<long long>(r.differed));
    }
    for (const auto& [size, s] : r.by_size) {
      std::printf(
          "{\"bench\":\"placement\",\"nodes\":%d,\"gang_size\":%d,\"decisions\":%zu,"
          "\"unschedulable\":%d,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"max_ms\":%.4f,\"pods_per_s\":%.0f}\n",
          r.nodes, size, s.ms.size(), s.failures, percentile(s.ms, 0.5), percentile(s.ms, 0.99),
          percentile(s.ms, 1.0), s.total_ms > 0 ? s.pods / (s.total_ms / 1000) : 0.0);
    }
    std::printf("{\"bench\":\"placement\",\"nodes\":%d,\"total_pods\":%lld,\"pods_per_s\":%.0f,"
                "\"cluster_load_ms\":%.1f,\"peak_rss_mib\":%ld}\n",
                r.nodes, static_cast<long long>(r.all.pods),
                r.all.pods / (r.all.total_ms / 1000), r.load_ms, peakRssMiB());
  }
  std::printf("\n%-7s %-6s %-9s %-7s %-9s %-9s %-9s %-11s\n", "nodes", "gang", "decisions",
              "unsched", "p50 ms", "p99 ms", "max ms", "pods/s");
  for (const RunResult& r : results) {
    for (const auto& [size, s] : r.by_size) {
      std::printf("%-7d %-6d %-9zu %-7d %-9.3f %-9.3f %-9.3f %-11.0f%s\n", r.nodes, size,
                  s.ms.size(), s.failures, percentile(s.ms, 0.5), percentile(s.ms, 0.99),
                  percentile(s.ms, 1.0), s.total_ms > 0 ? s.pods / (s.total_ms / 1000) : 0.0,
                  r.nodes == 5000 && size == 64
                      ? (percentile(s.ms, 0.99) < 10 ? "  target p99 < 10 ms: met"
                                                     : "  target p99 < 10 ms: MISSED")
                      : "");
    }
    double pps = r.all.pods / (r.all.total_ms / 1000);
    std::printf("%-7d all    pods placed %lld, %.0f pods/s (target >= 20000: %s)\n", r.nodes,
                static_cast<long long>(r.all.pods), pps, pps >= 20000 ? "met" : "MISSED");
  }
  // How the cost grows with the cluster: the least-squares slope of log(cost) over log(nodes)
  // (1: linear; below 1: sub-linear), for the whole stream's time per pod and the p99s.
  if (results.size() >= 2) {
    auto slope = [&](auto cost) {
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      int k = 0;
      for (const RunResult& r : results) {
        const double c = cost(r);
        if (!(c > 0)) continue;
        const double x = std::log(r.nodes), y = std::log(c);
        sx += x, sy += y, sxx += x * x, sxy += x * y, ++k;
      }
      const double d = k * sxx - sx * sx;
      return k >= 2 && d != 0 ? (k * sxy - sx * sy) / d : 0.0;
    };
    auto p99Of = [](const RunResult& r, int size) {
      auto it = r.by_size.find(size);
      return it == r.by_size.end() ? 0.0 : percentile(it->second.ms, 0.99);
    };
    const double whole = slope([](const RunResult& r) { return r.all.total_ms / r.all.pods; });
    const double single = slope([&](const RunResult& r) { return p99Of(r, 1); });
    const double gang64 = slope([&](const RunResult& r) { return p99Of(r, 64); });
    std::printf("{\"bench\":\"placement\",\"growth_exponent\":{\"time_per_pod\":%.3f,"
                "\"single_p99\":%.3f,\"gang64_p99\":%.3f}}\n", whole, single, gang64);
    std::printf("growth exponent over %zu sizes (cost ~ nodes^k; 1 is linear): time per pod %.2f, "
                "single-pod p99 %.2f, 64-pod gang p99 %.2f\n", results.size(), whole, single, gang64);
  }
  for (const RunResult& r : results) {
    if (r.nodes != 50000) continue;
    const double pps = r.all.pods / (r.all.total_ms / 1000);
    auto p99 = [&](int size) {
      auto it = r.by_size.find(size);
      return it == r.by_size.end() ? 0.0 : percentile(it->second.ms, 0.99);
    };
    std::printf("50,000-node targets: whole stream %.0f pods/s (>= 20000: %s), single-pod p99 %.3f ms "
                "(< 1 ms: %s), 64-pod gang p99 %.3f ms (< 10 ms: %s)\n",
                pps, pps >= 20000 ? "met" : "MISSED", p99(1), p99(1) < 1 ? "met" : "MISSED", p99(64),
                p99(64) < 10 ? "met" : "MISSED");
  }
  std::printf("peak RSS %ld MiB\n", peakRssMiB());
  if (verify) {
    int64_t differed = 0, compared = 0;
    for (const RunResult& r : results) differed += r.differed, compared += r.compared;
    std::printf("verify: %lld decisions compared with the exhaustive search, %lld differ\n",
                static_cast<long long>(compared), static_cast<long long>(differed));
    if (differed > 0) return 1;
  }
  return 0;
}
