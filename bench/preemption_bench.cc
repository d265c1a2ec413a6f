// In-process preemption benchmark (no API server): how long choosePreemption() takes to pick the
// victims for a gang that does not fit, on a full cluster.
//
// The cluster: N 8-GPU nodes in racks of 16 (bench/common.h, as the placement bench),
// every GPU held by running gangs of 4 pods × 2 GPUs, one pod per node over 4 nodes of a rack
// (so 4 pods per node: 20,000 pods on 5,000 nodes). Each gang has a priority from 0 to 900 and
// has run 1 minute to 1 day. Preemptors of priority 100 to 1000 (so the candidates vary):
//
//   rack16   16 pods × 8 GPUs, topology-required rack (a whole rack: 16 gangs to clear)
//   rack4     4 pods × 8 GPUs, topology-required rack
//   single    1 pod × 8 GPUs, no level
//   spread32 32 pods × 8 GPUs, no level (the whole cluster is the scope)
//
// Reports per scenario the decision latency p50/p99, victims (pods, gangs) and simulations
// (place() calls) per decision, as JSON lines and a table. Every plan is checked: its placement
// fits once its victims are removed (on a copy of the cache).
//
//   muster_preemption_bench [--nodes 5000] [--decisions 100] [--seed 1]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/common.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/placement.h"
#include "scheduler/preemption.h"

namespace {

using namespace muster::scheduler;

using muster::bench::kLevels;
using muster::bench::makeGangPod;
using muster::bench::makeNode;
using muster::bench::percentile;
constexpr int kRackLevel = 2;


struct Scenario {
  std::string name;
  int pods;
  int required_level;
};

}  // namespace

int main(int argc, char** argv) {
  int nodes = 5000;
  int decisions = 100;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--nodes") nodes = std::atoi(argv[i + 1]);
    else if (flag == "--decisions") decisions = std::atoi(argv[i + 1]);
    else if (flag == "--seed") seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: %s [--nodes 5000] [--decisions 100] [--seed 1]\n", argv[0]);
      return 2;
    }
  }
  std::mt19937 rng(seed);
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  ClusterCache cache(kLevels);
  for (int i = 0; i < nodes; ++i) cache.addNode(makeNode(i));
  // Fill: per group of 4 nodes of a rack, 4 gangs, each one pod on each of the 4 nodes.
  std::uniform_int_distribution<int> priority(0, 9);
  std::uniform_int_distribution<int> age(60, 86400);
  int pods = 0, gangs = 0;
  for (int base = 0; base + 4 <= nodes; base += 4) {
    for (int g = 0; g < 4; ++g) {
      const std::string gang = "low-" + std::to_string(gangs++);
      const int32_t prio = priority(rng) * 100;
      const std::string started = absl::FormatTime(absl::RFC3339_sec, now - absl::Seconds(age(rng)),
                                                   absl::UTCTimeZone());
      for (int k = 0; k < 4; ++k) {
        cache.addPod(makeGangPod(gang + "-" + std::to_string(k), 2, prio, gang, 4,
                                 "node-" + std::to_string(base + k), started));
        ++pods;
      }
    }
  }
  (void)cache.topology();
  std::printf("# %d nodes, %d running pods in %d gangs, every GPU held\n", nodes, pods, gangs);

  const std::vector<Scenario> scenarios{{"rack16", 16, kRackLevel},
                                        {"rack4", 4, kRackLevel},
                                        {"single", 1, -1},
                                        {"spread32", 32, -1}};
  std::uniform_int_distribution<int> preemptor_priority(1, 10);
  std::printf("%-9s %9s %9s %9s %12s %12s %12s\n", "scenario", "decisions", "p50 ms", "p99 ms",
              "victim pods", "victim gangs", "simulations");
  for (const Scenario& s : scenarios) {
    std::vector<double> ms;
    double victim_pods = 0, victim_gangs = 0, sims = 0;
    int plans = 0, invalid = 0;
    for (int d = 0; d < decisions; ++d) {
      const int32_t prio = preemptor_priority(rng) * 100;
      GangRequest req;
      req.key = GangKey{"bench", absl::StrCat(s.name, "-", d), s.pods == 1};
      req.min_member = s.pods;
      req.required_level = s.required_level;
      for (int i = 0; i < s.pods; ++i)
        req.members.push_back(*makePodInfo(
            makeGangPod(absl::StrCat(s.name, "-", d, "-", i), 8, prio, req.key.name, s.pods)));
      PreemptionRequest p;
      p.priority = prio;
      p.now = now;
      auto start = std::chrono::steady_clock::now();
      PreemptionResult r = choosePreemption(req, p, cache);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      const PreemptionPlan* plan = std::get_if<PreemptionPlan>(&r);
      if (!plan) continue;
      ++plans;
      victim_pods += plan->victimPods();
      victim_gangs += static_cast<double>(plan->victims.size());
      sims += plan->place_calls;
      // Check: with the victims suspended, the placement's pods fit their nodes.
      for (const VictimUnit& v : plan->victims)
        for (const std::string& pod : v.pods) (void)cache.suspend(pod);
      bool ok = true;
      for (size_t i = 0; i < plan->placement.assignments.size(); ++i)
        ok &= cache.assume(*req.members[i], plan->placement.assignments[i].node).ok();
      for (NodeId id = 0; id < cache.slotCount(); ++id)
        ok &= fitsIn(cache.node(id).requested, cache.node(id).allocatable);
      for (const PodInfoPtr& m : req.members) (void)cache.forget(m->key);
      for (const VictimUnit& v : plan->victims)
        for (const std::string& pod : v.pods) (void)cache.resume(pod);
      if (!ok) ++invalid;
    }
    const double n = std::max(plans, 1);
    std::printf("%-9s %9d %9.2f %9.2f %12.1f %12.1f %12.1f\n", s.name.c_str(), decisions,
                percentile(ms, 0.5), percentile(ms, 0.99), victim_pods / n, victim_gangs / n, sims / n);
    std::printf("{\"scenario\":\"%s\",\"nodes\":%d,\"running_pods\":%d,\"decisions\":%d,\"plans\":%d,"
                "\"invalid\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"victim_pods_mean\":%.2f,"
                "\"victim_gangs_mean\":%.2f,\"simulations_mean\":%.2f}\n",
                s.name.c_str(), nodes, pods, decisions, plans, invalid, percentile(ms, 0.5),
                percentile(ms, 0.99), victim_pods / n, victim_gangs / n, sims / n);
    if (invalid > 0) return 1;
  }
  return 0;
}
