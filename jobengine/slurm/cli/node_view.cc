#include "jobengine/slurm/cli/node_view.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jobengine/slurm/core/array.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/squeue_format.h"
#include "jobengine/slurm/core/time.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

// sinfo.c's defaults (Slurm 24): the partition-oriented, long, node-oriented long, reasons and
// summary layouts. '#' is the width of the longest partition name (at least 9).
constexpr std::string_view kDefault = "%#P %.5a %.10l %.6D %.6t %N";
constexpr std::string_view kLong = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N";
constexpr std::string_view kNodeLong = "%9N %.6D %.9P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E";
constexpr std::string_view kNode = "%9N %.6D %.9P %6t";
constexpr std::string_view kReasons = "%20E %9u %19H %N";
constexpr std::string_view kSummary = "%#P %.5a %.10l %.16F %N";

struct Field {
  char letter = '\0';  // '\0': literal text in `text`
  int width = 0;       // -1: '#'
  bool right = false;
  std::string text;
};

std::vector<Field> parseFormat(std::string_view format) {
  std::vector<Field> out;
  size_t i = 0;
  while (i < format.size()) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      size_t next = format.find('%', i + 1);
      if (next == std::string_view::npos) next = format.size();
      out.push_back({'\0', 0, false, std::string(format.substr(i, next - i))});
      i = next;
      continue;
    }
    Field f;
    ++i;
    if (format[i] == '.') {
      f.right = true;
      ++i;
    }
    if (i < format.size() && format[i] == '#') {
      f.width = -1;
      ++i;
    } else {
      int w = 0;
      while (i < format.size() && isDigit(format[i]) && w < kMaxSqueueFieldWidth) w = w * 10 + (format[i++] - '0');
      f.width = std::min(w, kMaxSqueueFieldWidth);
    }
    if (i >= format.size()) break;
    f.letter = format[i++];
    out.push_back(f);
  }
  return out;
}

std::string_view header(char letter) {
  switch (letter) {
    case 'P': case 'R': return "PARTITION";
    case 'a': return "AVAIL";
    case 'l': return "TIMELIMIT";
    case 's': return "JOB_SIZE";
    case 'r': return "ROOT";
    case 'h': return "OVERSUBS";
    case 'g': return "GROUPS";
    case 'D': return "NODES";
    case 't': case 'T': return "STATE";
    case 'N': return "NODELIST";
    case 'c': return "CPUS";
    case 'C': return "CPUS(A/I/O/T)";
    case 'F': return "NODES(A/I/O/T)";
    case 'z': return "S:C:T";
    case 'm': return "MEMORY";
    case 'd': return "TMP_DISK";
    case 'w': return "WEIGHT";
    case 'f': return "AVAIL_FEATURES";
    case 'E': return "REASON";
    case 'u': return "USER";
    case 'H': return "TIMESTAMP";
    case 'G': return "GRES";
    case 'e': return "FREE_MEM";
    case 'O': return "CPU_LOAD";
    default: return "";
  }
}

std::string timeLimit(const Partition& p) {
  return p.max_time_seconds ? formatDuration(*p.max_time_seconds) : "infinite";
}

// One printed row: a partition and the nodes it groups.
struct Row {
  const Partition* partition = nullptr;
  bool is_default = false;
  std::vector<const NodeView*> nodes;
};

