#include "proto/http_server.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/coroutine.h"
#include "proto/log.h"

namespace muster::proto {
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::any_io_executor ex, std::map<std::string, HttpHandler> r)
      : strand(asio::make_strand(ex)), acceptor(strand), routes(std::move(r)) {}

  asio::strand<asio::any_io_executor> strand;
  tcp::acceptor acceptor;
  std::map<std::string, HttpHandler> routes;

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      stream.expires_after(std::chrono::seconds(30));
      co_await http::async_read(stream, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      std::string target(req.target());
      if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
      HttpReply reply;
      auto it = routes.find(target);
      if (req.method() != http::verb::get && req.method() != http::verb::head) {
        reply = {405, "text/plain; charset=utf-8", "method not allowed\n"};
      } else if (it == routes.end()) {
        reply = {404, "text/plain; charset=utf-8", "not found\n"};
      } else {
        reply = it->second();
      }
      http::response<http::string_body> res{static_cast<http::status>(reply.status), req.version()};
      res.set(http::field::content_type, reply.content_type);
      res.keep_alive(req.keep_alive());
      res.body() = std::move(reply.body);
      res.prepare_payload();
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || !res.keep_alive()) break;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  asio::awaitable<void> acceptLoop() {
    auto self = shared_from_this();
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) continue;
      asio::co_spawn(strand, serve(std::move(socket)), dieOnException("HTTP connection"));
    }
  }
};

HttpServer::HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { stop(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(
    asio::any_io_executor executor, const std::string& address,
    std::map<std::string, HttpHandler> routes) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\": want host:port"));
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\": bad port"));
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\": bad host"));
  auto impl = std::make_shared<Impl>(executor, std::move(routes));
  tcp::endpoint endpoint(ip, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("listen on ", address, ": ", ec.message()));
  asio::co_spawn(impl->strand, impl->acceptLoop(), dieOnException("HTTP accept loop"));
  return std::unique_ptr<HttpServer>(new HttpServer(impl));
}

uint16_t HttpServer::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpServer::stop() {
  if (!impl_) return;
  asio::post(impl_->strand, [impl = impl_] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
  });
}

}  // namespace muster::proto
