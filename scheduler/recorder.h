#pragma once

// What the scheduler tells people: Events (as kube-scheduler writes them: `Scheduled`,
// `FailedScheduling`) and the pods' PodScheduled condition. Writes are best effort and rate
// limited so a 1,000-pod gang cannot flood the API server; dropped events are counted in
// muster_events_dropped_total. Runs on its own strand; every method is thread-safe.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "proto/asio.h"
#include "proto/client.h"
#include "proto/codec.h"
#include "proto/objects.h"

namespace muster::scheduler {

struct RecorderOptions {
  std::string component = "muster-scheduler";
  std::string instance;            // reporting instance (the scheduler's identity)
  double events_per_second = 20;   // token bucket for all events
  int events_burst = 100;
  int max_per_object_per_minute = 10;  // per involved object + reason
};

class Recorder {
 public:
  Recorder(std::shared_ptr<proto::Client> client, proto::asio::any_io_executor executor,
           RecorderOptions options);

  // An Event about `pod` (type "Normal" or "Warning"), unless rate limits say no.
  void event(const proto::Pod& pod, std::string type, std::string reason, std::string message);
  // An Event about any object, given its reference.
  void event(proto::ObjectReference ref, std::string type, std::string reason,
             std::string message);
  // Sets PodScheduled=False/Unschedulable with `message` on `pod`, unless it already says so.
  void unschedulable(const proto::Pod& pod, const std::string& message);

 private:
  bool admit(const std::string& key);
  void post(proto::Request request, std::string what);
  // Status writes for one pod go out one at a time, in order, the newest pending one replacing
  // any older one not yet sent: concurrent patches could land in the wrong order and leave a
  // stale condition behind.
  void writeStatus(const std::string& pod_key, proto::Request request);

  std::shared_ptr<proto::Client> client_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  RecorderOptions options_;
  // On strand_.
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, int>> per_object_;
  struct StatusWrites {
    bool in_flight = false;
    std::optional<proto::Request> next;
  };
  std::map<std::string, StatusWrites> status_writes_;
};

using proto::rfc3339Now;  // RFC 3339 in UTC with second precision, as metav1.Time

}  // namespace muster::scheduler