std::string value(char letter, const Row& row, const SlurmConfig& /*config*/) {
  const Partition& p = *row.partition;
  const NodeView& n = *row.nodes.front();
  int64_t a = 0, i = 0, o = 0, t = 0;  // %C and %F
  switch (letter) {
    case 'P': return row.is_default ? p.name + "*" : p.name;
    case 'R': return p.name;
    case 'a': return "up";
    case 'l': return timeLimit(p);
    case 's': return p.max_nodes > 0 ? absl::StrCat("1-", p.max_nodes) : "1-infinite";
    case 'r': return "no";
    case 'h': return "NO";
    case 'g': return "all";
    case 'D': return absl::StrCat(row.nodes.size());
    case 't': return std::string(nodeStateCompact(n.state));
    case 'T': return std::string(nodeStateLong(n.state));
    case 'N': {
      std::vector<std::string> names;
      for (const NodeView* v : row.nodes) names.push_back(v->name);
      return compressHostlist(names);
    }
    case 'c': return absl::StrCat(n.cpus);
    case 'z': return absl::StrCat("1:", n.cpus, ":1");
    case 'm': return absl::StrCat(n.memory_mb);
    case 'd': return "0";
    case 'w': return "1";
    case 'f': {
      std::string out;
      for (const std::string& f : n.features) out += (out.empty() ? "" : ",") + f;
      return out.empty() ? "(null)" : out;
    }
    case 'E': return n.reason.empty() ? "none" : n.reason;
    case 'u': return n.reason_user.empty() ? "Unknown" : n.reason_user;
    case 'H': return n.reason_time.empty() ? "Unknown" : n.reason_time;
    case 'G':
      if (n.gpus <= 0) return "(null)";
      return n.gpu_type.empty() ? absl::StrCat("gpu:", n.gpus) : absl::StrCat("gpu:", n.gpu_type, ":", n.gpus);
    case 'C':
      for (const NodeView* v : row.nodes) {
        t += v->cpus;
        if (v->state == NodeState::kDown || v->state == NodeState::kDrained) o += v->cpus;
        else {
          a += std::min(v->cpus_alloc, v->cpus);
          i += std::max<int64_t>(0, v->cpus - v->cpus_alloc);
        }
      }
      return absl::StrCat(a, "/", i, "/", o, "/", t);
    case 'F':
      for (const NodeView* v : row.nodes) {
        ++t;
        if (v->state == NodeState::kAllocated || v->state == NodeState::kMixed ||
            v->state == NodeState::kDraining)
          ++a;
        else if (v->state == NodeState::kIdle)
          ++i;
        else
          ++o;
      }
      return absl::StrCat(a, "/", i, "/", o, "/", t);
    case 'e': case 'O': return "N/A";
    default: return absl::StrCat("%", std::string(1, letter));
  }
}

absl::Status sinfoError(std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("sinfo: ", av(message)));
}

std::optional<NodeState> parseNodeState(std::string_view s) {
  static constexpr std::pair<std::string_view, NodeState> kNames[] = {
      {"idle", NodeState::kIdle},         {"mix", NodeState::kMixed},
      {"mixed", NodeState::kMixed},       {"alloc", NodeState::kAllocated},
      {"allocated", NodeState::kAllocated}, {"drain", NodeState::kDrained},
      {"drained", NodeState::kDrained},   {"drng", NodeState::kDraining},
      {"draining", NodeState::kDraining}, {"down", NodeState::kDown},
  };
  for (const auto& [name, state] : kNames)
    if (equalsIgnoreCase(s, name)) return state;
  return std::nullopt;
}

}  // namespace

std::string_view nodeStateCompact(NodeState s) {
  switch (s) {
    case NodeState::kIdle: return "idle";
    case NodeState::kMixed: return "mix";
    case NodeState::kAllocated: return "alloc";
    case NodeState::kDrained: return "drain";
    case NodeState::kDraining: return "drng";
    case NodeState::kDown: return "down";
  }
  return "unk";
}

std::string_view nodeStateLong(NodeState s) {
  switch (s) {
    case NodeState::kIdle: return "idle";
    case NodeState::kMixed: return "mixed";
    case NodeState::kAllocated: return "allocated";
    case NodeState::kDrained: return "drained";
    case NodeState::kDraining: return "draining";
    case NodeState::kDown: return "down";
  }
  return "unknown";
}

