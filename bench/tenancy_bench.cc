// In-process tenancy benchmark (no API server), two sections:
//
// 1. Decision cost. What the scheduler does for a gang of a queue below its fair share that does
//    not fit (Scheduler::preempt): Tenancy::refresh with every pending gang (fair share over the
//    whole tree), then the victim choice, choosePreemption with the reclaim hooks of
//    scheduler/tenancy/reclaim.h (the scheduler's own function), and, when reclaim finds nothing,
//    priority preemption with the quota-only hook. Target: <= 100 ms per pending gang at 1,000
//    queues and 10,000 nodes.
// 2. Queue status writes. One simulated hour in which allocation changes every second (gangs end,
//    others start in their place, pending demand moves), refresh then dueStatuses(now, 10) each
//    second, as Scheduler::refreshTenancy and writeQueueStatuses do (10 = kQueueWritesPerSecond in
//    scheduler/scheduler_tenancy.cc). Counts the writes the scheduler would send (its own rate
//    limiter), not writes measured at an API server. Target: <= 10 writes/s at 1,000 queues.
//
// The cluster: N 8-GPU nodes in racks of 16 (bench/common.h). The queues: a three-level tree of D
// departments × D teams each × L leaves each (D = round(cbrt(Q)), L = Q / D², so --queues 1000 is
// 10 × 10 × 10: 1,000 leaves, 1,110 Queue objects). Leaf GPU quotas are drawn in proportion to
// U(1, 3) and sum (down to whole GPUs) to the cluster's GPUs; a team's quota is the sum of its
// leaves', a department's of its teams'. Limits: 3 × quota for leaves, 2 × quota above. Over-quota
// weights U(0.5, 4). Every GPU is held by running gangs (per 4 nodes of a rack: 4 gangs of 4 × 2
// GPUs one pod per node, or 4 single 8-GPU pods, or 2 gangs of 2 × 8 GPUs), priority 0-900, 1
// minute to 1 day old; with probability --locality all gangs of the 4 nodes are one leaf's, else
// each gang's is drawn on its own. Leaves are drawn so that 30% of leaves hold 1.5-2.5× their quota
// (borrowed), 40% hold 0.2-0.7× (below) and 30% about their quota (all scaled to fill the
// cluster). Pending: the below leaves want their quota back plus 32 GPUs (gangs of 8, 32 and 128
// GPUs), and every other leaf has one 8-GPU gang pending with probability 1/2.
//
// Decisions: a gang of a below-fair-share leaf, of each shape: 1 × 8 GPUs (no level), 4 × 8 GPUs
// rack-required, 16 × 8 GPUs rack-required (a whole rack). Each plan is checked: every victim's
// queue is one mayReclaimFrom allows (reclaim) and the set passes victimsAllowed; every victim is a
// whole gang; the placement fits once the victims are suspended (on the cache, restored after),
// within one rack when the rack is required.
//
//   muster_tenancy_bench [--nodes 10000] [--queues 1000] [--decisions 50] [--seed 1]
//                        [--hours 1] [--churn 10] [--reclaim-refreshes 0] [--locality 0.5]
//                        [--verbose 0]
//
// --decisions is per shape. --churn: gangs that end (and as many that start) per simulated second.
// --verbose 1: a line per decision (its times, simulations and victims).
// --reclaim-refreshes: refreshes with now_if_changed per second on top of the periodic one, as
// Scheduler::preempt does before each reclaim (each may start another writeQueueStatuses).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/common.h"
#include "proto/objects.h"
#include "proto/queue.h"
#include "proto/vocabulary.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/placement.h"
#include "scheduler/pod_info.h"
#include "scheduler/preemption.h"
#include "scheduler/tenancy/reclaim.h"
#include "scheduler/tenancy/tenancy.h"

