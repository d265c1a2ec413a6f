// sinfo and scontrol's node commands over Kubernetes nodes (node_view.h), against sinfo.1 and
// scontrol.1: node states from the API, the default, -N -l and -R layouts, drain requests.
#include <catch2/catch.hpp>

#include "jobengine/slurm/cli/node_view.h"

namespace muster::jobengine::slurm {
namespace {

proto::Quantity q(const char* text) {
  auto v = proto::Quantity::parse(text);
  REQUIRE(v.ok());
  return *v;
}

proto::Node node(std::string name, std::string rack, bool ready = true) {
  proto::Node n;
  n.meta.name = std::move(name);
  n.meta.labels = {{"pool", "gpu"}, {"muster.dev/rack", std::move(rack)}};
  n.status.allocatable = {{"cpu", q("64")}, {"memory", q("512Gi")}, {"nvidia.com/gpu", q("8")}};
  n.status.conditions = {{"Ready", ready ? "True" : "False", "", ""}};
  return n;
}

proto::Pod pod(const char* cpu, const char* gpus) {
  proto::Pod p;
  proto::Container c;
  c.name = "main";
  c.resources.requests = {{"cpu", q(cpu)}, {"nvidia.com/gpu", q(gpus)}};
  p.spec.containers.push_back(c);
  return p;
}

SlurmConfig config() {
  auto c = parseSlurmSection(R"(
slurm:
  defaultPartition: gpu
  partitions:
  - name: gpu
    nodeSelector: {pool: gpu}
    maxTime: "1-00:00:00"
    template: {spec: {containers: [{name: main, image: x}]}}
  - name: debug
    nodeSelector: {muster.dev/rack: r1}
    template: {spec: {containers: [{name: main, image: x}]}}
)");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

SinfoOptions parse(const std::vector<std::string>& args) {
  auto o = parseSinfoArgs(args, {});
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  return *o;
}

// n1 idle, n2 mixed, n3 allocated (all GPUs), n4 drained by scontrol, n5 not Ready.
std::vector<NodeView> cluster() {
  auto drained = node("n4", "r1");
  drained.spec.unschedulable = true;
  drained.meta.annotations = {{kDrainReasonAnnotation, "bad DIMM"},
                              {kDrainUserAnnotation, "ops"},
                              {kDrainTimeAnnotation, "2026-01-01T00:00:00"}};
  return {nodeViewOf(node("n1", "r1"), {}), nodeViewOf(node("n2", "r1"), {pod("8", "2")}),
          nodeViewOf(node("n3", "r2"), {pod("4", "8")}), nodeViewOf(drained, {}),
          nodeViewOf(node("n5", "r2", false), {})};
}

TEST_CASE("node states come from readiness, cordons and what is bound", "[sinfo]") {
  auto nodes = cluster();
  CHECK(nodes[0].state == NodeState::kIdle);
  CHECK(nodes[1].state == NodeState::kMixed);
  CHECK(nodes[1].cpus_alloc == 8);
  CHECK(nodes[2].state == NodeState::kAllocated);
  CHECK(nodes[3].state == NodeState::kDrained);
  CHECK(nodes[3].reason == "bad DIMM");
  CHECK(nodes[4].state == NodeState::kDown);
  // A cordoned node with pods still running is draining; one cordoned by kubectl says so.
  auto cordoned = node("n6", "r1");
  cordoned.spec.unschedulable = true;
  NodeView v = nodeViewOf(cordoned, {pod("1", "0")});
  CHECK(v.state == NodeState::kDraining);
  CHECK(v.reason == "Kubernetes cordon");
}

TEST_CASE("sinfo groups a partition's nodes by state, the default partition starred", "[sinfo]") {
  CHECK(renderSinfo(parse({}), config(), cluster(), absl::UnixEpoch()) ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "gpu*         up 1-00:00:00      1    mix n2\n"
        "gpu*         up 1-00:00:00      1   idle n1\n"
        "gpu*         up 1-00:00:00      1  drain n4\n"
        "gpu*         up 1-00:00:00      1   down n5\n"
        "gpu*         up 1-00:00:00      1  alloc n3\n"
        "debug        up   infinite      1    mix n2\n"
        "debug        up   infinite      1   idle n1\n"
        "debug        up   infinite      1  drain n4\n");
  // Nodes in one state are one line with a compressed host list.
  std::vector<NodeView> idle = {nodeViewOf(node("n1", "r1"), {}), nodeViewOf(node("n2", "r1"), {}),
                                nodeViewOf(node("n3", "r1"), {})};
  CHECK(renderSinfo(parse({"-h", "-p", "gpu"}), config(), idle, absl::UnixEpoch()) ==
        "gpu*         up 1-00:00:00      3   idle n[1-3]\n");
}

TEST_CASE("sinfo -t, -o and -R", "[sinfo]") {
  CHECK(renderSinfo(parse({"-h", "-t", "idle,alloc", "-o", "%P %t %D %N"}), config(), cluster(),
                    absl::UnixEpoch()) == "gpu* idle 1 n1\ngpu* alloc 1 n3\ndebug idle 1 n1\n");
  CHECK(renderSinfo(parse({"-R"}), config(), cluster(), absl::UnixEpoch()) ==
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "bad DIMM             ops       2026-01-01T00:00:00 n4\n"
        "Not responding       Unknown   Unknown             n5\n");
  CHECK(renderSinfo(parse({"-h", "-o", "%N %c %m %G %C", "-n", "n[2-3]"}), config(), cluster(),
                    absl::UnixEpoch()) ==
        // n2 and n3 print alike but for %N and %C: one line, CPUs summed (sinfo's grouping).
        "n[2-3] 64 524288 gpu:8 12/116/0/128\nn2 64 524288 gpu:8 8/56/0/64\n");
}

TEST_CASE("sinfo -N -l lists each node per partition with the date line", "[sinfo]") {
  std::string out = renderSinfo(parse({"-Nl", "-p", "debug"}), config(), cluster(), absl::UnixEpoch());
  CHECK(out ==
        "Thu Jan  1 00:00:00 1970\n"
        "NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              \n"
        "n1             1     debug        idle   64   1:64:1 524288        0      1       r1 none                \n"
        "n2             1     debug       mixed   64   1:64:1 524288        0      1       r1 none                \n"
        "n4             1     debug     drained   64   1:64:1 524288        0      1       r1 bad DIMM            \n");
}

TEST_CASE("scontrol update NodeName drains with a reason and resumes, in scontrol's words",
          "[scontrol]") {
  auto drain = parseNodeUpdate({"NodeName=n[1-2]", "State=DRAIN", "Reason=bad DIMM"});
  REQUIRE(drain.ok());
  CHECK(drain->nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(drain->drain);
  CHECK(drain->reason == "bad DIMM");
  auto resume = parseNodeUpdate({"nodename=n1", "state=resume"});
  REQUIRE(resume.ok());
  CHECK_FALSE(resume->drain);
  auto no_reason = parseNodeUpdate({"NodeName=n1", "State=DRAIN"});
  REQUIRE_FALSE(no_reason.ok());
  CHECK(no_reason.status().message() ==
        "scontrol: error: You must specify a reason when DOWNING or DRAINING a node. Request denied");
  auto bad = parseNodeUpdate({"NodeName=n1", "State=SLEEP"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "scontrol: error: Invalid node state specified: SLEEP");
  CHECK_FALSE(parseNodeUpdate({"NodeName=n1", "Weight=5"}).ok());
}

TEST_CASE("scontrol show node prints Slurm's Key=Value block", "[scontrol]") {
  std::string out = renderShowNode(cluster()[1], config());
  CHECK(out.rfind("NodeName=n2 ", 0) == 0);
  CHECK(out.find("\n   CPUAlloc=8 CPUEfctv=64 CPUTot=64 CPULoad=N/A\n") != std::string::npos);
  CHECK(out.find("\n   Gres=gpu:8\n") != std::string::npos);
  CHECK(out.find("\n   State=MIXED ") != std::string::npos);
  CHECK(out.find("\n   Partitions=gpu,debug\n") != std::string::npos);
  CHECK(out.find("\n   AllocTRES=cpu=8,gres/gpu=2\n") != std::string::npos);
}

TEST_CASE("scontrol show config prints Muster's Slurm settings as Key = value lines", "[slurm]") {
  SlurmConfig c = config();
  CHECK(renderShowConfig(c, absl::UnixEpoch() + absl::Hours(1)) ==
        "Configuration data as of 1970-01-01T01:00:00\n"
        "AccountingStorageType   = accounting_storage/muster (the API server)\n"
        "ClusterName             = muster\n"
        "DefaultPartition        = gpu\n"
        "JobIdCounter            = (release namespace)/muster-slurm-job-ids\n"
        "JobRequeue              = 1\n"
        "MaxArraySize            = 1001\n"
        "MinJobAge               = 604800 sec\n"
        "MusterVersion           = 0.1\n"
        "PartitionNames          = gpu,debug\n"
        "SLURM_VERSION           = 24.05.0\n"
        "SchedulerType           = sched/muster (gang, topology-aware)\n"
        "SelectType              = select/muster (Kubernetes pods)\n"
        "ToolsImage              = (null)\n");
  c.accounting_retention_seconds.reset();
  CHECK(renderShowConfig(c, absl::UnixEpoch()).find("\nMinJobAge               = UNLIMITED\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace muster::jobengine::slurm