NodeView nodeViewOf(const proto::Node& node, const std::vector<proto::Pod>& pods) {
  NodeView v;
  v.name = node.meta.name;
  v.labels = node.meta.labels;
  if (auto* c = node.allocatableOf("cpu")) v.cpus = c->milliValue() / 1000;
  if (auto* m = node.allocatableOf("memory")) v.memory_mb = m->value() / (1024 * 1024);
  if (auto* g = node.allocatableOf(proto::kGpuResource)) v.gpus = g->value();
  if (auto it = node.meta.labels.find(proto::vocabulary::kLabelGpuModel);
      it != node.meta.labels.end())
    v.gpu_type = it->second;
  for (const auto& [k, val] : node.meta.labels)
    if (k.starts_with(proto::vocabulary::kMusterPrefix) && !val.empty()) v.features.push_back(val);
  int64_t cpu_millis = 0;
  for (const proto::Pod& pod : pods)
    for (const proto::Container& c : pod.spec.containers) {
      if (auto it = c.resources.requests.find("cpu"); it != c.resources.requests.end())
        cpu_millis += it->second.milliValue();
      if (auto it = c.resources.requests.find(proto::kGpuResource); it != c.resources.requests.end())
        v.gpus_alloc += it->second.value();
    }
  v.cpus_alloc = (cpu_millis + 999) / 1000;
  const bool unreachable = std::any_of(node.spec.taints.begin(), node.spec.taints.end(), [](const proto::Taint& t) {
    return t.key == "node.kubernetes.io/unreachable";
  });
  if (!node.isReady() || unreachable) {
    v.state = NodeState::kDown;
    v.reason = "Not responding";
  } else if (node.spec.unschedulable) {
    v.state = pods.empty() ? NodeState::kDrained : NodeState::kDraining;
    auto annotation = [&](const char* key) {
      auto it = node.meta.annotations.find(key);
      return it != node.meta.annotations.end() ? it->second : std::string();
    };
    v.reason = annotation(kDrainReasonAnnotation);
    if (v.reason.empty()) v.reason = "Kubernetes cordon";
    v.reason_user = annotation(kDrainUserAnnotation);
    v.reason_time = annotation(kDrainTimeAnnotation);
  } else if (pods.empty()) {
    v.state = NodeState::kIdle;
  } else if ((v.cpus > 0 && v.cpus_alloc >= v.cpus) || (v.gpus > 0 && v.gpus_alloc >= v.gpus)) {
    v.state = NodeState::kAllocated;
  } else {
    v.state = NodeState::kMixed;
  }
  return v;
}

std::string renderShowConfig(const SlurmConfig& config, absl::Time now) {
  std::vector<std::string> partitions;
  for (const Partition& p : config.partitions) partitions.push_back(p.name);
  const Partition* def = config.partition("");
  const std::map<std::string, std::string> keys = {
      {"AccountingStorageType", "accounting_storage/muster (the API server)"},
      {"ClusterName", config.cluster_name},
      {"DefaultPartition", def != nullptr ? def->name : "(null)"},
      {"JobIdCounter", absl::StrCat(config.job_ids.namespace_.empty() ? "(release namespace)"
                                                                        : config.job_ids.namespace_,
                                    "/", config.job_ids.name)},
      {"JobRequeue", "1"},
      {"MaxArraySize", absl::StrCat(kDefaultMaxArraySize)},
      {"MinJobAge", config.accounting_retention_seconds
                        ? absl::StrCat(*config.accounting_retention_seconds, " sec")
                        : "UNLIMITED"},
      {"MusterVersion", "0.1"},
      {"PartitionNames", partitions.empty() ? "(null)" : absl::StrJoin(partitions, ",")},
      {"SLURM_VERSION", "24.05.0"},
      {"SchedulerType", "sched/muster (gang, topology-aware)"},
      {"SelectType", "select/muster (Kubernetes pods)"},
      {"ToolsImage", config.tools_image.empty() ? "(null)" : config.tools_image},
  };
  std::string out = absl::StrCat("Configuration data as of ", formatTimestamp(now), "\n");
  for (const auto& [k, v] : keys) {
    std::string key = k;
    if (key.size() < 23) key.resize(23, ' ');
    absl::StrAppend(&out, key, " = ", v, "\n");
  }
  return out;
}

bool partitionHas(const Partition& partition, const NodeView& node) {
  for (const auto& [k, v] : partition.node_selector) {
    auto it = node.labels.find(k);
    if (it == node.labels.end() || it->second != v) return false;
  }
  return true;
}

std::string_view sinfoUsage() {
  // Every option parseSinfoArgs below takes or refuses.
  return "Usage: sinfo [OPTIONS]\n"
         "Muster's sinfo: the partitions of Muster's config over the cluster's nodes (a\n"
         "partition's nodes are those its node selector matches).\n"
         "\n"
         "  -h, --noheader              no header line\n"
         "  -l, --long                  the long layout\n"
         "  -N, --Node                  one line per node\n"
         "  -n, --nodes=hosts           only these nodes (a hostlist)\n"
         "  -o, --format=format         the layout by %letters of sinfo(1) (or\n"
         "                              $SINFO_FORMAT)\n"
         "  -p, --partition=partitions  only these partitions\n"
         "  -R, --list-reasons          why nodes are drained or down, by whom, since when\n"
         "  -s, --summarize             one line per partition, nodes counted by state\n"
         "  -t, --states=states         only nodes in these states (idle, mix, alloc,\n"
         "                              drain, drng, down)\n"
         "  -a, --all, -e, --exact, -v, --verbose, --local, --federation\n"
         "                              accepted; change nothing\n"
         "      --help, --usage         print this usage and exit\n"
         "  -V, --version               print the version and exit\n"
         "\n"
         "Refused (\"not supported by Muster's sinfo\"): -i/--iterate, -M/--clusters,\n"
         "  -O/--Format, -S/--sort, -T/--reservation, --json, --yaml\n";
}

