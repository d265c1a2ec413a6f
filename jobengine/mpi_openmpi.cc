#include "jobengine/mpi_openmpi.h"

#include <string>

#include "jobengine/naming.h"
#include "jobengine/scripts.h"
#include "jobengine/ssh_keys.h"
#include "proto/json.h"

namespace muster::jobengine {
namespace {

using rapidjson::Value;
using Alloc = rapidjson::Document::AllocatorType;

constexpr char kSshVolume[] = "muster-ssh";
constexpr char kConfigVolume[] = "muster-mpi";
constexpr char kRunVolume[] = "muster-run";
constexpr char kWaitContainer[] = "muster-wait-workers";
constexpr char kRdmaConfContainer[] = "muster-rdma-conf";
constexpr std::string_view kDeviceResources[] = {proto::kGpuResource, proto::kRdmaResource};

// v's member `name`, or MemberEnd(); `name` need not be NUL-terminated.
Value::ConstMemberIterator findMember(const Value& v, std::string_view name) {
  Value key(rapidjson::StringRef(name.data(), static_cast<rapidjson::SizeType>(name.size())));
  return v.FindMember(key);
}

Value str(std::string_view s, Alloc& a) {
  return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// The member `name` of `obj`, made an object (or array) when absent, null or of another type.
Value& member(Value& obj, const char* name, rapidjson::Type type, Alloc& a) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) {
    obj.AddMember(str(name, a), Value(type), a);
    return obj.FindMember(name)->value;
  }
  if (it->value.GetType() != type) it->value = Value(type);
  return it->value;
}

void set(Value& obj, const char* name, Value v, Alloc& a) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) obj.AddMember(str(name, a), v, a);
  else it->value = v;
}

bool isSet(const Value& obj, const char* name) {
  auto it = obj.FindMember(name);
  return it != obj.MemberEnd() && !it->value.IsNull();
}

std::string_view stringOf(const Value& obj, const char* name) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return std::string_view(it->value.GetString(), it->value.GetStringLength());
}

Value* findByName(Value& array, std::string_view name) {
  if (!array.IsArray()) return nullptr;
  for (auto& item : array.GetArray())
    if (item.IsObject() && stringOf(item, "name") == name) return &item;
  return nullptr;
}

void addEnv(Value& container, std::string_view name, std::string_view value, Alloc& a) {
  Value& env = member(container, "env", rapidjson::kArrayType, a);
  if (findByName(env, name) != nullptr) return;  // the user's own value wins
  Value e(rapidjson::kObjectType);
  e.AddMember("name", str(name, a), a);
  e.AddMember("value", str(value, a), a);
  env.PushBack(e, a);
}

void addMount(Value& container, const char* volume, const char* path, bool read_only, Alloc& a) {
  Value& mounts = member(container, "volumeMounts", rapidjson::kArrayType, a);
  for (auto& m : mounts.GetArray())
    if (m.IsObject() && (stringOf(m, "name") == volume || stringOf(m, "mountPath") == path)) return;
  Value m(rapidjson::kObjectType);
  m.AddMember("name", str(volume, a), a);
  m.AddMember("mountPath", str(path, a), a);
  if (read_only) m.AddMember("readOnly", true, a);
  mounts.PushBack(m, a);
}

bool requestsAccelerators(const Value& spec) {
  for (const char* list : {"containers", "initContainers"}) {
    auto it = spec.FindMember(list);
    if (it == spec.MemberEnd() || !it->value.IsArray()) continue;
    for (const auto& c : it->value.GetArray()) {
      if (!c.IsObject()) continue;
      auto res = c.FindMember("resources");
      if (res == c.MemberEnd() || !res->value.IsObject()) continue;
      for (const char* kind : {"limits", "requests"}) {
        auto m = res->value.FindMember(kind);
        if (m == res->value.MemberEnd() || !m->value.IsObject()) continue;
        for (std::string_view name : kDeviceResources)
          if (findMember(m->value, name) != m->value.MemberEnd()) return true;
      }
    }
  }
  return false;
}

