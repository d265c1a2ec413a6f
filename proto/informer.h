#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/asio.h"
#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/log.h"
#include "proto/metrics.h"
#include "proto/reflector.h"

namespace muster::proto {

// "namespace/name", or "name" for cluster-scoped objects: the informer cache's primary key.
inline std::string objectKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key;
  key.reserve(ns.size() + 1 + name.size());
  key.append(ns).append("/").append(name);
  return key;
}
template <class T>
std::string objectKey(const T& obj) {
  return objectKey(obj.meta.namespace_, obj.meta.name);
}

// For objects that do not decode: "namespace/name" (or "name") read leniently from
// metadata, "" when even that is missing; metadata.resourceVersion the same way.
std::string undecodableKey(const rapidjson::Value& object);
std::string undecodableResourceVersion(const rapidjson::Value& object);
// muster_informer_undecodable_objects_total{resource="<name>"}.
metrics::Counter& undecodableObjects(const std::string& resource);

// Add/update/delete notifications. Called on the informer's executor, in the order the cache
// changed; the objects are immutable snapshots shared with the cache.
template <class T>
struct InformerHandlers {
  std::function<void(const std::shared_ptr<const T>&)> on_add;
  std::function<void(const std::shared_ptr<const T>& old_obj, const std::shared_ptr<const T>& obj)>
      on_update;
  std::function<void(const std::shared_ptr<const T>&)> on_delete;
};

// An indexer maps an object to the index values it is filed under (e.g. a pod to its node).
template <class T>
using IndexFunc = std::function<std::vector<std::string>(const T&)>;

// What every informer offers without knowing its object type: the informer factory and the
// process's health checks use it.
class InformerBase {
 public:
  virtual ~InformerBase() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual bool hasSynced() const = 0;
  virtual size_t size() const = 0;
  virtual ReflectorStats stats() const = 0;
};

// A list/watch-fed cache of one kind of object, keyed by namespace/name, with secondary
// indexes. The reflector runs on a strand of the given executor; handlers run there too.
// Readers (get, list, byIndex) may be called from any thread.
//
// Handlers and indexes are usually registered before start(); registered later, a handler is
// first told about every object already cached (as adds, before any newer change), and an index
// is built from the cache at once, so a component that joins late misses nothing.
//
// An object the API server sends that does not decode (a field of the wrong type, a quantity
// out of range, ...) is treated as deleted: a stale cached copy would be acted on as if it were
// current. A listed one is left out of the cache; one arriving by watch removes the cached copy
// (handlers get a delete). Each is logged with its namespace/name and counted in
// muster_informer_undecodable_objects_total{resource}.
template <class T>
class Informer final : public InformerBase {
 public:
  Informer(ListerWatcherPtr lister_watcher, asio::any_io_executor executor,
           ReflectorOptions options = {})
      : state_(std::make_shared<State>(std::move(lister_watcher), executor, std::move(options))) {}
  // Stops: no handler runs once the destructor returns. The reflector's coroutine keeps the
  // shared state alive until it notices, so destroying a running informer is safe.
  ~Informer() override { stop(); }

  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void addHandlers(InformerHandlers<T> handlers) {
    std::lock_guard<std::mutex> lock(state_->handlers_mu);
    if (state_->started && !state_->stopped && handlers.on_add) {
      // Under the handler lock, so no newer notification can overtake these.
      for (const auto& obj : list()) handlers.on_add(obj);
    }
    state_->handlers.push_back(std::move(handlers));
  }
  void addIndex(std::string name, IndexFunc<T> func) {
    absl::MutexLock lock(&state_->mu);
    auto& index = state_->indices[name];
    for (const auto& [key, obj] : state_->items)
      for (const auto& value : func(*obj)) index[value].insert(key);
    state_->indexers.emplace(std::move(name), std::move(func));
  }

  // Idempotent: the first call starts the reflector.
  void start() override {
    {
      std::lock_guard<std::mutex> lock(state_->handlers_mu);
      if (state_->started) return;
      state_->started = true;
    }
    asio::co_spawn(state_->strand, [state = state_]() -> asio::awaitable<void> {
      co_await state->reflector.run();
    }, dieOnException("reflector"));
  }
  // Thread-safe and idempotent. Handlers must not call it (they run under the handler lock).
  void stop() override {
    {
      std::lock_guard<std::mutex> lock(state_->handlers_mu);
      state_->stopped = true;
    }
    state_->reflector.stop();
  }

