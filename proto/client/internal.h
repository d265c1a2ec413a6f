#pragma once

// The parts of proto::Client (proto/client.h), one responsibility each, behind the public
// interface. Nothing outside proto/client*.cc includes this.
//
//   paths.cc            URL encoding, Resource paths, the API server URL
//   api_error.cc        non-2xx answers as absl::Status (reason, HTTP code)
//   rate_limiter.cc     the client-side token bucket (qps, burst)
//   retry.cc            which failures are retried, and the backoff between tries
//   auth.cc             TLS (server verification, client certificates) and bearer tokens
//   connection_pool.cc  TCP+TLS connections: connect, keep-alive pool, shutdown
//   stream.cc           watches: a streaming GET on its own connection, split into lines
//   client.cc           composition: State, send() with retries, the public verbs
//
// Concurrency: every request, stream and all pool/limiter/token state run on one strand of the
// executor given to Client::create() (State::strand). Public coroutines only copy the shared
// State and co_spawn the real work onto that strand, so callers may await them from any
// executor. Sockets and timers are created on the strand, so Beast's internal timeout handlers
// are serialised with the I/O too. No exception is thrown out of a handler: every asynchronous
// call uses redirect_error.

#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/client.h"

namespace muster::proto::client_internal {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Strand = asio::strand<asio::any_io_executor>;
using SslStream = ssl::stream<beast::tcp_stream>;

// --- paths.cc ---

// Query component: everything but RFC 3986 unreserved characters is percent-encoded.
std::string encodeQuery(std::string_view s);
// Path segment: also keeps the sub-delimiters and ':' / '@' (RBAC names like "system:node").
std::string encodeSegment(std::string_view s);

struct ServerUrl {
  std::string host;  // without brackets
  std::string port;
  std::string prefix;  // path prefix without trailing '/', may be empty
  std::string host_header;
};
// https:// only; no user information; IPv6 in brackets.
absl::StatusOr<ServerUrl> parseServer(std::string_view server);
bool isIpAddress(const std::string& host);

std::string_view verbName(Verb verb);
http::verb beastVerb(Verb verb);
bool idempotent(Verb verb);
std::string describe(const Request& r);  // "GET /api/v1/pods"

// --- rate_limiter.cc ---

// A token bucket with reservations: a request takes a token now, possibly driving the bucket
// negative, and waits until that token would have been refilled. FIFO and no polling. qps <= 0:
// no limit.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst, Clock::time_point now);
  bool limited() const { return qps_ > 0; }
  // How long the caller must wait before sending (zero when a token is there).
  Clock::duration reserve(Clock::time_point now);

 private:
  double size() const;
  double qps_;
  int burst_;
  double tokens_;
  Clock::time_point refilled_;
};

// --- retry.cc ---

class RetryPolicy {
 public:
  RetryPolicy(const ClientOptions& options) : options_(options) {}
  // Exponential backoff (initial × 2^attempt, capped at max), jittered to [50%, 100%].
  Clock::duration backoff(int attempt);
  // 429, and 5xx except 501.
  static bool retryableStatus(int status);
  // Whether to try again after HTTP `status`. 503 and 429 mean the server did not process the
  // request; other 5xx may have, so a POST is retried on them only when the server asks for it
  // with Retry-After.
  bool retryStatus(Verb verb, int status, bool has_retry_after, int attempt) const;
  // Whether to try again after a transport failure (never for TLS verification failures; a POST
  // only when it was never written).
  bool retryTransport(Verb verb, bool retryable, bool written, int attempt) const;
  // A kept-alive connection the server closed under us: worth one more try on a fresh one.
  static bool staleConnection(Verb verb, bool reused, bool got_response_bytes, bool written);
  static constexpr int kMaxStaleRetries = 3;

 private:
  const ClientOptions& options_;
  absl::BitGen rng_;
};

// --- auth.cc ---

// Sets up `tls` from the RestConfig: protocol versions, server verification (the CA, or the
// system's), the client certificate and key. Fills the name the server's certificate must match.
absl::Status configureTls(ssl::context& tls, const RestConfig& config, const ServerUrl& url,
                          std::string* verify_name, bool* verify_ip);
// Makes `ssl` check the server certificate against `verify_name` (unless verification is off)
// and send SNI. False (and *error) when the name cannot be used.
bool prepareVerification(SSL* ssl, const RestConfig& config, const std::string& verify_name,
                         bool verify_ip, std::string* error);
// OpenSSL's queued errors as one line (and clears them).
std::string opensslErrors();

