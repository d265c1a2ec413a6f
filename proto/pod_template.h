#pragma once

// Pods built from a user's PodTemplateSpec: the job engine (and the Slurm runtime) add mounts,
// env, init containers and names to the user's template without knowing Pod JSON. Every field of
// the template that Muster does not know is kept exactly as written; what Muster adds never
// overrides what the user set (an env var, a mount path, a volume or container of the same name
// wins over Muster's).
//
// Besides the codecs, this is the only place that knows the field names of a Pod spec.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/objects.h"
#include "rapidjson/document.h"

namespace muster::proto {

// A volume Muster adds to a pod.
struct VolumeSource {
  enum class Kind { kSecret, kConfigMap, kEmptyDir };
  Kind kind = Kind::kEmptyDir;
  std::string object;  // the Secret's or ConfigMap's name
  int default_mode = -1;  // file mode (decimal, e.g. 0444); -1: the API's default
};

class PodTemplate {
 public:
  // Parses a PodTemplateSpec ({"metadata":…,"spec":…}); `what` names it in errors
  // ("spec.launcher"). InvalidArgument when it is not a JSON object, has no spec, or a field
  // Muster edits or the API server types is of the wrong type (the message names the field:
  // "spec.launcher.spec.containers[0].env: expected a list of objects, got an object"): lists
  // (containers, env, volumeMounts, volumes, ...), strings (image, command, ...), resource
  // quantities, label and annotation maps, and annotations too large for a pod.
  static absl::StatusOr<PodTemplate> parse(std::string_view json, std::string_view what);

  PodTemplate(const PodTemplate& other);
  PodTemplate& operator=(const PodTemplate& other);
  PodTemplate(PodTemplate&&) noexcept = default;
  PodTemplate& operator=(PodTemplate&&) noexcept = default;
  ~PodTemplate();

  // A container of the template (in spec.containers or spec.initContainers). A handle: it stays
  // valid while its template lives, also when containers are added.
  class Container {
   public:
    std::string name() const;
    std::string image() const;
    // Appends {name, value} to env unless the container already sets `name`.
    void addEnv(std::string_view name, std::string_view value);
    // Copies `other`'s env entry `name` as written (valueFrom included), when it has one and this
    // container does not.
    void copyEnv(const Container& other, std::string_view name);
    // Mounts `volume` at `path` unless that volume or that path is mounted already.
    void addMount(std::string_view volume, std::string_view path, bool read_only);
    void setCommand(const std::vector<std::string>& argv);
    void setImage(std::string_view image);
    void setImagePullPolicy(std::string_view policy);
    // Copies these fields of `other` verbatim (image, imagePullPolicy, env, envFrom, resources,
    // securityContext, workingDir, volumeMounts, ...), where `other` sets them.
    void copyFields(const Container& other, const std::vector<std::string_view>& fields);
    // Copies `other`'s requests and limits of the named resources (as written).
    void copyResources(const Container& other, const std::vector<std::string_view>& resources);
    void addPort(std::string_view name, int32_t port, std::string_view protocol = "TCP");
    void setTcpReadinessProbe(int32_t port, int32_t period_seconds);
    // No privilege escalation, every capability dropped, read-only root filesystem.
    void setRestrictedSecurityContext();
    // Whether requests or limits name any of `resources`.
    bool requestsAny(const std::vector<std::string_view>& resources) const;
    // Merges `other`'s resources into this container's: each of other's requests and limits
    // replaces the entry of that resource name, every other entry stays (a partition's limits
    // stay under a job's requests). InvalidArgument when a request then exceeds the limit of
    // the same name (the API server would refuse the pod), naming both.
    absl::Status mergeResources(const Container& other);

   private:
    friend class PodTemplate;
    Container(PodTemplate* t, bool init, std::string name) : t_(t), init_(init), name_(std::move(name)) {}
    rapidjson::Value& value() const;
    PodTemplate* t_;
    bool init_;
    std::string name_;
  };