// Mounts and env the engine gives a container that takes part in MPI.
void wireContainer(Value& c, const proto::ParallelJob& job, int32_t index, bool accelerators,
                   Alloc& a) {
  addMount(c, kSshVolume, kSecretMountPath, true, a);
  addMount(c, kConfigVolume, kConfigMountPath, true, a);
  addMount(c, kRunVolume, kRunMountPath, false, a);
  const std::string hostfile = std::string(kConfigMountPath) + "/hostfile";
  const std::string rsh_args = std::string("-F ") + kRunMountPath + "/ssh/config";
  addEnv(c, "OMPI_MCA_orte_default_hostfile", hostfile, a);  // Open MPI 4
  addEnv(c, "OMPI_MCA_prte_default_hostfile", hostfile, a);  // Open MPI 5 (PRRTE)
  addEnv(c, "PRTE_MCA_prte_default_hostfile", hostfile, a);
  addEnv(c, "OMPI_MCA_plm_rsh_args", rsh_args, a);
  addEnv(c, "PRTE_MCA_plm_ssh_args", rsh_args, a);
  // Keep the hostfile's names as written: the short name alone does not resolve in a pod.
  addEnv(c, "OMPI_MCA_orte_keep_fqdn_hostnames", "true", a);
  addEnv(c, "PRTE_MCA_prte_keep_fqdn_hostnames", "true", a);
  addEnv(c, "MUSTER_HOSTFILE", hostfile, a);
  addEnv(c, "MUSTER_NUM_PODS", std::to_string(job.spec.num_pods), a);
  addEnv(c, "MUSTER_NUM_PROC_PER_POD", std::to_string(job.spec.num_proc_per_pod), a);
  addEnv(c, "MUSTER_POD_INDEX", std::to_string(index), a);
  if (accelerators) {
    addEnv(c, "RDMA_NCCL_CONF", kNcclConfPath, a);
    addEnv(c, "RDMA_UCX_CONF", kUcxConfPath, a);
  }
}

Value command(std::initializer_list<std::string_view> argv, Alloc& a) {
  Value v(rapidjson::kArrayType);
  for (auto arg : argv) v.PushBack(str(arg, a), a);
  return v;
}

// The first init container of a pod asking for GPUs or RDMA: `muster-topology rdma-conf` from
// Muster's own image writes the NCCL/UCX files for the devices the pod got (setup.sh, later, keeps
// a non-empty file). argv only, no shell: nothing the user wrote reaches a command line.
//
// It asks for main's nvidia.com/gpu and preferred.jp/rdma (limits, and requests where main has
// them), as given: the kubelet's device manager lets app containers reuse the devices allocated to
// init containers, so rdma-conf sees the very GPUs and NICs main gets. main's cpu and memory are
// copied too, because an init container without cpu and memory limits would make a Guaranteed pod
// Burstable (the kubelet's CPU and memory managers reuse an init container's allocation as well).
// The pod's effective request does not change: it is the larger of the largest init container's
// and the sum of the app containers', and this one asks for no more than main alone. Being first,
// no sidecar (restartable init container) runs beside it to add to that.
Value rdmaConfContainer(const Value& main, std::string_view image, Alloc& a) {
  Value c(rapidjson::kObjectType);
  c.AddMember("name", kRdmaConfContainer, a);
  c.AddMember("image", str(image, a), a);
  c.AddMember("imagePullPolicy", "IfNotPresent", a);
  c.AddMember("command", command({"muster-topology", "rdma-conf", "--nccl-out", kNcclConfPath,
                                  "--ucx-out", kUcxConfPath}, a), a);
  addMount(c, kRunVolume, kRunMountPath, false, a);
  addEnv(c, "RDMA_NCCL_CONF", kNcclConfPath, a);
  addEnv(c, "RDMA_UCX_CONF", kUcxConfPath, a);
  // The user's choice of NICs, when main's env makes one (an entry copied as written).
  if (auto env = main.FindMember("env"); env != main.MemberEnd() && env->value.IsArray()) {
    for (const auto& e : env->value.GetArray()) {
      if (!e.IsObject() || stringOf(e, "name") != "MUSTER_RDMA_DEVICES") continue;
      member(c, "env", rapidjson::kArrayType, a).PushBack(Value(e, a), a);
      break;
    }
  }
  Value resources(rapidjson::kObjectType);
  if (auto res = main.FindMember("resources");
      res != main.MemberEnd() && res->value.IsObject()) {
    for (const char* kind : {"limits", "requests"}) {
      auto from = res->value.FindMember(kind);
      if (from == res->value.MemberEnd() || !from->value.IsObject()) continue;
      Value to(rapidjson::kObjectType);
      for (std::string_view name : kDeviceResources)
        if (auto q = findMember(from->value, name); q != from->value.MemberEnd())
          to.AddMember(str(name, a), Value(q->value, a), a);
      for (const char* name : {"cpu", "memory"})
        if (auto q = from->value.FindMember(name); q != from->value.MemberEnd())
          to.AddMember(str(name, a), Value(q->value, a), a);
      if (!to.ObjectEmpty()) resources.AddMember(str(kind, a), to, a);
    }
  }
  if (!resources.ObjectEmpty()) c.AddMember("resources", resources, a);
  Value security(rapidjson::kObjectType);
  security.AddMember("allowPrivilegeEscalation", false, a);
  Value drop(rapidjson::kArrayType);
  drop.PushBack("ALL", a);
  Value capabilities(rapidjson::kObjectType);
  capabilities.AddMember("drop", drop, a);
  security.AddMember("capabilities", capabilities, a);
  security.AddMember("readOnlyRootFilesystem", true, a);
  c.AddMember("securityContext", security, a);
  return c;
}