// The bearer token: the kubeconfig's, or re-read from a token file (a projected service-account
// token) when the file changed or a minute passed.
class BearerToken {
 public:
  explicit BearerToken(const RestConfig& config) : config_(config), token_(config.bearer_token) {}
  const std::string& current(Clock::time_point now);

 private:
  const RestConfig& config_;
  std::string token_;
  struct timespec mtime_ {};
  off_t size_ = -1;
  Clock::time_point read_{};
};

// --- connection_pool.cc ---

class ConnectionPool;

struct Connection {
  Connection(ConnectionPool& pool, Strand& strand, ssl::context& tls);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream); }
  void close();
  // True when an idle keep-alive connection can carry another request: the peer has not closed
  // it (no EOF) and sent nothing unexpected (a TLS close_notify, for one).
  bool reusable();

  ConnectionPool& pool;
  SslStream stream;
  beast::flat_buffer buffer;
  bool reused = false;
  Clock::time_point idle_since;
};
using ConnectionPtr = std::unique_ptr<Connection>;

// Keep-alive connections to one API server, at most `max_connections` pooled (streams have their
// own, outside that count). Strand-only.
class ConnectionPool {
 public:
  ConnectionPool(Strand& strand, const RestConfig& config, const ServerUrl& url, ssl::context& tls,
                 std::string verify_name, bool verify_ip, int max_connections)
      : strand_(strand), config_(config), url_(url), tls_(tls), verify_name_(std::move(verify_name)),
        verify_ip_(verify_ip), max_(std::max(1, max_connections)) {}

  // A new TCP+TLS connection, the server verified. *retryable false for verification failures.
  asio::awaitable<absl::StatusOr<ConnectionPtr>> connect(std::chrono::milliseconds timeout,
                                                         bool* retryable);
  // A pooled connection: an idle one that is still open, or a new one within the limit (waiting
  // for one to come back otherwise; `urgent` waiters are served before all others, each kind in
  // the order it came).
  asio::awaitable<absl::StatusOr<ConnectionPtr>> acquire(std::chrono::milliseconds timeout,
                                                         bool* retryable, bool urgent = false);
  // Back into the pool (keep) or closed.
  void release(ConnectionPtr conn, bool keep);
  // Closes every connection (pooled and streams); later acquires fail with Cancelled.
  void shutdown();
  bool closed() const { return closed_; }

 private:
  friend struct Connection;
  static constexpr auto kIdleLimit = std::chrono::seconds(90);
  void wakeWaiter();

  Strand& strand_;
  const RestConfig& config_;
  const ServerUrl& url_;
  ssl::context& tls_;
  const std::string verify_name_;
  const bool verify_ip_;
  const int max_;
  bool closed_ = false;
  std::set<Connection*> live_;  // every open connection: idle, busy and streams
  std::vector<ConnectionPtr> idle_;
  int pooled_ = 0;  // idle + busy pooled connections
  std::list<asio::steady_timer*> waiters_;
  std::list<asio::steady_timer*> urgent_waiters_;
};

// --- client.cc / stream.cc ---

struct State : std::enable_shared_from_this<State> {
  State(asio::any_io_executor ex, RestConfig cfg, ClientOptions opts, ServerUrl u);
  absl::Status setup();

  asio::any_io_executor executor;
  Strand strand;
  const RestConfig config;
  const ClientOptions options;
  const ServerUrl url;
  ssl::context tls;

  // --- strand-only state below ---
  bool closed = false;
  std::unique_ptr<ConnectionPool> pool;
  std::set<asio::steady_timer*> timers;  // every pending sleep, cancelled on shutdown
  TokenBucket bucket;
  BearerToken token;
  RetryPolicy retry;

  std::chrono::milliseconds timeoutFor(const Request& r) const {
    return r.timeout.value_or(options.request_timeout);
  }
  // Sleeps on the strand; false when the client was shut down meanwhile.
  asio::awaitable<bool> sleep(Clock::duration d);
  asio::awaitable<bool> rateLimit();
  http::request<http::string_body> buildRequest(const Request& r);
  void authorize(http::request<http::string_body>& req);

  asio::awaitable<absl::StatusOr<Response>> send(Request r);  // client.cc
  asio::awaitable<absl::Status> stream(Request r,
                                       std::function<absl::Status(std::string_view line)> on_line,
                                       std::shared_ptr<StreamCanceller> canceller);  // stream.cc
  void shutdown();
};

}  // namespace muster::proto::client_internal
