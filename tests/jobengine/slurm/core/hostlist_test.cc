#include <catch2/catch.hpp>

#include <set>

#include <string>
#include <vector>

#include "jobengine/slurm/core/hostlist.h"

namespace muster::jobengine::slurm {
namespace {

using Hosts = std::vector<std::string>;

Hosts expand(std::string_view expr) {
  absl::StatusOr<Hosts> hosts = expandHostlist(expr);
  INFO(std::string(expr) << ": " << hosts.status().ToString());
  REQUIRE(hosts.ok());
  return *hosts;
}

std::string expandError(std::string_view expr) {
  absl::StatusOr<Hosts> hosts = expandHostlist(expr);
  INFO(std::string(expr));
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(hosts.status().message());
}

TEST_CASE("a bracket range with a comma list expands in the order written", "[hostlist]") {
  CHECK(expand("n[1-3,5]") == Hosts{"n1", "n2", "n3", "n5"});
  CHECK(expand("n[5,1-2]") == Hosts{"n5", "n1", "n2"});
  CHECK(expand("n7") == Hosts{"n7"});
  CHECK(expand("login") == Hosts{"login"});
}

TEST_CASE("the digits written for the low bound set the zero padding of the whole range",
          "[hostlist]") {
  CHECK(expand("n[0-3]") == Hosts{"n0", "n1", "n2", "n3"});
  CHECK(expand("n[00-03]") == Hosts{"n00", "n01", "n02", "n03"});
  CHECK(expand("n[01-10]") ==
        Hosts{"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"});
  CHECK(expand("n[001-3]") == Hosts{"n001", "n002", "n003"});
  // The width of hi is ignored (hostlist.c _parse_single_range: width = strlen(lo)).
  CHECK(expand("n[8-010]") == Hosts{"n8", "n9", "n10"});
  CHECK(expand("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
}

TEST_CASE("a hostlist with two bracket groups expands in Slurm's order", "[hostlist]") {
  // _push_range_list: the last group is the numeric suffix and varies fastest; the prefix's
  // groups are taken from its right end (strrchr), so with three groups the middle one varies
  // slowest.
  CHECK(expand("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand("a[1-2]b[1-2]c[1,3]") == Hosts{"a1b1c1", "a1b1c3", "a2b1c1", "a2b1c3", "a1b2c1",
                                               "a1b2c3", "a2b2c1", "a2b2c3"});
  CHECK(expand("rack[01-02]-node[1-2]") ==
        Hosts{"rack01-node1", "rack01-node2", "rack02-node1", "rack02-node2"});
}

TEST_CASE("text after the closing bracket is a suffix of every host", "[hostlist]") {
  CHECK(expand("n[1-2]-ib") == Hosts{"n1-ib", "n2-ib"});
  CHECK(expand("r[1-2]n[3]-ib0") == Hosts{"r1n3-ib0", "r2n3-ib0"});
}

TEST_CASE("commas, blanks, tabs and newlines separate hosts but not inside brackets",
          "[hostlist]") {
  CHECK(expand("n1 n2\tn3\nn4,,n5") == Hosts{"n1", "n2", "n3", "n4", "n5"});
  CHECK(expand("n[1,3],m[2-3]") == Hosts{"n1", "n3", "m2", "m3"});
  CHECK(expand("  n1 ,\n n2  ") == Hosts{"n1", "n2"});
  CHECK(expand("n[1-2],n[1-2] x") == Hosts{"n1", "n2", "n1", "n2", "x"});
}

TEST_CASE("an empty hostlist expands to no hosts", "[hostlist]") {
  CHECK(expand("").empty());
  CHECK(expand(" , \t\n").empty());
}

TEST_CASE("expansion keeps duplicates and order", "[hostlist]") {
  CHECK(expand("n3,n1,n1") == Hosts{"n3", "n1", "n1"});
}

TEST_CASE("malformed hostlists are refused with scontrol's message", "[hostlist]") {
  CHECK(expandError("n[1-3").rfind("Invalid hostlist: n[1-3", 0) == 0);
  expandError("n[]");
  expandError("n[a]");
  expandError("n[1,]");
  expandError("n[3-1]");
  expandError("n[1--3]");
  expandError("n[1x3]");  // boxes are for multi-dimensional clusters only
  expandError("n[1-2]x[");
  expandError("a[x]b[1-2]");
  // Stricter than strtoul: blanks, signs and junk are not numbers here.
  expandError("n[1, 3]");
  expandError("n[+1]");
  expandError("n[1a-3]");
  CHECK(expandError("n[1-2]{a}").find("not supported") != std::string::npos);
}

TEST_CASE("an error in any bracket group of a long name is reported", "[hostlist]") {
  // Slurm drops these hosts silently (rc = MAX(rc, -1) in _push_range_list); Muster refuses.
  expandError("a[x]b[1-2]c[1]");
}

TEST_CASE("a missing high bound means the low bound, as in Slurm", "[hostlist]") {
  CHECK(expand("n[1-]") == Hosts{"n1"});
}

TEST_CASE("brackets that do not pair up are kept as text", "[hostlist]") {
  CHECK(expand("n1]") == Hosts{"n1]"});
  // "a[b" has no ']' after its '[', so it stays part of the prefix.
  CHECK(expand("a[b[1-2]") == Hosts{"a[b1", "a[b2"});
}

TEST_CASE("huge ranges are refused before they are expanded", "[hostlist]") {
  CHECK(expand("n[0-65535]").size() == 65536);
  CHECK(expandError("n[0-65536]").find("too many hosts") != std::string::npos);
  CHECK(expandError("n[0-99999999999]").find("too many hosts") != std::string::npos);
  expandError("n[0-99999999999999999999999]");  // does not fit in 64 bits
  CHECK(expandError("a[0-65536]b[1]").find("too many hosts in range") != std::string::npos);
  CHECK(expandError("a[0-40000,0-40000]b[1]").find("prefix") != std::string::npos);
  CHECK(expand("a[0-2]b[0-65535]").size() == 3 * 65536);  // 196,608: under the cap
  CHECK(expandError("a[0-3]b[0-65535]").find("more than 200000 hosts") != std::string::npos);
}

TEST_CASE("compressing keeps the order and merges only consecutive hosts", "[hostlist]") {
  CHECK(compressHostlist({"n1", "n2", "n3", "n5"}) == "n[1-3,5]");
  CHECK(compressHostlist({"n3", "n1", "n2"}) == "n[3,1-2]");
  CHECK(compressHostlist({"gpu1", "gpu2", "cpu1", "cpu2"}) == "gpu[1-2],cpu[1-2]");
  CHECK(compressHostlist({"n1", "m1", "n2"}) == "n1,m1,n2");
  CHECK(compressHostlist({"n1", "n1"}) == "n[1,1]");
  CHECK(compressHostlist({"n7"}) == "n7");
  CHECK(compressHostlist({}).empty());
}

TEST_CASE("compressing keeps every zero-padding width", "[hostlist]") {
  CHECK(compressHostlist({"n09", "n10"}) == "n[09-10]");
  CHECK(compressHostlist({"n9", "n10"}) == "n[9-10]");
  CHECK(compressHostlist({"n1", "n02"}) == "n[1,02]");
  CHECK(compressHostlist({"n01", "n1"}) == "n[01,1]");
  CHECK(compressHostlist({"n099", "n100"}) == "n[099-100]");
  CHECK(compressHostlist({"n00", "n01", "n02", "n03"}) == "n[00-03]");
  CHECK(compressHostlist({"n0", "n1", "n2", "n3"}) == "n[0-3]");
}

TEST_CASE("names without a numeric suffix are single hosts", "[hostlist]") {
  CHECK(compressHostlist({"login", "head"}) == "login,head");
  CHECK(compressHostlist({"n1-ib", "n2-ib"}) == "n1-ib,n2-ib");
  CHECK(compressHostlist({"n", "n1"}) == "n,n1");
  CHECK(compressHostlist({"123", "124"}) == "[123-124]");
}

TEST_CASE("expanding then compressing gives the expression back", "[hostlist]") {
  for (std::string_view expr : {"n[01-10]", "n[0-3]", "n[00-03]", "n[1-3,5]", "gpu[1-2],cpu7",
                                "n[098-101]", "a,b,c", "node[1-4,7,10-12]"}) {
    INFO(std::string(expr));
    CHECK(compressHostlist(expand(expr)) == expr);
  }
  // Several groups come back as one bracket per leading combination.
  CHECK(compressHostlist(expand("r[1-2]n[1-2]")) == "r1n[1-2],r2n[1-2]");
}

TEST_CASE("hostlistsorted sorts naturally and keeps duplicates", "[hostlist]") {
  CHECK(compressHostlistSorted({"n3", "n1", "n2"}) == "n[1-3]");
  CHECK(compressHostlistSorted({"n10", "n9", "n2"}) == "n[2,9-10]");
  CHECK(compressHostlistSorted({"rack10-n1", "rack2-n1"}) == "rack2-n1,rack10-n1");
  CHECK(compressHostlistSorted({"n1", "n1"}) == "n[1,1]");
  CHECK(compressHostlistSorted({"n2", "n1", "n2"}) == "n[1-2,2]");
  CHECK(compressHostlistSorted({"b1", "a2", "a1"}) == "a[1-2],b1");
  CHECK(compressHostlistSorted({"n", "n1", "login"}) == "login,n,n1");
}

TEST_CASE("hostlistsorted splits overlapping ranges as hostlist_coalesce does", "[hostlist]") {
  // n[1-3] and n[2-4] overlap on 2-3: Slurm prints the overlap as separate pieces.
  CHECK(compressHostlistSorted({"n1", "n2", "n3", "n2", "n3", "n4"}) == "n[1-2,2-3,3-4]");
}

TEST_CASE("hostlistsorted keeps every host when padded and plain numbers mix", "[hostlist]") {
  // Found by fuzz_hostlist (corpus regress-sorted-mixed-widths): [53] sorted right before [00],
  // was taken for an overlap, and f00 came out as f[00-53].
  const std::vector<std::string> hosts = *expandHostlist("f[1-53,9,4-53,9,495953,00-]");
  REQUIRE(hosts.size() == 53 + 1 + 50 + 1 + 1 + 1);
  const std::string sorted = compressHostlistSorted(hosts);
  absl::StatusOr<std::vector<std::string>> back = expandHostlist(sorted);
  INFO(sorted);
  REQUIRE(back.ok());
  CHECK(std::multiset<std::string>(back->begin(), back->end()) ==
        std::multiset<std::string>(hosts.begin(), hosts.end()));
  CHECK(compressHostlistSorted({"f53", "f00"}) == "f[00,53]");
}

TEST_CASE("the unique form sorts and drops duplicates like squeue's node list", "[hostlist]") {
  CHECK(compressHostlistUnique({"n2", "n1", "n2"}) == "n[1-2]");
  CHECK(compressHostlistUnique({"n1", "n2", "n3", "n2", "n3", "n4"}) == "n[1-4]");
  CHECK(compressHostlistUnique({"a", "a"}) == "a");
  // Equal numbers of incompatible widths sort by width (hostrange_cmp).
  CHECK(compressHostlistUnique({"n02", "n01", "n1"}) == "n[1,01-02]");
  // Found by fuzz_hostlist (corpus regress-unique-mixed-widths): f93 twice with f00 sorting
  // between its two copies was printed twice.
  std::vector<std::string> hosts = *expandHostlist("f[1-93,93,553,00-]");
  absl::StatusOr<std::vector<std::string>> back = expandHostlist(compressHostlistUnique(hosts));
  REQUIRE(back.ok());
  CHECK(std::set<std::string>(back->begin(), back->end()).size() == back->size());
  CHECK(back->size() == 95);  // f1..f93, f553, f00
}

TEST_CASE("natural compare orders digit runs by value", "[hostlist]") {
  CHECK(naturalCompare("rack2", "rack10") < 0);
  CHECK(naturalCompare("rack10", "rack2") > 0);
  CHECK(naturalCompare("a", "b") < 0);
  CHECK(naturalCompare("n", "n") == 0);
  // A leading zero compares digit by digit ("fractional" in strnatcmp).
  CHECK(naturalCompare("x01", "x1") < 0);
  CHECK(naturalCompare("x 1", "x1") == 0);
}

}  // namespace
}  // namespace muster::jobengine::slurm