absl::StatusOr<SinfoOptions> parseSinfoArgs(const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env) {
  SinfoOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        inline_value = a.substr(eq + 1);
        a = a.substr(0, eq);
      }
    } else if (a.size() > 2 && a[0] == '-' && std::string_view("optnMSOiT").find(a[1]) != std::string_view::npos) {
      inline_value = a.substr(2);
      a = a.substr(0, 2);
    } else if (a.size() > 2 && a[0] == '-' && a[1] != '-') {
      // Bundled flags: -Nl, -hN.
      std::vector<std::string> split;
      for (size_t k = 1; k < a.size(); ++k) split.push_back(std::string("-") + a[k]);
      std::vector<std::string> rest(split);
      rest.insert(rest.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      auto tail = parseSinfoArgs(rest, env);
      if (!tail.ok()) return tail.status();
      SinfoOptions merged = *tail;
      // What came before this word still counts.
      merged.help |= o.help; merged.usage |= o.usage; merged.version |= o.version;
      merged.noheader |= o.noheader; merged.node_oriented |= o.node_oriented;
      merged.long_format |= o.long_format; merged.reasons |= o.reasons; merged.summarize |= o.summarize;
      if (!merged.format) merged.format = o.format;
      merged.partitions.insert(merged.partitions.begin(), o.partitions.begin(), o.partitions.end());
      merged.states.insert(merged.states.begin(), o.states.begin(), o.states.end());
      merged.nodes.insert(merged.nodes.begin(), o.nodes.begin(), o.nodes.end());
      return merged;
    }
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 < args.size()) return args[++i];
      return std::nullopt;
    };
    auto missing = [&] {
      return sinfoError(absl::StrCat("option '", a, "' requires an argument\nTry \"sinfo --help\" for more information"));
    };
    if (a == "-h" || a == "--noheader") o.noheader = true;
    else if (a == "-N" || a == "--Node") o.node_oriented = true;
    else if (a == "-l" || a == "--long") o.long_format = true;
    else if (a == "-R" || a == "--list-reasons") o.reasons = true;
    else if (a == "-s" || a == "--summarize") o.summarize = true;
    else if (a == "-a" || a == "--all" || a == "-e" || a == "--exact" || a == "-v" || a == "--verbose" ||
             a == "--local" || a == "--federation") {}
    else if (a == "--help") o.help = true;
    else if (a == "--usage") o.usage = true;
    else if (a == "-V" || a == "--version") o.version = true;
    else if (a == "-o" || a == "--format") {
      auto v = value();
      if (!v) return missing();
      o.format = *v;
    } else if (a == "-p" || a == "--partition") {
      auto v = value();
      if (!v) return missing();
      for (absl::string_view p : absl::StrSplit(*v, ',', absl::SkipEmpty())) o.partitions.emplace_back(p);
    } else if (a == "-t" || a == "--states") {
      auto v = value();
      if (!v) return missing();
      for (absl::string_view p : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
        auto st = parseNodeState(std::string_view(p.data(), p.size()));
        if (!st) return sinfoError(absl::StrCat("error: Invalid node state specified: ", p));
        o.states.push_back(*st);
      }
    } else if (a == "-n" || a == "--nodes") {
      auto v = value();
      if (!v) return missing();
      auto hosts = expandHostlist(*v);
      if (!hosts.ok()) return sinfoError(absl::StrCat("error: Invalid node name specified: ", *v));
      o.nodes.insert(o.nodes.end(), hosts->begin(), hosts->end());
    } else if (a == "--json" || a == "--yaml" || a == "-i" || a == "--iterate" || a == "-O" ||
               a == "--Format" || a == "-S" || a == "--sort" || a == "-T" || a == "--reservation" ||
               a == "-M" || a == "--clusters") {
      return sinfoError(absl::StrCat("error: ", a, " is not supported by Muster's sinfo"));
    } else {
      return sinfoError(absl::StrCat("unrecognized option '", a, "'\nTry \"sinfo --help\" for more information"));
    }
  }
  if (!o.format)
    if (auto it = env.find("SINFO_FORMAT"); it != env.end() && !it->second.empty()) o.format = it->second;
  return o;
}

