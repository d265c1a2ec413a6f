#include "proto/codec.h"

#include <cstdio>
#include <ctime>
#include <random>
#include <type_traits>
#include <utility>

#include "absl/time/clock.h"
#include "proto/vocabulary.h"

namespace muster::proto {
namespace {

// The CSI driver a volume source (a pod's spec.volumes[] entry or a PersistentVolume's spec) is
// attached by: csi.driver, or the driver its in-tree source migrates to; "" for others.
absl::Status csiDriverOf(const rapidjson::Value& source, const JsonPath& path, std::string* out) {
  MUSTER_RETURN_IF_ERROR(withObject(source, path, "csi", [out](const rapidjson::Value& csi,
                                                                const JsonPath& p) {
    return readString(csi, p, "driver", out);
  }));
  for (const vocabulary::InTreeVolume& v : vocabulary::kInTreeVolumes) {
    const rapidjson::Value* field = findField(source, v.field);
    if (field != nullptr && field->IsObject()) *out = v.csi_driver;
  }
  return absl::OkStatus();
}

// Decodes the object member `name` (when present) into *out with the matching overload.
template <typename T>
absl::Status decodeField(const rapidjson::Value& object, const JsonPath& path,
                         std::string_view name, T* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  return decode(*v, path.field(name), out);
}

template <typename T>
absl::Status decodeList(const rapidjson::Value& object, const JsonPath& path,
                        std::string_view name, std::vector<T>* out) {
  out->clear();
  return forEachElement(object, path, name, [out](const rapidjson::Value& e, const JsonPath& p) {
    return decode(e, p, &out->emplace_back());
  });
}


// True when the member `name` is a non-empty array; an error when it is not an array at all.
absl::Status hasElements(const rapidjson::Value& object, const JsonPath& path,
                         std::string_view name, bool* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsArray()) return typeError(path.field(name), "array");
  *out = *out || !v->Empty();
  return absl::OkStatus();
}

absl::Status decodeOptionalSelector(const rapidjson::Value& object, const JsonPath& path,
                                    std::string_view name, std::optional<LabelSelector>* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  return decode(*v, path.field(name), &out->emplace());
}

}  // namespace

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PodAffinityTerm* out) {
  *out = PodAffinityTerm{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeOptionalSelector(v, path, "labelSelector", &out->label_selector));
  MUSTER_RETURN_IF_ERROR(readStringList(v, path, "namespaces", &out->namespaces));
  MUSTER_RETURN_IF_ERROR(
      decodeOptionalSelector(v, path, "namespaceSelector", &out->namespace_selector));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "topologyKey", &out->topology_key));
  MUSTER_RETURN_IF_ERROR(readStringList(v, path, "matchLabelKeys", &out->match_label_keys));
  return readStringList(v, path, "mismatchLabelKeys", &out->mismatch_label_keys);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, TopologySpreadConstraint* out) {
  *out = TopologySpreadConstraint{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "maxSkew", &out->max_skew));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "topologyKey", &out->topology_key));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "whenUnsatisfiable", &out->when_unsatisfiable));
  MUSTER_RETURN_IF_ERROR(decodeOptionalSelector(v, path, "labelSelector", &out->label_selector));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "minDomains", &out->min_domains));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "nodeAffinityPolicy", &out->node_affinity_policy));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "nodeTaintsPolicy", &out->node_taints_policy));
  return readStringList(v, path, "matchLabelKeys", &out->match_label_keys);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, WeightedPodAffinityTerm* out) {
  *out = WeightedPodAffinityTerm{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "weight", &out->weight));
  return decodeField(v, path, "podAffinityTerm", &out->term);
}

namespace {

absl::Status decodePodAffinity(const rapidjson::Value& object, const JsonPath& path,
                               std::string_view name, PodAffinity* out, bool* has) {
  return withObject(object, path, name, [out, has](const rapidjson::Value& v, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(
        decodeList(v, p, "requiredDuringSchedulingIgnoredDuringExecution", &out->required));
    MUSTER_RETURN_IF_ERROR(
        decodeList(v, p, "preferredDuringSchedulingIgnoredDuringExecution", &out->preferred));
    *has = !out->empty();
    return absl::OkStatus();
  });
}

absl::Status decodePodSpec(const rapidjson::Value& v, const JsonPath& path,
                           const std::string& pod_name, PodSpec* out) {
  MUSTER_RETURN_IF_ERROR(readString(v, path, "nodeName", &out->node_name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "schedulerName", &out->scheduler_name));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "priority", &out->priority));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "priorityClassName", &out->priority_class_name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "preemptionPolicy", &out->preemption_policy));
  MUSTER_RETURN_IF_ERROR(decodeList(v, path, "containers", &out->containers));
  MUSTER_RETURN_IF_ERROR(decodeList(v, path, "initContainers", &out->init_containers));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "overhead", &out->overhead));
  MUSTER_RETURN_IF_ERROR(readStringMap(v, path, "nodeSelector", &out->node_selector));
  if (const rapidjson::Value* affinity = findField(v, "affinity")) {
    MUSTER_RETURN_IF_ERROR(decode(*affinity, path.field("affinity"), &out->affinity.emplace()));
  }
  MUSTER_RETURN_IF_ERROR(decodeList(v, path, "tolerations", &out->tolerations));
  MUSTER_RETURN_IF_ERROR(readBool(v, path, "hostNetwork", &out->host_network));
  MUSTER_RETURN_IF_ERROR(
      hasElements(v, path, "topologySpreadConstraints", &out->has_topology_spread_constraints));
  MUSTER_RETURN_IF_ERROR(
      decodeList(v, path, "topologySpreadConstraints", &out->topology_spread_constraints));
  MUSTER_RETURN_IF_ERROR(forEachElement(
      v, path, "volumes", [&](const rapidjson::Value& volume, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(expectObject(volume, p));
        std::string volume_name;
        MUSTER_RETURN_IF_ERROR(readString(volume, p, "name", &volume_name));
        MUSTER_RETURN_IF_ERROR(withObject(
            volume, p, "persistentVolumeClaim",
            [&](const rapidjson::Value& pvc, const JsonPath& q) {
              std::string claim;
              MUSTER_RETURN_IF_ERROR(readString(pvc, q, "claimName", &claim));
              if (!claim.empty()) out->pvc_claim_names.push_back(std::move(claim));
              return absl::OkStatus();
            }));
        std::string driver;
        MUSTER_RETURN_IF_ERROR(csiDriverOf(volume, p, &driver));
        if (!driver.empty()) out->inline_csi_drivers.push_back(std::move(driver));
        return withObject(volume, p, "ephemeral", [&](const rapidjson::Value&, const JsonPath&) {
          out->pvc_claim_names.push_back(pod_name + "-" + volume_name);
          out->ephemeral_claim_names.push_back(pod_name + "-" + volume_name);
          return absl::OkStatus();
        });
      }));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "hostname", &out->hostname));
  MUSTER_RETURN_IF_ERROR(forEachElement(
      v, path, "schedulingGates", [&](const rapidjson::Value& gate, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(expectObject(gate, p));
        std::string name;
        MUSTER_RETURN_IF_ERROR(readString(gate, p, "name", &name));
        out->scheduling_gates.push_back(std::move(name));
        return absl::OkStatus();
      }));
  MUSTER_RETURN_IF_ERROR(hasElements(v, path, "resourceClaims", &out->has_resource_claims));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "schedulingGroup", [out](const rapidjson::Value& g, const JsonPath& p) {
        return readString(g, p, "podGroupName", &out->scheduling_group);
      }));
  return readString(v, path, "subdomain", &out->subdomain);
}

