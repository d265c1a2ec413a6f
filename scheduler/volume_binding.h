#pragma once

// Volume binding for PersistentVolumeClaims whose StorageClass binds WaitForFirstConsumer, with
// kube-scheduler's VolumeBinding semantics, but for a whole gang at once:
//
// 1. claimProblem: a pod whose claims cannot be decided now waits, in kube-scheduler's words
//    (missing claim, claim being deleted, an ephemeral volume's claim not created yet or not the
//    pod's, an unbound claim of an Immediate class or of no class, an unknown class).
// 2. volumeConstraints: for each claim, what it asks of a node (the filter, filterVolumeBinding):
//    a bound claim its PersistentVolume's node affinity; an unbound WaitForFirstConsumer claim a
//    matching unbound volume the node reaches (same class, access modes, volume mode, enough
//    capacity, the claim's selector; a volume pre-bound to the claim first, then the smallest),
//    or a class that can provision there (a provisioner, allowedTopologies matching the node,
//    the claim's selected-node if it has one).
// 3. planVolumes: once the whole gang is placed, one volume per claim on its member's node, no
//    volume given twice (nor one another gang's binding is still waiting for). Nothing is written
//    before this succeeds for every member.
// 4. The scheduler then writes the plan (the claim's volume.kubernetes.io/selected-node for a
//    provisioned volume, the volume's spec.claimRef for an existing one), waits until every
//    claim is bound (by the provisioner and the PersistentVolume controller) and only then binds
//    the pods; on a failed write or a timeout the writes still unanswered are undone and the gang
//    is retried.

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/objects.h"
#include "scheduler/cache.h"
#include "scheduler/filter.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

struct VolumeLookups {
  std::function<std::shared_ptr<const proto::PersistentVolumeClaim>(std::string_view ns,
                                                                     std::string_view name)>
      claim;
  std::function<std::shared_ptr<const proto::StorageClass>(std::string_view name)> storage_class;
  std::function<std::shared_ptr<const proto::PersistentVolume>(std::string_view name)> volume;
  std::function<std::vector<std::shared_ptr<const proto::PersistentVolume>>()> all_volumes;
};

// The CSI driver a provisioner's volumes are attached by: an in-tree plugin's migration target,
// else the provisioner itself (CSI provisioners are named after their driver).
std::string csiDriverOfProvisioner(std::string_view provisioner);

// The CSI driver that attaches the claim's volume: the bound volume's, or the class's
// provisioner's while unbound; "" when neither is known or the volume is not CSI.
std::string claimCsiDriver(const proto::PersistentVolumeClaim& claim, const VolumeLookups& lookups);

// "" when every claim of the pod is bound or waits for its first consumer; else why not.
std::string claimProblem(const proto::Pod& pod, const VolumeLookups& lookups);

// One per claim of the pod that is bound or waits for its first consumer (claimProblem says
// why others wait). Volumes in `taken` are no candidates.
std::vector<VolumeConstraint> volumeConstraints(const proto::Pod& pod, const VolumeLookups& lookups,
                                                const std::set<std::string, std::less<>>& taken);

// Whether an unbound volume could serve the claim, ignoring where (its node affinity).
bool volumeMatchesClaim(const proto::PersistentVolume& pv, const proto::PersistentVolumeClaim& claim);

// A write that binds one claim: `volume` set - the claimRef on that existing volume; empty - the
// selected-node annotation on the claim, for its class to provision a volume there.
struct VolumeWrite {
  std::string claim_namespace;
  std::string claim;
  std::string claim_uid;
  std::string volume;
  std::string volume_resource_version;
  std::string node;
  bool operator==(const VolumeWrite&) const = default;
};

// The writes binding every unbound claim of the gang's members, each on the node its member was
// placed on (`nodes[i]` for `members[i]`). A claim two members share is written once. Fails,
// naming the member, claim and node, when a claim finds nothing there (volumes in `taken` and
// those this plan gives to other claims are not offered twice).
absl::StatusOr<std::vector<VolumeWrite>> planVolumes(
    const std::vector<PodInfoPtr>& members, const std::vector<std::string>& nodes,
    const ClusterCache& cache, const std::set<std::string, std::less<>>& taken);

}  // namespace muster::scheduler
