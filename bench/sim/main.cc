// muster_sim: placement quality over time, in-process (no API server). Runs the same cluster and
// job stream through Muster's placement and the two baselines and reports, per policy: GPU
// allocation over time, queueing delay by gang size, blocks/racks spanned against the fewest
// possible, GPU fragmentation, and the share of pods asking for GPUs and RDMA NICs placed where
// they can be aligned. See bench/README.md.
//
//   muster_sim [--nodes 1024 | --node-csv openb_node_list.csv] [--nodes-per-rack 8]
//              [--racks-per-spine 4] [--spines-per-block 4]
//              [--node-layouts switch:2,numa:1,split:1 | none] [--rdma-pods gangs|all|none]
//              [--trace openb_pod_list.csv [--gang-pods 1|8|2,4,8,16] [--gang-min-gpus 2]
//                 [--time-scale 1] [--limit N]]
//              [--jobs 2000 --seed 1 --load 0.9 --mean-duration 3600]     (synthetic stream)
//              [--policies muster,first-fit,best-fit,fgd] [--json out.json] [--markdown out.md]
//              [--series] [--check expected.json]
//
// --check compares the deterministic figures (allocation, fragmentation, domains spanned,
// delays, decision counts) with a recorded file and exits 1 on a regression beyond the
// tolerances written in that file.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/sim/simulator.h"
#include "bench/sim/workload.h"
#include "rapidjson/document.h"

