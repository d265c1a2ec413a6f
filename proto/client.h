#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/asio.h"
#include "proto/kubeconfig.h"

namespace muster::proto {

// Where a kind of object lives in the API. Paths built from it are what the server expects:
// "/api/v1/namespaces/ns/pods/name/binding".
struct Resource {
  std::string group_version;  // "v1" (core) or "scheduling.x-k8s.io/v1alpha1"
  std::string plural;         // "pods"
  bool namespaced = true;

  // "/api/v1" or "/apis/<group>/<version>".
  std::string basePath() const;
  // Collection path; empty `ns` on a namespaced resource means all namespaces.
  std::string collectionPath(std::string_view ns = "") const;
  std::string objectPath(std::string_view ns, std::string_view name,
                         std::string_view subresource = "") const;
};

namespace resources {
extern const Resource kPods;
extern const Resource kNodes;
extern const Resource kEvents;  // core/v1 events
extern const Resource kLeases;  // coordination.k8s.io/v1
extern const Resource kNamespaces;
extern const Resource kPodGroups;     // scheduling.x-k8s.io/v1alpha1
extern const Resource kWorkloadPodGroups;  // scheduling.k8s.io/v1alpha2 (Kubernetes 1.36)
extern const Resource kParallelJobs;  // preferred.jp/v1alpha1
extern const Resource kServices;
extern const Resource kSecrets;
extern const Resource kConfigMaps;
extern const Resource kPersistentVolumeClaims;
extern const Resource kPersistentVolumes;  // cluster-scoped
extern const Resource kStorageClasses;     // storage.k8s.io/v1, cluster-scoped
extern const Resource kCSINodes;           // storage.k8s.io/v1, cluster-scoped
extern const Resource kReplicationControllers;
extern const Resource kReplicaSets;        // apps/v1
extern const Resource kStatefulSets;       // apps/v1
extern const Resource kPodDisruptionBudgets;  // policy/v1
}  // namespace resources

enum class Verb { kGet, kPost, kPut, kPatch, kDelete };

enum class PatchType { kMerge, kStrategicMerge, kJson, kApply };
std::string_view contentType(PatchType type);

struct Request {
  Verb verb = Verb::kGet;
  std::string path;   // absolute path, without query
  std::vector<std::pair<std::string, std::string>> query;  // URL-encoded by the client
  std::string body;
  std::string content_type = "application/json";
  // Overrides ClientOptions::request_timeout for this call (watches set their own).
  std::optional<std::chrono::milliseconds> timeout;
  // Waits for a pooled connection ahead of every ordinary request (Bindings: a gang's binds do
  // not queue behind status patches and Events).
  bool urgent = false;
};

struct Response {
  int status = 0;
  std::string body;
  std::string content_type;
};

struct ClientOptions {
  double qps = 0;  // <= 0: no client-side rate limit (default)
  int burst = 0;   // tokens in the bucket when qps > 0; 0 means max(1, qps)
  int max_connections = 32;  // keep-alive pool size for ordinary requests
  int max_retries = 5;       // for 429, 5xx (except 501) and connection failures on idempotent verbs
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
  std::chrono::milliseconds request_timeout{60000};
  std::string user_agent = "muster/0.1";
  // The largest response body read (a list page; proto/json.h kMaxJsonDocumentBytes); a larger
  // one fails the request, unretried. Watches are bounded per event instead (kMaxWatchEventBytes).
  uint64_t max_response_bytes = uint64_t{256} << 20;
};

// Decoded from a non-2xx response: the API `Status` object's reason, message and code. The
// absl::Status carries the HTTP code and reason as payloads so callers can ask what happened.
absl::Status apiError(int http_status, std::string_view body, std::string_view what);
int httpStatusOf(const absl::Status& status);   // 0 when not an API error
std::string reasonOf(const absl::Status& status);  // "NotFound", "Conflict", "Expired", ...
bool isNotFound(const absl::Status& status);
bool isAlreadyExists(const absl::Status& status);
bool isConflict(const absl::Status& status);
bool isGone(const absl::Status& status);  // 410: resourceVersion too old

// An HTTPS client for one API server. Thread-safe; all I/O and all of the client's state live on
// one strand of the executor given at creation, so the public coroutines may be awaited from any
// executor. Keep-alive connections are pooled and reused; requests may run concurrently.
// The io_context behind the executor must outlive the Client.
// Ends one stream() early from any thread, without touching the client's other requests (Boost
// 1.74 has no per-operation cancellation). A cancelled stream returns Cancelled.
class StreamCanceller {
 public:
  void cancel();
  bool cancelled() const;

  // Used by the client: the running stream registers how to end it; called once by cancel().
  void attach(std::function<void()> on_cancel);
  void detach();

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> on_cancel_;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  static absl::StatusOr<std::shared_ptr<Client>> create(asio::any_io_executor executor,
                                                        RestConfig config,
                                                        ClientOptions options = {});
  ~Client();

