#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "jobengine/slurm/core/dependency.h"

namespace muster::jobengine::slurm {
namespace {

using Type = DependencyType;
using Combine = DependencySpec::Combine;
using State = DependencyState;
using Result = DependencyResult;

DependencySpec parse(std::string_view text) {
  absl::StatusOr<DependencySpec> s = parseDependency(text);
  INFO(std::string(text) << ": " << s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

void invalid(std::string_view text) {
  INFO(std::string(text));
  absl::StatusOr<DependencySpec> s = parseDependency(text);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() == "Job dependency problem");
}

// Past kMaxDependencyItems: Slurm's words, and Muster's reason.
void tooMany(std::string_view text) {
  INFO(std::string(text.substr(0, 80)));
  absl::StatusOr<DependencySpec> s = parseDependency(text);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.status().message() ==
        "Job dependency problem (more than 1024 entries once array ranges are expanded; name a "
        "whole array by its job id)");
}

Dependency dep(Type type, uint32_t job, std::optional<uint32_t> task = std::nullopt) {
  Dependency d;
  d.type = type;
  d.job_id = job;
  d.array_task_id = task;
  return d;
}

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

DependencyTargetState target(JobState state) {
  DependencyTargetState t;
  t.state = state;
  if (state != JobState::kPending) t.start_time = kNow - absl::Hours(1);
  return t;
}

// A fake job table for the evaluator: job id -> state; ids not in it are gone.
DependencyContext context(std::map<uint32_t, DependencyTargetState> jobs) {
  DependencyContext c;
  c.now = kNow;
  c.lookup = [jobs](uint32_t job, std::optional<uint32_t>, bool) -> std::optional<DependencyTargetState> {
    auto it = jobs.find(job);
    if (it == jobs.end()) return std::nullopt;
    return it->second;
  };
  return c;
}

State evalOne(Type type, std::optional<DependencyTargetState> state) {
  std::map<uint32_t, DependencyTargetState> jobs;
  if (state) jobs[7] = *state;
  return evaluateDependencyItem(dep(type, 7), context(jobs));
}

TEST_CASE("typed entries with several job ids", "[dependency]") {
  DependencySpec s = parse("afterok:1:2,afterany:3");
  CHECK(s.combine == Combine::kAll);
  CHECK(s.items == std::vector<Dependency>{dep(Type::kAfterOk, 1), dep(Type::kAfterOk, 2),
                                           dep(Type::kAfterAny, 3)});
  CHECK(parse("AfterOK:5").items == std::vector<Dependency>{dep(Type::kAfterOk, 5)});
  CHECK(parse("afternotok:5").items[0].type == Type::kAfterNotOk);
  CHECK(parse("after:5").items[0].type == Type::kAfter);
}

TEST_CASE("'?' makes any one entry enough and cannot be mixed with ','", "[dependency]") {
  DependencySpec s = parse("afterok:1?afternotok:2");
  CHECK(s.combine == Combine::kAny);
  CHECK(s.items.size() == 2);
  invalid("afterok:1,afterany:2?after:3");
  invalid("afterok:1?afterany:2,after:3");
}

TEST_CASE("a delay in minutes applies to after and carries to the next ids", "[dependency]") {
  CHECK(parse("after:123+5").items[0].delay_seconds == 300);
  DependencySpec s = parse("after:1+5:2");
  CHECK(s.items[0].delay_seconds == 300);
  CHECK(s.items[1].delay_seconds == 300);
  invalid("after:1+0");
  invalid("after:1+x");
}

TEST_CASE("singleton and the old bare job id form", "[dependency]") {
  CHECK(parse("singleton").items[0].type == Type::kSingleton);
  CHECK(parse("SINGLETON,afterok:5").items.size() == 2);
  CHECK(parse("123,456").items ==
        std::vector<Dependency>{dep(Type::kAfterAny, 123), dep(Type::kAfterAny, 456)});
  CHECK(parse("afterok:1,2").items ==
        std::vector<Dependency>{dep(Type::kAfterOk, 1), dep(Type::kAfterAny, 2)});
  // Slurm looks for the next ':' in the whole rest, so a bare id cannot come first.
  invalid("2,afterok:1");
  invalid("1?2");  // bare ids only join with ','
}

TEST_CASE("array job ids: one task, every task or a bracketed list", "[dependency]") {
  CHECK(parse("afterok:123_4").items[0] == dep(Type::kAfterOk, 123, 4u));
  Dependency all = dep(Type::kAfterOk, 123);
  all.all_array_tasks = true;
  CHECK(parse("afterok:123_*").items[0] == all);
  CHECK(parse("afterok:123_[1-3],afterany:7").items ==
        std::vector<Dependency>{dep(Type::kAfterOk, 123, 1u), dep(Type::kAfterOk, 123, 2u),
                                dep(Type::kAfterOk, 123, 3u), dep(Type::kAfterAny, 7)});
  CHECK(parse("afterok:9_[5,1]").items ==
        std::vector<Dependency>{dep(Type::kAfterOk, 9, 1u), dep(Type::kAfterOk, 9, 5u)});
  invalid("afterok:123_[1-3");
  invalid("afterok:123_[a]");
}

TEST_CASE("empty and 0 mean no dependency", "[dependency]") {
  CHECK(parse("").items.empty());
  CHECK(parse("0").items.empty());
}

TEST_CASE("malformed dependencies are a dependency problem", "[dependency]") {
  invalid("afterok");
  invalid("afterok:");
  invalid("afterok:0");
  invalid("bogus:1");
  invalid("afterok:1,");
  invalid("afterok:1x");
  invalid("afterok:-1");
  invalid("singletonx");
}

TEST_CASE("a dependency that expands past 1024 entries is a dependency problem, found before it "
          "is expanded", "[dependency]") {
  // The audit's input (issue 43): 4 KiB of array expressions expanded to 371,371 entries.
  std::string amplified = "afterok:";
  while (amplified.size() + 11 < 4096) amplified += "1_[0-1000]:";
  amplified.pop_back();
  tooMany(amplified);
  // One whole array of Slurm's default MaxArraySize, task by task, is fine; one entry more is not.
  CHECK(parse("afterok:12_[0-1000]").items.size() == 1001);
  CHECK(parse("afterok:12_[0-1000]:13_[0-22]").items.size() == kMaxDependencyItems);
  tooMany("afterok:12_[0-1000]:13_[0-23]");
  std::string plain = "afterany:1";
  for (size_t i = 2; i <= kMaxDependencyItems; ++i) plain += ":" + std::to_string(i);
  CHECK(parse(plain).items.size() == kMaxDependencyItems);
  tooMany(plain + ":99999");
  tooMany(plain + ",singleton");
  tooMany(plain + ",2000");  // the old bare form counts too
}

TEST_CASE("a formatted dependency is cut at an entry and says how many more there are",
          "[dependency]") {
  DependencySpec spec = parse("afterok:12_[0-1000]");
  const std::string all = formatDependency(spec);
  CHECK(all.size() > 20000);
  const std::string cut = formatDependency(spec, {}, kDependencyStatusMax);
  CHECK(cut.size() <= kDependencyStatusMax);
  CHECK(cut.rfind("afterok:12_0(unfulfilled),afterok:12_1(unfulfilled),", 0) == 0);
  const size_t shown = static_cast<size_t>(std::count(cut.begin(), cut.end(), '('));
  CHECK(cut.substr(cut.rfind(',') + 1) ==
        "...(+" + std::to_string(1001 - (shown - 1)) + " more)");
  // What fits is not cut.
  CHECK(formatDependency(parse("afterok:12,afterok:13"), {}, kDependencyStatusMax) ==
        "afterok:12(unfulfilled),afterok:13(unfulfilled)");
}

TEST_CASE("unsupported types parse so that they can be refused", "[dependency]") {
  CHECK(parse("aftercorr:5").items[0].type == Type::kAfterCorr);
  CHECK(parse("expand:5").items[0].type == Type::kExpand);
  CHECK(parse("afterburstbuffer:5").items[0].type == Type::kAfterBurstBuffer);
  CHECK(isSupported(Type::kAfterCorr));
  CHECK_FALSE(isSupported(Type::kExpand));
  CHECK_FALSE(isSupported(Type::kAfterBurstBuffer));
}

TEST_CASE("the state suffix scontrol prints is accepted", "[dependency]") {
  CHECK(parse("afterok:5(failed)").items[0].initially_failed);
  CHECK_FALSE(parse("afterok:5(unfulfilled)").items[0].initially_failed);
  invalid("afterok:5(failed");
}

TEST_CASE("dependencies print like squeue's %E", "[dependency]") {
  DependencySpec s = parse("afterok:12,after:13+5,afterany:14_*,singleton");
  CHECK(formatDependency(s) ==
        "afterok:12(unfulfilled),after:13+5(unfulfilled),afterany:14_*(unfulfilled),"
        "singleton(unfulfilled)");
  // Fulfilled entries are not shown.
  CHECK(formatDependency(s, {State::kFulfilled, State::kFailed, State::kUnfulfilled,
                             State::kFulfilled}) ==
        "after:13+5(failed),afterany:14_*(unfulfilled)");
  CHECK(formatDependency(parse("afterok:1_2?afternotok:3")) ==
        "afterok:1_2(unfulfilled)?afternotok:3(unfulfilled)");
}

TEST_CASE("afterok holds until the job completes and fails for any other end", "[dependency]") {
  CHECK(evalOne(Type::kAfterOk, target(JobState::kPending)) == State::kUnfulfilled);
  CHECK(evalOne(Type::kAfterOk, target(JobState::kRunning)) == State::kUnfulfilled);
  CHECK(evalOne(Type::kAfterOk, target(JobState::kCompleted)) == State::kFulfilled);
  CHECK(evalOne(Type::kAfterOk, target(JobState::kFailed)) == State::kFailed);
  CHECK(evalOne(Type::kAfterOk, target(JobState::kCancelled)) == State::kFailed);
  CHECK(evalOne(Type::kAfterOk, target(JobState::kTimeout)) == State::kFailed);
  CHECK(evalOne(Type::kAfterOk, target(JobState::kNodeFail)) == State::kFailed);
  DependencyTargetState completing = target(JobState::kCompleted);
  completing.completing = true;  // not IS_JOB_COMPLETED yet
  CHECK(evalOne(Type::kAfterOk, completing) == State::kUnfulfilled);
}

TEST_CASE("afternotok is the mirror image of afterok", "[dependency]") {
  CHECK(evalOne(Type::kAfterNotOk, target(JobState::kRunning)) == State::kUnfulfilled);
  CHECK(evalOne(Type::kAfterNotOk, target(JobState::kCompleted)) == State::kFailed);
  CHECK(evalOne(Type::kAfterNotOk, target(JobState::kFailed)) == State::kFulfilled);
  CHECK(evalOne(Type::kAfterNotOk, target(JobState::kCancelled)) == State::kFulfilled);
  CHECK(evalOne(Type::kAfterNotOk, target(JobState::kOutOfMemory)) == State::kFulfilled);
  DependencyTargetState special = target(JobState::kPending);
  special.special_exit = true;
  CHECK(evalOne(Type::kAfterNotOk, special) == State::kFulfilled);
}

TEST_CASE("afterany waits for any end and after for the start", "[dependency]") {
  CHECK(evalOne(Type::kAfterAny, target(JobState::kRunning)) == State::kUnfulfilled);
  CHECK(evalOne(Type::kAfterAny, target(JobState::kCompleted)) == State::kFulfilled);
  CHECK(evalOne(Type::kAfterAny, target(JobState::kCancelled)) == State::kFulfilled);
  CHECK(evalOne(Type::kAfter, target(JobState::kPending)) == State::kUnfulfilled);
  DependencyTargetState configuring = target(JobState::kRunning);
  configuring.configuring = true;
  CHECK(evalOne(Type::kAfter, configuring) == State::kUnfulfilled);
  CHECK(evalOne(Type::kAfter, target(JobState::kRunning)) == State::kFulfilled);
  CHECK(evalOne(Type::kAfter, target(JobState::kCancelled)) == State::kFulfilled);
}

TEST_CASE("after+N waits until the job has run N minutes", "[dependency]") {
  Dependency d = dep(Type::kAfter, 7);
  d.delay_seconds = 300;
  DependencyTargetState running = target(JobState::kRunning);
  running.start_time = kNow - absl::Minutes(2);
  CHECK(evaluateDependencyItem(d, context({{7, running}})) == State::kUnfulfilled);
  running.start_time = kNow - absl::Minutes(5);
  CHECK(evaluateDependencyItem(d, context({{7, running}})) == State::kFulfilled);
  // Cancelled before it started: Slurm has no start time and keeps waiting.
  DependencyTargetState never_started;
  never_started.state = JobState::kCancelled;
  CHECK(evaluateDependencyItem(d, context({{7, never_started}})) == State::kUnfulfilled);
}

TEST_CASE("a job that no longer exists lifts the dependency", "[dependency]") {
  for (Type t : {Type::kAfter, Type::kAfterAny, Type::kAfterOk, Type::kAfterNotOk}) {
    CHECK(evalOne(t, std::nullopt) == State::kFulfilled);
  }
}

TEST_CASE("all-of waits for every entry and any failure is final", "[dependency]") {
  DependencySpec s = parse("afterok:1,afterok:2");
  CHECK(evaluateDependency(s, context({{1, target(JobState::kCompleted)},
                                       {2, target(JobState::kRunning)}}))
            .result == Result::kWaiting);
  CHECK(evaluateDependency(s, context({{1, target(JobState::kCompleted)},
                                       {2, target(JobState::kCompleted)}}))
            .result == Result::kSatisfied);
  DependencyEvaluation e = evaluateDependency(
      s, context({{1, target(JobState::kFailed)}, {2, target(JobState::kRunning)}}));
  CHECK(e.result == Result::kNeverSatisfied);
  CHECK(e.states == std::vector<State>{State::kFailed, State::kUnfulfilled});
}

TEST_CASE("any-of is satisfied by one entry and fails only when all fail", "[dependency]") {
  DependencySpec s = parse("afterok:1?afterok:2");
  CHECK(evaluateDependency(s, context({{1, target(JobState::kFailed)},
                                       {2, target(JobState::kRunning)}}))
            .result == Result::kWaiting);
  CHECK(evaluateDependency(s, context({{1, target(JobState::kFailed)},
                                       {2, target(JobState::kCompleted)}}))
            .result == Result::kSatisfied);
  CHECK(evaluateDependency(s, context({{1, target(JobState::kFailed)},
                                       {2, target(JobState::kTimeout)}}))
            .result == Result::kNeverSatisfied);
  CHECK(evaluateDependency(DependencySpec{}, context({})).result == Result::kSatisfied);
}

TEST_CASE("singleton waits while another job of the name runs", "[dependency]") {
  DependencySpec s = parse("singleton");
  DependencyContext c = context({});
  CHECK(evaluateDependency(s, c).result == Result::kSatisfied);
  c.singleton_blocked = [] { return true; };
  CHECK(evaluateDependency(s, c).result == Result::kWaiting);
  c.singleton_blocked = [] { return false; };
  CHECK(evaluateDependency(s, c).result == Result::kSatisfied);
}

TEST_CASE("an entry given as failed stays failed", "[dependency]") {
  CHECK(evaluateDependency(parse("afterany:7(failed)"), context({{7, target(JobState::kCompleted)}}))
            .result == Result::kNeverSatisfied);
}

TEST_CASE("aftercorr follows the task with the same index", "[dependency]") {
  DependencyContext c;
  c.now = kNow;
  c.own_array_task_id = 3;
  c.lookup = [](uint32_t, std::optional<uint32_t> task, bool) -> std::optional<DependencyTargetState> {
    if (task == 3u) return target(JobState::kCompleted);
    if (task == 4u) return target(JobState::kFailed);
    if (!task) return target(JobState::kRunning);  // the array as a whole
    return std::nullopt;
  };
  Dependency d = dep(Type::kAfterCorr, 50);
  CHECK(evaluateDependencyItem(d, c) == State::kFulfilled);
  c.own_array_task_id = 4;
  CHECK(evaluateDependencyItem(d, c) == State::kFailed);
  c.own_array_task_id = 9;  // no such task: the whole array decides
  CHECK(evaluateDependencyItem(d, c) == State::kUnfulfilled);
}

TEST_CASE("a whole array is pending, finished or completed as all its tasks", "[dependency]") {
  DependencyTargetState s = summarizeArray({target(JobState::kCompleted), target(JobState::kPending)});
  CHECK(s.state == JobState::kPending);
  CHECK(summarizeArray({target(JobState::kCompleted), target(JobState::kRunning)}).state ==
        JobState::kRunning);
  CHECK(summarizeArray({target(JobState::kCompleted), target(JobState::kCompleted)}).state ==
        JobState::kCompleted);
  CHECK(summarizeArray({target(JobState::kCompleted), target(JobState::kCancelled)}).state ==
        JobState::kFailed);
}

TEST_CASE("job states print as squeue's long and compact names", "[dependency]") {
  CHECK(jobStateName(JobState::kPending) == "PENDING");
  CHECK(jobStateName(JobState::kOutOfMemory) == "OUT_OF_MEMORY");
  CHECK(jobStateCompact(JobState::kCompleted) == "CD");
  CHECK(jobStateCompact(JobState::kNodeFail) == "NF");
  JobStateFlags completing;
  completing.completing = true;
  CHECK(jobStateName(JobState::kCompleted, completing) == "COMPLETING");
  CHECK(jobStateCompact(JobState::kFailed, completing) == "CG");
  CHECK(parseJobState("pd") == JobState::kPending);
  CHECK(parseJobState("Running") == JobState::kRunning);
  CHECK(parseJobState("OOM") == JobState::kOutOfMemory);
  CHECK(parseJobState("nope") == std::nullopt);
  CHECK_FALSE(isFinished(JobState::kSuspended));
  CHECK(isFinished(JobState::kCancelled));
}

}  // namespace
}  // namespace muster::jobengine::slurm
