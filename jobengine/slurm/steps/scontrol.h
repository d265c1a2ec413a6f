#pragma once

// `scontrol`, the parts that work inside a Muster job without a controller (src/scontrol/
// scontrol.c _show_it, info_job.c scontrol_print_hosts / scontrol_encode_hostlist):
//
//   scontrol show hostnames [EXPR]   one host name per line; without EXPR $SLURM_NODELIST
//                                    (then $SLURM_JOB_NODELIST), as Slurm does
//   scontrol show hostlist NAMES     the compressed hostlist of NAMES (itself a hostlist
//                                    expression, or a file when it starts with '/', "-" for
//                                    stdin: newline-separated names, at most 1 MiB)
//   scontrol show hostlistsorted NAMES   the same, sorted
//
// Keywords are matched as scontrol matches them: case-insensitive prefixes of a minimum length
// ("sh" is not enough for show, "show hostn" is hostnames, "show hostl" hostlist), and
// "show hostnames=EXPR" works. Leading options (-a -d -o -Q -v, their long forms) are accepted
// and ignored.
//
// Errors are Slurm's text on stderr with exit code 1: "invalid keyword: X", "invalid entity:X for
// keyword:show", "too many arguments for keyword:show", "Invalid hostlist: X", "invalid encode
// argument". Entities Slurm knows but Muster does not answer yet (job, node, partition, ...)
// say "scontrol: error: show X is not supported by Muster". Deviation: an invalid hostlist for
// show hostnames exits 1 (Slurm prints the error and exits 0).
//
// New entities are added to the table in scontrol.cc (name, minimum abbreviation, handler).

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace muster::jobengine::slurm {

// argv without argv[0].
int scontrolMain(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, std::istream& in,
                 std::ostream& out, std::ostream& err);

// The command of an scontrol command line: its words after the leading options (-a, -d, -o, ...),
// from the first of -h, -V, --help, --usage, --version or -- on (scontrolMain's to answer).
std::vector<std::string> scontrolCommandWords(const std::vector<std::string>& args);

// Whether a command (scontrolCommandWords) is one of scontrol's job or node commands, which read
// or change the cluster through the API server (show job/node/partition/config, hold, release,
// requeue, update): the muster-slurm binary's (../cli/jobs_cli.h); the rest runs here.
bool isScontrolJobCommand(const std::vector<std::string>& command);

}  // namespace muster::jobengine::slurm