  // One request with rate limiting and retries (429 honouring Retry-After, 5xx, transport
  // errors when the verb is idempotent or the request never reached the server). Any HTTP status
  // that is not retried comes back as a Response; only transport failures are errors.
  asio::awaitable<absl::StatusOr<Response>> send(Request request);

  // Like send(), but a non-2xx status becomes apiError(); returns the body on success.
  asio::awaitable<absl::StatusOr<std::string>> call(Request request);

  // A streaming GET (watch) on its own connection: `on_line` gets each newline-terminated
  // chunk of the body, reassembled across TCP and HTTP chunk boundaries, without the newline.
  // Returns OK when the server ends the stream, the error of on_line if it returns one, or a
  // transport/API error. A non-2xx response is returned as apiError(). `on_line` runs on the
  // client's strand (the executor's thread when it has one). No retries: the caller re-watches.
  // Cancelled when shutdown() runs or the Client is destroyed; bounded by `request.timeout` only
  // when set (pass `timeoutSeconds` in the query for a server-side bound).
  asio::awaitable<absl::Status> stream(Request request,
                                       std::function<absl::Status(std::string_view line)> on_line,
                                       std::shared_ptr<StreamCanceller> canceller = nullptr);

  // Blocking convenience for command-line tools and tests: runs `send`/`call` on the client's
  // executor and waits. Must not be called from the executor's own thread: that would deadlock,
  // so when the executor is a plain io_context executor (or the call comes from inside the
  // client's strand) it returns FailedPrecondition instead.
  absl::StatusOr<Response> sendSync(Request request);
  absl::StatusOr<std::string> callSync(Request request);

  // Verbs. Paths come from Resource. Bodies are JSON text.
  asio::awaitable<absl::StatusOr<std::string>> get(const Resource& r, std::string_view ns,
                                                   std::string_view name);
  // One page: `limit` 0 = server default; `continue_token` from the previous page.
  asio::awaitable<absl::StatusOr<std::string>> list(
      const Resource& r, std::string_view ns, std::string_view label_selector = "",
      std::string_view field_selector = "", int64_t limit = 0, std::string_view continue_token = "",
      std::string_view resource_version = "");
  asio::awaitable<absl::StatusOr<std::string>> create(const Resource& r, std::string_view ns,
                                                      std::string body);
  asio::awaitable<absl::StatusOr<std::string>> patch(const Resource& r, std::string_view ns,
                                                     std::string_view name, PatchType type,
                                                     std::string body,
                                                     std::string_view subresource = "");
  asio::awaitable<absl::StatusOr<std::string>> replace(const Resource& r, std::string_view ns,
                                                       std::string_view name, std::string body,
                                                       std::string_view subresource = "");
  // Preconditions (uid and/or resourceVersion) go into DeleteOptions when non-empty.
  asio::awaitable<absl::StatusOr<std::string>> remove(const Resource& r, std::string_view ns,
                                                      std::string_view name,
                                                      std::string_view precondition_uid = "",
                                                      std::string_view precondition_rv = "");
  // POST pods/<name>/binding with a v1 Binding to `node`.
  asio::awaitable<absl::Status> bind(std::string_view ns, std::string_view pod,
                                     std::string_view pod_uid, std::string_view node);

  // Closes every connection (pooled and streams) and fails outstanding and later requests with
  // Cancelled. Returns at once; the work happens on the client's strand. Also done by ~Client.
  void shutdown();

  const RestConfig& config() const;
  asio::any_io_executor executor() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The longest watch event (one line of a watch stream: one object) Muster accepts: the API
// server stores objects of at most 1.5 MiB, and their JSON is at most a few times larger.
inline constexpr size_t kMaxWatchEventBytes = size_t{16} << 20;

// Splits a byte stream into newline-terminated records. Bytes after the last newline are kept
// until more arrive, but never more than `max_record` of them. Exposed for the watch framing tests.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_record = kMaxWatchEventBytes) : max_record_(max_record) {}

  // Appends `bytes` and calls `on_line` for each complete record (without '\n'; a trailing '\r'
  // is removed; empty records are skipped). Stops and returns the first error of on_line, or
  // ResourceExhausted when a record (complete or not) is longer than `max_record` bytes; the
  // stream cannot be resynchronised after that, so later calls fail the same way.
  absl::Status feed(std::string_view bytes,
                    const std::function<absl::Status(std::string_view)>& on_line);
  size_t pending() const { return buffer_.size(); }

 private:
  absl::Status tooLong(size_t size);

  size_t max_record_;
  std::string buffer_;
  absl::Status overflow_;
};

}  // namespace muster::proto
