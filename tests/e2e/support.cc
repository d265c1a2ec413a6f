#include "tests/e2e/support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <csignal>
#include <future>
#include <array>
#include <cstring>
#include <deque>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "proto/codec.h"
#include "rapidjson/document.h"

extern char** environ;

namespace muster::e2e {
namespace asio = proto::asio;

absl::StatusOr<std::string> runCommand(const std::vector<std::string>& argv) {
  char out_tmpl[] = "/tmp/muster-e2e-outXXXXXX";
  char err_tmpl[] = "/tmp/muster-e2e-errXXXXXX";
  int out_fd = mkstemp(out_tmpl);
  int err_fd = mkstemp(err_tmpl);
  if (out_fd < 0 || err_fd < 0) return absl::InternalError("mkstemp failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd);
  close(err_fd);
  auto slurp = [](const char* path) {
    std::ifstream in(path, std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    unlink(path);
    return s;
  };
  if (rc != 0) {
    slurp(out_tmpl);
    slurp(err_tmpl);
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  std::string out = slurp(out_tmpl);
  std::string err = slurp(err_tmpl);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    if (err.size() > 2000) err = err.substr(err.size() - 2000);
    return absl::InternalError(absl::StrCat(argv[0], " failed (status ", wstatus, "): ", err));
  }
  return out;
}

TestCluster& TestCluster::get() {
  static TestCluster* cluster = [] {
    auto* c = new TestCluster();
    const char* dir = std::getenv("MUSTER_E2E_CLUSTER_DIR");
    if (dir != nullptr) c->dir_ = dir;
    std::ifstream env(c->dir_ + "/env");
    std::string line;
    while (std::getline(env, line)) {
      const std::string key = "MUSTER_BIN_DIR=";
      if (line.rfind(key, 0) == 0) {
        c->bin_dir_ = line.substr(key.size());
        if (!c->bin_dir_.empty() && (c->bin_dir_.front() == '"' || c->bin_dir_.front() == '\''))
          c->bin_dir_ = c->bin_dir_.substr(1, c->bin_dir_.size() - 2);
      }
    }
    return c;
  }();
  if (cluster->dir_.empty()) FAIL("MUSTER_E2E_CLUSTER_DIR is not set: run through ctest or tests/run.sh");
  return *cluster;
}

absl::StatusOr<std::string> TestCluster::ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"bash", std::string(MUSTER_SOURCE_DIR) + "/tests/cluster/ctl.sh",
                                   "--dir", dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv);
}

absl::StatusOr<std::string> TestCluster::kubectl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {bin_dir_.empty() ? "kubectl" : bin_dir_ + "/kubectl",
                                   "--kubeconfig", kubeconfig()};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv);
}

IoThread::IoThread() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
IoThread::~IoThread() {
  work_.reset();
  io_.stop();
  thread_.join();
}

std::shared_ptr<proto::Client> makeClient(asio::any_io_executor executor, proto::RestConfig config) {
  auto client = proto::Client::create(executor, std::move(config));
  REQUIRE(client.ok());
  return *client;
}

bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(poll);
  }
  return done();
}

std::string uniqueName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return absl::StrCat(prefix, "-", getpid() % 100000, "-", counter.fetch_add(1));
}

// --- TcpProxy ---------------------------------------------------------------------------------

