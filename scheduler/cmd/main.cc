// muster-scheduler: the gang scheduler and, in the same process, the ParallelJob engine. This is
// the composition root (DESIGN.md §3): the process's config, one API client, one informer
// factory and one event recorder, shared by the components it wires together; the scheduler and
// job engine libraries never see each other.
//
// Its flags are in kUsage below (what `muster-scheduler --help` prints).
//
// --scheduler / --job-engine switch either part off (both on by default; the job engine also
// follows the config's jobEngine.enabled, which the flag overrides). Both run only while this
// process holds the leader lease.
//
// --rdma-conf-image names Muster's own image (the chart passes its own): the job engine then gives
// every ParallelJob pod that asks for nvidia.com/gpu or preferred.jp/rdma a first init container
// running `muster-topology rdma-conf` from it. Without the flag (or with an empty value) no such
// init container is added.
//
// Without --kubeconfig it uses $KUBECONFIG, then the in-cluster service account, then
// ~/.kube/config. A bad config is fatal at startup with a clear message; at runtime errors are
// logged and the process keeps serving. SIGTERM/SIGINT shut down gracefully (the leader lease is
// released so a standby takes over at once).
#include <malloc.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "jobengine/controller.h"
#include "proto/client.h"
#include "proto/coroutine.h"
#include "proto/event_recorder.h"
#include "proto/http_server.h"
#include "proto/informer_factory.h"
#include "proto/kubeconfig.h"
#include "proto/leader_election.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "scheduler/api.h"
#include "scheduler/cmd/config.h"
#include "scheduler/scheduler.h"

namespace muster::cmd {
namespace {
namespace asio = proto::asio;

// The usage `--help` prints (stdout, exit 0) and a bad command line gets (stderr, exit 2). Every
// flag run() accepts is named here.
constexpr char kUsage[] =
    "usage: muster-scheduler [--kubeconfig PATH] [--context NAME] [--config FILE]\n"
    "                        [-v N] [--identity ID] [--leader-elect=true|false]\n"
    "                        [--metrics-bind-address HOST:PORT]\n"
    "                        [--scheduler=true|false] [--job-engine=true|false]\n"
    "                        [--rdma-conf-image IMAGE]\n"
    "\n"
    "  --kubeconfig PATH       the cluster (default: $KUBECONFIG, then the in-cluster\n"
    "                          service account, then ~/.kube/config)\n"
    "  --context NAME          the kubeconfig context (default: its current-context)\n"
    "  --config FILE           Muster's config (muster.yaml; without it, the defaults)\n"
    "  -v, --v N               log verbosity (2: state changes and binds, 3: each\n"
    "                          attempt, 4: plugin decisions, 5: per-node detail)\n"
    "  --identity ID           this process in the leader lease (default:\n"
    "                          <hostname>_<pid>)\n"
    "  --leader-elect=BOOL     take part in leader election (default: the config's\n"
    "                          leaderElection.enabled)\n"
    "  --metrics-bind-address HOST:PORT\n"
    "                          where /metrics, /healthz and /readyz are served\n"
    "                          (overrides the config's metricsBindAddress)\n"
    "  --scheduler=BOOL        run the gang scheduler (default true)\n"
    "  --job-engine=BOOL       run the ParallelJob engine (default: the config's\n"
    "                          jobEngine.enabled)\n"
    "  --rdma-conf-image IMAGE Muster's image, for the rdma-conf init container of\n"
    "                          GPU/RDMA pods (default: none added)\n"
    "  -h, --help              print this usage and exit\n"
    "\n"
    "Every flag takes its value as the next word or after '='.\n";

int usage(const char* error = nullptr) {
  if (error) std::cerr << "muster-scheduler: " << error << "\n";
  std::cerr << kUsage;
  return 2;
}

std::string defaultIdentity() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "_" + std::to_string(getpid());
}

int run(int argc, char** argv) {
  // One malloc arena for the 2-4 threads that run the io_context: with one per thread (glibc's
  // default), memory freed on one thread is not reused by the others, and peak RSS was 1.5 MiB
  // higher at 2,000 nodes (bench/README.md section 4). MALLOC_ARENA_MAX, when set, decides.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
  std::string kubeconfig, context, config_path, identity = defaultIdentity(), metrics_address;
  std::string rdma_conf_image;
  std::optional<bool> leader_elect, job_engine;
  bool scheduler_enabled = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (a == flag) {
        if (i + 1 >= argc) return std::nullopt;
        return std::string(argv[++i]);
      }
      if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
      return std::nullopt;
    };
    if (auto v = value("--kubeconfig")) kubeconfig = *v;
    else if (auto v = value("--context")) context = *v;
    else if (auto v = value("--config")) config_path = *v;
    else if (auto v = value("--identity")) identity = *v;
    else if (auto v = value("--metrics-bind-address")) metrics_address = *v;
    else if (auto v = value("--rdma-conf-image")) rdma_conf_image = *v;
    else if (auto v = value("-v")) log::setVerbosity(std::atoi(v->c_str()));
    else if (auto v = value("--v")) log::setVerbosity(std::atoi(v->c_str()));
    else if (auto v = value("--leader-elect")) {
      if (*v != "true" && *v != "false") return usage("--leader-elect wants true or false");
      leader_elect = *v == "true";
    } else if (auto v = value("--scheduler")) {
      if (*v != "true" && *v != "false") return usage("--scheduler wants true or false");
      scheduler_enabled = *v == "true";
    } else if (auto v = value("--job-engine")) {
      if (*v != "true" && *v != "false") return usage("--job-engine wants true or false");
      job_engine = *v == "true";
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else return usage(("unknown argument " + a).c_str());
  }

