#pragma once

// The Slurm cluster Muster presents: its partitions and where job ids come from, under the key
// `slurm` of muster-scheduler's configuration file (the job engine builds pods from it) — the
// same text the `sbatch` CLI reads from the scheduler's ConfigMap (or a file) to check a request
// before submitting it.
//
//   slurm:
//     clusterName: muster             # SLURM_CLUSTER_NAME
//     defaultPartition: batch         # when -p is not given; else the first partition
//     jobIds: {namespace: muster-system, name: muster-slurm-job-ids}   # the counter ConfigMap
//     toolsImage: ""                  # Muster's image: an init container copies muster-slurm
//                                     # into every job pod; empty: the partition's image has it
//     accountingRetention: "7-00:00:00"   # how long a job is kept after it ended (sacct);
//                                     # Slurm time format, UNLIMITED: until deleted
//     partitions:
//     - name: batch
//       nodeSelector: {muster.dev/pool: gpu}   # the partition's nodes
//       defaultTime: "1:00:00"        # Slurm time formats; absent: UNLIMITED
//       maxTime: "7-00:00:00"         # a longer --time is refused; absent: UNLIMITED
//       maxNodes: 0                   # 0: no limit
//       defaultMemPerCpu: 0           # MB per CPU when no --mem* is given; 0: no memory request
//       priorityClassName: ""         # given to the job's pods
//       topologyPreferred: ""         # a topology level key the job's gang should fit inside
//       topologyRequired: ""          # ... or must fit inside
//       template:                     # a PodTemplateSpec every pod of a job starts from
//         spec:
//           serviceAccountName: slurm-jobs
//           containers:
//           - name: main              # required: the container that runs the job
//             image: registry.example.com/hpc:2024.1
//             volumeMounts: [{name: home, mountPath: /home}]
//           volumes:
//           - {name: home, persistentVolumeClaim: {claimName: jail-pvc}}   # the shared RWX volume
//
// What users' pods get from the partition: its template (image, volumes, security context,
// service account, tolerations, ...), its node selector and priority class. What comes from the
// job (spec.launcher): the main container's resources and the nodes asked for (-w, -x, -C).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config_reader.h"
#include "proto/pod_template.h"

namespace muster::jobengine::slurm {

struct Partition {
  std::string name;
  std::map<std::string, std::string> node_selector;
  std::optional<int64_t> default_time_seconds;  // absent: UNLIMITED
  std::optional<int64_t> max_time_seconds;      // absent: UNLIMITED
  int64_t max_nodes = 0;
  int64_t default_mem_per_cpu_mb = 0;
  std::string priority_class_name;
  std::string topology_preferred;
  std::string topology_required;
  std::optional<proto::PodTemplate> pod_template;  // parsed and checked (has container "main")
  std::string template_json;                       // as configured
};

struct ObjectName {
  std::string namespace_;
  std::string name;
};

struct SlurmConfig {
  std::string cluster_name = "muster";
  std::string default_partition;
  ObjectName job_ids{"", "muster-slurm-job-ids"};
  std::string tools_image;
  // How long the job engine keeps a Slurm job (its ParallelJob) after it ended, for sacct;
  // nullopt (UNLIMITED): until someone deletes it.
  std::optional<int64_t> accounting_retention_seconds = int64_t{7} * 24 * 3600;
  std::vector<Partition> partitions;

  bool enabled() const { return !partitions.empty(); }
  // The partition `name`, or the default one for an empty name; nullptr when there is none.
  const Partition* partition(std::string_view name) const;
};

// The top-level key `slurm`, reading into *config.
proto::config::Keys slurmConfigKeys(SlurmConfig* config);
absl::Status validateSlurmConfig(const SlurmConfig& config);

// The `slurm` section of a whole muster-scheduler config file (other keys are ignored): what the
// CLI reads. An absent section is an empty (disabled) config.
absl::StatusOr<SlurmConfig> parseSlurmSection(std::string_view config_file_text);

}  // namespace muster::jobengine::slurm