struct TcpProxy::Impl : std::enable_shared_from_this<TcpProxy::Impl> {
  Impl(asio::any_io_executor ex, uint16_t target)
      : strand(asio::make_strand(ex)),
        acceptor(strand, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        target_port(target) {}

  asio::strand<asio::any_io_executor> strand;
  asio::ip::tcp::acceptor acceptor;
  uint16_t target_port;
  bool partitioned = false;  // on strand
  bool blackholed = false;   // on strand
  std::set<std::shared_ptr<asio::ip::tcp::socket>> sockets;  // on strand

  void accept() {
    acceptor.async_accept(asio::make_strand(strand.get_inner_executor()),
                          [self = shared_from_this()](boost::system::error_code ec,
                                                      asio::ip::tcp::socket s) {
      if (ec) return;
      asio::post(self->strand, [self, s = std::make_shared<asio::ip::tcp::socket>(std::move(s))]() mutable {
        if (self->partitioned) {
          boost::system::error_code ignored;
          s->close(ignored);
        } else if (self->blackholed) {
          self->sockets.insert(s);
          self->swallow(s);
        } else {
          self->connect(s);
        }
        self->accept();
      });
    });
  }

  void connect(std::shared_ptr<asio::ip::tcp::socket> downstream) {
    auto upstream = std::make_shared<asio::ip::tcp::socket>(strand);
    sockets.insert(downstream);
    sockets.insert(upstream);
    upstream->async_connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), target_port),
        asio::bind_executor(strand, [self = shared_from_this(), downstream, upstream](
                                        boost::system::error_code ec) {
          if (ec) {
            self->drop(downstream, upstream);
            return;
          }
          self->pump(downstream, upstream);
          self->pump(upstream, downstream);
        }));
  }

  // Reads and discards until the socket closes.
  void swallow(std::shared_ptr<asio::ip::tcp::socket> s) {
    auto buf = std::make_shared<std::array<char, 16384>>();
    s->async_read_some(asio::buffer(*buf),
                       asio::bind_executor(strand, [self = shared_from_this(), s, buf](
                                                       boost::system::error_code ec, size_t) {
                         if (ec) {
                           boost::system::error_code ignored;
                           s->close(ignored);
                           self->sockets.erase(s);
                           return;
                         }
                         self->swallow(s);
                       }));
  }

  void pump(std::shared_ptr<asio::ip::tcp::socket> from, std::shared_ptr<asio::ip::tcp::socket> to) {
    auto buf = std::make_shared<std::array<char, 16384>>();
    from->async_read_some(
        asio::buffer(*buf),
        asio::bind_executor(strand, [self = shared_from_this(), from, to, buf](
                                        boost::system::error_code ec, size_t n) {
          if (ec) {
            self->drop(from, to);
            return;
          }
          if (self->blackholed) {  // the bytes go nowhere
            self->pump(from, to);
            return;
          }
          asio::async_write(*to, asio::buffer(buf->data(), n),
                            asio::bind_executor(self->strand, [self, from, to, buf](
                                                                  boost::system::error_code ec2, size_t) {
                              if (ec2) {
                                self->drop(from, to);
                                return;
                              }
                              self->pump(from, to);
                            }));
        }));
  }

  void drop(const std::shared_ptr<asio::ip::tcp::socket>& a,
            const std::shared_ptr<asio::ip::tcp::socket>& b) {
    boost::system::error_code ignored;
    a->close(ignored);
    b->close(ignored);
    sockets.erase(a);
    sockets.erase(b);
  }
};

TcpProxy::TcpProxy(asio::any_io_executor executor, uint16_t target_port)
    : impl_(std::make_shared<Impl>(executor, target_port)) {
  asio::post(impl_->strand, [impl = impl_] { impl->accept(); });
}

TcpProxy::~TcpProxy() {
  std::promise<void> done;
  asio::post(impl_->strand, [impl = impl_, &done] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
    for (auto& s : impl->sockets) s->close(ignored);
    impl->sockets.clear();
    done.set_value();
  });
  done.get_future().wait();
}

uint16_t TcpProxy::port() const { return impl_->acceptor.local_endpoint().port(); }

void TcpProxy::partition() {
  std::promise<void> done;
  asio::post(impl_->strand, [impl = impl_, &done] {
    impl->partitioned = true;
    boost::system::error_code ignored;
    for (auto& s : impl->sockets) s->close(ignored);
    impl->sockets.clear();
    done.set_value();
  });
  done.get_future().wait();
}

