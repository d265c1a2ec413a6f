#include "jobengine/slurm/steps/install_tools.h"

#include <ostream>
#include <system_error>

extern char** environ;

namespace muster::jobengine::slurm {

namespace fs = std::filesystem;

int installTools(const fs::path& dir, const std::vector<ToolCopy>& copies,
                 std::string_view program, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    err << program << ": cannot create " << dir << ": " << ec.message() << "\n";
    return 1;
  }
  for (const ToolCopy& copy : copies) {
    const fs::path target = dir / copy.name;
    fs::copy_file(copy.source, target, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      err << program << ": cannot copy " << copy.source << " to " << target << ": "
          << ec.message() << "\n";
      return 1;
    }
    fs::permissions(target, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    for (const std::string& tool : copy.links) {
      const fs::path link = dir / tool;
      fs::remove(link, ec);
      fs::create_symlink(copy.name, link, ec);
      if (ec) {
        err << program << ": cannot link " << link << ": " << ec.message() << "\n";
        return 1;
      }
    }
  }
  out << program << ": installed into " << dir.string() << "\n";
  return 0;
}

std::optional<int> installToolsDir(const std::vector<std::string>& args, std::string_view usage,
                                   std::ostream& out, std::ostream& err, fs::path* dir) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << usage;
    return 0;
  }
  if (args.size() != 1 || args[0].starts_with("-")) {
    err << usage;
    return 2;
  }
  *dir = args[0];
  return std::nullopt;
}

fs::path selfBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self;
}

std::map<std::string, std::string> processEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace muster::jobengine::slurm
