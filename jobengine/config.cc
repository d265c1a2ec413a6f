#include "jobengine/config.h"

#include "jobengine/naming.h"
#include "proto/strings.h"

namespace muster::jobengine {

proto::config::Keys jobEngineConfigKeys(JobEngineConfig* c) {
  using proto::config::boolInto;
  using proto::config::mapInto;
  using proto::config::stringInto;
  proto::config::Keys keys = {{"jobEngine", mapInto({{"enabled", boolInto(&c->enabled)},
                                                     {"clusterDomain", stringInto(&c->cluster_domain)}})}};
  for (auto& k : slurm::slurmConfigKeys(&c->slurm)) keys.push_back(std::move(k));
  return keys;
}

absl::Status validateJobEngineConfig(const JobEngineConfig& c) {
  if (!isDns1123Subdomain(c.cluster_domain))
    return proto::config::bad("jobEngine.clusterDomain",
                              proto::strCat("must be a DNS domain such as cluster.local, got \"",
                                            c.cluster_domain, "\""));
  return slurm::validateSlurmConfig(c.slurm);
}

}  // namespace muster::jobengine
