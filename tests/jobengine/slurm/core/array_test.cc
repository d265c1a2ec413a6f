#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jobengine/slurm/core/array.h"

namespace muster::jobengine::slurm {
namespace {

using Ids = std::vector<uint32_t>;

ArraySpec array(std::string_view spec, uint32_t max = kDefaultMaxArraySize) {
  absl::StatusOr<ArraySpec> a = parseArraySpec(spec, max);
  INFO(std::string(spec) << ": " << a.status().ToString());
  REQUIRE(a.ok());
  return *a;
}

void invalid(std::string_view spec, uint32_t max = kDefaultMaxArraySize) {
  INFO(std::string(spec));
  absl::StatusOr<ArraySpec> a = parseArraySpec(spec, max);
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message() == "Invalid job array specification");
}

std::vector<JobIdSpec> ids(std::string_view word) {
  absl::StatusOr<std::vector<JobIdSpec>> v = parseJobIdList(word);
  INFO(std::string(word) << ": " << v.status().ToString());
  REQUIRE(v.ok());
  return *v;
}

std::string idError(std::string_view word) {
  absl::StatusOr<std::vector<JobIdSpec>> v = parseJobIdList(word);
  REQUIRE_FALSE(v.ok());
  return std::string(v.status().message());
}

TEST_CASE("array ranges, lists and single ids give sorted unique task ids", "[array]") {
  // sbatch.1 --array examples.
  CHECK(array("0-15").task_ids.size() == 16);
  CHECK(array("0,6,16-32").taskCount() == 19);
  CHECK(array("5").task_ids == Ids{5});
  CHECK(array("3,1,2,3").task_ids == Ids{1, 2, 3});
  CHECK(array("[1-3]").task_ids == Ids{1, 2, 3});
  CHECK(array("1,,2,").task_ids == Ids{1, 2});  // empty entries are skipped as strtok does
  ArraySpec a = array("4,0-2");
  CHECK(a.minTaskId() == 0);
  CHECK(a.maxTaskId() == 4);
  CHECK(a.taskCount() == 4);
}

TEST_CASE("a step takes every Nth index of a range", "[array]") {
  ArraySpec a = array("1,3,5-9:2");
  CHECK(a.task_ids == Ids{1, 3, 5, 7, 9});
  CHECK(a.step == 2);
  CHECK(array("0-15:4").task_ids == Ids{0, 4, 8, 12});
  CHECK(array("0-15").step == 1);
}

TEST_CASE("a % throttle limits the tasks that run at once", "[array]") {
  ArraySpec a = array("0-15%4");
  CHECK(a.task_ids.size() == 16);
  CHECK(a.max_running == 4u);
  ArraySpec b = array("0-7:2%2");
  CHECK(b.task_ids == Ids{0, 2, 4, 6});
  CHECK(b.max_running == 2u);
  CHECK(b.step == 2);
  CHECK(array("0-3%0").max_running == std::nullopt);  // zero means no limit
  CHECK(array("0-3").max_running == std::nullopt);
}

TEST_CASE("indices must stay below MaxArraySize, 1001 by default", "[array]") {
  CHECK(array("0-1000").taskCount() == 1001);
  invalid("0-1001");
  invalid("1001");
  CHECK(array("1500", 2000).task_ids == Ids{1500});
  invalid("1", 0);  // MaxArraySize=0 disables arrays
}

TEST_CASE("malformed array specifications are refused", "[array]") {
  invalid("");
  invalid("a");
  invalid("-1");
  invalid("3-1");
  invalid("5:2");  // a step needs a range
  invalid("0-10:0");
  invalid("0-10:1001");
  invalid("1-2x");
  invalid("%4");
  invalid("1-");
  invalid(" 1");  // stricter than strtol
}

TEST_CASE("remaining array tasks print compressed", "[array]") {
  CHECK(formatArrayTaskIds({0, 1, 2, 3, 5, 7, 8, 9}) == "0-3,5,7-9");
  CHECK(formatArrayTaskIds({1, 3, 5}) == "1,3,5");
  CHECK(formatArrayTaskIds({4}) == "4");
  CHECK(formatArrayTaskIds({}).empty());
}

TEST_CASE("job ids name jobs, array tasks and steps as scancel reads them", "[array]") {
  CHECK(ids("123") == std::vector<JobIdSpec>{{123, std::nullopt, false, std::nullopt}});
  CHECK(ids("123_4") == std::vector<JobIdSpec>{{123, 4u, false, std::nullopt}});
  CHECK(ids("123_*") == std::vector<JobIdSpec>{{123, std::nullopt, true, std::nullopt}});
  CHECK(ids("123.0") == std::vector<JobIdSpec>{{123, std::nullopt, false, 0u}});
  CHECK(ids("123_4.1") == std::vector<JobIdSpec>{{123, 4u, false, 1u}});
  CHECK(ids("12,13_2") == std::vector<JobIdSpec>{{12, std::nullopt, false, std::nullopt},
                                                 {13, 2u, false, std::nullopt}});
}

TEST_CASE("a bracketed task range gives one id per task and must end the word", "[array]") {
  std::vector<JobIdSpec> v = ids("123_[1-3,5]");
  REQUIRE(v.size() == 4);
  CHECK(v[0] == JobIdSpec{123, 1u, false, std::nullopt});
  CHECK(v[3] == JobIdSpec{123, 5u, false, std::nullopt});
  CHECK(ids("7,123_[2]").size() == 2);
  CHECK(idError("123_[1-3],5") == "Invalid job id 123_[1-3],5");
  CHECK(idError("123_[1-3") == "Invalid job id 123_[1-3");
}

TEST_CASE("bad job ids are refused with scancel's message", "[array]") {
  CHECK(idError("abc") == "Invalid job id abc");
  CHECK(idError("0") == "Invalid job id 0");
  CHECK(idError("12x") == "Invalid job id 12x");
  // The message names what was left of the word when parsing failed, as scancel does.
  CHECK(idError("1x3,12") == "Invalid job id 1x3,12");
  CHECK(idError("12,1x3") == "Invalid job id 1x3");
  CHECK(idError("123+1").find("heterogeneous") != std::string::npos);
}

}  // namespace
}  // namespace muster::jobengine::slurm