namespace {

using muster::proto::Quantity;
using namespace muster::scheduler;
using muster::bench::kLevels;
using muster::bench::kNodesPerRack;
using muster::bench::makeGangPod;
using muster::bench::makeNode;
using muster::bench::percentile;
constexpr int kRackLevel = 2;
constexpr size_t kQueueWritesPerSecond = 10;  // scheduler/scheduler_tenancy.cc
constexpr char kGpu[] = "nvidia.com/gpu";

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

tenancy::Request gpuRequest(int gpus) {
  tenancy::Request r;
  r.requests[*findResource(kGpu)] = gpus;
  r.requests[kCpu] = gpus * 12 * 1000;
  return r;
}

int rackOf(const std::string& node) { return std::atoi(node.c_str() + 5) / kNodesPerRack; }

// One running gang: its pods (keys) on their nodes.
struct Running {
  std::string name;
  std::string queue;
  int pod_gpus = 0;
  int32_t priority = 0;
  std::vector<std::pair<std::string, std::string>> pods;  // pod name, node
};

struct Leaf {
  std::string name;
  int64_t quota = 0;   // GPUs
  double target = 0;   // GPUs to hold at the start
  double remaining = 0;
  enum { kBorrower, kBelow, kAt } kind = kAt;
};

struct Stats {
  std::vector<double> refresh_ms, choose_ms, total_ms, hooks_ms, ratio;
  double victim_pods = 0, victim_gangs = 0, victim_gpus = 0, needed_gpus = 0, sims = 0;
  int plans = 0, reclaims = 0, fallbacks = 0, none = 0, invalid = 0;
};

void printRow(const std::string& name, const Stats& s) {
  const double n = std::max(s.plans, 1);
  std::printf("%-8s %4zu %5d %5d %4d | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f |"
              " %6.1f %5.1f %6.2f %5.2f %5.1f\n",
              name.c_str(), s.total_ms.size(), s.reclaims, s.fallbacks, s.none,
              percentile(s.refresh_ms, 0.5), percentile(s.refresh_ms, 0.99),
              percentile(s.refresh_ms, 1.0), percentile(s.choose_ms, 0.5),
              percentile(s.choose_ms, 0.99), percentile(s.choose_ms, 1.0),
              percentile(s.total_ms, 0.5), percentile(s.total_ms, 0.99),
              percentile(s.total_ms, 1.0), s.victim_pods / n, s.victim_gangs / n,
              s.needed_gpus > 0 ? s.victim_gpus / s.needed_gpus : 0.0, percentile(s.ratio, 1.0),
              s.sims / n);
}

void printJson(const std::string& name, const Stats& s, int nodes, size_t queues, size_t leaves,
               int running_pods) {
  const double n = std::max(s.plans, 1);
  std::printf(
      "{\"section\":\"decision\",\"shape\":\"%s\",\"nodes\":%d,\"queues\":%zu,\"leaves\":%zu,"
      "\"running_pods\":%d,\"decisions\":%zu,\"reclaims\":%d,\"fallbacks\":%d,\"none\":%d,"
      "\"invalid\":%d,\"refresh_p50_ms\":%.3f,\"refresh_p99_ms\":%.3f,\"refresh_max_ms\":%.3f,"
      "\"choose_p50_ms\":%.3f,\"choose_p99_ms\":%.3f,\"choose_max_ms\":%.3f,"
      "\"total_p50_ms\":%.3f,\"total_p99_ms\":%.3f,\"total_max_ms\":%.3f,"
      "\"hooks_p50_ms\":%.3f,\"hooks_max_ms\":%.3f,\"victim_pods_mean\":%.2f,"
      "\"victim_gangs_mean\":%.2f,\"over_eviction\":%.3f,\"over_eviction_max\":%.3f,"
      "\"simulations_mean\":%.2f}\n",
      name.c_str(), nodes, queues, leaves, running_pods, s.total_ms.size(), s.reclaims,
      s.fallbacks, s.none, s.invalid, percentile(s.refresh_ms, 0.5),
      percentile(s.refresh_ms, 0.99), percentile(s.refresh_ms, 1.0), percentile(s.choose_ms, 0.5),
      percentile(s.choose_ms, 0.99), percentile(s.choose_ms, 1.0), percentile(s.total_ms, 0.5),
      percentile(s.total_ms, 0.99), percentile(s.total_ms, 1.0), percentile(s.hooks_ms, 0.5),
      percentile(s.hooks_ms, 1.0), s.victim_pods / n, s.victim_gangs / n,
      s.needed_gpus > 0 ? s.victim_gpus / s.needed_gpus : 0.0, percentile(s.ratio, 1.0),
      s.sims / n);
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 10000;
  int queues_flag = 1000;
  int decisions = 50;
  uint32_t seed = 1;
  double hours = 1;
  int churn = 10;
  int reclaim_refreshes = 0;
  double locality = 0.5;
  bool verbose = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--nodes") nodes = std::atoi(argv[i + 1]);
    else if (flag == "--queues") queues_flag = std::atoi(argv[i + 1]);
    else if (flag == "--decisions") decisions = std::atoi(argv[i + 1]);
    else if (flag == "--seed") seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (flag == "--hours") hours = std::atof(argv[i + 1]);
    else if (flag == "--churn") churn = std::atoi(argv[i + 1]);
    else if (flag == "--reclaim-refreshes") reclaim_refreshes = std::atoi(argv[i + 1]);
    else if (flag == "--locality") locality = std::atof(argv[i + 1]);
    else if (flag == "--verbose") verbose = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr,
                   "usage: %s [--nodes 10000] [--queues 1000] [--decisions 50] [--seed 1] "
                   "[--hours 1] [--churn 10] [--reclaim-refreshes 0] [--locality 0.5] [--verbose 0]\n",
                   argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0 || nodes < 16 || queues_flag < 1) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);

  // --- the tenancy and the cache that feeds it ---------------------------------------------------
  SchedulerConfig config;
  config.tenancy_enabled = true;
  tenancy::Tenancy tenancy(config, [](std::string_view) -> const muster::proto::Labels* { return nullptr; });
  ClusterCache cache(kLevels);
  cache.setPodObserver([&tenancy](std::string_view key, const PlacedPod& placed,
                                  const Resources& requests, int32_t gpu_milli, int sign) {
    tenancy.observe(key, placed, requests, gpu_milli, sign);
  });
  for (int i = 0; i < nodes; ++i) cache.addNode(makeNode(i));
  const int64_t total_gpus = int64_t{nodes} * 8;

  // --- the queue tree ---------------------------------------------------------------------------------
  const int depts = std::max(1, static_cast<int>(std::lround(std::cbrt(queues_flag))));
  const int teams = depts * depts;
  const int leaves_per_team = std::max(1, queues_flag / teams);
  std::vector<Leaf> leaves;
  std::vector<double> w;
  for (int t = 0; t < teams; ++t)
    for (int l = 0; l < leaves_per_team; ++l) {
      Leaf leaf;
      leaf.name = absl::StrCat("d", t / depts, "-t", t % depts, "-q", l);
      leaves.push_back(leaf);
      w.push_back(uniform(1, 3));
    }
  double wsum = 0;
  for (double x : w) wsum += x;
  std::vector<int64_t> team_quota(teams, 0), dept_quota(depts, 0);
  auto makeQueue = [&](const std::string& name, const std::string& parent, int64_t quota, int64_t limit) {
    auto q = std::make_shared<muster::proto::Queue>();
    q->meta.name = name;
    q->meta.generation = 1;
    q->spec.parent = parent;
    muster::proto::QueueResource r;
    r.quota = Quantity::fromValue(quota);
    r.limit = Quantity::fromValue(limit);
    r.over_quota_weight = std::round(uniform(0.5, 4) * 10) / 10;
    q->spec.resources[kGpu] = r;
    return q;
  };
  std::vector<std::shared_ptr<const muster::proto::Queue>> queue_objects;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const int t = static_cast<int>(i) / leaves_per_team;
    leaves[i].quota = static_cast<int64_t>(std::floor(static_cast<double>(total_gpus) * w[i] / wsum));
    team_quota[t] += leaves[i].quota;
    queue_objects.push_back(makeQueue(leaves[i].name, absl::StrCat("d", t / depts, "-t", t % depts),
                                      leaves[i].quota, 3 * leaves[i].quota));
  }
  for (int t = 0; t < teams; ++t) {
    dept_quota[t / depts] += team_quota[t];
    queue_objects.push_back(makeQueue(absl::StrCat("d", t / depts, "-t", t % depts),
                                      absl::StrCat("d", t / depts), team_quota[t], 2 * team_quota[t]));
  }
  for (int d = 0; d < depts; ++d)
    queue_objects.push_back(makeQueue(absl::StrCat("d", d), "", dept_quota[d], 2 * dept_quota[d]));
  for (auto& q : queue_objects) tenancy.setQueue(q);
  const size_t queue_count = queue_objects.size();

  // --- who holds what: targets, then every GPU filled --------------------------------------------
  double target_sum = 0;
  for (Leaf& leaf : leaves) {
    const double u = uniform(0, 1);
    double factor;
    if (u < 0.3) { leaf.kind = Leaf::kBorrower; factor = uniform(1.5, 2.5); }
    else if (u < 0.7) { leaf.kind = Leaf::kBelow; factor = uniform(0.2, 0.7); }
    else { leaf.kind = Leaf::kAt; factor = uniform(0.9, 1.1); }
    leaf.target = factor * static_cast<double>(leaf.quota);
    target_sum += leaf.target;
  }
  std::vector<size_t> tickets;  // a leaf per 8 GPUs of its target, shuffled
  for (size_t i = 0; i < leaves.size(); ++i) {
    leaves[i].target *= static_cast<double>(total_gpus) / target_sum;
    leaves[i].remaining = leaves[i].target;
    for (int k = 0; k < static_cast<int>(std::ceil(leaves[i].target / 8)); ++k) tickets.push_back(i);
  }
  std::shuffle(tickets.begin(), tickets.end(), rng);
  auto drawLeaf = [&](int gpus) {
    size_t chosen = leaves.size();
    while (!tickets.empty()) {
      const size_t i = tickets.back();
      tickets.pop_back();
      if (leaves[i].remaining > 0) { chosen = i; break; }
    }
    if (chosen == leaves.size()) {
      chosen = 0;
      for (size_t i = 1; i < leaves.size(); ++i)
        if (leaves[i].remaining > leaves[chosen].remaining) chosen = i;
    }
    leaves[chosen].remaining -= gpus;
    return chosen;
  };
  std::uniform_int_distribution<int> priority(0, 9);
  std::uniform_int_distribution<int> age(60, 86400);
  std::vector<Running> running;
  absl::flat_hash_map<std::string, size_t> gang_of_pod;  // pod key → index in running
  int gang_counter = 0;
  auto place = [&](Running g, const std::string& started) {
    const int size = static_cast<int>(g.pods.size());
    for (auto& [pod, node] : g.pods)
      cache.addPod(makeGangPod(pod, g.pod_gpus, g.priority, g.name, size, node, started, g.queue));
    const size_t index = running.size();
    for (auto& [pod, node] : g.pods) gang_of_pod[absl::StrCat("bench/", pod)] = index;
    running.push_back(std::move(g));
  };
  auto newGang = [&](const std::string& queue, int pods, int pod_gpus, const std::vector<std::string>& on) {
    Running g;
    g.name = absl::StrCat("run-", gang_counter++);
    g.queue = queue;
    g.pod_gpus = pod_gpus;
    g.priority = priority(rng) * 100;
    for (int k = 0; k < pods; ++k) g.pods.emplace_back(absl::StrCat(g.name, "-", k), on[k]);
    return g;
  };
  for (int base = 0; base + 4 <= nodes; base += 4) {
    std::vector<std::string> n4;
    for (int k = 0; k < 4; ++k) n4.push_back(absl::StrCat("node-", base + k));
    const int pattern = static_cast<int>(pick(10));
    const std::string started =
        absl::FormatTime(absl::RFC3339_sec, now - absl::Seconds(age(rng)), absl::UTCTimeZone());
    // With --locality, the 4 nodes' gangs are all one leaf's (teams' work clusters in racks).
    const bool local = uniform(0, 1) < locality;
    const size_t owner = local ? drawLeaf(32) : leaves.size();
    auto leafFor = [&](int gpus) { return leaves[local ? owner : drawLeaf(gpus)].name; };
    if (pattern < 4) {  // 4 gangs of 4 × 2 GPUs, a pod on each node
      for (int g = 0; g < 4; ++g) place(newGang(leafFor(8), 4, 2, n4), started);
    } else if (pattern < 7) {  // 4 lone 8-GPU pods
      for (int k = 0; k < 4; ++k) place(newGang(leafFor(8), 1, 8, {n4[k]}), started);
    } else {  // 2 gangs of 2 × 8 GPUs
      for (int g = 0; g < 2; ++g) place(newGang(leafFor(16), 2, 8, {n4[2 * g], n4[2 * g + 1]}), started);
    }
  }
  (void)cache.topology();
  int over_limit = 0;
  for (const auto& q : queue_objects)
    if (tenancy.allocated(q->meta.name, kGpu) > q->spec.resources.at(kGpu).limit->milliValue()) ++over_limit;

  // Pending demand.
  std::vector<std::pair<std::string, tenancy::Request>> pending;
  const int pending_sizes[] = {8, 32, 128};
  for (const Leaf& leaf : leaves) {
    const int64_t held = tenancy.allocated(leaf.name, kGpu) / 1000;
    if (leaf.kind == Leaf::kBelow) {
      for (int64_t want = leaf.quota - held + 32; want > 0;) {
        const int g = pending_sizes[pick(3)];
        pending.emplace_back(leaf.name, gpuRequest(g));
        want -= g;
      }
    } else if (pick(2) == 0) {
      pending.emplace_back(leaf.name, gpuRequest(8));
    }
  }
  int borrowers = 0, below = 0;
  for (const Leaf& leaf : leaves) {
    const int64_t held = tenancy.allocated(leaf.name, kGpu) / 1000;
    borrowers += held > leaf.quota;
    below += held < leaf.quota;
  }
  now += absl::Seconds(1);
  tenancy.refresh(now, cache, pending, true);
  std::vector<size_t> reclaimers;  // leaves below their fair share
  for (size_t i = 0; i < leaves.size(); ++i)
    if (tenancy.belowFairShare(leaves[i].name)) reclaimers.push_back(i);
  std::printf("# %d nodes (%lld GPUs), %zu queues (%d departments x %d teams x %d leaves = %zu leaves),"
              " %zu running pods in %zu gangs, every GPU held\n",
              nodes, static_cast<long long>(total_gpus), queue_count, depts, depts, leaves_per_team,
              leaves.size(), gang_of_pod.size(), running.size());
  std::printf("# leaves above quota %d, below quota %d, below fair share %zu; %zu pending gangs; "
              "queues over their limit: %d\n",
              borrowers, below, reclaimers.size(), pending.size(), over_limit);
  if (reclaimers.empty()) {
    std::fprintf(stderr, "no leaf below its fair share\n");
    return 1;
  }

  // --- 1. decisions -----------------------------------------------------------------------------------
  struct Shape {
    std::string name;
    int pods;
    int required_level;
  };
  const std::vector<Shape> shapes{{"1x8", 1, -1}, {"4x8rack", 4, kRackLevel}, {"16x8rack", 16, kRackLevel}};
  std::printf("\n## 1. Decision cost per pending gang (ms): refresh = Tenancy::refresh with every "
              "pending gang; choose = choosePreemption with the reclaim hooks (and the priority "
              "fallback when reclaim finds nothing); total = both\n");
  std::printf("%-8s %4s %5s %5s %4s | %7s %7s %7s | %7s %7s %7s | %7s %7s %7s | %6s %5s %6s %5s %5s\n",
              "shape", "n", "recl", "fallb", "none", "refr50", "refr99", "refrmax", "chse50",
              "chse99", "chsemax", "tot50", "tot99", "totmax", "vpods", "vgang", "overev", "ovmax",
              "sims");
  Stats all;
  const int running_pods = static_cast<int>(gang_of_pod.size());
  int invalid_total = 0;
  int64_t eligible_calls = 0, allowed_calls = 0, open_racks = 0, open_rack_checks = 0;
  double allowed_total_ms = 0;
  for (const Shape& s : shapes) {
    Stats st;
    for (int d = 0; d < decisions; ++d) {
      const Leaf& leaf = leaves[reclaimers[pick(reclaimers.size())]];
      const int gpus = s.pods * 8;
      GangRequest req;
      req.key = GangKey{"bench", absl::StrCat("want-", s.name, "-", d), s.pods == 1};
      req.min_member = s.pods;
      req.required_level = s.required_level;
      const int32_t prio = 500;
      for (int i = 0; i < s.pods; ++i)
        req.members.push_back(*makePodInfo(
            makeGangPod(absl::StrCat(req.key.name, "-", i), 8, prio, req.key.name, s.pods, "", "",
                        leaf.name)));
      tenancy::Request asked;
      for (const PodInfoPtr& m : req.members) asked += tenancy::Request{m->requests, m->gpu_milli};
      pending.emplace_back(leaf.name, asked);  // the gang itself is pending too

      // (a) fair share over the whole tree, forced as before a reclaim (a second later, so due).
      now += absl::Seconds(1);
      auto start = Clock::now();
      tenancy.refresh(now, cache, pending, /*now_if_changed=*/true);
      const double refresh_ms = msSince(start);
      pending.pop_back();

      // (b) the victim choice, as Scheduler::preempt.
      double hooks_ms = 0, allowed_ms = 0;
      auto timeHooks = [&](PreemptionRequest& r) {
        if (r.eligible)
          r.eligible = [inner = r.eligible, &hooks_ms, &eligible_calls](const GangKey& k, const std::vector<UnitMember>& m, int32_t p) {
            auto t = Clock::now();
            const bool ok = inner(k, m, p);
            hooks_ms += msSince(t);
            ++eligible_calls;
            return ok;
          };
        r.allowed = [inner = r.allowed, &hooks_ms, &allowed_ms, &allowed_calls](const std::vector<const std::vector<UnitMember>*>& u) {
          auto t = Clock::now();
          const bool ok = inner(u);
          const double ms = msSince(t);
          hooks_ms += ms;
          allowed_ms += ms;
          ++allowed_calls;
          return ok;
        };
      };
      PreemptionRequest p;
      p.priority = prio;
      p.now = now;
      start = Clock::now();
      PreemptionResult result = NoPreemption{};
      bool reclaimed = false;
      if (tenancy.belowFairShare(leaf.name)) {
        PreemptionRequest r = p;
        tenancy::withReclaimHooks(r, tenancy, leaf.name, asked, /*reclaim=*/true);
        timeHooks(r);
        result = choosePreemption(req, r, cache);
        reclaimed = std::holds_alternative<PreemptionPlan>(result);
      }
      if (!reclaimed) {
        tenancy::withReclaimHooks(p, tenancy, leaf.name, asked, /*reclaim=*/false);
        timeHooks(p);
        result = choosePreemption(req, p, cache);
      }
      const double choose_ms = msSince(start);
      st.refresh_ms.push_back(refresh_ms);
      st.choose_ms.push_back(choose_ms);
      st.total_ms.push_back(refresh_ms + choose_ms);
      st.hooks_ms.push_back(hooks_ms);
      allowed_total_ms += allowed_ms;
      const PreemptionPlan* plan = std::get_if<PreemptionPlan>(&result);
      if (verbose)
        std::printf("  %s %s: refresh %.2f ms, choose %.2f ms (hooks %.2f, allowed %.2f ms), %s, "
                    "%d simulations, %zu victim gangs\n",
                    s.name.c_str(), leaf.name.c_str(), refresh_ms, choose_ms, hooks_ms, allowed_ms,
                    plan ? (reclaimed ? "reclaim" : "priority") : "none", plan ? plan->place_calls : 0,
                    plan ? plan->victims.size() : size_t{0});
      if (!plan) {
        ++st.none;
        if (s.pods == kNodesPerRack) {
          // Why: racks whose every gang is in a queue this leaf may reclaim from at all.
          std::vector<char> open((nodes + kNodesPerRack - 1) / kNodesPerRack, 1);
          for (const Running& g : running)
            if (!tenancy.mayReclaimFrom(leaf.name, g.queue))
              for (const auto& [pod, node] : g.pods) open[rackOf(node)] = 0;
          for (char o : open) open_racks += o;
          ++open_rack_checks;
        }
        continue;
      }
      ++st.plans;
      (reclaimed ? st.reclaims : st.fallbacks) += 1;
      st.victim_pods += plan->victimPods();
      st.victim_gangs += static_cast<double>(plan->victims.size());
      st.sims += plan->place_calls;
      // Check the plan.
      bool ok = true;
      std::vector<std::vector<std::string>> units;
      double evicted = 0;
      for (const VictimUnit& v : plan->victims) {
        units.push_back(v.pods);
        if (v.pods.empty()) { ok = false; continue; }
        // Whole gangs: every pod of one running gang, and all of them.
        auto g = gang_of_pod.find(v.pods.front());
        if (g == gang_of_pod.end()) { ok = false; continue; }
        std::set<std::string> want, got(v.pods.begin(), v.pods.end());
        for (const auto& [pod, node] : running[g->second].pods) want.insert(absl::StrCat("bench/", pod));
        ok &= want == got;
        if (reclaimed) ok &= tenancy.mayReclaimFrom(leaf.name, tenancy.queueOfPod(v.pods.front()));
        for (const std::string& pod : v.pods) evicted += static_cast<double>(tenancy.podUnits(pod, kGpu)) / 1000;
      }
      ok &= tenancy.victimsAllowed(leaf.name, asked, units, reclaimed);
      st.victim_gpus += evicted;
      st.needed_gpus += gpus;
      st.ratio.push_back(evicted / gpus);
      // The placement fits once the victims are gone (and in one rack when required).
      for (const VictimUnit& v : plan->victims)
        for (const std::string& pod : v.pods) ok &= cache.suspend(pod).ok();
      std::set<int> racks;
      ok &= plan->placement.assignments.size() == req.members.size();
      for (size_t i = 0; i < plan->placement.assignments.size() && i < req.members.size(); ++i) {
        ok &= cache.assume(*req.members[i], plan->placement.assignments[i].node).ok();
        racks.insert(rackOf(plan->placement.assignments[i].node));
      }
      if (s.required_level == kRackLevel) ok &= racks.size() == 1;
      for (NodeId id = 0; id < cache.slotCount(); ++id)
        ok &= fitsIn(cache.node(id).requested, cache.node(id).allocatable);
      for (const PodInfoPtr& m : req.members) (void)cache.forget(m->key);
      for (const VictimUnit& v : plan->victims)
        for (const std::string& pod : v.pods) (void)cache.resume(pod);
      if (!ok) ++st.invalid;
    }
    printRow(s.name, st);
    printJson(s.name, st, nodes, queue_count, leaves.size(), running_pods);
    invalid_total += st.invalid;
    for (auto v : {&Stats::refresh_ms, &Stats::choose_ms, &Stats::total_ms, &Stats::hooks_ms, &Stats::ratio})
      (all.*v).insert((all.*v).end(), (st.*v).begin(), (st.*v).end());
    all.victim_pods += st.victim_pods;
    all.victim_gangs += st.victim_gangs;
    all.victim_gpus += st.victim_gpus;
    all.needed_gpus += st.needed_gpus;
    all.sims += st.sims;
    all.plans += st.plans;
    all.reclaims += st.reclaims;
    all.fallbacks += st.fallbacks;
    all.none += st.none;
    all.invalid += st.invalid;
  }
  printRow("all", all);
  printJson("all", all, nodes, queue_count, leaves.size(), running_pods);
  const double decided = static_cast<double>(std::max<size_t>(all.total_ms.size(), 1));
  std::printf("# time in the tenancy hooks (eligible + allowed) per decision: p50 %.2f ms, max %.2f ms"
              " (allowed: %.2f ms mean); calls per decision: eligible %.0f, allowed %.1f;"
              " invalid plans: %d\n",
              percentile(all.hooks_ms, 0.5), percentile(all.hooks_ms, 1.0), allowed_total_ms / decided,
              static_cast<double>(eligible_calls) / decided, static_cast<double>(allowed_calls) / decided,
              invalid_total);
  if (open_rack_checks > 0)
    std::printf("# where a whole rack found no plan: racks whose every gang is in a queue the leaf may "
                "reclaim from (mayReclaimFrom), mean %.1f of %d (victimsAllowed then bounds the set)\n",
                static_cast<double>(open_racks) / static_cast<double>(open_rack_checks),
                (nodes + kNodesPerRack - 1) / kNodesPerRack);

  // --- 2. Queue status writes ---------------------------------------------------------------------------
  // The counts below are the writes the scheduler would send through its own limiter
  // (dueStatuses(now, kQueueWritesPerSecond) after each refresh), not writes measured at an API
  // server.
  std::printf("\n## 2. Queue status writes over %.2g simulated hour(s), %zu queues, %d gangs ending "
              "and starting per second, %d reclaim refreshes per second: the writes the scheduler "
              "would send (its own limiter, dueStatuses(now, %zu) after each refresh), not measured "
              "at an API server\n",
              hours, queue_count, churn, reclaim_refreshes, kQueueWritesPerSecond);
  struct Figures {
    int64_t allocated, fair_share, pending_gangs;
    bool operator==(const Figures&) const = default;
  };
  auto figures = [&](const std::string& q) {
    return Figures{tenancy.allocated(q, kGpu), tenancy.fairShare(q, kGpu), tenancy.pendingGangs(q)};
  };
  std::vector<std::string> names;
  for (const auto& q : queue_objects) names.push_back(q->meta.name);
  absl::flat_hash_map<std::string, Figures> written;        // what the last write said
  absl::flat_hash_map<std::string, absl::Time> dirty_since;  // figures differ from the write since
  std::vector<double> ages;                                  // s from a change to its write
  absl::flat_hash_map<std::string, Figures> previous;       // at the last refresh
  int64_t changed_total = 0, refreshes = 0;
  auto churnOnce = [&]() {
    // A gang ends; another of the same shape starts in its place, in a random leaf.
    const size_t i = pick(running.size());
    Running old = running[i];
    for (auto& [pod, node] : old.pods) {
      cache.removePod(absl::StrCat("bench/", pod));
      gang_of_pod.erase(absl::StrCat("bench/", pod));
    }
    std::vector<std::string> on;
    for (auto& [pod, node] : old.pods) on.push_back(node);
    Running g = newGang(leaves[pick(leaves.size())].name, static_cast<int>(on.size()), old.pod_gpus, on);
    const int size = static_cast<int>(g.pods.size());
    const std::string started = absl::FormatTime(absl::RFC3339_sec, now, absl::UTCTimeZone());
    for (auto& [pod, node] : g.pods) {
      cache.addPod(makeGangPod(pod, g.pod_gpus, g.priority, g.name, size, node, started, g.queue));
      gang_of_pod[absl::StrCat("bench/", pod)] = i;
    }
    running[i] = std::move(g);
    // Pending demand moves: one pending gang starts, another arrives.
    pending[pick(pending.size())] = {leaves[pick(leaves.size())].name, gpuRequest(pending_sizes[pick(3)])};
    tenancy.noteDemandChanged();
  };
  const int seconds = static_cast<int>(std::lround(hours * 3600));
  std::vector<double> per_second, refresh_cost, due_cost;
  int64_t writes_total = 0, usage_only = 0, first_round_done_at = -1;
  absl::flat_hash_map<std::string, int> first_written;
  const absl::Time sim_start = now;
  auto dueRound = [&](absl::Time at, int* count) {
    auto t = Clock::now();
    auto due = tenancy.dueStatuses(at, kQueueWritesPerSecond);
    due_cost.push_back(msSince(t));
    for (auto& [name, status] : due) {
      ++*count;
      const Figures f = figures(name);
      auto w = written.find(name);
      if (w != written.end() && w->second == f) ++usage_only;
      if (auto d = dirty_since.find(name); d != dirty_since.end()) {
        ages.push_back(absl::ToDoubleSeconds(at - d->second));
        dirty_since.erase(d);
      }
      written[name] = f;
      first_written.emplace(name, 1);
    }
  };
  for (int sec = 0; sec < seconds; ++sec) {
    int count = 0;
    const absl::Time second_start = sim_start + absl::Seconds(sec + 1);
    for (int k = 0; k <= reclaim_refreshes; ++k) {
      now = second_start + absl::Seconds(1) * k / (reclaim_refreshes + 1);
      for (int c = 0; c < (k == 0 ? churn : 1); ++c) churnOnce();
      auto t = Clock::now();
      tenancy.refresh(now, cache, pending, /*now_if_changed=*/k > 0);
      refresh_cost.push_back(msSince(t));
      ++refreshes;
      // Which queues' figures now differ from their last write (and from the last refresh).
      for (const std::string& q : names) {
        const Figures f = figures(q);
        auto prev = previous.find(q);
        if (prev == previous.end() || !(prev->second == f)) ++changed_total;
        previous[q] = f;
        auto w = written.find(q);
        const bool differs = w == written.end() || !(w->second == f);
        if (differs) dirty_since.try_emplace(q, now);
        else dirty_since.erase(q);
      }
      dueRound(now, &count);
    }
    writes_total += count;
    per_second.push_back(count);
    if (first_round_done_at < 0 && first_written.size() == queue_count) first_round_done_at = sec + 1;
  }
  double mean = seconds > 0 ? static_cast<double>(writes_total) / seconds : 0;
  double max_rate = percentile(per_second, 1.0);
  // The first minutes write every queue once (its status was empty): the steady state is after.
  std::vector<double> steady(per_second.begin() + std::min<size_t>(per_second.size(), 600), per_second.end());
  double steady_mean = 0;
  for (double x : steady) steady_mean += x;
  steady_mean = steady.empty() ? 0 : steady_mean / static_cast<double>(steady.size());
  double still_stale = 0;
  for (const auto& [q, since] : dirty_since) still_stale = std::max(still_stale, absl::ToDoubleSeconds(now - since));
  std::printf("writes: %lld in %d s: mean %.2f/s, max %.0f/s (in one simulated second), mean after "
              "the first 10 minutes %.2f/s; usage-only writes %lld\n",
              static_cast<long long>(writes_total), seconds, mean, max_rate, steady_mean,
              static_cast<long long>(usage_only));
  std::printf("every queue written once after %lld s (its status starts empty)\n",
              static_cast<long long>(first_round_done_at));
  std::printf("staleness (s from a change of a queue's allocated / fair share / pending gangs to its "
              "write): p50 %.0f, p99 %.0f, max %.0f; %zu queues changed and unwritten at the end, the "
              "oldest for %.0f s; queues changed per refresh (mean) %.1f\n",
              percentile(ages, 0.5), percentile(ages, 0.99), percentile(ages, 1.0), dirty_since.size(),
              still_stale,
              refreshes > 0 ? static_cast<double>(changed_total) / static_cast<double>(refreshes) : 0.0);
  std::printf("cost per second: refresh p50 %.2f ms p99 %.2f ms, dueStatuses p50 %.2f ms p99 %.2f ms\n",
              percentile(refresh_cost, 0.5), percentile(refresh_cost, 0.99), percentile(due_cost, 0.5),
              percentile(due_cost, 0.99));
  std::printf("{\"section\":\"status_writes\",\"queues\":%zu,\"seconds\":%d,\"churn_per_s\":%d,"
              "\"reclaim_refreshes_per_s\":%d,\"budget\":%zu,\"writes\":%lld,\"writes_per_s_mean\":%.3f,"
              "\"writes_per_s_max\":%.0f,\"writes_per_s_mean_after_10min\":%.3f,\"usage_only_writes\":%lld,"
              "\"all_written_after_s\":%lld,\"staleness_p50_s\":%.1f,\"staleness_p99_s\":%.1f,"
              "\"staleness_max_s\":%.1f,\"unwritten_at_end\":%zu,\"unwritten_oldest_s\":%.1f,"
              "\"refresh_p50_ms\":%.3f,\"due_p50_ms\":%.3f,\"measured\":\"writes the scheduler would "
              "send, not API-server-measured\"}\n",
              queue_count, seconds, churn, reclaim_refreshes, kQueueWritesPerSecond,
              static_cast<long long>(writes_total), mean, max_rate, steady_mean,
              static_cast<long long>(usage_only), static_cast<long long>(first_round_done_at),
              percentile(ages, 0.5), percentile(ages, 0.99), percentile(ages, 1.0), dirty_since.size(),
              still_stale, percentile(refresh_cost, 0.5), percentile(due_cost, 0.5));
  return invalid_total > 0 ? 1 : 0;
}
