#pragma once

// The status of scheduling.x-k8s.io PodGroups (phase, scheduled, running, succeeded, failed,
// scheduleStartTime), kept current as the coscheduling plugin's controller does.
//
// Driven by changes, not by a poll: a pod of the group (label scheduling.x-k8s.io/pod-group)
// changed, or the group itself did. A burst of changes to one group becomes one write: a group
// made dirty is written `delay` later. A status is written only when it differs from what the
// object shows and from what was last sent (the informer may not have caught up yet); a refused
// write is forgotten, so the next change writes again.
//
// Threading: every method runs on the strand given at construction (the scheduler's).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/asio.h"
#include "proto/clock.h"
#include "proto/objects.h"
#include "scheduler/api.h"

namespace muster::scheduler {

// The status `group` should show given its pods (pure; scheduleStartTime is kept, set to `now`
// when empty).
proto::PodGroupStatus podGroupStatusFor(const proto::PodGroup& group,
                                        const std::vector<std::shared_ptr<const proto::Pod>>& pods,
                                        absl::Time now);

class PodGroupStatusUpdater {
 public:
  // The pods labelled with the group "namespace/name".
  using PodsOfGroup =
      std::function<std::vector<std::shared_ptr<const proto::Pod>>(const std::string& group_key)>;

  PodGroupStatusUpdater(SchedulerApiPtr api,
                        proto::asio::strand<proto::asio::any_io_executor> strand,
                        proto::Clock clock, PodsOfGroup pods_of_group,
                        absl::Duration delay = absl::Milliseconds(250));

  void onPod(const proto::Pod& pod);
  void onPodGroup(const std::shared_ptr<const proto::PodGroup>& group, bool deleted);
  void stop();

  // Writes the dirty groups now (the timer does it after `delay`; tests call it directly).
  void flush();

 private:
  void markDirty(const std::string& group_key);

  SchedulerApiPtr api_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  proto::Clock clock_;
  PodsOfGroup pods_of_group_;
  absl::Duration delay_;
  bool stopped_ = false;
  std::map<std::string, std::shared_ptr<const proto::PodGroup>> groups_;  // "ns/name"
  std::map<std::string, proto::PodGroupStatus> written_;
  std::set<std::string> dirty_;
  std::unique_ptr<proto::asio::steady_timer> timer_;
  bool armed_ = false;
};

}  // namespace muster::scheduler
