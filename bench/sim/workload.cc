#include "bench/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace muster::bench {
namespace {

void placeInTopology(std::vector<SimNode>& nodes, const TopologyShape& shape) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    int rack = static_cast<int>(i) / shape.nodes_per_rack;
    int spine = rack / shape.racks_per_spine;
    nodes[i].rack = rack;
    nodes[i].spine = spine;
    nodes[i].block = spine / shape.spines_per_block;
  }
}

// A CSV file whose first line names the columns. No quoting: the trace has none.
struct Csv {
  std::map<std::string, size_t> column;
  std::vector<std::vector<std::string>> rows;
};

absl::StatusOr<Csv> readCsv(const std::string& path, const std::vector<std::string>& required,
                            const std::vector<std::string>& optional = {}) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  Csv csv;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;  // comments: our synthetic samples say so
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (header) {
      for (size_t i = 0; i < cells.size(); ++i) {
        csv.column[std::string(absl::StripAsciiWhitespace(cells[i]))] = i;
      }
      for (const std::string& name : required) {
        if (!csv.column.count(name)) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": no column ", name));
        }
      }
      // Optional columns a file lacks read as empty cells.
      for (const std::string& name : optional) csv.column.try_emplace(name, csv.column.size());
      header = false;
      continue;
    }
    cells.resize(csv.column.size());
    csv.rows.push_back(std::move(cells));
  }
  if (header) return absl::InvalidArgumentError(absl::StrCat(path, ": empty"));
  return csv;
}

int64_t toInt(const std::string& s, int64_t fallback) {
  int64_t v = 0;
  double d = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(s), &v)) return v;
  if (absl::SimpleAtod(absl::StripAsciiWhitespace(s), &d)) return static_cast<int64_t>(d);
  return fallback;
}

}  // namespace

const char* layoutName(NodeLayout layout) {
  switch (layout) {
    case NodeLayout::kNone: return "none";
    case NodeLayout::kSwitch: return "switch";
    case NodeLayout::kNuma: return "numa";
    case NodeLayout::kSplit: return "split";
  }
  return "?";
}

std::vector<SimNode> syntheticCluster(int count, const TopologyShape& shape) {
  std::vector<SimNode> nodes(count);
  for (int i = 0; i < count; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", i);
    nodes[i].name = name;
    nodes[i].model = "SIM8";
  }
  placeInTopology(nodes, shape);
  return nodes;
}

absl::StatusOr<std::vector<SimNode>> readNodeCsv(const std::string& path,
                                                 const TopologyShape& shape) {
  auto csv = readCsv(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!csv.ok()) return csv.status();
  std::vector<SimNode> nodes;
  for (const auto& row : csv->rows) {
    SimNode n;
    n.name = row[csv->column["sn"]];
    n.cpu_milli = toInt(row[csv->column["cpu_milli"]], 0);
    n.memory_mib = toInt(row[csv->column["memory_mib"]], 0);
    n.gpus = static_cast<int>(toInt(row[csv->column["gpu"]], 0));
    n.rdma_nics = n.gpus;
    n.model = row[csv->column["model"]];
    nodes.push_back(std::move(n));
  }
  placeInTopology(nodes, shape);
  return nodes;
}

absl::StatusOr<LayoutMix> parseLayoutMix(const std::string& spec) {
  if (spec == "none") return LayoutMix{};
  LayoutMix mix;
  for (const auto& part : absl::StrSplit(spec, ',')) {
    std::pair<std::string, std::string> name_weight = absl::StrSplit(part, absl::MaxSplits(':', 1));
    double weight = 1;
    if (!name_weight.second.empty() && (!absl::SimpleAtod(name_weight.second, &weight) ||
                                        !(weight > 0))) {
      return absl::InvalidArgumentError(
          absl::StrCat("node layouts: bad weight in \"", part, "\" (want a number > 0)"));
    }
    std::optional<NodeLayout> layout;
    for (NodeLayout l : {NodeLayout::kNone, NodeLayout::kSwitch, NodeLayout::kNuma,
                         NodeLayout::kSplit}) {
      if (name_weight.first == layoutName(l)) layout = l;
    }
    if (!layout) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node layouts: unknown layout \"", name_weight.first, "\" (switch, numa, split, none)"));
    }
    mix.emplace_back(*layout, weight);
  }
  return mix;
}

