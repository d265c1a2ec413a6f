#include "proto/client.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "rapidjson/document.h"

extern char** environ;

namespace muster::proto {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Throwaway PKI made with the openssl CLI (run without a shell), once per test process.

void runOpenssl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "openssl", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("openssl " << args[1]);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct Pki {
  fs::path dir;
  std::string ca_pem;
  std::string other_ca_pem;  // a CA that signed nothing we use
  std::string client_cert_pem;
  std::string client_key_pem;
  fs::path ca_file, server_cert_file, server_key_file;
};

const Pki& pki() {
  static const Pki instance = [] {
    Pki p;
    std::string tmpl = (fs::temp_directory_path() / "muster-client-pki-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    p.dir = tmpl;
    const std::string cnf = (p.dir / "openssl.cnf").string();
    std::ofstream(cnf) << "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = muster\n"
                          "[v3_ca]\nbasicConstraints = critical,CA:TRUE\n"
                          "keyUsage = critical,keyCertSign,cRLSign\n"
                          "subjectKeyIdentifier = hash\n"
                          "[server]\nbasicConstraints = CA:FALSE\n"
                          "keyUsage = critical,digitalSignature\n"
                          "extendedKeyUsage = serverAuth\n"
                          "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
                          "[client]\nbasicConstraints = CA:FALSE\n"
                          "keyUsage = critical,digitalSignature\n"
                          "extendedKeyUsage = clientAuth\n";
    auto f = [&](const char* name) { return (p.dir / name).string(); };
    const std::vector<std::string> ec_key = {"-newkey", "ec", "-pkeyopt",
                                             "ec_paramgen_curve:prime256v1", "-nodes"};
    auto makeCa = [&](const char* stem) {
      std::vector<std::string> args = {"req", "-x509", "-config", cnf, "-extensions", "v3_ca"};
      args.insert(args.end(), ec_key.begin(), ec_key.end());
      args.insert(args.end(), {"-keyout", f(stem) + ".key", "-out", f(stem) + ".crt", "-days",
                               "2", "-subj", std::string("/CN=") + stem});
      runOpenssl(args);
    };
    auto makeLeaf = [&](const char* stem, const char* ext, int serial) {
      std::vector<std::string> req = {"req", "-new", "-config", cnf};
      req.insert(req.end(), ec_key.begin(), ec_key.end());
      req.insert(req.end(), {"-keyout", f(stem) + ".key", "-out", f(stem) + ".csr", "-subj",
                             std::string("/CN=") + stem});
      runOpenssl(req);
      runOpenssl({"x509", "-req", "-in", f(stem) + ".csr", "-CA", f("ca.crt"), "-CAkey",
                  f("ca.key"), "-set_serial", std::to_string(serial), "-days", "2", "-extfile",
                  cnf, "-extensions", ext, "-out", f(stem) + ".crt"});
    };
    makeCa("ca");
    makeCa("other-ca");
    makeLeaf("server", "server", 2);
    makeLeaf("client", "client", 3);
    p.ca_file = f("ca.crt");
    p.server_cert_file = f("server.crt");
    p.server_key_file = f("server.key");
    p.ca_pem = readAll(p.ca_file);
    p.other_ca_pem = readAll(f("other-ca.crt"));
    p.client_cert_pem = readAll(f("client.crt"));
    p.client_key_pem = readAll(f("client.key"));
    return p;
  }();
  // Removes the scratch directory when the test process exits.
  static const struct Remover {
    fs::path dir;
    ~Remover() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remover{instance.dir};
  return instance;
}

// ---------------------------------------------------------------------------------------------
// A small in-process HTTPS server on 127.0.0.1, port 0, with its own thread.

// What the test server answers; built like `Reply().status(404).body(json)`.
struct Reply {
  Reply& status(int s) { status_code = s; return *this; }
  Reply& body(std::string b) { body_text = std::move(b); return *this; }
  Reply& header(std::string k, std::string v) { headers.emplace_back(std::move(k), std::move(v)); return *this; }
  // Chunked: each chunk written and flushed on its own.
  Reply& chunked(std::vector<std::string> c) { chunks = std::move(c); return *this; }
  Reply& holdOpen() { hold_open = true; return *this; }  // chunked: never send the last chunk
  Reply& drop(bool d = true) { dropped = d; return *this; }  // close without answering
  // Close after answering although keep-alive was promised.
  Reply& closeAfter() { close_after = true; return *this; }

  int status_code = 200;
  std::string body_text;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> chunks;
  bool hold_open = false;
  bool dropped = false;
  bool close_after = false;
};

struct Seen {
  std::string method;
  std::string target;
  std::string authorization;
  std::string content_type;
  std::string body;
  bool client_cert = false;
};

// nth: 1 for the first request on its connection.
using Handler = std::function<Reply(const Seen& request, int nth)>;

class TestServer {
 public:
  explicit TestServer(Handler handler, bool require_client_cert = false)
      : handler_(std::move(handler)), tls_(ssl::context::tls_server), acceptor_(io_) {
    const Pki& p = pki();
    tls_.use_certificate_chain_file(p.server_cert_file.string());
    tls_.use_private_key_file(p.server_key_file.string(), ssl::context::pem);
    if (require_client_cert) {
      tls_.load_verify_file(p.ca_file.string());
      tls_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, acceptLoop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    io_.stop();
    thread_.join();
  }

  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  std::vector<Seen> requests() const {
    std::lock_guard lock(mu_);
    return seen_;
  }
  int connections() const { return connections_.load(); }

 private:
  asio::awaitable<void> acceptLoop() {
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(
          asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      ++connections_;
      asio::co_spawn(io_, session(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> session(tcp::socket socket) {
    ssl::stream<tcp::socket> stream(std::move(socket), tls_);
    boost::system::error_code ec;
    co_await stream.async_handshake(ssl::stream_base::server,
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    X509* peer = SSL_get1_peer_certificate(stream.native_handle());
    const bool client_cert = peer != nullptr;
    X509_free(peer);
    beast::flat_buffer buffer;
    for (int nth = 1;; ++nth) {
      http::request<http::string_body> req;
      co_await http::async_read(stream, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      Seen seen{std::string(req.method_string()), std::string(req.target()),
                std::string(req[http::field::authorization]),
                std::string(req[http::field::content_type]), req.body(), client_cert};
      {
        std::lock_guard lock(mu_);
        seen_.push_back(seen);
      }
      Reply reply = handler_(seen, nth);
      if (reply.dropped) break;
      if (reply.chunks.empty()) {
        http::response<http::string_body> res(static_cast<http::status>(reply.status_code), 11);
        for (auto& [k, v] : reply.headers) res.set(k, v);
        res.set(http::field::content_type, "application/json");
        res.body() = reply.body_text;
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !req.keep_alive() || reply.close_after) break;
        continue;
      }
      http::response<http::empty_body> res(static_cast<http::status>(reply.status_code), 11);
      res.set(http::field::content_type, "application/json");
      res.chunked(true);
      http::response_serializer<http::empty_body> sr(res);
      co_await http::async_write_header(stream, sr, asio::redirect_error(asio::use_awaitable, ec));
      asio::steady_timer pause(io_);
      for (const std::string& chunk : reply.chunks) {
        if (ec) break;
        co_await asio::async_write(stream, http::make_chunk(asio::buffer(chunk)),
                                   asio::redirect_error(asio::use_awaitable, ec));
        // Give the client a chance to read each chunk on its own (correctness does not
        // depend on it: the splitter must cope with any split).
        pause.expires_after(2ms);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      if (reply.hold_open) {
        pause.expires_after(1h);
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        break;
      }
      co_await asio::async_write(stream, http::make_chunk_last(),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    stream.next_layer().close(ec);
  }

  Handler handler_;
  asio::io_context io_;
  ssl::context tls_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// The client's own io_context on its own thread.
class ClientHarness {
 public:
  ClientHarness() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~ClientHarness() {
    client.reset();
    work_.reset();
    thread_.join();
  }

  void start(RestConfig config, ClientOptions options = {}) {
    auto created = Client::create(io_.get_executor(), std::move(config), std::move(options));
    INFO(created.status().ToString());
    REQUIRE(created.ok());
    client = *created;
  }

  template <class T>
  T await(asio::awaitable<T> work) {
    return asio::co_spawn(io_, std::move(work), asio::use_future).get();
  }
  template <class T>
  std::future<T> spawn(asio::awaitable<T> work) {
    return asio::co_spawn(io_, std::move(work), asio::use_future);
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<Client> client;

 private:
  std::thread thread_;
};

RestConfig configFor(const TestServer& server) {
  RestConfig config;
  config.server = server.url();
  config.ca_pem = pki().ca_pem;
  return config;
}

ClientOptions fastRetries(int max_retries) {
  ClientOptions options;
  options.max_retries = max_retries;
  options.initial_backoff = 1ms;
  options.max_backoff = 4ms;
  options.request_timeout = 10s;
  return options;
}

Request get(std::string path) {
  Request r;
  r.path = std::move(path);
  return r;
}

const std::string kNotFound =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"pods \"x\" not found","reason":"NotFound",)"
    R"("details":{"name":"x","kind":"pods"},"code":404})";

// ---------------------------------------------------------------------------------------------

TEST_CASE("a request over TLS verified against the CA and the 127.0.0.1 IP SAN succeeds",
          "[client]") {
  TestServer server([](const Seen&, int) { return Reply().body(R"({"ok":true})"); });
  ClientHarness h;
  h.start(configFor(server));
  auto response = h.client->sendSync(get("/api/v1/nodes"));
  INFO(response.status().ToString());
  REQUIRE(response.ok());
  CHECK(response->status == 200);
  CHECK(response->body == R"({"ok":true})");
  CHECK(response->content_type == "application/json");
  CHECK(server.requests().at(0).target == "/api/v1/nodes");
}

TEST_CASE("a server certificate from another CA is refused and not retried", "[client]") {
  TestServer server([](const Seen&, int) { return Reply(); });
  ClientHarness h;
  RestConfig config = configFor(server);
  config.ca_pem = pki().other_ca_pem;
  h.start(config, fastRetries(3));
  auto response = h.client->sendSync(get("/api/v1/nodes"));
  REQUIRE_FALSE(response.ok());
  CHECK(absl::StrContains(response.status().message(), "server certificate not trusted"));
  CHECK(server.requests().empty());
  CHECK(server.connections() == 1);
}

TEST_CASE("the verified name follows tls_server_name", "[client]") {
  TestServer server([](const Seen&, int) { return Reply(); });
  SECTION("a DNS name in the certificate is accepted") {
    ClientHarness h;
    RestConfig config = configFor(server);
    config.tls_server_name = "localhost";
    h.start(config, fastRetries(0));
    auto response = h.client->sendSync(get("/version"));
    INFO(response.status().ToString());
    CHECK(response.ok());
  }
  SECTION("a name not in the certificate is refused") {
    ClientHarness h;
    RestConfig config = configFor(server);
    config.tls_server_name = "kubernetes.default.svc";
    h.start(config, fastRetries(0));
    auto response = h.client->sendSync(get("/version"));
    REQUIRE_FALSE(response.ok());
    CHECK(absl::StrContains(response.status().message(), "not trusted"));
  }
  SECTION("insecure-skip-tls-verify accepts any certificate") {
    ClientHarness h;
    RestConfig config = configFor(server);
    config.ca_pem = pki().other_ca_pem;
    config.insecure_skip_tls_verify = true;
    h.start(config, fastRetries(0));
    CHECK(h.client->sendSync(get("/version")).ok());
  }
}

TEST_CASE("429 with Retry-After is retried after the server's delay and then succeeds",
          "[client]") {
  TestServer server([](const Seen&, int) {
    static std::atomic<int> calls{0};
    if (calls++ == 0) {
      return Reply()
          .status(429)
          .body(R"({"kind":"Status","message":"slow down","reason":"TooManyRequests","code":429})")
          .header("Retry-After", "1");
    }
    return Reply().body("{}");
  });
  ClientHarness h;
  h.start(configFor(server), fastRetries(3));
  const auto start = std::chrono::steady_clock::now();
  auto body = h.client->callSync(get("/api/v1/pods"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO(body.status().ToString());
  REQUIRE(body.ok());
  CHECK(*body == "{}");
  CHECK(server.requests().size() == 2);
  CHECK(elapsed >= 1s);  // the backoff alone would be 1ms
}

TEST_CASE("500 on every attempt exhausts the retries and surfaces the API error", "[client]") {
  TestServer server([](const Seen&, int) {
    return Reply().status(500).body(
        R"({"kind":"Status","status":"Failure","message":"etcd is down",)"
        R"("reason":"InternalError","code":500})");
  });
  ClientHarness h;
  h.start(configFor(server), fastRetries(3));
  auto body = h.client->callSync(get("/api/v1/pods"));
  REQUIRE_FALSE(body.ok());
  CHECK(server.requests().size() == 4);
  CHECK(body.status().code() == absl::StatusCode::kInternal);
  CHECK(httpStatusOf(body.status()) == 500);
  CHECK(body.status().message() == "GET /api/v1/pods: etcd is down (500 InternalError)");
}

TEST_CASE("500 on a POST is not retried, 503 is", "[client]") {
  std::atomic<int> status{500};
  TestServer server([&](const Seen&, int) { return Reply().status(status.load()); });
  ClientHarness h;
  h.start(configFor(server), fastRetries(2));
  Request post = get("/api/v1/namespaces/default/pods");
  post.verb = Verb::kPost;
  post.body = "{}";
  auto first = h.client->sendSync(post);
  REQUIRE(first.ok());
  CHECK(first->status == 500);
  CHECK(server.requests().size() == 1);
  status = 503;
  auto second = h.client->sendSync(post);
  REQUIRE(second.ok());
  CHECK(second->status == 503);
  CHECK(server.requests().size() == 4);
}

TEST_CASE("a 404 Status body decodes to NotFound with the server's message", "[client]") {
  TestServer server([](const Seen&, int) { return Reply().status(404).body(kNotFound); });
  ClientHarness h;
  h.start(configFor(server));
  auto body = h.await(h.client->get(resources::kPods, "default", "x"));
  REQUIRE_FALSE(body.ok());
  CHECK(isNotFound(body.status()));
  CHECK_FALSE(isConflict(body.status()));
  CHECK(reasonOf(body.status()) == "NotFound");
  CHECK(body.status().code() == absl::StatusCode::kNotFound);
  CHECK(body.status().message() ==
        "GET /api/v1/namespaces/default/pods/x: pods \"x\" not found (404 NotFound)");
  CHECK(server.requests().size() == 1);
}

TEST_CASE("a bearer token is sent and re-read from token_file when it rotates", "[client]") {
  TestServer server([](const Seen&, int) { return Reply().body("{}"); });
  const fs::path token_file = pki().dir / "token";
  std::ofstream(token_file) << "first-token\n";
  ClientHarness h;
  RestConfig config = configFor(server);
  config.token_file = token_file.string();
  config.bearer_token = "first-token";
  h.start(config);
  REQUIRE(h.client->callSync(get("/a")).ok());
  std::ofstream(token_file, std::ios::trunc) << "second-token-rotated\n";
  fs::last_write_time(token_file, fs::last_write_time(token_file) + 10s);
  REQUIRE(h.client->callSync(get("/b")).ok());
  auto seen = server.requests();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].authorization == "Bearer first-token");
  CHECK(seen[1].authorization == "Bearer second-token-rotated");
}

TEST_CASE("a client certificate is presented when the server requires one", "[client]") {
  TestServer server([](const Seen&, int) { return Reply().body("{}"); },
                    /*require_client_cert=*/true);
  SECTION("with the certificate") {
    ClientHarness h;
    RestConfig config = configFor(server);
    config.client_cert_pem = pki().client_cert_pem;
    config.client_key_pem = pki().client_key_pem;
    h.start(config);
    auto body = h.client->callSync(get("/api/v1/nodes"));
    INFO(body.status().ToString());
    REQUIRE(body.ok());
    CHECK(server.requests().at(0).client_cert);
    CHECK(server.requests().at(0).authorization.empty());
  }
  SECTION("without it the request fails") {
    ClientHarness h;
    h.start(configFor(server), fastRetries(1));
    auto body = h.client->callSync(get("/api/v1/nodes"));
    CHECK_FALSE(body.ok());
    CHECK(server.requests().empty());
  }
}

TEST_CASE("a key that does not match the certificate is refused at creation", "[client]") {
  RestConfig config;
  config.server = "https://127.0.0.1:1";
  config.client_cert_pem = pki().client_cert_pem;
  config.client_key_pem = readAll(pki().server_key_file);
  asio::io_context io;
  auto created = Client::create(io.get_executor(), config);
  REQUIRE_FALSE(created.ok());
  CHECK(absl::StrContains(created.status().message(), "does not match"));
}

TEST_CASE("the rate limiter spaces requests at qps", "[client]") {
  TestServer server([](const Seen&, int) { return Reply().body("{}"); });
  ClientHarness h;
  ClientOptions options;
  options.qps = 20;
  options.burst = 1;
  h.start(configFor(server), options);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<absl::StatusOr<std::string>>> results;
  for (int i = 0; i < 5; ++i) results.push_back(h.spawn(h.client->call(get("/x"))));
  for (auto& r : results) CHECK(r.get().ok());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // One token at once, then one every 50ms: the fifth request cannot start before 200ms.
  CHECK(elapsed >= 200ms);
  CHECK(server.requests().size() == 5);
}

TEST_CASE("concurrent requests share at most max_connections keep-alive connections",
          "[client]") {
  TestServer server([](const Seen&, int) { return Reply().body("{}"); });
  ClientHarness h;
  ClientOptions options;
  options.max_connections = 2;
  h.start(configFor(server), options);
  std::vector<std::future<absl::StatusOr<std::string>>> results;
  for (int i = 0; i < 20; ++i) results.push_back(h.spawn(h.client->call(get("/x"))));
  for (auto& r : results) CHECK(r.get().ok());
  CHECK(server.requests().size() == 20);
  CHECK(server.connections() <= 2);
  // Sequential requests reuse one connection.
  const int before = server.connections();
  for (int i = 0; i < 3; ++i) REQUIRE(h.client->callSync(get("/y")).ok());
  CHECK(server.connections() == before);
}

TEST_CASE("an urgent request (a Binding) waiting for a pooled connection goes before ordinary "
          "ones that waited longer", "[client]") {
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  TestServer server([&](const Seen& seen, int) {
    if (seen.target == "/gate") {
      entered.set_value();
      released.wait();  // the one connection stays busy until every other request waits for it
    }
    return Reply().body("{}");
  });
  ClientHarness h;
  ClientOptions options = fastRetries(0);
  options.max_connections = 1;
  h.start(configFor(server), options);
  auto gate = h.spawn(h.client->call(get("/gate")));
  entered.get_future().wait();
  std::vector<std::future<absl::StatusOr<std::string>>> results;
  for (int i = 0; i < 4; ++i) results.push_back(h.spawn(h.client->call(get("/ordinary"))));
  Request urgent = get("/urgent");
  urgent.urgent = true;
  results.push_back(h.spawn(h.client->call(urgent)));
  // The io_context runs on one thread, FIFO: once a handler posted after the requests has hopped
  // more times than any of them needs to reach the pool, all of them wait there.
  h.await([&]() -> asio::awaitable<void> {
    for (int i = 0; i < 32; ++i) co_await asio::post(h.io_, asio::use_awaitable);
  }());
  release.set_value();
  REQUIRE(gate.get().ok());
  for (auto& r : results) CHECK(r.get().ok());
  const std::vector<Seen> seen = server.requests();
  REQUIRE(seen.size() == 6);
  CHECK(seen[0].target == "/gate");
  CHECK(seen[1].target == "/urgent");
  CHECK(server.connections() == 1);
}

TEST_CASE("a kept-alive connection the server dropped is replaced transparently", "[client]") {
  SECTION("closed while idle") {
    TestServer server([](const Seen&, int) { return Reply().body("{}").closeAfter(); });
    ClientHarness h;
    h.start(configFor(server), fastRetries(0));
    REQUIRE(h.client->callSync(get("/a")).ok());
    auto second = h.client->callSync(get("/b"));
    INFO(second.status().ToString());
    CHECK(second.ok());
    CHECK(server.connections() == 2);
  }
  SECTION("closed when the next request arrives: a GET is replayed, a POST is not") {
    TestServer server([](const Seen&, int nth) { return Reply().body("{}").drop(nth > 1); });
    ClientHarness h;
    h.start(configFor(server), fastRetries(0));
    REQUIRE(h.client->callSync(get("/a")).ok());
    auto second = h.client->callSync(get("/b"));
    INFO(second.status().ToString());
    CHECK(second.ok());
    Request post = get("/c");
    post.verb = Verb::kPost;
    post.body = "{}";
    auto third = h.client->callSync(post);
    CHECK_FALSE(third.ok());
    CHECK(third.status().code() == absl::StatusCode::kUnavailable);
  }
}

TEST_CASE("a request that outlives its timeout fails with a deadline", "[client]") {
  TestServer server([](const Seen&, int) {
    return Reply().chunked({"{"}).holdOpen();  // never completes
  });
  ClientHarness h;
  h.start(configFor(server), fastRetries(0));
  Request r = get("/slow");
  r.timeout = 200ms;
  auto response = h.client->sendSync(r);
  REQUIRE_FALSE(response.ok());
  CHECK(response.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(response.status().message(), "timed out"));
}

TEST_CASE("stream() reassembles lines split across chunks and encodes the query", "[client]") {
  TestServer server([](const Seen&, int) {
    return Reply().chunked({R"({"type":"ADDED",)", R"("object":{"a":1}})", "\n{\"type\":\"MOD",
                              "IFIED\"}\n", "\n", "{\"type\":\"DELETED\"}\r\n"});
  });
  ClientHarness h;
  h.start(configFor(server));
  Request r = get("/api/v1/pods");
  r.query = {{"watch", "1"}, {"labelSelector", "app=x,env!=prod"}, {"timeoutSeconds", "30"}};
  std::vector<std::string> lines;
  absl::Status status = h.await(h.client->stream(r, [&](std::string_view line) {
    lines.emplace_back(line);
    return absl::OkStatus();
  }));
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(lines == std::vector<std::string>{R"({"type":"ADDED","object":{"a":1}})",
                                          R"({"type":"MODIFIED"})", R"({"type":"DELETED"})"});
  CHECK(server.requests().at(0).target ==
        "/api/v1/pods?watch=1&labelSelector=app%3Dx%2Cenv%21%3Dprod&timeoutSeconds=30");
}

TEST_CASE("stream() returns the error of on_line and API errors", "[client]") {
  SECTION("on_line error stops the stream") {
    TestServer server([](const Seen&, int) { return Reply().chunked({"a\nb\nc\n"}); });
    ClientHarness h;
    h.start(configFor(server));
    int calls = 0;
    absl::Status status = h.await(h.client->stream(get("/w"), [&](std::string_view line) {
      ++calls;
      return line == "b" ? absl::DataLossError("bad event") : absl::OkStatus();
    }));
    CHECK(status == absl::DataLossError("bad event"));
    CHECK(calls == 2);
  }
  SECTION("a 410 response is Gone") {
    TestServer server([](const Seen&, int) {
      return Reply().status(410).body(
          R"x({"kind":"Status","status":"Failure","message":"too old resource version: 1 (2)",)x"
          R"x("reason":"Expired","code":410})x");
    });
    ClientHarness h;
    h.start(configFor(server));
    absl::Status status = h.await(
        h.client->stream(get("/w"), [](std::string_view) { return absl::OkStatus(); }));
    INFO(status.ToString());
    CHECK(isGone(status));
    CHECK(absl::StrContains(status.message(), "too old resource version"));
  }
}

TEST_CASE("shutdown() cancels an open stream", "[client]") {
  TestServer server([](const Seen&, int) {
    return Reply().chunked({"{\"type\":\"ADDED\"}\n"}).holdOpen();
  });
  ClientHarness h;
  h.start(configFor(server));
  std::promise<void> first_line;
  auto done = h.spawn(h.client->stream(get("/w"), [&](std::string_view) {
    first_line.set_value();
    return absl::OkStatus();
  }));
  first_line.get_future().wait();
  h.client->shutdown();
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK(absl::IsCancelled(done.get()));
  CHECK(absl::IsCancelled(h.client->sendSync(get("/after")).status()));
}

TEST_CASE("verb helpers send the expected requests", "[client]") {
  TestServer server([](const Seen&, int) { return Reply().status(201).body("{}"); });
  ClientHarness h;
  h.start(configFor(server));
  Client& c = *h.client;
  REQUIRE(h.await(c.bind("ns1", "p0", "uid-1", "node-7")).ok());
  REQUIRE(h.await(c.remove(resources::kPods, "ns1", "p0", "uid-1", "42")).ok());
  REQUIRE(h.await(c.remove(resources::kPods, "ns1", "p1")).ok());
  REQUIRE(h.await(c.patch(resources::kPodGroups, "ns1", "g", PatchType::kMerge, "{}", "status"))
              .ok());
  REQUIRE(h.await(c.list(resources::kNodes, "", "", "spec.unschedulable=false", 500, "tok", ""))
              .ok());
  REQUIRE(h.await(c.create(resources::kEvents, "ns1", "{}")).ok());
  REQUIRE(h.await(c.replace(resources::kLeases, "kube-system", "muster", "{}")).ok());
  auto seen = server.requests();
  REQUIRE(seen.size() == 7);

  CHECK(seen[0].method == "POST");
  CHECK(seen[0].target == "/api/v1/namespaces/ns1/pods/p0/binding");
  rapidjson::Document binding;
  binding.Parse(seen[0].body.c_str());
  REQUIRE(binding.IsObject());
  CHECK(std::string(binding["kind"].GetString()) == "Binding");
  CHECK(std::string(binding["metadata"]["name"].GetString()) == "p0");
  CHECK(std::string(binding["metadata"]["namespace"].GetString()) == "ns1");
  CHECK(std::string(binding["metadata"]["uid"].GetString()) == "uid-1");
  CHECK(std::string(binding["target"]["kind"].GetString()) == "Node");
  CHECK(std::string(binding["target"]["name"].GetString()) == "node-7");

  CHECK(seen[1].method == "DELETE");
  CHECK(seen[1].body ==
        R"({"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"uid-1",)"
        R"("resourceVersion":"42"}})");
  CHECK(seen[2].body.empty());
  CHECK(seen[3].method == "PATCH");
  CHECK(seen[3].target == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns1/podgroups/g/status");
  CHECK(seen[3].content_type == "application/merge-patch+json");
  CHECK(seen[4].target ==
        "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse&limit=500&continue=tok");
  CHECK(seen[5].target == "/api/v1/namespaces/ns1/events");
  CHECK(seen[6].method == "PUT");
  CHECK(seen[6].target == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/muster");
}

TEST_CASE("the sync calls refuse to run on the client's own thread", "[client]") {
  TestServer server([](const Seen&, int) { return Reply(); });
  ClientHarness h;
  h.start(configFor(server));
  std::promise<absl::Status> result;
  asio::post(h.io_, [&] { result.set_value(h.client->sendSync(get("/x")).status()); });
  CHECK(result.get_future().get().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("bad server URLs are refused at creation", "[client]") {
  asio::io_context io;
  for (const char* server : {"http://127.0.0.1:8080", "127.0.0.1:6443", "https://", "https://h:x"}) {
    RestConfig config;
    config.server = server;
    INFO(server);
    CHECK_FALSE(Client::create(io.get_executor(), config).ok());
  }
  RestConfig v6;
  v6.server = "https://[::1]:6443/prefix/";
  CHECK(Client::create(io.get_executor(), v6).ok());
}

// ---------------------------------------------------------------------------------------------
// Pure helpers

TEST_CASE("resource paths follow the API's layout", "[client]") {
  CHECK(resources::kPods.collectionPath() == "/api/v1/pods");
  CHECK(resources::kPods.collectionPath("ns") == "/api/v1/namespaces/ns/pods");
  CHECK(resources::kPods.objectPath("ns", "p", "binding") ==
        "/api/v1/namespaces/ns/pods/p/binding");
  CHECK(resources::kNodes.objectPath("ignored", "n1") == "/api/v1/nodes/n1");
  CHECK(resources::kNamespaces.objectPath("", "default") == "/api/v1/namespaces/default");
  CHECK(resources::kParallelJobs.collectionPath("team") ==
        "/apis/preferred.jp/v1alpha1/namespaces/team/paralleljobs");
  CHECK(resources::kLeases.basePath() == "/apis/coordination.k8s.io/v1");
  CHECK(contentType(PatchType::kStrategicMerge) == "application/strategic-merge-patch+json");
}

TEST_CASE("apiError maps reasons and handles non-JSON bodies", "[client]") {
  const absl::Status exists = apiError(
      409, R"({"kind":"Status","message":"pods \"p\" already exists","reason":"AlreadyExists","code":409})",
      "create");
  CHECK(isAlreadyExists(exists));
  CHECK_FALSE(isConflict(exists));
  CHECK(exists.code() == absl::StatusCode::kAlreadyExists);

  const absl::Status conflict =
      apiError(409, R"({"kind":"Status","message":"the object has been modified","reason":"Conflict","code":409})",
               "update");
  CHECK(isConflict(conflict));
  CHECK(conflict.code() == absl::StatusCode::kAborted);

  const absl::Status text = apiError(404, "404 page not found\n", "GET /apis/x");
  CHECK(isNotFound(text));
  CHECK(text.message() == "GET /apis/x: 404 page not found (404 NotFound)");

  const absl::Status empty = apiError(403, "", "list");
  CHECK(empty.code() == absl::StatusCode::kPermissionDenied);
  CHECK(empty.message() == "list: Forbidden (403 Forbidden)");

  // A watch ERROR event's Status arrives with HTTP 200.
  const absl::Status expired = apiError(
      200, R"({"kind":"Status","message":"too old","reason":"Expired","code":410})", "watch");
  CHECK(isGone(expired));
  CHECK(httpStatusOf(expired) == 410);

  CHECK(httpStatusOf(absl::InternalError("x")) == 0);
  CHECK(reasonOf(absl::OkStatus()).empty());
}

TEST_CASE("LineSplitter splits records across feeds", "[client][line-splitter]") {
  LineSplitter splitter;
  std::vector<std::string> lines;
  auto collect = [&](std::string_view line) {
    lines.emplace_back(line);
    return absl::OkStatus();
  };
  REQUIRE(splitter.feed("ab", collect).ok());
  CHECK(lines.empty());
  CHECK(splitter.pending() == 2);
  REQUIRE(splitter.feed("c\nde", collect).ok());
  CHECK(lines == std::vector<std::string>{"abc"});
  REQUIRE(splitter.feed("f\r\n\n\r\ng\nh", collect).ok());
  CHECK(lines == std::vector<std::string>{"abc", "def", "g"});
  CHECK(splitter.pending() == 1);
  REQUIRE(splitter.feed("", collect).ok());
  REQUIRE(splitter.feed("\n", collect).ok());
  CHECK(lines.back() == "h");
  CHECK(splitter.pending() == 0);
}

TEST_CASE("LineSplitter stops at the first error and keeps the rest", "[client][line-splitter]") {
  LineSplitter splitter;
  std::vector<std::string> lines;
  absl::Status status = splitter.feed("one\ntwo\nthree\nfo", [&](std::string_view line) {
    lines.emplace_back(line);
    return line == "two" ? absl::InvalidArgumentError("stop") : absl::OkStatus();
  });
  CHECK(status == absl::InvalidArgumentError("stop"));
  CHECK(lines == std::vector<std::string>{"one", "two"});
  CHECK(splitter.pending() == std::string("three\nfo").size());
}

TEST_CASE("LineSplitter handles a record split byte by byte", "[client][line-splitter]") {
  const std::string input = "{\"type\":\"ADDED\"}\n{\"type\":\"DELETED\"}\n";
  LineSplitter splitter;
  std::vector<std::string> lines;
  for (char c : input) {
    REQUIRE(splitter
                .feed(std::string_view(&c, 1),
                      [&](std::string_view line) {
                        lines.emplace_back(line);
                        return absl::OkStatus();
                      })
                .ok());
  }
  CHECK(lines == std::vector<std::string>{R"({"type":"ADDED"})", R"({"type":"DELETED"})"});
}

TEST_CASE("LineSplitter refuses a record longer than its limit however it is chunked",
          "[client][line-splitter][limits]") {
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{100}}) {
    LineSplitter splitter(8);
    std::vector<std::string> lines;
    const std::string input = "12345678\n123456789\nnever\n";
    absl::Status status;
    for (size_t at = 0; at < input.size() && status.ok(); at += chunk) {
      status = splitter.feed(std::string_view(input).substr(at, chunk), [&](std::string_view line) {
        lines.emplace_back(line);
        return absl::OkStatus();
      });
    }
    CHECK(status.code() == absl::StatusCode::kResourceExhausted);
    CHECK(absl::StrContains(status.message(), "watch event longer than the 8 bytes Muster accepts"));
    CHECK(lines == std::vector<std::string>{"12345678"});
    CHECK(splitter.pending() == 0);
    // The stream cannot be trusted after that: later feeds fail the same way.
    CHECK(splitter.feed("ok\n", [](std::string_view) { return absl::OkStatus(); }).code() ==
          absl::StatusCode::kResourceExhausted);
  }
}

TEST_CASE("LineSplitter never buffers more than its limit of an unterminated record",
          "[client][line-splitter][limits]") {
  LineSplitter splitter(1024);
  absl::Status status;
  size_t fed = 0;
  // A server that sends no newline at all: without a bound this grew without end.
  while (status.ok() && fed < 1 << 20) {
    status = splitter.feed(std::string(100, 'x'), [](std::string_view) { return absl::OkStatus(); });
    fed += 100;
    CHECK(splitter.pending() <= 1024);
  }
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(fed == 1100);
  CHECK(kMaxWatchEventBytes == 16u << 20);
}

TEST_CASE("an error body that is not a small Status object is shown as an excerpt", "[client][limits]") {
  // A million levels: RapidJSON's recursive parser overflowed the stack on this.
  const absl::Status deep = apiError(502, std::string(1000000, '['), "GET /api/v1/pods");
  CHECK(deep.code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(deep.message(), "GET /api/v1/pods: [[[["));
  CHECK(absl::StrContains(deep.message(), "..."));
  CHECK(httpStatusOf(deep) == 502);
}

}  // namespace
}  // namespace muster::proto
