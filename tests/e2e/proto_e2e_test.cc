// proto/ against the real kube-apiserver + etcd + kwok started by tests/cluster/up.sh.
#include <catch2/catch.hpp>

#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "proto/informer.h"
#include "proto/json.h"
#include "proto/leader_election.h"
#include "proto/metrics.h"
#include "proto/kubeconfig.h"
#include "rapidjson/document.h"
#include "tests/e2e/support.h"

namespace muster::e2e {
namespace {

using proto::Informer;
using proto::Node;
using proto::Pod;

proto::RestConfig adminConfig() {
  auto config = proto::loadKubeconfig(TestCluster::get().kubeconfig());
  REQUIRE(config.ok());
  return *config;
}

uint16_t portOf(const std::string& server) {
  return static_cast<uint16_t>(std::stoi(server.substr(server.rfind(':') + 1)));
}

std::string podJson(const std::string& name, const std::string& run_label,
                    const std::string& scheduler = "muster-e2e-nobody") {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
                      R"(","labels":{"e2e-run":")", run_label,
                      R"("}},"spec":{"schedulerName":")", scheduler,
                      R"(","containers":[{"name":"main","image":"busybox","resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}],)",
                      R"("tolerations":[{"key":"kwok.x-k8s.io/node","operator":"Exists","effect":"NoSchedule"}]}})");
}

// Counts handler calls per object, to check that each change is delivered exactly once.
struct EventLedger {
  std::mutex mu;
  std::map<std::string, int> adds, deletes;
  std::vector<std::string> sequence;
  proto::InformerHandlers<Pod> handlers() {
    return {
        [this](const std::shared_ptr<const Pod>& p) {
          std::lock_guard<std::mutex> l(mu);
          adds[p->meta.name]++;
          sequence.push_back("add " + p->meta.name);
        },
        [this](const std::shared_ptr<const Pod>&, const std::shared_ptr<const Pod>& p) {
          std::lock_guard<std::mutex> l(mu);
          sequence.push_back("update " + p->meta.name);
        },
        [this](const std::shared_ptr<const Pod>& p) {
          std::lock_guard<std::mutex> l(mu);
          deletes[p->meta.name]++;
          sequence.push_back("delete " + p->meta.name);
        },
    };
  }
  int addsOf(const std::string& n) { std::lock_guard<std::mutex> l(mu); return adds[n]; }
  int deletesOf(const std::string& n) { std::lock_guard<std::mutex> l(mu); return deletes[n]; }
};

std::unique_ptr<Informer<Pod>> podInformer(std::shared_ptr<proto::Client> client,
                                           const std::string& run_label,
                                           proto::asio::any_io_executor ex) {
  proto::ListWatchOptions lw;
  lw.namespace_ = "default";
  lw.label_selector = "e2e-run=" + run_label;
  proto::ReflectorOptions options;
  options.name = "pods";
  options.initial_backoff = std::chrono::milliseconds(200);
  options.max_backoff = std::chrono::milliseconds(2000);
  return std::make_unique<Informer<Pod>>(
      proto::makeClientListerWatcher(std::move(client), proto::resources::kPods, lw), ex, options);
}

std::set<std::string> serverPodNames(proto::Client& client, const std::string& run_label) {
  std::set<std::string> names;
  proto::Request req;
  req.path = proto::resources::kPods.collectionPath("default");
  req.query = {{"labelSelector", "e2e-run=" + run_label}};
  auto body = client.callSync(req);
  REQUIRE(body.ok());
  rapidjson::Document doc;
  doc.Parse(body->c_str());
  for (const auto& item : doc["items"].GetArray()) names.insert(item["metadata"]["name"].GetString());
  return names;
}

std::set<std::string> cachedPodNames(const Informer<Pod>& inf) {
  std::set<std::string> names;
  for (const auto& p : inf.list()) names.insert(p->meta.name);
  return names;
}

void createPod(proto::Client& client, const std::string& name, const std::string& run) {
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kPods.collectionPath("default");
  req.body = podJson(name, run);
  auto created = client.callSync(req);
  REQUIRE(created.ok());
}

void deletePod(proto::Client& client, const std::string& name) {
  proto::Request req;
  req.verb = proto::Verb::kDelete;
  req.path = proto::resources::kPods.objectPath("default", name);
  req.query = {{"gracePeriodSeconds", "0"}};
  auto deleted = client.callSync(req);
  REQUIRE(deleted.ok());
}

}  // namespace

TEST_CASE("the suite runs against the pinned kube-apiserver") {
  IoThread io;
  auto client = makeClient(io.executor(), adminConfig());
  proto::Request req;
  req.path = "/version";
  auto body = client->callSync(req);
  REQUIRE(body.ok());
  rapidjson::Document doc;
  doc.Parse(body->c_str());
  REQUIRE(doc.IsObject());
  std::string version = doc["gitVersion"].GetString();
  std::cout << "e2e: kube-apiserver " << version << " at " << client->config().server << std::endl;
  CHECK(version.rfind("v1.", 0) == 0);
}

TEST_CASE("a list of 1,000 kwok nodes arrives whole through pagination") {
  IoThread io;
  auto client = makeClient(io.executor(), adminConfig());
  int pages = 0;
  std::set<std::string> names;
  std::string cont;
  do {
    proto::Request req;
    req.path = proto::resources::kNodes.collectionPath();
    req.query = {{"limit", "300"}};
    if (!cont.empty()) req.query.emplace_back("continue", cont);
    auto body = client->callSync(req);
    REQUIRE(body.ok());
    rapidjson::Document doc;
    doc.Parse(body->c_str());
    for (const auto& item : doc["items"].GetArray()) names.insert(item["metadata"]["name"].GetString());
    cont = doc["metadata"].HasMember("continue") ? doc["metadata"]["continue"].GetString() : "";
    ++pages;
  } while (!cont.empty());
  REQUIRE(names.size() >= 1000);
  CHECK(pages == static_cast<int>((names.size() + 299) / 300));

  proto::ReflectorOptions options;
  options.name = "nodes";
  options.page_size = 250;
  Informer<Node> nodes(proto::makeClientListerWatcher(client, proto::resources::kNodes),
                       io.executor(), options);
  nodes.start();
  REQUIRE(nodes.waitForSync(std::chrono::seconds(60)));
  CHECK(io.call([&] { return nodes.size(); }) == names.size());
  int ready_gpu_nodes = 0;
  for (const auto& n : io.call([&] { return nodes.list(); })) {
    auto gpus = n->status.allocatable.find("nvidia.com/gpu");
    if (n->isReady() && gpus != n->status.allocatable.end() && gpus->second.value() == 8 &&
        n->meta.labels.count("muster.dev/rack"))
      ++ready_gpu_nodes;
  }
  CHECK(ready_gpu_nodes == static_cast<int>(names.size()));
  nodes.stop();
}

TEST_CASE("an informer sees pods created, patched and deleted") {
  IoThread io;
  auto client = makeClient(io.executor(), adminConfig());
  std::string run = uniqueName("watch");
  auto inf = podInformer(client, run, io.executor());
  EventLedger ledger;
  inf->addHandlers(ledger.handlers());
  inf->start();
  REQUIRE(inf->waitForSync(std::chrono::seconds(30)));

  for (int i = 0; i < 5; ++i) createPod(*client, absl::StrCat(run, "-", i), run);
  REQUIRE(waitFor([&] { return io.call([&] { return inf->size(); }) == 5; }));

  proto::Request patch;
  patch.verb = proto::Verb::kPatch;
  patch.path = proto::resources::kPods.objectPath("default", run + "-2");
  patch.content_type = std::string(proto::contentType(proto::PatchType::kMerge));
  patch.body = R"({"metadata":{"annotations":{"muster.dev/e2e":"patched"}}})";
  REQUIRE(client->callSync(patch).ok());
  REQUIRE(waitFor([&] {
    auto p = io.call([&] { return inf->get("default", run + "-2"); });
    return p && p->meta.annotations.count("muster.dev/e2e") &&
           p->meta.annotations.at("muster.dev/e2e") == "patched";
  }));

  deletePod(*client, run + "-4");
  REQUIRE(waitFor([&] { return io.call([&] { return inf->get("default", run + "-4"); }) == nullptr; }));
  CHECK(ledger.deletesOf(run + "-4") == 1);
  for (int i = 0; i < 5; ++i) CHECK(ledger.addsOf(absl::StrCat(run, "-", i)) == 1);
  inf->stop();
  for (int i = 0; i < 4; ++i) deletePod(*client, absl::StrCat(run, "-", i));
}

TEST_CASE("a pod bound through the binding subresource is run by kwok") {
  IoThread io;
  auto client = makeClient(io.executor(), adminConfig());
  std::string run = uniqueName("bind");
  auto inf = podInformer(client, run, io.executor());
  inf->start();
  REQUIRE(inf->waitForSync(std::chrono::seconds(30)));
  createPod(*client, run, run);
  REQUIRE(waitFor([&] { return io.call([&] { return inf->get("default", run); }) != nullptr; }));
  auto pod = io.call([&] { return inf->get("default", run); });
  CHECK(pod->spec.node_name.empty());
  CHECK(pod->status.phase == "Pending");

  std::promise<absl::Status> bound;
  proto::asio::co_spawn(io.executor(), [&]() -> proto::asio::awaitable<void> {
    bound.set_value(co_await client->bind("default", run, pod->meta.uid, "node-00000"));
  }, proto::asio::detached);
  absl::Status status = bound.get_future().get();
  REQUIRE(status.ok());
  REQUIRE(waitFor([&] {
    auto p = io.call([&] { return inf->get("default", run); });
    return p && p->spec.node_name == "node-00000" && p->status.phase == "Running";
  }));

  // A second binding of the same pod is refused by the API server.
  std::promise<absl::Status> again;
  proto::asio::co_spawn(io.executor(), [&]() -> proto::asio::awaitable<void> {
    again.set_value(co_await client->bind("default", run, pod->meta.uid, "node-00001"));
  }, proto::asio::detached);
  absl::Status twice = again.get_future().get();
  CHECK(proto::isConflict(twice));
  inf->stop();
  deletePod(*client, run);
}

TEST_CASE("every change made while the API server restarts reaches the cache exactly once") {
  IoThread io;
  auto config = adminConfig();
  auto direct = makeClient(io.executor(), config);
  TcpProxy proxy(io.executor(), portOf(config.server));
  auto proxied_config = config;
  proxied_config.server = absl::StrCat("https://127.0.0.1:", proxy.port());
  auto proxied = makeClient(io.executor(), proxied_config);

  std::string run = uniqueName("restart");
  for (int i = 0; i < 4; ++i) createPod(*direct, absl::StrCat(run, "-old-", i), run);
  auto inf = podInformer(proxied, run, io.executor());
  EventLedger ledger;
  inf->addHandlers(ledger.handlers());
  inf->start();
  REQUIRE(inf->waitForSync(std::chrono::seconds(30)));
  REQUIRE(io.call([&] { return inf->size(); }) == 4);

  // Cut the informer off, restart the API server, and change things while it cannot see.
  proxy.partition();
  REQUIRE(TestCluster::get().ctl({"restart-apiserver"}).ok());
  for (int i = 0; i < 6; ++i) createPod(*direct, absl::StrCat(run, "-new-", i), run);
  deletePod(*direct, run + "-old-0");
  deletePod(*direct, run + "-new-5");
  proxy.heal();

  auto expected = serverPodNames(*direct, run);
  REQUIRE(expected.size() == 8);
  REQUIRE(waitFor([&] { return io.call([&] { return cachedPodNames(*inf); }) == expected; },
                  std::chrono::seconds(90)));
  for (int i = 0; i < 4; ++i) CHECK(ledger.addsOf(absl::StrCat(run, "-old-", i)) == 1);
  for (int i = 0; i < 5; ++i) CHECK(ledger.addsOf(absl::StrCat(run, "-new-", i)) == 1);
  CHECK(ledger.deletesOf(run + "-old-0") == 1);
  // Created and deleted while unseen: either never delivered or added then deleted once.
  CHECK(ledger.addsOf(run + "-new-5") == ledger.deletesOf(run + "-new-5"));
  CHECK(ledger.addsOf(run + "-new-5") <= 1);
  auto stats = io.call([&] { return inf->stats(); });
  std::cout << "e2e: restart: lists=" << stats.lists << " relists_gone=" << stats.relists_gone
            << " watches=" << stats.watches << " watch_errors=" << stats.watch_errors << std::endl;
  CHECK(stats.watches >= 2);
  inf->stop();
  for (const auto& n : expected) deletePod(*direct, n);
}

TEST_CASE("a watch older than etcd's compacted history gets 410 Gone and relists") {
  IoThread io;
  auto config = adminConfig();
  auto direct = makeClient(io.executor(), config);
  TcpProxy proxy(io.executor(), portOf(config.server));
  auto proxied_config = config;
  proxied_config.server = absl::StrCat("https://127.0.0.1:", proxy.port());
  auto proxied = makeClient(io.executor(), proxied_config);

  std::string run = uniqueName("gone");
  for (int i = 0; i < 3; ++i) createPod(*direct, absl::StrCat(run, "-", i), run);
  auto inf = podInformer(proxied, run, io.executor());
  EventLedger ledger;
  inf->addHandlers(ledger.handlers());
  inf->start();
  REQUIRE(inf->waitForSync(std::chrono::seconds(30)));
  std::string old_rv = io.call([&] { return inf->lastResourceVersion(); });

  proxy.partition();
  deletePod(*direct, run + "-0");
  createPod(*direct, run + "-3", run);
  // A fresh watch cache (restart) and compacted etcd: the informer's resourceVersion is gone.
  REQUIRE(TestCluster::get().ctl({"compact-etcd"}).ok());
  REQUIRE(TestCluster::get().ctl({"restart-apiserver"}).ok());

  // The API server itself says so to a watch from the old resourceVersion.
  proto::Request watch;
  watch.path = proto::resources::kPods.collectionPath("default");
  watch.query = {{"watch", "true"}, {"resourceVersion", old_rv}, {"timeoutSeconds", "5"}};
  bool saw_gone = false;
  std::promise<absl::Status> result;
  proto::asio::co_spawn(io.executor(), [&]() -> proto::asio::awaitable<void> {
    result.set_value(co_await direct->stream(watch, [&](std::string_view line) {
      if (line.find("\"code\":410") != std::string_view::npos) saw_gone = true;
      return absl::OkStatus();
    }));
  }, proto::asio::detached);
  absl::Status watched = result.get_future().get();
  CHECK((saw_gone || proto::isGone(watched)));

  proxy.heal();
  auto expected = serverPodNames(*direct, run);
  REQUIRE(waitFor([&] { return io.call([&] { return cachedPodNames(*inf); }) == expected; },
                  std::chrono::seconds(90)));
  CHECK(io.call([&] { return inf->stats(); }).relists_gone >= 1);
  CHECK(ledger.deletesOf(run + "-0") == 1);
  CHECK(ledger.addsOf(run + "-3") == 1);
  inf->stop();
  for (const auto& n : expected) deletePod(*direct, n);
}

TEST_CASE("bearer-token and client-certificate auth both work, and a wrong CA is refused") {
  IoThread io;
  auto cert_config = adminConfig();
  REQUIRE_FALSE(cert_config.client_cert_pem.empty());
  auto token_config = proto::loadKubeconfig(TestCluster::get().tokenKubeconfig());
  REQUIRE(token_config.ok());
  REQUIRE_FALSE(token_config->bearer_token.empty());

  proto::Request req;
  req.path = proto::resources::kNamespaces.objectPath("", "default");
  CHECK(makeClient(io.executor(), cert_config)->callSync(req).ok());
  CHECK(makeClient(io.executor(), *token_config)->callSync(req).ok());

  auto no_auth = cert_config;
  no_auth.client_cert_pem.clear();
  no_auth.client_key_pem.clear();
  auto anonymous = makeClient(io.executor(), no_auth)->callSync(req);
  CHECK_FALSE(anonymous.ok());

  // A CA that did not sign the server's certificate.
  auto other_ca = runCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                              "-keyout", "/dev/null", "-subj", "/CN=not-the-cluster-ca",
                              "-days", "1"});
  REQUIRE(other_ca.ok());
  auto wrong_ca = cert_config;
  wrong_ca.ca_pem = *other_ca;
  auto refused = makeClient(io.executor(), wrong_ca)->callSync(req);
  REQUIRE_FALSE(refused.ok());
  CHECK(proto::httpStatusOf(refused.status()) == 0);  // refused in the TLS handshake
}

