#include "proto/client.h"

#include <charconv>
#include <exception>
#include <future>
#include <limits>

#include "proto/client/internal.h"
#include "proto/log.h"
#include "proto/strings.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

// The composition of the client's parts (proto/client/internal.h says which file holds what):
// State, send() with its retry loop, and the public verbs.

namespace muster::proto {

namespace client_internal {
namespace {

struct Attempt {
  boost::system::error_code ec;
  std::string failure;  // what failed, for the error message
  bool written = false;
  bool got_response_bytes = false;
  bool reused = false;
  bool retryable_transport = true;  // false for TLS verification failures
  Response response;
  std::optional<std::chrono::seconds> retry_after;
};

// One exchange on a pooled connection.
asio::awaitable<Attempt> exchange(State& s, http::request<http::string_body>& req,
                                  std::chrono::milliseconds timeout, bool urgent) {
  Attempt a;
  bool retryable = true;
  auto acquired = co_await s.pool->acquire(timeout, &retryable, urgent);
  if (!acquired.ok()) {
    a.ec = asio::error::not_connected;
    a.failure = std::string(acquired.status().message());
    a.retryable_transport = retryable && !absl::IsCancelled(acquired.status());
    co_return a;
  }
  ConnectionPtr conn = std::move(*acquired);
  a.reused = conn->reused;
  conn->tcp().expires_after(timeout);
  co_await http::async_write(conn->stream, req, asio::redirect_error(asio::use_awaitable, a.ec));
  if (a.ec) {
    a.failure = strCat("sending the request failed: ", a.ec.message());
    s.pool->release(std::move(conn), false);
    co_return a;
  }
  a.written = true;
  http::response_parser<http::string_body> parser;
  parser.body_limit(s.options.max_response_bytes);
  parser.header_limit(1 << 20);
  co_await http::async_read(conn->stream, conn->buffer, parser,
                            asio::redirect_error(asio::use_awaitable, a.ec));
  a.got_response_bytes = parser.got_some();
  if (a.ec == http::error::body_limit) {
    a.failure = strCat("the response is larger than the ", s.options.max_response_bytes,
                       " bytes Muster accepts");
    a.retryable_transport = false;
    s.pool->release(std::move(conn), false);
    co_return a;
  }
  if (a.ec) {
    a.failure = a.ec == beast::error::timeout
                    ? std::string("timed out waiting for the response")
                    : strCat("reading the response failed: ", a.ec.message());
    s.pool->release(std::move(conn), false);
    co_return a;
  }
  conn->tcp().expires_never();
  auto& msg = parser.get();
  a.response.status = static_cast<int>(msg.result_int());
  a.response.content_type = std::string(msg[http::field::content_type]);
  if (auto ra = msg[http::field::retry_after]; !ra.empty()) {
    long long seconds = 0;
    auto [p, err] = std::from_chars(ra.data(), ra.data() + ra.size(), seconds);
    if (err == std::errc() && p == ra.data() + ra.size() && seconds >= 0) {
      a.retry_after = std::chrono::seconds(std::min<long long>(seconds, 3600));
    }
  }
  const bool keep = msg.keep_alive() && !parser.need_eof();
  a.response.body = std::move(msg.body());
  s.pool->release(std::move(conn), keep);
  co_return a;
}

}  // namespace

State::State(asio::any_io_executor ex, RestConfig cfg, ClientOptions opts, ServerUrl u)
    : executor(std::move(ex)),
      strand(asio::make_strand(executor)),
      config(std::move(cfg)),
      options(std::move(opts)),
      url(std::move(u)),
      tls(ssl::context::tls_client),
      bucket(options.qps, options.burst, Clock::now()),
      token(config),
      retry(options) {}

absl::Status State::setup() {
  std::string verify_name;
  bool verify_ip = false;
  if (absl::Status s = configureTls(tls, config, url, &verify_name, &verify_ip); !s.ok()) return s;
  pool = std::make_unique<ConnectionPool>(strand, config, url, tls, std::move(verify_name),
                                          verify_ip, options.max_connections);
  return absl::OkStatus();
}

asio::awaitable<bool> State::sleep(Clock::duration d) {
  if (closed) co_return false;
  if (d <= Clock::duration::zero()) co_return true;
  asio::steady_timer timer(strand, d);
  timers.insert(&timer);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  timers.erase(&timer);
  co_return !closed;
}

asio::awaitable<bool> State::rateLimit() {
  if (!bucket.limited()) co_return !closed;
  co_return co_await sleep(bucket.reserve(Clock::now()));
}

http::request<http::string_body> State::buildRequest(const Request& r) {
  std::string target = url.prefix + r.path;
  char sep = '?';
  for (const auto& [k, v] : r.query) {
    strAppend(&target, std::string_view(&sep, 1), encodeQuery(k), "=", encodeQuery(v));
    sep = '&';
  }
  http::request<http::string_body> req(beastVerb(r.verb), target, 11);
  req.set(http::field::host, url.host_header);
  req.set(http::field::user_agent, options.user_agent);
  req.set(http::field::accept, "application/json");
  if (!r.body.empty() || r.verb == Verb::kPost || r.verb == Verb::kPut ||
      r.verb == Verb::kPatch) {
    req.set(http::field::content_type, r.content_type);
    req.body() = r.body;
  }
  req.keep_alive(true);
  req.prepare_payload();
  return req;
}

void State::authorize(http::request<http::string_body>& req) {
  const std::string& t = token.current(Clock::now());
  if (!t.empty()) req.set(http::field::authorization, strCat("Bearer ", t));
}

asio::awaitable<absl::StatusOr<Response>> State::send(Request r) {
  auto req = buildRequest(r);
  const auto timeout = timeoutFor(r);
  int stale_retries = 0;
  for (int attempt = 0;; ++attempt) {
    if (!co_await rateLimit()) co_return absl::CancelledError("client shut down");
    authorize(req);
    Attempt a = co_await exchange(*this, req, timeout, r.urgent);
    if (a.ec) {
      if (closed) co_return absl::CancelledError("client shut down");
      // A kept-alive connection the server closed under us: try a fresh one right away.
      if (RetryPolicy::staleConnection(r.verb, a.reused, a.got_response_bytes, a.written) &&
          stale_retries < RetryPolicy::kMaxStaleRetries) {
        ++stale_retries;
        --attempt;
        continue;
      }
      if (!retry.retryTransport(r.verb, a.retryable_transport, a.written, attempt)) {
        const std::string message = strCat(describe(r), ": ", a.failure);
        if (a.ec == beast::error::timeout) co_return absl::DeadlineExceededError(message);
        co_return absl::UnavailableError(message);
      }
      MUSTER_LOG_INFO(3, "Retrying request after transport error", "request", describe(r),
                      "attempt", attempt + 1, "error", a.failure);
      if (!co_await sleep(retry.backoff(attempt))) co_return absl::CancelledError("client shut down");
      continue;
    }
    const int status = a.response.status;
    if (!retry.retryStatus(r.verb, status, a.retry_after.has_value(), attempt))
      co_return std::move(a.response);
    const Clock::duration wait = a.retry_after ? Clock::duration(*a.retry_after)
                                               : retry.backoff(attempt);
    MUSTER_LOG_INFO(3, "Retrying request", "request", describe(r), "status", status,
                    "attempt", attempt + 1,
                    "waitMs",
                    std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
    if (!co_await sleep(wait)) co_return absl::CancelledError("client shut down");
  }
}

void State::shutdown() {
  closed = true;
  if (pool) pool->shutdown();
  for (asio::steady_timer* t : timers) t->cancel();
}

namespace {

template <class T>
absl::StatusOr<T> runSync(const std::shared_ptr<State>& state,
                          asio::awaitable<absl::StatusOr<T>> work) {
  if (auto* io = state->executor.target<asio::io_context::executor_type>();
      (io != nullptr && io->running_in_this_thread()) || state->strand.running_in_this_thread()) {
    return absl::FailedPreconditionError(
        "Client::*Sync called on the client's executor thread; it would deadlock");
  }
  auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
  auto future = promise->get_future();
  asio::co_spawn(state->strand, std::move(work),
                 [promise](std::exception_ptr e, absl::StatusOr<T> result) {
                   if (e) {
                     std::string what = "unknown exception";
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       what = ex.what();
                     } catch (...) {
                     }
                     promise->set_value(absl::InternalError(what));
                   } else {
                     promise->set_value(std::move(result));
                   }
                 });
  return future.get();
}

// Runs `work` on the state's strand and returns its result to the awaiting coroutine, whichever
// executor that one runs on. `state` is held for the whole operation.
template <class T>
asio::awaitable<T> onStrand(std::shared_ptr<State> state, asio::awaitable<T> work) {
  co_return co_await asio::co_spawn(state->strand, std::move(work), asio::use_awaitable);
}

asio::awaitable<absl::StatusOr<Response>> sendOn(std::shared_ptr<State> state, Request r) {
  co_return co_await state->send(std::move(r));
}

asio::awaitable<absl::StatusOr<std::string>> callOn(std::shared_ptr<State> state, Request r) {
  const std::string what = describe(r);
  auto response = co_await state->send(std::move(r));
  if (!response.ok()) co_return response.status();
  if (response->status < 200 || response->status >= 300) {
    co_return apiError(response->status, response->body, what);
  }
  co_return std::move(response->body);
}

asio::awaitable<absl::Status> streamOn(std::shared_ptr<State> state, Request r,
                                       std::shared_ptr<StreamCanceller> canceller,
                                       std::function<absl::Status(std::string_view)> on_line) {
  co_return co_await state->stream(std::move(r), std::move(on_line), std::move(canceller));
}

}  // namespace
}  // namespace client_internal

// ---------------------------------------------------------------------------------------------
// Client

using client_internal::callOn;
using client_internal::parseServer;
using client_internal::runSync;
using client_internal::sendOn;
using client_internal::State;
using client_internal::streamOn;
using client_internal::onStrand;

class Client::Impl {
 public:
  explicit Impl(std::shared_ptr<State> s) : state(std::move(s)) {}
  std::shared_ptr<State> state;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { shutdown(); }

void Client::shutdown() {
  asio::post(impl_->state->strand, [state = impl_->state] { state->shutdown(); });
}

absl::StatusOr<std::shared_ptr<Client>> Client::create(asio::any_io_executor executor,
                                                       RestConfig config, ClientOptions options) {
  auto url = parseServer(config.server);
  if (!url.ok()) return url.status();
  auto state = std::make_shared<State>(std::move(executor), std::move(config),
                                       std::move(options), std::move(*url));
  if (absl::Status s = state->setup(); !s.ok()) {
    ERR_clear_error();
    return s;
  }
  return std::shared_ptr<Client>(new Client(std::make_unique<Impl>(std::move(state))));
}

const RestConfig& Client::config() const { return impl_->state->config; }
asio::any_io_executor Client::executor() const { return impl_->state->executor; }

asio::awaitable<absl::StatusOr<Response>> Client::send(Request request) {
  auto state = impl_->state;
  return onStrand(state, sendOn(state, std::move(request)));
}

asio::awaitable<absl::StatusOr<std::string>> Client::call(Request request) {
  auto state = impl_->state;
  return onStrand(state, callOn(state, std::move(request)));
}

asio::awaitable<absl::Status> Client::stream(
    Request request, std::function<absl::Status(std::string_view line)> on_line,
    std::shared_ptr<StreamCanceller> canceller) {
  auto state = impl_->state;
  return onStrand(state,
                  streamOn(state, std::move(request), std::move(canceller), std::move(on_line)));
}

void StreamCanceller::cancel() {
  std::function<void()> on_cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    on_cancel = std::move(on_cancel_);
    on_cancel_ = nullptr;
  }
  if (on_cancel) on_cancel();
}

bool StreamCanceller::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void StreamCanceller::attach(std::function<void()> on_cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  on_cancel_ = std::move(on_cancel);
}

void StreamCanceller::detach() {
  std::lock_guard<std::mutex> lock(mu_);
  on_cancel_ = nullptr;
}

absl::StatusOr<Response> Client::sendSync(Request request) {
  return runSync(impl_->state, sendOn(impl_->state, std::move(request)));
}

absl::StatusOr<std::string> Client::callSync(Request request) {
  return runSync(impl_->state, callOn(impl_->state, std::move(request)));
}

asio::awaitable<absl::StatusOr<std::string>> Client::get(const Resource& r, std::string_view ns,
                                                         std::string_view name) {
  Request req;
  req.path = r.objectPath(ns, name);
  return call(std::move(req));
}

asio::awaitable<absl::StatusOr<std::string>> Client::list(
    const Resource& r, std::string_view ns, std::string_view label_selector,
    std::string_view field_selector, int64_t limit, std::string_view continue_token,
    std::string_view resource_version) {
  Request req;
  req.path = r.collectionPath(ns);
  if (!label_selector.empty()) req.query.emplace_back("labelSelector", label_selector);
  if (!field_selector.empty()) req.query.emplace_back("fieldSelector", field_selector);
  if (limit > 0) req.query.emplace_back("limit", strCat(limit));
  if (!continue_token.empty()) req.query.emplace_back("continue", continue_token);
  if (!resource_version.empty()) req.query.emplace_back("resourceVersion", resource_version);
  return call(std::move(req));
}

asio::awaitable<absl::StatusOr<std::string>> Client::create(const Resource& r,
                                                            std::string_view ns,
                                                            std::string body) {
  Request req;
  req.verb = Verb::kPost;
  req.path = r.collectionPath(ns);
  req.body = std::move(body);
  return call(std::move(req));
}

asio::awaitable<absl::StatusOr<std::string>> Client::patch(const Resource& r,
                                                           std::string_view ns,
                                                           std::string_view name, PatchType type,
                                                           std::string body,
                                                           std::string_view subresource) {
  Request req;
  req.verb = Verb::kPatch;
  req.path = r.objectPath(ns, name, subresource);
  req.body = std::move(body);
  req.content_type = std::string(contentType(type));
  if (type == PatchType::kApply) req.query.emplace_back("fieldManager", "muster");
  return call(std::move(req));
}

asio::awaitable<absl::StatusOr<std::string>> Client::replace(const Resource& r,
                                                             std::string_view ns,
                                                             std::string_view name,
                                                             std::string body,
                                                             std::string_view subresource) {
  Request req;
  req.verb = Verb::kPut;
  req.path = r.objectPath(ns, name, subresource);
  req.body = std::move(body);
  return call(std::move(req));
}

asio::awaitable<absl::StatusOr<std::string>> Client::remove(const Resource& r,
                                                            std::string_view ns,
                                                            std::string_view name,
                                                            std::string_view precondition_uid,
                                                            std::string_view precondition_rv) {
  Request req;
  req.verb = Verb::kDelete;
  req.path = r.objectPath(ns, name);
  if (!precondition_uid.empty() || !precondition_rv.empty()) {
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> w(out);
    w.StartObject();
    w.Key("kind");
    w.String("DeleteOptions");
    w.Key("apiVersion");
    w.String("v1");
    w.Key("preconditions");
    w.StartObject();
    if (!precondition_uid.empty()) {
      w.Key("uid");
      w.String(precondition_uid.data(), static_cast<rapidjson::SizeType>(precondition_uid.size()));
    }
    if (!precondition_rv.empty()) {
      w.Key("resourceVersion");
      w.String(precondition_rv.data(), static_cast<rapidjson::SizeType>(precondition_rv.size()));
    }
    w.EndObject();
    w.EndObject();
    req.body.assign(out.GetString(), out.GetSize());
  }
  return call(std::move(req));
}

namespace {
std::string bindingJson(std::string_view ns, std::string_view pod, std::string_view pod_uid,
                        std::string_view node) {
  auto str = [](rapidjson::Writer<rapidjson::StringBuffer>& w, std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("apiVersion");
  w.String("v1");
  w.Key("kind");
  w.String("Binding");
  w.Key("metadata");
  w.StartObject();
  w.Key("name");
  str(w, pod);
  w.Key("namespace");
  str(w, ns);
  if (!pod_uid.empty()) {
    w.Key("uid");
    str(w, pod_uid);
  }
  w.EndObject();
  w.Key("target");
  w.StartObject();
  w.Key("apiVersion");
  w.String("v1");
  w.Key("kind");
  w.String("Node");
  w.Key("name");
  str(w, node);
  w.EndObject();
  w.EndObject();
  return std::string(out.GetString(), out.GetSize());
}

asio::awaitable<absl::Status> bindOn(std::shared_ptr<State> state, Request r) {
  auto body = co_await callOn(std::move(state), std::move(r));
  co_return body.status();
}
}  // namespace

asio::awaitable<absl::Status> Client::bind(std::string_view ns, std::string_view pod,
                                           std::string_view pod_uid, std::string_view node) {
  Request req;
  req.verb = Verb::kPost;
  req.path = resources::kPods.objectPath(ns, pod, "binding");
  req.body = bindingJson(ns, pod, pod_uid, node);
  req.urgent = true;
  auto state = impl_->state;
  return onStrand(state, bindOn(state, std::move(req)));
}

}  // namespace muster::proto
