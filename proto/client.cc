#include "proto/client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <type_traits>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <exception>
#include <fstream>
#include <future>
#include <limits>
#include <list>
#include <set>
#include <sstream>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "proto/log.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "proto/strings.h"

// Concurrency: every request, stream and all pool/limiter/token state run on one strand of the
// executor given to Client::create() (State::strand). Public coroutines only copy the shared
// State and co_spawn the real work onto that strand, so callers may await them from any
// executor. Sockets and timers are created on the strand, so Beast's internal timeout handlers
// are serialised with the I/O too. No exception is thrown out of a handler: every asynchronous
// call uses redirect_error.

namespace muster::proto {
namespace {
}  // namespace

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Resource paths

namespace {

bool isUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

// Query component: everything but RFC 3986 unreserved characters is percent-encoded.
std::string encodeQuery(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (isUnreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// Path segment: also keeps the sub-delimiters and ':' / '@' (RBAC names like "system:node").
std::string encodeSegment(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  static constexpr std::string_view kAllowed = "!$&'()*+,;=:@";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (isUnreserved(c) || kAllowed.find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace

std::string Resource::basePath() const {
  if (group_version.find('/') == std::string::npos) return strCat("/api/", group_version);
  return strCat("/apis/", group_version);
}

std::string Resource::collectionPath(std::string_view ns) const {
  if (namespaced && !ns.empty()) {
    return strCat(basePath(), "/namespaces/", encodeSegment(ns), "/", plural);
  }
  return strCat(basePath(), "/", plural);
}

std::string Resource::objectPath(std::string_view ns, std::string_view name,
                                 std::string_view subresource) const {
  std::string path = strCat(collectionPath(ns), "/", encodeSegment(name));
  if (!subresource.empty()) strAppend(&path, "/", subresource);
  return path;
}

namespace resources {
const Resource kPods{"v1", "pods", true};
const Resource kNodes{"v1", "nodes", false};
const Resource kEvents{"v1", "events", true};
const Resource kLeases{"coordination.k8s.io/v1", "leases", true};
const Resource kNamespaces{"v1", "namespaces", false};
const Resource kPodGroups{"scheduling.x-k8s.io/v1alpha1", "podgroups", true};
const Resource kParallelJobs{"preferred.jp/v1alpha1", "paralleljobs", true};
const Resource kServices{"v1", "services", true};
const Resource kSecrets{"v1", "secrets", true};
const Resource kConfigMaps{"v1", "configmaps", true};
}  // namespace resources

std::string_view contentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/json";
}

// ---------------------------------------------------------------------------------------------
// API errors

namespace {

constexpr char kHttpStatusUrl[] = "muster.dev/http-status";
constexpr char kReasonUrl[] = "muster.dev/reason";

// client-go's reasons for a status without a Status body (NewGenericServerResponse).
std::string_view defaultReason(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "";
  }
}

absl::StatusCode codeFor(int http_status, std::string_view reason) {
  switch (http_status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;  // resourceVersion too old: relist
    case 412:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_status >= 500) return absl::StatusCode::kUnavailable;
  if (http_status >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

// A short printable excerpt of a non-JSON body.
std::string excerpt(std::string_view body) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(av(body));
  body = std::string_view(stripped.data(), stripped.size());
  std::string out;
  for (char c : body.substr(0, 256)) {
    out.push_back(absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : ' ');
  }
  if (body.size() > 256) out += "...";
  return out;
}

}  // namespace

absl::Status apiError(int http_status, std::string_view body, std::string_view what) {
  std::string message;
  std::string reason;
  int code = http_status;
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    if (auto it = doc.FindMember("message"); it != doc.MemberEnd() && it->value.IsString()) {
      message = it->value.GetString();
    }
    if (auto it = doc.FindMember("reason"); it != doc.MemberEnd() && it->value.IsString()) {
      reason = it->value.GetString();
    }
    // In-stream watch errors arrive with HTTP 200; the Status' own code is what counts then.
    if (auto it = doc.FindMember("code"); it != doc.MemberEnd() && it->value.IsInt() &&
                                          (code < 400 || code == 0)) {
      code = it->value.GetInt();
    }
  } else if (!body.empty()) {
    message = excerpt(body);
  }
  if (reason.empty()) reason = std::string(defaultReason(code));
  if (message.empty()) {
    message = std::string(
        http::obsolete_reason(static_cast<http::status>(code)));
    if (message.empty() || message == "<unknown-status>") message = "request failed";
  }
  std::string text = what.empty() ? message : strCat(what, ": ", message);
  strAppend(&text, " (", code, reason.empty() ? "" : " ", reason, ")");
  absl::Status status(codeFor(code, reason), text);
  status.SetPayload(kHttpStatusUrl, absl::Cord(strCat(code)));
  if (!reason.empty()) status.SetPayload(kReasonUrl, absl::Cord(reason));
  return status;
}

int httpStatusOf(const absl::Status& status) {
  auto payload = status.GetPayload(kHttpStatusUrl);
  if (!payload) return 0;
  int code = 0;
  std::string text(*payload);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), code);
  (void)ptr;
  return ec == std::errc() ? code : 0;
}

std::string reasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonUrl);
  return payload ? std::string(*payload) : std::string();
}

