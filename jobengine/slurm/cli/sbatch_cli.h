#pragma once

// `sbatch`: a Slurm batch script becomes a ParallelJob (runtime slurm) and a Secret with the
// script and the submission environment, after the whole request was checked (submit.h):
//
//   1. options from the command line, the SBATCH_* environment and the script's #SBATCH lines
//      (the command line wins, then the environment, as Slurm);
//   2. the partition's nodes (when the user may list nodes) to refuse what can never run;
//   3. a job id (job_ids.h), the ParallelJob, then the Secret owned by it (the job is deleted
//      again if the Secret cannot be stored: nothing is left half-created);
//   4. "Submitted batch job <id>" (or "<id>" with --parsable); --wait returns the job's exit
//      code once it ended.
// A refused request prints Slurm's wording and exits 1 with nothing created.

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "jobengine/slurm/cli/cli.h"

namespace muster::jobengine::slurm {

int sbatchMain(const std::vector<std::string>& args, const GlobalOptions& global,
               const std::map<std::string, std::string>& env, std::istream& in, std::ostream& out,
               std::ostream& err);

}  // namespace muster::jobengine::slurm
