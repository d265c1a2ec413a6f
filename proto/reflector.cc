#include "proto/reflector.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/informer.h"
#include "proto/json.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/strings.h"

namespace muster::proto {

namespace {
// The reflector's own counters, by its name (the resource): every informer of the process is
// counted here, whoever owns it.
metrics::Family<metrics::Counter>& relistsMetric() {
  static auto& f = metrics::defaultRegistry().counter(
      "muster_informer_relists_total", "Informer relists forced by 410 Gone.", {"resource"});
  return f;
}
metrics::Family<metrics::Counter>& watchErrorsMetric() {
  static auto& f = metrics::defaultRegistry().counter(
      "muster_informer_watch_errors_total", "Watches that ended in an error.", {"resource"});
  return f;
}

// A list item gets the limits of a watch event's object: an event is {"type":..,"object":{..}},
// so its object nests one level less than the event may (kMaxJsonDepth), and the event's whole line
// is at most kMaxWatchEventBytes. An object that can be watched can be listed.
constexpr int kMaxListItemDepth = kMaxJsonDepth - 1;
constexpr size_t kMaxListItemBytes = kMaxWatchEventBytes;

// client-go's page size, from which pages are halved when ReflectorOptions::page_size asks for
// the server's default (no limit) and that answer is too large.
constexpr int64_t kDefaultPageSize = 500;

}  // namespace
namespace {

std::string_view stringMember(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return {};
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

const rapidjson::Value* objectMember(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsObject()) return nullptr;
  return &it->value;
}

std::string_view resourceVersionOf(const rapidjson::Value& object) {
  const rapidjson::Value* meta = objectMember(object, "metadata");
  return meta ? stringMember(*meta, "resourceVersion") : std::string_view{};
}

class ClientListerWatcher final : public ListerWatcher {
 public:
  ClientListerWatcher(std::shared_ptr<Client> client, Resource resource, ListWatchOptions options)
      : client_(std::move(client)), resource_(std::move(resource)), options_(std::move(options)) {}

  asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t limit,
                                                        std::string continue_token) override {
    absl::StatusOr<std::string> page =
        co_await client_->list(resource_, options_.namespace_, options_.label_selector,
                               options_.field_selector, limit, continue_token);
    // The client refuses a response longer than ClientOptions::max_response_bytes as Unavailable
    // ("...: the response is larger than the N bytes Muster accepts", proto/client.cc); the seam
    // says ResourceExhausted, so the reflector asks for fewer items.
    if (!page.ok() && absl::IsUnavailable(page.status()) &&
        absl::StrContains(page.status().message(), "the response is larger than the ")) {
      co_return absl::ResourceExhaustedError(page.status().message());
    }
    co_return page;
  }

  asio::awaitable<absl::Status> watch(
      std::string resource_version, int timeout_seconds,
      std::function<absl::Status(std::string_view)> on_line) override {
    Request request;
    request.verb = Verb::kGet;
    request.path = resource_.collectionPath(options_.namespace_);
    request.query = {{"watch", "true"},
                     {"resourceVersion", resource_version},
                     {"allowWatchBookmarks", "true"},
                     {"timeoutSeconds", std::to_string(timeout_seconds)}};
    if (!options_.label_selector.empty())
      request.query.emplace_back("labelSelector", options_.label_selector);
    if (!options_.field_selector.empty())
      request.query.emplace_back("fieldSelector", options_.field_selector);
    // The server ends the watch after timeoutSeconds; give the connection a margin beyond it.
    request.timeout = std::chrono::seconds(timeout_seconds + 30);
    auto canceller = std::make_shared<StreamCanceller>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) co_return absl::CancelledError("watch cancelled");
      current_ = canceller;
    }
    co_return co_await client_->stream(std::move(request), std::move(on_line), canceller);
  }

  void cancel() override {
    std::shared_ptr<StreamCanceller> current;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      current = current_;
    }
    if (current) current->cancel();
  }

 private:
  std::shared_ptr<Client> client_;
  Resource resource_;
  ListWatchOptions options_;
  std::mutex mu_;
  bool cancelled_ = false;
  std::shared_ptr<StreamCanceller> current_;
};

}  // namespace

ListerWatcherPtr makeClientListerWatcher(std::shared_ptr<Client> client, Resource resource,
                                         ListWatchOptions options) {
  return std::make_unique<ClientListerWatcher>(std::move(client), std::move(resource),
                                               std::move(options));
}

Reflector::Reflector(ListerWatcherPtr lister_watcher, ReflectorSink* sink,
                     ReflectorOptions options)
    : lw_(std::move(lister_watcher)),
      sink_(sink),
      options_(std::move(options)),
      rng_(std::random_device{}()) {}

void Reflector::stop() {
  stopping_.store(true);
  lw_->cancel();
}

ReflectorStats Reflector::stats() const {
  ReflectorStats s;
  s.lists = lists_.load();
  s.relists_gone = relists_gone_.load();
  s.watches = watches_.load();
  s.watch_errors = watch_errors_.load();
  s.events = events_.load();
  s.bookmarks = bookmarks_.load();
  s.bad_events = bad_events_.load();
  s.skipped_items = skipped_items_.load();
  return s;
}