void assignLayouts(std::vector<SimNode>& nodes, const LayoutMix& mix, uint32_t seed) {
  if (mix.empty()) return;
  std::vector<size_t> eligible;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].gpus > 0 && nodes[i].gpus % 2 == 0) eligible.push_back(i);
  }
  // Exact counts: each layout's share rounded down, the rest to the largest remainders.
  double total = 0;
  for (const auto& [layout, weight] : mix) total += weight;
  const double n = static_cast<double>(eligible.size());
  std::vector<size_t> counts(mix.size());
  std::vector<std::pair<double, size_t>> remainders;
  size_t assigned = 0;
  for (size_t k = 0; k < mix.size(); ++k) {
    const double quota = n * mix[k].second / total;
    counts[k] = static_cast<size_t>(quota);
    assigned += counts[k];
    remainders.emplace_back(quota - static_cast<double>(counts[k]), k);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t r = 0; assigned < eligible.size(); ++r, ++assigned) ++counts[remainders[r].second];
  std::vector<NodeLayout> layouts;
  for (size_t k = 0; k < mix.size(); ++k) layouts.insert(layouts.end(), counts[k], mix[k].first);
  // A stream of its own, so the places do not follow the baselines' scan order (same seed).
  std::seed_seq seq{seed, 0x6c61796fu};
  std::mt19937 rng(seq);
  std::shuffle(layouts.begin(), layouts.end(), rng);
  for (size_t i = 0; i < eligible.size(); ++i) {
    SimNode& node = nodes[eligible[i]];
    node.layout = layouts[i];
    node.rdma_nics = node.gpus / 2;
  }
}

absl::StatusOr<std::vector<SimJob>> readPodCsv(const std::string& path,
                                               const TraceOptions& options) {
  auto csv = readCsv(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
                     {"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time",
                      "scheduled_time"});
  if (!csv.ok()) return csv.status();
  auto col = [&](const std::vector<std::string>& row, const char* name) -> const std::string& {
    return row[csv->column[name]];
  };
  int64_t t_min = INT64_MAX, t_max = 0;
  for (const auto& row : csv->rows) {
    for (const char* c : {"creation_time", "deletion_time", "scheduled_time"}) {
      int64_t t = toInt(col(row, c), -1);
      if (t < 0) continue;
      t_min = std::min(t_min, t);
      t_max = std::max(t_max, t);
    }
  }
  if (t_min == INT64_MAX) t_min = 0;
  std::vector<SimJob> jobs;
  for (const auto& row : csv->rows) {
    if (options.limit > 0 && static_cast<int64_t>(jobs.size()) >= options.limit) break;
    SimJob j;
    j.name = col(row, "name");
    int64_t created = toInt(col(row, "creation_time"), t_min);
    int64_t scheduled = toInt(col(row, "scheduled_time"), 0);
    int64_t deleted = toInt(col(row, "deletion_time"), 0);
    if (deleted <= 0) deleted = t_max;
    int64_t start = scheduled > 0 ? scheduled : created;
    j.arrival = static_cast<double>(created - t_min) * options.time_scale;
    j.duration = static_cast<double>(std::max<int64_t>(1, deleted - start)) * options.time_scale;
    int64_t num_gpu = toInt(col(row, "num_gpu"), 0);
    int64_t gpu_milli = toInt(col(row, "gpu_milli"), 0);
    if (num_gpu == 0 && gpu_milli > 0) num_gpu = 1;
    j.gpus_per_pod = static_cast<int>(num_gpu);
    j.gpu_milli = num_gpu > 0 && gpu_milli > 0 && gpu_milli < 1000 ? gpu_milli : 1000;
    j.cpu_milli_per_pod = toInt(col(row, "cpu_milli"), 0);
    j.memory_mib_per_pod = toInt(col(row, "memory_mib"), 0);
    const std::string& qos = col(row, "qos");
    j.priority = qos == "LS" ? 100 : qos == "Guaranteed" ? 50 : qos == "Burstable" ? 10 : 0;
    const std::string& spec = col(row, "gpu_spec");
    for (absl::string_view model : absl::StrSplit(spec, '|', absl::SkipWhitespace()))
      j.gpu_models.emplace_back(absl::StripAsciiWhitespace(model));
    if (num_gpu >= options.min_gpus && !options.gang_pods.empty()) {
      size_t h = std::hash<std::string>{}(j.name);
      j.pods = options.gang_pods[h % options.gang_pods.size()];
    }
    jobs.push_back(std::move(j));
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.arrival < b.arrival; });
  return jobs;
}

