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

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

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

void TcpProxy::heal() {
  std::promise<void> done;
  asio::post(impl_->strand, [impl = impl_, &done] {
    impl->partitioned = false;
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace muster::e2e
