#include "scheduler/volume_binding.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace muster::scheduler {
namespace {

namespace vocab = proto::vocabulary;

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string_view volumeMode(const std::string& mode) {
  return mode.empty() ? std::string_view("Filesystem") : std::string_view(mode);
}

// A volume whose claimRef names the claim (and its uid, when the ref has one).
bool preBoundTo(const proto::PersistentVolume& pv, const proto::PersistentVolumeClaim& claim) {
  return pv.claim_name == claim.meta.name && pv.claim_namespace == claim.meta.namespace_ &&
         (pv.claim_uid.empty() || pv.claim_uid == claim.meta.uid);
}

bool waitsForFirstConsumer(const proto::StorageClass& sc) {
  return sc.volume_binding_mode == "WaitForFirstConsumer";
}

}  // namespace

bool volumeMatchesClaim(const proto::PersistentVolume& pv,
                        const proto::PersistentVolumeClaim& claim) {
  if (pv.meta.deletion_timestamp) return false;
  if (!pv.claim_name.empty() && !preBoundTo(pv, claim)) return false;
  // Volumes the PersistentVolume controller has not made Available (Released, Failed) are left
  // out, as kube-scheduler does; a new volume it has not looked at yet has no phase.
  if (!pv.phase.empty() && pv.phase != "Available") return false;
  if (pv.storage_class_name != claim.storage_class_name) return false;
  if (volumeMode(pv.volume_mode) != volumeMode(claim.volume_mode)) return false;
  for (const std::string& mode : claim.access_modes)
    if (!contains(pv.access_modes, mode)) return false;
  if (pv.capacity < claim.storage_request) return false;
  if (claim.selector && !claim.selector->matches(pv.meta.labels)) return false;
  return true;
}

std::string claimProblem(const proto::Pod& pod, const VolumeLookups& lookups) {
  const std::string& ns = pod.meta.namespace_;
  for (const std::string& name : pod.spec.pvc_claim_names) {
    const bool ephemeral = contains(pod.spec.ephemeral_claim_names, name);
    std::shared_ptr<const proto::PersistentVolumeClaim> claim = lookups.claim(ns, name);
    if (claim == nullptr) {
      return ephemeral ? absl::StrCat("waiting for ephemeral volume controller to create the "
                                      "persistentvolumeclaim \"", name, "\"")
                       : absl::StrCat("persistentvolumeclaim \"", name, "\" not found");
    }
    if (ephemeral) {
      const proto::OwnerReference* owner = claim->meta.controllerRef();
      if (owner == nullptr || owner->uid != pod.meta.uid) {
        return absl::StrCat("PVC ", ns, "/", name, " was not created for pod ", ns, "/",
                            pod.meta.name, " (pod is not owner)");
      }
    }
    if (claim->meta.deletion_timestamp)
      return absl::StrCat("persistentvolumeclaim \"", name, "\" is being deleted");
    if (claim->isBound()) continue;
    if (!claim->volume_name.empty()) {
      return absl::StrCat("persistentvolumeclaim \"", name, "\" is being bound to ",
                          claim->volume_name);
    }
    if (claim->storage_class_name.empty()) return "pod has unbound immediate PersistentVolumeClaims";
    std::shared_ptr<const proto::StorageClass> sc = lookups.storage_class(claim->storage_class_name);
    if (sc == nullptr) {
      return absl::StrCat("storageclass.storage.k8s.io \"", claim->storage_class_name,
                          "\" not found");
    }
    if (!waitsForFirstConsumer(*sc)) return "pod has unbound immediate PersistentVolumeClaims";
  }
  return "";
}

std::string csiDriverOfProvisioner(std::string_view provisioner) {
  for (const vocab::InTreeVolume& v : vocab::kInTreeVolumes)
    if (provisioner == v.provisioner) return v.csi_driver;
  if (provisioner == vocab::kNoProvisioner) return "";
  return std::string(provisioner);
}

std::string claimCsiDriver(const proto::PersistentVolumeClaim& claim, const VolumeLookups& lookups) {
  if (!claim.volume_name.empty()) {
    std::shared_ptr<const proto::PersistentVolume> pv = lookups.volume(claim.volume_name);
    return pv ? pv->csi_driver : "";
  }
  if (claim.storage_class_name.empty()) return "";
  std::shared_ptr<const proto::StorageClass> sc = lookups.storage_class(claim.storage_class_name);
  return sc ? csiDriverOfProvisioner(sc->provisioner) : "";
}