  bool hasSynced() const override {
    absl::MutexLock lock(&state_->mu);
    return state_->synced;
  }
  // Blocks until the first list has been applied or the timeout passes. Not for the executor's
  // own thread.
  bool waitForSync(std::chrono::milliseconds timeout) const {
    State* s = state_.get();
    absl::MutexLock lock(&s->mu);
    return s->mu.AwaitWithTimeout(absl::Condition(&s->synced), absl::Milliseconds(timeout.count()));
  }

  std::shared_ptr<const T> get(std::string_view ns, std::string_view name) const {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->items.find(objectKey(ns, name));
    return it == state_->items.end() ? nullptr : it->second;
  }
  std::vector<std::shared_ptr<const T>> list() const {
    absl::MutexLock lock(&state_->mu);
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(state_->items.size());
    for (const auto& [key, obj] : state_->items) out.push_back(obj);
    return out;
  }
  size_t size() const override {
    absl::MutexLock lock(&state_->mu);
    return state_->items.size();
  }
  std::vector<std::shared_ptr<const T>> byIndex(std::string_view index,
                                                std::string_view value) const {
    absl::MutexLock lock(&state_->mu);
    std::vector<std::shared_ptr<const T>> out;
    auto idx = state_->indices.find(std::string(index));
    if (idx == state_->indices.end()) return out;
    auto keys = idx->second.find(std::string(value));
    if (keys == idx->second.end()) return out;
    for (const auto& key : keys->second) {
      if (auto it = state_->items.find(key); it != state_->items.end()) out.push_back(it->second);
    }
    return out;
  }

  std::string lastResourceVersion() const {
    absl::MutexLock lock(&state_->mu);
    return state_->last_rv;
  }
  ReflectorStats stats() const override { return state_->reflector.stats(); }
  Reflector::State state() const { return state_->reflector.state(); }
  asio::strand<asio::any_io_executor> strand() const { return state_->strand; }

 private:
  using Ptr = std::shared_ptr<const T>;

  // Everything the reflector's coroutine touches, shared with it so it outlives the Informer
  // object until the coroutine ends.
  struct State final : ReflectorSink {
    State(ListerWatcherPtr lw, asio::any_io_executor ex, ReflectorOptions options)
        : strand(asio::make_strand(ex)),
          undecodable(undecodableObjects(options.name)),
          name(options.name),
          reflector(std::move(lw), this, std::move(options)) {}

    asio::strand<asio::any_io_executor> strand;
    metrics::Counter& undecodable;
    std::string name;
    Reflector reflector;

    std::mutex handlers_mu;  // held while handlers run, so stop() waits for a running one
    std::vector<InformerHandlers<T>> handlers;
    bool started = false;
    bool stopped = false;

    mutable absl::Mutex mu;
    absl::flat_hash_map<std::string, Ptr> items ABSL_GUARDED_BY(mu);
    std::map<std::string, IndexFunc<T>> indexers ABSL_GUARDED_BY(mu);
    std::map<std::string, std::map<std::string, std::set<std::string>>> indices ABSL_GUARDED_BY(mu);
    std::string last_rv ABSL_GUARDED_BY(mu);
    bool synced ABSL_GUARDED_BY(mu) = false;

    std::map<std::string, Ptr> pending;  // the list being received; reflector coroutine only

    // --- ReflectorSink (the reflector's coroutine) ---
    void beginList() override { pending.clear(); }
    void listItem(const rapidjson::Value& object) override {
      if (auto obj = decodeObject(object)) pending.emplace(objectKey(*obj), std::move(obj));
    }
    void endList(const std::string& rv) override {
      replace(std::move(pending), rv);
      pending.clear();
    }
    void watchEvent(WatchEventType type, const rapidjson::Value& object) override {
      apply(type, object);
    }

