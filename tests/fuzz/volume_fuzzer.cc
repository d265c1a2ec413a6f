// A PersistentVolume and a PersistentVolumeClaim as the API server sends them, decoded and used the
// way the scheduler uses them: the volume's node affinity filters nodes (filterVolumeBinding) and
// must say exactly what the selector itself says.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "scheduler/cache.h"
#include "scheduler/filter.h"
#include "scheduler/pod_info.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::asText(data, size);
  proto::PersistentVolumeClaim claim;
  if (proto::decodeJson(text, &claim).ok()) (void)claim.isBound();
  proto::PersistentVolume pv;
  if (!proto::decodeJson(text, &pv).ok()) return 0;

  proto::Pod pod;
  pod.meta.name = "p";
  pod.meta.namespace_ = "ml";
  absl::StatusOr<scheduler::PodInfoPtr> info = scheduler::makePodInfo(
      pod, {scheduler::VolumeConstraint{"data", pv.meta.name, true, pv.node_affinity}});
  FUZZ_CHECK(info.ok(), info.status().ToString());
  FUZZ_CHECK((*info)->has_node_selector, "a pod with a volume never takes the unfiltered path");

  proto::Node node;
  node.meta.name = "n1";
  node.meta.labels = {{"kubernetes.io/hostname", "n1"}, {"zone", "a"}, {"size", "8"}};
  node.status.conditions = {{"Ready", "True", "", ""}};
  scheduler::ClusterCache cache({});
  cache.addNode(node);
  const scheduler::NodeInfo& n = cache.node(*cache.findNode("n1"));
  const bool reachable =
      !pv.node_affinity || pv.node_affinity->matches(node.meta.labels, node.meta.name);
  const scheduler::Status verdict = scheduler::filterVolumeBinding(**info, n);
  FUZZ_CHECK(verdict.ok() == reachable, pv.meta.name);
  FUZZ_CHECK(scheduler::filterStatic(**info, n).ok() == reachable, pv.meta.name);
  return 0;
}
