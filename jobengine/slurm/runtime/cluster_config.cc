#include "jobengine/slurm/runtime/cluster_config.h"

#include <set>

#include "jobengine/slurm/core/time.h"
#include "proto/strings.h"

namespace muster::jobengine::slurm {

using proto::strCat;
using proto::config::bad;
using proto::config::intInto;
using proto::config::mapInto;
using proto::config::readString;
using proto::config::stringInto;

namespace {

// A Slurm time read by `parse` (time.h): seconds, nullopt for UNLIMITED.
proto::config::Reader slurmTimeInto(
    std::optional<int64_t>* out,
    absl::StatusOr<std::optional<int64_t>> (*parse)(std::string_view)) {
  return [out, parse](const YAML::Node& n, const std::string& key) -> absl::Status {
    std::string text;
    if (absl::Status s = readString(n, key, &text); !s.ok()) return s;
    auto t = parse(text);
    if (!t.ok()) return bad(key, strCat("must be a Slurm time (minutes, M:S, H:M:S, D-H, D-H:M, "
                                        "D-H:M:S or UNLIMITED), got \"", text, "\""));
    *out = *t;
    return absl::OkStatus();
  };
}
// A time limit: whole minutes, 0 is UNLIMITED (parseTimeLimit).
proto::config::Reader timeInto(std::optional<int64_t>* out) { return slurmTimeInto(out, parseTimeLimit); }
// Exact seconds (parseDurationSeconds): "0:05" is 5 seconds, 0 is 0.
proto::config::Reader durationInto(std::optional<int64_t>* out) {
  return slurmTimeInto(out, parseDurationSeconds);
}

proto::config::Reader stringMapInto(std::map<std::string, std::string>* out) {
  return [out](const YAML::Node& n, const std::string& key) -> absl::Status {
    if (n.IsNull()) return absl::OkStatus();
    if (!n.IsMap()) return bad(key, strCat("must be a mapping of strings, got ", proto::config::describe(n)));
    out->clear();
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar() || !it->second.IsScalar())
        return bad(key, "must be a mapping of strings");
      (*out)[it->first.Scalar()] = it->second.Scalar();
    }
    return absl::OkStatus();
  };
}

proto::config::Reader partitionsInto(std::vector<Partition>* out) {
  return [out](const YAML::Node& n, const std::string& key) -> absl::Status {
    if (!n.IsSequence()) return bad(key, strCat("must be a list of partitions, got ", proto::config::describe(n)));
    out->clear();
    for (size_t i = 0; i < n.size(); ++i) {
      Partition& p = out->emplace_back();
      const std::string at = strCat(key, "[", i, "]");
      proto::config::Keys keys = {
          {"name", stringInto(&p.name)},
          {"nodeSelector", stringMapInto(&p.node_selector)},
          {"defaultTime", timeInto(&p.default_time_seconds)},
          {"maxTime", timeInto(&p.max_time_seconds)},
          {"maxNodes", intInto(&p.max_nodes)},
          {"defaultMemPerCpu", intInto(&p.default_mem_per_cpu_mb)},
          {"priorityClassName", stringInto(&p.priority_class_name)},
          {"topologyPreferred", stringInto(&p.topology_preferred)},
          {"topologyRequired", stringInto(&p.topology_required)},
          {"template",
           [&p](const YAML::Node& t, const std::string& k) -> absl::Status {
             auto json = proto::config::yamlToJson(t, k);
             if (!json.ok()) return json.status();
             p.template_json = *json;
             auto parsed = proto::PodTemplate::parse(p.template_json, k);
             if (!parsed.ok()) return parsed.status();
             p.pod_template = std::move(*parsed);
             return absl::OkStatus();
           }},
      };
      if (absl::Status s = proto::config::readMap(n[i], at, keys); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
}

}  // namespace

const Partition* SlurmConfig::partition(std::string_view name) const {
  if (name.empty()) {
    if (!default_partition.empty()) return partition(default_partition);
    return partitions.empty() ? nullptr : &partitions.front();
  }
  for (const Partition& p : partitions)
    if (p.name == name) return &p;
  return nullptr;
}

proto::config::Keys slurmConfigKeys(SlurmConfig* c) {
  return {{"slurm", mapInto({
                        {"clusterName", stringInto(&c->cluster_name)},
                        {"defaultPartition", stringInto(&c->default_partition)},
                        {"jobIds", mapInto({{"namespace", stringInto(&c->job_ids.namespace_)},
                                            {"name", stringInto(&c->job_ids.name)}})},
                        {"toolsImage", stringInto(&c->tools_image)},
                        {"accountingRetention", durationInto(&c->accounting_retention_seconds)},
                        {"partitions", partitionsInto(&c->partitions)},
                    })}};
}

absl::Status validateSlurmConfig(const SlurmConfig& config) {
  const SlurmConfig* c = &config;
  if (c->cluster_name.empty()) return bad("slurm.clusterName", "must not be empty");
  std::set<std::string> names;
  for (size_t i = 0; i < c->partitions.size(); ++i) {
    const Partition& p = c->partitions[i];
    const std::string at = strCat("slurm.partitions[", i, "]");
    if (p.name.empty() || p.name.find_first_of(" ,\t\n") != std::string::npos)
      return bad(strCat(at, ".name"), "must be a word (no spaces or commas)");
    if (!names.insert(p.name).second)
      return bad(strCat(at, ".name"), strCat("partition \"", p.name, "\" is defined twice"));
    if (p.max_nodes < 0) return bad(strCat(at, ".maxNodes"), "must not be negative");
    if (p.default_mem_per_cpu_mb < 0) return bad(strCat(at, ".defaultMemPerCpu"), "must not be negative");
    if (p.default_time_seconds && p.max_time_seconds && *p.default_time_seconds > *p.max_time_seconds)
      return bad(strCat(at, ".defaultTime"), "must not exceed maxTime");
    if (!p.pod_template) return bad(strCat(at, ".template"), "is required (a PodTemplateSpec)");
    proto::PodTemplate t = *p.pod_template;
    if (!t.container("main"))
      return bad(strCat(at, ".template.spec.containers"), "must contain a container named \"main\"");
    if (t.container("main")->image().empty())
      return bad(strCat(at, ".template.spec.containers[main].image"), "is required");
  }
  if (!c->default_partition.empty() && !names.count(c->default_partition))
    return bad("slurm.defaultPartition", strCat("names no partition: \"", c->default_partition, "\""));
  if (c->job_ids.name.empty()) return bad("slurm.jobIds.name", "must not be empty");
  return absl::OkStatus();
}

absl::StatusOr<SlurmConfig> parseSlurmSection(std::string_view text) {
  SlurmConfig config;
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsMap() && root["slurm"]) {
      proto::config::Keys keys = slurmConfigKeys(&config);
      if (absl::Status s = keys[0].second(root["slurm"], "slurm"); !s.ok()) return s;
    } else if (!root.IsNull() && !root.IsMap()) {
      return bad("config", "must be a mapping");
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        strCat("config is not valid YAML: ", proto::config::yamlErrorText(e)));
  }
  if (absl::Status s = validateSlurmConfig(config); !s.ok()) return s;
  return config;
}

}  // namespace muster::jobengine::slurm
