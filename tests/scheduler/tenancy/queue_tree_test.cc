#include "scheduler/tenancy/queue_tree.h"
#include "tests/scheduler/tenancy/builders.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace muster::scheduler::tenancy {
namespace {

using testing::gpus;
using testing::kCpu;
using testing::kGpu;
using testing::queue;

size_t at(const QueueTree& tree, const std::string& name) {
  std::optional<size_t> i = tree.find(name);
  REQUIRE(i.has_value());
  return *i;
}

std::vector<std::string> childNames(const QueueTree& tree, size_t i) {
  std::vector<std::string> names;
  for (size_t c : tree.children(i)) names.push_back(tree.name(c));
  return names;
}

TEST_CASE("queues are arranged under the implicit root by their parents",
          "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("t2", "org1"), queue("org2"), queue("t1", "org1"),
                                     queue("org1")});
  REQUIRE(tree.size() == 5);
  CHECK(tree.name(QueueTree::kRoot).empty());
  CHECK(tree.find("") == QueueTree::kRoot);
  CHECK(tree.parent(QueueTree::kRoot) == QueueTree::kNoQueue);
  CHECK_FALSE(tree.find("nope").has_value());

  const size_t org1 = at(tree, "org1");
  CHECK(childNames(tree, QueueTree::kRoot) == std::vector<std::string>{"org1", "org2"});
  CHECK(childNames(tree, org1) == std::vector<std::string>{"t1", "t2"});
  CHECK(tree.parent(at(tree, "t1")) == org1);
  CHECK(tree.depth(QueueTree::kRoot) == 0);
  CHECK(tree.depth(org1) == 1);
  CHECK(tree.depth(at(tree, "t2")) == 2);
  CHECK(tree.ancestors(at(tree, "t2")) == std::vector<size_t>{at(tree, "t2"), org1});
  CHECK(tree.ancestors(QueueTree::kRoot).empty());
  for (size_t i = 0; i < tree.size(); ++i) CHECK(tree.validity(i).valid);

  // Parents before children, children in name order.
  std::vector<std::string> order;
  for (size_t i : tree.topDown()) order.push_back(tree.name(i));
  CHECK(order == std::vector<std::string>{"", "org1", "org2", "t1", "t2"});
}

TEST_CASE("a queue whose parent does not exist is attached to the root and invalid",
          "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("team", "missing-org")});
  const size_t team = at(tree, "team");
  CHECK(tree.parent(team) == QueueTree::kRoot);
  CHECK_FALSE(tree.validity(team).valid);
  CHECK(tree.validity(team).reason == "ParentNotFound");
  CHECK(tree.validity(team).message ==
        "parent queue missing-org does not exist; the queue is attached to the root");
}

TEST_CASE("every queue on a parent cycle is attached to the root and names the cycle",
          "[tenancy][queue_tree]") {
  // a -> b -> c -> a (each arrow: "has the parent"), and d hangs below a.
  QueueTree tree = QueueTree::build(
      {queue("a", "b"), queue("b", "c"), queue("c", "a"), queue("d", "a"), queue("self", "self")});
  for (const char* name : {"a", "b", "c", "self"}) {
    const size_t q = at(tree, name);
    INFO(name);
    CHECK(tree.parent(q) == QueueTree::kRoot);
    CHECK_FALSE(tree.validity(q).valid);
    CHECK(tree.validity(q).reason == "Cycle");
  }
  CHECK(tree.validity(at(tree, "a")).message ==
        "the queue is on a parent cycle (a -> b -> c -> a); it is attached to the root");
  CHECK(tree.validity(at(tree, "b")).message ==
        "the queue is on a parent cycle (b -> c -> a -> b); it is attached to the root");
  CHECK(tree.validity(at(tree, "self")).message ==
        "the queue is on a parent cycle (self -> self); it is attached to the root");
  // d is not on the cycle: it keeps its parent and is valid.
  CHECK(tree.parent(at(tree, "d")) == at(tree, "a"));
  CHECK(tree.validity(at(tree, "d")).valid);
  CHECK(tree.depth(at(tree, "d")) == 2);
}

TEST_CASE("a name declared twice keeps the first declaration only", "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("team").quota(kGpu, gpus(4)), queue("other"),
                                     queue("team", "other").quota(kGpu, gpus(8)), queue("")});
  REQUIRE(tree.size() == 3);
  const size_t team = at(tree, "team");
  CHECK(tree.parent(team) == QueueTree::kRoot);
  CHECK(tree.effectiveQuota(team, kGpu) == gpus(4));
  CHECK(tree.validity(team).valid);
  REQUIRE(tree.rejected().size() == 2);
  CHECK(tree.rejected()[0].first.name == "team");
  CHECK(tree.rejected()[0].second.reason == "Duplicate");
  CHECK(tree.rejected()[0].second.message ==
        "queue team is declared more than once; the first one is used");
  CHECK(tree.rejected()[1].second.reason == "InvalidName");
}

