#include "proto/pod_template.h"

#include "proto/codec.h"
#include "proto/json.h"
#include "proto/quantity.h"
#include "proto/strings.h"

namespace muster::proto {

namespace {

using rapidjson::Value;
using Alloc = rapidjson::Document::AllocatorType;

Value str(std::string_view s, Alloc& a) {
  return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

Value::ConstMemberIterator findMember(const Value& v, std::string_view name) {
  Value key(rapidjson::StringRef(name.data(), static_cast<rapidjson::SizeType>(name.size())));
  return v.FindMember(key);
}
Value::MemberIterator findMember(Value& v, std::string_view name) {
  Value key(rapidjson::StringRef(name.data(), static_cast<rapidjson::SizeType>(name.size())));
  return v.FindMember(key);
}

// The member `name` of `obj`, made `type` when absent, null or of another type.
Value& member(Value& obj, std::string_view name, rapidjson::Type type, Alloc& a) {
  auto it = findMember(obj, name);
  if (it == obj.MemberEnd()) {
    obj.AddMember(str(name, a), Value(type), a);
    return findMember(obj, name)->value;
  }
  if (it->value.GetType() != type) it->value = Value(type);
  return it->value;
}

void set(Value& obj, std::string_view name, Value v, Alloc& a) {
  auto it = findMember(obj, name);
  if (it == obj.MemberEnd()) obj.AddMember(str(name, a), v, a);
  else it->value = v;
}

bool isSet(const Value& obj, std::string_view name) {
  auto it = findMember(obj, name);
  return it != obj.MemberEnd() && !it->value.IsNull();
}

std::string_view stringOf(const Value& obj, std::string_view name) {
  if (!obj.IsObject()) return {};
  auto it = findMember(obj, name);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return std::string_view(it->value.GetString(), it->value.GetStringLength());
}

Value* findByName(Value& array, std::string_view name) {
  if (!array.IsArray()) return nullptr;
  for (auto& item : array.GetArray())
    if (item.IsObject() && stringOf(item, "name") == name) return &item;
  return nullptr;
}
const Value* findByName(const Value& array, std::string_view name) {
  return findByName(const_cast<Value&>(array), name);
}

bool containerRequestsAny(const Value& c, const std::vector<std::string_view>& resources) {
  if (!c.IsObject()) return false;
  auto res = c.FindMember("resources");
  if (res == c.MemberEnd() || !res->value.IsObject()) return false;
  for (const char* kind : {"limits", "requests"}) {
    auto m = res->value.FindMember(kind);
    if (m == res->value.MemberEnd() || !m->value.IsObject()) continue;
    for (std::string_view name : resources)
      if (findMember(m->value, name) != m->value.MemberEnd()) return true;
  }
  return false;
}

std::map<std::string, std::string> stringMap(const Value& doc, const char* field) {
  std::map<std::string, std::string> out;
  auto meta = doc.FindMember("metadata");
  if (meta == doc.MemberEnd() || !meta->value.IsObject()) return out;
  auto m = meta->value.FindMember(field);
  if (m == meta->value.MemberEnd() || !m->value.IsObject()) return out;
  for (const auto& kv : m->value.GetObject())
    if (kv.value.IsString()) out[kv.name.GetString()] = kv.value.GetString();
  return out;
}


// What a JSON value is, as a message says it.
std::string_view kindOf(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "a boolean";
    case rapidjson::kObjectType: return "an object";
    case rapidjson::kArrayType: return "a list";
    case rapidjson::kStringType: return "a string";
    case rapidjson::kNumberType: return "a number";
  }
  return "a value";
}

absl::Status wrongType(const std::string& path, std::string_view expected, const Value& v) {
  return absl::InvalidArgumentError(strCat(path, ": expected ", expected, ", got ", kindOf(v)));
}

// The member `name` of `obj` when present and not null.
const Value* present(const Value& obj, std::string_view name) {
  auto it = findMember(obj, name);
  return it == obj.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

absl::Status checkStringList(const Value& obj, std::string_view name, const std::string& path) {
  const Value* v = present(obj, name);
  if (v == nullptr) return absl::OkStatus();
  const std::string at = strCat(path, ".", name);
  if (!v->IsArray()) return wrongType(at, "a list of strings", *v);
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i)
    if (!(*v)[i].IsString()) return wrongType(strCat(at, "[", i, "]"), "a string", (*v)[i]);
  return absl::OkStatus();
}

absl::Status checkList(const Value& obj, std::string_view name, const std::string& path,
                       std::string_view of = "objects") {
  const Value* v = present(obj, name);
  if (v == nullptr) return absl::OkStatus();
  const std::string at = strCat(path, ".", name);
  if (!v->IsArray()) return wrongType(at, strCat("a list of ", of), *v);
  if (of == "objects") {
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i)
      if (!(*v)[i].IsObject()) return wrongType(strCat(at, "[", i, "]"), "an object", (*v)[i]);
  }
  return absl::OkStatus();
}

absl::Status checkStringMap(const Value& obj, std::string_view name, const std::string& path) {
  const Value* v = present(obj, name);
  if (v == nullptr) return absl::OkStatus();
  const std::string at = strCat(path, ".", name);
  if (!v->IsObject()) return wrongType(at, "a map of strings", *v);
  for (const auto& m : v->GetObject())
    if (!m.value.IsString()) return wrongType(strCat(at, ".", m.name.GetString()), "a string", m.value);
  return absl::OkStatus();
}

// The fields of a container Muster edits or the scheduler reads, in the types the API server
// requires: the CRD keeps the template schemaless, so a wrong type reaches Muster, and editing it
// would silently replace the user's value (an `env` object became an empty list).
absl::Status checkContainer(const Value& c, const std::string& path) {
  if (!c.IsObject()) return wrongType(path, "an object", c);
  for (const char* field : {"name", "image", "workingDir", "imagePullPolicy"}) {
    if (const Value* v = present(c, field); v && !v->IsString())
      return wrongType(strCat(path, ".", field), "a string", *v);
  }
  for (const char* field : {"command", "args"})
    if (absl::Status s = checkStringList(c, field, path); !s.ok()) return s;
  for (const char* field : {"env", "envFrom", "ports", "volumeMounts", "volumeDevices"})
    if (absl::Status s = checkList(c, field, path); !s.ok()) return s;
  if (const Value* env = present(c, "env")) {
    for (rapidjson::SizeType i = 0; i < env->Size(); ++i) {
      const std::string at = strCat(path, ".env[", i, "]");
      const Value* name = present((*env)[i], "name");
      if (name == nullptr || !name->IsString()) return absl::InvalidArgumentError(strCat(at, ".name: expected a string"));
      if (const Value* v = present((*env)[i], "value"); v && !v->IsString())
        return wrongType(strCat(at, ".value"), "a string", *v);
    }
  }
  if (const Value* res = present(c, "resources")) {
    const std::string at = strCat(path, ".resources");
    if (!res->IsObject()) return wrongType(at, "an object", *res);
    for (const char* kind : {"limits", "requests"}) {
      const Value* list = present(*res, kind);
      if (list == nullptr) continue;
      const std::string lat = strCat(at, ".", kind);
      if (!list->IsObject()) return wrongType(lat, "a map of quantities", *list);
      for (const auto& m : list->GetObject()) {
        const std::string qat = strCat(lat, ".", m.name.GetString());
        std::string text;
        if (m.value.IsString()) text = m.value.GetString();
        else if (m.value.IsInt64()) text = strCat(m.value.GetInt64());
        else if (m.value.IsNumber()) text = strCat(m.value.GetDouble());
        else return wrongType(qat, "a quantity", m.value);
        if (auto q = Quantity::parse(text); !q.ok())
          return absl::InvalidArgumentError(strCat(qat, ": ", q.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

// The API server's limit on all annotations of an object together (256 KiB), less room for the
// annotations Muster adds to each pod.
constexpr size_t kMaxTemplateAnnotationBytes = 256 * 1024 - 4 * 1024;

absl::Status checkTemplate(const Value& doc, std::string_view what) {
  if (const Value* meta = present(doc, "metadata")) {
    const std::string at = strCat(what, ".metadata");
    if (!meta->IsObject()) return wrongType(at, "an object", *meta);
    for (const char* field : {"labels", "annotations"})
      if (absl::Status s = checkStringMap(*meta, field, at); !s.ok()) return s;
    if (const Value* ann = present(*meta, "annotations")) {
      size_t bytes = 0;
      for (const auto& m : ann->GetObject()) bytes += m.name.GetStringLength() + m.value.GetStringLength();
      if (bytes > kMaxTemplateAnnotationBytes) {
        return absl::InvalidArgumentError(strCat(
            at, ".annotations: ", bytes, " bytes in all, more than the ", kMaxTemplateAnnotationBytes,
            " a pod can carry (the API server's limit is 262144 bytes; Muster adds its own)"));
      }
    }
  }
  const Value& spec = doc["spec"];
  const std::string at = strCat(what, ".spec");
  for (const char* field : {"volumes", "tolerations", "imagePullSecrets"})
    if (absl::Status s = checkList(spec, field, at); !s.ok()) return s;
  if (absl::Status s = checkStringMap(spec, "nodeSelector", at); !s.ok()) return s;
  for (const char* list : {"initContainers", "containers"}) {
    const Value* v = present(spec, list);
    if (v == nullptr) continue;
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
      if (absl::Status s = checkContainer((*v)[i], strCat(at, ".", list, "[", i, "]")); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

// --- PodTemplate -------------------------------------------------------------------------------

absl::StatusOr<PodTemplate> PodTemplate::parse(std::string_view json, std::string_view what) {
  auto doc = parseJson(json);
  if (!doc.ok()) return absl::InvalidArgumentError(strCat(what, ": ", doc.status().message()));
  if (!doc->IsObject()) return absl::InvalidArgumentError(strCat(what, " is not an object"));
  auto spec = doc->FindMember("spec");
  if (spec == doc->MemberEnd() || !spec->value.IsObject())
    return absl::InvalidArgumentError(strCat(what, ".spec is missing"));
  auto containers = spec->value.FindMember("containers");
  if (containers != spec->value.MemberEnd() && !containers->value.IsArray())
    return absl::InvalidArgumentError(strCat(what, ".spec.containers is not a list"));
  auto inits = spec->value.FindMember("initContainers");
  if (inits != spec->value.MemberEnd() && !inits->value.IsArray() && !inits->value.IsNull())
    return absl::InvalidArgumentError(strCat(what, ".spec.initContainers is not a list"));
  if (absl::Status s = checkTemplate(*doc, what); !s.ok()) return s;
  return PodTemplate(std::make_unique<rapidjson::Document>(std::move(*doc)));
}

PodTemplate::PodTemplate(std::unique_ptr<rapidjson::Document> doc) : doc_(std::move(doc)) {}
PodTemplate::~PodTemplate() = default;

PodTemplate::PodTemplate(const PodTemplate& other)
    : doc_(std::make_unique<rapidjson::Document>()) {
  doc_->CopyFrom(*other.doc_, doc_->GetAllocator());
}

PodTemplate& PodTemplate::operator=(const PodTemplate& other) {
  if (this != &other) {
    doc_ = std::make_unique<rapidjson::Document>();
    doc_->CopyFrom(*other.doc_, doc_->GetAllocator());
  }
  return *this;
}

Value& PodTemplate::spec() { return (*doc_)["spec"]; }
const Value& PodTemplate::spec() const { return (*doc_)["spec"]; }

Value& PodTemplate::list(bool init) {
  return member(spec(), init ? "initContainers" : "containers", rapidjson::kArrayType,
                doc_->GetAllocator());
}

std::map<std::string, std::string> PodTemplate::labels() const { return stringMap(*doc_, "labels"); }
std::map<std::string, std::string> PodTemplate::annotations() const {
  return stringMap(*doc_, "annotations");
}

void PodTemplate::setHostname(std::string_view hostname) {
  set(spec(), "hostname", str(hostname, doc_->GetAllocator()), doc_->GetAllocator());
}
void PodTemplate::setSubdomain(std::string_view subdomain) {
  set(spec(), "subdomain", str(subdomain, doc_->GetAllocator()), doc_->GetAllocator());
}
void PodTemplate::setSchedulerNameIfUnset(std::string_view name) {
  if (stringOf(spec(), "schedulerName").empty())
    set(spec(), "schedulerName", str(name, doc_->GetAllocator()), doc_->GetAllocator());
}
void PodTemplate::setRestartPolicyIfUnset(std::string_view policy) {
  if (stringOf(spec(), "restartPolicy").empty())
    set(spec(), "restartPolicy", str(policy, doc_->GetAllocator()), doc_->GetAllocator());
}

void PodTemplate::setAutomountServiceAccountToken(bool value, bool only_if_unset) {
  if (only_if_unset && isSet(spec(), "automountServiceAccountToken")) return;
  set(spec(), "automountServiceAccountToken", Value(value), doc_->GetAllocator());
}

std::map<std::string, std::string> PodTemplate::nodeSelector() const {
  std::map<std::string, std::string> out;
  auto it = spec().FindMember("nodeSelector");
  if (it == spec().MemberEnd() || !it->value.IsObject()) return out;
  for (const auto& kv : it->value.GetObject())
    if (kv.value.IsString()) out[kv.name.GetString()] = kv.value.GetString();
  return out;
}

void PodTemplate::setPriorityClassName(std::string_view name) {
  set(spec(), "priorityClassName", str(name, doc_->GetAllocator()), doc_->GetAllocator());
}

void PodTemplate::setActiveDeadlineSeconds(int64_t seconds) {
  set(spec(), "activeDeadlineSeconds", Value(static_cast<int64_t>(seconds)), doc_->GetAllocator());
}

void PodTemplate::addNodeSelector(const std::map<std::string, std::string>& selector) {
  Alloc& a = doc_->GetAllocator();
  Value& sel = member(spec(), "nodeSelector", rapidjson::kObjectType, a);
  for (const auto& [k, v] : selector)
    if (findMember(sel, k) == sel.MemberEnd()) sel.AddMember(str(k, a), str(v, a), a);
}

void PodTemplate::addDnsSearches(const std::vector<std::string>& domains) {
  Alloc& a = doc_->GetAllocator();
  Value& dns = member(spec(), "dnsConfig", rapidjson::kObjectType, a);
  Value& searches = member(dns, "searches", rapidjson::kArrayType, a);
  for (const std::string& d : domains) {
    bool present = false;
    for (const auto& e : searches.GetArray()) present = present || (e.IsString() && e.GetString() == d);
    if (!present) searches.PushBack(str(d, a), a);
  }
}

void PodTemplate::copySpecFields(const PodTemplate& other,
                                 const std::vector<std::string_view>& fields) {
  Alloc& a = doc_->GetAllocator();
  for (std::string_view field : fields) {
    if (!isSet(other.spec(), field)) continue;
    set(spec(), field, Value(findMember(other.spec(), field)->value, a), a);
  }
}

namespace {

// Appends the items of list `name` of `from` (when it is a list) to that list of `to`.
void appendList(Value& to, const Value& from, std::string_view name, Alloc& a) {
  if (!from.IsObject()) return;
  auto src = findMember(from, name);
  if (src == from.MemberEnd() || !src->value.IsArray()) return;
  Value& dst = member(to, name, rapidjson::kArrayType, a);
  for (const auto& item : src->value.GetArray()) dst.PushBack(Value(item, a), a);
}

}  // namespace

absl::Status PodTemplate::mergeAffinity(const PodTemplate& other) {
  Alloc& a = doc_->GetAllocator();
  auto theirs = findMember(other.spec(), "affinity");
  if (theirs == other.spec().MemberEnd() || !theirs->value.IsObject()) return absl::OkStatus();
  auto ours_it = findMember(spec(), "affinity");
  if (ours_it == spec().MemberEnd() || !ours_it->value.IsObject()) {
    set(spec(), "affinity", Value(theirs->value, a), a);
    return absl::OkStatus();
  }
  // Built aside, so that a refusal leaves the template as it was.
  Value merged(ours_it->value, a);
  for (const auto& [kind, value] : theirs->value.GetObject()) {
    const std::string_view k(kind.GetString(), kind.GetStringLength());
    if (!value.IsObject()) continue;
    Value& to = member(merged, k, rapidjson::kObjectType, a);
    appendList(to, value, "preferredDuringSchedulingIgnoredDuringExecution", a);
    if (k != "nodeAffinity") {  // podAffinity, podAntiAffinity: every required term holds
      appendList(to, value, "requiredDuringSchedulingIgnoredDuringExecution", a);
      continue;
    }
    auto req = findMember(value, "requiredDuringSchedulingIgnoredDuringExecution");
    if (req == value.MemberEnd() || !req->value.IsObject()) continue;
    auto their_terms = findMember(req->value, "nodeSelectorTerms");
    if (their_terms == req->value.MemberEnd() || !their_terms->value.IsArray()) continue;
    auto our_req = findMember(to, "requiredDuringSchedulingIgnoredDuringExecution");
    const Value* our_terms = nullptr;
    if (our_req != to.MemberEnd() && our_req->value.IsObject())
      if (auto t = findMember(our_req->value, "nodeSelectorTerms");
          t != our_req->value.MemberEnd() && t->value.IsArray())
        our_terms = &t->value;
    if (our_terms == nullptr) {
      set(to, "requiredDuringSchedulingIgnoredDuringExecution", Value(req->value, a), a);
      continue;
    }
    // Terms are ORed and a term's expressions ANDed: (A1 | A2) & (B1 | B2) is A1&B1 | A1&B2 | ...
    const size_t n = size_t{our_terms->Size()} * their_terms->value.Size();
    if (n > kMaxMergedNodeSelectorTerms)
      return absl::InvalidArgumentError(strCat(
          "spec.affinity.nodeAffinity: the template's ", our_terms->Size(), " and the job's ",
          their_terms->value.Size(), " required nodeSelectorTerms would make ", n,
          " terms when both must hold, over ", kMaxMergedNodeSelectorTerms));
    Value product(rapidjson::kArrayType);
    for (const auto& x : our_terms->GetArray())
      for (const auto& y : their_terms->value.GetArray()) {
        Value term(rapidjson::kObjectType);
        for (const char* list : {"matchExpressions", "matchFields"}) {
          appendList(term, x, list, a);
          appendList(term, y, list, a);
        }
        product.PushBack(term, a);
      }
    Value& our_req_value = findMember(to, "requiredDuringSchedulingIgnoredDuringExecution")->value;
    set(our_req_value, "nodeSelectorTerms", std::move(product), a);
  }
  set(spec(), "affinity", std::move(merged), a);
  return absl::OkStatus();
}

void PodTemplate::addVolume(std::string_view name, const VolumeSource& source) {
  Alloc& a = doc_->GetAllocator();
  Value& volumes = member(spec(), "volumes", rapidjson::kArrayType, a);
  if (findByName(volumes, name) != nullptr) return;
  Value v(rapidjson::kObjectType);
  v.AddMember("name", str(name, a), a);
  Value src(rapidjson::kObjectType);
  switch (source.kind) {
    case VolumeSource::Kind::kSecret:
      src.AddMember("secretName", str(source.object, a), a);
      if (source.default_mode >= 0) src.AddMember("defaultMode", source.default_mode, a);
      v.AddMember("secret", src, a);
      break;
    case VolumeSource::Kind::kConfigMap:
      src.AddMember("name", str(source.object, a), a);
      if (source.default_mode >= 0) src.AddMember("defaultMode", source.default_mode, a);
      v.AddMember("configMap", src, a);
      break;
    case VolumeSource::Kind::kEmptyDir:
      v.AddMember("emptyDir", src, a);
      break;
  }
  volumes.PushBack(v, a);
}

void PodTemplate::addDownwardApiVolume(std::string_view name,
                                       const std::map<std::string, std::string>& fields) {
  Alloc& a = doc_->GetAllocator();
  Value& volumes = member(spec(), "volumes", rapidjson::kArrayType, a);
  if (findByName(volumes, name) != nullptr) return;
  Value items(rapidjson::kArrayType);
  for (const auto& [path, field] : fields) {
    Value ref(rapidjson::kObjectType);
    ref.AddMember("fieldPath", str(field, a), a);
    Value item(rapidjson::kObjectType);
    item.AddMember("path", str(path, a), a);
    item.AddMember("fieldRef", ref, a);
    items.PushBack(item, a);
  }
  Value src(rapidjson::kObjectType);
  src.AddMember("items", items, a);
  Value v(rapidjson::kObjectType);
  v.AddMember("name", str(name, a), a);
  v.AddMember("downwardAPI", src, a);
  volumes.PushBack(v, a);
}

std::optional<PodTemplate::Container> PodTemplate::container(std::string_view name) {
  if (findByName(list(false), name) == nullptr) return std::nullopt;
  return Container(this, false, std::string(name));
}

std::optional<PodTemplate::Container> PodTemplate::initContainer(std::string_view name) {
  auto it = spec().FindMember("initContainers");
  if (it == spec().MemberEnd() || findByName(it->value, name) == nullptr) return std::nullopt;
  return Container(this, true, std::string(name));
}

PodTemplate::Container PodTemplate::insertContainer(std::string_view name, bool init, bool front) {
  Alloc& a = doc_->GetAllocator();
  Value& l = list(init);
  Value c(rapidjson::kObjectType);
  c.AddMember("name", str(name, a), a);
  if (front) {
    Value reordered(rapidjson::kArrayType);
    reordered.PushBack(c, a);
    for (auto& existing : l.GetArray()) reordered.PushBack(existing, a);  // moves
    l = reordered;
  } else {
    l.PushBack(c, a);
  }
  return Container(this, init, std::string(name));
}

PodTemplate::Container PodTemplate::setContainer(std::string_view name) {
  Value& l = list(false);
  for (auto it = l.Begin(); it != l.End(); ++it) {
    if (it->IsObject() && stringOf(*it, "name") == name) {
      *it = Value(rapidjson::kObjectType);
      it->AddMember("name", str(name, doc_->GetAllocator()), doc_->GetAllocator());
      return Container(this, false, std::string(name));
    }
  }
  return insertContainer(name, false, false);
}

PodTemplate::Container PodTemplate::appendInitContainer(std::string_view name) {
  if (auto c = initContainer(name)) return *c;
  return insertContainer(name, true, false);
}

PodTemplate::Container PodTemplate::prependInitContainer(std::string_view name) {
  if (auto c = initContainer(name)) return *c;
  return insertContainer(name, true, true);
}

bool PodTemplate::requestsAny(const std::vector<std::string_view>& resources) const {
  for (const char* l : {"containers", "initContainers"}) {
    auto it = spec().FindMember(l);
    if (it == spec().MemberEnd() || !it->value.IsArray()) continue;
    for (const auto& c : it->value.GetArray())
      if (containerRequestsAny(c, resources)) return true;
  }
  return false;
}

std::string PodTemplate::toPod(const ObjectMeta& meta) const {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Pod");
  writeObjectMeta(w, meta);
  w.key("spec").raw(toJson(spec()));
  w.endObject();
  return w.str();
}

// --- Container ---------------------------------------------------------------------------------

Value& PodTemplate::Container::value() const {
  Value* v = findByName(t_->list(init_), name_);
  return *v;  // a Container handle exists only for a container of that name
}

std::string PodTemplate::Container::name() const { return name_; }
std::string PodTemplate::Container::image() const { return std::string(stringOf(value(), "image")); }

void PodTemplate::Container::addEnv(std::string_view name, std::string_view v) {
  Alloc& a = t_->doc_->GetAllocator();
  Value& env = member(value(), "env", rapidjson::kArrayType, a);
  if (findByName(env, name) != nullptr) return;  // the user's own value wins
  Value e(rapidjson::kObjectType);
  e.AddMember("name", str(name, a), a);
  e.AddMember("value", str(v, a), a);
  env.PushBack(e, a);
}

void PodTemplate::Container::copyEnv(const Container& other, std::string_view name) {
  const Value& from = other.value();
  auto env = from.FindMember("env");
  if (env == from.MemberEnd() || !env->value.IsArray()) return;
  const Value* e = findByName(env->value, name);
  if (e == nullptr) return;
  Alloc& a = t_->doc_->GetAllocator();
  Value& mine = member(value(), "env", rapidjson::kArrayType, a);
  if (findByName(mine, name) != nullptr) return;
  mine.PushBack(Value(*e, a), a);
}

void PodTemplate::Container::addMount(std::string_view volume, std::string_view path,
                                      bool read_only) {
  Alloc& a = t_->doc_->GetAllocator();
  Value& mounts = member(value(), "volumeMounts", rapidjson::kArrayType, a);
  for (auto& m : mounts.GetArray())
    if (m.IsObject() && (stringOf(m, "name") == volume || stringOf(m, "mountPath") == path)) return;
  Value m(rapidjson::kObjectType);
  m.AddMember("name", str(volume, a), a);
  m.AddMember("mountPath", str(path, a), a);
  if (read_only) m.AddMember("readOnly", true, a);
  mounts.PushBack(m, a);
}

void PodTemplate::Container::setCommand(const std::vector<std::string>& argv) {
  Alloc& a = t_->doc_->GetAllocator();
  Value v(rapidjson::kArrayType);
  for (const auto& arg : argv) v.PushBack(str(arg, a), a);
  set(value(), "command", std::move(v), a);
}

void PodTemplate::Container::setImage(std::string_view image) {
  set(value(), "image", str(image, t_->doc_->GetAllocator()), t_->doc_->GetAllocator());
}

void PodTemplate::Container::setImagePullPolicy(std::string_view policy) {
  set(value(), "imagePullPolicy", str(policy, t_->doc_->GetAllocator()), t_->doc_->GetAllocator());
}

void PodTemplate::Container::copyFields(const Container& other,
                                        const std::vector<std::string_view>& fields) {
  Alloc& a = t_->doc_->GetAllocator();
  const Value& from = other.value();
  Value& to = value();
  for (std::string_view field : fields) {
    if (!isSet(from, field)) continue;
    set(to, field, Value(findMember(from, field)->value, a), a);
  }
}

void PodTemplate::Container::copyResources(const Container& other,
                                           const std::vector<std::string_view>& resources) {
  Alloc& a = t_->doc_->GetAllocator();
  const Value& from = other.value();
  auto res = from.FindMember("resources");
  if (res == from.MemberEnd() || !res->value.IsObject()) return;
  Value out(rapidjson::kObjectType);
  for (const char* kind : {"limits", "requests"}) {
    auto list = res->value.FindMember(kind);
    if (list == res->value.MemberEnd() || !list->value.IsObject()) continue;
    Value to(rapidjson::kObjectType);
    for (std::string_view name : resources)
      if (auto q = findMember(list->value, name); q != list->value.MemberEnd())
        to.AddMember(str(name, a), Value(q->value, a), a);
    if (!to.ObjectEmpty()) out.AddMember(str(kind, a), to, a);
  }
  if (!out.ObjectEmpty()) set(value(), "resources", std::move(out), a);
}

absl::Status PodTemplate::Container::mergeResources(const Container& other) {
  Alloc& a = t_->doc_->GetAllocator();
  const Value& from = other.value();
  auto res = from.FindMember("resources");
  if (res == from.MemberEnd() || !res->value.IsObject()) return absl::OkStatus();
  Value merged(rapidjson::kObjectType);
  if (auto ours = value().FindMember("resources"); ours != value().MemberEnd() && ours->value.IsObject())
    merged.CopyFrom(ours->value, a);
  for (const char* kind : {"limits", "requests"}) {
    auto list = res->value.FindMember(kind);
    if (list == res->value.MemberEnd() || !list->value.IsObject()) continue;
    Value& to = member(merged, kind, rapidjson::kObjectType, a);
    for (const auto& [name, q] : list->value.GetObject())
      set(to, std::string_view(name.GetString(), name.GetStringLength()), Value(q, a), a);
  }
  // A request over the limit of its name (a job's request under a partition's limit).
  auto limits = merged.FindMember("limits");
  auto requests = merged.FindMember("requests");
  if (limits != merged.MemberEnd() && requests != merged.MemberEnd() && limits->value.IsObject() &&
      requests->value.IsObject()) {
    auto text = [](const Value& v) {
      return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : toJson(v);
    };
    for (const auto& [name, limit] : limits->value.GetObject()) {
      auto request = requests->value.FindMember(name);
      if (request == requests->value.MemberEnd()) continue;
      auto r = Quantity::parse(text(request->value));
      auto l = Quantity::parse(text(limit));
      if (r.ok() && l.ok() && r->nanoValue() > l->nanoValue())
        return absl::InvalidArgumentError(
            strCat("container ", name_, " requests ", name.GetString(), " ", text(request->value),
                   ", over its limit ", text(limit), " (the partition's or the job's)"));
    }
  }
  set(value(), "resources", std::move(merged), a);
  return absl::OkStatus();
}

void PodTemplate::Container::addPort(std::string_view name, int32_t port,
                                     std::string_view protocol) {
  Alloc& a = t_->doc_->GetAllocator();
  Value& ports = member(value(), "ports", rapidjson::kArrayType, a);
  Value p(rapidjson::kObjectType);
  p.AddMember("name", str(name, a), a);
  p.AddMember("containerPort", port, a);
  p.AddMember("protocol", str(protocol, a), a);
  ports.PushBack(p, a);
}

void PodTemplate::Container::setTcpReadinessProbe(int32_t port, int32_t period_seconds) {
  Alloc& a = t_->doc_->GetAllocator();
  Value probe(rapidjson::kObjectType);
  Value tcp(rapidjson::kObjectType);
  tcp.AddMember("port", port, a);
  probe.AddMember("tcpSocket", tcp, a);
  probe.AddMember("periodSeconds", period_seconds, a);
  set(value(), "readinessProbe", std::move(probe), a);
}

void PodTemplate::Container::setRestrictedSecurityContext() {
  Alloc& a = t_->doc_->GetAllocator();
  Value security(rapidjson::kObjectType);
  security.AddMember("allowPrivilegeEscalation", false, a);
  Value drop(rapidjson::kArrayType);
  drop.PushBack("ALL", a);
  Value capabilities(rapidjson::kObjectType);
  capabilities.AddMember("drop", drop, a);
  security.AddMember("capabilities", capabilities, a);
  security.AddMember("readOnlyRootFilesystem", true, a);
  set(value(), "securityContext", std::move(security), a);
}

bool PodTemplate::Container::requestsAny(const std::vector<std::string_view>& resources) const {
  return containerRequestsAny(value(), resources);
}

// --- Service, Secret, ConfigMap ------------------------------------------------------------------

std::string encode(const Service& service) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Service");
  writeObjectMeta(w, service.meta);
  w.key("spec").beginObject();
  if (service.headless) w.stringField("clusterIP", "None");
  if (service.publish_not_ready_addresses) w.booleanField("publishNotReadyAddresses", true);
  w.stringMapField("selector", service.selector);
  w.key("ports").beginArray();
  for (const ServicePort& p : service.ports) {
    w.beginObject().stringField("name", p.name).integerField("port", p.port);
    w.integerField("targetPort", p.target_port).stringField("protocol", p.protocol);
    w.endObject();
  }
  w.endArray();
  w.endObject().endObject();
  return w.str();
}

std::string encode(const Secret& secret) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "Secret");
  writeObjectMeta(w, secret.meta);
  w.stringField("type", secret.type);
  w.stringMapField("stringData", secret.string_data);
  if (secret.immutable) w.booleanField("immutable", true);
  w.endObject();
  return w.str();
}

std::string encode(const ConfigMap& config_map) {
  JsonWriter w;
  w.beginObject().stringField("apiVersion", "v1").stringField("kind", "ConfigMap");
  writeObjectMeta(w, config_map.meta);
  w.stringMapField("data", config_map.data);
  w.endObject();
  return w.str();
}

}  // namespace muster::proto