TEST_CASE("API errors come back as statuses a caller can act on") {
  IoThread io;
  auto client = makeClient(io.executor(), adminConfig());
  std::string run = uniqueName("errors");

  proto::Request get;
  get.path = proto::resources::kPods.objectPath("default", run);
  auto missing = client->callSync(get);
  REQUIRE_FALSE(missing.ok());
  CHECK(proto::isNotFound(missing.status()));
  CHECK(proto::httpStatusOf(missing.status()) == 404);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains(run));

  createPod(*client, run, run);
  proto::Request dup;
  dup.verb = proto::Verb::kPost;
  dup.path = proto::resources::kPods.collectionPath("default");
  dup.body = podJson(run, run);
  auto again = client->callSync(dup);
  CHECK(proto::isAlreadyExists(again.status()));

  // Delete with a stale uid precondition is refused; with the right one it succeeds.
  std::promise<absl::StatusOr<std::string>> stale;
  proto::asio::co_spawn(io.executor(), [&]() -> proto::asio::awaitable<void> {
    stale.set_value(co_await client->remove(proto::resources::kPods, "default", run,
                                            "00000000-0000-0000-0000-000000000000"));
  }, proto::asio::detached);
  auto stale_result = stale.get_future().get();
  CHECK(proto::isConflict(stale_result.status()));
  deletePod(*client, run);
}