absl::Status decodePodStatus(const rapidjson::Value& v, const JsonPath& path, PodStatus* out) {
  MUSTER_RETURN_IF_ERROR(readString(v, path, "phase", &out->phase));
  MUSTER_RETURN_IF_ERROR(decodeList(v, path, "conditions", &out->conditions));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "podIP", &out->pod_ip));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "nominatedNodeName", &out->nominated_node_name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "startTime", &out->start_time));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "reason", &out->reason));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "message", &out->message));
  return decodeList(v, path, "containerStatuses", &out->container_statuses);
}


void writeCondition(JsonWriter& w, const Condition& c) {
  w.beginObject().stringField("type", c.type).stringField("status", c.status);
  w.stringFieldIfSet("reason", c.reason);
  w.stringFieldIfSet("message", c.message);
  w.stringFieldIfSet("lastTransitionTime", c.last_transition_time);
  w.endObject();
}

}  // namespace

void writeObjectMeta(JsonWriter& w, const ObjectMeta& meta) {
  w.key("metadata").beginObject();
  w.stringFieldIfSet("name", meta.name);
  w.stringFieldIfSet("generateName", meta.generate_name);
  w.stringFieldIfSet("namespace", meta.namespace_);
  w.stringFieldIfSet("uid", meta.uid);
  w.stringFieldIfSet("resourceVersion", meta.resource_version);
  if (meta.generation != 0) w.integerField("generation", meta.generation);
  w.stringFieldIfSet("creationTimestamp", meta.creation_timestamp);
  if (meta.deletion_timestamp) w.stringField("deletionTimestamp", *meta.deletion_timestamp);
  if (!meta.labels.empty()) w.stringMapField("labels", meta.labels);
  if (!meta.annotations.empty()) w.stringMapField("annotations", meta.annotations);
  if (!meta.owner_references.empty()) {
    w.key("ownerReferences").beginArray();
    for (const OwnerReference& ref : meta.owner_references) {
      w.beginObject()
          .stringField("apiVersion", ref.api_version)
          .stringField("kind", ref.kind)
          .stringField("name", ref.name)
          .stringField("uid", ref.uid);
      if (ref.controller) w.booleanField("controller", true);
      if (ref.block_owner_deletion) w.booleanField("blockOwnerDeletion", true);
      w.endObject();
    }
    w.endArray();
  }
  if (!meta.finalizers.empty()) {
    w.key("finalizers").beginArray();
    for (const std::string& f : meta.finalizers) w.string(f);
    w.endArray();
  }
  w.endObject();
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Quantity* out) {
  *out = Quantity();
  std::string text;
  if (v.IsString()) {
    text.assign(v.GetString(), v.GetStringLength());
  } else if (v.IsNumber()) {
    // RapidJSON prints the shortest text that reads back as the same number ("0.5", "1e-7").
    text = toJson(v);
  } else {
    return typeError(path, "string");
  }
  absl::StatusOr<Quantity> q = Quantity::parse(text);
  if (!q.ok()) return fieldError(path, std::string(q.status().message()));
  *out = *q;
  return absl::OkStatus();
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ResourceList* out) {
  out->clear();
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(checkSize(path, v.MemberCount(), kMaxJsonElements, "entries"));
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    if (it->value.IsNull()) continue;
    MUSTER_RETURN_IF_ERROR(decode(it->value, path.field(name), &(*out)[name]));
  }
  return absl::OkStatus();
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, OwnerReference* out) {
  *out = OwnerReference{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "apiVersion", &out->api_version));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "kind", &out->kind));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "uid", &out->uid));
  MUSTER_RETURN_IF_ERROR(readBool(v, path, "controller", &out->controller));
  return readBool(v, path, "blockOwnerDeletion", &out->block_owner_deletion);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ObjectMeta* out) {
  *out = ObjectMeta{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "namespace", &out->namespace_));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "uid", &out->uid));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "resourceVersion", &out->resource_version));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "generateName", &out->generate_name));
  MUSTER_RETURN_IF_ERROR(readInt64(v, path, "generation", &out->generation));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "creationTimestamp", &out->creation_timestamp));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "deletionTimestamp", &out->deletion_timestamp));
  MUSTER_RETURN_IF_ERROR(readStringMap(v, path, "labels", &out->labels));
  MUSTER_RETURN_IF_ERROR(readStringMap(v, path, "annotations", &out->annotations));
  MUSTER_RETURN_IF_ERROR(decodeList(v, path, "ownerReferences", &out->owner_references));
  return readStringList(v, path, "finalizers", &out->finalizers);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ResourceRequirements* out) {
  *out = ResourceRequirements{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "requests", &out->requests));
  return decodeField(v, path, "limits", &out->limits);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ContainerPort* out) {
  *out = ContainerPort{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "containerPort", &out->container_port));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "hostPort", &out->host_port));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "hostIP", &out->host_ip));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "protocol", &out->protocol));
  if (out->protocol.empty()) out->protocol = "TCP";
  return absl::OkStatus();
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Container* out) {
  *out = Container{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "image", &out->image));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "resources", &out->resources));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "restartPolicy", &out->restart_policy));
  return decodeList(v, path, "ports", &out->ports);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Toleration* out) {
  *out = Toleration{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "key", &out->key));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "operator", &out->operator_));
  if (out->operator_.empty()) out->operator_ = "Equal";
  MUSTER_RETURN_IF_ERROR(readString(v, path, "value", &out->value));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "effect", &out->effect));
  return readInt64(v, path, "tolerationSeconds", &out->toleration_seconds);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Taint* out) {
  *out = Taint{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "key", &out->key));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "value", &out->value));
  return readString(v, path, "effect", &out->effect);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Affinity* out) {
  *out = Affinity{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "nodeAffinity", [out](const rapidjson::Value& na, const JsonPath& p) {
        NodeAffinity& node_affinity = out->node_affinity;
        if (const rapidjson::Value* required =
                findField(na, "requiredDuringSchedulingIgnoredDuringExecution")) {
          MUSTER_RETURN_IF_ERROR(decode(*required,
                                        p.field("requiredDuringSchedulingIgnoredDuringExecution"),
                                        &node_affinity.required.emplace()));
        }
        return decodeList(na, p, "preferredDuringSchedulingIgnoredDuringExecution",
                          &node_affinity.preferred);
      }));
  MUSTER_RETURN_IF_ERROR(
      decodePodAffinity(v, path, "podAffinity", &out->pod_affinity, &out->has_pod_affinity));
  return decodePodAffinity(v, path, "podAntiAffinity", &out->pod_anti_affinity,
                           &out->has_pod_anti_affinity);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Condition* out) {
  *out = Condition{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "type", &out->type));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "status", &out->status));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "reason", &out->reason));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "message", &out->message));
  return readString(v, path, "lastTransitionTime", &out->last_transition_time);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ContainerStatus* out) {
  *out = ContainerStatus{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readBool(v, path, "ready", &out->ready));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "restartCount", &out->restart_count));
  return withObject(v, path, "state", [out](const rapidjson::Value& state, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(
        withObject(state, p, "waiting", [out](const rapidjson::Value& s, const JsonPath& q) {
          out->state = "waiting";
          return readString(s, q, "reason", &out->reason);
        }));
    MUSTER_RETURN_IF_ERROR(
        withObject(state, p, "running", [out](const rapidjson::Value& s, const JsonPath& q) {
          out->state = "running";
          out->reason.clear();
          return readString(s, q, "startedAt", &out->started_at);
        }));
    return withObject(state, p, "terminated", [out](const rapidjson::Value& s, const JsonPath& q) {
      out->state = "terminated";
      out->reason.clear();
      MUSTER_RETURN_IF_ERROR(readInt32(s, q, "exitCode", &out->exit_code));
      MUSTER_RETURN_IF_ERROR(readInt32(s, q, "signal", &out->signal));
      MUSTER_RETURN_IF_ERROR(readString(s, q, "message", &out->message));
      MUSTER_RETURN_IF_ERROR(readString(s, q, "startedAt", &out->started_at));
      return readString(s, q, "reason", &out->reason);
    });
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Pod* out) {
  *out = Pod{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        return decodePodSpec(spec, p, out->meta.name, &out->spec);
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    return decodePodStatus(status, p, &out->status);
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, NodeCondition* out) {
  *out = NodeCondition{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "type", &out->type));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "status", &out->status));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "reason", &out->reason));
  return readString(v, path, "message", &out->message);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Node* out) {
  *out = Node{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(readBool(spec, p, "unschedulable", &out->spec.unschedulable));
        return decodeList(spec, p, "taints", &out->spec.taints);
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(decodeField(status, p, "capacity", &out->status.capacity));
    MUSTER_RETURN_IF_ERROR(decodeField(status, p, "allocatable", &out->status.allocatable));
    return decodeList(status, p, "conditions", &out->status.conditions);
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ObjectReference* out) {
  *out = ObjectReference{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "kind", &out->kind));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "namespace", &out->namespace_));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "uid", &out->uid));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "apiVersion", &out->api_version));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "resourceVersion", &out->resource_version));
  return readString(v, path, "fieldPath", &out->field_path);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Event* out) {
  *out = Event{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "involvedObject", &out->involved_object));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "reason", &out->reason));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "message", &out->message));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "type", &out->type));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "count", &out->count));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "firstTimestamp", &out->first_timestamp));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "lastTimestamp", &out->last_timestamp));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "eventTime", &out->event_time));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "source", [out](const rapidjson::Value& source, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(readString(source, p, "component", &out->source_component));
        return readString(source, p, "host", &out->source_host);
      }));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "reportingComponent", &out->reporting_component));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "reportingInstance", &out->reporting_instance));
  return readString(v, path, "action", &out->action);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Lease* out) {
  *out = Lease{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  return withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
    LeaseSpec& s = out->spec;
    MUSTER_RETURN_IF_ERROR(readString(spec, p, "holderIdentity", &s.holder_identity));
    MUSTER_RETURN_IF_ERROR(readInt32(spec, p, "leaseDurationSeconds", &s.lease_duration_seconds));
    MUSTER_RETURN_IF_ERROR(readString(spec, p, "acquireTime", &s.acquire_time));
    MUSTER_RETURN_IF_ERROR(readString(spec, p, "renewTime", &s.renew_time));
    return readInt32(spec, p, "leaseTransitions", &s.lease_transitions);
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PodGroup* out) {
  *out = PodGroup{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        PodGroupSpec& s = out->spec;
        MUSTER_RETURN_IF_ERROR(readInt32(spec, p, "minMember", &s.min_member));
        MUSTER_RETURN_IF_ERROR(decodeField(spec, p, "minResources", &s.min_resources));
        return readInt32(spec, p, "scheduleTimeoutSeconds", &s.schedule_timeout_seconds);
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    PodGroupStatus& s = out->status;
    MUSTER_RETURN_IF_ERROR(readString(status, p, "phase", &s.phase));
    MUSTER_RETURN_IF_ERROR(readString(status, p, "occupiedBy", &s.occupied_by));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "scheduled", &s.scheduled));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "running", &s.running));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "succeeded", &s.succeeded));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "failed", &s.failed));
    return readString(status, p, "scheduleStartTime", &s.schedule_start_time);
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, WorkloadPodGroup* out) {
  *out = WorkloadPodGroup{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(withObject(
            spec, p, "schedulingPolicy", [out](const rapidjson::Value& policy, const JsonPath& pp) {
              MUSTER_RETURN_IF_ERROR(withObject(
                  policy, pp, "basic", [out](const rapidjson::Value&, const JsonPath&) {
                    out->basic = true;
                    return absl::OkStatus();
                  }));
              return withObject(policy, pp, "gang",
                                [out](const rapidjson::Value& gang, const JsonPath& gp) {
                                  int32_t min_count = 0;
                                  MUSTER_RETURN_IF_ERROR(readInt32(gang, gp, "minCount", &min_count));
                                  out->gang_min_count = min_count;
                                  return absl::OkStatus();
                                });
            }));
        return withObject(
            spec, p, "schedulingConstraints",
            [out](const rapidjson::Value& constraints, const JsonPath& cp) {
              return forEachElement(constraints, cp, "topology",
                                    [out](const rapidjson::Value& t, const JsonPath& tp) {
                                      MUSTER_RETURN_IF_ERROR(expectObject(t, tp));
                                      std::string key;
                                      MUSTER_RETURN_IF_ERROR(readString(t, tp, "key", &key));
                                      out->topology_keys.push_back(std::move(key));
                                      return absl::OkStatus();
                                    });
            });
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    return decodeList(status, p, "conditions", &out->conditions);
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PersistentVolumeClaim* out) {
  *out = PersistentVolumeClaim{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        MUSTER_RETURN_IF_ERROR(readStringList(spec, p, "accessModes", &out->access_modes));
        MUSTER_RETURN_IF_ERROR(readString(spec, p, "storageClassName", &out->storage_class_name));
        MUSTER_RETURN_IF_ERROR(readString(spec, p, "volumeMode", &out->volume_mode));
        MUSTER_RETURN_IF_ERROR(decodeOptionalSelector(spec, p, "selector", &out->selector));
        MUSTER_RETURN_IF_ERROR(withObject(
            spec, p, "resources", [out](const rapidjson::Value& r, const JsonPath& rp) {
              return withObject(r, rp, "requests", [out](const rapidjson::Value& req, const JsonPath& qp) {
                const rapidjson::Value* storage = findField(req, "storage");
                if (storage == nullptr || storage->IsNull()) return absl::OkStatus();
                return decode(*storage, qp.field("storage"), &out->storage_request);
              });
            }));
        return readString(spec, p, "volumeName", &out->volume_name);
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    return readString(status, p, "phase", &out->phase);
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, PersistentVolume* out) {
  *out = PersistentVolume{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
    MUSTER_RETURN_IF_ERROR(
        withObject(spec, p, "nodeAffinity", [out](const rapidjson::Value& na, const JsonPath& np) {
          const rapidjson::Value* required = findField(na, "required");
          if (required == nullptr) return absl::OkStatus();
          return decode(*required, np.field("required"), &out->node_affinity.emplace());
        }));
    MUSTER_RETURN_IF_ERROR(readString(spec, p, "storageClassName", &out->storage_class_name));
    MUSTER_RETURN_IF_ERROR(readStringList(spec, p, "accessModes", &out->access_modes));
    MUSTER_RETURN_IF_ERROR(csiDriverOf(spec, p, &out->csi_driver));
    MUSTER_RETURN_IF_ERROR(readString(spec, p, "volumeMode", &out->volume_mode));
    MUSTER_RETURN_IF_ERROR(
        withObject(spec, p, "capacity", [out](const rapidjson::Value& c, const JsonPath& cp) {
          const rapidjson::Value* storage = findField(c, "storage");
          if (storage == nullptr || storage->IsNull()) return absl::OkStatus();
          return decode(*storage, cp.field("storage"), &out->capacity);
        }));
    return withObject(spec, p, "claimRef", [out](const rapidjson::Value& ref, const JsonPath& rp) {
      MUSTER_RETURN_IF_ERROR(readString(ref, rp, "namespace", &out->claim_namespace));
      MUSTER_RETURN_IF_ERROR(readString(ref, rp, "uid", &out->claim_uid));
      return readString(ref, rp, "name", &out->claim_name);
    });
  }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    return readString(status, p, "phase", &out->phase);
  });
}