// The worker's `main`: sshd in the launcher's image, with its resources, env and security context.
Value generatedWorkerMain(const Value& launcher_main, bool keep_mounts, Alloc& a) {
  Value c(rapidjson::kObjectType);
  c.AddMember("name", "main", a);
  for (const char* field : {"image", "imagePullPolicy", "env", "envFrom", "resources",
                            "securityContext", "workingDir"}) {
    if (isSet(launcher_main, field))
      c.AddMember(str(field, a), Value(launcher_main[field], a), a);
  }
  if (keep_mounts && isSet(launcher_main, "volumeMounts"))
    c.AddMember("volumeMounts", Value(launcher_main["volumeMounts"], a), a);
  c.AddMember("command", command({"/bin/sh", "/etc/muster/mpi/sshd.sh"}, a), a);
  Value port(rapidjson::kObjectType);
  port.AddMember("name", "ssh", a);
  port.AddMember("containerPort", kSshPort, a);
  port.AddMember("protocol", "TCP", a);
  Value ports(rapidjson::kArrayType);
  ports.PushBack(port, a);
  c.AddMember("ports", ports, a);
  Value probe(rapidjson::kObjectType);
  Value tcp(rapidjson::kObjectType);
  tcp.AddMember("port", kSshPort, a);
  probe.AddMember("tcpSocket", tcp, a);
  probe.AddMember("periodSeconds", 2, a);
  c.AddMember("readinessProbe", probe, a);
  return c;
}

absl::StatusOr<rapidjson::Document> parseTemplate(std::string_view json, std::string_view what) {
  auto doc = proto::parseJson(json);
  if (!doc.ok()) return absl::InvalidArgumentError(std::string(what) + ": " +
                                                   std::string(doc.status().message()));
  if (!doc->IsObject()) return absl::InvalidArgumentError(std::string(what) + " is not an object");
  auto spec = doc->FindMember("spec");
  if (spec == doc->MemberEnd() || !spec->value.IsObject())
    return absl::InvalidArgumentError(std::string(what) + ".spec is missing");
  auto containers = spec->value.FindMember("containers");
  if (containers != spec->value.MemberEnd() && !containers->value.IsArray())
    return absl::InvalidArgumentError(std::string(what) + ".spec.containers is not a list");
  return std::move(*doc);
}

std::string ownerReferences(const proto::ParallelJob& job) {
  proto::JsonWriter w;
  w.beginArray().beginObject();
  w.stringField("apiVersion", "preferred.jp/v1alpha1");
  w.stringField("kind", "ParallelJob");
  w.stringField("name", job.meta.name);
  w.stringField("uid", job.meta.uid);
  w.booleanField("controller", true);
  w.booleanField("blockOwnerDeletion", true);
  w.endObject().endArray();
  return w.str();
}

