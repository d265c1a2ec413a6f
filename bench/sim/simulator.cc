#include "bench/sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/common.h"
#include "bench/sim/fgd.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/devices.h"
#include "scheduler/filter.h"
#include "scheduler/gang.h"
#include "scheduler/placement.h"
#include "scheduler/queue.h"
#include "scheduler/tenancy/tenancy.h"
#include "topology/model/topology.h"

namespace muster::bench {
namespace {


using proto::Quantity;
using scheduler::ClusterCache;
using scheduler::GangPlacement;
using scheduler::GangRequest;
using scheduler::NodeDevices;
using scheduler::NodeId;
using scheduler::PlacementResult;
using scheduler::Resources;
using scheduler::Unschedulable;

// The label the topology agent puts on a node for its GPU model.
constexpr const char* kModelLabel = proto::vocabulary::kLabelGpuModel;
constexpr char kSchedulerName[] = "muster-scheduler";
const absl::Time kEpoch = absl::FromUnixSeconds(1'700'000'000);

std::string indexed(const char* prefix, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s-%04d", prefix, i);
  return buf;
}

proto::Node toNode(const SimNode& n) {
  proto::Node node;
  node.meta.name = n.name;
  node.meta.labels["kubernetes.io/hostname"] = n.name;
  node.meta.labels["muster.dev/block"] = indexed("block", n.block);
  node.meta.labels["muster.dev/spine"] = indexed("spine", n.spine);
  node.meta.labels["muster.dev/rack"] = indexed("rack", n.rack);
  if (!n.model.empty()) node.meta.labels[kModelLabel] = n.model;
  node.status.allocatable = {
      {"cpu", Quantity::fromMilli(n.cpu_milli)},
      {"memory", Quantity::fromValue(n.memory_mib * 1024 * 1024, Quantity::Format::kBinarySI)},
      {"pods", Quantity::fromValue(110)}};
  if (n.gpus > 0) node.status.allocatable["nvidia.com/gpu"] = Quantity::fromValue(n.gpus);
  if (n.rdma_nics > 0) {
    node.status.allocatable["preferred.jp/rdma"] = Quantity::fromValue(n.rdma_nics);
  }
  node.status.conditions.push_back({"Ready", "True", "KubeletReady", ""});
  return node;
}

proto::Pod toPod(const SimJob& job, int index, absl::Time created, bool gpu_sharing) {
  proto::Pod p;
  p.meta.namespace_ = "sim";
  p.meta.name = absl::StrCat(job.name, "-", index);
  p.meta.creation_timestamp = absl::FormatTime(absl::RFC3339_full, created, absl::UTCTimeZone());
  if (job.pods > 1) {
    p.meta.annotations[std::string(proto::vocabulary::kGangNameAnnotation)] = job.name;
    p.meta.annotations[std::string(proto::vocabulary::kGangSizeAnnotation)] = std::to_string(job.pods);
  }
  p.spec.scheduler_name = kSchedulerName;
  p.spec.priority = job.priority;
  if (job.gpu_models.size() == 1) {
    p.spec.node_selector[kModelLabel] = job.gpu_models[0];
  } else if (!job.gpu_models.empty()) {
    proto::NodeSelectorTerm any_of;
    any_of.match_expressions.push_back({kModelLabel, "In", job.gpu_models});
    p.spec.affinity.emplace().node_affinity.required.emplace().node_selector_terms.push_back(any_of);
  }
  p.status.phase = "Pending";
  proto::Container c;
  c.name = "main";
  c.resources.requests = {
      {"cpu", Quantity::fromMilli(job.cpu_milli_per_pod)},
      {"memory",
       Quantity::fromValue(job.memory_mib_per_pod * 1024 * 1024, Quantity::Format::kBinarySI)}};
  if (gpu_sharing && job.gpus_per_pod == 1 && job.gpu_milli < 1000) {
    p.meta.annotations[proto::vocabulary::kGpuFractionAnnotation] = absl::StrCat(job.gpu_milli, "m");
  } else if (job.gpus_per_pod > 0) {
    c.resources.requests["nvidia.com/gpu"] = Quantity::fromValue(job.gpus_per_pod);
    c.resources.limits["nvidia.com/gpu"] = Quantity::fromValue(job.gpus_per_pod);
  }
  if (job.rdma_per_pod > 0) {
    c.resources.requests["preferred.jp/rdma"] = Quantity::fromValue(job.rdma_per_pod);
    c.resources.limits["preferred.jp/rdma"] = Quantity::fromValue(job.rdma_per_pod);
  }
  p.spec.containers.push_back(std::move(c));
  return p;
}

// A node's layout (workload.h) as its node agent would describe it.
std::shared_ptr<const NodeDevices> layoutDevices(NodeLayout layout, int gpus) {
  topology::Topology t;
  const int nics = gpus / 2;
  auto numaOfPair = [&](int pair) { return 2 * pair / nics; };
  for (int i = 0; i < gpus; ++i) {
    topology::Gpu g;
    g.index = i;
    g.numa_node = layout == NodeLayout::kSplit ? 0 : numaOfPair(i / 2);
    if (layout == NodeLayout::kSwitch) g.pcie_switch = indexed("switch", i / 2);
    t.gpus.push_back(std::move(g));
  }
  for (int p = 0; p < nics; ++p) {
    topology::RdmaNic n;
    n.name = indexed("mlx5", p);
    n.numa_node = layout == NodeLayout::kSplit ? 1 : numaOfPair(p);
    if (layout == NodeLayout::kSwitch) n.pcie_switch = indexed("switch", p);
    t.rdma_nics.push_back(std::move(n));
  }
  topology::computeGroups(&t);
  return std::make_shared<const NodeDevices>(std::move(t));
}

struct GpuNicCount {
  int64_t pods = 0, pcie = 0, aligned = 0;
};

// GPU↔NIC alignment of one decision, the same for every policy (simulator.h, SimResult::gpu_nic_*).
// Call before the placement is assumed.
GpuNicCount countAligned(const GangRequest& req, const GangPlacement& placement,
                         const ClusterCache& cache, scheduler::ResourceId gpu,
                         scheduler::ResourceId rdma) {
  GpuNicCount out;
  // (node, GPUs, NICs per pod) → pods of that shape placed on the node.
  std::map<std::tuple<NodeId, int64_t, int64_t>, int64_t> pods;
  for (size_t i = 0; i < req.members.size(); ++i) {
    const Resources& r = req.members[i]->requests;
    if (r[gpu] <= 0 || r[rdma] <= 0) continue;
    ++out.pods;
    ++pods[{*cache.findNode(placement.assignments[i].node), r[gpu], r[rdma]}];
  }
  for (const auto& [shape, k] : pods) {
    const auto& [id, gpus, nics] = shape;
    const scheduler::NodeInfo& node = cache.node(id);
    if (!node.devices) continue;
    scheduler::AlignedCapacity a = node.devices->alignedCapacity(
        {static_cast<int32_t>(gpus), static_cast<int32_t>(nics)}, node.requested[gpu],
        node.requested[rdma]);
    out.pcie += std::min<int64_t>(k, a.pcie);
    out.aligned += std::min<int64_t>(k, a.numa);
  }
  return out;
}

// The baselines. Members with the same constraints are placed as a group: first-fit fills nodes
// in scan order, best-fit fills the tightest feasible node first (for identical pods this is
// exactly "each pod on the tightest node": a node stays the tightest while it fills).
PlacementResult placeBaseline(const GangRequest& req, const ClusterCache& cache, Policy policy,
                              const std::vector<NodeId>& scan,
                              std::optional<scheduler::ResourceId> gpu) {
  absl::flat_hash_set<std::string> blocked(req.blocked_nodes.begin(), req.blocked_nodes.end());
  absl::flat_hash_map<NodeId, Resources> extra;
  GangPlacement out;
  out.key = req.key;
  out.assignments.resize(req.members.size());
  std::vector<bool> done(req.members.size(), false);
  for (size_t first = 0; first < req.members.size(); ++first) {
    if (done[first]) continue;
    const scheduler::PodInfo& pod = *req.members[first];
    std::vector<size_t> group;
    for (size_t i = first; i < req.members.size(); ++i) {
      if (!done[i] && req.members[i]->constraint_signature == pod.constraint_signature) {
        group.push_back(i);
      }
    }
    const int64_t want = static_cast<int64_t>(group.size());
    const scheduler::ResourceId dominant =
        gpu && pod.requests[*gpu] > 0 ? *gpu : scheduler::kCpu;
    struct Candidate {
      int64_t free_dominant;
      size_t position;
      NodeId id;
      int64_t capacity;
    };
    std::vector<Candidate> candidates;
    int64_t found = 0;
    for (size_t pos = 0; pos < scan.size(); ++pos) {
      NodeId id = scan[pos];
      const scheduler::NodeInfo& node = cache.node(id);
      if (!node.present || blocked.contains(node.name)) continue;
      if (!scheduler::filterStatic(pod, node).ok()) continue;
      Resources free = node.free();
      if (auto it = extra.find(id); it != extra.end()) free -= it->second;
      int64_t cap = scheduler::capacityFor(pod.requests, free, want);
      int64_t room = free[dominant];
      if (gpu && pod.gpu_milli > 0) {
        // A fraction: the GPUs' room for it; best-fit's tightest node is the one with the
        // fewest free thousandths of a GPU.
        cap = std::min(cap, scheduler::fractionRoom(node, *gpu, pod.gpu_milli, extra.contains(id) ? extra[id][*gpu] : 0));
        room = std::max<int64_t>(0, free[*gpu]) * 1000;
        for (const scheduler::NodeInfo::GpuShare& s : node.gpu_shares) room += 1000 - s.used;
      }
      if (cap <= 0) continue;
      candidates.push_back({room, pos, id, cap});
      found += cap;
      if (policy == Policy::kFirstFit && found >= want) break;
    }
    if (found < want) {
      Unschedulable u;
      u.message = absl::StrCat("gang ", req.key.toString(), " does not fit (", policyName(policy),
                               ")");
      return u;
    }
    if (policy == Policy::kBestFit) {
      std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return std::tie(a.free_dominant, a.position) < std::tie(b.free_dominant, b.position);
      });
    }
    size_t next = 0;
    for (const Candidate& c : candidates) {
      for (int64_t k = 0; k < c.capacity && next < group.size(); ++k, ++next) {
        size_t i = group[next];
        out.assignments[i] = {req.members[i]->key, cache.node(c.id).name};
        extra[c.id] += pod.requests;
        done[i] = true;
      }
      if (next == group.size()) break;
    }
  }
  return out;
}

// FGD (fgd.h) for a single pod.
PlacementResult placeFgd(const GangRequest& req, const ClusterCache& cache, const FgdScorer& fgd,
                         const std::vector<NodeId>& scan, scheduler::ResourceId gpu) {
  absl::flat_hash_set<std::string> blocked(req.blocked_nodes.begin(), req.blocked_nodes.end());
  const scheduler::PodInfo& pod = *req.members[0];
  std::optional<FgdScorer::Choice> c = fgd.choose(pod, cache, gpu, scan, [&](const scheduler::NodeInfo& n) {
    return n.present && !blocked.contains(n.name) && scheduler::filterStatic(pod, n).ok();
  });
  if (!c) {
    Unschedulable u;
    u.message = absl::StrCat("pod ", pod.key, " does not fit (fgd)");
    return u;
  }
  GangPlacement out;
  out.key = req.key;
  out.assignments.push_back({pod.key, cache.node(c->node).name, c->gpu_index});
  return out;
}

struct Event {
  double t;
  int kind;  // 0 completion, 1 arrival, 2 wakeup: completions free room before arrivals look
  int64_t seq;
  int job;
  bool operator>(const Event& o) const {
    return std::tie(t, kind, seq) > std::tie(o.t, o.kind, o.seq);
  }
};

struct JobState {
  double placed_at = -1;
  std::vector<NodeId> nodes;  // one per pod
  std::vector<std::string> pod_keys;
  int top = 0, top_min = 0, leaf = 0, leaf_min = 0;
  GpuNicCount gpu_nic;
};

// The fewest domains whose capacity (pods of this shape they can take now) sums to `pods`.
int fewestDomains(std::vector<int64_t> capacity, int64_t pods) {
  std::sort(capacity.rbegin(), capacity.rend());
  int n = 0;
  for (int64_t c : capacity) {
    if (pods <= 0) break;
    pods -= c;
    ++n;
  }
  return n;
}

}  // namespace

