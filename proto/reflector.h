#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/asio.h"
#include "proto/client.h"
#include "rapidjson/document.h"

namespace muster::proto {

// The two calls a reflector makes. The seam between the list/watch protocol and the transport:
// ClientListerWatcher talks to the API server, tests substitute a scripted fake.
class ListerWatcher {
 public:
  virtual ~ListerWatcher() = default;
  // One page of a consistent list, at most `limit` items. `continue_token` empty for the first
  // page. A page larger than the transport accepts is a ResourceExhausted error: the reflector
  // asks again for fewer items.
  virtual asio::awaitable<absl::StatusOr<std::string>> listPage(int64_t limit,
                                                                std::string continue_token) = 0;
  // A watch from `resource_version` with bookmarks requested; `on_line` gets each event's JSON.
  // Returns OK when the server closes the stream (e.g. its timeout), an error otherwise; a 410
  // answer to the request is an error for which isGone() holds.
  virtual asio::awaitable<absl::Status> watch(
      std::string resource_version, int timeout_seconds,
      std::function<absl::Status(std::string_view line)> on_line) = 0;
  // Ends the current watch (and makes later ones end at once). Thread-safe.
  virtual void cancel() = 0;
};
using ListerWatcherPtr = std::unique_ptr<ListerWatcher>;

struct ListWatchOptions {
  std::string namespace_;  // empty: all namespaces
  std::string label_selector;
  std::string field_selector;
  // The API may not be served (a feature-gated built-in API, a CRD not installed): a list answered
  // 404 counts as an empty list, so the informer is synced and empty; the list is tried again
  // every max_backoff, so the API is picked up once it is served.
  bool may_be_absent = false;
};

ListerWatcherPtr makeClientListerWatcher(std::shared_ptr<Client> client, Resource resource,
                                         ListWatchOptions options = {});

enum class WatchEventType { kAdded, kModified, kDeleted };

// Where a reflector delivers what it learns. Called only from the reflector's coroutine.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A (re)list starts: drop anything pending from an earlier, abandoned list.
  virtual void beginList() = 0;
  // A listed object. One the reflector cannot read (nested too deep, too large) is not passed:
  // it is missing from the list, so endList deletes a cached copy; it is logged and counted.
  virtual void listItem(const rapidjson::Value& object) = 0;
  // The list is complete at `resource_version`: replace the cache with the listed items at once,
  // emitting deletes for objects that are gone.
  virtual void endList(const std::string& resource_version) = 0;
  virtual void watchEvent(WatchEventType type, const rapidjson::Value& object) = 0;
};

struct ReflectorOptions {
  int64_t page_size = 500;
  std::chrono::milliseconds initial_backoff{800};
  std::chrono::milliseconds max_backoff{30000};
  int min_watch_timeout_seconds = 300;  // randomised in [min, 2*min) like client-go
  std::string name = "reflector";       // for logs and metrics: usually the resource
  bool may_be_absent = false;           // ListWatchOptions::may_be_absent
};

struct ReflectorStats {
  uint64_t lists = 0;          // completed lists (the first one included)
  uint64_t relists_gone = 0;   // lists forced by 410 Gone
  uint64_t watches = 0;        // watch requests opened
  uint64_t watch_errors = 0;   // watches that ended in an error other than 410
  uint64_t events = 0;         // ADDED/MODIFIED/DELETED delivered
  uint64_t bookmarks = 0;
  uint64_t bad_events = 0;     // undecodable lines, skipped and logged
  // List items that could not be read (nested too deep, too large, not an object), skipped and
  // logged with their namespace/name (or their place in the page).
  uint64_t skipped_items = 0;
};

// client-go's reflector protocol, as an explicit state machine:
//   Empty -> InitPage (listing, page by page) -> InitListed (cache replaced) -> Watching
// List pages are read item by item, each item within a watch event's limits, so an object that
// can be watched can be listed; an item that cannot be read is skipped (and logged with its
// namespace/name, or its place in the page, and counted in
// muster_informer_undecodable_objects_total) instead of failing the list. A page larger than the
// transport accepts is asked for again with half the items, down to one.
// Watching resumes from the last seen resourceVersion after a server timeout or a dropped
// connection (with backoff for errors); a 410 Gone, as an HTTP status or as an ERROR event,
// goes back to Empty and relists. All methods of this class run on the executor passed to run().
class Reflector {
 public:
  enum class State { kEmpty, kInitPage, kInitListed, kWatching };

  Reflector(ListerWatcherPtr lister_watcher, ReflectorSink* sink, ReflectorOptions options = {});

  // Runs until stop() or until the executor stops. Never throws.
  asio::awaitable<void> run();
  void stop();  // thread-safe; takes effect at the next step

  State state() const { return state_.load(); }
  const std::string& lastResourceVersion() const { return last_rv_; }
  ReflectorStats stats() const;

 private:
  asio::awaitable<absl::Status> listAll();
  asio::awaitable<absl::Status> watchOnce();
  absl::Status handleLine(std::string_view line);
  asio::awaitable<void> sleepFor(std::chrono::milliseconds d);
  std::chrono::milliseconds nextBackoff();

  ListerWatcherPtr lw_;
  ReflectorSink* sink_;
  ReflectorOptions options_;
  std::atomic<State> state_{State::kEmpty};
  std::atomic<bool> stopping_{false};
  std::string last_rv_;
  bool gone_ = false;  // set by an ERROR 410 event during the current watch
  bool absent_ = false;  // may_be_absent, and the last list was answered 404
  std::chrono::milliseconds backoff_{0};
  std::mt19937_64 rng_;
  // Stats are written on the reflector's executor and read from anywhere.
  std::atomic<uint64_t> lists_{0}, relists_gone_{0}, watches_{0}, watch_errors_{0}, events_{0},
      bookmarks_{0}, bad_events_{0}, skipped_items_{0};
};

}  // namespace muster::proto