std::vector<VolumeConstraint> volumeConstraints(const proto::Pod& pod, const VolumeLookups& lookups,
                                                const std::set<std::string, std::less<>>& taken) {
  std::vector<VolumeConstraint> out;
  std::vector<std::shared_ptr<const proto::PersistentVolume>> all;
  bool listed = false;
  for (const std::string& name : pod.spec.pvc_claim_names) {
    std::shared_ptr<const proto::PersistentVolumeClaim> claim =
        lookups.claim(pod.meta.namespace_, name);
    if (claim == nullptr) continue;
    VolumeConstraint v;
    v.claim = name;
    v.read_write_once_pod = contains(claim->access_modes, "ReadWriteOncePod");
    v.csi_driver = claimCsiDriver(*claim, lookups);
    if (claim->isBound()) {
      v.volume = claim->volume_name;
      if (std::shared_ptr<const proto::PersistentVolume> pv = lookups.volume(claim->volume_name)) {
        v.found = true;
        v.node_affinity = pv->node_affinity;
      }
      out.push_back(std::move(v));
      continue;
    }
    if (!claim->volume_name.empty() || claim->storage_class_name.empty()) continue;
    std::shared_ptr<const proto::StorageClass> sc = lookups.storage_class(claim->storage_class_name);
    if (sc == nullptr || !waitsForFirstConsumer(*sc)) continue;
    v.to_bind = true;
    v.claim_uid = claim->meta.uid;
    if (!listed) {
      all = lookups.all_volumes();
      listed = true;
    }
    std::vector<const proto::PersistentVolume*> matching;
    for (const auto& pv : all)
      if (!taken.contains(pv->meta.name) && volumeMatchesClaim(*pv, *claim)) matching.push_back(pv.get());
    // A volume pre-bound to the claim first, then the smallest (then by name, to be stable).
    std::sort(matching.begin(), matching.end(), [&](const auto* a, const auto* b) {
      const bool pa = !a->claim_name.empty(), pb = !b->claim_name.empty();
      if (pa != pb) return pa;
      if (a->capacity != b->capacity) return a->capacity < b->capacity;
      return a->meta.name < b->meta.name;
    });
    for (const auto* pv : matching)
      v.candidates.push_back({pv->meta.name, pv->meta.resource_version, pv->node_affinity});
    // The PersistentVolume controller does not provision for a claim with a selector.
    v.provisionable = !sc->provisioner.empty() && sc->provisioner != vocab::kNoProvisioner &&
                      !claim->selector;
    v.provision_topology = sc->allowed_topologies;
    if (auto it = claim->meta.annotations.find(vocab::kSelectedNodeAnnotation);
        it != claim->meta.annotations.end())
      v.selected_node = it->second;
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<std::vector<VolumeWrite>> planVolumes(
    const std::vector<PodInfoPtr>& members, const std::vector<std::string>& nodes,
    const ClusterCache& cache, const std::set<std::string, std::less<>>& taken) {
  std::vector<VolumeWrite> plan;
  std::set<std::string, std::less<>> given = taken;
  std::set<std::string> claims;
  for (size_t i = 0; i < members.size() && i < nodes.size(); ++i) {
    const PodInfo& member = *members[i];
    for (const VolumeConstraint& v : member.volumes) {
      if (!v.to_bind) continue;
      const std::string& ns = member.pod().meta.namespace_;
      // Shared by two members: the first one's node decides (the volume's node affinity is
      // checked against every member once the claim is bound).
      if (!claims.insert(absl::StrCat(ns, "/", v.claim)).second) continue;
      std::optional<NodeId> id = cache.findNode(nodes[i]);
      std::optional<std::string> volume;
      if (id) volume = volumeFor(v, cache.node(*id).labels(), nodes[i], given);
      if (!volume) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pod ", member.key, " on node ", nodes[i], ": PersistentVolumeClaim ", v.claim,
            ": node(s) didn't find available persistent volumes to bind (another member's claim "
            "took the last matching volume)"));
      }
      VolumeWrite w{ns, v.claim, v.claim_uid, *volume, "", nodes[i]};
      if (!volume->empty()) {
        given.insert(*volume);
        for (const CandidateVolume& c : v.candidates)
          if (c.name == *volume) w.volume_resource_version = c.resource_version;
      }
      plan.push_back(std::move(w));
    }
  }
  return plan;
}

}  // namespace muster::scheduler
