#include "scheduler/resources.h"
#include "scheduler/cache.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
using testing::node;
using testing::pod;
using testing::q;

ResourceId gpu() { return *internResource("nvidia.com/gpu"); }

TEST_CASE("requests sum the containers, in millicores and bytes", "[resources]") {
  proto::Pod p = pod("p").cpu("500m").memory("1Gi").container("side", {{"cpu", q("250m")}});
  Resources r = *podRequests(p);
  CHECK(r[kCpu] == 750);
  CHECK(r[kMemory] == 1073741824);
  CHECK(r[kPods] == 1);
}

TEST_CASE("an init container larger than the containers' sum sets the request", "[resources]") {
  proto::Pod p = pod("p").cpu("1").memory("1Gi").initContainer("init", {{"cpu", q("2")}, {"memory", q("512Mi")}});
  Resources r = *podRequests(p);
  CHECK(r[kCpu] == 2000);              // max(1, 2)
  CHECK(r[kMemory] == 1073741824);     // max(1Gi, 512Mi)
}

TEST_CASE("the largest single init container counts, not their sum", "[resources]") {
  proto::Pod p = pod("p").cpu("1")
                     .initContainer("a", {{"cpu", q("3")}})
                     .initContainer("b", {{"cpu", q("2")}});
  CHECK((*podRequests(p))[kCpu] == 3000);
}

TEST_CASE("native sidecars run beside the app containers and the init containers after them",
          "[resources]") {
  // The worked example of KEP-753: sidecars add to the app containers' sum, and each ordinary
  // init container runs beside the sidecars started before it.
  proto::Pod p = pod("p").cpu("1")
                     .initContainer("setup", {{"cpu", q("2")}})
                     .sidecar("log-shipper", {{"cpu", q("500m")}, {"memory", q("256Mi")}})
                     .initContainer("fetch", {{"cpu", q("2")}})
                     .sidecar("proxy", {{"cpu", q("250m")}});
  Resources r = *podRequests(p);
  // apps 1 + sidecars 0.75 = 1.75; init steps: setup 2, log-shipper 0.5, fetch 2 + 0.5 = 2.5,
  // proxy 0.75: the pod needs 2.5 cores.
  CHECK(r[kCpu] == 2500);
  CHECK(r[kMemory] == 256 * 1024 * 1024);  // the sidecar's memory stays with the apps

  // Without the late init container, apps + sidecars is the larger: 1.75.
  proto::Pod q2 = pod("q").cpu("1")
                      .sidecar("log-shipper", {{"cpu", q("500m")}})
                      .sidecar("proxy", {{"cpu", q("250m")}});
  CHECK((*podRequests(q2))[kCpu] == 1750);
  // The same containers as ordinary init containers count only as their largest: 1.
  proto::Pod r2 = pod("r").cpu("1")
                      .initContainer("log-shipper", {{"cpu", q("500m")}})
                      .initContainer("proxy", {{"cpu", q("250m")}});
  CHECK((*podRequests(r2))[kCpu] == 1000);
}

TEST_CASE("sidecars that take the pod's total past what can be counted are refused",
          "[resources][limits]") {
  proto::Pod p = pod("p").memory("4Ei").sidecar("big", {{"memory", q("4Ei")}});
  auto r = podRequests(p);
  REQUIRE_FALSE(r.ok());
  CHECK(absl::StrContains(r.status().message(), "containers and sidecars together"));
}

TEST_CASE("pod overhead is added on top of the max rule", "[resources]") {
  proto::Pod p = pod("p").cpu("1").initContainer("init", {{"cpu", q("2")}}).overhead("cpu", "250m");
  CHECK((*podRequests(p))[kCpu] == 2250);
}

TEST_CASE("extended resources count by value and limits stand in for absent requests",
          "[resources]") {
  const ResourceId rdma = *internResource("preferred.jp/rdma");  // nodes advertised these
  const ResourceId gpus = gpu();
  proto::Pod p = pod("p").limit("nvidia.com/gpu", "8").limit("preferred.jp/rdma", "1").cpu("4");
  Resources r = *podRequests(p);
  CHECK(r[gpus] == 8);
  CHECK(r[rdma] == 1);
  CHECK(r[kCpu] == 4000);
}

TEST_CASE("a request wins over a limit for the same resource", "[resources]") {
  proto::Pod p = pod("p").cpu("1").limit("cpu", "4");
  CHECK((*podRequests(p))[kCpu] == 1000);
}

TEST_CASE("capacity counts how many copies of a request fit", "[resources]") {
  Resources free;
  free[kCpu] = 10000;
  free[gpu()] = 8;
  free[kPods] = 3;
  Resources req;
  req[kCpu] = 1000;
  req[gpu()] = 2;
  req[kPods] = 1;
  CHECK(capacityFor(req, free, 100) == 3);  // pods limit
  free[kPods] = 110;
  CHECK(capacityFor(req, free, 100) == 4);  // GPUs limit
  req[gpu()] = 9;
  CHECK(capacityFor(req, free, 100) == 0);
}

TEST_CASE("resources format for people, GPUs first", "[resources]") {
  Resources r;
  r[gpu()] = 8;
  r[kCpu] = 1500;
  r[kMemory] = 64LL << 30;
  r[kPods] = 1;
  CHECK(formatResources(r) == "8 nvidia.com/gpu, 1500m cpu, 64Gi memory");
  CHECK(dominantResource(r) == gpu());
}

