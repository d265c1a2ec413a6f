#include "jobengine/slurm/steps/scontrol.h"

#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>

#include "absl/status/statusor.h"
#include "jobengine/slurm/core/hostlist.h"
#include "jobengine/slurm/core/util.h"

namespace muster::jobengine::slurm {
namespace {

using Env = std::map<std::string, std::string>;

struct Io {
  const Env& env;
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

// scontrol's xstrncasecmp(tag, keyword, MAX(tag_len, min)) == 0: `tag` is a prefix of `keyword`
// at least `min` characters long.
bool matches(std::string_view tag, std::string_view keyword, size_t min) {
  if (tag.size() < min || tag.size() > keyword.size()) return false;
  return equalsIgnoreCase(tag, keyword.substr(0, tag.size()));
}

std::optional<std::string> env(const Io& io, const char* name) {
  auto it = io.env.find(name);
  if (it == io.env.end()) return std::nullopt;
  return it->second;
}

int printHosts(const Io& io, std::optional<std::string> list) {
  if (!list) list = env(io, "SLURM_NODELIST");
  if (!list) list = env(io, "SLURM_JOB_NODELIST");
  if (!list) {
    io.err << "scontrol: error: host list is empty\n";
    return 1;
  }
  absl::StatusOr<std::vector<std::string>> hosts = expandHostlist(*list);
  if (!hosts.ok()) {
    io.err << "Invalid hostlist: " << *list << "\n";
    return 1;
  }
  for (const std::string& h : *hosts) io.out << h << "\n";
  return 0;
}

// scontrol_encode_hostlist: a file's newlines become commas, and runs of commas one.
std::string reformatHostlist(std::string text) {
  for (char& c : text) {
    if (c == '\n') c = ',';
  }
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ',' && i + 1 < text.size() && text[i + 1] == ',') continue;
    out.push_back(text[i]);
  }
  return out;
}

int encodeHostlist(const Io& io, const std::optional<std::string>& arg, bool sorted) {
  if (!arg) {
    io.err << "invalid encode argument\n";
    return 1;
  }
  std::string list = *arg;
  if (list == "-" || (!list.empty() && list[0] == '/')) {
    constexpr size_t kLimit = 1024 * 1024;
    std::string text;
    if (list == "-") {
      text.assign(std::istreambuf_iterator<char>(io.in), std::istreambuf_iterator<char>());
    } else {
      std::ifstream file(list, std::ios::binary);
      if (!file) {
        io.err << "Can not open " << list << "\n";
        return 1;
      }
      text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    if (text.size() >= kLimit) {
      io.err << "File " << (list == "-" ? "/dev/stdin" : list) << " is too large\n";
      return 1;
    }
    list = reformatHostlist(std::move(text));
  }
  absl::StatusOr<std::vector<std::string>> hosts = expandHostlist(list);
  if (!hosts.ok()) {
    io.err << "Invalid hostlist: " << list << "\n";
    return 1;
  }
  io.out << (sorted ? compressHostlistSorted(*hosts) : compressHostlist(*hosts)) << "\n";
  return 0;
}

using ShowHandler =
    std::function<int(const Io&, std::string_view entity, const std::optional<std::string>&)>;

struct ShowEntity {
  std::string_view name;
  size_t min;  // shortest accepted abbreviation
  ShowHandler handler;
};

int notSupported(const Io& io, std::string_view entity, const std::optional<std::string>&) {
  io.err << "scontrol: error: show " << entity << " is not supported by Muster\n";
  return 1;
}

// In scontrol's order, which decides between overlapping abbreviations.
const std::vector<ShowEntity>& showEntities() {
  static const std::vector<ShowEntity> kEntities = {
      {"aliases", 1, notSupported},
      {"bbstat", 2, notSupported},
      {"dwstat", 2, notSupported},
      {"burstbuffer", 2, notSupported},
      {"assoc_mgr", 2, notSupported},
      {"cache", 2, notSupported},
      {"config", 1, notSupported},
      {"daemons", 1, notSupported},
      {"federations", 1, notSupported},
      {"hostnames", 5,
       [](const Io& io, std::string_view, const std::optional<std::string>& v) {
         return printHosts(io, v);
       }},
      {"hostlist", 5,
       [](const Io& io, std::string_view, const std::optional<std::string>& v) {
         return encodeHostlist(io, v, false);
       }},
      {"hostlistsorted", 9,
       [](const Io& io, std::string_view, const std::optional<std::string>& v) {
         return encodeHostlist(io, v, true);
       }},
      {"jobs", 1, notSupported},
      {"jobid", 1, notSupported},
      {"licenses", 2, notSupported},
      {"nodes", 1, notSupported},
      {"partitions", 2, notSupported},
      {"partitionname", 2, notSupported},
      {"reservations", 1, notSupported},
      {"reservationname", 1, notSupported},
      {"resources", 4, notSupported},
      {"slurmd", 2, notSupported},
      {"steps", 2, notSupported},
      {"topoconf", 5, notSupported},
      {"topology", 1, notSupported},
  };
  return kEntities;
}

int show(const Io& io, const std::vector<std::string>& words) {
  if (words.size() < 2) {
    io.err << "too few arguments for keyword:" << words[0] << "\n";
    return 1;
  }
  if (words.size() > 3) {
    io.err << "too many arguments for keyword:" << words[0] << "\n";
    return 1;
  }
  std::string_view tag = words[1];
  std::optional<std::string> value;
  if (size_t eq = tag.find('='); eq != std::string_view::npos) {
    value = std::string(tag.substr(eq + 1));
    tag = tag.substr(0, eq);
  } else if (words.size() == 3) {
    value = words[2];
  }
  for (const ShowEntity& e : showEntities()) {
    if (matches(tag, e.name, e.min)) return e.handler(io, e.name, value);
  }
  io.err << "invalid entity:" << tag << " for keyword:" << words[0] << "\n";
  return 1;
}

// What `scontrol --help` (and -h, --usage) print: the commands Muster's scontrol answers (the
// job, node, partition and config ones in jobs_cli.cc, through cmd/main.cc) and every option
// scontrolMain reads.
constexpr char kScontrolUsage[] =
    "Usage: scontrol [OPTIONS] COMMAND\n"
    "Muster's scontrol answers:\n"
    "  show hostnames [hostlist]         one host name per line (default\n"
    "                                    $SLURM_NODELIST)\n"
    "  show hostlist names|/file|-       the names as a compressed hostlist\n"
    "  show hostlistsorted names|/file|- the same, sorted\n"
    "  show job [job_ids]                the namespace's Slurm jobs\n"
    "  show node [hostlist]              nodes, as Slurm's node records\n"
    "  show partition [name]             the partitions of Muster's config\n"
    "  show config                       the settings Muster's Slurm has\n"
    "  hold|uhold|release job_ids        hold pending jobs, or release them\n"
    "  requeue|requeuehold job_ids       run running or ended jobs again (and hold\n"
    "                                    them)\n"
    "  update JobId=job_ids TimeLimit=[+|-]time\n"
    "  update NodeName=hostlist State=DRAIN|DOWN|RESUME|UNDRAIN|IDLE [Reason=text]\n"
    "\n"
    "  -a, --all, -d, --details, -F, --future, -o, --oneliner, -Q, --quiet,\n"
    "  -v, --verbose                     accepted before the command; change nothing\n"
    "  -h, --help, --usage               print this usage and exit\n"
    "  -V, --version                     print the version and exit\n";

}  // namespace

int scontrolMain(const std::vector<std::string>& argv, const Env& environment, std::istream& in,
                 std::ostream& out, std::ostream& err) {
  Io io{environment, in, out, err};
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;
    if (a == "-h" || a == "--help" || a == "--usage") {
      out << kScontrolUsage;
      return 0;
    }
    if (a == "-V" || a == "--version") {
      out << "slurm 24.11.0\n";
      return 0;
    }
    // -a -d -F -o -Q -v and their long forms change nothing Muster prints here.
  }
  std::vector<std::string> words(argv.begin() + static_cast<std::ptrdiff_t>(i), argv.end());
  if (words.empty()) {
    err << "scontrol: error: interactive mode is not supported by Muster; give a command, e.g. "
           "scontrol show hostnames\n";
    return 1;
  }
  const std::string& tag = words[0];
  if (matches(tag, "show", 3)) return show(io, words);
  err << "invalid keyword: " << tag << "\n";
  return 1;
}