// Objects the scheduler reads only for their metadata and spec.selector (a label map for
// Services and ReplicationControllers, a LabelSelector for ReplicaSets and StatefulSets).
template <typename T>
absl::Status decodeSelecting(const rapidjson::Value& v, const JsonPath& path, T* out) {
  *out = T{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  return withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
    if constexpr (std::is_same_v<decltype(out->selector), std::map<std::string, std::string>>) {
      return readStringMap(spec, p, "selector", &out->selector);
    } else {
      return decodeOptionalSelector(spec, p, "selector", &out->selector);
    }
  });
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Service* out) {
  return decodeSelecting(v, path, out);
}
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ReplicationController* out) {
  return decodeSelecting(v, path, out);
}
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ReplicaSet* out) {
  return decodeSelecting(v, path, out);
}
absl::Status decode(const rapidjson::Value& v, const JsonPath& path, StatefulSet* out) {
  return decodeSelecting(v, path, out);
}
absl::Status decode(const rapidjson::Value& v, Service* out) { return decode(v, JsonPath(), out); }
absl::Status decode(const rapidjson::Value& v, ReplicationController* out) {
  return decode(v, JsonPath(), out);
}
absl::Status decode(const rapidjson::Value& v, ReplicaSet* out) { return decode(v, JsonPath(), out); }
absl::Status decode(const rapidjson::Value& v, StatefulSet* out) { return decode(v, JsonPath(), out); }

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, CSINode* out) {
  *out = CSINode{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  return withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
    return forEachElement(spec, p, "drivers", [out](const rapidjson::Value& d, const JsonPath& dp) {
      MUSTER_RETURN_IF_ERROR(expectObject(d, dp));
      CSINode::Driver driver;
      MUSTER_RETURN_IF_ERROR(readString(d, dp, "name", &driver.name));
      MUSTER_RETURN_IF_ERROR(
          withObject(d, dp, "allocatable", [&driver](const rapidjson::Value& a, const JsonPath& ap) {
            MUSTER_RETURN_IF_ERROR(readInt32(a, ap, "count", &driver.allocatable_count));
            if (driver.allocatable_count && *driver.allocatable_count < 0)
              return fieldError(ap.field("count"), "must not be negative");
            return absl::OkStatus();
          }));
      out->drivers.push_back(std::move(driver));
      return absl::OkStatus();
    });
  });
}