const char* policyName(Policy policy) {
  switch (policy) {
    case Policy::kMuster: return "muster";
    case Policy::kFirstFit: return "first-fit";
    case Policy::kBestFit: return "best-fit";
    case Policy::kFgd: return "fgd";
  }
  return "?";
}

std::string sizeBucket(int pods) {
  if (pods <= 1) return "1";
  if (pods <= 8) return "2-8";
  if (pods <= 16) return "9-16";
  if (pods <= 64) return "17-64";
  if (pods <= 256) return "65-256";
  return ">256";
}

SimResult simulate(const std::vector<SimNode>& nodes, const std::vector<SimJob>& jobs,
                   const SimOptions& options) {
  SimResult result;
  result.policy = policyName(options.policy);
  result.nodes = static_cast<int64_t>(nodes.size());
  result.jobs = static_cast<int64_t>(jobs.size());

  ClusterCache cache(kLevels);
  std::map<std::pair<NodeLayout, int>, std::shared_ptr<const NodeDevices>> layouts;
  for (const SimNode& n : nodes) {
    cache.addNode(toNode(n));
    result.gpus += n.gpus;
    if (n.layout == NodeLayout::kNone) continue;
    auto& devices = layouts[{n.layout, n.gpus}];  // shared: its memo serves every such node
    if (!devices) devices = layoutDevices(n.layout, n.gpus);
    cache.setNodeDevices(n.name, devices);
  }
  const scheduler::Topology& topo = cache.topology();
  const auto gpu = scheduler::findResource(proto::vocabulary::kGpuResource);
  const auto rdma = scheduler::findResource(proto::vocabulary::kRdmaResource);

  // The baselines' scan order: a seeded permutation of the nodes.
  std::vector<NodeId> scan;
  for (NodeId id = 0; id < cache.slotCount(); ++id) {
    if (cache.node(id).present) scan.push_back(id);
  }
  std::mt19937 rng(options.seed);
  std::shuffle(scan.begin(), scan.end(), rng);
  std::optional<FgdScorer> fgd;
  if (options.policy == Policy::kFgd) fgd.emplace(jobs);

  scheduler::SchedulerConfig config;
  config.topology_levels = kLevels;
  config.queue_reservation_after_seconds = static_cast<int64_t>(options.reservation_after_s);
  absl::Time now = kEpoch;
  scheduler::SchedulingQueue queue(
      config, [&now] { return now; },
      [](std::string_view, std::string_view) -> const proto::PodGroup* { return nullptr; });
  config.tenancy_enabled = options.tenancy;
  scheduler::tenancy::Tenancy tenancy(config, [](std::string_view) -> const proto::Labels* { return nullptr; });
  if (options.tenancy) {
    cache.setPodObserver([&tenancy](std::string_view key, const scheduler::PlacedPod& placed,
                                    const scheduler::Resources& requests, int32_t gpu_milli, int sign) {
      tenancy.observe(key, placed, requests, gpu_milli, sign);
    });
    queue.setTenancy([&tenancy](const proto::Pod& pod) { return tenancy.queueOf(pod); },
                     [&tenancy](std::string_view q) { return tenancy.rank(q); });
  }
  auto digest = [&result](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      result.placement_digest ^= (v >> (8 * i)) & 0xff;
      result.placement_digest *= 1099511628211ull;
    }
  };

  absl::flat_hash_map<std::string, int> job_of_gang;
  std::vector<JobState> state(jobs.size());
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  int64_t seq = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    events.push({jobs[i].arrival, 1, seq++, static_cast<int>(i)});
    job_of_gang[jobs[i].pods > 1 ? jobs[i].name : absl::StrCat(jobs[i].name, "-0")] =
        static_cast<int>(i);
    result.horizon_s = std::max(result.horizon_s, jobs[i].arrival);
  }
  const double interval =
      options.sample_interval_s > 0 ? options.sample_interval_s
                                    : std::max(1.0, result.horizon_s / 200);

  // GPU accounting for allocation and fragmentation, per node.
  std::vector<int> used(cache.slotCount(), 0);
  int64_t allocated = 0, partial_free = 0;
  auto partialFree = [&](NodeId id) -> int64_t {
    const int64_t total = cache.node(id).allocatable[*gpu];
    const int64_t g = total - used[id];
    return g > 0 && g < total ? g : 0;
  };
  int64_t allocated_milli = 0, pods_placed = 0, pods_arrived = 0;
  // The CPU (millicores) and memory (bytes) of the stream's GPU pods, for stranded GPUs.
  std::vector<std::pair<int64_t, int64_t>> gpu_shapes;
  if (options.capacity_job >= 0) {
    std::set<std::pair<int64_t, int64_t>> shapes;
    for (const SimJob& j : jobs)
      if (j.gpus_per_pod > 0) shapes.emplace(j.cpu_milli_per_pod, j.memory_mib_per_pod * 1024 * 1024);
    gpu_shapes.assign(shapes.begin(), shapes.end());
  }
  auto useGpus = [&](NodeId id, int delta) {
    partial_free -= partialFree(id);
    used[id] += delta;
    allocated += delta;
    partial_free += partialFree(id);
  };
  double last_t = 0, alloc_integral = 0, frag_integral = 0, next_sample = 0;
  auto fragmentation = [&] {
    int64_t free_total = result.gpus - allocated;
    return free_total > 0 ? static_cast<double>(partial_free) / static_cast<double>(free_total)
                          : 0.0;
  };
  auto advance = [&](double t) {
    double a = result.gpus ? static_cast<double>(allocated) / static_cast<double>(result.gpus) : 0;
    double f = fragmentation();
    while (next_sample <= t && next_sample <= result.horizon_s) {
      result.allocation_series.emplace_back(next_sample, a);
      result.fragmentation_series.emplace_back(next_sample, f);
      next_sample += interval;
    }
    double end = std::min(t, result.horizon_s);
    if (end > last_t) {
      alloc_integral += a * (end - last_t);
      frag_integral += f * (end - last_t);
    }
    last_t = std::max(last_t, end);
  };

  std::set<double> wakeups;
  int running = 0;
  size_t arrived = 0;
  std::vector<int64_t> block_cap(topo.levels[0].size()), rack_cap(topo.levels.back().size());

  auto schedulingPass = [&](double t) {
    if (options.tenancy && tenancy.refreshDue(now, false)) {
      std::vector<std::pair<std::string, scheduler::tenancy::Request>> pending;
      queue.forEachPendingGang([&](const std::string& tenant, const scheduler::GangKey&,
                                   const std::map<std::string, scheduler::PodInfoPtr>& members) {
        scheduler::tenancy::Request request;
        for (const auto& [key, member] : members)
          request += scheduler::tenancy::Request{member->requests, member->gpu_milli};
        pending.emplace_back(tenant, request);
      });
      tenancy.refresh(now, cache, pending, false);
    }
    while (auto attempt = queue.pop()) {
      ++result.decisions;
      if (auto verdict = scheduler::precheck(*attempt)) {
        ++result.failed_decisions;
        queue.reportUnschedulable(*attempt, *verdict, cache);
        continue;
      }
      if (options.tenancy && !attempt->members.empty()) {
        scheduler::tenancy::Request asked;
        for (const auto& member : attempt->members)
          asked += scheduler::tenancy::Request{member->requests, member->gpu_milli};
        if (auto refusal = tenancy.refuses(tenancy.queueOf(attempt->members.front()->pod()), asked)) {
          ++result.failed_decisions;
          Unschedulable verdict;
          verdict.message = refusal->message;
          verdict.waiting_for_quota = true;
          queue.reportUnschedulable(*attempt, verdict, cache);
          continue;
        }
      }
      GangRequest request = queue.buildRequest(*attempt);
      auto started = std::chrono::steady_clock::now();
      PlacementResult placed;
      if (options.policy == Policy::kMuster) {
        placed = scheduler::place(request, cache);
      } else if (options.policy == Policy::kFgd && fgd && gpu && request.members.size() == 1) {
        placed = placeFgd(request, cache, *fgd, scan, *gpu);
      } else {
        placed = placeBaseline(request, cache,
                               options.policy == Policy::kFgd ? Policy::kBestFit : options.policy, scan, gpu);
      }
      result.decision_wall_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      if (auto* verdict = std::get_if<Unschedulable>(&placed)) {
        ++result.failed_decisions;
        queue.reportUnschedulable(*attempt, *verdict, cache);
        continue;
      }
      auto& placement = std::get<GangPlacement>(placed);
      auto found = job_of_gang.find(attempt->key.name);
      if (found == job_of_gang.end()) std::abort();
      const int j = found->second;
      JobState& s = state[j];
      const SimJob& job = jobs[j];
      if (job.pods > 1) {
        // The fewest blocks and racks that could hold the gang now, before it is placed.
        std::fill(block_cap.begin(), block_cap.end(), 0);
        std::fill(rack_cap.begin(), rack_cap.end(), 0);
        absl::flat_hash_set<std::string> blocked(request.blocked_nodes.begin(),
                                                 request.blocked_nodes.end());
        const scheduler::PodInfo& pod = *attempt->members[0];
        for (NodeId id : topo.order) {
          const scheduler::NodeInfo& node = cache.node(id);
          if (blocked.contains(node.name) || !scheduler::filterStatic(pod, node).ok()) continue;
          int64_t cap = scheduler::capacityFor(pod.requests, node.free(), job.pods);
          block_cap[topo.domain[id][0]] += cap;
          rack_cap[topo.domain[id][kLevels.size() - 1]] += cap;
        }
        s.top_min = fewestDomains(block_cap, job.pods);
        s.leaf_min = fewestDomains(rack_cap, job.pods);
      }
      if (gpu && rdma) s.gpu_nic = countAligned(request, placement, cache, *gpu, *rdma);
      std::set<int32_t> blocks, racks;
      for (size_t i = 0; i < placement.assignments.size(); ++i) {
        if (!cache.assume(*attempt->members[i], placement.assignments[i].node,
                          placement.assignments[i].gpu_index).ok())
          std::abort();
        NodeId id = *cache.findNode(placement.assignments[i].node);
        s.nodes.push_back(id);
        s.pod_keys.push_back(attempt->members[i]->key);
        if (gpu) useGpus(id, static_cast<int>(cache.node(id).requested[*gpu]) - used[id]);
        allocated_milli += job.gpus_per_pod * job.gpu_milli;
        ++pods_placed;
        blocks.insert(topo.domain[id][0]);
        racks.insert(topo.domain[id][kLevels.size() - 1]);
      }
      s.top = static_cast<int>(blocks.size());
      s.leaf = static_cast<int>(racks.size());
      digest(static_cast<uint64_t>(j));
      digest(static_cast<uint64_t>(std::llround(t * 1000)));
      for (NodeId id : s.nodes) digest(static_cast<uint64_t>(id));
      queue.reportPlaced(*attempt, placement);
      s.placed_at = t;
      ++running;
      events.push({t + job.duration, 0, seq++, j});
    }
    if (auto wake = queue.nextWakeup()) {
      double w = std::max(absl::ToDoubleSeconds(*wake - kEpoch), t + 1e-3);
      if (wakeups.insert(w).second) events.push({w, 2, seq++, -1});
    }
  };

  while (!events.empty()) {
    const double t = events.top().t;
    if (options.end_s > 0 && t > options.end_s) break;
    // Only wakeups left with nothing running and every job arrived: what waits can never fit.
    if (running == 0 && arrived == jobs.size() && events.top().kind == 2) break;
    advance(t);
    now = kEpoch + absl::Seconds(t);
    bool terminated = false;
    while (!events.empty() && events.top().t == t) {
      Event e = events.top();
      events.pop();
      if (e.kind == 0) {
        JobState& s = state[e.job];
        for (size_t i = 0; i < s.pod_keys.size(); ++i) {
          (void)cache.forget(s.pod_keys[i]);
          queue.removePod(s.pod_keys[i]);
          if (gpu) useGpus(s.nodes[i], static_cast<int>(cache.node(s.nodes[i]).requested[*gpu]) - used[s.nodes[i]]);
          allocated_milli -= jobs[e.job].gpus_per_pod * jobs[e.job].gpu_milli;
          --pods_placed;
        }
        --running;
        terminated = true;
        result.makespan_s = std::max(result.makespan_s, t);
      } else if (e.kind == 1) {
        const SimJob& job = jobs[e.job];
        for (int k = 0; k < job.pods; ++k) {
          if (!queue.addOrUpdatePod(toPod(job, k, now, options.gpu_sharing)).ok()) std::abort();
        }
        pods_arrived += job.pods;
        ++arrived;
      } else {
        wakeups.erase(e.t);
      }
    }
    if (terminated) queue.onClusterEvent(scheduler::ClusterEvent::kPodTerminated);
    schedulingPass(t);
    if (options.capacity_job >= 0 && !result.at_capacity.taken &&
        static_cast<size_t>(options.capacity_job) < jobs.size() &&
        t >= jobs[static_cast<size_t>(options.capacity_job)].arrival) {
      CapacitySnapshot& snap = result.at_capacity;
      snap.taken = true;
      snap.allocation = result.gpus ? static_cast<double>(allocated) / static_cast<double>(result.gpus) : 0;
      snap.allocation_milli =
          result.gpus ? static_cast<double>(allocated_milli) / (1000.0 * static_cast<double>(result.gpus)) : 0;
      snap.pods_placed = pods_placed;
      snap.pods_arrived = pods_arrived;
      for (NodeId id = 0; id < cache.slotCount() && gpu; ++id) {
        const scheduler::NodeInfo& n = cache.node(id);
        if (!n.present) continue;
        const int64_t free_gpus = n.freeOf(*gpu);
        if (free_gpus <= 0) continue;
        snap.free_gpus += free_gpus;
        const int64_t cpu = n.freeOf(scheduler::kCpu), mem = n.freeOf(scheduler::kMemory);
        const bool usable = std::any_of(gpu_shapes.begin(), gpu_shapes.end(), [&](const auto& shape) {
          return shape.first <= cpu && shape.second <= mem;
        });
        if (!usable) snap.stranded_gpus += free_gpus;
      }
    }
  }
  advance(result.horizon_s);
  if (result.horizon_s > 0) {
    result.allocation_mean = alloc_integral / result.horizon_s;
    result.fragmentation_mean = frag_integral / result.horizon_s;
  }

  // Per-size statistics.
  std::map<std::string, std::vector<const SimJob*>> buckets;
  std::vector<double> all_delays;
  auto fill = [&](SizeStats& st, const std::vector<size_t>& idx) {
    std::vector<double> delays;
    int64_t gangs = 0;
    double top = 0, top_min = 0, leaf = 0, leaf_min = 0, top_at = 0, leaf_at = 0;
    for (size_t i : idx) {
      ++st.jobs;
      if (state[i].placed_at < 0) continue;
      ++st.placed;
      delays.push_back(state[i].placed_at - jobs[i].arrival);
      if (jobs[i].pods > 1) {
        ++gangs;
        top += state[i].top;
        top_min += state[i].top_min;
        leaf += state[i].leaf;
        leaf_min += state[i].leaf_min;
        top_at += state[i].top <= state[i].top_min;
        leaf_at += state[i].leaf <= state[i].leaf_min;
      }
      st.gpu_nic_pods += state[i].gpu_nic.pods;
      st.gpu_nic_pcie += state[i].gpu_nic.pcie;
      st.gpu_nic_aligned += state[i].gpu_nic.aligned;
    }
    if (!delays.empty()) {
      st.delay_mean_s = std::accumulate(delays.begin(), delays.end(), 0.0) /
                        static_cast<double>(delays.size());
      st.delay_p50_s = percentile(delays, 0.5);
      st.delay_p99_s = percentile(delays, 0.99);
    }
    if (gangs > 0) {
      double g = static_cast<double>(gangs);
      st.top_mean = top / g;
      st.top_min_mean = top_min / g;
      st.top_at_min = top_at / g;
      st.leaf_mean = leaf / g;
      st.leaf_min_mean = leaf_min / g;
      st.leaf_at_min = leaf_at / g;
    }
  };
  std::map<std::string, std::vector<size_t>> by;
  std::vector<size_t> all, gangs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    by[sizeBucket(jobs[i].pods)].push_back(i);
    all.push_back(i);
    if (jobs[i].pods > 1) gangs.push_back(i);
    if (state[i].placed_at >= 0) ++result.placed;
  }
  for (const auto& [bucket, idx] : by) fill(result.by_size[bucket], idx);
  fill(result.by_size["all"], all);
  fill(result.gangs, gangs);
  const SizeStats& everything = result.by_size["all"];
  result.gpu_nic_pods = everything.gpu_nic_pods;
  result.gpu_nic_pcie = everything.gpu_nic_pcie;
  result.gpu_nic_aligned = everything.gpu_nic_aligned;
  return result;
}

}  // namespace muster::bench
