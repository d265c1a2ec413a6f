#pragma once

// Shared pieces of the end-to-end suites: the real control plane started by
// tests/cluster/up.sh (its directory in $MUSTER_E2E_CLUSTER_DIR), process helpers, a TCP proxy
// that can partition the client from the API server, and deadline-bounded waiting.

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "proto/kubeconfig.h"
#include "proto/nodetopology.h"
#include "proto/objects.h"

namespace muster::e2e {

// Runs argv[0] with arguments (no shell), returns stdout; a non-zero exit is an error that
// includes stderr's tail.
absl::StatusOr<std::string> runCommand(const std::vector<std::string>& argv);

// The control plane the suite runs against.
class TestCluster {
 public:
  // Reads $MUSTER_E2E_CLUSTER_DIR; fails the calling test when unset.
  static TestCluster& get();

  const std::string& dir() const { return dir_; }
  std::string kubeconfig() const { return dir_ + "/kubeconfig"; }
  std::string tokenKubeconfig() const { return dir_ + "/kubeconfig-token"; }
  // tests/cluster/ctl.sh --dir <dir> <args...>
  absl::StatusOr<std::string> ctl(const std::vector<std::string>& args) const;
  // kubectl from the pinned build, with the admin kubeconfig.
  absl::StatusOr<std::string> kubectl(const std::vector<std::string>& args) const;

 private:
  std::string dir_;
  std::string bin_dir_;
};

// An io_context running on a background thread for the duration of a test.
class IoThread {
 public:
  IoThread();
  ~IoThread();
  proto::asio::io_context& io() { return io_; }
  proto::asio::any_io_executor executor() { return io_.get_executor(); }
  // f() run on the io thread, its result handed back: what reads an informer (or anything else
  // that lives on that executor) from the test's thread must go through here.
  template <typename F>
  auto call(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    proto::asio::post(io_, [&task] { task(); });
    return result.get();
  }

 private:
  proto::asio::io_context io_;
  proto::asio::executor_work_guard<proto::asio::io_context::executor_type> work_;
  std::thread thread_;
};

std::shared_ptr<proto::Client> makeClient(proto::asio::any_io_executor executor,
                                          proto::RestConfig config);

// Polls `done` until it holds or `timeout` passes. Returns whether it held.
bool waitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout = std::chrono::seconds(60),
             std::chrono::milliseconds poll = std::chrono::milliseconds(50));

// A loopback TCP forwarder. partition() drops every open connection and refuses new ones until
// heal(); blackhole() keeps connections (and accepts new ones) but forwards nothing either way,
// like a stalled server or a dropped route, until heal(). The TLS session is end to end, so
// certificate verification is unchanged.
class TcpProxy {
 public:
  TcpProxy(proto::asio::any_io_executor executor, uint16_t target_port);
  ~TcpProxy();
  uint16_t port() const;
  void partition();
  void blackhole();
  void heal();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// A name unique within this run, for objects a test creates.
std::string uniqueName(const std::string& prefix);

}  // namespace muster::e2e

namespace muster::e2e {

// A muster-scheduler process under test: started with a config file and the cluster's admin
// kubeconfig, logging to a file; killed (SIGKILL) or stopped (SIGTERM) on demand. The binary is
// the build's, or $MUSTER_E2E_SCHEDULER_BIN (to run a suite against another build, e.g. an older
// one to show a test fails without a fix).
class SchedulerProcess {
 public:
  // `config_yaml` is written to a file and passed with --config.
  explicit SchedulerProcess(std::string config_yaml, std::vector<std::string> extra_args = {});
  ~SchedulerProcess();
  void start();
  void kill9();
  void terminate();
  bool running() const { return pid_ > 0; }
  // Started and has not exited (or crashed) since.
  bool alive();
  // Waits until the scheduler reports its caches synced (it logs "Caches synced").
  bool waitReady(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  const std::string& logPath() const { return log_path_; }
  std::string logTail(size_t bytes = 4000) const;
  // The last `max_lines` lines of the log that contain `needle`, for a failure's context.
  std::string logLines(std::string_view needle, size_t max_lines = 30) const;

 private:
  std::string config_path_, log_path_;
  std::vector<std::string> extra_args_;
  int pid_ = -1;
  size_t starts_ = 0;
};

// Creates kwok nodes named "<prefix>-<i>" with labels e2e-run=<run> plus the given labels,
// 8 GPUs / 8 RDMA / 64 CPUs / 512Gi each unless overridden, and waits until kwok marks them Ready.
struct NodeShape {
  int gpus = 8;
  int rdma = -1;  // preferred.jp/rdma; -1: as many as GPUs
  std::string cpu = "64";
  std::string memory = "512Gi";
  bool kwok = true;  // false: kwok does not manage it, so it never becomes Ready
  std::vector<std::pair<std::string, std::string>> taints;  // key=value:Effect as (key=value, effect)
  bool unschedulable = false;
  std::map<std::string, std::string> extra;  // more allocatable resources, name → quantity
};
void createNode(proto::Client& client, const std::string& name, const std::string& run,
                const std::map<std::string, std::string>& labels, const NodeShape& shape = {});
void waitNodesReady(proto::Client& client, const std::string& run, size_t count);
// The pods (in "default") and nodes labelled e2e-run=<run>, by name.
std::map<std::string, proto::Pod> listPods(proto::Client& client, const std::string& run);
std::map<std::string, proto::Node> listNodes(proto::Client& client, const std::string& run);
// NodeTopology/<name>, read through the API; fails the calling test when it cannot be read.
proto::NodeTopology getNodeTopology(proto::Client& client, const std::string& name);
// A muster-scheduler config for tests: tests/cluster's block/spine/rack levels, metrics on a free
// loopback port, no leader election, no job engine, retries within 2 s. Ends with the queue
// section open, so a case can append "  reservationAfterSeconds: 3\n".
extern const char kTestSchedulerConfig[];
// Deletes every node and pod labelled e2e-run=<run> (pods in "default").
void cleanupRun(proto::Client& client, const std::string& run);

}  // namespace muster::e2e
