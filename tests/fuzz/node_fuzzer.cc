// A Node as the API server sends it, decoded and read the way the scheduler's cache reads it.
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "scheduler/cache.h"
#include "scheduler/resources.h"
#include "tests/fuzz/fuzz_util.h"

using namespace muster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  proto::Node node;
  if (!proto::decodeJson(fuzz::asText(data, size), &node).ok()) return 0;
  (void)node.isReady();
  (void)node.meta.controllerRef();
  (void)proto::findUntoleratedTaint(node.spec.taints, {});

  const scheduler::Resources allocatable = scheduler::nodeAllocatable(node);
  for (int i = 0; i < scheduler::kMaxResources; ++i) {
    FUZZ_CHECK(allocatable.v[i] >= 0, "a node never has negative allocatable resources");
  }
  (void)scheduler::formatResources(allocatable);

  // The node twice in a topology (same labels, other name): domains sum their nodes' free
  // resources, which must not overflow however large each node is.
  scheduler::ClusterCache cache({"muster.dev/block", "muster.dev/rack"});
  cache.addNode(node);
  proto::Node twin = node;
  twin.meta.name += "-twin";
  cache.addNode(twin);
  (void)cache.topology();
  cache.updateNode(node);
  (void)cache.topology();
  cache.removeNode(twin.meta.name);
  (void)cache.topology();
  return 0;
}
