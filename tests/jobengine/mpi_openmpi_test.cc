#include <catch2/catch.hpp>

#include <string>

#include "jobengine/mpi_openmpi.h"
#include "proto/json.h"
#include "tests/jobengine/builders.h"

namespace muster::jobengine {
namespace {

using testing::decodeJob;
using testing::seedJob;
using testing::seedJobJson;

const AttemptInfo kAttempt0{0, "mpi-sample-job-0", "mpi-sample-job-0-ssh-x7k2p"};

rapidjson::Document podJson(const proto::ParallelJob& job, int32_t index,
                            const AttemptInfo& attempt = kAttempt0,
                            const RuntimeOptions& options = RuntimeOptions{}) {
  OpenMpiRuntime runtime(options);
  auto body = runtime.buildPod(job, attempt, index);
  INFO(body.status().ToString());
  REQUIRE(body.ok());
  auto doc = proto::parseJson(*body);
  REQUIRE(doc.ok());
  return std::move(*doc);
}

const rapidjson::Value* byName(const rapidjson::Value& array, const std::string& name) {
  for (const auto& v : array.GetArray())
    if (v.HasMember("name") && v["name"].GetString() == name) return &v;
  return nullptr;
}

std::string envOf(const rapidjson::Value& container, const std::string& name) {
  if (!container.HasMember("env")) return "<unset>";
  const auto* e = byName(container["env"], name);
  return e == nullptr ? "<unset>" : e->operator[]("value").GetString();
}

// The seed job with `fields` added to the launcher's main (e.g. its resources).
std::string seedWithMain(const std::string& fields) {
  std::string json = seedJobJson();
  json.replace(json.find(R"("name":"main",)"), 14, R"("name":"main",)" + fields + ",");
  return json;
}

std::string nameAt(const rapidjson::Value& array, rapidjson::SizeType i) {
  return array[i]["name"].GetString();
}

RuntimeOptions withRdmaConf() {
  RuntimeOptions o;
  o.rdma_conf_image = "registry.example.com/muster:0.1.0";
  return o;
}
const RuntimeOptions kWithRdmaConf = withRdmaConf();

TEST_CASE("the hostfile lists every pod's FQDN with numProcPerPod slots, launcher first", "[mpi]") {
  OpenMpiRuntime runtime(RuntimeOptions{});
  CHECK(runtime.hostfile(seedJob(), kAttempt0) ==
        "mpi-sample-job-0-0.mpi-sample-job-0.default.svc.cluster.local slots=2\n"
        "mpi-sample-job-0-1.mpi-sample-job-0.default.svc.cluster.local slots=2\n"
        "mpi-sample-job-0-2.mpi-sample-job-0.default.svc.cluster.local slots=2\n");
}

TEST_CASE("the launcher is the user's main with mounts and env behind a wait-for-workers init "
          "container", "[mpi]") {
  auto pod = podJson(seedJob(), 0);
  const auto& meta = pod["metadata"];
  CHECK(std::string(meta["name"].GetString()) == "mpi-sample-job-0-0");
  CHECK(std::string(meta["labels"]["jobset.sigs.k8s.io/jobset-name"].GetString()) == "mpi-sample-job-0");
  CHECK(std::string(meta["labels"]["jobset.sigs.k8s.io/job-global-index"].GetString()) == "0");
  CHECK(std::string(meta["labels"]["muster.dev/role"].GetString()) == "launcher");
  CHECK(std::string(meta["annotations"]["gang-scheduling.preferred.jp/gang-name"].GetString()) ==
        "mpi-sample-job-0");
  CHECK(std::string(meta["annotations"]["gang-scheduling.preferred.jp/gang-size"].GetString()) == "3");
  const auto& owner = meta["ownerReferences"][0];
  CHECK(std::string(owner["kind"].GetString()) == "ParallelJob");
  CHECK(owner["controller"].GetBool());
  CHECK(std::string(owner["uid"].GetString()) == "6c1f5a3e-1111-4a8e-9c9e-0123456789ab");

  const auto& spec = pod["spec"];
  CHECK(std::string(spec["schedulerName"].GetString()) == "muster-scheduler");
  CHECK(std::string(spec["hostname"].GetString()) == "mpi-sample-job-0-0");
  CHECK(std::string(spec["subdomain"].GetString()) == "mpi-sample-job-0");
  CHECK(std::string(spec["restartPolicy"].GetString()) == "Never");
  const auto* main = byName(spec["containers"], "main");
  REQUIRE(main != nullptr);
  CHECK(std::string((*main)["command"][0].GetString()) == "sh");  // untouched
  CHECK(std::string((*main)["command"][2].GetString()).find("mpirun --allow-run-as-root") !=
        std::string::npos);
  CHECK(envOf(*main, "OMPI_MCA_orte_default_hostfile") == "/etc/muster/mpi/hostfile");
  CHECK(envOf(*main, "OMPI_MCA_prte_default_hostfile") == "/etc/muster/mpi/hostfile");
  CHECK(envOf(*main, "OMPI_MCA_plm_rsh_args") == "-F /muster/ssh/config");
  // mpirun reaches the workers through the generated agent, which copies ./programs first.
  CHECK(envOf(*main, "OMPI_MCA_plm_rsh_agent") == "/etc/muster/mpi/rsh.sh");
  CHECK(envOf(*main, "PRTE_MCA_plm_ssh_agent") == "/etc/muster/mpi/rsh.sh");
  CHECK(envOf(*main, "RDMA_NCCL_CONF") == "<unset>");  // no GPU or RDMA asked for
  CHECK(byName((*main)["volumeMounts"], "muster-ssh") != nullptr);
  CHECK(byName((*main)["volumeMounts"], "muster-run") != nullptr);

  REQUIRE(spec.HasMember("initContainers"));
  const auto& inits = spec["initContainers"];
  const auto& wait = inits[inits.Size() - 1];
  CHECK(std::string(wait["name"].GetString()) == "muster-wait-workers");
  CHECK(std::string(wait["image"].GetString()) == "ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0");
  CHECK(std::string(wait["command"][1].GetString()) == "/etc/muster/mpi/wait-workers.sh");
  CHECK(byName(spec["volumes"], "muster-ssh") != nullptr);
  CHECK(std::string(byName(spec["volumes"], "muster-ssh")->operator[]("secret")["secretName"].GetString()) ==
        "mpi-sample-job-0-ssh-x7k2p");
  // Owner-only: not readable by every user of the container (the kubelet adds group read for the
  // pod's fsGroup).
  CHECK(byName(spec["volumes"], "muster-ssh")->operator[]("secret")["defaultMode"].GetInt() == 0400);
  CHECK(std::string(pod["metadata"]["annotations"]["muster.dev/ssh-secret"].GetString()) ==
        "mpi-sample-job-0-ssh-x7k2p");
  CHECK(std::string(byName(spec["volumes"], "muster-mpi")->operator[]("configMap")["name"].GetString()) ==
        "mpi-sample-job-0-mpi");
}

TEST_CASE("a worker inherits the launcher and gets a generated main that runs sshd", "[mpi]") {
  auto pod = podJson(seedJob(), 2);
  CHECK(std::string(pod["metadata"]["labels"]["muster.dev/role"].GetString()) == "worker");
  CHECK(std::string(pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"].GetString()) == "2");
  const auto& spec = pod["spec"];
  CHECK(std::string(spec["hostname"].GetString()) == "mpi-sample-job-0-2");
  CHECK_FALSE(spec.HasMember("initContainers"));
  REQUIRE(spec["containers"].Size() == 1);
  const auto& main = spec["containers"][0];
  CHECK(std::string(main["name"].GetString()) == "main");
  CHECK(std::string(main["image"].GetString()) == "ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0");
  CHECK(std::string(main["command"][1].GetString()) == "/etc/muster/mpi/sshd.sh");
  CHECK(main["ports"][0]["containerPort"].GetInt() == kSshPort);
  CHECK(main["readinessProbe"]["tcpSocket"]["port"].GetInt() == kSshPort);
  CHECK(envOf(main, "OMPI_MCA_plm_rsh_args") == "-F /muster/ssh/config");
}

TEST_CASE("a schedulerName in the template is kept, and topology annotations of the job reach "
          "every pod", "[mpi]") {
  auto job = decodeJob(seedJobJson("topo", 2, 1, 3, "mpi-openmpi", "",
                                   R"({"muster.dev/topology-required":"muster.dev/rack",)"
                                   R"("muster.dev/topology-preferred":"muster.dev/spine",)"
                                   R"("muster.dev/gpu-nic-affinity":"required","other":"x"})"));
  for (int i = 0; i < 2; ++i) {
    auto pod = podJson(job, i, AttemptInfo{0, "topo-0"});
    const auto& ann = pod["metadata"]["annotations"];
    CHECK(std::string(ann["muster.dev/topology-required"].GetString()) == "muster.dev/rack");
    CHECK(std::string(ann["muster.dev/topology-preferred"].GetString()) == "muster.dev/spine");
    CHECK(std::string(ann["muster.dev/gpu-nic-affinity"].GetString()) == "required");
    CHECK_FALSE(ann.HasMember("other"));
  }
  std::string json = seedJobJson();
  std::string with_scheduler = json;
  with_scheduler.replace(with_scheduler.find(R"("launcher":{"spec":{)"), 20,
                         R"("launcher":{"spec":{"schedulerName":"other-scheduler",)");
  auto pod = podJson(decodeJob(with_scheduler), 1);
  CHECK(std::string(pod["spec"]["schedulerName"].GetString()) == "other-scheduler");
}

TEST_CASE("pods asking for GPUs or RDMA get RDMA_NCCL_CONF and RDMA_UCX_CONF, written before "
          "main starts", "[mpi]") {
  std::string json = seedJobJson();
  json.replace(json.find(R"("name":"main",)"), 14,
               R"("name":"main","resources":{"limits":{"nvidia.com/gpu":"2","preferred.jp/rdma":"1"}},)");
  auto job = decodeJob(json);
  auto launcher = podJson(job, 0);
  const auto& main = launcher["spec"]["containers"][0];
  CHECK(envOf(main, "RDMA_NCCL_CONF") == kNcclConfPath);
  CHECK(envOf(main, "RDMA_UCX_CONF") == kUcxConfPath);
  // The init container that runs before main writes them (setup.sh reads the same env).
  const auto& wait = launcher["spec"]["initContainers"][0];
  CHECK(envOf(wait, "RDMA_NCCL_CONF") == kNcclConfPath);
  auto worker = podJson(job, 1);
  const auto& wmain = worker["spec"]["containers"][0];
  CHECK(envOf(wmain, "RDMA_UCX_CONF") == kUcxConfPath);
  CHECK(std::string(wmain["resources"]["limits"]["nvidia.com/gpu"].GetString()) == "2");
}

TEST_CASE("pods asking for GPUs run muster-topology rdma-conf first, from Muster's image and "
          "with main's devices", "[mpi][rdma-conf]") {
  auto job = decodeJob(seedWithMain(
      R"("resources":{"limits":{"nvidia.com/gpu":"8","preferred.jp/rdma":"4","cpu":"32",)"
      R"("memory":"256Gi","hugepages-2Mi":"1Gi","ephemeral-storage":"10Gi"},)"
      R"("requests":{"nvidia.com/gpu":"8","preferred.jp/rdma":"4","cpu":"32","memory":"256Gi"}})"));
  for (int32_t index : {0, 1}) {
    INFO("pod " << index);
    auto pod = podJson(job, index, kAttempt0, kWithRdmaConf);
    const auto& spec = pod["spec"];
    const auto& main = *byName(spec["containers"], "main");
    REQUIRE(spec.HasMember("initContainers"));
    const auto& inits = spec["initContainers"];
    REQUIRE(inits.Size() == (index == 0 ? 2u : 1u));
    const auto& rdma = inits[0];
    CHECK(nameAt(inits, 0) == "muster-rdma-conf");
    CHECK(std::string(rdma["image"].GetString()) == "registry.example.com/muster:0.1.0");
    CHECK(std::string(rdma["imagePullPolicy"].GetString()) == "IfNotPresent");
    CHECK(proto::toJson(rdma["command"]) ==
          R"(["muster-topology","rdma-conf","--nccl-out","/muster/rdma/nccl.conf",)"
          R"("--ucx-out","/muster/rdma/ucx.conf"])");
    CHECK_FALSE(rdma.HasMember("args"));
    REQUIRE(rdma["volumeMounts"].Size() == 1);
    CHECK(std::string(rdma["volumeMounts"][0]["name"].GetString()) == "muster-run");
    CHECK(std::string(rdma["volumeMounts"][0]["mountPath"].GetString()) == kRunMountPath);
    CHECK_FALSE(rdma["volumeMounts"][0].HasMember("readOnly"));
    CHECK(envOf(rdma, "RDMA_NCCL_CONF") == kNcclConfPath);
    CHECK(envOf(rdma, "RDMA_UCX_CONF") == kUcxConfPath);
    CHECK(envOf(rdma, "RDMA_NCCL_CONF") == envOf(main, "RDMA_NCCL_CONF"));
    CHECK(envOf(rdma, "RDMA_UCX_CONF") == envOf(main, "RDMA_UCX_CONF"));
    // The same devices as main (the kubelet hands them on), and cpu/memory so a Guaranteed pod
    // stays Guaranteed; nothing else.
    CHECK(proto::toJson(rdma["resources"]["limits"]) ==
          R"({"nvidia.com/gpu":"8","preferred.jp/rdma":"4","cpu":"32","memory":"256Gi"})");
    CHECK(proto::toJson(rdma["resources"]["requests"]) ==
          R"({"nvidia.com/gpu":"8","preferred.jp/rdma":"4","cpu":"32","memory":"256Gi"})");
    for (const char* res : {"nvidia.com/gpu", "preferred.jp/rdma"}) {
      CHECK(std::string(rdma["resources"]["limits"][res].GetString()) ==
            main["resources"]["limits"][res].GetString());
    }
    const auto& security = rdma["securityContext"];
    CHECK_FALSE(security["allowPrivilegeEscalation"].GetBool());
    CHECK(proto::toJson(security["capabilities"]) == R"({"drop":["ALL"]})");
    CHECK(security["readOnlyRootFilesystem"].GetBool());
    if (index == 0) CHECK(nameAt(inits, 1) == "muster-wait-workers");  // still last
  }
}

TEST_CASE("the rdma-conf init container copies device amounts as given, limits alone when main "
          "has no requests, and main's MUSTER_RDMA_DEVICES", "[mpi][rdma-conf]") {
  auto job = decodeJob(seedWithMain(
      R"("env":[{"name":"MUSTER_RDMA_DEVICES","value":"mlx5_0,mlx5_1"},{"name":"X","value":"y"}],)"
      R"("resources":{"limits":{"preferred.jp/rdma":"2"}})"));
  auto pod = podJson(job, 1, kAttempt0, kWithRdmaConf);
  const auto& rdma = pod["spec"]["initContainers"][0];
  CHECK(nameAt(pod["spec"]["initContainers"], 0) == "muster-rdma-conf");
  CHECK(proto::toJson(rdma["resources"]) == R"({"limits":{"preferred.jp/rdma":"2"}})");
  CHECK(envOf(rdma, "MUSTER_RDMA_DEVICES") == "mlx5_0,mlx5_1");
  CHECK(envOf(rdma, "X") == "<unset>");
}

TEST_CASE("pods asking for neither GPUs nor RDMA get no rdma-conf init container",
          "[mpi][rdma-conf]") {
  auto launcher = podJson(seedJob(), 0, kAttempt0, kWithRdmaConf);
  REQUIRE(launcher["spec"]["initContainers"].Size() == 1);
  CHECK(nameAt(launcher["spec"]["initContainers"], 0) == "muster-wait-workers");
  auto worker = podJson(seedJob(), 1, kAttempt0, kWithRdmaConf);
  CHECK_FALSE(worker["spec"].HasMember("initContainers"));
}

TEST_CASE("without an rdma-conf image no rdma-conf init container is added", "[mpi][rdma-conf]") {
  auto job = decodeJob(seedWithMain(R"("resources":{"limits":{"nvidia.com/gpu":"1"}})"));
  auto launcher = podJson(job, 0);
  REQUIRE(launcher["spec"]["initContainers"].Size() == 1);
  CHECK(nameAt(launcher["spec"]["initContainers"], 0) == "muster-wait-workers");
  CHECK(envOf(launcher["spec"]["initContainers"][0], "RDMA_NCCL_CONF") == kNcclConfPath);
  auto worker = podJson(job, 1);
  CHECK_FALSE(worker["spec"].HasMember("initContainers"));
}

TEST_CASE("the rdma-conf init container goes before the user's own init containers, and a user's "
          "muster-rdma-conf is kept as written", "[mpi][rdma-conf]") {
  const std::string gpus = R"("resources":{"limits":{"nvidia.com/gpu":"1"}})";
  std::string with_prep = seedWithMain(gpus);
  with_prep.replace(with_prep.find(R"("launcher":{"spec":{)"), 20,
                    R"("launcher":{"spec":{"initContainers":[{"name":"prep","image":"busybox"}],)");
  auto launcher = podJson(decodeJob(with_prep), 0, kAttempt0, kWithRdmaConf);
  const auto& inits = launcher["spec"]["initContainers"];
  REQUIRE(inits.Size() == 3);
  CHECK(nameAt(inits, 0) == "muster-rdma-conf");
  CHECK(nameAt(inits, 1) == "prep");
  CHECK(std::string(inits[1]["image"].GetString()) == "busybox");
  CHECK(nameAt(inits, 2) == "muster-wait-workers");

  std::string with_own = seedWithMain(gpus);
  with_own.replace(with_own.find(R"("launcher":{"spec":{)"), 20,
                   R"("launcher":{"spec":{"initContainers":[{"name":"prep","image":"busybox"},)"
                   R"({"name":"muster-rdma-conf","image":"mine","command":["my-rdma-conf"]}],)");
  for (int32_t index : {0, 1}) {
    INFO("pod " << index);
    auto pod = podJson(decodeJob(with_own), index, kAttempt0, kWithRdmaConf);
    const auto& own = pod["spec"]["initContainers"];
    REQUIRE(own.Size() == (index == 0 ? 3u : 2u));
    CHECK(nameAt(own, 0) == "prep");
    CHECK(proto::toJson(own[1]) ==
          R"({"name":"muster-rdma-conf","image":"mine","command":["my-rdma-conf"]})");
    if (index == 0) CHECK(nameAt(own, 2) == "muster-wait-workers");
  }
}

TEST_CASE("a job's muster.dev/queue label is every pod's queue, over its templates' own", "[mpi]") {
  auto job = decodeJob(seedJobJson(
      "q", 2, 1, 3, "mpi-openmpi",
      R"(,"worker":{"metadata":{"labels":{"muster.dev/queue":"other","tier":"w"}},"spec":{"containers":[{"name":"main","image":"custom"}]}})"));
  job.meta.labels["muster.dev/queue"] = "team-a";
  for (int i = 0; i < 2; ++i) {
    auto pod = podJson(job, i, AttemptInfo{0, "q-0"});
    CHECK(std::string(pod["metadata"]["labels"]["muster.dev/queue"].GetString()) == "team-a");
  }
  // Without the job's label, a template's own stays (admission checks the pods too).
  job.meta.labels.erase("muster.dev/queue");
  auto worker = podJson(job, 1, AttemptInfo{0, "q-0"});
  CHECK(std::string(worker["metadata"]["labels"]["muster.dev/queue"].GetString()) == "other");
  CHECK_FALSE(podJson(job, 0, AttemptInfo{0, "q-0"})["metadata"]["labels"].HasMember("muster.dev/queue"));
}

TEST_CASE("spec.worker replaces the inherited template: its own main is kept and a missing one is "
          "generated", "[mpi]") {
  auto with_main = decodeJob(seedJobJson(
      "w", 2, 1, 3, "mpi-openmpi",
      R"(,"worker":{"metadata":{"labels":{"tier":"w"}},"spec":{"containers":[{"name":"main","image":"custom","command":["/bin/sh","/etc/muster/mpi/sshd.sh"]}]}})"));
  auto pod = podJson(with_main, 1, AttemptInfo{0, "w-0"});
  CHECK(std::string(pod["metadata"]["labels"]["tier"].GetString()) == "w");
  CHECK(std::string(pod["spec"]["containers"][0]["image"].GetString()) == "custom");
  CHECK_FALSE(pod["spec"]["containers"][0].HasMember("readinessProbe"));

  auto without_main = decodeJob(seedJobJson(
      "w", 2, 1, 3, "mpi-openmpi",
      R"(,"worker":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}})"));
  auto pod2 = podJson(without_main, 1, AttemptInfo{0, "w-0"});
  REQUIRE(pod2["spec"]["containers"].Size() == 2);
  CHECK(std::string(pod2["spec"]["containers"][1]["name"].GetString()) == "main");
  CHECK(std::string(pod2["spec"]["containers"][1]["command"][1].GetString()) == "/etc/muster/mpi/sshd.sh");
}

TEST_CASE("the support objects: headless Service publishing not-ready addresses, SSH Secret, "
          "hostfile ConfigMap", "[mpi]") {
  OpenMpiRuntime runtime(RuntimeOptions{});
  auto objects = runtime.buildSupport(seedJob(), kAttempt0);
  REQUIRE(objects.ok());
  REQUIRE(objects->size() == 3);
  auto svc = proto::parseJson((*objects)[0].body);
  REQUIRE(svc.ok());
  CHECK((*objects)[0].resource->plural == "services");
  CHECK(std::string((*svc)["metadata"]["name"].GetString()) == "mpi-sample-job-0");
  CHECK(std::string((*svc)["spec"]["clusterIP"].GetString()) == "None");
  CHECK((*svc)["spec"]["publishNotReadyAddresses"].GetBool());
  CHECK(std::string((*svc)["spec"]["selector"]["jobset.sigs.k8s.io/jobset-name"].GetString()) ==
        "mpi-sample-job-0");
  auto secret = proto::parseJson((*objects)[1].body);
  REQUIRE(secret.ok());
  // Named by the API server: no name is asked for, only a prefix.
  CHECK((*objects)[1].name.empty());
  CHECK_FALSE((*secret)["metadata"].HasMember("name"));
  CHECK(std::string((*secret)["metadata"]["generateName"].GetString()) == "mpi-sample-job-0-ssh-");
  const auto& data = (*secret)["stringData"];
  CHECK(std::string(data["id_ed25519"].GetString()).find("BEGIN OPENSSH PRIVATE KEY") != std::string::npos);
  CHECK(std::string(data["authorized_keys"].GetString()) == data["id_ed25519.pub"].GetString());
  CHECK(std::string(data["known_hosts"].GetString()).rfind("* ssh-ed25519 ", 0) == 0);
  auto cm = proto::parseJson((*objects)[2].body);
  REQUIRE(cm.ok());
  CHECK(std::string((*cm)["data"]["hostfile"].GetString()) == runtime.hostfile(seedJob(), kAttempt0));
  CHECK((*cm)["data"].HasMember("wait-workers.sh"));
  CHECK((*cm)["metadata"]["ownerReferences"][0]["blockOwnerDeletion"].GetBool());
}

TEST_CASE("numPods above 4096 is refused before anything is created, 4096 is accepted", "[mpi]") {
  OpenMpiRuntime runtime(RuntimeOptions{});
  auto big = runtime.buildPod(testing::decodeJob(testing::seedJobJson("big", 4097)), kAttempt0, 0);
  CHECK(big.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(big.status().message() ==
        "spec.numPods is 4097, more than the 4096 pods a ParallelJob may have (its hostfile must "
        "fit into one ConfigMap)");
  CHECK_FALSE(runtime.buildSupport(testing::decodeJob(testing::seedJobJson("big", 4097)), kAttempt0).ok());
  // The largest job, with the longest names Kubernetes allows: its ConfigMap fits.
  const std::string longest_ns(63, 'n');
  std::string json = testing::seedJobJson(std::string(253, 'j'), 4096, 2147483647);
  json.replace(json.find(R"("namespace":"default")"), 21, "\"namespace\":\"" + longest_ns + "\"");
  proto::ParallelJob job = testing::decodeJob(json);
  const AttemptInfo attempt{2147483647, groupName(job.meta.name, 2147483647), "x"};
  auto objects = runtime.buildSupport(job, attempt);
  INFO(objects.status().ToString());
  REQUIRE(objects.ok());
  const std::string& cm = (*objects)[2].body;
  CHECK(cm.size() < kMaxConfigMapBytes);
  CHECK(runtime.hostfileSize(job, attempt) == runtime.hostfile(job, attempt).size());
  // A longer line would be longest-line x 4096 > 1 MiB only past 256 bytes a line.
  CHECK(runtime.hostfile(job, attempt).size() / 4096 <= 216);
}

TEST_CASE("a cluster domain so long that the hostfile cannot fit is refused with the reason", "[mpi]") {
  RuntimeOptions options;
  options.cluster_domain = std::string(60, 'd') + "." + std::string(60, 'e') + "." +
                           std::string(60, 'f') + "." + std::string(60, 'g');
  OpenMpiRuntime runtime(options);
  auto pod = runtime.buildPod(testing::decodeJob(testing::seedJobJson("big", 4096)), kAttempt0, 0);
  CHECK(pod.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(pod.status().message()).find("the hostfile of 4096 pods with cluster domain") == 0);
  CHECK(std::string(pod.status().message()).find("more than a ConfigMap holds (1048576); use fewer pods") !=
        std::string::npos);
  CHECK(runtime.buildPod(testing::decodeJob(testing::seedJobJson("small", 100)), kAttempt0, 0).ok());
}

TEST_CASE("hostfileSize is the hostfile's size", "[mpi]") {
  OpenMpiRuntime runtime(RuntimeOptions{});
  for (int n : {1, 9, 10, 11, 100, 1001}) {
    proto::ParallelJob job = testing::decodeJob(testing::seedJobJson("j", n, 12));
    CHECK(runtime.hostfileSize(job, kAttempt0) == runtime.hostfile(job, kAttempt0).size());
  }
}

TEST_CASE("the launcher's MUSTER_WAIT_WORKERS_TIMEOUT reaches the wait-for-workers container",
          "[mpi]") {
  auto pod = podJson(decodeJob(seedWithMain(R"("env":[{"name":"MUSTER_WAIT_WORKERS_TIMEOUT","value":"1800"}])")), 0);
  const auto* wait = byName(pod["spec"]["initContainers"], "muster-wait-workers");
  REQUIRE(wait != nullptr);
  CHECK(envOf(*wait, "MUSTER_WAIT_WORKERS_TIMEOUT") == "1800");
  auto plain = podJson(seedJob(), 0);
  CHECK(envOf(*byName(plain["spec"]["initContainers"], "muster-wait-workers"),
              "MUSTER_WAIT_WORKERS_TIMEOUT") == "<unset>");  // wait-workers.sh's default: 600 s
}

TEST_CASE("a generated pod decodes as a Pod", "[mpi]") {
  proto::Pod pod;
  OpenMpiRuntime runtime(RuntimeOptions{});
  auto body = runtime.buildPod(seedJob(), kAttempt0, 1);
  REQUIRE(body.ok());
  REQUIRE(proto::decodeJson(*body, &pod).ok());
  CHECK(pod.spec.scheduler_name == "muster-scheduler");
  CHECK(pod.spec.subdomain == "mpi-sample-job-0");
  CHECK(pod.meta.controllerRef() != nullptr);
}


TEST_CASE("pods get no ServiceAccount token unless the launcher template asks for one",
          "[mpi][tenancy]") {
  for (int32_t index : {0, 1}) {
    rapidjson::Document pod = podJson(seedJob(), index);
    REQUIRE(pod["spec"].HasMember("automountServiceAccountToken"));
    CHECK_FALSE(pod["spec"]["automountServiceAccountToken"].GetBool());
  }
  std::string json = seedJobJson();
  json.replace(json.find(R"("launcher":{"spec":{)"), 20,
               R"("launcher":{"spec":{"automountServiceAccountToken":true,)");
  rapidjson::Document asked = podJson(decodeJob(json), 0);
  CHECK(asked["spec"]["automountServiceAccountToken"].GetBool());
}

}  // namespace
}  // namespace muster::jobengine
