// TCP+TLS connections to the API server: opened and verified here, kept alive in a pool of at
// most ClientOptions::max_connections, closed all at once on shutdown.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

#include "proto/client/internal.h"
#include "proto/strings.h"

namespace muster::proto::client_internal {

Connection::Connection(ConnectionPool& p, Strand& strand, ssl::context& tls)
    : pool(p), stream(strand, tls) {
  pool.live_.insert(this);
}

Connection::~Connection() { pool.live_.erase(this); }

void Connection::close() {
  boost::system::error_code ignored;
  tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  tcp().close();
}

bool Connection::reusable() {
  if (buffer.size() != 0 || !tcp().socket().is_open()) return false;
  char byte;
  const ssize_t n = ::recv(tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

asio::awaitable<absl::StatusOr<ConnectionPtr>> ConnectionPool::connect(
    std::chrono::milliseconds timeout, bool* retryable) {
  *retryable = true;
  auto conn = std::make_unique<Connection>(*this, strand_, tls_);
  boost::system::error_code ec;
  tcp::resolver resolver(strand_);
  auto endpoints = co_await resolver.async_resolve(url_.host, url_.port,
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return absl::UnavailableError(strCat("cannot resolve ", url_.host, ": ", ec.message()));
  if (closed_) co_return absl::CancelledError("client shut down");
  conn->tcp().expires_after(timeout);
  co_await conn->tcp().async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    co_return absl::UnavailableError(
        strCat("cannot connect to ", url_.host_header, ": ", ec.message()));
  }
  auto& sock = conn->tcp().socket();
  sock.set_option(tcp::no_delay(true), ec);
  sock.set_option(asio::socket_base::keep_alive(true), ec);
  const int idle_s = 30, interval_s = 10, count = 3;
  ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);

  SSL* native = conn->stream.native_handle();
  std::string error;
  if (!prepareVerification(native, config_, verify_name_, verify_ip_, &error)) {
    *retryable = false;
    co_return absl::InvalidArgumentError(error);
  }
  conn->tcp().expires_after(timeout);
  co_await conn->stream.async_handshake(ssl::stream_base::client,
                                        asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    const long verify = SSL_get_verify_result(native);
    std::string detail = ec.message();
    if (verify != X509_V_OK) {
      *retryable = false;
      detail = strCat("server certificate not trusted: ", X509_verify_cert_error_string(verify));
    }
    const std::string queued = opensslErrors();
    if (!queued.empty() && verify == X509_V_OK) strAppend(&detail, " (", queued, ")");
    co_return absl::UnavailableError(
        strCat("TLS handshake with ", url_.host_header, " failed: ", detail));
  }
  conn->tcp().expires_never();
  co_return std::move(conn);
}

asio::awaitable<absl::StatusOr<ConnectionPtr>> ConnectionPool::acquire(
    std::chrono::milliseconds timeout, bool* retryable, bool urgent) {
  *retryable = true;
  for (;;) {
    if (closed_) co_return absl::CancelledError("client shut down");
    while (!idle_.empty()) {
      ConnectionPtr conn = std::move(idle_.back());
      idle_.pop_back();
      if (Clock::now() - conn->idle_since < kIdleLimit && conn->reusable()) {
        conn->reused = true;
        co_return std::move(conn);
      }
      conn->close();
      --pooled_;
    }
    if (pooled_ < max_) {
      ++pooled_;
      auto conn = co_await connect(timeout, retryable);
      if (!conn.ok()) {
        --pooled_;
        wakeWaiter();
      }
      co_return conn;
    }
    asio::steady_timer waiter(strand_, Clock::time_point::max());
    auto& queue = urgent ? urgent_waiters_ : waiters_;
    auto it = queue.insert(queue.end(), &waiter);
    boost::system::error_code ec;
    co_await waiter.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    queue.erase(it);
  }
}

// Wakes the longest-waiting urgent acquire(), else the longest-waiting other; its entry is
// nulled (woken) and erased by the waiter.
void ConnectionPool::wakeWaiter() {
  for (auto* queue : {&urgent_waiters_, &waiters_}) {
    for (asio::steady_timer*& waiter : *queue) {
      if (waiter != nullptr) {
        waiter->cancel();
        waiter = nullptr;
        return;
      }
    }
  }
}

void ConnectionPool::release(ConnectionPtr conn, bool keep) {
  if (keep && !closed_) {
    conn->idle_since = Clock::now();
    idle_.push_back(std::move(conn));
  } else {
    conn->close();
    --pooled_;
  }
  wakeWaiter();
}

void ConnectionPool::shutdown() {
  closed_ = true;
  for (Connection* c : live_) c->close();
  idle_.clear();
  for (auto* queue : {&urgent_waiters_, &waiters_})
    for (asio::steady_timer* w : *queue)
      if (w != nullptr) w->cancel();
}

}  // namespace muster::proto::client_internal
