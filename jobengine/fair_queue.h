#pragma once

// The job engine's work queue, fair between owners (issue 43, item 12): keys are popped
// round-robin across the owners that have keys waiting, each owner's own keys first come, first
// served. One owner's 5,000 queued jobs then delay another owner's job by at most one pop per
// other owner with work, instead of by 5,000 reconciles.
//
// A key is queued at most once: pushing a key already queued does nothing (it keeps its place and
// its first owner), as a key's `queued` flag did when the queue was one deque. Not thread-safe:
// the controller uses it on its strand.

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace muster::jobengine {

class FairQueue {
 public:
  // Queues `key` under `owner`; false (and nothing changes) when the key is already queued.
  bool push(const std::string& owner, const std::string& key);
  // The next key: the oldest key of the owner whose turn it is; nullopt when empty.
  std::optional<std::string> pop();
  bool contains(const std::string& key) const { return owner_of_.count(key) != 0; }
  size_t size() const { return owner_of_.size(); }
  bool empty() const { return owner_of_.empty(); }
  // Owners with keys waiting.
  size_t owners() const { return by_owner_.size(); }

 private:
  // Each owner with keys waiting, and its keys in the order pushed.
  std::unordered_map<std::string, std::deque<std::string>> by_owner_;
  // The owners with keys waiting, in turn order: the front is popped next and, if it still has
  // keys, goes to the back. An owner joins at the back.
  std::deque<std::string> turns_;
  // Every queued key and its owner (the de-duplication).
  std::unordered_map<std::string, std::string> owner_of_;
};

}  // namespace muster::jobengine