void writeMeta(proto::JsonWriter& w, const proto::ParallelJob& job, const AttemptInfo& attempt,
               std::string_view name) {
  w.key("metadata").beginObject();
  w.stringField("name", name);
  w.stringField("namespace", job.meta.namespace_);
  w.stringMapField("labels", attemptLabels(job, attempt));
  w.key("ownerReferences").raw(ownerReferences(job));
  w.endObject();
}

absl::Status checkSpec(const proto::ParallelJob& job) {
  if (job.spec.num_pods < 1)
    return absl::InvalidArgumentError("spec.numPods must be at least 1");
  if (job.spec.num_proc_per_pod < 1)
    return absl::InvalidArgumentError("spec.numProcPerPod must be at least 1");
  if (job.spec.launcher.empty())
    return absl::InvalidArgumentError("spec.launcher is missing");
  if (std::find(job.spec.launcher_container_names.begin(),
                job.spec.launcher_container_names.end(),
                "main") == job.spec.launcher_container_names.end())
    return absl::InvalidArgumentError(
        "spec.launcher.spec.containers must contain a container named \"main\"");
  return absl::OkStatus();
}

}  // namespace

std::string OpenMpiRuntime::hostfile(const proto::ParallelJob& job,
                                     const AttemptInfo& attempt) const {
  std::string out;
  for (int32_t i = 0; i < job.spec.num_pods; ++i) {
    out += podFqdn(podName(attempt.group, i), attempt.group, job.meta.namespace_,
                   options_.cluster_domain);
    out += " slots=" + std::to_string(job.spec.num_proc_per_pod) + "\n";
  }
  return out;
}

std::map<std::string, std::string> OpenMpiRuntime::configFiles(const proto::ParallelJob& job,
                                                               const AttemptInfo& attempt) const {
  return {{"hostfile", hostfile(job, attempt)},  {"ssh_config", scripts::kSshConfig},
          {"sshd_config", scripts::kSshdConfig}, {"setup.sh", scripts::kSetup},
          {"wait-workers.sh", scripts::kWaitWorkers}, {"sshd.sh", scripts::kSshd}};
}

absl::StatusOr<std::map<std::string, std::string>> OpenMpiRuntime::secretFiles(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
  const std::string comment = "muster-" + attempt.group + "@" + job.meta.namespace_;
  auto client = generateEd25519Key(comment);
  if (!client.ok()) return client.status();
  auto host = generateEd25519Key(comment + "-host");
  if (!host.ok()) return host.status();
  return std::map<std::string, std::string>{
      {"id_ed25519", client->private_key},
      {"id_ed25519.pub", client->public_key + "\n"},
      {"authorized_keys", client->public_key + "\n"},
      {"ssh_host_ed25519_key", host->private_key},
      {"ssh_host_ed25519_key.pub", host->public_key + "\n"},
      // Every host of the attempt presents this key, whatever name or port it is reached by.
      {"known_hosts", "* " + host->public_key + "\n"},
  };
}