  ProcessConfig config;
  if (!config_path.empty()) {
    auto loaded = loadProcessConfig(config_path);
    if (!loaded.ok()) {
      std::cerr << "muster-scheduler: " << loaded.status().message() << "\n";
      return 1;
    }
    config = *loaded;
  }
  if (leader_elect) config.leader_election.enabled = *leader_elect;
  if (job_engine) config.job_engine.enabled = *job_engine;
  if (!scheduler_enabled && !config.job_engine.enabled)
    return usage("nothing to run: both the scheduler and the job engine are off");
  if (!metrics_address.empty()) config.metrics_bind_address = metrics_address;
  if (absl::Status s = validateProcessConfig(config); !s.ok()) {
    std::cerr << "muster-scheduler: " << s.message() << "\n";
    return 1;
  }

  auto rest = proto::loadRestConfig(kubeconfig, context);
  if (!rest.ok()) {
    std::cerr << "muster-scheduler: " << rest.status().message() << "\n";
    return 1;
  }

  asio::io_context io;
  proto::ClientOptions client_options;
  client_options.qps = config.client_qps;
  client_options.burst = static_cast<int>(config.client_burst);
  client_options.max_connections = static_cast<int>(config.client_max_connections);
  client_options.user_agent = "muster-scheduler/0.1";
  auto client = proto::Client::create(io.get_executor(), *rest, client_options);
  if (!client.ok()) {
    std::cerr << "muster-scheduler: " << client.status().message() << "\n";
    return 1;
  }

  // One list/watch per resource type for the whole process, one Event recorder.
  proto::InformerFactory informers(*client, io.get_executor());
  proto::EventRecorderOptions event_options;
  event_options.component = "muster-scheduler";
  event_options.instance = identity;
  event_options.per_object_burst = static_cast<int>(config.events_max_per_object_per_minute);
  event_options.per_object_refill =
      absl::Minutes(1) / static_cast<double>(config.events_max_per_object_per_minute);
  proto::EventRecorder events(proto::makeClientEventSink(*client), io.get_executor(),
                              event_options);

