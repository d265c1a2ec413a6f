#pragma once

// A minimal HTTP/1.1 server for operational endpoints (/healthz, /readyz, /metrics). Plain HTTP
// bound to a configurable address (loopback by default); not for user traffic.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/asio.h"

namespace muster::proto {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpReply()>;

class HttpServer {
 public:
  // Binds "host:port" (port 0 picks a free one). Handlers run on the server's strand.
  static absl::StatusOr<std::unique_ptr<HttpServer>> start(asio::any_io_executor executor,
                                                           const std::string& address,
                                                           std::map<std::string, HttpHandler> routes);
  ~HttpServer();
  uint16_t port() const;
  void stop();

 private:
  struct Impl;
  explicit HttpServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace muster::proto