absl::StatusOr<std::vector<ApiObject>> OpenMpiRuntime::buildSupport(
    const proto::ParallelJob& job, const AttemptInfo& attempt) const {
  if (absl::Status s = checkSpec(job); !s.ok()) return s;
  std::vector<ApiObject> out;

  {  // Headless Service: stable names for every pod, published before the pods are Ready.
    proto::JsonWriter w;
    w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Service");
    writeMeta(w, job, attempt, attempt.group);
    w.key("spec").beginObject();
    w.stringField("clusterIP", "None");
    w.booleanField("publishNotReadyAddresses", true);
    w.stringMapField("selector", {{kJobUidLabel, job.meta.uid}, {kJobSetNameLabel, attempt.group}});
    w.key("ports").beginArray().beginObject();
    w.stringField("name", "ssh").integerField("port", kSshPort).integerField("targetPort", kSshPort);
    w.stringField("protocol", "TCP");
    w.endObject().endArray();
    w.endObject().endObject();
    out.push_back({&resources::kServices, attempt.group, w.str()});
  }
  {
    auto files = secretFiles(job, attempt);
    if (!files.ok()) return files.status();
    proto::JsonWriter w;
    w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Secret");
    writeMeta(w, job, attempt, secretName(attempt.group, job.meta.uid));
    w.stringField("type", "Opaque");
    w.stringMapField("stringData", *files);
    w.endObject();
    out.push_back({&resources::kSecrets, secretName(attempt.group, job.meta.uid), w.str()});
  }
  {
    proto::JsonWriter w;
    w.beginObject().stringField("apiVersion", "v1").stringField("kind", "ConfigMap");
    writeMeta(w, job, attempt, configMapName(attempt.group));
    w.stringMapField("data", configFiles(job, attempt));
    w.endObject();
    out.push_back({&resources::kConfigMaps, configMapName(attempt.group), w.str()});
  }
  return out;
}

