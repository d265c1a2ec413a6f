// squeue and scontrol show job over Slurm jobs as the API server holds them (job_view.h), against
// squeue.1 and scontrol.1: the default layout, filters, states, reasons and errors.
#include <catch2/catch.hpp>

#include "jobengine/slurm/cli/job_view.h"
#include "proto/json.h"

namespace muster::jobengine::slurm {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1767225600);  // 2026-01-01T00:00:00Z

proto::ParallelJob slurmJob(int64_t id, std::string name, std::string user, std::string state,
                            int32_t nodes) {
  proto::ParallelJob job;
  job.meta.name = "slurm-" + std::to_string(id);
  job.meta.creation_timestamp = "2025-12-31T23:50:00Z";
  job.spec.runtime_ref_name = "slurm";
  job.spec.num_pods = nodes;
  proto::SlurmJobSpec& s = job.spec.slurm.emplace();
  s.job_id = id;
  s.job_name = std::move(name);
  s.user = std::move(user);
  s.partition = "gpu";
  s.ntasks = nodes * 4;
  s.work_dir = "/home/alice/proj";
  s.command = "/home/alice/proj/train.sh";
  s.time_limit_seconds = 3600;
  job.status.job_group_name = job.meta.name + "-0";
  proto::SlurmJobStatus& st = job.status.slurm.emplace();
  st.state = std::move(state);
  return job;
}

JobView view(const proto::ParallelJob& job) {
  auto v = viewOf(job);
  REQUIRE(v);
  return *v;
}

SqueueOptions parse(const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {}) {
  auto o = parseSqueueArgs(args, env);
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  return *o;
}

// A running 2-node job (started 65 s ago), a pending 4-node one and a completed one.
std::vector<JobView> queue() {
  auto running = slurmJob(42, "train", "alice", "RUNNING", 2);
  running.status.slurm->start_time = "2025-12-31T23:58:55Z";
  auto pending = slurmJob(43, "longname", "bob", "PENDING", 4);
  pending.status.slurm->reason = "Resources";
  auto done = slurmJob(41, "prep", "alice", "COMPLETED", 1);
  done.status.slurm->start_time = "2025-12-31T23:51:00Z";
  done.status.slurm->end_time = "2025-12-31T23:53:30Z";
  return {view(running), view(pending), view(done)};
}

TEST_CASE("squeue prints Slurm's default columns, PD before R, finished jobs left out",
          "[squeue]") {
  CHECK(renderSqueue(parse({}), queue(), "", kNow) ==
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "                43       gpu longname      bob PD       0:00      4 (Resources)\n"
        "                42       gpu    train    alice  R       1:05      2 slurm-42-0-[0-1]\n");
}

TEST_CASE("squeue -h -o prints the asked fields without a header, %.Ni right-justified",
          "[squeue]") {
  CHECK(renderSqueue(parse({"-h", "-o", "%.5i|%T|%D|%l|%L|%N|%u"}), queue(), "", kNow) ==
        "   43|PENDING|4|1:00:00|1:00:00||bob\n"
        "   42|RUNNING|2|1:00:00|58:55|slurm-42-0-[0-1]|alice\n");
  // SQUEUE_FORMAT is used when -o is not given.
  CHECK(renderSqueue(parse({"--noheader"}, {{"SQUEUE_FORMAT", "%i %t"}}), queue(), "", kNow) ==
        "43 PD\n42 R\n");
  // -O names, width after ':'.
  CHECK(renderSqueue(parse({"-h", "-O", "JobId:4,State:9,Reason"}), queue(), "", kNow) ==
        "43  PENDING  Resources           \n42  RUNNING  None                \n");
}

TEST_CASE("squeue -t, -u, --me, -j, -p and -n select jobs as Slurm does", "[squeue]") {
  auto ids = [](const SqueueOptions& o, const std::string& me = "") {
    std::string out;
    for (char c : renderSqueue(o, queue(), me, kNow)) out += c;
    return out;
  };
  const std::string fmt = "%i";
  // Sorted by the compact state as text, as squeue's sort.c does: CD < PD < R.
  CHECK(ids(parse({"-h", "-o", fmt, "-t", "all"})) == "41\n43\n42\n");
  CHECK(ids(parse({"-h", "-o", fmt, "-t", "CD"})) == "41\n");
  CHECK(ids(parse({"-h", "-o", fmt, "--states=pending,r"})) == "43\n42\n");
  CHECK(ids(parse({"-h", "-o", fmt, "-u", "alice"})) == "42\n");
  CHECK(ids(parse({"-h", "-o", fmt, "--me"}), "bob") == "43\n");
  // A job named by id is shown whatever its state.
  CHECK(ids(parse({"-h", "-o", fmt, "-j", "41,42"})) == "41\n42\n");
  CHECK(ids(parse({"-h", "-o", fmt, "-p", "cpu"})).empty());
  CHECK(ids(parse({"-ho", fmt, "-n", "train"})) == "42\n");
}

