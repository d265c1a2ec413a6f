#pragma once

// Test helpers: run a program without a shell, with extra environment, capture its output; a
// temporary directory removed at scope exit.

#include <map>
#include <string>
#include <vector>

namespace muster::topology::testing {

struct RunResult {
  int exit_code = -1;  // -1: could not start or killed
  std::string out;
  std::string err;
};

// argv[0] is looked up in PATH. `env` entries are added to (or replace in) this process's
// environment; a value of "\x01unset" removes the variable.
RunResult run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {});

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline const char kUnset[] = "\x01unset";

}  // namespace muster::topology::testing