void TcpProxy::blackhole() {
  std::promise<void> done;
  asio::post(impl_->strand, [impl = impl_, &done] {
    impl->blackholed = true;
    done.set_value();
  });
  done.get_future().wait();
}

void TcpProxy::heal() {
  std::promise<void> done;
  asio::post(impl_->strand, [impl = impl_, &done] {
    impl->partitioned = false;
    impl->blackholed = false;
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace muster::e2e

namespace muster::e2e {

SchedulerProcess::SchedulerProcess(std::string config_yaml, std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)) {
  std::string base = "/tmp/muster-e2e-sched-" + std::to_string(getpid()) + "-" +
                     std::to_string(reinterpret_cast<uintptr_t>(this) % 100000);
  config_path_ = base + ".yaml";
  log_path_ = base + ".log";
  std::ofstream(config_path_) << config_yaml;
}

SchedulerProcess::~SchedulerProcess() {
  if (pid_ > 0) kill9();
  std::remove(config_path_.c_str());
}

void SchedulerProcess::start() {
  REQUIRE(pid_ <= 0);
  const char* bin = std::getenv("MUSTER_E2E_SCHEDULER_BIN");
  std::vector<std::string> argv = {bin != nullptr && *bin ? bin : MUSTER_SCHEDULER_BIN, "--kubeconfig",
                                   TestCluster::get().kubeconfig(), "--config", config_path_,
                                   "-v", "2"};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  REQUIRE(fd >= 0);
  std::string banner = "=== start " + std::to_string(++starts_) + "\n";
  (void)!write(fd, banner.data(), banner.size());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  REQUIRE(rc == 0);
  pid_ = pid;
}

bool SchedulerProcess::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
  UNSCOPED_INFO("muster-scheduler exited with status " << status << ": " << logTail());
  pid_ = -1;
  return false;
}

void SchedulerProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void SchedulerProcess::terminate() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  bool exited = waitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                        std::chrono::seconds(20), std::chrono::milliseconds(20));
  if (!exited) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

std::string SchedulerProcess::logTail(size_t bytes) const {
  std::ifstream in(log_path_, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

std::string SchedulerProcess::logLines(std::string_view needle, size_t max_lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) == std::string::npos) continue;
    kept.push_back(std::move(line));
    if (kept.size() > max_lines) kept.pop_front();
  }
  std::string out;
  for (const auto& l : kept) absl::StrAppend(&out, l, "\n");
  return out;
}

bool SchedulerProcess::waitReady(std::chrono::milliseconds timeout) {
  const std::string marker = "=== start " + std::to_string(starts_) + "\n";
  return waitFor([&] {
    std::ifstream in(log_path_, std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto at = s.rfind(marker);
    return at != std::string::npos && s.find("Caches synced", at) != std::string::npos;
  }, timeout);
}

void createNode(proto::Client& client, const std::string& name, const std::string& run,
                const std::map<std::string, std::string>& labels, const NodeShape& shape) {
  std::string label_json = absl::StrCat(R"("e2e-run":")", run, R"(","kubernetes.io/hostname":")",
                                        name, R"(","type":"kwok")");
  for (const auto& [k, v] : labels) absl::StrAppend(&label_json, ",\"", k, "\":\"", v, "\"");
  std::string resources = absl::StrCat(R"({"cpu":")", shape.cpu, R"(","memory":")", shape.memory,
                                       R"(","pods":"110","nvidia.com/gpu":")", shape.gpus,
                                       R"(","preferred.jp/rdma":")", shape.rdma < 0 ? shape.gpus : shape.rdma,
                                       "\"");
  for (const auto& [k, v] : shape.extra) absl::StrAppend(&resources, ",\"", k, "\":\"", v, "\"");
  resources += "}";
  std::string taints;
  for (const auto& [kv, effect] : shape.taints) {
    auto eq = kv.find('=');
    absl::StrAppend(&taints, taints.empty() ? "" : ",", R"({"key":")", kv.substr(0, eq),
                    R"(","value":")", eq == std::string::npos ? "" : kv.substr(eq + 1),
                    R"(","effect":")", effect, R"("})");
  }
  proto::Request req;
  req.verb = proto::Verb::kPost;
  req.path = proto::resources::kNodes.collectionPath();
  req.body = absl::StrCat(
      R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")", name, R"(","labels":{)",
      label_json, "}", shape.kwok ? R"(,"annotations":{"kwok.x-k8s.io/node":"fake"})" : "",
      R"(},"spec":{"unschedulable":)", shape.unschedulable ? "true" : "false", R"(,"taints":[)",
      taints, R"(]},"status":{"capacity":)", resources, R"(,"allocatable":)", resources, "}}");
  auto created = client.callSync(req);
  INFO(req.body);
  REQUIRE(created.ok());
}

