#include "scheduler/resources.h"

#include <catch2/catch.hpp>

#include "tests/scheduler/builders.h"

namespace muster::scheduler {
namespace {
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

TEST_CASE("pod overhead is added on top of the max rule", "[resources]") {
  proto::Pod p = pod("p").cpu("1").initContainer("init", {{"cpu", q("2")}}).overhead("cpu", "250m");
  CHECK((*podRequests(p))[kCpu] == 2250);
}

TEST_CASE("extended resources count by value and limits stand in for absent requests",
          "[resources]") {
  proto::Pod p = pod("p").limit("nvidia.com/gpu", "8").limit("preferred.jp/rdma", "1").cpu("4");
  Resources r = *podRequests(p);
  CHECK(r[gpu()] == 8);
  CHECK(r[*findResource("preferred.jp/rdma")] == 1);
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

}  // namespace
}  // namespace muster::scheduler
