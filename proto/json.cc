#include "proto/json.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <system_error>
#include <string>
#include <string_view>
#include <utility>

#include "rapidjson/encodedstream.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"
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

// A string value's length, checked against kMaxJsonStringBytes.
absl::Status checkString(const rapidjson::Value& v, const JsonPath& path) {
  return checkSize(path, v.GetStringLength(), kMaxJsonStringBytes, "bytes of string");
}

// "expected int32, got 4294967296" for numbers out of range; "expected int32" otherwise.
absl::Status integerError(const rapidjson::Value& v, const JsonPath& path, std::string_view type) {
  if (!v.IsNumber()) return typeError(path, type);
  return typeError(path, strCat(type, ", got ", toJson(v)));
}

// The power of ten just above a number's first significant digit: 1 for "5.5", 309 for
// "1e308", -323 for "5e-324", 0 for "0.5" (RapidJSON has checked the grammar; the exponent
// saturates).
int64_t decimalMagnitude(std::string_view t) {
  size_t i = !t.empty() && t[0] == '-' ? 1 : 0;
  const auto digit = [&t](size_t at) { return at < t.size() && t[at] >= '0' && t[at] <= '9'; };
  int64_t magnitude = 0;
  bool significant = false;
  for (; digit(i); ++i) {
    if (significant || t[i] != '0') {
      significant = true;
      ++magnitude;
    }
  }
  if (i < t.size() && t[i] == '.') {
    for (++i; digit(i); ++i) {
      if (significant) continue;
      if (t[i] == '0') {
        --magnitude;
      } else {
        significant = true;
      }
    }
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    const bool negative = i < t.size() && t[i] == '-';
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    int64_t exponent = 0;
    for (; digit(i); ++i) exponent = std::min<int64_t>(exponent * 10 + (t[i] - '0'), 1'000'000'000);
    magnitude += negative ? -exponent : exponent;
  }
  return magnitude;
}

// RapidJSON's SAX handler for a Document, refusing to nest deeper than kMaxJsonDepth. With the
// iterative parser (kParseIterativeFlag) parsing itself never recurses; the depth bound protects
// what recurses later (encoding, copying, decoders).
//
// Numbers arrive as their text (kParseNumbersAsStringsFlag) and are read here: integers exactly,
// the rest to the nearest double (std::from_chars), so that a number Muster writes back (RapidJSON
// writes the shortest digits that read back to the same double) is read back unchanged. RapidJSON
// 1.1's own reading is only nearly right past 17 digits (a decode-encode of a pod template changed
// a user's number), and its precise path has undefined behaviour (diyfp.h, on "0e40").
class DepthLimitedHandler {
 public:
  explicit DepthLimitedHandler(rapidjson::Document& doc) : doc_(doc) {}
  bool tooDeep() const { return too_deep_; }
  bool tooBig() const { return too_big_; }

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned i) { return doc_.Uint(i); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t i) { return doc_.Uint64(i); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool /*copy*/) {
    const std::string_view text(s, n);
    const char* end = s + n;
    if (text.find_first_of(".eE") == std::string_view::npos) {
      if (text[0] == '-') {
        int64_t v = 0;
        if (auto [p, ec] = std::from_chars(s, end, v); ec == std::errc() && p == end) {
          return v >= std::numeric_limits<int32_t>::min() ? doc_.Int(static_cast<int>(v))
                                                          : doc_.Int64(v);
        }
      } else {
        uint64_t v = 0;
        if (auto [p, ec] = std::from_chars(s, end, v); ec == std::errc() && p == end) {
          return v <= std::numeric_limits<uint32_t>::max() ? doc_.Uint(static_cast<unsigned>(v))
                                                           : doc_.Uint64(v);
        }
      }
    }
    double d = 0;
    auto [p, ec] = std::from_chars(s, end, d);
    if (ec == std::errc::result_out_of_range) {
      // Past the largest double, or closer to zero than the smallest (which reads as zero).
      if (decimalMagnitude(text) > 0) {
        too_big_ = true;
        return false;
      }
      d = text[0] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || p != end) {
      too_big_ = true;  // not reached: RapidJSON has checked the grammar
      return false;
    }
    return doc_.Double(d);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return enter() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType members) {
    --depth_;
    return doc_.EndObject(members);
  }
  bool StartArray() { return enter() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) {
    --depth_;
    return doc_.EndArray(elements);
  }

 private:
  bool enter() {
    if (++depth_ <= kMaxJsonDepth) return true;
    too_deep_ = true;
    return false;
  }
  rapidjson::Document& doc_;
  int depth_ = 0;
  bool too_deep_ = false;
  bool too_big_ = false;
};

}  // namespace

absl::StatusOr<rapidjson::Document> parseJson(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(strCat("JSON document of ", std::to_string(text.size()),
                                             " bytes is larger than the ",
                                             std::to_string(max_bytes), " Muster accepts"));
  }
  rapidjson::Document doc;
  rapidjson::ParseResult result;
  bool too_deep = false;
  bool too_big = false;
  // Document::Populate runs the parser into the document's own value stack and takes the root
  // value from it when the generator succeeds.
  auto generate = [&](rapidjson::Document& d) {
    DepthLimitedHandler handler(d);
    rapidjson::MemoryStream stream(text.data(), text.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
    rapidjson::Reader reader;
    result = reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag>(
        input, handler);
    too_deep = handler.tooDeep();
    too_big = handler.tooBig();
    return !result.IsError();
  };
  doc.Populate(generate);
  if (too_deep) {
    return absl::InvalidArgumentError(strCat("invalid JSON at offset ",
                                             std::to_string(result.Offset()),
                                             ": nested deeper than ", std::to_string(kMaxJsonDepth),
                                             " levels"));
  }
  if (too_big) {
    return absl::InvalidArgumentError(
        strCat("invalid JSON at offset ", std::to_string(result.Offset()), ": ",
               rapidjson::GetParseError_En(rapidjson::kParseErrorNumberTooBig)));
  }
  if (result.IsError()) {
    return absl::InvalidArgumentError(strCat("invalid JSON at offset ",
                                             std::to_string(result.Offset()), ": ",
                                             rapidjson::GetParseError_En(result.Code())));
  }
  return doc;
}

absl::Status checkSize(const JsonPath& path, size_t count, size_t limit, std::string_view what) {
  if (count <= limit) return absl::OkStatus();
  return fieldError(path, strCat(std::to_string(count), " ", what, ", more than the ",
                                 std::to_string(limit), " Muster accepts"));
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
  MUSTER_RETURN_IF_ERROR(checkString(*v, path.field(name)));
  out->assign(v->GetString(), v->GetStringLength());
  return absl::OkStatus();
}

absl::Status readString(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        std::optional<std::string>* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsString()) return typeError(path.field(name), "string");
  MUSTER_RETURN_IF_ERROR(checkString(*v, path.field(name)));
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
  if (!v->IsInt()) return integerError(*v, path.field(name), "int32");
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
  if (!v->IsInt64()) return integerError(*v, path.field(name), "int64");
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
  MUSTER_RETURN_IF_ERROR(checkSize(map_path, v->MemberCount(), kMaxJsonElements, "entries"));
  out->clear();
  for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
    std::string_view key(it->name.GetString(), it->name.GetStringLength());
    MUSTER_RETURN_IF_ERROR(checkString(it->name, map_path));
    if (!it->value.IsString()) return typeError(map_path.field(key), "string");
    MUSTER_RETURN_IF_ERROR(checkString(it->value, map_path.field(key)));
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
                          MUSTER_RETURN_IF_ERROR(checkString(v, element_path));
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