namespace {

using namespace muster::bench;

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// part / whole; 0 when there is no whole.
double share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string sizeJson(const SizeStats& s) {
  return absl::StrCat("{\"jobs\":", s.jobs, ",\"placed\":", s.placed,
                      ",\"delay_mean_s\":", num(s.delay_mean_s), ",\"delay_p50_s\":",
                      num(s.delay_p50_s), ",\"delay_p99_s\":", num(s.delay_p99_s),
                      ",\"top_spanned_mean\":", num(s.top_mean), ",\"top_min_mean\":",
                      num(s.top_min_mean), ",\"top_at_min\":", num(s.top_at_min),
                      ",\"leaf_spanned_mean\":", num(s.leaf_mean), ",\"leaf_min_mean\":",
                      num(s.leaf_min_mean), ",\"leaf_at_min\":", num(s.leaf_at_min),
                      ",\"gpu_nic_pods\":", s.gpu_nic_pods, ",\"gpu_nic_pcie_share\":",
                      num(share(s.gpu_nic_pcie, s.gpu_nic_pods)), ",\"gpu_nic_aligned_share\":",
                      num(share(s.gpu_nic_aligned, s.gpu_nic_pods)), "}");
}

std::string resultJson(const SimResult& r, bool series) {
  std::string at_capacity;
  if (r.at_capacity.taken) {
    const CapacitySnapshot& c = r.at_capacity;
    at_capacity = absl::StrCat(",\"at_capacity\":{\"allocation\":", num(c.allocation),
                               ",\"allocation_milli\":", num(c.allocation_milli), ",\"free_gpus\":",
                               c.free_gpus, ",\"stranded_gpus\":", c.stranded_gpus,
                               ",\"pods_placed\":", c.pods_placed, ",\"pods_arrived\":",
                               c.pods_arrived, "}");
  }
  std::string out = absl::StrCat(
      "{\"policy\":\"", r.policy, "\",\"nodes\":", r.nodes, ",\"gpus\":", r.gpus,
      ",\"jobs\":", r.jobs, ",\"placed\":", r.placed, ",\"horizon_s\":", num(r.horizon_s),
      ",\"makespan_s\":", num(r.makespan_s), ",\"allocation_mean\":", num(r.allocation_mean),
      ",\"fragmentation_mean\":", num(r.fragmentation_mean), ",\"decisions\":", r.decisions,
      ",\"failed_decisions\":", r.failed_decisions, ",\"decision_wall_ms\":",
      num(r.decision_wall_ms), ",\"gpu_nic_pods\":", r.gpu_nic_pods, ",\"gpu_nic_pcie\":",
      r.gpu_nic_pcie, ",\"gpu_nic_aligned\":", r.gpu_nic_aligned, ",\"gpu_nic_pcie_share\":",
      num(share(r.gpu_nic_pcie, r.gpu_nic_pods)), ",\"gpu_nic_aligned_share\":",
      num(share(r.gpu_nic_aligned, r.gpu_nic_pods)), ",\"gangs\":", sizeJson(r.gangs), at_capacity,
      ",\"by_size\":{");
  bool first = true;
  for (const auto& [bucket, s] : r.by_size) {
    absl::StrAppend(&out, first ? "" : ",", "\"", bucket, "\":", sizeJson(s));
    first = false;
  }
  out += "}";
  if (series) {
    out += ",\"allocation_series\":[";
    for (size_t i = 0; i < r.allocation_series.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", "[", num(r.allocation_series[i].first), ",",
                      num(r.allocation_series[i].second), ",",
                      num(r.fragmentation_series[i].second), "]");
    }
    out += "]";
  }
  return out + "}";
}

std::string markdown(const std::vector<SimResult>& results, const std::string& what) {
  std::string md = absl::StrCat("Simulation: ", what, "\n\n");
  if (!results.empty() && results[0].at_capacity.taken) {
    md += "Once the arrived GPU demand equals the cluster's GPUs (FGD's fill mode):\n\n"
          "| policy | GPU allocation (whole GPUs) | in gpu_milli units | free GPUs | stranded GPUs "
          "(no GPU pod shape fits their node's CPU/memory) | pods placed / arrived |\n"
          "|---|---|---|---|---|---|\n";
    for (const SimResult& r : results) {
      const CapacitySnapshot& c = r.at_capacity;
      char line[256];
      std::snprintf(line, sizeof line, "| %s | %.1f %% | %.1f %% | %lld | %lld | %lld / %lld |\n",
                    r.policy.c_str(), 100 * c.allocation, 100 * c.allocation_milli,
                    static_cast<long long>(c.free_gpus), static_cast<long long>(c.stranded_gpus),
                    static_cast<long long>(c.pods_placed), static_cast<long long>(c.pods_arrived));
      md += line;
    }
    md += "\n";
  }
  md += "| policy | GPU allocation (mean) | fragmentation (mean) | gangs: blocks spanned / min | "
        "at min | gangs: racks spanned / min | at min | delay mean (s) | delay p99 (s) | placed "
        "| decisions | GPU+NIC pods | aligned: PCIe switch | aligned: switch or NUMA node |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  char buf[512];
  for (const SimResult& r : results) {
    const SizeStats& all = r.by_size.at("all");
    std::snprintf(buf, sizeof buf,
                  "| %s | %.1f %% | %.1f %% | %.2f / %.2f | %.0f %% | %.2f / %.2f | %.0f %% | %.0f "
                  "| %.0f | %lld/%lld | %lld | %lld |",
                  r.policy.c_str(), 100 * r.allocation_mean, 100 * r.fragmentation_mean,
                  r.gangs.top_mean, r.gangs.top_min_mean, 100 * r.gangs.top_at_min,
                  r.gangs.leaf_mean, r.gangs.leaf_min_mean, 100 * r.gangs.leaf_at_min,
                  all.delay_mean_s, all.delay_p99_s, static_cast<long long>(r.placed),
                  static_cast<long long>(r.jobs), static_cast<long long>(r.decisions),
                  static_cast<long long>(r.gpu_nic_pods));
    md += buf;
    if (r.gpu_nic_pods > 0) {
      std::snprintf(buf, sizeof buf, " %.1f %% | %.1f %% |\n",
                    100 * share(r.gpu_nic_pcie, r.gpu_nic_pods),
                    100 * share(r.gpu_nic_aligned, r.gpu_nic_pods));
      md += buf;
    } else {
      md += " – | – |\n";
    }
  }
  md += "\nQueueing delay (s) by gang size, mean / p99, and racks spanned / fewest possible:\n\n"
        "| gang size | jobs |";
  for (const SimResult& r : results) md += " " + r.policy + " delay | " + r.policy + " racks |";
  md += "\n|---|---|";
  for (size_t i = 0; i < results.size(); ++i) md += "---|---|";
  md += "\n";
  for (const char* b : {"1", "2-8", "9-16", "17-64", "65-256", ">256"}) {
    const std::string bucket = b;
    if (!results[0].by_size.count(bucket)) continue;
    const SizeStats& s = results[0].by_size.at(bucket);
    md += absl::StrCat("| ", bucket, " | ", s.jobs, " |");
    for (const SimResult& r : results) {
      const SizeStats& x = r.by_size.at(bucket);
      if (bucket == "1") {
        std::snprintf(buf, sizeof buf, " %.0f / %.0f | – |", x.delay_mean_s, x.delay_p99_s);
      } else {
        std::snprintf(buf, sizeof buf, " %.0f / %.0f | %.2f / %.2f |", x.delay_mean_s,
                      x.delay_p99_s, x.leaf_mean, x.leaf_min_mean);
      }
      md += buf;
    }
    md += "\n";
  }
  bool any_gpu_nic = false;
  for (const SimResult& r : results) any_gpu_nic |= r.gpu_nic_pods > 0;
  if (!any_gpu_nic) return md;
  md += "\nPods asking for GPUs and RDMA NICs, and the share placed where an aligned allocation "
        "exists (behind one PCIe switch / behind one switch or on one NUMA node), by gang size:\n\n"
        "| gang size |";
  for (const SimResult& r : results) md += " " + r.policy + " pods | " + r.policy + " aligned |";
  md += "\n|---|";
  for (size_t i = 0; i < results.size(); ++i) md += "---|---|";
  md += "\n";
  for (const char* b : {"1", "2-8", "9-16", "17-64", "65-256", ">256", "all"}) {
    const std::string bucket = b;
    if (!results[0].by_size.count(bucket)) continue;
    md += absl::StrCat("| ", bucket, " |");
    for (const SimResult& r : results) {
      const SizeStats& x = r.by_size.at(bucket);
      if (x.gpu_nic_pods == 0) {
        md += " 0 | – |";
        continue;
      }
      std::snprintf(buf, sizeof buf, " %lld | %.1f %% / %.1f %% |",
                    static_cast<long long>(x.gpu_nic_pods),
                    100 * share(x.gpu_nic_pcie, x.gpu_nic_pods),
                    100 * share(x.gpu_nic_aligned, x.gpu_nic_pods));
      md += buf;
    }
    md += "\n";
  }
  return md;
}

// --check: every figure listed in the file must be within its tolerance:
// {"tolerances": {"allocation_mean": {"abs": 0.005}, "decisions": {"rel": 0.5}, ...},
//  "results": [{"policy": "muster", "allocation_mean": 0.8, ...}, ...]}
int check(const std::vector<SimResult>& results, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  rapidjson::Document doc;
  doc.Parse(ss.str().c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("results") ||
      !doc.HasMember("tolerances")) {
    std::fprintf(stderr, "%s: not a check file\n", path.c_str());
    return 2;
  }
  int failures = 0;
  for (const auto& expected : doc["results"].GetArray()) {
    std::string policy = expected["policy"].GetString();
    const SimResult* got = nullptr;
    for (const SimResult& r : results) {
      if (r.policy == policy) got = &r;
    }
    if (!got) {
      std::fprintf(stderr, "FAIL %s: not run\n", policy.c_str());
      ++failures;
      continue;
    }
    rapidjson::Document actual;
    std::string json = resultJson(*got, false);
    actual.Parse(json.c_str());
    for (const auto& tol : doc["tolerances"].GetObject()) {
      std::string key = tol.name.GetString();
      // "gangs.leaf_spanned_mean" reaches into nested objects.
      const rapidjson::Value* e = &expected;
      const rapidjson::Value* a = &actual;
      bool ok = true;
      for (const auto& part : absl::StrSplit(key, '.')) {
        std::string p(part);
        if (!e->IsObject() || !e->HasMember(p.c_str()) || !a->HasMember(p.c_str())) {
          ok = false;
          break;
        }
        e = &(*e)[p.c_str()];
        a = &(*a)[p.c_str()];
      }
      if (!ok) continue;  // not recorded for this policy
      double ev = e->GetDouble(), av = a->GetDouble();
      double allowed = 0;
      if (tol.value.HasMember("abs")) allowed = tol.value["abs"].GetDouble();
      if (tol.value.HasMember("rel")) allowed = std::max(allowed, tol.value["rel"].GetDouble() * std::fabs(ev));
      // "worse": only a move in this direction fails ("higher" or "lower"); default both.
      std::string worse = tol.value.HasMember("worse") ? tol.value["worse"].GetString() : "";
      double diff = av - ev;
      bool bad = worse == "higher" ? diff > allowed
                 : worse == "lower" ? -diff > allowed
                                    : std::fabs(diff) > allowed;
      std::printf("%s %-9s %-28s recorded %-12s now %-12s tolerance %s%s\n", bad ? "FAIL" : "ok  ",
                  policy.c_str(), key.c_str(), num(ev).c_str(), num(av).c_str(),
                  num(allowed).c_str(), worse.empty() ? "" : (" (" + worse + " is worse)").c_str());
      failures += bad;
    }
  }
  return failures ? 1 : 0;
}

std::vector<int> intList(const std::string& s) {
  std::vector<int> out;
  for (const auto& part : absl::StrSplit(s, ',')) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--nodes N | --node-csv FILE] [--nodes-per-rack K] [--racks-per-spine R]\n"
               "  [--spines-per-block S] [--node-layouts switch:2,numa:1,split:1 | none]\n"
               "  [--rdma-pods gangs|all|none] [--trace FILE [--gang-pods 1|8|2,4,8] [--gang-min-gpus G]\n"
               "  [--time-scale X] [--limit N] [--fill TARGET] [--gpu-sharing]] [--jobs J] [--seed S] [--load L]\n"
               "  [--mean-duration SECONDS] [--policies muster,first-fit,best-fit,fgd]\n"
               "  [--reservation-after SECONDS (300; the queue's reservationAfterSeconds)]\n"
               "  [--json FILE] [--markdown FILE] [--series] [--check FILE]\n"
               "  [--tenancy-check (Muster twice, tenancy off and on with no Queue: exit 1 unless\n"
               "   every placement is the same)]\n",
               argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int node_count = 1024;
  std::string node_csv, trace, json_path, md_path, check_path;
  double fill_target = 0;    // --fill: FGD's fill mode
  int64_t capacity_job = -1;
  TopologyShape shape;
  TraceOptions trace_options;
  SyntheticOptions synth;
  std::vector<Policy> policies{Policy::kMuster, Policy::kFirstFit, Policy::kBestFit};
  bool series = false;
  bool gpu_sharing = false;  // --gpu-sharing: fractions of GPUs share them (SimOptions)
  bool tenancy_check = false;  // --tenancy-check: see the usage
  double reservation_after = 300;
  std::string layout_spec = "switch:2,numa:1,split:1";
  RdmaPods rdma_pods = RdmaPods::kGangs;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--series") {
      series = true;
      continue;
    }
    if (flag == "--gpu-sharing") {
      gpu_sharing = true;
      continue;
    }
    if (flag == "--tenancy-check") {
      tenancy_check = true;
      continue;
    }
    if (i + 1 >= argc) usage(argv[0]);
    std::string v = argv[++i];
    if (flag == "--nodes") node_count = std::atoi(v.c_str());
    else if (flag == "--node-csv") node_csv = v;
    else if (flag == "--nodes-per-rack") shape.nodes_per_rack = std::atoi(v.c_str());
    else if (flag == "--racks-per-spine") shape.racks_per_spine = std::atoi(v.c_str());
    else if (flag == "--spines-per-block") shape.spines_per_block = std::atoi(v.c_str());
    else if (flag == "--node-layouts") layout_spec = v;
    else if (flag == "--rdma-pods") {
      if (v == "gangs") rdma_pods = RdmaPods::kGangs;
      else if (v == "all") rdma_pods = RdmaPods::kAll;
      else if (v == "none") rdma_pods = RdmaPods::kNone;
      else usage(argv[0]);
    }
    else if (flag == "--trace") trace = v;
    else if (flag == "--gang-pods") trace_options.gang_pods = intList(v);
    else if (flag == "--gang-min-gpus") trace_options.min_gpus = std::atoi(v.c_str());
    else if (flag == "--time-scale") trace_options.time_scale = std::atof(v.c_str());
    else if (flag == "--limit") trace_options.limit = std::atoll(v.c_str());
    else if (flag == "--fill") fill_target = std::atof(v.c_str());
    else if (flag == "--jobs") synth.jobs = std::atoi(v.c_str());
    else if (flag == "--seed") synth.seed = static_cast<uint32_t>(std::atoi(v.c_str()));
    else if (flag == "--load") synth.load = std::atof(v.c_str());
    else if (flag == "--mean-duration") synth.mean_duration_s = std::atof(v.c_str());
    else if (flag == "--reservation-after") reservation_after = std::atof(v.c_str());
    else if (flag == "--json") json_path = v;
    else if (flag == "--markdown") md_path = v;
    else if (flag == "--check") check_path = v;
    else if (flag == "--policies") {
      policies.clear();
      for (const auto& p : absl::StrSplit(v, ',')) {
        if (p == "muster") policies.push_back(Policy::kMuster);
        else if (p == "first-fit") policies.push_back(Policy::kFirstFit);
        else if (p == "best-fit") policies.push_back(Policy::kBestFit);
        else if (p == "fgd") policies.push_back(Policy::kFgd);
        else usage(argv[0]);
      }
    } else {
      usage(argv[0]);
    }
  }

  std::vector<SimNode> nodes;
  if (!node_csv.empty()) {
    auto read = readNodeCsv(node_csv, shape);
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", std::string(read.status().message()).c_str());
      return 2;
    }
    nodes = std::move(*read);
  } else {
    nodes = syntheticCluster(node_count, shape);
  }
  auto mix = parseLayoutMix(layout_spec);
  if (!mix.ok()) {
    std::fprintf(stderr, "%s\n", std::string(mix.status().message()).c_str());
    return 2;
  }
  assignLayouts(nodes, *mix, synth.seed);
  int64_t gpus = 0;
  std::map<std::string, int> layout_count;
  for (const SimNode& n : nodes) {
    gpus += n.gpus;
    ++layout_count[layoutName(n.layout)];
  }

  std::vector<SimJob> jobs;
  std::string what;
  if (!trace.empty()) {
    auto read = readPodCsv(trace, trace_options);
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", std::string(read.status().message()).c_str());
      return 2;
    }
    jobs = std::move(*read);
    if (fill_target > 0) {
      const size_t pool = jobs.size();
      jobs = fillJobs(jobs, gpus, fill_target, synth.seed, &capacity_job);
      std::fprintf(stderr, "fill mode: %zu jobs drawn from %zu to %.0f %% of the GPUs; capacity reached at job %lld\n",
                   jobs.size(), pool, 100 * fill_target, static_cast<long long>(capacity_job));
    }
    std::string gp;
    for (int g : trace_options.gang_pods) absl::StrAppend(&gp, gp.empty() ? "" : ",", g);
    what = absl::StrCat("trace ", trace, " (", jobs.size(), " jobs, multi-GPU jobs as gangs of ",
                        gp, " pods)");
  } else {
    jobs = syntheticJobs(synth, gpus);
    what = absl::StrCat("synthetic gang-heavy stream, seed ", synth.seed, ", ", synth.jobs,
                        " jobs, offered load ", num(synth.load), ", mean duration ",
                        num(synth.mean_duration_s), " s");
  }
  requestRdma(jobs, rdma_pods);
  what += absl::StrCat("; cluster ", nodes.size(), " nodes / ", gpus, " GPUs (racks of ",
                       shape.nodes_per_rack, ", ", shape.racks_per_spine, " racks/spine, ",
                       shape.spines_per_block, " spines/block); node layouts");
  for (const auto& [layout, count] : layout_count) absl::StrAppend(&what, " ", layout, " ", count);
  if (rdma_pods == RdmaPods::kNone) {
    what += "; no pod asks for RDMA NICs";
  } else {
    absl::StrAppend(&what, "; RDMA NICs (1 per 2 GPUs) for ",
                    rdma_pods == RdmaPods::kGangs ? "gang members" : "every GPU pod");
  }

  if (tenancy_check) {
    SimOptions options;
    options.seed = synth.seed;
    options.reservation_after_s = reservation_after;
    options.gpu_sharing = gpu_sharing;
    const SimResult off = simulate(nodes, jobs, options);
    options.tenancy = true;
    const SimResult on = simulate(nodes, jobs, options);
    const bool same = off.placement_digest == on.placement_digest && off.decisions == on.decisions &&
                      off.placed == on.placed;
    std::printf("%s\ntenancy off: %lld jobs placed, %lld decisions, placements %016llx\n"
                "tenancy on, no Queue: %lld jobs placed, %lld decisions, placements %016llx\n%s\n",
                what.c_str(), static_cast<long long>(off.placed), static_cast<long long>(off.decisions),
                static_cast<unsigned long long>(off.placement_digest), static_cast<long long>(on.placed),
                static_cast<long long>(on.decisions), static_cast<unsigned long long>(on.placement_digest),
                same ? "same placements" : "DIFFERENT placements");
    return same ? 0 : 1;
  }

  std::vector<SimResult> results;
  for (Policy p : policies) {
    SimOptions options;
    options.policy = p;
    options.seed = synth.seed;
    options.reservation_after_s = reservation_after;
    options.capacity_job = capacity_job;
    options.gpu_sharing = gpu_sharing;
    if (capacity_job >= 0) {
      // Nothing leaves, so room reserved for a waiting gang never comes: no reservations, and the
      // run ends at the figures.
      options.reservation_after_s = 1e15;
      options.end_s = jobs[static_cast<size_t>(capacity_job)].arrival + 0.5;
    }
    results.push_back(simulate(nodes, jobs, options));
    std::fprintf(stderr, "%s: %lld decisions, %.0f ms of decisions\n", results.back().policy.c_str(),
                 static_cast<long long>(results.back().decisions), results.back().decision_wall_ms);
  }

  std::string json = absl::StrCat("{\"workload\":\"", what, "\",\"results\":[");
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StrAppend(&json, i ? ",\n" : "\n", resultJson(results[i], series));
  }
  json += "\n]}\n";
  std::string md = markdown(results, what);
  if (!json_path.empty()) std::ofstream(json_path) << json;
  if (!md_path.empty()) std::ofstream(md_path) << md;
  std::printf("%s", md.c_str());
  if (!check_path.empty()) return check(results, check_path);
  return 0;
}
