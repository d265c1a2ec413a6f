#include "jobengine/slurm/steps/install_tools.h"

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace muster::jobengine::slurm {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "muster-install-tools.XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

void writeFile(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("install-tools copies each binary executable with its links, replacing old ones",
          "[install-tools]") {
  TempDir tmp;
  writeFile(tmp.path / "steps", "steps binary");
  writeFile(tmp.path / "api", "api binary");
  const fs::path dir = tmp.path / "pod" / "bin";
  fs::create_directories(dir);
  writeFile(dir / "srun", "an old srun");  // replaced by the link
  std::ostringstream out, err;
  int rc = installTools(dir,
                        {{tmp.path / "steps", "muster-slurm-steps", {"srun", "scontrol"}},
                         {tmp.path / "api", "muster-slurm", {"sbatch", "squeue"}}},
                        "test", out, err);
  REQUIRE(rc == 0);
  CHECK(err.str().empty());
  CHECK(out.str() == "test: installed into " + dir.string() + "\n");
  CHECK(readFile(dir / "muster-slurm-steps") == "steps binary");
  CHECK(readFile(dir / "muster-slurm") == "api binary");
  CHECK((fs::status(dir / "muster-slurm-steps").permissions() & fs::perms::others_exec) !=
        fs::perms::none);
  CHECK(fs::read_symlink(dir / "srun") == "muster-slurm-steps");
  CHECK(fs::read_symlink(dir / "scontrol") == "muster-slurm-steps");
  CHECK(fs::read_symlink(dir / "sbatch") == "muster-slurm");
  CHECK(readFile(dir / "squeue") == "api binary");
}

TEST_CASE("install-tools says which binary it could not copy", "[install-tools]") {
  TempDir tmp;
  std::ostringstream out, err;
  int rc = installTools(tmp.path / "bin", {{tmp.path / "missing", "muster-slurm-steps", {"srun"}}},
                        "test", out, err);
  CHECK(rc == 1);
  CHECK(out.str().empty());
  CHECK(err.str().starts_with("test: cannot copy \"" + (tmp.path / "missing").string()));
  CHECK_FALSE(fs::exists(tmp.path / "bin" / "srun"));
}

TEST_CASE("install-tools takes exactly one directory, and --help is not one", "[install-tools]") {
  std::ostringstream out, err;
  fs::path dir;
  CHECK(installToolsDir({"--help"}, "usage\n", out, err, &dir) == 0);
  CHECK(out.str() == "usage\n");
  CHECK(installToolsDir({}, "usage\n", out, err, &dir) == 2);
  CHECK(installToolsDir({"a", "b"}, "usage\n", out, err, &dir) == 2);
  CHECK(installToolsDir({"-x"}, "usage\n", out, err, &dir) == 2);
  CHECK(err.str() == "usage\nusage\nusage\n");
  CHECK(dir.empty());
  CHECK(installToolsDir({"/muster/bin"}, "usage\n", out, err, &dir) == std::nullopt);
  CHECK(dir == "/muster/bin");
}

}  // namespace
}  // namespace muster::jobengine::slurm