std::string renderSinfo(const SinfoOptions& o, const SlurmConfig& config,
                        const std::vector<NodeView>& nodes, absl::Time now) {
  std::string_view layout = kDefault;
  if (o.reasons) layout = kReasons;
  else if (o.summarize) layout = kSummary;
  else if (o.node_oriented) layout = o.long_format ? kNodeLong : kNode;
  else if (o.long_format) layout = kLong;
  const std::vector<Field> fields = parseFormat(o.format ? std::string_view(*o.format) : layout);
  size_t part_width = 9;
  for (const Partition& p : config.partitions)
    part_width = std::max(part_width, p.name.size() + (p.name == config.default_partition ? 1 : 0));

  auto selected = [&](const NodeView& n) {
    if (!o.states.empty() && std::find(o.states.begin(), o.states.end(), n.state) == o.states.end()) return false;
    if (o.reasons && n.reason.empty()) return false;
    if (!o.nodes.empty() && std::find(o.nodes.begin(), o.nodes.end(), n.name) == o.nodes.end()) return false;
    return true;
  };
  std::vector<const NodeView*> sorted;
  for (const NodeView& n : nodes) sorted.push_back(&n);
  std::sort(sorted.begin(), sorted.end(), [](const NodeView* a, const NodeView* b) {
    return naturalCompare(a->name, b->name) < 0;
  });

  // Rows: per partition (config order), nodes grouped by every printed field but D and N; -N
  // prints one row per node and partition. -R groups across partitions by reason.
  std::vector<Row> rows;
  std::vector<std::string> keys;
  for (const Partition& p : config.partitions) {
    if (!o.partitions.empty() && std::find(o.partitions.begin(), o.partitions.end(), p.name) == o.partitions.end())
      continue;
    const bool is_default = p.name == config.default_partition;
    std::vector<Row> part_rows;
    std::vector<std::string> part_keys;
    for (const NodeView* n : sorted) {
      if (!partitionHas(p, *n) || !selected(*n)) continue;
      Row probe{&p, is_default, {n}};
      std::string key;
      for (const Field& f : fields)
        if (f.letter != '\0' && f.letter != 'N' && f.letter != 'D' && f.letter != 'C' && f.letter != 'F')
          key += value(f.letter, probe, config) + '\x1f';
      if (o.reasons) {
        auto found = std::find(keys.begin(), keys.end(), key);
        if (found != keys.end()) {
          auto& r = rows[static_cast<size_t>(found - keys.begin())];
          if (std::find(r.nodes.begin(), r.nodes.end(), n) == r.nodes.end()) r.nodes.push_back(n);
          continue;
        }
        rows.push_back(probe);
        keys.push_back(key);
        continue;
      }
      auto found = o.node_oriented ? part_keys.end() : std::find(part_keys.begin(), part_keys.end(), key);
      if (found != part_keys.end()) {
        part_rows[static_cast<size_t>(found - part_keys.begin())].nodes.push_back(n);
        continue;
      }
      part_rows.push_back(probe);
      part_keys.push_back(key);
    }
    if (!o.node_oriented)
      // sinfo's default sort "#P,-t": within a partition, the state names in reverse order.
      std::stable_sort(part_rows.begin(), part_rows.end(), [](const Row& a, const Row& b) {
        return nodeStateCompact(a.nodes.front()->state) > nodeStateCompact(b.nodes.front()->state);
      });
    rows.insert(rows.end(), part_rows.begin(), part_rows.end());
  }
  if (o.node_oriented)
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return naturalCompare(a.nodes.front()->name, b.nodes.front()->name) < 0;
    });

  auto widthOf = [&](const Field& f) {
    return f.width == -1 ? static_cast<int>(part_width) : f.width;
  };
  std::string out;
  if (o.long_format) out += absl::FormatTime("%a %b %e %H:%M:%S %Y", now, absl::UTCTimeZone()) + "\n";
  if (!o.noheader) {
    std::string line;
    for (const Field& f : fields)
      line += f.letter == '\0' ? f.text : padSqueueField(header(f.letter), widthOf(f), f.right, true);
    out += line + "\n";
  }
  for (const Row& r : rows) {
    std::string line;
    for (const Field& f : fields) {
      if (f.letter == '\0') {
        line += f.text;
        continue;
      }
      const std::string text = value(f.letter, r, config);
      // A node list is never cut: one longer than its column pushes the rest right.
      if (f.letter == 'N' && text.size() >= static_cast<size_t>(std::max(0, widthOf(f)))) line += text;
      else line += padSqueueField(text, widthOf(f), f.right, true);
    }
    out += line + "\n";
  }
  return out;
}

