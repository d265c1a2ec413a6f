#pragma once

// The job engine's part of muster-scheduler's configuration file, under the key `jobEngine`:
//
//   jobEngine:
//     enabled: true              # run the ParallelJob controller (--job-engine overrides)
//     clusterDomain: cluster.local   # the DNS domain of Services: pod names in hostfiles are
//                                    # <pod>.<service>.<namespace>.svc.<clusterDomain>
//   slurm: {...}                     # the Slurm partitions:
//                                    # jobengine/slurm/runtime/cluster_config.h

#include <string>

#include "absl/status/status.h"
#include "jobengine/naming.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "proto/config_reader.h"

namespace muster::jobengine {

struct JobEngineConfig {
  bool enabled = true;
  std::string cluster_domain = kDefaultClusterDomain;
  slurm::SlurmConfig slurm;  // the key `slurm` (jobengine/slurm/runtime/cluster_config.h)
};

// The top-level keys the job engine owns ("jobEngine", "slurm"), reading into *config.
proto::config::Keys jobEngineConfigKeys(JobEngineConfig* config);
absl::Status validateJobEngineConfig(const JobEngineConfig& config);

}  // namespace muster::jobengine