TEST_CASE("children over their parent's quota are scaled down proportionally",
          "[tenancy][queue_tree]") {
  // org declares 8 GPUs; its children declare 6 + 6 = 12: each is scaled by 8/12 to 4.
  // cpu: the parent declares none, so its children's cpu quotas are not checked.
  QueueTree tree = QueueTree::build({queue("org").quota(kGpu, gpus(8)),
                                     queue("a", "org").quota(kGpu, gpus(6)).quota(kCpu, 50000),
                                     queue("b", "org").quota(kGpu, gpus(6)).quota(kCpu, 70000),
                                     queue("c", "org")});
  const size_t org = at(tree, "org");
  const size_t a = at(tree, "a");
  const size_t b = at(tree, "b");
  CHECK_FALSE(tree.validity(org).valid);
  CHECK(tree.validity(org).reason == "ChildrenOverQuota");
  CHECK(tree.validity(org).message ==
        "the children's nvidia.com/gpu quotas sum to 12000, above its quota 8000; their quotas "
        "are scaled down to fit");
  CHECK(tree.effectiveQuota(a, kGpu) == gpus(4));
  CHECK(tree.effectiveQuota(b, kGpu) == gpus(4));
  CHECK(tree.declared(a).at(kGpu).quota == gpus(6));  // the declaration is kept
  CHECK(tree.effectiveQuota(a, kCpu) == 50000);
  CHECK(tree.effectiveQuota(at(tree, "c"), kGpu) == 0);
  CHECK(tree.validity(a).valid);

  // Rounded down: 3 children of 1000 each under a parent of 2000 get 666 each.
  QueueTree odd = QueueTree::build({queue("p").quota(kGpu, 2000), queue("x", "p").quota(kGpu, 1000),
                                    queue("y", "p").quota(kGpu, 1000),
                                    queue("z", "p").quota(kGpu, 1000)});
  for (const char* name : {"x", "y", "z"}) CHECK(odd.effectiveQuota(at(odd, name), kGpu) == 666);
}

TEST_CASE("a parent's scaled quota is what its children must fit in", "[tenancy][queue_tree]") {
  // org 10 GPUs; teams 10 + 10 → 5 + 5; team1's subteams 4 + 4 = 8 > 5 → 2500 + 2500.
  QueueTree tree = QueueTree::build(
      {queue("org").quota(kGpu, gpus(10)), queue("team1", "org").quota(kGpu, gpus(10)),
       queue("team2", "org").quota(kGpu, gpus(10)), queue("s1", "team1").quota(kGpu, gpus(4)),
       queue("s2", "team1").quota(kGpu, gpus(4))});
  CHECK(tree.effectiveQuota(at(tree, "team1"), kGpu) == gpus(5));
  CHECK(tree.effectiveQuota(at(tree, "s1"), kGpu) == 2500);
  CHECK(tree.effectiveQuota(at(tree, "s2"), kGpu) == 2500);
  CHECK(tree.validity(at(tree, "team1")).reason == "ChildrenOverQuota");
  CHECK(tree.validity(at(tree, "team1")).message ==
        "the children's nvidia.com/gpu quotas sum to 8000, above its quota 5000 (corrected from "
        "10000); their quotas are scaled down to fit");
}

TEST_CASE("a quota above its own limit is taken as the limit", "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("team").quota(kGpu, gpus(30), gpus(20))});
  const size_t team = at(tree, "team");
  CHECK(tree.validity(team).reason == "QuotaAboveLimit");
  CHECK(tree.validity(team).message ==
        "nvidia.com/gpu quota 30000 is above its limit 20000; the limit is used as its quota");
  CHECK(tree.effectiveQuota(team, kGpu) == gpus(20));
  CHECK(tree.limit(team, kGpu) == gpus(20));
  CHECK(tree.declared(team).at(kGpu).quota == gpus(30));
}

TEST_CASE("several problems keep the first reason and list every message",
          "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build(
      {queue("team", "gone").quota(kGpu, gpus(3), gpus(2)).quota(kCpu, -5, std::nullopt, 0.0)});
  const Validity& v = tree.validity(at(tree, "team"));
  CHECK(v.reason == "ParentNotFound");
  CHECK(v.message ==
        "parent queue gone does not exist; the queue is attached to the root; cpu quota -5 is "
        "negative; 0 is used; cpu over-quota weight 0 is not a positive number; 1 is used; "
        "nvidia.com/gpu quota 3000 is above its limit 2000; the limit is used as its quota");
  CHECK(tree.effectiveQuota(at(tree, "team"), kCpu) == 0);
  CHECK(tree.weight(at(tree, "team"), kCpu) == 1.0);
}

