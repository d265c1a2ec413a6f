#pragma once

// The scheduling loop: informers (pods, nodes, PodGroups, NodeTopologies) feed the ClusterCache and the
// SchedulingQueue; one gang at a time is decided against the cache, assumed whole, and bound
// concurrently. Everything stateful runs on one strand (strand_); informer handlers post to it.
//
// A gang is never left partly bound: a failed bind leaves the bound members in place and requeues
// the rest, whose next placement must join them; when it cannot, the bound members are evicted
// (or, for pods no controller would recreate, reported). After a crash the same holds, because
// the queue learns bound members from the API server on restart.

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "proto/asio.h"
#include "proto/client.h"
#include "proto/informer.h"
#include "proto/nodetopology.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/placement.h"
#include "scheduler/queue.h"
#include "scheduler/recorder.h"

namespace muster::scheduler {

class Scheduler {
 public:
  Scheduler(std::shared_ptr<proto::Client> client, SchedulerConfig config,
            proto::asio::any_io_executor executor, std::string identity);
  ~Scheduler();

  // Starts the informers (they may already be running for the job engine: pass them in later
  // issues) and the scheduling loop. Call once.
  void start();
  // Stops scheduling at once: no new decision or bind starts after this returns.
  void stop();
  // Pods and nodes are listed and the loop runs.
  bool ready() const { return ready_.load(); }

 private:
  struct BindBatch;

  // --- on strand_ ---
  proto::asio::awaitable<void> loop();
  proto::asio::awaitable<void> housekeeping();
  void kick();
  void onPodAdd(const std::shared_ptr<const proto::Pod>& pod);
  void onPodUpdate(const std::shared_ptr<const proto::Pod>& old_pod,
                   const std::shared_ptr<const proto::Pod>& pod);
  void onPodDelete(const std::shared_ptr<const proto::Pod>& pod);
  void queuePod(const proto::Pod& pod);
  void onNode(const std::shared_ptr<const proto::Node>& old_node,
              const std::shared_ptr<const proto::Node>& node);
  void onPodGroup(const std::shared_ptr<const proto::PodGroup>& group, bool deleted);
  void onNodeTopology(const std::shared_ptr<const proto::NodeTopology>& topology, bool deleted);
  void scheduleOne(GangAttempt attempt);
  void reportUnschedulable(const GangAttempt& attempt, const Unschedulable& verdict);
  void bindGang(const GangAttempt& attempt, const GangPlacement& placement);
  void onBound(const std::shared_ptr<BindBatch>& batch, size_t index, absl::Status status);
  void evictBoundMembers(const GangAttempt& attempt, const std::string& why);
  void syncPodGroupStatus();
  void updateGauges();

  std::shared_ptr<proto::Client> client_;
  const SchedulerConfig config_;
  const std::string identity_;
  proto::asio::any_io_executor executor_;
  proto::asio::strand<proto::asio::any_io_executor> strand_;
  Recorder recorder_;

  std::unique_ptr<proto::Informer<proto::Pod>> pods_;
  std::unique_ptr<proto::Informer<proto::Node>> nodes_;
  std::unique_ptr<proto::Informer<proto::PodGroup>> pod_groups_;
  // Not waited for: without the CRD or any agent, placement ignores GPU↔NIC alignment.
  std::unique_ptr<proto::Informer<proto::NodeTopology>> topologies_;

  // On strand_.
  ClusterCache cache_;
  std::map<std::string, std::shared_ptr<const proto::PodGroup>> groups_;  // "ns/name"
  SchedulingQueue queue_;
  std::unique_ptr<proto::asio::steady_timer> wakeup_;
  std::map<std::string, proto::PodGroupStatus> group_status_written_;
  proto::ReflectorStats seen_pod_stats_, seen_node_stats_;

  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace muster::scheduler
