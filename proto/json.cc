#include "proto/json.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "rapidjson/error/en.h"
#include "proto/strings.h"

namespace muster::proto {
namespace {

// Map keys like "cpu" read well after a dot; "nvidia.com/gpu" needs brackets to stay unambiguous.
bool isPlainIdentifier(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

rapidjson::Value::ConstMemberIterator findMember(const rapidjson::Value& object,
                                                 std::string_view name) {
  const auto length = static_cast<rapidjson::SizeType>(name.size());
  return object.FindMember(rapidjson::Value(rapidjson::StringRef(name.data(), length)));
}

}  // namespace

absl::StatusOr<rapidjson::Document> parseJson(std::string_view text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(strCat("invalid JSON at offset ",
                                           std::to_string(doc.GetErrorOffset()), ": ",
                                           rapidjson::GetParseError_En(doc.GetParseError())));
  }
  return doc;
}

void JsonPath::appendTo(std::string* out) const {
  if (parent_ == nullptr) return;
  parent_->appendTo(out);
  if (index_ != kNoIndex) {
    out->append(strCat("[", std::to_string(index_), "]"));
  } else if (!isPlainIdentifier(name_)) {
    out->append(strCat("[", name_, "]"));
  } else if (out->empty()) {
    out->append(name_);
  } else {
    out->append(strCat(".", name_));
  }
}

std::string JsonPath::toString() const {
  std::string out;
  appendTo(&out);
  return out;
}

absl::Status typeError(const JsonPath& path, std::string_view expected) {
  if (path.isRoot()) return absl::InvalidArgumentError(strCat("expected ", expected));
  return absl::InvalidArgumentError(strCat(path.toString(), ": expected ", expected));
}

absl::Status fieldError(const JsonPath& path, std::string_view message) {
  if (path.isRoot()) return absl::InvalidArgumentError(std::string(message));
  return absl::InvalidArgumentError(strCat(path.toString(), ": ", message));
}

const rapidjson::Value* findField(const rapidjson::Value& object, std::string_view name) {
  if (!object.IsObject()) return nullptr;
  auto it = findMember(object, name);
  if (it == object.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

absl::Status expectObject(const rapidjson::Value& v, const JsonPath& path) {
  return v.IsObject() ? absl::OkStatus() : typeError(path, "object");
}

absl::Status readString(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        std::string* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsString()) return typeError(path.field(name), "string");
  out->assign(v->GetString(), v->GetStringLength());
  return absl::OkStatus();
}

absl::Status readString(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        std::optional<std::string>* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsString()) return typeError(path.field(name), "string");
  out->emplace(v->GetString(), v->GetStringLength());
  return absl::OkStatus();
}

absl::Status readBool(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                      bool* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsBool()) return typeError(path.field(name), "boolean");
  *out = v->GetBool();
  return absl::OkStatus();
}

absl::Status readInt32(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       int32_t* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsInt()) return typeError(path.field(name), "int32");
  *out = v->GetInt();
  return absl::OkStatus();
}

absl::Status readInt32(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       std::optional<int32_t>* out) {
  int32_t value = 0;
  if (findField(object, name) == nullptr) return absl::OkStatus();
  absl::Status status = readInt32(object, path, name, &value);
  if (status.ok()) *out = value;
  return status;
}

absl::Status readInt64(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       int64_t* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsInt64()) return typeError(path.field(name), "int64");
  *out = v->GetInt64();
  return absl::OkStatus();
}

absl::Status readInt64(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       std::optional<int64_t>* out) {
  int64_t value = 0;
  if (findField(object, name) == nullptr) return absl::OkStatus();
  absl::Status status = readInt64(object, path, name, &value);
  if (status.ok()) *out = value;
  return status;
}

absl::Status readStringMap(const rapidjson::Value& object, const JsonPath& path,
                           std::string_view name, std::map<std::string, std::string>* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  const JsonPath map_path = path.field(name);
  if (!v->IsObject()) return typeError(map_path, "object");
  out->clear();
  for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
    std::string_view key(it->name.GetString(), it->name.GetStringLength());
    if (!it->value.IsString()) return typeError(map_path.field(key), "string");
    (*out)[std::string(key)] = std::string(it->value.GetString(), it->value.GetStringLength());
  }
  return absl::OkStatus();
}

absl::Status readStringList(const rapidjson::Value& object, const JsonPath& path,
                            std::string_view name, std::vector<std::string>* out) {
  out->clear();
  return forEachElement(object, path, name,
                        [out](const rapidjson::Value& v, const JsonPath& element_path) {
                          if (!v.IsString()) return typeError(element_path, "string");
                          out->emplace_back(v.GetString(), v.GetStringLength());
                          return absl::OkStatus();
                        });
}

std::string toJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

JsonWriter& JsonWriter::beginObject() {
  writer_.StartObject();
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  writer_.EndObject();
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  writer_.StartArray();
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  writer_.EndArray();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  writer_.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()), true);
  return *this;
}

JsonWriter& JsonWriter::string(std::string_view value) {
  writer_.String(value.data(), static_cast<rapidjson::SizeType>(value.size()), true);
  return *this;
}

JsonWriter& JsonWriter::integer(int64_t value) {
  writer_.Int64(value);
  return *this;
}

JsonWriter& JsonWriter::boolean(bool value) {
  writer_.Bool(value);
  return *this;
}

JsonWriter& JsonWriter::null() {
  writer_.Null();
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  writer_.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  return *this;
}

JsonWriter& JsonWriter::stringField(std::string_view name, std::string_view value) {
  return key(name).string(value);
}

JsonWriter& JsonWriter::integerField(std::string_view name, int64_t value) {
  return key(name).integer(value);
}

JsonWriter& JsonWriter::booleanField(std::string_view name, bool value) {
  return key(name).boolean(value);
}

JsonWriter& JsonWriter::stringFieldIfSet(std::string_view name, std::string_view value) {
  if (!value.empty()) stringField(name, value);
  return *this;
}

JsonWriter& JsonWriter::stringOrNullField(std::string_view name, std::string_view value) {
  key(name);
  return value.empty() ? null() : string(value);
}

JsonWriter& JsonWriter::stringMapField(std::string_view name,
                                       const std::map<std::string, std::string>& map) {
  key(name).beginObject();
  for (const auto& [k, v] : map) stringField(k, v);
  return endObject();
}

}  // namespace muster::proto
