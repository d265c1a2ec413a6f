#pragma once

// One informer per kind of object per process, shared by every component that needs it (the
// scheduler, the job engine, the Slurm controller): one list and one watch per resource type
// against the API server, one cache in memory. Each component adds its own handlers and indexes.
//
// Usage (the composition root, scheduler/cmd/):
//   InformerFactory informers(client, executor);
//   Scheduler scheduler(..., informers);   // asks for pods, nodes, ...; registers handlers
//   jobengine::Controller engine(..., informers);
//   informers.start();                     // when leading: every informer asked for so far
//
// informer<T>(resource) returns the same object for the same resource and options, whoever asks;
// asking again with another T is a programming error (it aborts). An informer asked for after
// start() starts at once. Not for use from handlers; otherwise thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <vector>

#include "proto/client.h"
#include "proto/informer.h"
#include "proto/log.h"
#include "proto/reflector.h"

namespace muster::proto {

// Makes the ListerWatcher behind one informer: the API server in production, a fake in tests.
using ListerWatcherMaker =
    std::function<ListerWatcherPtr(const Resource& resource, const ListWatchOptions& options)>;

class InformerFactory {
 public:
  InformerFactory(ListerWatcherMaker maker, asio::any_io_executor executor)
      : maker_(std::move(maker)), executor_(std::move(executor)) {}
  InformerFactory(std::shared_ptr<Client> client, asio::any_io_executor executor)
      : InformerFactory(
            [client = std::move(client)](const Resource& r, const ListWatchOptions& o) {
              return makeClientListerWatcher(client, r, o);
            },
            std::move(executor)) {}
  ~InformerFactory() { stop(); }
  InformerFactory(const InformerFactory&) = delete;
  InformerFactory& operator=(const InformerFactory&) = delete;

  template <class T>
  Informer<T>& informer(const Resource& resource, const ListWatchOptions& options = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = keyOf(resource, options);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (it->second.type != std::type_index(typeid(T))) {
        MUSTER_LOG_ERROR("Informer asked for with two object types", "resource", key);
        std::abort();
      }
      return static_cast<Informer<T>&>(*it->second.informer);
    }
    ReflectorOptions reflector;
    reflector.name = options.label_selector.empty() && options.field_selector.empty()
                         ? resource.plural
                         : key;
    reflector.may_be_absent = options.may_be_absent;
    auto created = std::make_unique<Informer<T>>(maker_(resource, options), executor_, reflector);
    Informer<T>& ref = *created;
    entries_.emplace(key, Entry{std::type_index(typeid(T)), std::move(created)});
    if (started_) ref.start();
    return ref;
  }

  // Starts every informer asked for so far; later ones start when asked for. Idempotent.
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
    for (auto& [key, entry] : entries_) entry.informer->start();
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, entry] : entries_) entry.informer->stop();
  }
  // Every informer asked for has applied its first list.
  bool hasSynced() const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, entry] : entries_)
      if (!entry.informer->hasSynced()) return false;
    return true;
  }
  // Informers by key ("pods", or "pods?labelSelector=…"), for metrics and tests.
  std::vector<std::pair<std::string, const InformerBase*>> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<std::string, const InformerBase*>> out;
    for (const auto& [key, entry] : entries_) out.emplace_back(key, entry.informer.get());
    return out;
  }

 private:
  struct Entry {
    std::type_index type;
    std::unique_ptr<InformerBase> informer;
  };
  static std::string keyOf(const Resource& r, const ListWatchOptions& o) {
    std::string key = r.group_version + "/" + r.plural;
    if (r.group_version == "v1") key = r.plural;
    if (!o.namespace_.empty()) key += "@" + o.namespace_;
    if (!o.label_selector.empty()) key += "?labelSelector=" + o.label_selector;
    if (!o.field_selector.empty()) key += (o.label_selector.empty() ? "?" : "&") +
                                          std::string("fieldSelector=") + o.field_selector;
    return key;
  }

  ListerWatcherMaker maker_;
  asio::any_io_executor executor_;
  mutable std::mutex mu_;
  bool started_ = false;
  std::map<std::string, Entry> entries_;
};

}  // namespace muster::proto
