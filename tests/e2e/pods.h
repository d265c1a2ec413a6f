#pragma once

// The pieces the scheduler's end-to-end suites share: a test's own run (client, label), pods
// built from parts, and what they read back (bound counts, conditions, Events).

#include <map>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "proto/client.h"
#include "proto/kubeconfig.h"
#include "proto/objects.h"
#include "tests/e2e/support.h"

namespace muster::e2e {

struct Env {
  IoThread io;
  std::shared_ptr<proto::Client> client;
  std::string run;
  explicit Env(const std::string& prefix) : run(uniqueName(prefix)) {
    auto config = proto::loadKubeconfig(TestCluster::get().kubeconfig());
    REQUIRE(config.ok());
    client = makeClient(io.executor(), *config);
  }
  ~Env() { cleanupRun(*client, run); }
};

// A pod for tests: JSON built from parts so each case reads as what it asks for.
struct PodBuilder {
  std::string name, run;
  std::string scheduler = "muster-scheduler";
  int gpus = 0;
  std::string cpu = "100m";
  std::map<std::string, std::string> annotations, node_selector, labels;
  std::string extra_spec;  // raw JSON members appended to spec
  std::string extra_meta;  // ... and to metadata
  std::string init_gpus;   // init container GPU request, if any
  int host_port = 0;
  std::string container_extra;  // raw JSON members appended to the main container

  PodBuilder(std::string n, std::string r) : name(std::move(n)), run(std::move(r)) {
    node_selector["e2e-run"] = run;
  }
  std::map<std::string, std::string> extra_limits;  // more limits (= requests), name → quantity
  PodBuilder& withGpus(int g) { gpus = g; return *this; }
  PodBuilder& withLimit(const std::string& k, const std::string& v) { extra_limits[k] = v; return *this; }
  PodBuilder& withCpu(std::string c) { cpu = std::move(c); return *this; }
  PodBuilder& gang(const std::string& g, int size) {
    annotations["gang-scheduling.preferred.jp/gang-name"] = g;
    annotations["gang-scheduling.preferred.jp/gang-size"] = std::to_string(size);
    return *this;
  }
  PodBuilder& annotate(const std::string& k, const std::string& v) { annotations[k] = v; return *this; }
  PodBuilder& label(const std::string& k, const std::string& v) { labels[k] = v; return *this; }
  PodBuilder& select(const std::string& k, const std::string& v) { node_selector[k] = v; return *this; }
  PodBuilder& spec(std::string raw) { extra_spec = std::move(raw); return *this; }
  PodBuilder& meta(std::string raw) { extra_meta = std::move(raw); return *this; }
  PodBuilder& initGpus(int g) { init_gpus = std::to_string(g); return *this; }
  PodBuilder& hostPort(int p) { host_port = p; return *this; }
  PodBuilder& inContainer(std::string raw) { container_extra = std::move(raw); return *this; }
  PodBuilder& schedulerName(std::string s) { scheduler = std::move(s); return *this; }

  std::string json() const {
    std::string ann, sel, lab;
    for (const auto& [k, v] : annotations) absl::StrAppend(&ann, ann.empty() ? "" : ",", "\"", k, "\":\"", v, "\"");
    for (const auto& [k, v] : labels) absl::StrAppend(&lab, ",\"", k, "\":\"", v, "\"");
    for (const auto& [k, v] : node_selector) absl::StrAppend(&sel, sel.empty() ? "" : ",", "\"", k, "\":\"", v, "\"");
    std::string requests = absl::StrCat(R"("cpu":")", cpu, "\"");
    std::string limits = gpus > 0 ? absl::StrCat(R"("nvidia.com/gpu":")", gpus, "\"") : "";
    for (const auto& [k, v] : extra_limits)
      absl::StrAppend(&limits, limits.empty() ? "" : ",", "\"", k, "\":\"", v, "\"");
    std::string init = init_gpus.empty() ? "" : absl::StrCat(
        R"("initContainers":[{"name":"init","image":"busybox","resources":{"limits":{"nvidia.com/gpu":")",
        init_gpus, R"("}}}],)");
    std::string ports = host_port ? absl::StrCat(R"(,"ports":[{"containerPort":80,"hostPort":)", host_port, "}]") : "";
    return absl::StrCat(
        R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
        R"(","namespace":"default","labels":{"e2e-run":")", run, "\"", lab, R"(},"annotations":{)", ann,
        "}", extra_meta.empty() ? "" : ",", extra_meta, R"(},"spec":{"schedulerName":")", scheduler, R"(","nodeSelector":{)", sel, "},", init,
        R"("containers":[{"name":"main","image":"busybox","resources":{"requests":{)", requests,
        "},\"limits\":{", limits, "}}", ports, container_extra.empty() ? "" : ",", container_extra, "}]", extra_spec.empty() ? "" : ",", extra_spec, "}}");
  }
};

inline void create(proto::Client& client, const PodBuilder& pod) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kPods.collectionPath("default");
  req.body = pod.json();
  auto created = client.callSync(req);
  INFO(req.body);
  REQUIRE(created.ok());
}

inline int boundCount(const std::map<std::string, proto::Pod>& ps, const std::string& prefix = "") {
  int n = 0;
  for (const auto& [name, p] : ps)
    if (name.rfind(prefix, 0) == 0 && !p.spec.node_name.empty()) ++n;
  return n;
}

inline std::string conditionMessage(const proto::Pod& p) {
  const auto* c = p.findCondition("PodScheduled");
  return c ? c->status + "/" + c->reason + ": " + c->message : "";
}


// The messages of the pod's Events with this reason, space-separated.
inline std::string eventMessages(const std::string& pod, const std::string& reason) {
  auto out = TestCluster::get().kubectl(
      {"get", "events", "-n", "default", "--field-selector",
       "involvedObject.name=" + pod + ",reason=" + reason, "-o", "jsonpath={.items[*].message}"});
  return out.ok() ? *out : "";
}

}  // namespace muster::e2e