absl::Status decode(const rapidjson::Value& v, CSINode* out) { return decode(v, JsonPath(), out); }

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, StorageClass* out) {
  *out = StorageClass{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "provisioner", &out->provisioner));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "volumeBindingMode", &out->volume_binding_mode));
  if (const rapidjson::Value* t = findField(v, "allowedTopologies"); t == nullptr || t->IsNull())
    return absl::OkStatus();
  NodeSelector& topologies = out->allowed_topologies.emplace();
  // TopologySelectorTerm{matchLabelExpressions: [{key, values}]}: a node selector term of In.
  return forEachElement(v, path, "allowedTopologies", [&](const rapidjson::Value& term,
                                                          const JsonPath& tp) {
    MUSTER_RETURN_IF_ERROR(expectObject(term, tp));
    NodeSelectorTerm& t = topologies.node_selector_terms.emplace_back();
    return forEachElement(term, tp, "matchLabelExpressions", [&](const rapidjson::Value& e,
                                                                 const JsonPath& ep) {
      MUSTER_RETURN_IF_ERROR(expectObject(e, ep));
      NodeSelectorRequirement& r = t.match_expressions.emplace_back();
      r.operator_ = "In";
      MUSTER_RETURN_IF_ERROR(readString(e, ep, "key", &r.key));
      return readStringList(e, ep, "values", &r.values);
    });
  });
}