TEST_CASE("squeue -l adds the date line, STATE and TIME_LIMIT", "[squeue]") {
  std::string out = renderSqueue(parse({"-l", "-j", "42"}), queue(), "", kNow);
  CHECK(out ==
        "Thu Jan  1 00:00:00 2026\n"
        "             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)\n"
        "                42       gpu    train    alice  RUNNING       1:05   1:00:00      2 slurm-42-0-[0-1]\n");
}

TEST_CASE("a held job waits with JobHeldUser, and a job without a limit is UNLIMITED", "[squeue]") {
  auto held = slurmJob(50, "h", "alice", "PENDING", 1);
  held.spec.slurm->hold = true;
  held.spec.slurm->time_limit_seconds.reset();
  held.status.slurm->reason = "JobHeldUser";
  CHECK(renderSqueue(parse({"-h", "-o", "%i %R %l %L"}), {view(held)}, "", kNow) ==
        "50 (JobHeldUser) UNLIMITED UNLIMITED\n");
}

TEST_CASE("squeue refuses unknown options, bad states and what Muster lacks, saying so",
          "[squeue]") {
  auto err = [](const std::vector<std::string>& args) {
    auto o = parseSqueueArgs(args, {});
    REQUIRE_FALSE(o.ok());
    return std::string(o.status().message());
  };
  CHECK(err({"--bogus"}) == "squeue: unrecognized option '--bogus'\nTry \"squeue --help\" for more information");
  CHECK(err({"-Z"}) == "squeue: invalid option -- 'Z'\nTry \"squeue --help\" for more information");
  CHECK(err({"-t", "SLEEPING"}) == "squeue: error: Invalid job state specified: SLEEPING");
  CHECK(err({"-u"}) == "squeue: option '-u' requires an argument\nTry \"squeue --help\" for more information");
  CHECK(err({"--yaml"}).find("not supported by Muster's squeue") != std::string::npos);
  CHECK(err({"-j", "12.1"}).find("not supported by Muster's squeue") != std::string::npos);
  CHECK(err({"-j", "abc"}) == "squeue: error: Invalid job id: abc");
}

TEST_CASE("scontrol show job prints Slurm's Key=Value block with Muster's own message",
          "[scontrol]") {
  auto running = slurmJob(42, "train", "alice", "RUNNING", 2);
  running.spec.slurm->gpus_per_node = 8;
  running.status.slurm->start_time = "2025-12-31T23:58:55Z";
  running.status.restarts = 1;
  running.status.message = "all 2 pods of attempt slurm-42-1 are running";
  running.status.job_group_name = "slurm-42-1";
  std::string out = renderShowJob(view(running), kNow);
  CHECK(out.rfind("JobId=42 JobName=train\n   UserId=alice ", 0) == 0);
  CHECK(out.find("\n   JobState=RUNNING Reason=None Dependency=(null)\n") != std::string::npos);
  CHECK(out.find("\n   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0\n") != std::string::npos);
  CHECK(out.find("\n   RunTime=00:01:05 TimeLimit=01:00:00 TimeMin=N/A\n") != std::string::npos);
  CHECK(out.find("\n   SubmitTime=2025-12-31T23:50:00 ") != std::string::npos);
  CHECK(out.find("\n   StartTime=2025-12-31T23:58:55 EndTime=Unknown ") != std::string::npos);
  CHECK(out.find("\n   ReqNodeList=(null) ExcNodeList=(null)\n   NodeList=slurm-42-1-[0-1]\n") != std::string::npos);
  CHECK(out.find("\n   NumNodes=2 NumCPUs=8 NumTasks=8 CPUs/Task=1\n") != std::string::npos);
  CHECK(out.find("\n   TRES=cpu=8,node=2,billing=8,gres/gpu=16\n") != std::string::npos);
  // Output paths expanded as slurmstepd would (%j, relative to the working directory).
  CHECK(out.find("\n   StdOut=/home/alice/proj/slurm-42.out\n") != std::string::npos);
  CHECK(out.find("\n   MusterJob=slurm-42 MusterMessage=all 2 pods of attempt slurm-42-1 are running\n") !=
        std::string::npos);
}