// --- list pages the reflector reads item by item ----------------------------------------------

namespace {

// A ParallelJob whose launcher's pod spec carries a schemaless field nested `levels` objects deep
// (0: none).
std::string nestedParallelJob(const std::string& name, const std::string& run, int levels) {
  std::string nested;
  for (int i = 1; i < levels; ++i) nested += R"({"a":)";
  nested += "{}" + std::string(levels > 0 ? levels - 1 : 0, '}');
  return absl::StrCat(
      R"({"apiVersion":"preferred.jp/v1alpha1","kind":"ParallelJob","metadata":{"name":")", name,
      R"(","labels":{"e2e-run":")", run,
      R"("}},"spec":{"runtimeRef":{"name":"mpi-openmpi"},"numPods":1,"launcher":{"spec":{)",
      levels > 0 ? absl::StrCat(R"("nested":)", nested, ",") : "",
      R"("containers":[{"name":"main","image":"busybox"}]}}}})");
}

// How deep a JSON text nests, brackets inside strings (managedFields' keys) aside.
int depthOf(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

void applyParallelJobCrd() {
  auto applied = TestCluster::get().kubectl(
      {"apply", "-f", std::string(MUSTER_SOURCE_DIR) + "/manifests/crds/paralleljobs.preferred.jp.yaml"});
  REQUIRE(applied.ok());
  REQUIRE(TestCluster::get()
              .kubectl({"wait", "--for", "condition=established", "--timeout=60s",
                        "crd/paralleljobs.preferred.jp"})
              .ok());
}

// Creates the ParallelJob and returns it as the API server serves it.
std::string createParallelJob(proto::Client& client, const std::string& body) {
  proto::Request create;
  create.verb = proto::Verb::kPost;
  create.path = proto::resources::kParallelJobs.collectionPath("default");
  create.body = body;
  auto created = client.callSync(create);
  REQUIRE(created.ok());
  return *created;
}

std::unique_ptr<Informer<proto::ParallelJob>> parallelJobInformer(
    std::shared_ptr<proto::Client> client, const std::string& run,
    proto::asio::any_io_executor ex) {
  proto::ListWatchOptions lw;
  lw.namespace_ = "default";
  lw.label_selector = "e2e-run=" + run;
  proto::ReflectorOptions options;
  options.name = "paralleljobs";
  options.initial_backoff = std::chrono::milliseconds(200);
  options.max_backoff = std::chrono::milliseconds(2000);
  return std::make_unique<Informer<proto::ParallelJob>>(
      proto::makeClientListerWatcher(std::move(client), proto::resources::kParallelJobs, lw), ex,
      options);
}

std::set<std::string> cachedNames(const Informer<proto::ParallelJob>& inf) {
  std::set<std::string> names;
  for (const auto& j : inf.list()) names.insert(j->meta.name);
  return names;
}

}  // namespace

TEST_CASE("ParallelJobs nested as deep as a watch allows are listed, one nested deeper is skipped, and pages too large for the client are asked for again smaller") {
  applyParallelJobCrd();
  IoThread io;
  auto client = makeClient(io.executor(), adminConfig());
  const std::string run = uniqueName("nested");
  // The API server adds managedFields, which nest deeper than the fields they describe: measure
  // how deep a job comes back, then make one exactly as deep as a watch event's object may be.
  const int probe_depth = depthOf(createParallelJob(*client, nestedParallelJob(run + "-probe", run, 60)));
  const int levels = 60 + (proto::kMaxJsonDepth - 1) - probe_depth;
  REQUIRE(depthOf(createParallelJob(*client, nestedParallelJob(run + "-deep", run, levels))) ==
          proto::kMaxJsonDepth - 1);
  createParallelJob(*client, nestedParallelJob(run + "-poisoned", run, levels + 20));
  for (int i = 0; i < 3; ++i) createParallelJob(*client, nestedParallelJob(absl::StrCat(run, "-", i), run, 0));
  const std::set<std::string> readable = {run + "-probe", run + "-deep", run + "-0", run + "-1",
                                          run + "-2"};

  auto inf = parallelJobInformer(client, run, io.executor());
  inf->start();
  REQUIRE(inf->waitForSync(std::chrono::seconds(30)));
  CHECK(io.call([&] { return cachedNames(*inf); }) == readable);
  CHECK(io.call([&] { return inf->stats(); }).skipped_items == 1);
  inf->stop();

  // The same list through a client that reads at most one job's page: asked for again in
  // smaller pages, it arrives whole.
  size_t largest_page = 0, pages = 0;
  std::string cont;
  do {
    proto::Request list;
    list.path = proto::resources::kParallelJobs.collectionPath("default");
    list.query = {{"labelSelector", "e2e-run=" + run}, {"limit", "1"}};
    if (!cont.empty()) list.query.emplace_back("continue", cont);
    auto page = client->callSync(list);
    REQUIRE(page.ok());
    largest_page = std::max(largest_page, page->size());
    auto meta = proto::parseListPage(*page, proto::kMaxWatchEventBytes, proto::kMaxJsonDepth - 1,
                                     [](proto::ListPageItem&) {});
    REQUIRE(meta.ok());
    cont = meta->continue_token;
    ++pages;
  } while (!cont.empty());
  REQUIRE(pages == 6);
  proto::ClientOptions small;
  small.max_response_bytes = largest_page;
  auto limited = proto::Client::create(io.executor(), adminConfig(), small);
  REQUIRE(limited.ok());
  auto paged = parallelJobInformer(*limited, run, io.executor());
  paged->start();
  REQUIRE(paged->waitForSync(std::chrono::seconds(30)));
  CHECK(io.call([&] { return cachedNames(*paged); }) == readable);
  CHECK(io.call([&] { return paged->stats(); }).skipped_items == 1);
  paged->stop();

  REQUIRE(TestCluster::get().kubectl({"delete", "paralleljobs", "-n", "default", "-l", "e2e-run=" + run}).ok());
}

}  // namespace muster::e2e

