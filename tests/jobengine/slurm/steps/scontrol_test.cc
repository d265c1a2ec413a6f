#include "jobengine/slurm/steps/scontrol.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "tests/jobengine/slurm/steps/steps_test_util.h"

namespace muster::jobengine::slurm {
namespace {

struct Run {
  int rc;
  std::string out, err;
};

Run scontrol(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {}, const std::string& input = "") {
  std::istringstream in(input);
  std::ostringstream out, err;
  int rc = scontrolMain(argv, env, in, out, err);
  return {rc, out.str(), err.str()};
}

TEST_CASE("show hostnames expands a hostlist one name per line", "[scontrol]") {
  Run r = scontrol({"show", "hostnames", "gpu[01-03],login"});
  CHECK(r.rc == 0);
  CHECK(r.out == "gpu01\ngpu02\ngpu03\nlogin\n");
  CHECK(r.err.empty());
}

TEST_CASE("show hostnames without a list expands the job's node list", "[scontrol]") {
  // scontrol_print_hosts(getenv("SLURM_NODELIST")).
  Run r = scontrol({"show", "hostnames"}, {{"SLURM_NODELIST", "n[1-2]"}, {"SLURM_JOB_NODELIST", "x"}});
  CHECK(r.out == "n1\nn2\n");
  r = scontrol({"show", "hostnames"}, {{"SLURM_JOB_NODELIST", "a[7-8]"}});
  CHECK(r.out == "a7\na8\n");
  r = scontrol({"show", "hostnames"});
  CHECK(r.rc == 1);
  CHECK(r.err == "scontrol: error: host list is empty\n");
}

TEST_CASE("show hostlist compresses names in their order", "[scontrol]") {
  Run r = scontrol({"show", "hostlist", "n1,n2,n3,n5"});
  CHECK(r.rc == 0);
  CHECK(r.out == "n[1-3,5]\n");
  CHECK(scontrol({"show", "hostlist", "n3,n1,n2"}).out == "n[3,1-2]\n");
  CHECK(scontrol({"show", "hostlistsorted", "n3,n1,n2"}).out == "n[1-3]\n");
}

TEST_CASE("show hostlist reads names from a file or stdin", "[scontrol]") {
  testing::TempDir dir;
  testing::writeFile(dir.file("hosts"), "n1\nn2\n\nn4\n");
  CHECK(scontrol({"show", "hostlist", dir.file("hosts")}).out == "n[1-2,4]\n");
  CHECK(scontrol({"show", "hostlist", "-"}, {}, "b2\nb1\n").out == "b[2,1]\n");
  Run r = scontrol({"show", "hostlist", dir.file("missing")});
  CHECK(r.rc == 1);
  CHECK(r.err == "Can not open " + dir.file("missing") + "\n");
}

TEST_CASE("keywords may be abbreviated as scontrol allows", "[scontrol]") {
  CHECK(scontrol({"sho", "hostn", "n[1-2]"}).out == "n1\nn2\n");
  CHECK(scontrol({"SHOW", "HostNames", "n1"}).out == "n1\n");
  CHECK(scontrol({"show", "hostl", "n1,n2"}).out == "n[1-2]\n");
  CHECK(scontrol({"show", "hostlists", "n2,n1"}).out == "n[1-2]\n");
  CHECK(scontrol({"show", "hostnames=n[3-4]"}).out == "n3\nn4\n");
  CHECK(scontrol({"-o", "show", "hostnames", "n1"}).out == "n1\n");
}

TEST_CASE("errors use scontrol's words and exit 1", "[scontrol]") {
  Run r = scontrol({"sh", "hostnames"});
  CHECK(r.rc == 1);
  CHECK(r.err == "invalid keyword: sh\n");
  r = scontrol({"show", "host"});
  CHECK(r.rc == 1);
  CHECK(r.err == "invalid entity:host for keyword:show\n");
  r = scontrol({"show"});
  CHECK(r.err == "too few arguments for keyword:show\n");
  r = scontrol({"show", "hostnames", "a", "b"});
  CHECK(r.err == "too many arguments for keyword:show\n");
  r = scontrol({"show", "hostlist"});
  CHECK(r.rc == 1);
  CHECK(r.err == "invalid encode argument\n");
  r = scontrol({"show", "hostnames", "n[1-"});
  CHECK(r.rc == 1);
  CHECK(r.err == "Invalid hostlist: n[1-\n");
  r = scontrol({"show", "job", "12"});
  CHECK(r.rc == 1);
  CHECK(r.err == "scontrol: error: show jobs is not supported by Muster\n");
  CHECK(scontrol({}).rc == 1);
}

TEST_CASE("the job and node commands are told from the hostlist ones after scontrol's options",
          "[scontrol]") {
  using V = std::vector<std::string>;
  CHECK(scontrolCommandWords({"-d", "-o", "show", "job", "5"}) == V{"show", "job", "5"});
  CHECK(scontrolCommandWords({"-a", "--help", "show"}) == V{"--help", "show"});
  CHECK(scontrolCommandWords({"-Q", "--", "show", "hostnames"}) == V{"--", "show", "hostnames"});
  CHECK(scontrolCommandWords({}).empty());

  for (const V& api : {V{"show", "job", "5"}, V{"SHOW", "Jobs"}, V{"show", "node", "n1"},
                       V{"show", "partition"}, V{"show", "config"}, V{"hold", "5"},
                       V{"release", "5"}, V{"uhold", "5"}, V{"requeue", "5"},
                       V{"requeuehold", "5"}, V{"update", "JobId=5", "TimeLimit=10"},
                       V{"update", "nodename=n1", "State=DRAIN"}})
    CHECK(isScontrolJobCommand(api));
  for (const V& local : {V{"show", "hostnames", "n[1-2]"}, V{"show", "hostlist", "n1,n2"},
                         V{"show", "hostlistsorted", "n2,n1"}, V{"show"}, V{"update"},
                         V{"update", "PartitionName=p"}, V{"--help"}, V{}})
    CHECK_FALSE(isScontrolJobCommand(local));
}

}  // namespace
}  // namespace muster::jobengine::slurm