std::string renderShowNode(const NodeView& n, const SlurmConfig& config) {
  std::string partitions;
  for (const Partition& p : config.partitions)
    if (partitionHas(p, n)) partitions += (partitions.empty() ? "" : ",") + p.name;
  std::string state(nodeStateLong(n.state));
  for (char& c : state) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string out;
  absl::StrAppend(&out, "NodeName=", n.name, " Arch=x86_64 CoresPerSocket=", n.cpus, "\n");
  absl::StrAppend(&out, "   CPUAlloc=", std::min(n.cpus_alloc, n.cpus), " CPUEfctv=", n.cpus,
                  " CPUTot=", n.cpus, " CPULoad=N/A\n");
  std::string features;
  for (const std::string& f : n.features) features += (features.empty() ? "" : ",") + f;
  absl::StrAppend(&out, "   AvailableFeatures=", features.empty() ? "(null)" : features, "\n");
  absl::StrAppend(&out, "   Gres=",
                  n.gpus <= 0 ? "(null)"
                  : n.gpu_type.empty() ? absl::StrCat("gpu:", n.gpus)
                                       : absl::StrCat("gpu:", n.gpu_type, ":", n.gpus),
                  "\n");
  absl::StrAppend(&out, "   NodeAddr=", n.name, " NodeHostName=", n.name, "\n");
  absl::StrAppend(&out, "   RealMemory=", n.memory_mb, " AllocMem=0 FreeMem=N/A Sockets=1 Boards=1\n");
  absl::StrAppend(&out, "   State=", state, " ThreadsPerCore=1 TmpDisk=0 Weight=1\n");
  absl::StrAppend(&out, "   Partitions=", partitions.empty() ? "(null)" : partitions, "\n");
  absl::StrAppend(&out, "   CfgTRES=cpu=", n.cpus, ",mem=", n.memory_mb, "M",
                  n.gpus > 0 ? absl::StrCat(",gres/gpu=", n.gpus) : "", "\n");
  absl::StrAppend(&out, "   AllocTRES=",
                  n.cpus_alloc > 0 || n.gpus_alloc > 0
                      ? absl::StrCat("cpu=", n.cpus_alloc, n.gpus_alloc > 0 ? absl::StrCat(",gres/gpu=", n.gpus_alloc) : "")
                      : "",
                  "\n");
  if (!n.reason.empty()) absl::StrAppend(&out, "   Reason=", n.reason, "\n");
  return out;
}

absl::StatusOr<NodeUpdate> parseNodeUpdate(const std::vector<std::string>& args) {
  NodeUpdate u;
  std::optional<std::string> state;
  bool have_reason = false;
  for (const std::string& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid input: ", a, "\nRequest aborted"));
    const std::string key = a.substr(0, eq), v = a.substr(eq + 1);
    if (equalsIgnoreCase(key, "NodeName")) {
      auto hosts = expandHostlist(v);
      if (!hosts.ok() || hosts->empty())
        return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid node name specified: ", v));
      u.nodes = *hosts;
    } else if (equalsIgnoreCase(key, "State")) {
      state = v;
    } else if (equalsIgnoreCase(key, "Reason")) {
      u.reason = v;
      have_reason = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "scontrol: error: Update of ", key, " is not supported by Muster's scontrol (State and Reason are)"));
    }
  }
  if (u.nodes.empty())
    return absl::InvalidArgumentError("scontrol: error: No valid entity in update command\nRequest aborted");
  if (!state) return absl::InvalidArgumentError("scontrol: error: Update of a node needs State=DRAIN or State=RESUME");
  if (equalsIgnoreCase(*state, "DRAIN") || equalsIgnoreCase(*state, "DOWN")) {
    if (!have_reason || u.reason.empty())
      return absl::InvalidArgumentError(
          "scontrol: error: You must specify a reason when DOWNING or DRAINING a node. Request denied");
    u.drain = true;
  } else if (equalsIgnoreCase(*state, "RESUME") || equalsIgnoreCase(*state, "UNDRAIN") ||
             equalsIgnoreCase(*state, "IDLE")) {
    u.drain = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("scontrol: error: Invalid node state specified: ", *state));
  }
  return u;
}

}  // namespace muster::jobengine::slurm
