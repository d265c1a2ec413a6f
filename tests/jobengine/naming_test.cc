#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "jobengine/naming.h"

namespace muster::jobengine {
namespace {

TEST_CASE("a short job name gives <job>-<attempt> and pod names <group>-<index>", "[naming]") {
  CHECK(groupName("mpi-sample-job", 0) == "mpi-sample-job-0");
  CHECK(groupName("mpi-sample-job", 12) == "mpi-sample-job-12");
  CHECK(podName("mpi-sample-job-0", 2) == "mpi-sample-job-0-2");
  CHECK(secretNamePrefix("mpi-sample-job-0") == "mpi-sample-job-0-ssh-");
  CHECK(legacySecretName("mpi-sample-job-0", "5D1B0E2A-7c3f-4b1e-9a0d-2f6e8c4b1a77") ==
        "mpi-sample-job-0-ssh-5d1b0e");
  CHECK(configMapName("mpi-sample-job-0") == "mpi-sample-job-0-mpi");
  CHECK(podFqdn("mpi-sample-job-0-1", "mpi-sample-job-0", "default", "cluster.local") ==
        "mpi-sample-job-0-1.mpi-sample-job-0.default.svc.cluster.local");
}

TEST_CASE("the longest name the API accepts still gives valid names for every object", "[naming]") {
  // 253 characters: the most a ParallelJob name (a DNS-1123 subdomain) may have.
  std::string longest;
  while (longest.size() < 253) longest += longest.size() % 64 == 63 ? '.' : 'a';
  while (longest.back() == '.') longest.pop_back();
  longest.resize(253, 'z');
  REQUIRE(isDns1123Subdomain(longest));
  for (int32_t attempt : {0, 7, 2147483647}) {
    std::string group = groupName(longest, attempt);
    INFO(group);
    CHECK(group.size() <= kMaxGroupNameLength);
    CHECK(isDns1035Label(group));   // a Service name
    CHECK(isLabelValue(group));     // the jobset-name label
    CHECK(isDns1123Label(podName(group, 2147483647)));  // a hostname
    // The API server appends 5 characters to the generateName.
    CHECK(isDns1123Subdomain(secretNamePrefix(group) + "x7k2p"));
    CHECK(isDns1123Subdomain(legacySecretName(group, "5d1b0e2a-7c3f-4b1e-9a0d-2f6e8c4b1a77")));
    CHECK(isDns1123Subdomain(configMapName(group)));
    CHECK(group.substr(group.size() - std::to_string(attempt).size()) == std::to_string(attempt));
  }
}

TEST_CASE("long names that differ only at the end get different groups", "[naming]") {
  std::string a(200, 'x'), b(200, 'x');
  a += "-one";
  b += "-two";
  CHECK(groupName(a, 0) != groupName(b, 0));
  // Stable across processes and versions (a restarted engine must find its attempt's objects):
  // the same name always gives these exact groups (the first 8 hex digits of its SHA-256).
  CHECK(groupName(a, 0) == "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-a835d01e-0");
  CHECK(groupName(b, 7) == "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-9c256b83-7");
}

TEST_CASE("names with dots or a leading digit are made valid labels without colliding", "[naming]") {
  std::string dotted = groupName("train.v2", 0);
  CHECK(isDns1035Label(dotted));
  CHECK(dotted.rfind("train-v2-", 0) == 0);
  CHECK(dotted != groupName("train-v2", 0));
  std::string digit = groupName("1job", 3);
  CHECK(isDns1035Label(digit));
  CHECK(digit.rfind("pj-1job-", 0) == 0);
  CHECK(digit.substr(digit.size() - 2) == "-3");
}

TEST_CASE("the validators follow Kubernetes' rules", "[naming]") {
  CHECK(isDns1123Label("a-1"));
  CHECK_FALSE(isDns1123Label("-a"));
  CHECK_FALSE(isDns1123Label("A"));
  CHECK_FALSE(isDns1123Label(std::string(64, 'a')));
  CHECK_FALSE(isDns1035Label("1a"));
  CHECK(isDns1123Subdomain("a.b-c.d"));
  CHECK_FALSE(isDns1123Subdomain("a..b"));
  CHECK(isLabelValue(""));
  CHECK(isLabelValue("My_Value.1"));
  CHECK_FALSE(isLabelValue("-x"));
  CHECK_FALSE(isLabelValue(std::string(64, 'a')));
}

}  // namespace
}  // namespace muster::jobengine