absl::Status decode(const rapidjson::Value& v, StorageClass* out) {
  return decode(v, JsonPath(), out);
}

namespace {
absl::Status decodeSlurmSpec(const rapidjson::Value& v, const JsonPath& p, SlurmJobSpec* s) {
  MUSTER_RETURN_IF_ERROR(expectObject(v, p));
  MUSTER_RETURN_IF_ERROR(readInt64(v, p, "jobId", &s->job_id));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, p, "array", [s](const rapidjson::Value& a, const JsonPath& q) {
        SlurmArrayTask& t = s->array.emplace();
        MUSTER_RETURN_IF_ERROR(readInt64(a, q, "arrayJobId", &t.array_job_id));
        MUSTER_RETURN_IF_ERROR(readInt64(a, q, "taskId", &t.task_id));
        MUSTER_RETURN_IF_ERROR(readInt64(a, q, "taskCount", &t.task_count));
        MUSTER_RETURN_IF_ERROR(readInt64(a, q, "taskMin", &t.task_min));
        MUSTER_RETURN_IF_ERROR(readInt64(a, q, "taskMax", &t.task_max));
        MUSTER_RETURN_IF_ERROR(readInt64(a, q, "taskStep", &t.task_step));
        return readInt32(a, q, "maxRunning", &t.max_running);
      }));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "jobName", &s->job_name));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "partition", &s->partition));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "user", &s->user));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "account", &s->account));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "qos", &s->qos));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "comment", &s->comment));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "command", &s->command));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "submitDir", &s->submit_dir));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "submitHost", &s->submit_host));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "workDir", &s->work_dir));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "stdout", &s->stdout_pattern));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "stderr", &s->stderr_pattern));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "stdin", &s->stdin_path));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "batchSecret", &s->batch_secret));
  MUSTER_RETURN_IF_ERROR(readInt32(v, p, "ntasks", &s->ntasks));
  MUSTER_RETURN_IF_ERROR(readInt32(v, p, "ntasksPerNode", &s->ntasks_per_node));
  MUSTER_RETURN_IF_ERROR(readInt32(v, p, "cpusPerTask", &s->cpus_per_task));
  MUSTER_RETURN_IF_ERROR(forEachElement(v, p, "tasksPerNode",
                                        [s](const rapidjson::Value& e, const JsonPath& q) {
                                          if (!e.IsInt()) return typeError(q, "integer");
                                          s->tasks_per_node.push_back(e.GetInt());
                                          return absl::OkStatus();
                                        }));
  MUSTER_RETURN_IF_ERROR(readInt32(v, p, "gpusPerNode", &s->gpus_per_node));
  MUSTER_RETURN_IF_ERROR(readInt32(v, p, "gpusPerTask", &s->gpus_per_task));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "gpuType", &s->gpu_type));
  MUSTER_RETURN_IF_ERROR(readInt64(v, p, "memPerNodeMB", &s->mem_per_node_mb));
  MUSTER_RETURN_IF_ERROR(readInt64(v, p, "memPerCpuMB", &s->mem_per_cpu_mb));
  MUSTER_RETURN_IF_ERROR(readInt64(v, p, "timeLimitSeconds", &s->time_limit_seconds));
  MUSTER_RETURN_IF_ERROR(readBool(v, p, "requeue", &s->requeue));
  MUSTER_RETURN_IF_ERROR(readBool(v, p, "hold", &s->hold));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "beginTime", &s->begin_time));
  MUSTER_RETURN_IF_ERROR(readString(v, p, "dependency", &s->dependency));
  MUSTER_RETURN_IF_ERROR(readBool(v, p, "killOnInvalidDependency", &s->kill_on_invalid_dep));
  MUSTER_RETURN_IF_ERROR(readBool(v, p, "exclusive", &s->exclusive));
  for (auto [name, list] : {std::pair{"requiredNodes", &s->required_nodes},
                            std::pair{"excludedNodes", &s->excluded_nodes}})
    MUSTER_RETURN_IF_ERROR(forEachElement(v, p, name, [list](const rapidjson::Value& e, const JsonPath& q) {
      if (!e.IsString()) return typeError(q, "string");
      list->emplace_back(e.GetString(), e.GetStringLength());
      return absl::OkStatus();
    }));
  MUSTER_RETURN_IF_ERROR(readInt32(v, p, "requeueAttempt", &s->requeue_attempt));
  MUSTER_RETURN_IF_ERROR(withObject(v, p, "signal", [&](const rapidjson::Value& v, const JsonPath& q) {
    SlurmSignal& sig = s->signal.emplace();
    MUSTER_RETURN_IF_ERROR(readInt32(v, q, "seq", &sig.seq));
    MUSTER_RETURN_IF_ERROR(readInt32(v, q, "number", &sig.number));
    return readString(v, q, "target", &sig.target);
  }));
  return readBool(v, p, "cancel", &s->cancel);
}
}  // namespace

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, SlurmStepStatus* out) {
  *out = SlurmStepStatus{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "id", &out->id));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "name", &out->name));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "state", &out->state));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "exitCode", &out->exit_code));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "startTime", &out->start_time));
  MUSTER_RETURN_IF_ERROR(readString(v, path, "endTime", &out->end_time));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "nodes", &out->nodes));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "tasks", &out->tasks));
  MUSTER_RETURN_IF_ERROR(readInt32(v, path, "cpus", &out->cpus));
  return readString(v, path, "nodeList", &out->node_list);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, ParallelJob* out) {
  *out = ParallelJob{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(
      withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
        ParallelJobSpec& s = out->spec;
        MUSTER_RETURN_IF_ERROR(
            withObject(spec, p, "runtimeRef", [&s](const rapidjson::Value& ref, const JsonPath& q) {
              return readString(ref, q, "name", &s.runtime_ref_name);
            }));
        MUSTER_RETURN_IF_ERROR(readInt32(spec, p, "numPods", &s.num_pods));
        MUSTER_RETURN_IF_ERROR(readInt32(spec, p, "numProcPerPod", &s.num_proc_per_pod));
        MUSTER_RETURN_IF_ERROR(withObject(
            spec, p, "launcher", [&s](const rapidjson::Value& launcher, const JsonPath& q) {
              s.launcher = toJson(launcher);
              return withObject(
                  launcher, q, "spec", [&s](const rapidjson::Value& pod_spec, const JsonPath& r) {
                    return forEachElement(
                        pod_spec, r, "containers",
                        [&s](const rapidjson::Value& c, const JsonPath& cp) {
                          MUSTER_RETURN_IF_ERROR(expectObject(c, cp));
                          return readString(c, cp, "name",
                                            &s.launcher_container_names.emplace_back());
                        });
                  });
            }));
        MUSTER_RETURN_IF_ERROR(
            withObject(spec, p, "worker", [&s](const rapidjson::Value& worker, const JsonPath&) {
              s.worker = toJson(worker);
              return absl::OkStatus();
            }));
        MUSTER_RETURN_IF_ERROR(
            withObject(spec, p, "slurm", [&s](const rapidjson::Value& v, const JsonPath& q) {
              return decodeSlurmSpec(v, q, &s.slurm.emplace());
            }));
        return withObject(spec, p, "failurePolicy",
                          [&s](const rapidjson::Value& policy, const JsonPath& q) {
                            return readInt32(policy, q, "maxRestarts", &s.max_restarts);
                          });
      }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    ParallelJobStatus& s = out->status;
    MUSTER_RETURN_IF_ERROR(readString(status, p, "phase", &s.phase));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "restarts", &s.restarts));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "preemptions", &s.preemptions));
    MUSTER_RETURN_IF_ERROR(readString(status, p, "jobGroupName", &s.job_group_name));
    MUSTER_RETURN_IF_ERROR(readString(status, p, "message", &s.message));
    MUSTER_RETURN_IF_ERROR(readString(status, p, "startTime", &s.start_time));
    MUSTER_RETURN_IF_ERROR(readString(status, p, "completionTime", &s.completion_time));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "podsReady", &s.pods_ready));
    MUSTER_RETURN_IF_ERROR(readString(status, p, "ready", &s.ready));
    MUSTER_RETURN_IF_ERROR(readInt32(status, p, "pods", &s.pods));
    MUSTER_RETURN_IF_ERROR(
        withObject(status, p, "slurm", [&s](const rapidjson::Value& v, const JsonPath& q) {
          SlurmJobStatus& slurm = s.slurm.emplace();
          MUSTER_RETURN_IF_ERROR(readString(v, q, "state", &slurm.state));
          MUSTER_RETURN_IF_ERROR(readString(v, q, "reason", &slurm.reason));
          MUSTER_RETURN_IF_ERROR(readString(v, q, "startTime", &slurm.start_time));
          MUSTER_RETURN_IF_ERROR(readString(v, q, "endTime", &slurm.end_time));
          MUSTER_RETURN_IF_ERROR(readString(v, q, "dependency", &slurm.dependency));
          MUSTER_RETURN_IF_ERROR(readInt32(v, q, "stepsOmitted", &slurm.steps_omitted));
          MUSTER_RETURN_IF_ERROR(decodeList(v, q, "steps", &slurm.steps));
          return readString(v, q, "exitCode", &slurm.exit_code);
        }));
    return decodeList(status, p, "conditions", &s.conditions);
  });
}

