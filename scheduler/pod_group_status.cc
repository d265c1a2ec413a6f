#include "scheduler/pod_group_status.h"

#include <algorithm>

#include "proto/codec.h"
#include "proto/coroutine.h"
#include "proto/informer.h"
#include "proto/log.h"
#include "proto/vocabulary.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {
namespace asio = proto::asio;

namespace {
bool sameCounts(const proto::PodGroupStatus& a, const proto::PodGroupStatus& b) {
  return a.phase == b.phase && a.scheduled == b.scheduled && a.running == b.running &&
         a.succeeded == b.succeeded && a.failed == b.failed;
}
}  // namespace

proto::PodGroupStatus podGroupStatusFor(const proto::PodGroup& group,
                                        const std::vector<std::shared_ptr<const proto::Pod>>& pods,
                                        absl::Time now) {
  proto::PodGroupStatus status;
  for (const auto& pod : pods) {
    if (pod->status.phase == "Succeeded") ++status.succeeded;
    else if (pod->status.phase == "Failed") ++status.failed;
    else if (pod->status.phase == "Running") ++status.running;
    if (!pod->spec.node_name.empty() && !isTerminal(*pod)) ++status.scheduled;
  }
  const int32_t min_member = std::max<int32_t>(1, group.spec.min_member);
  if (status.running + status.succeeded >= min_member && status.running > 0) status.phase = "Running";
  else if (status.succeeded >= min_member && status.running == 0) status.phase = "Finished";
  else if (status.failed > 0 && status.running + status.scheduled < min_member) status.phase = "Failed";
  else if (status.scheduled >= min_member) status.phase = "Scheduled";
  else if (status.scheduled > 0) status.phase = "Scheduling";
  else status.phase = "Pending";
  status.schedule_start_time = group.status.schedule_start_time;
  status.occupied_by = group.status.occupied_by;
  if (status.schedule_start_time.empty()) status.schedule_start_time = proto::rfc3339(now);
  return status;
}

PodGroupStatusUpdater::PodGroupStatusUpdater(SchedulerApiPtr api,
                                             asio::strand<asio::any_io_executor> strand,
                                             proto::Clock clock, PodsOfGroup pods_of_group,
                                             absl::Duration delay)
    : api_(std::move(api)),
      strand_(std::move(strand)),
      clock_(std::move(clock)),
      pods_of_group_(std::move(pods_of_group)),
      delay_(delay),
      timer_(std::make_unique<asio::steady_timer>(strand_)) {}

void PodGroupStatusUpdater::onPod(const proto::Pod& pod) {
  auto it = pod.meta.labels.find(proto::vocabulary::kPodGroupLabel);
  if (it == pod.meta.labels.end()) return;
  markDirty(proto::objectKey(pod.meta.namespace_, it->second));
}

void PodGroupStatusUpdater::onPodGroup(const std::shared_ptr<const proto::PodGroup>& group,
                                       bool deleted) {
  const std::string key = proto::objectKey(*group);
  if (deleted) {
    groups_.erase(key);
    written_.erase(key);
    dirty_.erase(key);
    return;
  }
  groups_[key] = group;
  markDirty(key);
}

void PodGroupStatusUpdater::stop() {
  stopped_ = true;
  timer_->cancel();
}

void PodGroupStatusUpdater::markDirty(const std::string& group_key) {
  if (stopped_ || !groups_.count(group_key)) return;
  dirty_.insert(group_key);
  if (armed_) return;
  armed_ = true;
  timer_->expires_after(absl::ToChronoMilliseconds(delay_));
  timer_->async_wait([this](const boost::system::error_code& ec) {
    armed_ = false;
    if (ec || stopped_) return;
    flush();
  });
}

void PodGroupStatusUpdater::flush() {
  std::set<std::string> dirty;
  dirty.swap(dirty_);
  const absl::Time now = clock_();
  for (const std::string& key : dirty) {
    auto g = groups_.find(key);
    if (g == groups_.end()) continue;
    const proto::PodGroup& group = *g->second;
    proto::PodGroupStatus status = podGroupStatusFor(group, pods_of_group_(key), now);
    if (sameCounts(group.status, status)) continue;
    if (auto w = written_.find(key); w != written_.end() && sameCounts(w->second, status))
      continue;  // already sent; the informer has not caught up
    written_[key] = status;
    asio::co_spawn(strand_, [this, api = api_, ns = group.meta.namespace_, name = group.meta.name,
                             key, status]() -> asio::awaitable<void> {
      absl::Status result = co_await api->setPodGroupStatus(ns, name, status);
      if (!result.ok()) {
        MUSTER_LOG_WARNING("PodGroup status update refused", "podgroup", key, "error",
                           result.ToString());
        written_.erase(key);
      }
    }, proto::dieOnException("PodGroup status write"));
  }
}

}  // namespace muster::scheduler
