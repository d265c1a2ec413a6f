#pragma once

// sacct: accounting of the namespace's Slurm jobs, from the ParallelJobs the API server keeps
// (job_view.h reads them), not from slurmdbd. A job is there from its submission until the job
// engine deletes it, `slurm.accountingRetention` after it ended (cluster_config.h).
//
// Options (sacct.1): -j/--jobs (<id>, <id>_<task>, or <id>.<step> for that step alone), -u/--user, -a/--allusers (default: the caller's jobs only, as for
// a user who is not an operator in Slurm), -S/--starttime, -E/--endtime (time.h's formats, read
// as sacct does, in UTC), -s/--state, --name, -r/--partition, -A/--accounts, -X/--allocations,
// -o/--format (and $SACCT_FORMAT), -b/--brief, -P/--parsable2, -p/--parsable, --delimiter,
// -n/--noheader, -e/--helpformat, -h/--help. Not there (refused, saying so): -l/--long, --json,
// --yaml, -c/--completion, -D/--duplicates, -L/--allclusters, -N/--nodelist, -T/--truncate,
// -k/-K (time limits), -q, -W, -x, -B.
//
// Which jobs (sacct's window): -S defaults to midnight today (UTC), or to the epoch with -j; -E to
// now. Without -s a job is listed when it was eligible in the window: submitted before its end
// and not ended before its start. With -s, when it was in one of those states in the window (a
// finished state from its end on, RUNNING from its start to its end, PENDING from submission to
// start); -s without -S starts the window now, as in Slurm.
//
// Lines: the job, and once it started its batch step "<id>.batch", then the steps srun ran
// "<id>.<step>" (unless -X). srun's steps are known once the batch step ended (step_record.h):
// while a job runs sacct shows only the job and its batch step.
//
// Layout (print_fields.c): every field has Slurm's width (JobID -12, i.e. left-aligned; the
// others right-aligned); "Name%N" sets it (negative: left-aligned; |N| at most 1024, Muster's
// bound). A longer value is cut to the
// width with '+' as its last character. Each field is followed by a space; a header line and a
// line of dashes come first (unless -n). -p: every field followed by the delimiter ('|'); -P: the
// delimiter between fields only; neither cuts values.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobengine/slurm/cli/job_view.h"

namespace muster::jobengine::slurm {

inline constexpr char kSacctDefaultFormat[] =
    "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
inline constexpr char kSacctBriefFormat[] = "JobID,State,ExitCode";

struct SacctField {
  std::string name;  // as Slurm spells it ("AllocCPUS")
  int width = 10;    // negative: left-aligned
};

struct SacctOptions {
  bool help = false, helpformat = false, usage = false, version = false;
  bool noheader = false;
  bool all_users = false;
  bool allocations = false;  // -X
  bool parsable = false;     // -p
  bool parsable2 = false;    // -P
  std::string delimiter = "|";
  std::vector<SacctField> fields;
  std::vector<JobIdSpec> job_ids;
  std::vector<std::string> users, names, partitions, accounts;
  std::set<JobState> states;
  std::optional<absl::Time> start, end;  // -S, -E
};

// Every field sacct -o takes here, with its default width, in sacct -e's order.
const std::vector<SacctField>& sacctFields();

// What `sacct --help` (and --usage) print: every option parseSacctArgs takes, those it refuses
// too.
std::string_view sacctUsage();

// Parses sacct's command line; `now` reads -S/-E. InvalidArgument in Slurm's words for bad
// options, fields, states or times.
absl::StatusOr<SacctOptions> parseSacctArgs(const std::vector<std::string>& args,
                                            const std::map<std::string, std::string>& env,
                                            absl::Time now);

// Whether sacct lists the job; `me` is the caller's user name.
bool sacctSelects(const SacctOptions& options, const JobView& job, const std::string& me,
                  absl::Time now);

// The whole output for these jobs, sorted by job id. Every value is printed terminalSafe
// (util.h): a control character in a job's name or comment prints as '?'.
std::string renderSacct(const SacctOptions& options, std::vector<JobView> jobs,
                        const std::string& me, absl::Time now);

}  // namespace muster::jobengine::slurm