void waitNodesReady(proto::Client& client, const std::string& run, size_t count) {
  bool ready = waitFor([&] {
    proto::Request req;
    req.path = proto::resources::kNodes.collectionPath();
    req.query = {{"labelSelector", "e2e-run=" + run}};
    auto body = client.callSync(req);
    if (!body.ok()) return false;
    rapidjson::Document doc;
    doc.Parse(body->c_str());
    size_t n = 0;
    for (const auto& item : doc["items"].GetArray()) {
      proto::Node node;
      if (proto::decode(item, &node).ok() && node.isReady()) ++n;
    }
    return n >= count;
  });
  REQUIRE(ready);
}

void cleanupRun(proto::Client& client, const std::string& run) {
  for (const auto* r : {&proto::resources::kPods, &proto::resources::kNodes}) {
    proto::Request req;
    req.verb = proto::Verb::kDelete;
    req.path = r->collectionPath(r->namespaced ? "default" : "");
    req.query = {{"labelSelector", "e2e-run=" + run}, {"gracePeriodSeconds", "0"}};
    (void)client.callSync(req);
  }
}

namespace {

// Every object of `resource` labelled e2e-run=<run>, by name; fails the test on any error.
template <class T>
std::map<std::string, T> listByRun(proto::Client& client, const proto::Resource& resource,
                                   const std::string& ns, const std::string& run) {
  std::map<std::string, T> out;
  proto::Request req;
  req.path = resource.collectionPath(ns);
  req.query = {{"labelSelector", "e2e-run=" + run}};
  auto body = client.callSync(req);
  INFO(body.status().message());
  REQUIRE(body.ok());
  rapidjson::Document doc;
  doc.Parse(body->c_str());
  REQUIRE(doc.IsObject());
  for (const auto& item : doc["items"].GetArray()) {
    T object;
    REQUIRE(proto::decode(item, &object).ok());
    out[object.meta.name] = std::move(object);
  }
  return out;
}

}  // namespace

const char kTestSchedulerConfig[] = R"(topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]
metricsBindAddress: 127.0.0.1:0
leaderElection:
  enabled: false
jobEngine:
  enabled: false
queue:
  initialBackoffSeconds: 1
  maxBackoffSeconds: 2
)";

std::map<std::string, proto::Pod> listPods(proto::Client& client, const std::string& run) {
  return listByRun<proto::Pod>(client, proto::resources::kPods, "default", run);
}

std::map<std::string, proto::Node> listNodes(proto::Client& client, const std::string& run) {
  return listByRun<proto::Node>(client, proto::resources::kNodes, "", run);
}

proto::NodeTopology getNodeTopology(proto::Client& client, const std::string& name) {
  proto::Request req;
  req.path = proto::resources::kNodeTopologies.objectPath("", name);
  auto body = client.callSync(req);
  INFO(body.status().message());
  REQUIRE(body.ok());
  proto::NodeTopology out;
  REQUIRE(proto::decodeNodeTopologyJson(*body, &out).ok());
  return out;
}

}  // namespace muster::e2e
