#pragma once

// The operator-side commands on the jobs of a namespace (the Slurm jobs are its ParallelJobs of
// runtime slurm; job_view.h says how they read):
//
//   squeue [options]                      the jobs, in Slurm's layouts (job_view.h)
//   scancel [options] [job_id...]         sets spec.slurm.cancel: the job engine ends the job
//                                         CANCELLED and deletes its pods (the batch step gets
//                                         SIGTERM with its pod)
//   scontrol hold|release <job_id>[,...]  sets or clears spec.slurm.hold of pending jobs
//   scontrol show job [job_id]            Slurm's Key=Value blocks
//   sinfo [options]                       partitions over the cluster's nodes (node_view.h)
//   sacct [options]                       accounting of the jobs the API server keeps (acct.h)
//   scontrol show node [name] | partition [name] | config
//   scontrol update NodeName=<hostlist> State=DRAIN Reason=... | State=RESUME
//                                         cordons (spec.unschedulable) with the reason, who
//                                         and when as annotations, or uncordons
//
// Errors are Slurm's words on stderr (e.g. "scancel: error: Kill job error on job id 7: Invalid
// job id specified") and a non-zero exit; the other jobs of the same call are still handled.

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "jobengine/slurm/cli/cli.h"

namespace muster::jobengine::slurm {

int squeueMain(const std::vector<std::string>& args, const GlobalOptions& global,
               const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err);

int scancelMain(const std::vector<std::string>& args, const GlobalOptions& global,
                const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err);

int sacctMain(const std::vector<std::string>& args, const GlobalOptions& global,
              const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err);

int sinfoMain(const std::vector<std::string>& args, const GlobalOptions& global,
              const std::map<std::string, std::string>& env, std::ostream& out, std::ostream& err);

// scontrol's job and node commands (which ones: isScontrolJobCommand in ../steps/scontrol.h; the
// rest of scontrol, such as `show hostnames`, runs inside jobs without the API).
int scontrolJobMain(const std::vector<std::string>& args, const GlobalOptions& global,
                    const std::map<std::string, std::string>& env, std::ostream& out,
                    std::ostream& err);

}  // namespace muster::jobengine::slurm
