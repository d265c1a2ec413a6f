#pragma once

// JSON codecs for the value types in proto/objects.h.
//
// decode(): one overload per type, in two forms: decode(v, out) for a whole document or list item,
// and decode(v, path, out) for a value nested at `path`. Each first resets *out, checks every JSON
// type before reading it and fails with InvalidArgument naming the field path
// ("spec.containers[0].resources.requests.cpu: expected string"). Unknown fields are ignored and
// absent or null fields keep their defaults.
//
// encode(): request bodies. Writes go out as patches where possible so that fields Muster does not
// know survive.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/json.h"
#include "proto/objects.h"
#include "proto/quantity.h"
#include "proto/selector.h"

namespace muster::proto {

// A quantity is a JSON string, or a number (as Quantity.UnmarshalJSON accepts, e.g. in CRDs).
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Quantity* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ResourceList* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, OwnerReference* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ObjectMeta* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ResourceRequirements* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ContainerPort* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Container* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Toleration* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Taint* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Affinity* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PodAffinityTerm* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, TopologySpreadConstraint* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, WeightedPodAffinityTerm* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Condition* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ContainerStatus* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Pod* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeCondition* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Node* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ObjectReference* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Event* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Lease* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PodGroup* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, WorkloadPodGroup* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, SlurmStepStatus* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PersistentVolumeClaim* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PersistentVolume* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, StorageClass* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, CSINode* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, StatefulSet* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ReplicaSet* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ReplicationController* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Service* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Namespace* out);
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ParallelJob* out);

absl::Status decode(const rapidjson::Value& v, ObjectMeta* out);
absl::Status decode(const rapidjson::Value& v, Pod* out);
absl::Status decode(const rapidjson::Value& v, Node* out);
absl::Status decode(const rapidjson::Value& v, Event* out);
absl::Status decode(const rapidjson::Value& v, Lease* out);
absl::Status decode(const rapidjson::Value& v, PodGroup* out);
absl::Status decode(const rapidjson::Value& v, WorkloadPodGroup* out);
absl::Status decode(const rapidjson::Value& v, PersistentVolumeClaim* out);
absl::Status decode(const rapidjson::Value& v, PersistentVolume* out);
absl::Status decode(const rapidjson::Value& v, StorageClass* out);
absl::Status decode(const rapidjson::Value& v, CSINode* out);
absl::Status decode(const rapidjson::Value& v, StatefulSet* out);
absl::Status decode(const rapidjson::Value& v, ReplicaSet* out);
absl::Status decode(const rapidjson::Value& v, ReplicationController* out);
absl::Status decode(const rapidjson::Value& v, Service* out);
absl::Status decode(const rapidjson::Value& v, PodDisruptionBudget* out);
absl::Status decode(const rapidjson::Value& v, Namespace* out);
absl::Status decode(const rapidjson::Value& v, ParallelJob* out);

// Parses `json` and decodes it into *out.
template <typename T>
absl::Status decodeJson(std::string_view json, T* out) {
  absl::StatusOr<rapidjson::Document> doc = parseJson(json);
  if (!doc.ok()) return doc.status();
  return decode(*doc, out);
}

// POST body for pods/binding:
// {"apiVersion":"v1","kind":"Binding","metadata":{"name":..,"namespace":..,"uid":..},
//  "target":{"apiVersion":"v1","kind":"Node","name":..}}; uid only when set.
std::string encode(const Binding& binding);
// "metadata": {...} of an object being written: the fields of `meta` that are set.
void writeObjectMeta(JsonWriter& w, const ObjectMeta& meta);
// A full core/v1 Event (POST, or PUT with metadata.resourceVersion).
std::string encode(const Event& event);
// A new Event about `ref`, in its namespace ("default" when it has none): a unique name
// (<name, cut to 200 characters>.<16 random hex>), count 1, both timestamps now, reported by
// `component` / `instance`.
Event newEvent(ObjectReference ref, std::string type, std::string reason, std::string message,
               std::string_view component, std::string_view instance, absl::Time now);
// A time as Kubernetes writes timestamps: RFC 3339 in UTC, whole seconds ("2026-11-30T01:02:03Z").
std::string rfc3339(absl::Time t);
std::string rfc3339Now();
// The merge patch that brings an aggregated Event up to date: {"count":N,"lastTimestamp":..}.
std::string eventSeriesPatch(int32_t count, std::string_view last_timestamp);
// A full coordination.k8s.io/v1 Lease (POST, or PUT with metadata.resourceVersion).
std::string encode(const Lease& lease);

// A full ParallelJob, for creating one (spec.launcher and spec.worker are written as stored).
std::string encode(const ParallelJob& job);
// The body of POST pods/<name>/eviction (policy/v1 Eviction).
// With `uid`, deleteOptions.preconditions.uid: a pod recreated under the same name is not evicted.
std::string evictionBody(std::string_view pod_namespace, std::string_view pod_name,
                         std::string_view uid = "");

// Merge-patch bodies for the status subresource, {"status":{...}}. Every field is written; empty
// strings are written as null, which removes the field (timestamps cannot be "").
std::string statusPatch(const PodGroupStatus& status);
std::string statusPatch(const ParallelJobStatus& status);

// "conditions":[...] of metav1.Conditions, each with every required field (type, status,
// reason, message - which may be "" - and lastTransitionTime), for status patches.
void writeConditions(JsonWriter& w, const std::vector<Condition>& conditions);

// Strategic-merge-patch body for a scheduling.k8s.io/v1alpha2 PodGroup's status that sets one
// metav1.Condition, merged by its type (reason, message and lastTransitionTime are required
// there): {"status":{"conditions":[{..., "observedGeneration":N}]}}.
std::string workloadPodGroupConditionPatch(const Condition& condition,
                                           int64_t observed_generation);
// Strategic-merge-patch body for pods/status that sets one condition, merged by its type:
// {"status":{"conditions":[{"type":..,"status":..,"reason":..,"message":..,
// "lastTransitionTime":..}]}}; empty reason, message and lastTransitionTime are left out.
// With `uid`, metadata.uid too: the API server refuses (409) to patch a pod recreated under the
// same name, as the kubelet's status patches do.
std::string podConditionPatch(const PodCondition& condition, std::string_view uid = "");
// {"status":{"nominatedNodeName":"<node>"}}, or null for "" (a merge patch that clears it).
std::string nominatedNodeNamePatch(std::string_view node);
// Volume binding's writes (as kube-scheduler's VolumeBinding makes them), merge patches:
// the claim's volume.kubernetes.io/selected-node annotation (null for "") with the claim's uid as
// precondition - what asks a provisioner for a volume reachable from that node;
std::string selectedNodePatch(std::string_view node, std::string_view claim_uid);
// Merge patch setting one annotation of an object, only on the object with `uid` when given.
std::string annotationPatch(std::string_view key, std::string_view value, std::string_view uid);
// a PersistentVolume's spec.claimRef to the claim (null when `claim_name` is ""), with the
// volume's resourceVersion as precondition so a volume bound meanwhile is not taken over.
std::string claimRefPatch(std::string_view claim_namespace, std::string_view claim_name,
                          std::string_view claim_uid, std::string_view resource_version);

}  // namespace muster::proto