absl::Status decode(const rapidjson::Value& v, ObjectMeta* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, Pod* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, Node* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, Event* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, Lease* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, PodGroup* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, WorkloadPodGroup* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, PersistentVolumeClaim* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, const JsonPath& path, Namespace* out) {
  *out = Namespace{};
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  return decodeField(v, path, "metadata", &out->meta);
}

absl::Status decode(const rapidjson::Value& v, Namespace* out) { return decode(v, JsonPath(), out); }

absl::Status decode(const rapidjson::Value& v, PodDisruptionBudget* out) {
  *out = PodDisruptionBudget{};
  const JsonPath path;
  MUSTER_RETURN_IF_ERROR(expectObject(v, path));
  MUSTER_RETURN_IF_ERROR(decodeField(v, path, "metadata", &out->meta));
  MUSTER_RETURN_IF_ERROR(withObject(v, path, "spec", [out](const rapidjson::Value& spec, const JsonPath& p) {
    return decodeOptionalSelector(spec, p, "selector", &out->selector);
  }));
  return withObject(v, path, "status", [out](const rapidjson::Value& status, const JsonPath& p) {
    return readInt32(status, p, "disruptionsAllowed", &out->disruptions_allowed);
  });
}

absl::Status decode(const rapidjson::Value& v, PersistentVolume* out) {
  return decode(v, JsonPath(), out);
}

absl::Status decode(const rapidjson::Value& v, ParallelJob* out) {
  return decode(v, JsonPath(), out);
}

std::string encode(const Binding& binding) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Binding");
  w.key("metadata").beginObject().stringField("name", binding.meta.name);
  w.stringField("namespace", binding.meta.namespace_);
  w.stringFieldIfSet("uid", binding.meta.uid);
  w.endObject();
  w.key("target")
      .beginObject()
      .stringField("apiVersion", "v1")
      .stringField("kind", "Node")
      .stringField("name", binding.target_node)
      .endObject();
  w.endObject();
  return w.str();
}

std::string rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", absl::FromUnixSeconds(absl::ToUnixSeconds(t)),
                          absl::UTCTimeZone());
}

std::string rfc3339Now() { return rfc3339(absl::Now()); }

std::string eventSeriesPatch(int32_t count, std::string_view last_timestamp) {
  JsonWriter w;
  w.beginObject().integerField("count", count).stringField("lastTimestamp", last_timestamp);
  w.endObject();
  return w.str();
}

Event newEvent(ObjectReference ref, std::string type, std::string reason, std::string message,
               std::string_view component, std::string_view instance, absl::Time now) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
  Event e;
  e.meta.namespace_ = ref.namespace_.empty() ? "default" : ref.namespace_;
  // Event names are DNS subdomains of at most 253 characters.
  e.meta.name = ref.name.substr(0, 200) + "." + suffix;
  e.involved_object = std::move(ref);
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.type = std::move(type);
  e.count = 1;
  e.first_timestamp = e.last_timestamp = rfc3339(now);
  e.source_component = std::string(component);
  e.reporting_component = std::string(component);
  e.reporting_instance = std::string(instance);
  return e;
}