    Ptr decodeObject(const rapidjson::Value& object) {
      auto obj = std::make_shared<T>();
      absl::Status status = decode(object, obj.get());
      if (!status.ok()) {
        undecodable.inc();
        MUSTER_LOG_ERROR("Object does not decode: treated as deleted", "resource", name,
                         "object", undecodableKey(object), "error", status.ToString());
        return nullptr;
      }
      return obj;
    }

    void unindex(const std::string& key, const T& obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      for (const auto& [name, func] : indexers) {
        auto& index = indices[name];
        for (const auto& value : func(obj)) {
          auto it = index.find(value);
          if (it == index.end()) continue;
          it->second.erase(key);
          if (it->second.empty()) index.erase(it);
        }
      }
    }
    void reindex(const std::string& key, const T& obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      for (const auto& [name, func] : indexers) {
        auto& index = indices[name];
        for (const auto& value : func(obj)) index[value].insert(key);
      }
    }

    // Atomically replaces the cache with a complete list, then notifies: deletes for objects
    // that vanished, adds for new ones, updates for those whose resourceVersion changed.
    void replace(std::map<std::string, Ptr> listed, const std::string& rv) {
      struct Change { Ptr old_obj; Ptr obj; };
      std::vector<Change> changes;
      {
        absl::MutexLock lock(&mu);
        for (const auto& [key, old_obj] : items) {
          if (!listed.count(key)) changes.push_back({old_obj, nullptr});
        }
        for (const auto& [key, obj] : listed) {
          auto it = items.find(key);
          if (it == items.end()) changes.push_back({nullptr, obj});
          else if (it->second->meta.resource_version != obj->meta.resource_version)
            changes.push_back({it->second, obj});
        }
        items.clear();
        indices.clear();
        for (auto& [key, obj] : listed) {
          reindex(key, *obj);
          items.emplace(key, std::move(obj));
        }
        last_rv = rv;
      }
      for (const auto& c : changes) notify(c.old_obj, c.obj);
      // Synced only once the handlers have seen the whole first list: a consumer that waits for
      // sync and then acts on what its handlers built (the scheduler's cache) misses nothing.
      absl::MutexLock lock(&mu);
      synced = true;
    }

    void apply(WatchEventType type, const rapidjson::Value& object) {
      Ptr obj = decodeObject(object);
      if (!obj) {
        forget(object);
        return;
      }
      std::string key = objectKey(*obj);
      Ptr old_obj;
      {
        absl::MutexLock lock(&mu);
        auto it = items.find(key);
        if (it != items.end()) {
          old_obj = it->second;
          unindex(key, *old_obj);
          items.erase(it);
        }
        if (type != WatchEventType::kDeleted) {
          reindex(key, *obj);
          items.emplace(key, obj);
        }
        last_rv = obj->meta.resource_version;
      }
      if (type == WatchEventType::kDeleted) {
        // A delete for an object never seen still tells the handlers its final state.
        notify(old_obj ? old_obj : obj, nullptr);
      } else {
        notify(old_obj, obj);
      }
    }

    // A watched object that did not decode: its cached copy (if any) goes, as if deleted.
    void forget(const rapidjson::Value& object) {
      const std::string key = undecodableKey(object);
      Ptr old_obj;
      {
        absl::MutexLock lock(&mu);
        if (std::string rv = undecodableResourceVersion(object); !rv.empty()) last_rv = rv;
        auto it = items.find(key);
        if (it == items.end()) return;
        old_obj = it->second;
        unindex(key, *old_obj);
        items.erase(it);
      }
      notify(old_obj, nullptr);
    }

    void notify(const Ptr& old_obj, const Ptr& obj) {
      std::lock_guard<std::mutex> lock(handlers_mu);
      if (stopped) return;
      for (const auto& h : handlers) {
        if (!old_obj && obj) {
          if (h.on_add) h.on_add(obj);
        } else if (old_obj && obj) {
          if (h.on_update) h.on_update(old_obj, obj);
        } else if (old_obj && !obj) {
          if (h.on_delete) h.on_delete(old_obj);
        }
      }
    }
  };

  std::shared_ptr<State> state_;
};

// Pods indexed by spec.nodeName under this index name (empty nodeName is not indexed).
inline constexpr char kPodsByNodeIndex[] = "spec.nodeName";

}  // namespace muster::proto
