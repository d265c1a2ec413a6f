#pragma once

// Events about ParallelJobs (what `kubectl describe paralleljobs` shows). Best effort: a refused
// write is logged and counted, never retried. Thread-safe; writes run on their own strand.

#include <memory>
#include <string>

#include "proto/asio.h"
#include "proto/client.h"
#include "proto/codec.h"
#include "proto/objects.h"

namespace muster::jobengine {

class EventRecorder {
 public:
  EventRecorder(std::shared_ptr<proto::Client> client, proto::asio::any_io_executor executor,
                std::string component, std::string instance);

  void event(const proto::ParallelJob& job, std::string type, std::string reason,
             std::string message);

 private:
  std::shared_ptr<proto::Client> client_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  std::string component_;
  std::string instance_;
};

using proto::rfc3339Now;  // RFC 3339 in UTC with second precision, as metav1.Time

}  // namespace muster::jobengine