std::string encode(const Event& event) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Event");
  writeObjectMeta(w, event.meta);
  const ObjectReference& ref = event.involved_object;
  w.key("involvedObject").beginObject();
  w.stringFieldIfSet("kind", ref.kind);
  w.stringFieldIfSet("namespace", ref.namespace_);
  w.stringFieldIfSet("name", ref.name);
  w.stringFieldIfSet("uid", ref.uid);
  w.stringFieldIfSet("apiVersion", ref.api_version);
  w.stringFieldIfSet("resourceVersion", ref.resource_version);
  w.stringFieldIfSet("fieldPath", ref.field_path);
  w.endObject();
  w.stringFieldIfSet("reason", event.reason);
  w.stringFieldIfSet("message", event.message);
  w.stringFieldIfSet("type", event.type);
  if (event.count != 0) w.integerField("count", event.count);
  w.stringFieldIfSet("firstTimestamp", event.first_timestamp);
  w.stringFieldIfSet("lastTimestamp", event.last_timestamp);
  if (event.event_time) w.stringField("eventTime", *event.event_time);
  if (!event.source_component.empty() || !event.source_host.empty()) {
    w.key("source").beginObject();
    w.stringFieldIfSet("component", event.source_component);
    w.stringFieldIfSet("host", event.source_host);
    w.endObject();
  }
  w.stringFieldIfSet("reportingComponent", event.reporting_component);
  w.stringFieldIfSet("reportingInstance", event.reporting_instance);
  w.stringFieldIfSet("action", event.action);
  w.endObject();
  return w.str();
}

std::string encode(const Lease& lease) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "coordination.k8s.io/v1").stringField("kind", "Lease");
  writeObjectMeta(w, lease.meta);
  const LeaseSpec& s = lease.spec;
  w.key("spec").beginObject();
  w.stringFieldIfSet("holderIdentity", s.holder_identity);
  if (s.lease_duration_seconds) w.integerField("leaseDurationSeconds", *s.lease_duration_seconds);
  w.stringFieldIfSet("acquireTime", s.acquire_time);
  w.stringFieldIfSet("renewTime", s.renew_time);
  if (s.lease_transitions) w.integerField("leaseTransitions", *s.lease_transitions);
  w.endObject();
  w.endObject();
  return w.str();
}

std::string statusPatch(const PodGroupStatus& status) {
  JsonWriter w;
  w.beginObject().key("status").beginObject();
  w.stringOrNullField("phase", status.phase);
  w.stringOrNullField("occupiedBy", status.occupied_by);
  w.integerField("scheduled", status.scheduled);
  w.integerField("running", status.running);
  w.integerField("succeeded", status.succeeded);
  w.integerField("failed", status.failed);
  w.stringOrNullField("scheduleStartTime", status.schedule_start_time);
  w.endObject().endObject();
  return w.str();
}

std::string statusPatch(const ParallelJobStatus& status) {
  JsonWriter w;
  w.beginObject().key("status").beginObject();
  w.stringOrNullField("phase", status.phase);
  w.integerField("restarts", status.restarts);
  if (status.preemptions > 0) w.integerField("preemptions", status.preemptions);
  w.stringOrNullField("jobGroupName", status.job_group_name);
  w.stringOrNullField("message", status.message);
  w.stringOrNullField("startTime", status.start_time);
  w.stringOrNullField("completionTime", status.completion_time);
  if (status.pods_ready) w.integerField("podsReady", *status.pods_ready);
  if (!status.ready.empty()) w.stringField("ready", status.ready);
  if (status.pods) w.integerField("pods", *status.pods);
  if (status.slurm) {
    w.key("slurm").beginObject();
    w.stringField("state", status.slurm->state);
    w.stringOrNullField("reason", status.slurm->reason);
    w.stringOrNullField("exitCode", status.slurm->exit_code);
    w.stringOrNullField("startTime", status.slurm->start_time);
    w.stringOrNullField("endTime", status.slurm->end_time);
    w.stringOrNullField("dependency", status.slurm->dependency);
    // A merge patch replaces a list whole; null removes it.
    if (status.slurm->steps.empty()) {
      w.key("steps").null();
    } else {
      w.key("steps").beginArray();
      for (const SlurmStepStatus& step : status.slurm->steps) {
        w.beginObject();
        w.integerField("id", step.id);
        w.stringFieldIfSet("name", step.name);
        w.stringField("state", step.state);
        w.stringField("exitCode", step.exit_code);
        w.stringFieldIfSet("startTime", step.start_time);
        w.stringFieldIfSet("endTime", step.end_time);
        w.integerField("nodes", step.nodes).integerField("tasks", step.tasks);
        w.integerField("cpus", step.cpus);
        w.stringFieldIfSet("nodeList", step.node_list);
        w.endObject();
      }
      w.endArray();
    }
    if (status.slurm->steps_omitted > 0) w.integerField("stepsOmitted", status.slurm->steps_omitted);
    else w.key("stepsOmitted").null();
    w.endObject();
  }
  w.key("conditions").beginArray();
  for (const Condition& c : status.conditions) writeCondition(w, c);
  w.endArray();
  w.endObject().endObject();
  return w.str();
}