std::vector<std::string> scontrolCommandWords(const std::vector<std::string>& args) {
  auto word = args.begin();
  for (; word != args.end() && word->size() >= 2 && (*word)[0] == '-'; ++word)
    if (*word == "--" || *word == "-h" || *word == "--help" || *word == "--usage" ||
        *word == "-V" || *word == "--version")
      break;
  return std::vector<std::string>(word, args.end());
}

bool isScontrolJobCommand(const std::vector<std::string>& args) {
  if (args.empty()) return false;
  const std::string& verb = args[0];
  if (equalsIgnoreCase(verb, "hold") || equalsIgnoreCase(verb, "release") ||
      equalsIgnoreCase(verb, "uhold") || equalsIgnoreCase(verb, "requeue") ||
      equalsIgnoreCase(verb, "requeuehold"))
    return true;
  if (equalsIgnoreCase(verb, "update"))
    return args.size() >= 2 &&
           (startsWithIgnoreCase(args[1], "NodeName=") || startsWithIgnoreCase(args[1], "JobId="));
  if (!equalsIgnoreCase(verb, "show") || args.size() < 2) return false;
  for (const char* what : {"job", "jobs", "jobid", "node", "nodes", "partition", "partitions", "config"})
    if (equalsIgnoreCase(args[1], what)) return true;
  return false;
}

}  // namespace muster::jobengine::slurm