TEST_CASE("two containers asking for 8Ei of memory are refused, not summed to a small number",
          "[resources][limits]") {
  // 8Ei is 2^63 bytes: each saturates to INT64_MAX, and their sum wrapped around to -2.
  proto::Pod p = pod("p").memory("8Ei").container("side", {{"memory", q("8Ei")}});
  absl::StatusOr<Resources> r = podRequests(p);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  // 8Ei is one byte more than a Quantity holds (Kubernetes caps binary amounts at 2^63-1).
  CHECK(r.status().message() ==
        "container main requests 9223372036854775807 of memory, which takes the pod's total over "
        "the 4Ei of one resource the scheduler can count");
  CHECK_FALSE(makePodInfo(p).ok());

  // 2Ei + 2Ei is exactly the limit; one byte more is not.
  CHECK((*podRequests(pod("p").memory("2Ei").container("side", {{"memory", q("2Ei")}})))[kMemory] ==
        kMaxPodRequest);
  CHECK_FALSE(podRequests(pod("p").memory("2Ei").container("side", {{"memory", q("2305843009213693953")}})).ok());
}

TEST_CASE("overhead that takes a pod's requests past the limit is refused", "[resources][limits]") {
  absl::StatusOr<Resources> r = podRequests(pod("p").cpu("4e15").overhead("cpu", "1e15"));
  REQUIRE_FALSE(r.ok());
  CHECK(absl::StrContains(r.status().message(), "pod overhead requests 1e15 of cpu"));
}

TEST_CASE("a negative request is refused, as the API server's validation does", "[resources][limits]") {
  absl::StatusOr<Resources> r = podRequests(pod("p").cpu("-2"));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "container main requests -2 of cpu: resource requests must not be negative");
  CHECK_FALSE(podRequests(pod("p").initContainer("init", {{"memory", q("-1Gi")}})).ok());
  CHECK_FALSE(podRequests(pod("p").limit("nvidia.com/gpu", "-8")).ok());
}

TEST_CASE("negative allocatable amounts count as none", "[resources][limits]") {
  proto::Node n = node("n1").gpus(-8).cpu("-1");
  Resources a = nodeAllocatable(n);
  CHECK(a[gpu()] == 0);
  CHECK(a[kCpu] == 0);
  CHECK(a[kMemory] == 512LL << 30);
}

TEST_CASE("sums of resources saturate instead of wrapping around", "[resources][limits]") {
  Resources big;
  big[kMemory] = INT64_MAX - 1;
  big[kCpu] = 5;
  Resources sum = big;
  sum += big;
  CHECK(sum[kMemory] == INT64_MAX);
  CHECK(sum[kCpu] == 10);
  CHECK(big.times(3)[kMemory] == INT64_MAX);
  CHECK(big.times(-3)[kMemory] == INT64_MIN);
  Resources neg;
  neg[kMemory] = INT64_MIN + 1;
  neg -= big;
  CHECK(neg[kMemory] == INT64_MIN);
  CHECK(saturatingAdd(INT64_MIN, -1) == INT64_MIN);
  CHECK(saturatingSub(INT64_MAX, -1) == INT64_MAX);
  CHECK(saturatingMul(INT64_MIN, -1) == INT64_MAX);
}

TEST_CASE("a resource no node advertises is not interned: the pod fits nowhere and says which",
          "[resources]") {
  const ResourceId gpus = gpu();
  const int tracked = resourceCount();
  proto::Pod p = pod("p").gpus(1).request("example.com/zeta", "2").request("example.com/alpha", "1")
                     .initContainer("init", {{"example.com/alpha", q("3")}})
                     .request("example.com/none", "0");
  std::vector<std::string> names;
  Resources r = *podRequests(p, &names);
  CHECK(resourceCount() == tracked);
  CHECK(names == std::vector<std::string>{"example.com/alpha", "example.com/zeta"});  // not "none"
  CHECK(r[kUnadvertised] == 1);
  CHECK(r[gpus] == 1);
  Resources node_free = nodeAllocatable(node("n1").gpus(8));
  CHECK(node_free[kUnadvertised] == 0);
  CHECK_FALSE(fitsIn(r, node_free));
  CHECK(capacityFor(r, node_free, 100) == 0);
  // Still validated: a negative amount of an unknown resource is refused.
  CHECK_FALSE(podRequests(pod("neg").request("example.com/omega", "-1")).ok());
  CHECK(podRequests(pod("plain").gpus(1)).value()[kUnadvertised] == 0);
}

TEST_CASE("a bound pod's resource a node advertises later is accounted once it does",
          "[resources][cache]") {
  ClusterCache cache({});
  cache.addNode(node("n1").gpus(8));
  cache.addPod(pod("early").request("example.com/beta-fpga", "3").onNode("n1"));
  CHECK_FALSE(findResource("example.com/beta-fpga").has_value());
  cache.addNode(node("n2").resource("example.com/beta-fpga", "4"));
  cache.updateNode(node("n1").gpus(8).resource("example.com/beta-fpga", "4"));
  const ResourceId fpga = *findResource("example.com/beta-fpga");
  CHECK(cache.node(*cache.findNode("n1")).freeOf(fpga) == 1);
  CHECK(cache.node(*cache.findNode("n2")).freeOf(fpga) == 4);
  CHECK(cache.node(*cache.findNode("n1")).requested[kUnadvertised] == 0);
}

}  // namespace
}  // namespace muster::scheduler
