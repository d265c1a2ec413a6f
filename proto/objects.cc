#include "proto/objects.h"

namespace muster::proto {

const OwnerReference* ObjectMeta::controllerRef() const {
  for (const OwnerReference& ref : owner_references) {
    if (ref.controller) return &ref;
  }
  return nullptr;
}

bool tolerates(const Toleration& toleration, const Taint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  if (!toleration.key.empty() && toleration.key != taint.key) return false;
  if (toleration.operator_.empty() || toleration.operator_ == "Equal") {
    return toleration.value == taint.value;
  }
  return toleration.operator_ == "Exists";
}

const Taint* findUntoleratedTaint(const std::vector<Taint>& taints,
                                  const std::vector<Toleration>& tolerations) {
  for (const Taint& taint : taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    bool tolerated = false;
    for (const Toleration& toleration : tolerations) {
      if (tolerates(toleration, taint)) {
        tolerated = true;
        break;
      }
    }
    if (!tolerated) return &taint;
  }
  return nullptr;
}

const PodCondition* Pod::findCondition(std::string_view type) const {
  for (const PodCondition& c : status.conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

const Quantity* Node::allocatableOf(std::string_view name) const {
  auto it = status.allocatable.find(std::string(name));
  return it == status.allocatable.end() ? nullptr : &it->second;
}

bool Node::isReady() const {
  for (const NodeCondition& c : status.conditions) {
    if (c.type == "Ready") return c.status == "True";
  }
  return false;
}

}  // namespace muster::proto