std::chrono::milliseconds Reflector::nextBackoff() {
  // 0.8 s doubling to 30 s, with up to 50% jitter, as client-go's reflector backoff manager.
  backoff_ = backoff_.count() == 0 ? options_.initial_backoff
                                   : std::min(backoff_ * 2, options_.max_backoff);
  std::uniform_real_distribution<double> jitter(1.0, 1.5);
  return std::chrono::milliseconds(static_cast<int64_t>(backoff_.count() * jitter(rng_)));
}

asio::awaitable<void> Reflector::sleepFor(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  // Wake up regularly so stop() is noticed during long backoffs.
  auto deadline = std::chrono::steady_clock::now() + d;
  while (!stopping_.load() && std::chrono::steady_clock::now() < deadline) {
    timer.expires_at(std::min(deadline, std::chrono::steady_clock::now() +
                                            std::chrono::milliseconds(200)));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
  }
}

asio::awaitable<absl::Status> Reflector::listAll() {
  state_ = State::kInitPage;
  sink_->beginList();
  std::string continue_token;
  // Halved, for the rest of this list, while a page is larger than the transport accepts: a
  // larger try costs a response read up to that limit again.
  int64_t limit = options_.page_size;
  for (;;) {
    auto page = co_await lw_->listPage(limit, continue_token);
    if (!page.ok()) {
      if (isGone(page.status()) && !continue_token.empty()) {
        // The continue token expired between pages: start over with a fresh consistent list.
        MUSTER_LOG_INFO(2, "List continue token expired, listing again", "reflector",
                        options_.name);
        continue_token.clear();
        sink_->beginList();
        continue;
      }
      if (absl::IsResourceExhausted(page.status())) {
        if (limit == 1) {
          // Nothing can skip this object: its page, and so the continue token past it, never
          // arrives. (The API server stores no object this large.)
          co_return absl::ResourceExhaustedError(absl::StrCat(
              options_.name, ": ",
              continue_token.empty()
                  ? std::string("the first object")
                  : absl::StrCat("the object after continue token \"", continue_token, "\""),
              " alone is larger than the transport accepts: ", page.status().message()));
        }
        limit = std::max<int64_t>(1, (limit > 0 ? limit : kDefaultPageSize) / 2);
        MUSTER_LOG_WARNING("List page larger than the transport accepts, asking for fewer items",
                           "reflector", options_.name, "limit", limit, "continue",
                           continue_token);
        continue;
      }
      co_return page.status();
    }
    // Item by item: each is bounded like a watch event's object, and one that cannot be read is
    // left out of the list (the sink treats it as deleted) instead of failing it.
    absl::StatusOr<ListPageMeta> meta = parseListPage(
        *page, kMaxListItemBytes, kMaxListItemDepth, [&](ListPageItem& item) {
          if (item.object.ok()) {
            sink_->listItem(*item.object);
            return;
          }
          skipped_items_.fetch_add(1);
          undecodableObjects(options_.name).inc();
          MUSTER_LOG_ERROR("Skipping list item that cannot be read", "reflector", options_.name,
                           "object",
                           item.name.empty() ? std::string() : objectKey(item.namespace_, item.name),
                           "index", item.index, "continue", continue_token, "error",
                           sv(item.object.status().message()));
        });
    if (!meta.ok()) {
      co_return absl::InternalError(absl::StrCat(options_.name, ": list response is not a list: ",
                                                 meta.status().message()));
    }
    if (meta->continue_token.empty()) {
      last_rv_ = std::move(meta->resource_version);
      sink_->endList(last_rv_);
      lists_.fetch_add(1);
      state_ = State::kInitListed;
      MUSTER_LOG_INFO(2, "Listed", "reflector", options_.name, "resourceVersion", last_rv_);
      co_return absl::OkStatus();
    }
    continue_token = std::move(meta->continue_token);
    if (stopping_.load()) co_return absl::CancelledError("reflector stopped");
  }
}

