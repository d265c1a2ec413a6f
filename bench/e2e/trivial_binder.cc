// trivial-binder: the API server's bind ceiling. Lists and watches pending pods with
// spec.schedulerName=<name> and POSTs a Binding for each, round-robin over the nodes, with no
// feasibility checks, no gangs, no cache: the fastest any scheduler can get its decisions into
// the API server on this machine. Not a scheduler; a yardstick for bench/e2e.
//
//   muster-trivial-binder --kubeconfig FILE [--scheduler-name trivial-binder]
//                         [--concurrency 64] [--node-label-selector type=kwok]
//
// Logs "first bind" and a count every second to stderr; runs until SIGTERM/SIGINT.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "proto/kubeconfig.h"
#include "rapidjson/document.h"

namespace {

namespace asio = muster::proto::asio;
using muster::proto::Client;

struct PodRef {
  std::string ns, name, uid;
};

struct Binder {
  std::shared_ptr<Client> client;
  std::string scheduler_name = "trivial-binder";
  std::string node_selector = "type=kwok";
  int concurrency = 64;
  std::vector<std::string> nodes;
  size_t next_node = 0;
  std::deque<PodRef> backlog;
  absl::flat_hash_set<std::string> seen;  // uids handed to a bind
  int in_flight = 0;
  int64_t bound = 0, failed = 0;
  bool first_logged = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Everything below runs on the io_context's one thread.
  void offer(PodRef pod) {
    if (!seen.insert(pod.uid).second) return;
    backlog.push_back(std::move(pod));
    pump();
  }

  void pump() {
    while (in_flight < concurrency && !backlog.empty() && !nodes.empty()) {
      PodRef pod = std::move(backlog.front());
      backlog.pop_front();
      std::string node = nodes[next_node++ % nodes.size()];
      ++in_flight;
      asio::co_spawn(client->executor(), bindOne(std::move(pod), std::move(node)), asio::detached);
    }
  }

  asio::awaitable<void> bindOne(PodRef pod, std::string node) {
    absl::Status s = co_await client->bind(pod.ns, pod.name, pod.uid, node);
    --in_flight;
    if (s.ok()) {
      ++bound;
      if (!first_logged) {
        first_logged = true;
        std::fprintf(stderr, "first bind at %.3f s after start\n", elapsed());
      }
    } else {
      ++failed;
      if (failed <= 5) std::fprintf(stderr, "bind %s/%s: %s\n", pod.ns.c_str(), pod.name.c_str(),
                                    std::string(s.message()).c_str());
    }
    pump();
  }

  // One pod object (from a list item or a watch event); offered when pending and unbound.
  void consider(const rapidjson::Value& obj) {
    if (!obj.IsObject() || !obj.HasMember("metadata") || !obj.HasMember("spec")) return;
    const auto& meta = obj["metadata"];
    const auto& spec = obj["spec"];
    if (spec.HasMember("nodeName") && spec["nodeName"].IsString() &&
        spec["nodeName"].GetStringLength() > 0) {
      return;
    }
    if (meta.HasMember("deletionTimestamp")) return;
    offer({meta["namespace"].GetString(), meta["name"].GetString(), meta["uid"].GetString()});
  }

  asio::awaitable<absl::Status> loadNodes() {
    std::string token;
    do {
      auto page = co_await client->list(muster::proto::resources::kNodes, "", node_selector, "",
                                        500, token);
      if (!page.ok()) co_return page.status();
      rapidjson::Document doc;
      doc.Parse(page->c_str());
      for (const auto& item : doc["items"].GetArray()) {
        nodes.push_back(item["metadata"]["name"].GetString());
      }
      token = doc["metadata"].HasMember("continue") ? doc["metadata"]["continue"].GetString() : "";
    } while (!token.empty());
    std::fprintf(stderr, "%zu nodes\n", nodes.size());
    co_return absl::OkStatus();
  }

  asio::awaitable<void> run() {
    if (auto s = co_await loadNodes(); !s.ok()) {
      std::fprintf(stderr, "listing nodes: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    const std::string fields = absl::StrCat("spec.schedulerName=", scheduler_name, ",spec.nodeName=");
    while (true) {
      // List (paged), then watch from the list's resourceVersion; on any error, list again.
      std::string token, rv;
      bool ok = true;
      do {
        auto page = co_await client->list(muster::proto::resources::kPods, "", "", fields, 500, token);
        if (!page.ok()) {
          ok = false;
          break;
        }
        rapidjson::Document doc;
        doc.Parse(page->c_str());
        for (const auto& item : doc["items"].GetArray()) consider(item);
        const auto& meta = doc["metadata"];
        token = meta.HasMember("continue") ? meta["continue"].GetString() : "";
        if (meta.HasMember("resourceVersion")) rv = meta["resourceVersion"].GetString();
      } while (!token.empty());
      if (!ok) {
        asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::seconds(1));
        co_await t.async_wait(asio::use_awaitable);
        continue;
      }
      muster::proto::Request watch;
      watch.path = muster::proto::resources::kPods.collectionPath();
      watch.query = {{"watch", "1"}, {"fieldSelector", fields}, {"resourceVersion", rv},
                     {"allowWatchBookmarks", "true"}, {"timeoutSeconds", "600"}};
      absl::Status s = co_await client->stream(watch, [this](std::string_view line) {
        rapidjson::Document ev;
        ev.Parse(line.data(), line.size());
        if (ev.HasParseError() || !ev.HasMember("type")) return absl::OkStatus();
        std::string_view type = ev["type"].GetString();
        if (type == "ADDED" || type == "MODIFIED") consider(ev["object"]);
        return absl::OkStatus();
      });
      if (!s.ok()) std::fprintf(stderr, "watch ended: %s\n", s.ToString().c_str());
    }
  }

  asio::awaitable<void> report() {
    asio::steady_timer t(co_await asio::this_coro::executor);
    int64_t last = -1;
    while (true) {
      t.expires_after(std::chrono::seconds(1));
      co_await t.async_wait(asio::use_awaitable);
      if (bound != last) {
        std::fprintf(stderr, "%.1f s: %lld bound, %lld failed, %d in flight, %zu queued\n",
                     elapsed(), static_cast<long long>(bound), static_cast<long long>(failed),
                     in_flight, backlog.size());
        last = bound;
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string kubeconfig;
  Binder binder;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--kubeconfig") kubeconfig = value;
    else if (flag == "--scheduler-name") binder.scheduler_name = value;
    else if (flag == "--concurrency") binder.concurrency = std::atoi(value.c_str());
    else if (flag == "--node-label-selector") binder.node_selector = value;
    else {
      std::fprintf(stderr,
                   "usage: %s --kubeconfig FILE [--scheduler-name N] [--concurrency C] "
                   "[--node-label-selector SEL]\n",
                   argv[0]);
      return 2;
    }
  }
  auto config = muster::proto::loadKubeconfig(kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  asio::io_context io;
  muster::proto::ClientOptions options;
  options.max_connections = binder.concurrency;
  options.user_agent = "muster-trivial-binder";
  auto client = Client::create(io.get_executor(), *config, options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }
  binder.client = *client;
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code&, int) {
    std::fprintf(stderr, "stopping: %lld bound, %lld failed\n", static_cast<long long>(binder.bound),
                 static_cast<long long>(binder.failed));
    std::fflush(stderr);
    std::_Exit(0);
  });
  asio::co_spawn(io, binder.run(), asio::detached);
  asio::co_spawn(io, binder.report(), asio::detached);
  io.run();
  return 0;
}
