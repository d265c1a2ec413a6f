// Watches: a streaming GET on a connection of its own (outside the pool), its body split into
// newline-terminated records as they arrive, across TCP and HTTP chunk boundaries.
#include <algorithm>
#include <limits>
#include <vector>

#include "proto/client/internal.h"
#include "proto/strings.h"

namespace muster::proto {

absl::Status LineSplitter::tooLong(size_t size) {
  overflow_ = absl::ResourceExhaustedError(
      strCat("watch event longer than the ", std::to_string(max_record_),
             " bytes Muster accepts (at least ", std::to_string(size), ")"));
  buffer_.clear();
  return overflow_;
}

absl::Status LineSplitter::feed(std::string_view bytes,
                                const std::function<absl::Status(std::string_view)>& on_line) {
  if (!overflow_.ok()) return overflow_;
  size_t start = 0;
  while (start <= bytes.size()) {
    const size_t nl = bytes.find('\n', start);
    // The record's length so far: what is buffered plus what this chunk adds to it. Checked
    // before buffering, so the limit holds however the stream is chunked.
    const size_t piece = (nl == std::string_view::npos ? bytes.size() : nl) - start;
    if (buffer_.size() + piece > max_record_) return tooLong(buffer_.size() + piece);
    if (nl == std::string_view::npos) {
      buffer_.append(bytes.substr(start));
      return absl::OkStatus();
    }
    std::string_view line;
    if (buffer_.empty()) {
      line = bytes.substr(start, nl - start);
    } else {
      buffer_.append(bytes.substr(start, nl - start));
      line = buffer_;
    }
    start = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::Status status = line.empty() ? absl::OkStatus() : on_line(line);
    buffer_.clear();
    if (!status.ok()) {
      buffer_.append(bytes.substr(start, std::min(bytes.size() - start, max_record_)));
      return status;
    }
  }
  return absl::OkStatus();
}

namespace client_internal {

asio::awaitable<absl::Status> State::stream(
    Request r, std::function<absl::Status(std::string_view line)> on_line,
    std::shared_ptr<StreamCanceller> canceller) {
  auto req = buildRequest(r);
  const std::string what = describe(r);
  if (!co_await rateLimit()) co_return absl::CancelledError("client shut down");
  authorize(req);
  bool retryable = true;
  auto connected = co_await pool->connect(options.request_timeout, &retryable);
  if (!connected.ok()) {
    co_return absl::Status(connected.status().code(),
                           strCat(what, ": ", connected.status().message()));
  }
  ConnectionPtr conn = std::move(*connected);
  if (closed) co_return absl::CancelledError("client shut down");
  // cancel() closes this connection from the strand, while it still belongs to this stream.
  auto alive = std::make_shared<bool>(true);
  struct Detach {
    std::shared_ptr<StreamCanceller> c;
    std::shared_ptr<bool> alive;
    ~Detach() {
      *alive = false;
      if (c) c->detach();
    }
  } detach{canceller, alive};
  if (canceller) {
    canceller->attach([strand = this->strand, alive, raw = conn.get()] {
      asio::post(strand, [alive, raw] {
        if (*alive) raw->close();
      });
    });
    if (canceller->cancelled()) co_return absl::CancelledError(strCat(what, ": cancelled"));
  }
  if (r.timeout) {
    conn->tcp().expires_after(*r.timeout);
  } else {
    conn->tcp().expires_after(options.request_timeout);  // until the headers are in
  }
  boost::system::error_code ec;
  auto transportError = [&](std::string_view step) {
    if (closed) return absl::CancelledError(strCat(what, ": client shut down"));
    if (canceller && canceller->cancelled()) return absl::CancelledError(strCat(what, ": cancelled"));
    if (ec == beast::error::timeout) {
      return absl::DeadlineExceededError(strCat(what, ": timed out ", step));
    }
    return absl::UnavailableError(strCat(what, ": ", step, ": ", ec.message()));
  };
  co_await http::async_write(conn->stream, req, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return transportError("sending the request");
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  parser.header_limit(1 << 20);
  co_await http::async_read_header(conn->stream, conn->buffer, parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return transportError("reading the response header");
  if (!r.timeout) conn->tcp().expires_never();
  const int status = static_cast<int>(parser.get().result_int());
  const bool ok_status = status >= 200 && status < 300;

  std::vector<char> buf(64 * 1024);
  std::string error_body;
  LineSplitter splitter;
  while (!parser.is_done()) {
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    co_await http::async_read_some(conn->stream, conn->buffer, parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = buf.size() - parser.get().body().size;
    if (n > 0) {
      const std::string_view bytes(buf.data(), n);
      if (!ok_status) {
        if (error_body.size() < (1 << 20)) error_body.append(bytes);
      } else if (absl::Status s = splitter.feed(bytes, on_line); !s.ok()) {
        co_return s;  // the connection closes when `conn` goes
      }
    }
    if (ec) {
      if (!ok_status) break;
      co_return transportError("reading the stream");
    }
  }
  if (!ok_status) co_return apiError(status, error_body, what);
  // A last record without its newline still counts when the stream ended cleanly.
  if (splitter.pending() > 0) {
    if (absl::Status s = splitter.feed("\n", on_line); !s.ok()) co_return s;
  }
  co_return absl::OkStatus();
}


}  // namespace client_internal
}  // namespace muster::proto
