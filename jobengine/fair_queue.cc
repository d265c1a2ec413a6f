#include "jobengine/fair_queue.h"

#include <utility>

namespace muster::jobengine {

bool FairQueue::push(const std::string& owner, const std::string& key) {
  if (!owner_of_.emplace(key, owner).second) return false;
  auto [it, added] = by_owner_.try_emplace(owner);
  if (added) turns_.push_back(owner);
  it->second.push_back(key);
  return true;
}

std::optional<std::string> FairQueue::pop() {
  if (turns_.empty()) return std::nullopt;
  std::string owner = std::move(turns_.front());
  turns_.pop_front();
  auto it = by_owner_.find(owner);
  std::string key = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty())
    by_owner_.erase(it);
  else
    turns_.push_back(std::move(owner));
  owner_of_.erase(key);
  return key;
}

}  // namespace muster::jobengine
