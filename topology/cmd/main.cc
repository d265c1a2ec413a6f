// muster-topology: the node agent and in-pod helper. Its commands (agent, show, rdma-conf,
// device-plugin, version) and their flags are in kCommands below (what `--help` prints).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
#include "topology/deviceplugin/plugin.h"
#include "topology/discovery/discovery.h"
#include "topology/podresources/client.h"

extern char** environ;

namespace muster::topology {
namespace {

std::atomic<bool> g_stop{false};
void onSignal(int) { g_stop = true; }

// Each command's synopsis and what it does: `muster-topology CMD --help` prints that command's
// usage, `muster-topology --help` every synopsis and the agent's description. Every flag run()
// accepts is in a synopsis here (run() takes any flag with any command; each synopsis names those
// the command uses).
struct CommandUsage {
  std::string_view name, synopsis, description;
};
constexpr CommandUsage kCommands[] = {
    {"agent",
     "muster-topology agent [--node-name NAME] [--kubeconfig PATH] [--context NAME]\n"
     "                             [--interval 60s] [--once] [--hwloc-xml FILE]\n"
     "                             [--sysfs-root DIR] [--no-verbs]\n"
     "                             [--pod-resources-socket PATH] [--allocation-interval 5s]\n"
     "                             [--gpu-resource NAME] [--rdma-resource NAME]\n"
     "                             [--proc-root DIR] [-v N]\n",
     "agent publishes NodeTopology/<node> and the node's muster.dev/ labels: it\n"
     "rediscovers every --interval and writes only what changed. With the kubelet's\n"
     "pod-resources socket (--pod-resources-socket, default\n"
     "/var/lib/kubelet/pod-resources/kubelet.sock; \"\" = off) it also publishes\n"
     "spec.allocatable, the GPUs (--gpu-resource, default nvidia.com/gpu) and RDMA NICs\n"
     "(--rdma-resource, default preferred.jp/rdma) no pod holds: it asks the kubelet every\n"
     "--allocation-interval and writes only when they change. GPU ids are matched by UUID,\n"
     "index, PCI address, or the UUID in <proc-root>/driver/nvidia/gpus/*/information\n"
     "(--gpu-resource amd.com/gpu for AMD's plugin); NIC ids by\n"
     "ibverbs name or PCI address. Without the socket it publishes no free devices, and\n"
     "for a resource with ids it cannot match no free list; it logs why once and keeps\n"
     "running. show reads the socket only when --pod-resources-socket is given.\n"},
    {"show",
     "muster-topology show [--json] [--node-name NAME] [--hwloc-xml FILE]\n"
     "                            [--sysfs-root DIR] [--no-verbs]\n"
     "                            [--pod-resources-socket PATH] [--gpu-resource NAME]\n"
     "                            [--rdma-resource NAME] [--proc-root DIR]\n",
     "prints the GPUs, RDMA NICs, NUMA nodes, the GPU↔NIC paths (PIX, PXB, PHB, NODE,\n"
     "SOC, SYS) and locality groups this node has; --json prints the NodeTopology the\n"
     "agent would publish. --pod-resources-socket adds the devices no pod holds.\n"},
    {"rdma-conf",
     "muster-topology rdma-conf [--nccl-out PATH] [--ucx-out PATH] [--hwloc-xml FILE]\n"
     "                                 [--sysfs-root DIR] [--proc-root DIR]\n"
     "                                 [--socket-ifname IF] [--no-verbs]\n",
     "writes shell-sourceable NCCL and UCX settings for the RDMA NICs closest to this\n"
     "pod's GPUs (NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,\n"
     "HIP_VISIBLE_DEVICES, else /proc/driver/nvidia/gpus); InfiniBand and RoCE get\n"
     "NCCL_IB_HCA and UCX rc, EFA libfabric's FI_PROVIDER=efa. Values already in the\n"
     "environment are kept. Paths default to $RDMA_NCCL_CONF / $RDMA_UCX_CONF, else stdout.\n"},
    {"device-plugin",
     "muster-topology device-plugin --fake [--kubelet-dir DIR] [--hwloc-xml FILE]\n"
     "                                     [--fold-numa] [--sysfs-root DIR] [--no-verbs]\n"
     "                                     [--proc-root DIR] [--gpu-resource NAME]\n"
     "                                     [--rdma-resource NAME] [-v N]\n",
     "serves this node's GPUs (--gpu-resource, default nvidia.com/gpu) and RDMA NICs\n"
     "(--rdma-resource, default preferred.jp/rdma) to the kubelet through its device\n"
     "plugin API, registered through the kubelet's plugin watcher in\n"
     "<kubelet-dir>/plugins_registry (default /var/lib/kubelet), each device with its\n"
     "NUMA node as topology hint.\n"
     "--fake is required: the devices are fake (for test clusters): a container gets\n"
     "NVIDIA_VISIBLE_DEVICES / MUSTER_RDMA_DEVICES and, with --hwloc-xml, the export at\n"
     "/etc/muster/fake-topology.xml named by HWLOC_XMLFILE, never a device file.\n"
     "--fold-numa maps the export's NUMA nodes onto this machine's (read under --sysfs-root,\n"
     "default /sys), in order; --sysfs-root, --no-verbs and --proc-root are read as by show.\n"},
    {"version", "muster-topology version\n",
     "prints the agent's version and the hwloc library's release.\n"},
};

// The usage of one command (`show --help`), or of all (an empty or unknown command).
std::string usageText(const std::string& command) {
  for (const CommandUsage& c : kCommands) {
    if (c.name == command) return "usage: " + std::string(c.synopsis) + "\n" + std::string(c.description);
  }
  std::string text;
  for (const CommandUsage& c : kCommands) text += (text.empty() ? "usage: " : "       ") + std::string(c.synopsis);
  text += "       muster-topology [COMMAND] -h|--help\n\n";
  text += kCommands[0].description;
  text += "\n`muster-topology COMMAND --help` says what the other commands do.\n";
  return text;
}

// A bad command line: the usage on stderr, exit code 2.
int usage(const std::string& command = "") {
  std::cerr << usageText(command);
  return 2;
}

struct Flags {
  std::string command;
  std::string node_name, kubeconfig, context, hwloc_xml, sysfs_root, proc_root = "/proc";
  bool proc_root_given = false;
  std::string nccl_out, ucx_out, socket_ifname;
  std::string kubelet_dir = "/var/lib/kubelet";
  bool fake = false, fold_numa = false;
  std::optional<std::string> pod_resources_socket;  // nullopt: not given
  std::string gpu_resource = std::string(kDefaultGpuResource);
  std::string rdma_resource = std::string(kDefaultRdmaResource);
  std::chrono::seconds interval{60};
  std::chrono::seconds allocation_interval{5};
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
  // The live machine's driver entries; with a fixture only an explicit --proc-root.
  if (f.hwloc_xml.empty() || f.proc_root_given) options.proc_root = f.proc_root;
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

DeviceMapping mappingOf(const Flags& f) {
  DeviceMapping m;
  m.gpu_resource = f.gpu_resource;
  m.rdma_resource = f.rdma_resource;
  m.gpu_uuid_to_bus = readNvidiaProcGpus(f.proc_root, nullptr);
  return m;
}

int runShow(const Flags& f) {
  absl::StatusOr<Topology> t = discoverWith(f);
  if (!t.ok()) {
    std::cerr << "muster-topology: " << t.status().message() << "\n";
    return 1;
  }
  if (f.pod_resources_socket) {
    std::vector<std::string> notes;
    DeviceAllocationSourcePtr source = makePodResourcesClient({*f.pod_resources_socket});
    absl::StatusOr<DeviceAllocations> allocations = source->read();
    if (!allocations.ok()) {
      notes.push_back(std::string(allocations.status().message()));
    } else {
      t->allocatable = freeDevices(*t, *allocations, mappingOf(f), &notes);
    }
    for (const std::string& note : notes) {
      std::cerr << "muster-topology: free devices: " << note << "\n";
    }
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
      AgentLoop::Options options;
      options.interval = f.interval;
      options.allocation_interval = f.allocation_interval;
      options.mapping = mappingOf(f);
      options.proc_root = f.proc_root;
      const std::string socket =
          f.pod_resources_socket.value_or(std::string(kDefaultPodResourcesSocket));
      DeviceAllocationSourcePtr source;
      if (socket.empty()) {
        options.no_source_reason =
            "--pod-resources-socket is empty: free devices not published (Helm: "
            "agent.podResources.enabled=true turns it on)";
      } else {
        source = makePodResourcesClient({socket});
      }
      AgentLoop loop(
          std::move(options), [&f] { return discoverWith(f); },
          [&](const Topology& t) { return publish(**client, t, node, nowRfc3339()); },
          std::move(source));
      while (!g_stop) {
        AgentLoop::Step step = loop.step(AgentLoop::Clock::now());
        if (step.result && (f.once || step.result->created || step.result->spec_updated ||
                            step.result->labels_updated)) {
          const std::optional<FreeDevices>& free = loop.currentFree();
          MUSTER_LOG_INFO(1, "Published node topology", "node", node, "gpus",
                          loop.topology()->gpus.size(), "rdmaNics",
                          loop.topology()->rdma_nics.size(), "created",
                          step.result->created, "specUpdated", step.result->spec_updated,
                          "labelsUpdated", step.result->labels_updated, "freeGpus",
                          free && free->gpus_known ? std::to_string(free->gpus.size()) : "-",
                          "freeRdmaNics",
                          free && free->rdma_nics_known ? std::to_string(free->rdma_nics.size())
                                                        : "-");
        }
        if (!step.status.ok()) {
          MUSTER_LOG_ERROR("Publishing node topology failed", "node", node, "error",
                           step.status.message());
          if (f.once) {
            rc = 1;
            break;
          }
        }
        if (f.once) break;
        // Sleep until the next step is due, waking for a signal.
        while (!g_stop && AgentLoop::Clock::now() < step.next) {
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

// The fake devices of this node (or of --hwloc-xml) to the kubelet, until SIGTERM/SIGINT.
int runDevicePlugin(const Flags& f) {
  if (!f.fake) {
    std::cerr << "muster-topology device-plugin: only fake devices are served so far (no device "
                 "files are handed out): pass --fake, and only on a test cluster\n";
    return 2;
  }
  absl::StatusOr<Topology> t = discoverWith(f);
  if (!t.ok()) {
    std::cerr << "muster-topology device-plugin: " << t.status().message() << "\n";
    return 1;
  }
  const std::vector<int32_t> host =
      f.fold_numa ? deviceplugin::hostNumaNodes(f.sysfs_root.empty() ? "/sys" : f.sysfs_root)
                  : std::vector<int32_t>{};
  const std::string dir = f.kubelet_dir;
  std::vector<std::unique_ptr<deviceplugin::Plugin>> plugins;
  auto add = [&](std::string name, std::vector<deviceplugin::Device> devices, std::string env) {
    if (devices.empty()) return;
    deviceplugin::Resource r;
    r.name = std::move(name);
    r.devices = std::move(devices);
    r.ids_env = std::move(env);
    if (!f.hwloc_xml.empty()) {
      std::error_code ec;
      const std::string xml = std::filesystem::absolute(f.hwloc_xml, ec).string();
      r.mounts.push_back({xml, deviceplugin::kFakeTopologyPath});
      r.envs["HWLOC_XMLFILE"] = deviceplugin::kFakeTopologyPath;
    }
    plugins.push_back(std::make_unique<deviceplugin::Plugin>(dir, std::move(r)));
  };
  add(f.gpu_resource, deviceplugin::gpuDevices(*t, host), "NVIDIA_VISIBLE_DEVICES");
  add(f.rdma_resource, deviceplugin::nicDevices(*t, host), "MUSTER_RDMA_DEVICES");
  if (plugins.empty()) {
    std::cerr << "muster-topology device-plugin: no GPU and no RDMA NIC found: nothing to serve\n";
    return 1;
  }
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  std::map<std::string, std::string> last_error;
  std::map<std::string, std::optional<std::string>> last_registration;
  while (!g_stop) {
    for (auto& p : plugins) {
      const std::string name = p->resource().name;
      if (p->needsRestart()) {
        if (absl::Status s = p->start(); !s.ok()) {
          // The kubelet may not be up yet: retried every second, logged when the reason changes.
          if (last_error[name] != s.message()) {
            MUSTER_LOG_ERROR("Device plugin not serving", "resource", name, "error", s.message());
          }
          last_error[name] = std::string(s.message());
          continue;
        }
        last_error.erase(name);
        last_registration.erase(name);
        MUSTER_LOG_INFO(0, "Device plugin serving", "resource", name, "devices",
                        p->resource().devices.size(), "socket", p->socketPath());
      }
      std::optional<std::string> r = p->registration();
      if (r && (!last_registration.count(name) || last_registration[name] != r)) {
        if (r->empty()) {
          MUSTER_LOG_INFO(0, "Device plugin registered with the kubelet", "resource", name);
        } else {
          MUSTER_LOG_ERROR("The kubelet refused the device plugin", "resource", name, "error", *r);
        }
        last_registration[name] = r;
      }
    }
    for (int i = 0; i < 10 && !g_stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& p : plugins) p->stop();
  return 0;
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
    else if (a == "--proc-root") {
      if (!next(&f.proc_root)) return usage();
      f.proc_root_given = true;
    }
    else if (a == "--nccl-out") { if (!next(&f.nccl_out)) return usage(); }
    else if (a == "--ucx-out") { if (!next(&f.ucx_out)) return usage(); }
    else if (a == "--socket-ifname") { if (!next(&f.socket_ifname)) return usage(); }
    else if (a == "--kubelet-dir") { if (!next(&f.kubelet_dir)) return usage(); }
    else if (a == "--fake") f.fake = true;
    else if (a == "--fold-numa") f.fold_numa = true;
    else if (a == "--gpu-resource") { if (!next(&f.gpu_resource)) return usage(); }
    else if (a == "--rdma-resource") { if (!next(&f.rdma_resource)) return usage(); }
    else if (a == "--pod-resources-socket") {
      if (!next(&v)) return usage();
      f.pod_resources_socket = v;
    } else if (a == "--interval") {
      if (!next(&v) || !parseDuration(v, &f.interval)) return usage();
    } else if (a == "--allocation-interval") {
      if (!next(&v) || !parseDuration(v, &f.allocation_interval)) return usage();
    } else if (a == "-v") {
      if (!next(&v) || v.empty() || v.size() > 2 || !std::isdigit(static_cast<unsigned char>(v[0])))
        return usage();
      log::setVerbosity(std::atoi(v.c_str()));
    }
    else if (a == "--once") f.once = true;
    else if (a == "--json") f.json = true;
    else if (a == "--no-verbs") f.no_verbs = true;
    else if (a == "-h" || a == "--help") {
      std::cout << usageText(f.command);
      return 0;
    }
    else if (f.command.empty() && !a.empty() && a[0] != '-') f.command = a;
    else return usage();
  }
  if (f.command == "agent") return runAgent(f);
  if (f.command == "show") return runShow(f);
  if (f.command == "rdma-conf") return runRdmaConf(f);
  if (f.command == "device-plugin") return runDevicePlugin(f);
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
