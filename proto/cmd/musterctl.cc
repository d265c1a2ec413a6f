// musterctl: looks at a cluster through Muster's own API layer (proto/): the same client,
// reflector and informer cache the scheduler uses.
//
// Its commands and flags are in kUsage below (what `musterctl --help` prints).
//
// `nodes` prints each node with its readiness, GPU/RDMA allocatable and in use (by every pod
// bound to it, whoever scheduled it), and its topology labels; `pods` prints pods with their node
// and that node's topology domains.
#include <algorithm>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "proto/client.h"
#include "proto/informer.h"
#include "proto/kubeconfig.h"
#include "proto/log.h"
#include "proto/vocabulary.h"

namespace muster::proto {
namespace {

const std::vector<std::string> kDefaultLevels = {vocabulary::kLabelBlock, vocabulary::kLabelSpine,
                                                 vocabulary::kLabelRack};

// The usage `--help` prints (stdout, exit 0) and a bad command line gets (stderr, exit 2). Every
// flag run() accepts is named here.
constexpr char kUsage[] =
    "usage: musterctl [--kubeconfig PATH] [--context NAME] [-v N] nodes\n"
    "                 [--levels K1,K2,...]\n"
    "       musterctl [--kubeconfig PATH] [--context NAME] [-v N] pods [-n NS]\n"
    "                 [-l SELECTOR] [--levels K1,K2,...]\n"
    "\n"
    "  nodes                       each node: readiness, GPU/RDMA allocatable and in\n"
    "                              use, and its topology labels\n"
    "  pods                        pods with their node and that node's topology\n"
    "                              domains\n"
    "\n"
    "  --kubeconfig PATH           the cluster (default: $KUBECONFIG, then the\n"
    "                              in-cluster service account, then ~/.kube/config)\n"
    "  --context NAME              the kubeconfig context (default: its\n"
    "                              current-context)\n"
    "  -v N                        log verbosity\n"
    "  --levels K1,K2,...          nodes, pods: the topology label keys shown as\n"
    "                              columns (default:\n"
    "                              muster.dev/block,muster.dev/spine,muster.dev/rack)\n"
    "  -n, --namespace NS          pods: only this namespace (default: all)\n"
    "  -l, --selector SELECTOR     pods: only those the label selector matches\n"
    "  -h, --help                  print this usage and exit\n";

int usage() {
  std::cerr << kUsage;
  return 2;
}

std::vector<std::string> splitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int64_t podRequest(const Pod& pod, const std::string& resource) {
  int64_t sum = 0;
  for (const auto& c : pod.spec.containers) {
    if (auto it = c.resources.requests.find(resource); it != c.resources.requests.end())
      sum += it->second.value();
  }
  return sum;
}

bool terminal(const Pod& pod) {
  return pod.status.phase == "Succeeded" || pod.status.phase == "Failed";
}

std::string label(const ObjectMeta& meta, const std::string& key) {
  auto it = meta.labels.find(key);
  return it == meta.labels.end() ? "-" : it->second;
}

int64_t allocatable(const Node& node, const std::string& resource) {
  const Quantity* q = node.allocatableOf(resource);
  return q == nullptr ? 0 : q->value();
}

template <class T>
std::unique_ptr<Informer<T>> startInformer(std::shared_ptr<Client> client, const Resource& r,
                                           ListWatchOptions options, asio::any_io_executor ex) {
  ReflectorOptions ro;
  ro.name = r.plural;
  auto inf = std::make_unique<Informer<T>>(makeClientListerWatcher(client, r, std::move(options)),
                                           ex, ro);
  inf->start();
  return inf;
}

int run(int argc, char** argv) {
  std::string kubeconfig, context, command, ns, selector;
  std::vector<std::string> levels = kDefaultLevels;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--kubeconfig") kubeconfig = next();
    else if (a == "--context") context = next();
    else if (a == "-v") log::setVerbosity(std::atoi(next().c_str()));
    else if (a == "-n" || a == "--namespace") ns = next();
    else if (a == "-l" || a == "--selector") selector = next();
    else if (a == "--levels") levels = splitComma(next());
    else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    else if (command.empty()) command = a;
    else return usage();
  }
  if (command != "nodes" && command != "pods") return usage();

