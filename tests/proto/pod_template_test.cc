// Pods built from a user's PodTemplateSpec: Muster adds, the user's fields survive and win.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/json.h"
#include "proto/pod_template.h"

namespace muster::proto {
namespace {

constexpr char kTemplate[] = R"({
  "metadata": {"labels": {"app": "train"}, "annotations": {"team": "ml"}},
  "spec": {
    "priorityClassName": "high",
    "containers": [{"name": "main", "image": "mpi:1", "env": [{"name": "A", "value": "user"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"},
                                  "requests": {"cpu": "4", "memory": "8Gi"}},
                    "futureField": {"kept": true}}],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
  }})";

rapidjson::Document podOf(const PodTemplate& t) {
  ObjectMeta meta;
  meta.name = "job-0-0";
  meta.namespace_ = "ml";
  meta.labels = {{"l", "v"}};
  auto doc = parseJson(t.toPod(meta));
  REQUIRE(doc.ok());
  return std::move(*doc);
}

TEST_CASE("a template that is not a PodTemplateSpec is refused naming the field", "[podtemplate]") {
  CHECK(PodTemplate::parse("[]", "spec.launcher").status().message() == "spec.launcher is not an object");
  CHECK(PodTemplate::parse("{}", "spec.worker").status().message() == "spec.worker.spec is missing");
  CHECK(PodTemplate::parse(R"({"spec":{"containers":{}}})", "spec.launcher").status().message() ==
        "spec.launcher.spec.containers is not a list");
}

TEST_CASE("a field of the wrong type is refused naming it, never replaced", "[podtemplate]") {
  // The CRD keeps templates schemaless, so these reach Muster; editing `env` used to replace an
  // object with an empty list, so the job ran without the user's variables.
  auto refused = [](const std::string& container, const std::string& meta = "{}") {
    std::string json = absl::StrCat(R"({"metadata":)", meta, R"(,"spec":{"containers":[)", container,
                                    "]}}");
    absl::StatusOr<PodTemplate> t = PodTemplate::parse(json, "spec.launcher");
    return t.ok() ? std::string("accepted") : std::string(t.status().message());
  };
  const std::string c0 = "spec.launcher.spec.containers[0]";
  CHECK(refused(R"({"name":"main","env":{"A":"1"}})") ==
        c0 + ".env: expected a list of objects, got an object");
  CHECK(refused(R"({"name":"main","env":[{"name":"A","value":1}]})") ==
        c0 + ".env[0].value: expected a string, got a number");
  CHECK(refused(R"({"name":"main","image":42})") == c0 + ".image: expected a string, got a number");
  CHECK(refused(R"({"name":"main","command":"sh"})") ==
        c0 + ".command: expected a list of strings, got a string");
  CHECK(refused(R"({"name":"main","resources":"lots"})") ==
        c0 + ".resources: expected an object, got a string");
  CHECK(absl::StartsWith(refused(R"({"name":"main","resources":{"requests":{"cpu":"abc"}}})"),
                         c0 + ".resources.requests.cpu: "));
  CHECK(refused(R"({"name":"main","volumeMounts":"data"})") ==
        c0 + ".volumeMounts: expected a list of objects, got a string");
  CHECK(refused(R"({"name":"main"})", R"({"labels":{"n":1}})") ==
        "spec.launcher.metadata.labels.n: expected a string, got a number");
  const std::string big(300000, 'x');
  CHECK(absl::StartsWith(refused(R"({"name":"main"})", absl::StrCat(R"({"annotations":{"a":")", big, R"("}})")),
                         "spec.launcher.metadata.annotations: 300001 bytes in all, more than the"));
  CHECK(refused(R"({"name":"main","image":"mpi:1","env":[{"name":"A","value":"1"}],)"
                R"("resources":{"limits":{"cpu":2,"memory":"1Gi"}}})") == "accepted");
}

TEST_CASE("what Muster adds never overrides the user's template", "[podtemplate]") {
  auto t = PodTemplate::parse(kTemplate, "spec.launcher");
  REQUIRE(t.ok());
  CHECK(t->labels() == std::map<std::string, std::string>{{"app", "train"}});
  CHECK(t->annotations().at("team") == "ml");
  auto main = t->container("main");
  REQUIRE(main);
  main->addEnv("A", "muster");
  main->addEnv("B", "muster");
  main->addMount("data", "/elsewhere", true);      // the volume is mounted already
  main->addMount("muster-run", "/data", false);    // the path is taken
  main->addMount("muster-run", "/muster", false);
  t->addVolume("data", {VolumeSource::Kind::kEmptyDir, "", -1});
  t->addVolume("muster-ssh", {VolumeSource::Kind::kSecret, "s", 0444});
  t->setSchedulerNameIfUnset("muster-scheduler");
  t->setRestartPolicyIfUnset("Never");
  auto pod = podOf(*t);
  const auto& spec = pod["spec"];
  CHECK(std::string(spec["priorityClassName"].GetString()) == "high");
  const auto& c = spec["containers"][0];
  CHECK(c["futureField"]["kept"].GetBool());
  CHECK(c["env"].Size() == 2);
  CHECK(std::string(c["env"][0]["value"].GetString()) == "user");
  CHECK(c["volumeMounts"].Size() == 2);
  CHECK(std::string(c["volumeMounts"][1]["mountPath"].GetString()) == "/muster");
  CHECK(spec["volumes"].Size() == 2);
  CHECK(std::string(spec["volumes"][0]["persistentVolumeClaim"]["claimName"].GetString()) == "d");
  CHECK(spec["volumes"][1]["secret"]["defaultMode"].GetInt() == 0444);
  CHECK(std::string(spec["schedulerName"].GetString()) == "muster-scheduler");
  CHECK(std::string(pod["metadata"]["labels"]["l"].GetString()) == "v");
}

TEST_CASE("init containers go first or last, and one of the same name is never added twice",
          "[podtemplate]") {
  auto t = PodTemplate::parse(kTemplate, "spec.launcher");
  REQUIRE(t.ok());
  t->appendInitContainer("wait").setCommand({"/bin/sh", "wait.sh"});
  t->prependInitContainer("first").setImage("muster:1");
  t->appendInitContainer("first").setImage("muster:2");  // the existing one comes back
  auto pod = podOf(*t);
  const auto& inits = pod["spec"]["initContainers"];
  REQUIRE(inits.Size() == 2);
  CHECK(std::string(inits[0]["name"].GetString()) == "first");
  CHECK(std::string(inits[0]["image"].GetString()) == "muster:2");
  CHECK(std::string(inits[1]["command"][1].GetString()) == "wait.sh");
}

TEST_CASE("a container made from another copies the named fields and resources only",
          "[podtemplate]") {
  auto t = PodTemplate::parse(kTemplate, "spec.launcher");
  REQUIRE(t.ok());
  auto main = *t->container("main");
  CHECK(main.requestsAny({"nvidia.com/gpu"}));
  CHECK_FALSE(main.requestsAny({"preferred.jp/rdma"}));
  auto side = t->prependInitContainer("side");
  side.copyFields(main, {"image", "workingDir"});
  side.copyResources(main, {"nvidia.com/gpu", "memory"});
  side.setRestrictedSecurityContext();
  auto pod = podOf(*t);
  const auto& c = pod["spec"]["initContainers"][0];
  CHECK(std::string(c["image"].GetString()) == "mpi:1");
  CHECK_FALSE(c.HasMember("workingDir"));
  CHECK(std::string(c["resources"]["limits"]["nvidia.com/gpu"].GetString()) == "8");
  CHECK_FALSE(c["resources"]["limits"].HasMember("cpu"));
  CHECK(std::string(c["resources"]["requests"]["memory"].GetString()) == "8Gi");
  CHECK_FALSE(c["securityContext"]["allowPrivilegeEscalation"].GetBool());
}

TEST_CASE("a replaced container keeps only what is set on it again", "[podtemplate]") {
  auto t = PodTemplate::parse(kTemplate, "spec.launcher");
  REQUIRE(t.ok());
  auto launcher = *PodTemplate::parse(kTemplate, "spec.launcher");
  auto main = t->setContainer("main");
  main.copyFields(*launcher.container("main"), {"image"});
  main.setCommand({"sshd"});
  auto pod = podOf(*t);
  const auto& c = pod["spec"]["containers"][0];
  CHECK(pod["spec"]["containers"].Size() == 1);
  CHECK_FALSE(c.HasMember("env"));
  CHECK(std::string(c["image"].GetString()) == "mpi:1");
}

TEST_CASE("a headless Service, a Secret and a ConfigMap encode as the API expects", "[podtemplate]") {
  Service s;
  s.meta.name = "job-0";
  s.meta.namespace_ = "ml";
  s.headless = true;
  s.publish_not_ready_addresses = true;
  s.selector = {{"a", "b"}};
  s.ports.push_back({"ssh", 2222, 2222, "TCP"});
  CHECK(encode(s) ==
        R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"job-0","namespace":"ml"},)"
        R"("spec":{"clusterIP":"None","publishNotReadyAddresses":true,"selector":{"a":"b"},)"
        R"("ports":[{"name":"ssh","port":2222,"targetPort":2222,"protocol":"TCP"}]}})");
  Secret secret;
  secret.meta.name = "k";
  secret.string_data = {{"id", "x"}};
  CHECK(encode(secret) ==
        R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"k"},"type":"Opaque","stringData":{"id":"x"}})");
  ConfigMap cm;
  cm.meta.name = "c";
  cm.data = {{"hostfile", "a slots=1\n"}};
  CHECK(encode(cm) == R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"hostfile":"a slots=1\n"}})");
}

}  // namespace
}  // namespace muster::proto