TEST_CASE("undeclared resources have no quota, no limit and weight 1", "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("team").quota(kGpu, gpus(1), gpus(2), 3.0)});
  const size_t team = at(tree, "team");
  CHECK(tree.effective(team, kCpu) == nullptr);
  CHECK(tree.effectiveQuota(team, kCpu) == 0);
  CHECK_FALSE(tree.limit(team, kCpu).has_value());
  CHECK(tree.weight(team, kCpu) == 1.0);
  CHECK(tree.weight(team, kGpu) == 3.0);
  CHECK_FALSE(tree.limit(QueueTree::kRoot, kGpu).has_value());
  CHECK(tree.effectiveQuota(QueueTree::kRoot, kGpu) == 0);
}

TEST_CASE("the lowest common ancestor of two queues", "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("org1"), queue("org2"), queue("t1", "org1"),
                                     queue("t2", "org1"), queue("s1", "t1"), queue("x", "org2")});
  const size_t org1 = at(tree, "org1");
  CHECK(tree.lowestCommonAncestor(at(tree, "s1"), at(tree, "t2")) == org1);
  CHECK(tree.lowestCommonAncestor(at(tree, "t2"), at(tree, "s1")) == org1);
  CHECK(tree.lowestCommonAncestor(at(tree, "s1"), at(tree, "t1")) == at(tree, "t1"));
  CHECK(tree.lowestCommonAncestor(at(tree, "s1"), at(tree, "x")) == QueueTree::kRoot);
  CHECK(tree.lowestCommonAncestor(at(tree, "t2"), at(tree, "t2")) == at(tree, "t2"));
  CHECK(tree.lowestCommonAncestor(QueueTree::kRoot, at(tree, "t2")) == QueueTree::kRoot);
}

TEST_CASE("subtree totals add each queue's own amounts to all its ancestors",
          "[tenancy][queue_tree]") {
  QueueTree tree = QueueTree::build({queue("org"), queue("team", "org"), queue("other")});
  Usage own(tree.size());
  own[at(tree, "team")] = {{kGpu, 3000}};
  own[at(tree, "org")] = {{kGpu, 1000}, {kCpu, 500}};
  own[at(tree, "other")] = {{kGpu, 2000}};
  Usage total = subtreeTotals(tree, own);
  REQUIRE(total.size() == tree.size());
  CHECK(total[at(tree, "team")].at(kGpu) == 3000);
  CHECK(total[at(tree, "org")].at(kGpu) == 4000);
  CHECK(total[at(tree, "org")].at(kCpu) == 500);
  CHECK(total[QueueTree::kRoot].at(kGpu) == 6000);

  // A shorter `own` is fine: the missing queues have nothing.
  Usage partial = subtreeTotals(tree, Usage(1));
  CHECK(partial.size() == tree.size());
  CHECK(partial[QueueTree::kRoot].empty());
}

TEST_CASE("withinLimits names the lowest queue and the resource that would go over",
          "[tenancy][queue_tree]") {
  // org (limit 10 GPUs, 64 cpu) > team (limit 6 GPUs) > sub (no limit).
  QueueTree tree = QueueTree::build(
      {queue("org").quota(kGpu, gpus(4), gpus(10)).quota(kCpu, 0, 64000),
       queue("team", "org").quota(kGpu, gpus(2), gpus(6)), queue("sub", "team")});
  const size_t org = at(tree, "org");
  const size_t team = at(tree, "team");
  const size_t sub = at(tree, "sub");
  Usage own(tree.size());
  own[sub] = {{kGpu, gpus(4)}, {kCpu, 8000}};
  own[org] = {{kGpu, gpus(3)}};  // org's own gangs
  Usage allocated = subtreeTotals(tree, own);  // sub 4, team 4, org 7 GPUs

  std::string blocking_queue;
  std::string blocking_resource;
  // 2 GPUs: team 6 <= 6, org 9 <= 10.
  CHECK(withinLimits(tree, sub, allocated, {{kGpu, gpus(2)}}, &blocking_queue,
                     &blocking_resource));
  CHECK(blocking_queue.empty());
  // 3 GPUs: team 7 > 6 (org 10 <= 10): team is named.
  CHECK_FALSE(withinLimits(tree, sub, allocated, {{kGpu, gpus(3)}}, &blocking_queue,
                           &blocking_resource));
  CHECK(blocking_queue == "team");
  CHECK(blocking_resource == kGpu);
  // 2 GPUs and 60 cpu: team is fine, org's cpu 68 > 64.
  CHECK_FALSE(withinLimits(tree, sub, allocated, {{kGpu, gpus(2)}, {kCpu, 60000}},
                           &blocking_queue, &blocking_resource));
  CHECK(blocking_queue == "org");
  CHECK(blocking_resource == kCpu);
  // From org itself: 3 GPUs more makes 10 <= 10; 4 makes 11.
  CHECK(withinLimits(tree, org, allocated, {{kGpu, gpus(3)}}, nullptr, nullptr));
  CHECK_FALSE(withinLimits(tree, org, allocated, {{kGpu, gpus(4)}}, nullptr, nullptr));
  // A request of nothing never blocks.
  CHECK(withinLimits(tree, team, allocated, {}, nullptr, nullptr));
}

}  // namespace
}  // namespace muster::scheduler::tenancy