bool isNotFound(const absl::Status& status) {
  return httpStatusOf(status) == 404 || reasonOf(status) == "NotFound";
}
bool isAlreadyExists(const absl::Status& status) { return reasonOf(status) == "AlreadyExists"; }
bool isConflict(const absl::Status& status) {
  return httpStatusOf(status) == 409 && reasonOf(status) != "AlreadyExists";
}
bool isGone(const absl::Status& status) {
  const std::string reason = reasonOf(status);
  return httpStatusOf(status) == 410 || reason == "Expired" || reason == "Gone";
}

// ---------------------------------------------------------------------------------------------
// LineSplitter

absl::Status LineSplitter::feed(std::string_view bytes,
                                const std::function<absl::Status(std::string_view)>& on_line) {
  size_t start = 0;
  while (start <= bytes.size()) {
    const size_t nl = bytes.find('\n', start);
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
      buffer_.append(bytes.substr(start));
      return status;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Client internals

namespace {

using SslStream = ssl::stream<beast::tcp_stream>;
using Strand = asio::strand<asio::any_io_executor>;
constexpr auto kIdleLimit = std::chrono::seconds(90);
constexpr int kMaxStaleRetries = 3;

struct ServerUrl {
  std::string host;  // without brackets
  std::string port;
  std::string prefix;  // path prefix without trailing '/', may be empty
  std::string host_header;
};

absl::StatusOr<ServerUrl> parseServer(std::string_view server) {
  constexpr std::string_view kHttps = "https://";
  if (!absl::StartsWithIgnoreCase(av(server), av(kHttps))) {
    if (absl::StartsWithIgnoreCase(av(server), "http://")) {
      return absl::InvalidArgumentError(
          strCat("server ", server, ": only https:// is supported"));
    }
    return absl::InvalidArgumentError(
        strCat("server \"", server, "\" is not an https:// URL"));
  }
  std::string_view rest = server.substr(kHttps.size());
  ServerUrl url;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    url.prefix = std::string(prefix);
  }
  if (authority.find('@') != std::string_view::npos) {
    return absl::InvalidArgumentError("server URL must not contain user information");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(strCat("server ", server, ": bad IPv6 address"));
    }
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return absl::InvalidArgumentError(strCat("server ", server, ": bad address"));
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) {
    return absl::InvalidArgumentError(strCat("server ", server, ": no host"));
  }
  url.port = port.empty() ? "443" : std::string(port);
  if (!std::all_of(url.port.begin(), url.port.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError(strCat("server ", server, ": bad port"));
  }
  const bool v6 = url.host.find(':') != std::string::npos;
  url.host_header = strCat(v6 ? "[" : "", url.host, v6 ? "]" : "", ":", url.port);
  return url;
}

bool isIpAddress(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string_view verbName(Verb verb) {
  switch (verb) {
    case Verb::kGet: return "GET";
    case Verb::kPost: return "POST";
    case Verb::kPut: return "PUT";
    case Verb::kPatch: return "PATCH";
    case Verb::kDelete: return "DELETE";
  }
  return "GET";
}

http::verb beastVerb(Verb verb) {
  switch (verb) {
    case Verb::kGet: return http::verb::get;
    case Verb::kPost: return http::verb::post;
    case Verb::kPut: return http::verb::put;
    case Verb::kPatch: return http::verb::patch;
    case Verb::kDelete: return http::verb::delete_;
  }
  return http::verb::get;
}

bool idempotent(Verb verb) { return verb != Verb::kPost; }

std::string describe(const Request& r) { return strCat(verbName(r.verb), " ", r.path); }

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

bool parsesAsPrivateKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  auto no_password = [](char*, int, int, void*) { return 0; };
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, no_password, nullptr);
  const bool ok = key != nullptr;
  EVP_PKEY_free(key);
  BIO_free(bio);
  ERR_clear_error();
  return ok;
}

struct State;

struct Connection {
  Connection(State& state, Strand& strand, ssl::context& tls);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream); }
  void close() {
    boost::system::error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp().close();
  }
  // True when an idle keep-alive connection can carry another request: the peer has not closed
  // it (no EOF) and sent nothing unexpected (a TLS close_notify, for one).
  bool reusable() {
    if (buffer.size() != 0 || !tcp().socket().is_open()) return false;
    char byte;
    const ssize_t n =
        ::recv(tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  State& state;
  SslStream stream;
  beast::flat_buffer buffer;
  bool reused = false;
  Clock::time_point idle_since;
};

using ConnectionPtr = std::unique_ptr<Connection>;

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

struct State : std::enable_shared_from_this<State> {
  State(asio::any_io_executor ex, RestConfig cfg, ClientOptions opts, ServerUrl u)
      : executor(std::move(ex)),
        strand(asio::make_strand(executor)),
        config(std::move(cfg)),
        options(std::move(opts)),
        url(std::move(u)),
        tls(ssl::context::tls_client) {}

  asio::any_io_executor executor;
  Strand strand;
  const RestConfig config;
  const ClientOptions options;
  const ServerUrl url;
  ssl::context tls;
  std::string verify_name;
  bool verify_ip = false;

  // --- strand-only state below ---
  bool closed = false;
  std::set<Connection*> live;  // every open connection: idle, busy and streams
  std::vector<ConnectionPtr> idle;
  int pooled = 0;  // idle + busy pooled connections
  std::list<asio::steady_timer*> pool_waiters;
  std::set<asio::steady_timer*> timers;  // every pending sleep, cancelled on shutdown
  // Token bucket.
  double tokens = 0;
  Clock::time_point refilled;
  // Bearer token cache.
  std::string token;
  struct timespec token_mtime {};
  off_t token_size = -1;
  Clock::time_point token_read{};
  absl::BitGen rng;

  absl::Status setupTls() {
    boost::system::error_code ec;
    tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                        ssl::context::no_tlsv1_1,
                    ec);
    if (config.insecure_skip_tls_verify) {
      tls.set_verify_mode(ssl::verify_none, ec);
    } else {
      tls.set_verify_mode(ssl::verify_peer, ec);
      if (!config.ca_pem.empty()) {
        tls.add_certificate_authority(asio::buffer(config.ca_pem), ec);
        if (ec) return absl::InvalidArgumentError("the CA certificate is not valid PEM");
      } else {
        tls.set_default_verify_paths(ec);
        if (ec) {
          return absl::InternalError(
              strCat("cannot load the system CA certificates: ", ec.message()));
        }
      }
    }
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return absl::InvalidArgumentError("a client certificate needs both a certificate and a key");
    }
    if (!config.client_cert_pem.empty()) {
      tls.use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
      if (ec) return absl::InvalidArgumentError("the client certificate is not valid PEM");
      // Encrypted keys are not supported: never let OpenSSL prompt on a terminal.
      tls.set_password_callback(
          [](std::size_t, ssl::context::password_purpose) { return std::string(); }, ec);
      if (!parsesAsPrivateKey(config.client_key_pem)) {
        return absl::InvalidArgumentError("the client key is not a valid PEM private key");
      }
      tls.use_private_key(asio::buffer(config.client_key_pem), ssl::context::pem, ec);
      if (ec || SSL_CTX_check_private_key(tls.native_handle()) != 1) {
        ERR_clear_error();
        return absl::InvalidArgumentError("the client key does not match the client certificate");
      }
    }
    verify_name = config.tls_server_name.empty() ? url.host : config.tls_server_name;
    verify_ip = isIpAddress(verify_name);
    const double qps = options.qps;
    tokens = qps > 0 ? bucketSize() : 0;
    refilled = Clock::now();
    token = config.bearer_token;
    return absl::OkStatus();
  }

  double bucketSize() const {
    return options.burst > 0 ? options.burst : std::max(1.0, options.qps);
  }

  std::chrono::milliseconds timeoutFor(const Request& r) const {
    return r.timeout.value_or(options.request_timeout);
  }

  // Sleeps on the strand; false when the client was shut down meanwhile.
  asio::awaitable<bool> sleep(Clock::duration d) {
    if (closed) co_return false;
    if (d <= Clock::duration::zero()) co_return true;
    asio::steady_timer timer(strand, d);
    timers.insert(&timer);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    timers.erase(&timer);
    co_return !closed;
  }

  // Token bucket with reservations: a request takes a token now, possibly driving the bucket
  // negative, and waits until that token would have been refilled. FIFO and no polling.
  asio::awaitable<bool> rateLimit() {
    if (options.qps <= 0) co_return !closed;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - refilled).count();
    tokens = std::min(bucketSize(), tokens + elapsed * options.qps);
    refilled = now;
    tokens -= 1;
    if (tokens >= 0) co_return !closed;
    const auto wait = std::chrono::duration<double>(-tokens / options.qps);
    co_return co_await sleep(std::chrono::duration_cast<Clock::duration>(wait));
  }

  // The bearer token, re-read from token_file when the file changed or a minute passed.
  const std::string& bearerToken() {
    if (config.token_file.empty()) return token;
    const auto now = Clock::now();
    struct stat st {};  // one stat() per request is far cheaper than the request itself
    if (::stat(config.token_file.c_str(), &st) != 0) return token;  // keep the last token
    const bool changed = st.st_mtim.tv_sec != token_mtime.tv_sec ||
                         st.st_mtim.tv_nsec != token_mtime.tv_nsec || st.st_size != token_size;
    if (!changed && now - token_read < std::chrono::minutes(1)) return token;
    std::ifstream in(config.token_file, std::ios::binary);
    if (!in) return token;
    std::ostringstream text;
    text << in.rdbuf();
    std::string fresh(absl::StripAsciiWhitespace(text.str()));
    if (!fresh.empty()) {
      token = std::move(fresh);
      token_mtime = st.st_mtim;
      token_size = st.st_size;
      token_read = now;
    }
    return token;
  }

  Clock::duration backoff(int attempt) {
    using namespace std::chrono;
    const double base = static_cast<double>(options.initial_backoff.count()) *
                        std::pow(2.0, std::min(attempt, 30));
    const double capped = std::min(base, static_cast<double>(options.max_backoff.count()));
    const double jittered = capped * absl::Uniform(rng, 0.5, 1.0);
    return duration_cast<Clock::duration>(duration<double, std::milli>(jittered));
  }

  http::request<http::string_body> buildRequest(const Request& r) {
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

  void authorize(http::request<http::string_body>& req) {
    const std::string& t = bearerToken();
    if (!t.empty()) req.set(http::field::authorization, strCat("Bearer ", t));
  }

  // Opens a TCP+TLS connection, verifying the server.
  asio::awaitable<absl::StatusOr<ConnectionPtr>> connect(std::chrono::milliseconds timeout,
                                                         bool* retryable) {
    *retryable = true;
    auto conn = std::make_unique<Connection>(*this, strand, tls);
    boost::system::error_code ec;
    tcp::resolver resolver(strand);
    auto endpoints = co_await resolver.async_resolve(
        url.host, url.port, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return absl::UnavailableError(
          strCat("cannot resolve ", url.host, ": ", ec.message()));
    }
    if (closed) co_return absl::CancelledError("client shut down");
    conn->tcp().expires_after(timeout);
    co_await conn->tcp().async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return absl::UnavailableError(
          strCat("cannot connect to ", url.host_header, ": ", ec.message()));
    }
    auto& sock = conn->tcp().socket();
    sock.set_option(tcp::no_delay(true), ec);
    sock.set_option(asio::socket_base::keep_alive(true), ec);
    const int idle_s = 30, interval_s = 10, count = 3;
    ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
    ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval_s,
                 sizeof interval_s);
    ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);

    SSL* native = conn->stream.native_handle();
    if (!config.insecure_skip_tls_verify) {
      X509_VERIFY_PARAM* param = SSL_get0_param(native);
      int ok = 0;
      if (verify_ip) {
        ok = X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str());
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        ok = X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), verify_name.size());
      }
      if (ok != 1) {
        ERR_clear_error();
        *retryable = false;
        co_return absl::InvalidArgumentError(
            strCat("cannot verify against server name \"", verify_name, "\""));
      }
    }
    if (!verify_ip) SSL_set_tlsext_host_name(native, verify_name.c_str());
    conn->tcp().expires_after(timeout);
    co_await conn->stream.async_handshake(ssl::stream_base::client,
                                          asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      const long verify = SSL_get_verify_result(native);
      std::string detail = ec.message();
      if (verify != X509_V_OK) {
        *retryable = false;
        detail = strCat("server certificate not trusted: ",
                              X509_verify_cert_error_string(verify));
      }
      const std::string queued = opensslErrors();
      if (!queued.empty() && verify == X509_V_OK) strAppend(&detail, " (", queued, ")");
      co_return absl::UnavailableError(
          strCat("TLS handshake with ", url.host_header, " failed: ", detail));
    }
    conn->tcp().expires_never();
    co_return std::move(conn);
  }

  // A pooled connection: an idle one that is still open, or a new one within max_connections.
  asio::awaitable<absl::StatusOr<ConnectionPtr>> acquire(std::chrono::milliseconds timeout,
                                                         bool* retryable) {
    *retryable = true;
    for (;;) {
      if (closed) co_return absl::CancelledError("client shut down");
      while (!idle.empty()) {
        ConnectionPtr conn = std::move(idle.back());
        idle.pop_back();
        if (Clock::now() - conn->idle_since < kIdleLimit && conn->reusable()) {
          conn->reused = true;
          co_return std::move(conn);
        }
        conn->close();
        --pooled;
      }
      if (pooled < std::max(1, options.max_connections)) {
        ++pooled;
        auto conn = co_await connect(timeout, retryable);
        if (!conn.ok()) {
          --pooled;
          wakeWaiter();
        }
        co_return conn;
      }
      asio::steady_timer waiter(strand, Clock::time_point::max());
      auto it = pool_waiters.insert(pool_waiters.end(), &waiter);
      timers.insert(&waiter);
      boost::system::error_code ec;
      co_await waiter.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      timers.erase(&waiter);
      pool_waiters.erase(it);
    }
  }

  // Wakes the longest-waiting acquire(); its entry is nulled (woken) and erased by the waiter.
  void wakeWaiter() {
    for (asio::steady_timer*& waiter : pool_waiters) {
      if (waiter != nullptr) {
        waiter->cancel();
        waiter = nullptr;
        return;
      }
    }
  }

  void release(ConnectionPtr conn, bool keep) {
    if (keep && !closed) {
      conn->idle_since = Clock::now();
      idle.push_back(std::move(conn));
    } else {
      conn->close();
      --pooled;
    }
    wakeWaiter();
  }

  // One exchange on a pooled connection.
  asio::awaitable<Attempt> exchange(http::request<http::string_body>& req,
                                    std::chrono::milliseconds timeout) {
    Attempt a;
    bool retryable = true;
    auto acquired = co_await acquire(timeout, &retryable);
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
      release(std::move(conn), false);
      co_return a;
    }
    a.written = true;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.header_limit(1 << 20);
    co_await http::async_read(conn->stream, conn->buffer, parser,
                              asio::redirect_error(asio::use_awaitable, a.ec));
    a.got_response_bytes = parser.got_some();
    if (a.ec) {
      a.failure = a.ec == beast::error::timeout
                      ? std::string("timed out waiting for the response")
                      : strCat("reading the response failed: ", a.ec.message());
      release(std::move(conn), false);
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
    release(std::move(conn), keep);
    co_return a;
  }

  static bool retryableStatus(int status) {
    return status == 429 || (status >= 500 && status != 501 && status <= 599);
  }

  asio::awaitable<absl::StatusOr<Response>> send(Request r) {
    auto req = buildRequest(r);
    const auto timeout = timeoutFor(r);
    int stale_retries = 0;
    for (int attempt = 0;; ++attempt) {
      if (!co_await rateLimit()) co_return absl::CancelledError("client shut down");
      authorize(req);
      Attempt a = co_await exchange(req, timeout);
      if (a.ec) {
        if (closed) co_return absl::CancelledError("client shut down");
        // A kept-alive connection the server closed under us: try a fresh one right away.
        if (a.reused && !a.got_response_bytes && (idempotent(r.verb) || !a.written) &&
            stale_retries < kMaxStaleRetries) {
          ++stale_retries;
          --attempt;
          continue;
        }
        const bool retry =
            a.retryable_transport && (idempotent(r.verb) || !a.written) &&
            attempt < options.max_retries;
        if (!retry) {
          const std::string message = strCat(describe(r), ": ", a.failure);
          if (a.ec == beast::error::timeout) co_return absl::DeadlineExceededError(message);
          co_return absl::UnavailableError(message);
        }
        MUSTER_LOG_INFO(3, "Retrying request after transport error", "request", describe(r),
                        "attempt", attempt + 1, "error", a.failure);
        if (!co_await sleep(backoff(attempt))) co_return absl::CancelledError("client shut down");
        continue;
      }
      const int status = a.response.status;
      // 503 and 429 mean the server did not process the request; other 5xx may have, so a
      // POST is retried on them only when the server asks for it with Retry-After.
      const bool may_retry = retryableStatus(status) &&
                             (idempotent(r.verb) || status == 429 || status == 503 ||
                              a.retry_after.has_value());
      if (!may_retry || attempt >= options.max_retries) co_return std::move(a.response);
      const Clock::duration wait = a.retry_after ? Clock::duration(*a.retry_after)
                                                 : backoff(attempt);
      MUSTER_LOG_INFO(3, "Retrying request", "request", describe(r), "status", status,
                      "attempt", attempt + 1,
                      "waitMs",
                      std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
      if (!co_await sleep(wait)) co_return absl::CancelledError("client shut down");
    }
  }

  asio::awaitable<absl::Status> stream(
      Request r, std::function<absl::Status(std::string_view line)> on_line,
      std::shared_ptr<StreamCanceller> canceller) {
    auto req = buildRequest(r);
    const std::string what = describe(r);
    if (!co_await rateLimit()) co_return absl::CancelledError("client shut down");
    authorize(req);
    bool retryable = true;
    auto connected = co_await connect(options.request_timeout, &retryable);
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

  void shutdown() {
    closed = true;
    for (Connection* c : live) c->close();
    idle.clear();
    for (asio::steady_timer* t : timers) t->cancel();
  }
};

Connection::Connection(State& s, Strand& strand, ssl::context& tls)
    : state(s), stream(strand, tls) {
  state.live.insert(this);
}

Connection::~Connection() { state.live.erase(this); }

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

// ---------------------------------------------------------------------------------------------
// Client

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
  if (absl::Status s = state->setupTls(); !s.ok()) {
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
  auto state = impl_->state;
  return onStrand(state, bindOn(state, std::move(req)));
}

}  // namespace muster::proto