std::vector<SimJob> fillJobs(const std::vector<SimJob>& pool, int64_t cluster_gpus, double target,
                             uint32_t seed, int64_t* at_capacity) {
  std::vector<SimJob> out;
  *at_capacity = -1;
  if (pool.empty() || cluster_gpus <= 0) return out;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  const double capacity = static_cast<double>(cluster_gpus) * 1000;
  double demand = 0;
  // Jobs asking for nothing could be drawn forever: stop after many more than needed.
  for (size_t draws = 0; demand < target * capacity && draws < 100 * pool.size() + 1000000; ++draws) {
    SimJob j = pool[pick(rng)];
    j.name = absl::StrCat("fill-", out.size());
    demand += static_cast<double>(j.pods) * j.gpus_per_pod * static_cast<double>(j.gpu_milli);
    if (*at_capacity < 0 && demand >= capacity) *at_capacity = static_cast<int64_t>(out.size());
    out.push_back(std::move(j));
  }
  // In random order (draws are already), one a second, never leaving.
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].arrival = static_cast<double>(i);
    out[i].duration = 1e12;
  }
  return out;
}

std::vector<SimJob> syntheticJobs(const SyntheticOptions& options, int64_t cluster_gpus) {
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> u(0, 1);
  double total_weight = 0;
  for (auto [size, w] : options.sizes) total_weight += w;
  auto drawSize = [&] {
    double x = u(rng) * total_weight;
    for (auto [size, w] : options.sizes) {
      if (x < w) return size;
      x -= w;
    }
    return options.sizes.back().first;
  };
  std::vector<SimJob> jobs(options.jobs);
  double gpu_seconds = 0;
  for (int i = 0; i < options.jobs; ++i) {
    SimJob& j = jobs[i];
    j.name = absl::StrCat("job-", i);
    j.pods = drawSize();
    if (j.pods == 1) {
      static constexpr int kSingle[] = {1, 2, 4, 8};
      j.gpus_per_pod = kSingle[static_cast<int>(u(rng) * 4) % 4];
    } else {
      j.gpus_per_pod = u(rng) < 0.8 ? 8 : 4;
    }
    j.cpu_milli_per_pod = 6000 * j.gpus_per_pod;
    j.memory_mib_per_pod = int64_t{48} * 1024 * j.gpus_per_pod;
    // Exponential, floored at a minute, capped at 8× the mean (a bounded tail keeps runs short).
    j.duration = std::clamp(-std::log(1 - u(rng)) * options.mean_duration_s, 60.0,
                            8 * options.mean_duration_s);
    j.priority = u(rng) < options.high_priority_share ? 100 : 0;
    gpu_seconds += j.duration * j.pods * j.gpus_per_pod;
  }
  // Arrival rate λ so that λ · E[GPU·s per job] = load · cluster GPUs.
  double mean_gpu_seconds = gpu_seconds / std::max(1, options.jobs);
  double rate = options.load * static_cast<double>(cluster_gpus) / mean_gpu_seconds;
  double t = 0;
  for (SimJob& j : jobs) {
    j.arrival = t;
    t += -std::log(1 - u(rng)) / rate;
  }
  return jobs;
}

void requestRdma(std::vector<SimJob>& jobs, RdmaPods pods) {
  for (SimJob& j : jobs) {
    const bool asks = j.gpus_per_pod > 0 && (pods == RdmaPods::kAll ||
                                             (pods == RdmaPods::kGangs && j.pods > 1));
    j.rdma_per_pod = asks ? std::max(1, j.gpus_per_pod / 2) : 0;
  }
}

}  // namespace muster::bench