TEST_CASE("a ParallelJob of another runtime is no Slurm job", "[squeue]") {
  proto::ParallelJob mpi;
  mpi.spec.runtime_ref_name = "mpi-openmpi";
  CHECK_FALSE(viewOf(mpi));
}

TEST_CASE("scontrol requeue takes running and ended jobs, not pending, --no-requeue or "
          "cancelled ones", "[squeue]") {
  const std::vector<JobView> q = queue();  // 42 running, 43 pending, 41 completed
  CHECK_FALSE(requeueRefusal(q[0]));
  CHECK_FALSE(requeueRefusal(q[2]));
  CHECK(requeueRefusal(q[1]) == "Job is pending execution");
  JobView no_requeue = q[0];
  no_requeue.requeue = false;
  CHECK(requeueRefusal(no_requeue)->rfind("Requested operation is presently disabled", 0) == 0);
  JobView cancelled = q[2];
  cancelled.state = JobState::kCancelled;
  CHECK(requeueRefusal(cancelled)->find("a cancelled job stays cancelled") != std::string::npos);
  auto asked = slurmJob(44, "x", "alice", "COMPLETED", 1);
  asked.spec.slurm->requeue_attempt = 0;
  CHECK(requeueRefusal(view(asked))->rfind("Job is requeued already", 0) == 0);
  asked.status.restarts = 1;  // done: the next attempt is in progress
  CHECK_FALSE(view(asked).requeue_asked);
}