  std::unique_ptr<scheduler::Scheduler> scheduler;
  config.scheduler.binds_in_flight = static_cast<int>(4 * config.client_max_connections);
  if (scheduler_enabled) {
    scheduler = std::make_unique<scheduler::Scheduler>(
        config.scheduler, informers, scheduler::makeClientSchedulerApi(*client), events,
        io.get_executor());
  }
  std::unique_ptr<jobengine::Controller> engine;
  if (config.job_engine.enabled) {
    jobengine::ControllerOptions engine_options;
    engine_options.identity = identity;
    engine_options.runtime.scheduler_name = config.scheduler.scheduler_names.front();
    engine_options.runtime.rdma_conf_image = rdma_conf_image;
    engine_options.runtime.cluster_domain = config.job_engine.cluster_domain;
    engine_options.runtime.slurm = config.job_engine.slurm;
    engine = std::make_unique<jobengine::Controller>(*client, informers, events, io.get_executor(),
                                                     engine_options);
  }
  auto start_all = [&] {
    informers.start();
    if (scheduler) scheduler->start();
    if (engine) engine->start();
  };
  auto stop_all = [&] {
    if (scheduler) scheduler->stop();
    if (engine) engine->stop();
    informers.stop();
    events.stop();
  };
  auto ready = [&] {
    return (!scheduler || scheduler->ready()) && (!engine || engine->ready());
  };
  std::atomic<bool> alive{true};
  auto server = proto::HttpServer::start(
      io.get_executor(), config.metrics_bind_address,
      {{"/healthz", [&] { return proto::HttpReply{alive ? 200 : 500, "text/plain", alive ? "ok\n" : "stopping\n"}; }},
       {"/livez", [&] { return proto::HttpReply{200, "text/plain", "ok\n"}; }},
       {"/readyz", [&] {
          bool is_ready = ready() || (config.leader_election.enabled && alive);
          return proto::HttpReply{is_ready ? 200 : 503, "text/plain", is_ready ? "ok\n" : "not ready\n"};
        }},
       {"/metrics", [] {
          return proto::HttpReply{200, "text/plain; version=0.0.4; charset=utf-8",
                                  metrics::defaultRegistry().render()};
        }}});
  if (!server.ok()) {
    std::cerr << "muster-scheduler: " << server.status().message() << "\n";
    return 1;
  }
  MUSTER_LOG_INFO(0, "Starting muster-scheduler", "identity", identity, "server", rest->server,
                  "schedulerNames", config.scheduler.scheduler_names.front(), "metrics",
                  "http://" + config.metrics_bind_address.substr(0, config.metrics_bind_address.rfind(':')) +
                      ":" + std::to_string((*server)->port()) + "/metrics",
                  "leaderElection", config.leader_election.enabled ? "true" : "false",
                  "scheduler", scheduler_enabled ? "true" : "false", "jobEngine",
                  config.job_engine.enabled ? "true" : "false", "rdmaConfImage", rdma_conf_image);

  int exit_code = 0;
  std::unique_ptr<proto::LeaderElector> elector;
  auto shutdown = [&] {
    alive = false;
    stop_all();
    (*server)->stop();
    (*client)->shutdown();
    io.stop();
  };
  if (config.leader_election.enabled) {
    proto::LeaderElectionOptions le;
    le.lease_namespace = config.leader_election.lease_namespace;
    le.lease_name = config.leader_election.lease_name;
    le.identity = identity;
    le.lease_duration = std::chrono::seconds(config.leader_election.lease_duration_seconds);
    le.renew_deadline = std::chrono::seconds(config.leader_election.renew_deadline_seconds);
    le.retry_period = std::chrono::seconds(config.leader_election.retry_period_seconds);
    // Its own client: renewals never wait behind binds, retries or the rate limit.
    auto elector_client = proto::Client::create(
        io.get_executor(), *rest, proto::leaderElectionClientOptions(le, client_options.user_agent));
    if (!elector_client.ok()) {
      std::cerr << "muster-scheduler: " << elector_client.status().message() << "\n";
      return 1;
    }
    elector = std::make_unique<proto::LeaderElector>(*elector_client, le);
    asio::co_spawn(asio::make_strand(io), elector->run([&] { start_all(); },
                                    [&] {
                                      if (alive) {
                                        // Like kube-scheduler: a leader that lost its lease exits
                                        // at once, before the lease can pass to another replica;
                                        // nothing it started may go on acting. A fresh process
                                        // campaigns again.
                                        MUSTER_LOG_ERROR("Leader election lost, exiting");
                                        std::fflush(nullptr);
                                        std::_Exit(1);
                                      }
                                      shutdown();
                                    }),
                   proto::dieOnException("leader election"));
  } else {
    start_all();
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    MUSTER_LOG_INFO(0, "Shutting down", "signal", sig);
    alive = false;
    stop_all();
    if (elector) {
      elector->stop();  // releases the lease, then calls on_stopped_leading -> shutdown()
      // If we never led, run() is sleeping in its retry loop: make sure we exit anyway.
      asio::post(io, [&] {
        if (!elector->isLeader()) shutdown();
      });
    } else {
      shutdown();
    }
  });
  std::signal(SIGPIPE, SIG_IGN);

  unsigned threads = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back([&] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  return exit_code;
}

}  // namespace
}  // namespace muster::cmd

int main(int argc, char** argv) { return muster::cmd::run(argc, argv); }