std::string encode(const ParallelJob& job) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "preferred.jp/v1alpha1").stringField("kind", "ParallelJob");
  writeObjectMeta(w, job.meta);
  const ParallelJobSpec& s = job.spec;
  w.key("spec").beginObject();
  w.key("runtimeRef").beginObject().stringField("name", s.runtime_ref_name).endObject();
  w.integerField("numPods", s.num_pods);
  w.integerField("numProcPerPod", s.num_proc_per_pod);
  if (!s.launcher.empty()) w.key("launcher").raw(s.launcher);
  if (s.worker) w.key("worker").raw(*s.worker);
  w.key("failurePolicy").beginObject().integerField("maxRestarts", s.max_restarts).endObject();
  if (s.slurm) {
    const SlurmJobSpec& j = *s.slurm;
    w.key("slurm").beginObject();
    w.integerField("jobId", j.job_id);
    if (j.array) {
      const SlurmArrayTask& t = *j.array;
      w.key("array").beginObject();
      w.integerField("arrayJobId", t.array_job_id).integerField("taskId", t.task_id);
      w.integerField("taskCount", t.task_count).integerField("taskMin", t.task_min);
      w.integerField("taskMax", t.task_max).integerField("taskStep", t.task_step);
      if (t.max_running) w.integerField("maxRunning", *t.max_running);
      w.endObject();
    }
    w.stringFieldIfSet("jobName", j.job_name);
    w.stringFieldIfSet("partition", j.partition);
    w.stringFieldIfSet("user", j.user);
    w.stringFieldIfSet("account", j.account);
    w.stringFieldIfSet("qos", j.qos);
    w.stringFieldIfSet("comment", j.comment);
    w.stringFieldIfSet("command", j.command);
    w.stringFieldIfSet("submitDir", j.submit_dir);
    w.stringFieldIfSet("submitHost", j.submit_host);
    w.stringFieldIfSet("workDir", j.work_dir);
    w.stringFieldIfSet("stdout", j.stdout_pattern);
    w.stringFieldIfSet("stderr", j.stderr_pattern);
    w.stringFieldIfSet("stdin", j.stdin_path);
    w.stringFieldIfSet("batchSecret", j.batch_secret);
    w.integerField("ntasks", j.ntasks);
    if (j.ntasks_per_node) w.integerField("ntasksPerNode", *j.ntasks_per_node);
    if (j.cpus_per_task) w.integerField("cpusPerTask", *j.cpus_per_task);
    w.key("tasksPerNode").beginArray();
    for (int32_t t : j.tasks_per_node) w.integer(t);
    w.endArray();
    if (j.gpus_per_node) w.integerField("gpusPerNode", *j.gpus_per_node);
    if (j.gpus_per_task) w.integerField("gpusPerTask", *j.gpus_per_task);
    w.stringFieldIfSet("gpuType", j.gpu_type);
    if (j.mem_per_node_mb) w.integerField("memPerNodeMB", *j.mem_per_node_mb);
    if (j.mem_per_cpu_mb) w.integerField("memPerCpuMB", *j.mem_per_cpu_mb);
    if (j.time_limit_seconds) w.integerField("timeLimitSeconds", *j.time_limit_seconds);
    w.booleanField("requeue", j.requeue);
    if (j.hold) w.booleanField("hold", true);
    w.stringFieldIfSet("beginTime", j.begin_time);
    w.stringFieldIfSet("dependency", j.dependency);
    if (!j.kill_on_invalid_dep) w.booleanField("killOnInvalidDependency", false);
    if (j.exclusive) w.booleanField("exclusive", true);
    for (auto [name, list] : {std::pair{"requiredNodes", &j.required_nodes},
                              std::pair{"excludedNodes", &j.excluded_nodes}}) {
      if (list->empty()) continue;
      w.key(name).beginArray();
      for (const std::string& n : *list) w.string(n);
      w.endArray();
    }
    if (j.cancel) w.booleanField("cancel", true);
    if (j.requeue_attempt) w.integerField("requeueAttempt", *j.requeue_attempt);
    if (j.signal) {
      w.key("signal").beginObject();
      w.integerField("seq", j.signal->seq).integerField("number", j.signal->number);
      w.stringFieldIfSet("target", j.signal->target);
      w.endObject();
    }
    w.endObject();
  }
  w.endObject().endObject();
  return w.str();
}

std::string podConditionPatch(const PodCondition& condition, std::string_view uid) {
  JsonWriter w;
  w.beginObject();
  if (!uid.empty()) w.key("metadata").beginObject().stringField("uid", uid).endObject();
  w.key("status").beginObject().key("conditions").beginArray();
  writeCondition(w, condition);
  w.endArray().endObject().endObject();
  return w.str();
}

std::string nominatedNodeNamePatch(std::string_view node) {
  JsonWriter w;
  w.beginObject().key("status").beginObject();
  w.stringOrNullField("nominatedNodeName", node);
  w.endObject().endObject();
  return w.str();
}

std::string selectedNodePatch(std::string_view node, std::string_view claim_uid) {
  JsonWriter w;
  w.beginObject().key("metadata").beginObject();
  w.stringFieldIfSet("uid", claim_uid);
  w.key("annotations").beginObject();
  w.stringOrNullField(vocabulary::kSelectedNodeAnnotation, node);
  w.endObject().endObject().endObject();
  return w.str();
}

std::string annotationPatch(std::string_view key, std::string_view value, std::string_view uid) {
  JsonWriter w;
  w.beginObject().key("metadata").beginObject();
  w.stringFieldIfSet("uid", uid);
  w.key("annotations").beginObject().stringField(key, value);
  w.endObject().endObject().endObject();
  return w.str();
}

std::string claimRefPatch(std::string_view claim_namespace, std::string_view claim_name,
                          std::string_view claim_uid, std::string_view resource_version) {
  JsonWriter w;
  w.beginObject().key("metadata").beginObject();
  w.stringFieldIfSet("resourceVersion", resource_version);
  if (!claim_name.empty()) {
    // What the PersistentVolume controller marks a binding it made itself with.
    w.key("annotations").beginObject().stringField("pv.kubernetes.io/bound-by-controller", "yes");
    w.endObject();
  }
  w.endObject().key("spec").beginObject();
  if (claim_name.empty()) {
    w.key("claimRef").null();
  } else {
    w.key("claimRef").beginObject().stringField("kind", "PersistentVolumeClaim");
    w.stringField("apiVersion", "v1").stringField("namespace", claim_namespace);
    w.stringField("name", claim_name).stringFieldIfSet("uid", claim_uid).endObject();
  }
  w.endObject().endObject();
  return w.str();
}

void writeConditions(JsonWriter& w, const std::vector<Condition>& conditions) {
  w.key("conditions").beginArray();
  for (const Condition& c : conditions) {
    w.beginObject().stringField("type", c.type).stringField("status", c.status);
    w.stringField("reason", c.reason).stringField("message", c.message);
    w.stringField("lastTransitionTime", c.last_transition_time);
    w.endObject();
  }
  w.endArray();
}

std::string workloadPodGroupConditionPatch(const Condition& condition,
                                           int64_t observed_generation) {
  JsonWriter w;
  w.beginObject().key("status").beginObject().key("conditions").beginArray();
  w.beginObject().stringField("type", condition.type).stringField("status", condition.status);
  w.stringField("reason", condition.reason);
  w.stringField("message", condition.message);
  w.stringField("lastTransitionTime", condition.last_transition_time);
  if (observed_generation > 0) w.integerField("observedGeneration", observed_generation);
  w.endObject();
  w.endArray().endObject().endObject();
  return w.str();
}

std::string evictionBody(std::string_view pod_namespace, std::string_view pod_name,
                         std::string_view uid) {
  JsonWriter w;
  w.beginObject();
  w.stringField("apiVersion", "policy/v1");
  w.stringField("kind", "Eviction");
  w.key("metadata");
  w.beginObject();
  w.stringField("name", pod_name);
  w.stringField("namespace", pod_namespace);
  w.endObject();
  if (!uid.empty()) {
    w.key("deleteOptions").beginObject().key("preconditions").beginObject();
    w.stringField("uid", uid);
    w.endObject().endObject();
  }
  w.endObject();
  return w.str();
}

}  // namespace muster::proto

