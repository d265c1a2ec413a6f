// muster-topology: the node agent and in-pod helper.
//
//   muster-topology agent [--node-name NAME] [--kubeconfig PATH] [--context NAME]
//                         [--interval 60s] [--once] [--hwloc-xml FILE] [--sysfs-root DIR]
//                         [--no-verbs] [-v N]
//   muster-topology show [--json] [--node-name NAME] [--hwloc-xml FILE] [--sysfs-root DIR]
//                        [--no-verbs]
//   muster-topology rdma-conf [--nccl-out PATH] [--ucx-out PATH] [--hwloc-xml FILE]
//                             [--sysfs-root DIR] [--proc-root DIR] [--socket-ifname IF]
//                             [--no-verbs]
//   muster-topology version
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "proto/asio.h"
#include "proto/client.h"
#include "proto/kubeconfig.h"
#include "proto/log.h"
#include "proto/nodetopology.h"
#include "topology/agent/agent.h"
#include "topology/agent/rdma_conf.h"
#include "topology/agent/show.h"
#include "topology/discovery/discovery.h"

extern char** environ;

namespace muster::topology {
namespace {

std::atomic<bool> g_stop{false};
void onSignal(int) { g_stop = true; }

int usage() {
  std::cerr
      << "usage: muster-topology agent [--node-name NAME] [--kubeconfig PATH] [--context NAME]\n"
         "                             [--interval 60s] [--once] [--hwloc-xml FILE]\n"
         "                             [--sysfs-root DIR] [--no-verbs] [-v N]\n"
         "       muster-topology show [--json] [--node-name NAME] [--hwloc-xml FILE]\n"
         "                            [--sysfs-root DIR] [--no-verbs]\n"
         "       muster-topology rdma-conf [--nccl-out PATH] [--ucx-out PATH] [--hwloc-xml FILE]\n"
         "                                 [--sysfs-root DIR] [--proc-root DIR]\n"
         "                                 [--socket-ifname IF] [--no-verbs]\n"
         "       muster-topology version\n";
  return 2;
}

struct Flags {
  std::string command;
  std::string node_name, kubeconfig, context, hwloc_xml, sysfs_root, proc_root = "/proc";
  std::string nccl_out, ucx_out, socket_ifname;
  std::chrono::seconds interval{60};
  bool once = false, json = false, no_verbs = false;
};

// "60", "60s", "5m", "1h".
bool parseDuration(const std::string& text, std::chrono::seconds* out) {
  if (text.empty()) return false;
  char unit = text.back();
  std::string digits = std::isdigit(static_cast<unsigned char>(unit)) ? text
                                                                      : text.substr(0, text.size() - 1);
  if (digits.empty() || digits.size() > 9) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  long v = std::stol(digits);
  if (unit == 'm') v *= 60;
  else if (unit == 'h') v *= 3600;
  else if (unit != 's' && !std::isdigit(static_cast<unsigned char>(unit))) return false;
  if (v <= 0) return false;
  *out = std::chrono::seconds(v);
  return true;
}

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Fixtures (--hwloc-xml) get port facts only from an explicit --sysfs-root; the live machine from
// libibverbs, then sysfs.
absl::StatusOr<Topology> discoverWith(const Flags& f) {
  DiscoveryOptions options;
  options.hwloc_xml = f.hwloc_xml;
  VerbsProviderPtr verbs, sysfs;
  if (f.hwloc_xml.empty() && !f.no_verbs) {
    verbs = makeIbverbsProvider();
    options.providers.push_back(verbs.get());
  }
  if (f.hwloc_xml.empty() || !f.sysfs_root.empty()) {
    sysfs = makeSysfsProvider(f.sysfs_root.empty() ? "/sys" : f.sysfs_root);
    options.providers.push_back(sysfs.get());
  }
  return discover(options);
}

int runShow(const Flags& f) {
  absl::StatusOr<Topology> t = discoverWith(f);
  if (!t.ok()) {
    std::cerr << "muster-topology: " << t.status().message() << "\n";
    return 1;
  }
  if (f.json) {
    std::string node = f.node_name;
    if (node.empty()) {
      char host[256] = {0};
      if (gethostname(host, sizeof(host) - 1) == 0) node = host;
    }
    std::cout << proto::encode(toNodeTopology(*t, node, kAgentVersion, nowRfc3339())) << "\n";
  } else {
    std::cout << formatTable(*t);
  }
  return 0;
}

int runRdmaConf(const Flags& f) {
  absl::StatusOr<Topology> t = discoverWith(f);
  if (!t.ok()) {
    // Without a topology there is nothing to pair; still write files that disable nothing wrongly.
    std::cerr << "muster-topology: topology discovery failed, writing settings without "
                 "locality: "
              << t.status().message() << "\n";
    t = Topology{};
  }
  RdmaConfInput in;
  in.topology = std::move(*t);
  in.env = environment();
  in.gpu_uuid_to_bus = readNvidiaProcGpus(f.proc_root, &in.proc_gpu_bus_ids);
  in.socket_ifname = f.socket_ifname.empty() ? defaultRouteInterface(f.proc_root)
                                             : f.socket_ifname;
  absl::StatusOr<RdmaConf> conf = buildRdmaConf(in);
  if (!conf.ok()) {
    std::cerr << "muster-topology: " << conf.status().message() << "\n";
    return 1;
  }
  auto target = [&](const std::string& flag, const char* var) {
    if (!flag.empty()) return flag;
    auto it = in.env.find(var);
    return it == in.env.end() ? std::string() : it->second;
  };
  const std::string nccl = target(f.nccl_out, "RDMA_NCCL_CONF");
  const std::string ucx = target(f.ucx_out, "RDMA_UCX_CONF");
  int rc = 0;
  for (const auto& [path, text] : {std::pair{nccl, conf->nccl}, std::pair{ucx, conf->ucx}}) {
    if (path.empty()) {
      std::cout << text;
      continue;
    }
    if (absl::Status s = writeFileAtomically(path, text); !s.ok()) {
      std::cerr << "muster-topology: " << s.message() << "\n";
      rc = 1;
    } else {
      std::cerr << "muster-topology: wrote " << path << "\n";
    }
  }
  return rc;
}

int runAgent(const Flags& f) {
  std::string node = f.node_name;
  if (node.empty()) {
    if (const char* env = std::getenv("NODE_NAME")) node = env;
  }
  if (node.empty()) {
    std::cerr << "muster-topology agent: the node name is needed: --node-name or $NODE_NAME "
                 "(downward API spec.nodeName)\n";
    return 2;
  }
  absl::StatusOr<proto::RestConfig> config = proto::loadRestConfig(f.kubeconfig, f.context);
  if (!config.ok()) {
    std::cerr << "muster-topology agent: " << config.status().message() << "\n";
    return 1;
  }
  proto::asio::io_context io;
  auto work = proto::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  int rc = 0;
  {
    absl::StatusOr<std::shared_ptr<proto::Client>> client =
        proto::Client::create(io.get_executor(), *config);
    if (!client.ok()) {
      std::cerr << "muster-topology agent: " << client.status().message() << "\n";
      rc = 1;
    } else {
      std::signal(SIGTERM, onSignal);
      std::signal(SIGINT, onSignal);
      std::chrono::seconds backoff{1};
      while (!g_stop) {
        absl::Status status;
        absl::StatusOr<Topology> t = discoverWith(f);
        if (!t.ok()) {
          status = t.status();
        } else {
          absl::StatusOr<PublishResult> r = publish(**client, *t, node, nowRfc3339());
          if (!r.ok()) status = r.status();
          else if (f.once || r->created || r->spec_updated || r->labels_updated)
            MUSTER_LOG_INFO(1, "Published node topology", "node", node, "gpus", t->gpus.size(),
                            "rdmaNics", t->rdma_nics.size(), "created", r->created,
                            "specUpdated", r->spec_updated, "labelsUpdated", r->labels_updated);
        }
        if (!status.ok()) {
          MUSTER_LOG_ERROR("Publishing node topology failed", "node", node, "error",
                           status.message());
          if (f.once) {
            rc = 1;
            break;
          }
        }
        if (f.once) break;
        // Sleep the interval (or a backoff after a failure), waking for a signal.
        std::chrono::seconds wait = f.interval;
        if (!status.ok()) {
          wait = std::min(backoff, f.interval);
          backoff = std::min(backoff * 2, std::chrono::seconds(60));
        } else {
          backoff = std::chrono::seconds(1);
        }
        const auto until = std::chrono::steady_clock::now() + wait;
        while (!g_stop && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      }
      (*client)->shutdown();
    }
  }
  work.reset();
  io.stop();
  runner.join();
  return rc;
}

int run(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--node-name") { if (!next(&f.node_name)) return usage(); }
    else if (a == "--kubeconfig") { if (!next(&f.kubeconfig)) return usage(); }
    else if (a == "--context") { if (!next(&f.context)) return usage(); }
    else if (a == "--hwloc-xml") { if (!next(&f.hwloc_xml)) return usage(); }
    else if (a == "--sysfs-root") { if (!next(&f.sysfs_root)) return usage(); }
    else if (a == "--proc-root") { if (!next(&f.proc_root)) return usage(); }
    else if (a == "--nccl-out") { if (!next(&f.nccl_out)) return usage(); }
    else if (a == "--ucx-out") { if (!next(&f.ucx_out)) return usage(); }
    else if (a == "--socket-ifname") { if (!next(&f.socket_ifname)) return usage(); }
    else if (a == "--interval") {
      if (!next(&v) || !parseDuration(v, &f.interval)) return usage();
    } else if (a == "-v") {
      if (!next(&v) || v.empty() || v.size() > 2 || !std::isdigit(static_cast<unsigned char>(v[0])))
        return usage();
      log::setVerbosity(std::atoi(v.c_str()));
    }
    else if (a == "--once") f.once = true;
    else if (a == "--json") f.json = true;
    else if (a == "--no-verbs") f.no_verbs = true;
    else if (a == "-h" || a == "--help") return usage();
    else if (f.command.empty() && !a.empty() && a[0] != '-') f.command = a;
    else return usage();
  }
  if (f.command == "agent") return runAgent(f);
  if (f.command == "show") return runShow(f);
  if (f.command == "rdma-conf") return runRdmaConf(f);
  if (f.command == "version") {
    std::cout << kAgentVersion << " (hwloc " << hwlocVersion() << ")\n";
    return 0;
  }
  return usage();
}

}  // namespace
}  // namespace muster::topology

int main(int argc, char** argv) {
  try {
    return muster::topology::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "muster-topology: " << e.what() << "\n";
    return 1;
  }
}