absl::Status Reflector::handleLine(std::string_view line) {
  absl::StatusOr<rapidjson::Document> parsed = parseJson(line, kMaxWatchEventBytes);
  if (!parsed.ok() || !parsed->IsObject()) {
    bad_events_.fetch_add(1);
    MUSTER_LOG_ERROR("Skipping undecodable watch event", "reflector", options_.name, "error",
                     parsed.ok() ? std::string_view("not an object") : sv(parsed.status().message()));
    return absl::OkStatus();
  }
  const rapidjson::Document& doc = *parsed;
  std::string_view type = stringMember(doc, "type");
  const rapidjson::Value* object = objectMember(doc, "object");
  if (object == nullptr) {
    bad_events_.fetch_add(1);
    MUSTER_LOG_ERROR("Skipping watch event without object", "reflector", options_.name, "type",
                     type);
    return absl::OkStatus();
  }
  if (type == "ERROR") {
    auto code = object->FindMember("code");
    int http = code != object->MemberEnd() && code->value.IsInt() ? code->value.GetInt() : 0;
    std::string message(stringMember(*object, "message"));
    if (http == 410) {
      gone_ = true;
      return absl::OutOfRangeError(absl::StrCat(options_.name, ": ", message));
    }
    return absl::UnavailableError(
        absl::StrCat(options_.name, ": watch error event (", http, "): ", message));
  }
  std::string_view rv = resourceVersionOf(*object);
  if (type == "BOOKMARK") {
    bookmarks_.fetch_add(1);
    if (!rv.empty()) last_rv_.assign(rv);
    return absl::OkStatus();
  }
  WatchEventType event;
  if (type == "ADDED") event = WatchEventType::kAdded;
  else if (type == "MODIFIED") event = WatchEventType::kModified;
  else if (type == "DELETED") event = WatchEventType::kDeleted;
  else {
    bad_events_.fetch_add(1);
    MUSTER_LOG_ERROR("Skipping watch event of unknown type", "reflector", options_.name, "type",
                     type);
    return absl::OkStatus();
  }
  sink_->watchEvent(event, *object);
  events_.fetch_add(1);
  if (!rv.empty()) last_rv_.assign(rv);
  if (stopping_.load()) return absl::CancelledError("reflector stopped");
  return absl::OkStatus();
}

asio::awaitable<absl::Status> Reflector::watchOnce() {
  std::uniform_int_distribution<int> timeout(options_.min_watch_timeout_seconds,
                                             2 * options_.min_watch_timeout_seconds - 1);
  gone_ = false;
  watches_.fetch_add(1);
  state_ = State::kWatching;
  MUSTER_LOG_INFO(3, "Watching", "reflector", options_.name, "resourceVersion", last_rv_);
  absl::Status status = co_await lw_->watch(last_rv_, timeout(rng_),
                                            [this](std::string_view line) {
                                              return handleLine(line);
                                            });
  if (gone_ && status.ok()) status = absl::OutOfRangeError("watch expired");
  co_return status;
}

asio::awaitable<void> Reflector::run() {
  while (!stopping_.load()) {
    if (state_ != State::kInitListed && state_ != State::kWatching) {
      absl::Status listed = co_await listAll();
      if (!listed.ok() && options_.may_be_absent && isNotFound(listed)) {
        if (stopping_.load()) break;
        // Not served: an empty, synced cache (whatever an earlier list held is deleted).
        if (!absent_) {
          MUSTER_LOG_INFO(0, "API not served, treating it as empty; checking again periodically",
                          "reflector", options_.name, "every",
                          absl::StrCat(options_.max_backoff.count(), "ms"));
        }
        absent_ = true;
        sink_->beginList();
        sink_->endList("");
        state_ = State::kEmpty;
        co_await sleepFor(options_.max_backoff);
        continue;
      }
      if (!listed.ok()) {
        if (stopping_.load()) break;
        state_ = State::kEmpty;
        auto wait = nextBackoff();
        MUSTER_LOG_WARNING("List failed, retrying", "reflector", options_.name, "error",
                           listed.ToString(), "backoff", absl::StrCat(wait.count(), "ms"));
        co_await sleepFor(wait);
        continue;
      }
      backoff_ = std::chrono::milliseconds(0);
      if (std::exchange(absent_, false))
        MUSTER_LOG_INFO(0, "API served now", "reflector", options_.name);
    }
    auto started = std::chrono::steady_clock::now();
    uint64_t events_before = events_.load() + bookmarks_.load();
    absl::Status watched = co_await watchOnce();
    if (stopping_.load()) break;
    if (gone_ || isGone(watched)) {
      relists_gone_.fetch_add(1);
      relistsMetric().with({options_.name}).inc();
      MUSTER_LOG_INFO(2, "Watch expired (410 Gone), relisting", "reflector", options_.name,
                      "resourceVersion", last_rv_);
      state_ = State::kEmpty;
      continue;
    }
    bool progressed = events_.load() + bookmarks_.load() > events_before ||
                      std::chrono::steady_clock::now() - started > std::chrono::seconds(10);
    if (watched.ok()) {
      // Server-side timeout: resume at once from the last resourceVersion.
      MUSTER_LOG_INFO(3, "Watch closed by server, resuming", "reflector", options_.name,
                      "resourceVersion", last_rv_);
      if (progressed) backoff_ = std::chrono::milliseconds(0);
      else co_await sleepFor(nextBackoff());
      continue;
    }
    watch_errors_.fetch_add(1);
    watchErrorsMetric().with({options_.name}).inc();
    if (progressed) backoff_ = std::chrono::milliseconds(0);
    auto wait = nextBackoff();
    MUSTER_LOG_WARNING("Watch failed, resuming after backoff", "reflector", options_.name,
                       "resourceVersion", last_rv_, "error", watched.ToString(), "backoff",
                       absl::StrCat(wait.count(), "ms"));
    co_await sleepFor(wait);
  }
  MUSTER_LOG_INFO(2, "Reflector stopped", "reflector", options_.name);
}

}  // namespace muster::proto
