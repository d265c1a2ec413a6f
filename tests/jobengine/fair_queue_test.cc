// The job engine's work queue is fair between owners (fair_queue.h; issue 43, item 12).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jobengine/fair_queue.h"

namespace muster::jobengine {
namespace {

std::vector<std::string> drain(FairQueue& q) {
  std::vector<std::string> out;
  while (auto key = q.pop()) out.push_back(*key);
  return out;
}

TEST_CASE("one owner's 5,000 queued keys do not hold up another owner's key", "[fair_queue]") {
  FairQueue q;
  for (int i = 0; i < 5000; ++i) REQUIRE(q.push("alice", "ns/alice-" + std::to_string(i)));
  REQUIRE(q.push("bob", "ns/bob-0"));
  REQUIRE(q.size() == 5001);
  std::vector<std::string> first{*q.pop(), *q.pop()};
  CHECK(first == std::vector<std::string>{"ns/alice-0", "ns/bob-0"});
  // Then alice's keys, in the order pushed.
  auto rest = drain(q);
  REQUIRE(rest.size() == 4999);
  for (int i = 0; i < 4999; ++i) REQUIRE(rest[i] == "ns/alice-" + std::to_string(i + 1));
  CHECK(q.empty());
  CHECK(q.owners() == 0);
}

TEST_CASE("keys are popped round-robin across owners with keys waiting, each owner's in order",
          "[fair_queue]") {
  FairQueue q;
  q.push("a", "a1");
  q.push("a", "a2");
  q.push("a", "a3");
  q.push("b", "b1");
  q.push("c", "c1");
  q.push("c", "c2");
  CHECK(q.owners() == 3);
  CHECK(*q.pop() == "a1");
  CHECK(*q.pop() == "b1");
  // b has nothing left and leaves the rotation; it rejoins at the back when it has a key again.
  q.push("b", "b2");
  CHECK(drain(q) == std::vector<std::string>{"c1", "a2", "b2", "c2", "a3"});
  CHECK_FALSE(q.pop().has_value());
}

TEST_CASE("a key is queued once: pushing it again keeps its place and owner", "[fair_queue]") {
  FairQueue q;
  CHECK(q.push("a", "k1"));
  CHECK(q.push("a", "k2"));
  CHECK_FALSE(q.push("a", "k1"));
  CHECK_FALSE(q.push("b", "k2"));  // already queued under a
  CHECK(q.size() == 2);
  CHECK(q.owners() == 1);
  CHECK(q.contains("k1"));
  CHECK(*q.pop() == "k1");
  CHECK_FALSE(q.contains("k1"));
  // Popped, it may be queued again.
  CHECK(q.push("a", "k1"));
  CHECK(drain(q) == std::vector<std::string>{"k2", "k1"});
}

}  // namespace
}  // namespace muster::jobengine