TEST_CASE("scontrol update JobId TimeLimit: anyone lowers, only an operator raises, and only "
          "before the job has pods", "[squeue]") {
  auto update = [](const std::vector<std::string>& args) {
    auto u = parseJobUpdate(args);
    INFO(u.status().ToString());
    REQUIRE(u.ok());
    return *u;
  };
  auto refusal = [](const std::vector<std::string>& args) {
    auto u = parseJobUpdate(args);
    REQUIRE_FALSE(u.ok());
    return std::string(u.status().message());
  };
  const JobUpdate thirty = update({"JobId=42,43", "TimeLimit=30"});
  CHECK(thirty.ids.size() == 2);
  CHECK(thirty.time_limit == 1800);
  CHECK(update({"jobid=42", "timelimit=+1:00:00"}).adjust == JobUpdate::Adjust::kAdd);
  CHECK(update({"JobId=42", "TimeLimit=UNLIMITED"}).time_limit == std::nullopt);
  CHECK(refusal({"JobId=42", "Partition=cpu"}) ==
        "scontrol: error: Update of Partition is not supported by Muster's scontrol (JobId and TimeLimit are)");
  CHECK(refusal({"JobId=42", "TimeLimit=soon"}) == "scontrol: error: Invalid TimeLimit value: soon");
  CHECK(refusal({"JobId=42"}) == "scontrol: error: Update of a job needs TimeLimit=");

  const std::vector<JobView> q = queue();
  const JobView& running = q[0];  // 42, limit 1:00:00
  JobView pending = q[1];         // 43, waits for Resources: its pods exist
  const JobView& done = q[2];
  CHECK(*updatedTimeLimit(running, thirty, false) == 1800);
  CHECK(*updatedTimeLimit(running, update({"JobId=42", "TimeLimit=-10"}), false) == 3000);
  auto denied = [](const absl::StatusOr<std::optional<int64_t>>& r) {
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  const JobUpdate raise = update({"JobId=42", "TimeLimit=+30"});
  CHECK(denied(updatedTimeLimit(running, raise, false)) ==
        "slurm_update error: Access/permission denied for job 42 (only an operator may raise a time limit)");
  CHECK(denied(updatedTimeLimit(running, update({"JobId=42", "TimeLimit=UNLIMITED"}), false))
            .find("Access/permission denied") != std::string::npos);
  CHECK(denied(updatedTimeLimit(running, raise, true)) ==
        "slurm_update error: Requested operation not supported on this job for job 42 (its pods exist, "
        "and their activeDeadlineSeconds can only be lowered)");
  CHECK(denied(updatedTimeLimit(pending, raise, true)).find("scontrol hold it, raise the limit, release it") !=
        std::string::npos);
  pending.reason = "JobHeldUser";
  CHECK(*updatedTimeLimit(pending, raise, true) == 5400);
  CHECK(denied(updatedTimeLimit(done, thirty, true)) ==
        "slurm_update error: Job/step already completing or completed for job 41");
}

// Array 50 (--array=0-3%2): tasks 0 and 1 run (job ids 50, 51), 2 and 3 wait for a place.
std::vector<JobView> array() {
  std::vector<JobView> out;
  for (int t = 0; t < 4; ++t) {
    auto j = slurmJob(50 + t, "sweep", "alice", t < 2 ? "RUNNING" : "PENDING", 1);
    j.spec.slurm->array = proto::SlurmArrayTask{50, t, 4, 0, 3, 1, 2};
    if (t < 2) j.status.slurm->start_time = "2025-12-31T23:59:00Z";
    else j.status.slurm->reason = "JobArrayTaskLimit";
    out.push_back(view(j));
  }
  return out;
}

TEST_CASE("squeue shows array tasks as 50_1, an array's waiting tasks on one line, each with -r",
          "[squeue]") {
  const std::vector<std::string> fmt{"-h", "-o", "%i|%A|%F|%K|%t|%r"};
  CHECK(renderSqueue(parse(fmt), array(), "", kNow) ==
        "50_[2-3%2]|50|50|2-3%2|PD|JobArrayTaskLimit\n"
        "50_0|50|50|0|R|None\n"
        "50_1|51|50|1|R|None\n");
  std::vector<std::string> each = fmt;
  each.push_back("-r");
  CHECK(renderSqueue(parse(each), array(), "", kNow) ==
        "50_2|52|50|2|PD|JobArrayTaskLimit\n"
        "50_3|53|50|3|PD|JobArrayTaskLimit\n"
        "50_0|50|50|0|R|None\n"
        "50_1|51|50|1|R|None\n");
  // -j: the array's id names every task, 50_3 one task, 51 task 1 by its own job id.
  auto ids = [&](const std::string& j) {
    std::vector<std::string> args{"-h", "-r", "-o", "%i", "-j", j};
    return renderSqueue(parse(args), array(), "", kNow);
  };
  CHECK(ids("50") == "50_2\n50_3\n50_0\n50_1\n");
  CHECK(ids("50_3") == "50_3\n");
  CHECK(ids("50_[0,3]") == "50_3\n50_0\n");
  CHECK(ids("51") == "50_1\n");
  CHECK(ids("50_*,42") == "50_2\n50_3\n50_0\n50_1\n");
  // Tasks waiting for different reasons are not folded together.
  std::vector<JobView> mixed = array();
  mixed[3].reason = "JobHeldUser";
  CHECK(renderSqueue(parse({"-h", "-o", "%i %r"}), mixed, "", kNow) ==
        "50_2 JobArrayTaskLimit\n50_3 JobHeldUser\n50_0 None\n50_1 None\n");
}

TEST_CASE("scontrol show job names an array task's array, task and throttle", "[squeue]") {
  const JobView task = array()[2];
  CHECK(jobIdText(task) == "50_2");
  const std::string shown = renderShowJob(task, kNow);
  INFO(shown);
  CHECK(shown.rfind("JobId=52 ArrayJobId=50 ArrayTaskId=2 ArrayTaskThrottle=2 JobName=sweep\n", 0) == 0);
  CHECK(shown.find("   StdOut=/home/alice/proj/slurm-50_2.out\n") != std::string::npos);
  CHECK(jobIdMatches(task, {50, std::nullopt, false, std::nullopt}));
  CHECK(jobIdMatches(task, {50, 2, false, std::nullopt}));
  CHECK_FALSE(jobIdMatches(task, {50, 3, false, std::nullopt}));
  CHECK(jobIdMatches(task, {52, std::nullopt, false, std::nullopt}));
  CHECK_FALSE(jobIdMatches(task, {52, 2, false, std::nullopt}));
  CHECK(jobIdMatches(task, {50, std::nullopt, true, std::nullopt}));
}

TEST_CASE("squeue --json prints Slurm's data_parser layout for the selected jobs", "[squeue]") {
  const std::string text = renderSqueueJson(parse({"--json"}), queue(), "", kNow, "e2e");
  auto doc = proto::parseJson(text);
  INFO(text);
  REQUIRE(doc.ok());
  const auto& jobs = (*doc)["jobs"];
  REQUIRE(jobs.Size() == 2);  // the completed job is left out, as without --json
  const auto& running = jobs[0];
  CHECK(running["job_id"].GetInt64() == 42);
  CHECK(std::string(running["job_state"][0].GetString()) == "RUNNING");
  CHECK(std::string(running["user_name"].GetString()) == "alice");
  CHECK(std::string(running["nodes"].GetString()) == "slurm-42-0-[0-1]");
  CHECK(running["node_count"]["number"].GetInt64() == 2);
  CHECK(running["time_limit"]["number"].GetInt64() == 60);
  CHECK(running["time_limit"]["infinite"].GetBool() == false);
  CHECK(running["start_time"]["number"].GetInt64() == absl::ToUnixSeconds(kNow) - 65);
  CHECK(running["array_task_id"]["set"].GetBool() == false);
  const auto& pending = jobs[1];
  CHECK(std::string(pending["job_state"][0].GetString()) == "PENDING");
  CHECK(std::string(pending["state_reason"].GetString()) == "Resources");
  CHECK(std::string((*doc)["meta"]["slurm"]["cluster"].GetString()) == "e2e");
  CHECK((*doc)["errors"].Size() == 0);
  // Filters apply; an array's tasks are one record each.
  auto tasks = proto::parseJson(renderSqueueJson(parse({"--json", "-j", "50"}), array(), "", kNow, "e2e"));
  REQUIRE(tasks.ok());
  REQUIRE((*tasks)["jobs"].Size() == 4);
  CHECK((*tasks)["jobs"][2]["array_task_id"]["number"].GetInt64() == 2);
  CHECK((*tasks)["jobs"][2]["array_job_id"]["number"].GetInt64() == 50);
  CHECK((*tasks)["jobs"][2]["array_max_tasks"]["number"].GetInt64() == 2);
}

// Issue 43, item 7: a job name and comment another user wrote are printed, not obeyed.
TEST_CASE("squeue and scontrol show job print the control characters of another user's job name "
          "and comment as '?'",
          "[squeue]") {
  auto hostile = slurmJob(44, "\x1b]0;owned\x07\x1b[2J", "mallory", "PENDING", 1);
  hostile.spec.slurm->comment = "see\x1b[8m hidden\xc2\x9b" "31m";
  hostile.spec.slurm->work_dir = "/home/mallory\r/home/alice";
  hostile.status.slurm->reason = "Resources";
  const std::vector<JobView> jobs{view(hostile)};

  const std::string squeue = renderSqueue(parse({"-h", "-o", "%i|%j|%k"}), jobs, "", kNow);
  CHECK(squeue == "44|?]0;owned??[2J|see?[8m hidden?31m\n");
  CHECK(renderSqueue(parse({"-h", "-O", "Name:0,Comment:0"}), jobs, "", kNow) ==
        "?]0;owned??[2Jsee?[8m hidden?31m\n");
  // The default layout cuts the name to 8 columns: still no ESC.
  CHECK(renderSqueue(parse({}), jobs, "", kNow).find('\x1b') == std::string::npos);

  const std::string shown = renderShowJob(jobs[0], kNow);
  CHECK(shown.find("JobName=?]0;owned??[2J\n") != std::string::npos);
  CHECK(shown.find("   Comment=see?[8m hidden?31m\n") != std::string::npos);
  CHECK(shown.find("   WorkDir=/home/mallory?/home/alice\n") != std::string::npos);
  for (char c : squeue + shown)
    CHECK((c == '\n' || static_cast<unsigned char>(c) >= 0x20));
  CHECK(shown.find("\xc2\x9b") == std::string::npos);

  // --json: JSON's own escaping, which a JSON reader undoes.
  const std::string json = renderSqueueJson(parse({"--json"}), jobs, "", kNow, "c");
  CHECK(json.find('\x1b') == std::string::npos);
  CHECK(json.find("\\u001B]0;owned\\u0007\\u001B[2J") != std::string::npos);
  auto doc = proto::parseJson(json);
  REQUIRE(doc.ok());
  CHECK(std::string((*doc)["jobs"][0]["name"].GetString()) == "\x1b]0;owned\x07\x1b[2J");
}

}  // namespace
}  // namespace muster::jobengine::slurm