  auto config = loadRestConfig(kubeconfig, context);
  if (!config.ok()) {
    std::cerr << "musterctl: " << config.status().message() << "\n";
    return 1;
  }
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto client = Client::create(io.get_executor(), *config);
  if (!client.ok()) {
    std::cerr << "musterctl: " << client.status().message() << "\n";
    work.reset();
    io.stop();
    runner.join();
    return 1;
  }
  auto nodes = startInformer<Node>(*client, resources::kNodes, {}, io.get_executor());
  ListWatchOptions pod_options;
  pod_options.namespace_ = command == "pods" ? ns : "";
  pod_options.label_selector = command == "pods" ? selector : "";
  auto pods = startInformer<Pod>(*client, resources::kPods, pod_options, io.get_executor());
  bool synced = nodes->waitForSync(std::chrono::seconds(30)) &&
                pods->waitForSync(std::chrono::seconds(30));
  int rc = 0;
  if (!synced) {
    std::cerr << "musterctl: could not list nodes and pods from " << config->server
              << " within 30s (run with -v 2 for details)\n";
    rc = 1;
  } else if (command == "nodes") {
    std::map<std::string, int64_t> gpus_used, rdma_used, pods_on;
    for (const auto& p : pods->list()) {
      if (p->spec.node_name.empty() || terminal(*p)) continue;
      gpus_used[p->spec.node_name] += podRequest(*p, vocabulary::kGpuResource);
      rdma_used[p->spec.node_name] += podRequest(*p, vocabulary::kRdmaResource);
      pods_on[p->spec.node_name]++;
    }
    auto all = nodes->list();
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a->meta.name < b->meta.name; });
    std::cout << std::left << std::setw(14) << "NODE" << std::setw(7) << "READY" << std::setw(10)
              << "GPU" << std::setw(10) << "RDMA" << std::setw(6) << "PODS";
    for (const auto& l : levels) std::cout << std::setw(14) << l.substr(l.rfind('/') + 1);
    std::cout << "\n";
    int64_t total_gpus = 0, used_gpus = 0;
    for (const auto& n : all) {
      const std::string& name = n->meta.name;
      int64_t g = allocatable(*n, vocabulary::kGpuResource);
      int64_t r = allocatable(*n, vocabulary::kRdmaResource);
      total_gpus += g;
      used_gpus += gpus_used[name];
      std::cout << std::setw(14) << name << std::setw(7) << (n->isReady() ? "True" : "False")
                << std::setw(10) << (std::to_string(gpus_used[name]) + "/" + std::to_string(g))
                << std::setw(10) << (std::to_string(rdma_used[name]) + "/" + std::to_string(r))
                << std::setw(6) << pods_on[name];
      for (const auto& l : levels) std::cout << std::setw(14) << label(n->meta, l);
      std::cout << "\n";
    }
    std::cout << all.size() << " nodes, " << used_gpus << "/" << total_gpus
              << " nvidia.com/gpu in use (listed and watched through Muster's client from "
              << config->server << ")\n";
  } else {
    auto all = pods->list();
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return std::tie(a->meta.namespace_, a->meta.name) < std::tie(b->meta.namespace_, b->meta.name);
    });
    std::cout << std::left << std::setw(36) << "POD" << std::setw(11) << "PHASE" << std::setw(14)
              << "NODE" << std::setw(5) << "GPU";
    for (const auto& l : levels) std::cout << std::setw(14) << l.substr(l.rfind('/') + 1);
    std::cout << "\n";
    for (const auto& p : all) {
      std::cout << std::setw(36) << objectKey(*p) << std::setw(11) << p->status.phase
                << std::setw(14) << (p->spec.node_name.empty() ? "-" : p->spec.node_name)
                << std::setw(5) << podRequest(*p, vocabulary::kGpuResource);
      auto node = p->spec.node_name.empty() ? nullptr : nodes->get("", p->spec.node_name);
      for (const auto& l : levels) std::cout << std::setw(14) << (node ? label(node->meta, l) : "-");
      std::cout << "\n";
    }
  }
  nodes->stop();
  pods->stop();
  (*client)->shutdown();
  work.reset();
  io.stop();
  runner.join();
  return rc;
}

}  // namespace
}  // namespace muster::proto

int main(int argc, char** argv) { return muster::proto::run(argc, argv); }