// --- leader election against the real API server ---------------------------------------------

namespace muster::e2e {
namespace {

using Clock = std::chrono::steady_clock;

// One candidate: its own client (through `server`), its elector running on a strand, and the
// times it started and stopped leading.
struct Candidate {
  Candidate(IoThread& io, const proto::RestConfig& config, const std::string& server,
            const proto::LeaderElectionOptions& options) {
    auto c = config;
    c.server = server;
    auto made = proto::Client::create(io.executor(), c,
                                      proto::leaderElectionClientOptions(options, "muster-e2e"));
    REQUIRE(made.ok());
    client = *made;
    elector = std::make_unique<proto::LeaderElector>(client, options);
    proto::asio::co_spawn(proto::asio::make_strand(io.executor()),
                          elector->run([this] { started = Clock::now(); },
                                       [this] { stopped = Clock::now(); }),
                          [this](std::exception_ptr) { returned = true; });
  }
  ~Candidate() {
    elector->stop();
    waitFor([&] { return returned.load(); }, std::chrono::seconds(30));
    client->shutdown();
  }
  bool leading() const { return started.load() != Clock::time_point{} && stopped.load() == Clock::time_point{}; }

  std::shared_ptr<proto::Client> client;
  std::unique_ptr<proto::LeaderElector> elector;
  std::atomic<Clock::time_point> started{}, stopped{};
  std::atomic<bool> returned{false};
};

proto::LeaderElectionOptions leaseOptions(const std::string& identity, const std::string& lease) {
  proto::LeaderElectionOptions o;
  o.lease_namespace = "default";
  o.lease_name = lease;
  o.identity = identity;
  o.lease_duration = std::chrono::seconds(6);
  o.renew_deadline = std::chrono::seconds(4);
  o.retry_period = std::chrono::seconds(1);
  return o;
}

std::string leaseRenewTime(proto::Client& client, const std::string& lease) {
  proto::Request get;
  get.path = proto::resources::kLeases.objectPath("default", lease);
  auto body = client.callSync(get);
  if (!body.ok()) return "";
  proto::Lease l;
  return proto::decodeJson(*body, &l).ok() ? l.spec.renew_time : "";
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

TEST_CASE("a leader whose API server goes silent stops before its lease can pass, and the standby leads only after") {
  IoThread io;
  auto config = adminConfig();
  auto direct = makeClient(io.executor(), config);
  TcpProxy proxy(io.executor(), portOf(config.server));
  const std::string lease = uniqueName("e2e-lease");
  const auto options = leaseOptions("a", lease);
  Candidate a(io, config, absl::StrCat("https://127.0.0.1:", proxy.port()), options);
  REQUIRE(waitFor([&] { return a.leading(); }, std::chrono::seconds(20)));
  // Renewing: the Lease's renewTime moves.
  const std::string first = leaseRenewTime(*direct, lease);
  REQUIRE(waitFor([&] { return leaseRenewTime(*direct, lease) != first; }, std::chrono::seconds(10)));
  Candidate b(io, config, config.server, leaseOptions("b", lease));
  REQUIRE(waitFor([&] { return b.elector != nullptr; }));

  const auto silent_at = Clock::now();
  proxy.blackhole();
  REQUIRE(waitFor([&] { return a.stopped.load() != Clock::time_point{}; }, std::chrono::seconds(20)));
  const double stopped_after = seconds(a.stopped.load() - silent_at);
  INFO("a stopped " << stopped_after << " s after its API server went silent");
  // Its last renewal was sent before the silence: it stops within the renew deadline of it.
  CHECK(stopped_after <= 4.5);
  REQUIRE(waitFor([&] { return b.leading(); }, std::chrono::seconds(20)));
  const double gap = seconds(b.started.load() - a.stopped.load());
  INFO("b started leading " << gap << " s after a stopped");
  CHECK(gap > 0);  // never two leaders
  proxy.heal();
}

TEST_CASE("a leader that is stopped releases its lease and the standby takes over at once") {
  IoThread io;
  auto config = adminConfig();
  const std::string lease = uniqueName("e2e-lease");
  auto a = std::make_unique<Candidate>(io, config, config.server, leaseOptions("a", lease));
  REQUIRE(waitFor([&] { return a->leading(); }, std::chrono::seconds(20)));
  const std::string gauge = absl::StrCat("leader_election_master_status{name=\"", lease, "\"} 1");
  CHECK(metrics::defaultRegistry().render().find(gauge) != std::string::npos);
  Candidate b(io, config, config.server, leaseOptions("b", lease));
  a.reset();  // stop(): releases the lease, then returns
  const auto released_at = Clock::now();
  REQUIRE(waitFor([&] { return b.leading(); }, std::chrono::seconds(6)));
  // Far sooner than the 6 s lease duration: the released lease is free at once.
  CHECK(seconds(b.started.load() - released_at) < 3.0);
}

}  // namespace muster::e2e