absl::StatusOr<std::string> OpenMpiRuntime::buildPod(const proto::ParallelJob& job,
                                                     const AttemptInfo& attempt,
                                                     int32_t index) const {
  if (absl::Status s = checkSpec(job); !s.ok()) return s;
  if (index < 0 || index >= job.spec.num_pods)
    return absl::InvalidArgumentError("pod index out of range");
  const bool launcher = index == 0;
  auto launcher_tmpl = parseTemplate(job.spec.launcher, "spec.launcher");
  if (!launcher_tmpl.ok()) return launcher_tmpl.status();
  const bool from_worker_tmpl = !launcher && job.spec.worker.has_value();
  rapidjson::Document worker_tmpl;
  if (from_worker_tmpl) {
    auto parsed = parseTemplate(*job.spec.worker, "spec.worker");
    if (!parsed.ok()) return parsed.status();
    worker_tmpl = std::move(*parsed);
  }
  const Value& tmpl = from_worker_tmpl ? worker_tmpl : *launcher_tmpl;
  Value* launcher_main = findByName((*launcher_tmpl)["spec"]["containers"], "main");
  if (launcher_main == nullptr)
    return absl::InvalidArgumentError(
        "spec.launcher.spec.containers must contain a container named \"main\"");

  rapidjson::Document pod(rapidjson::kObjectType);
  Alloc& a = pod.GetAllocator();
  const std::string name = podName(attempt.group, index);
  pod.AddMember("apiVersion", "v1", a);
  pod.AddMember("kind", "Pod", a);

  // metadata: the template's labels and annotations, then the engine's.
  std::map<std::string, std::string> labels, annotations;
  if (auto meta = tmpl.FindMember("metadata"); meta != tmpl.MemberEnd() && meta->value.IsObject()) {
    for (const char* field : {"labels", "annotations"}) {
      auto m = meta->value.FindMember(field);
      if (m == meta->value.MemberEnd() || !m->value.IsObject()) continue;
      auto& into = field[0] == 'l' ? labels : annotations;
      for (const auto& kv : m->value.GetObject())
        if (kv.value.IsString()) into[kv.name.GetString()] = kv.value.GetString();
    }
  }
  for (auto& [k, v] : attemptLabels(job, attempt)) labels[k] = v;
  labels[kRoleLabel] = launcher ? "launcher" : "worker";
  labels[kIndexLabel] = std::to_string(index);
  labels[kJobGlobalIndexLabel] = std::to_string(index);
  for (const char* key : {kTopologyRequiredAnnotation, kTopologyPreferredAnnotation,
                          kGpuNicAffinityAnnotation,
                          kGangTimeoutAnnotation}) {
    if (auto it = job.meta.annotations.find(key); it != job.meta.annotations.end())
      annotations[key] = it->second;
  }
  annotations[kGangNameAnnotation] = attempt.group;
  annotations[kGangSizeAnnotation] = std::to_string(job.spec.num_pods);
  {
    proto::JsonWriter w;
    w.beginObject();
    w.stringField("name", name);
    w.stringField("namespace", job.meta.namespace_);
    w.stringMapField("labels", labels);
    w.stringMapField("annotations", annotations);
    w.key("ownerReferences").raw(ownerReferences(job));
    w.endObject();
    rapidjson::Document meta;
    meta.Parse(w.str().c_str());
    pod.AddMember("metadata", Value(meta, a), a);
  }

  Value spec(tmpl["spec"], a);
  set(spec, "hostname", str(name, a), a);
  set(spec, "subdomain", str(attempt.group, a), a);
  if (stringOf(spec, "schedulerName").empty())
    set(spec, "schedulerName", str(options_.scheduler_name, a), a);
  if (stringOf(spec, "restartPolicy").empty()) set(spec, "restartPolicy", str("Never", a), a);

  Value& volumes = member(spec, "volumes", rapidjson::kArrayType, a);
  if (findByName(volumes, kSshVolume) == nullptr) {
    Value v(rapidjson::kObjectType);
    v.AddMember("name", kSshVolume, a);
    Value secret(rapidjson::kObjectType);
    secret.AddMember("secretName", str(secretName(attempt.group, job.meta.uid), a), a);
    secret.AddMember("defaultMode", 0444, a);  // copied to 0600 files by setup.sh
    v.AddMember("secret", secret, a);
    volumes.PushBack(v, a);
  }
  if (findByName(volumes, kConfigVolume) == nullptr) {
    Value v(rapidjson::kObjectType);
    v.AddMember("name", kConfigVolume, a);
    Value cm(rapidjson::kObjectType);
    cm.AddMember("name", str(configMapName(attempt.group), a), a);
    cm.AddMember("defaultMode", 0555, a);
    v.AddMember("configMap", cm, a);
    volumes.PushBack(v, a);
  }
  if (findByName(volumes, kRunVolume) == nullptr) {
    Value v(rapidjson::kObjectType);
    v.AddMember("name", kRunVolume, a);
    v.AddMember("emptyDir", Value(rapidjson::kObjectType), a);
    volumes.PushBack(v, a);
  }

  Value& containers = member(spec, "containers", rapidjson::kArrayType, a);
  Value* main = findByName(containers, "main");
  if (!launcher) {
    if (!from_worker_tmpl) {
      // Inherited from the launcher: its main becomes the generated sshd main.
      *main = generatedWorkerMain(*launcher_main, /*keep_mounts=*/true, a);
    } else if (main == nullptr) {
      containers.PushBack(generatedWorkerMain(*launcher_main, /*keep_mounts=*/false, a), a);
      main = &containers[containers.Size() - 1];
    }
  }
  const bool accelerators = requestsAccelerators(spec);
  wireContainer(*main, job, index, accelerators, a);

  if (launcher) {
    // Last init container: wait for every worker's sshd (and write the NCCL/UCX files).
    Value wait(rapidjson::kObjectType);
    wait.AddMember("name", kWaitContainer, a);
    for (const char* field : {"image", "imagePullPolicy", "securityContext"})
      if (isSet(*main, field)) wait.AddMember(str(field, a), Value((*main)[field], a), a);
    wait.AddMember("command", command({"/bin/sh", "/etc/muster/mpi/wait-workers.sh"}, a), a);
    wireContainer(wait, job, index, accelerators, a);
    Value& inits = member(spec, "initContainers", rapidjson::kArrayType, a);
    if (findByName(inits, kWaitContainer) == nullptr) inits.PushBack(wait, a);
  }
  if (accelerators && !options_.rdma_conf_image.empty()) {
    // First of all init containers, so setup.sh (in the wait container or main) finds its files.
    Value rdma_conf = rdmaConfContainer(*main, options_.rdma_conf_image, a);
    Value& inits = member(spec, "initContainers", rapidjson::kArrayType, a);
    if (findByName(inits, kRdmaConfContainer) == nullptr) {  // the user's own one wins
      Value reordered(rapidjson::kArrayType);
      reordered.PushBack(rdma_conf, a);
      for (auto& c : inits.GetArray()) reordered.PushBack(c, a);  // moves
      inits = reordered;
    }
  }
  pod.AddMember("spec", spec, a);
  return proto::toJson(pod);
}

}  // namespace muster::jobengine
