// A Pod as the API server sends it (GET, list items, watch events), decoded and then used the way
// the scheduler uses every pod it sees: its requests summed, its affinity and tolerations
// evaluated, its requests accounted on a node in the cluster cache.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "scheduler/cache.h"
#include "scheduler/filter.h"
#include "scheduler/pod_info.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::Pod pod;
  if (!proto::decodeJson(fuzz::asText(data, size), &pod).ok()) return 0;

  (void)pod.findCondition("PodScheduled");
  (void)pod.meta.controllerRef();
  (void)scheduler::isTerminal(pod);
  (void)scheduler::unsupported(pod);
  if (pod.spec.affinity) {
    const proto::NodeAffinity& a = pod.spec.affinity->node_affinity;
    if (a.required) (void)a.required->matches(pod.meta.labels, pod.meta.name);
    (void)proto::preferredSchedulingScore(a.preferred, pod.meta.labels, pod.meta.name);
  }
  std::vector<proto::Taint> taints;
  for (const proto::Toleration& t : pod.spec.tolerations) taints.push_back({t.key, t.value, t.effect});
  (void)proto::findUntoleratedTaint(taints, pod.spec.tolerations);

  absl::StatusOr<scheduler::PodInfoPtr> info = scheduler::makePodInfo(pod);
  if (!info.ok()) return 0;
  const scheduler::Resources& r = (*info)->requests;
  for (int i = 0; i < scheduler::kMaxResources; ++i) {
    FUZZ_CHECK(r.v[i] >= 0, "a pod's requests are never negative");
  }
  (void)scheduler::formatResources(r);

  // Two copies of the pod bound to one node, then one removed: the node's accounting must stay
  // consistent (and free of overflow) whatever the amounts.
  scheduler::ClusterCache cache({"muster.dev/rack"});
  proto::Node node;
  node.meta.name = "n1";
  node.meta.labels["muster.dev/rack"] = "r1";
  node.status.allocatable["cpu"] = proto::Quantity::fromValue(64);
  node.status.allocatable["memory"] = *proto::Quantity::parse("8Ei");
  node.status.allocatable["nvidia.com/gpu"] = proto::Quantity::fromValue(2);
  cache.addNode(node);
  proto::Pod a = pod;
  a.meta.namespace_ = "ns";
  a.meta.name = "a";
  a.spec.node_name = "n1";
  a.status.phase = "Running";
  a.meta.deletion_timestamp.reset();
  proto::Pod b = a;
  b.meta.name = "b";
  cache.addPod(a);
  cache.addPod(b);
  (void)cache.topology();
  const scheduler::NodeInfo& n = cache.node(*cache.findNode("n1"));
  (void)scheduler::filterNode(**info, n);
  (void)scheduler::preferredAffinityScore(**info, n);
  cache.removePod(b);
  cache.removePod(a);
  const scheduler::NodeInfo& after = cache.node(*cache.findNode("n1"));
  FUZZ_CHECK(after.requested[scheduler::kPods] == 0, "removing every pod frees the node");
  FUZZ_CHECK(after.gpu_shares.empty() && after.requested[cache.gpuResource()] == 0,
             "removing every pod gives back the GPUs its fractions shared");
  return 0;
}
