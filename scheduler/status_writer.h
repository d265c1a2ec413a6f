#pragma once

// The PodScheduled condition the scheduler sets on pods it cannot place (False, reason
// Unschedulable, with a message a person can act on) or must not place yet (False, reason
// SchedulingGated), as kube-scheduler does.
//
// Contract: writes for one pod go out one at a time and in order; a newer write for a pod
// replaces an older one that has not been sent yet, so concurrent patches can never land in the
// wrong order and leave a stale message behind. A write the pod already reflects is skipped.
// Refused writes are logged and counted (muster_api_write_errors_total{kind="status"}), never
// retried: the next attempt writes again. Every method is thread-safe (own strand).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "proto/asio.h"
#include "proto/clock.h"
#include "proto/objects.h"
#include "scheduler/api.h"

namespace muster::scheduler {

class PodStatusWriter {
 public:
  PodStatusWriter(SchedulerApiPtr api, proto::asio::any_io_executor executor, proto::Clock clock);

  void unschedulable(const proto::Pod& pod, std::string message);
  void gated(const proto::Pod& pod);
  // The pod already shows PodScheduled=False with this reason and message (so a caller that
  // would also record an Event for it has done so: the write is what changed the pod).
  static bool reflects(const proto::Pod& pod, std::string_view reason, std::string_view message);

 private:
  struct Pending {
    bool in_flight = false;
    std::optional<std::pair<PodRef, proto::PodCondition>> next;
  };
  void set(const proto::Pod& pod, std::string_view reason, std::string message);
  void write(PodRef pod, proto::PodCondition condition);

  SchedulerApiPtr api_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  proto::Clock clock_;
  std::map<std::string, Pending> pending_;  // on strand_, by pod key
};

}  // namespace muster::scheduler