  // metadata.labels / metadata.annotations (string values only).
  std::map<std::string, std::string> labels() const;
  std::map<std::string, std::string> annotations() const;

  void setHostname(std::string_view hostname);
  void setSubdomain(std::string_view subdomain);
  void setSchedulerNameIfUnset(std::string_view name);
  void setRestartPolicyIfUnset(std::string_view policy);
  // spec.automountServiceAccountToken; with `only_if_unset` a value the template sets stays.
  void setAutomountServiceAccountToken(bool value, bool only_if_unset);
  std::map<std::string, std::string> nodeSelector() const;  // spec.nodeSelector (strings)
  void setPriorityClassName(std::string_view name);
  void setActiveDeadlineSeconds(int64_t seconds);
  // Adds nodeSelector entries; a key the template already selects on keeps its value.
  void addNodeSelector(const std::map<std::string, std::string>& selector);
  // Appends DNS search domains (spec.dnsConfig.searches), e.g. a headless Service's domain so
  // that the job's short host names resolve.
  void addDnsSearches(const std::vector<std::string>& domains);
  // Copies these fields of `other`'s pod spec verbatim (e.g. "affinity", "tolerations"), where
  // `other` sets them; the template's own value is replaced.
  void copySpecFields(const PodTemplate& other, const std::vector<std::string_view>& fields);
  // Adds `other`'s spec.affinity to the template's so that both must hold (a partition's node
  // restriction and a job's -w/-x/-C): required node affinity is the AND of the two
  // nodeSelectorTerms lists (their cross product, each pair's matchExpressions and matchFields
  // concatenated; one side absent: the other's), preferred terms and pod (anti-)affinity terms
  // are concatenated. InvalidArgument when the product would exceed kMaxMergedNodeSelectorTerms.
  absl::Status mergeAffinity(const PodTemplate& other);
  static constexpr size_t kMaxMergedNodeSelectorTerms = 64;
  // Adds the volume unless the template has a volume of that name.
  void addVolume(std::string_view name, const VolumeSource& source);
  // A downward API volume: file path -> the pod's field (fieldRef.fieldPath, e.g.
  // "metadata.annotations['muster.dev/slurm-signal']"); the kubelet rewrites the files when the
  // pod's metadata changes. Nothing when a volume of that name exists.
  void addDownwardApiVolume(std::string_view name, const std::map<std::string, std::string>& fields);

  std::optional<Container> container(std::string_view name);
  std::optional<Container> initContainer(std::string_view name);
  // An empty container `name` at the end of spec.containers, replacing one of that name.
  Container setContainer(std::string_view name);
  // A new init container, last or first, unless one of that name exists (then that one).
  Container appendInitContainer(std::string_view name);
  Container prependInitContainer(std::string_view name);
  // Whether any container or init container requests (or limits) any of `resources`.
  bool requestsAny(const std::vector<std::string_view>& resources) const;

  // The Pod: apiVersion v1, kind Pod, metadata from `meta` (name, namespace, labels,
  // annotations, owner references), spec from the template.
  std::string toPod(const ObjectMeta& meta) const;

 private:
  explicit PodTemplate(std::unique_ptr<rapidjson::Document> doc);
  rapidjson::Value& spec();
  const rapidjson::Value& spec() const;
  rapidjson::Value& list(bool init);
  Container insertContainer(std::string_view name, bool init, bool front);

  std::unique_ptr<rapidjson::Document> doc_;
};

// Other objects the job engine creates, as plain values (encoded by proto/codec.h).
// (Service is in proto/objects.h: the scheduler reads Services too.)
struct Secret {
  ObjectMeta meta;
  std::string type = "Opaque";
  std::map<std::string, std::string> string_data;
  bool immutable = false;  // written as immutable: true (the API server refuses any change)
};
struct ConfigMap {
  ObjectMeta meta;
  std::map<std::string, std::string> data;
};

std::string encode(const Service& service);
std::string encode(const Secret& secret);
std::string encode(const ConfigMap& config_map);

}  // namespace muster::proto
