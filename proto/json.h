#pragma once

// Small typed helpers over RapidJSON: parsing with good errors, field readers that check types and
// name the offending field path, and a writer for encoding. Compile with RAPIDJSON_HAS_STDSTRING=1.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace muster::proto {

// Limits on what Muster accepts from the API server (tests/fuzz/README.md explains each). They
// sit well above anything a Kubernetes API server sends and bound the stack and memory a hostile
// or broken server (or anything in between) can make Muster spend.
//
// A whole document (parseJson's default). A list page is not one: parseListPage parses it item by
// item, each item bounded like one watch event, and only the transport bounds the page
// (ClientOptions::max_response_bytes, of the same size: 500 objects of 512 KiB).
inline constexpr size_t kMaxJsonDocumentBytes = size_t{256} << 20;
// Nesting: the deepest Kubernetes object Muster reads (a Pod with node affinity, or a
// ParallelJob's pod template) nests about 15 levels. The parser does not recurse (RapidJSON's
// iterative mode), but encoding and copying a value do, and a deeper document is refused.
inline constexpr int kMaxJsonDepth = 128;
// One string copied into Muster's structs: the API server stores objects of at most 1.5 MiB
// (etcd's --max-request-bytes), so no single field of a real object is longer.
inline constexpr size_t kMaxJsonStringBytes = size_t{2} << 20;
// Elements of one array, or entries of one map, decoded into Muster's structs (containers,
// tolerations, volumes, labels, annotations, resource lists, ...). A decoded element costs far
// more memory than its text (a toleration is ~200 bytes, `{}` is 3), so each list is bounded;
// Kubernetes' 1.5 MiB object limit leaves room for at most ~50k real containers or volumes.
inline constexpr size_t kMaxJsonElements = 65536;

// Parses a JSON document of at most `max_bytes` bytes nested at most kMaxJsonDepth deep. Errors
// are InvalidArgument and carry the byte offset and RapidJSON's message: "invalid JSON at offset
// 12: Missing a colon after a name of object member."
absl::StatusOr<rapidjson::Document> parseJson(std::string_view text,
                                              size_t max_bytes = kMaxJsonDocumentBytes);

// One item of a list page, as parseListPage hands it over.
struct ListPageItem {
  size_t index = 0;  // its place in the page's items
  // metadata.namespace and metadata.name as far as the parser read them (empty when absent): they
  // name an item that could not be decoded.
  std::string namespace_;
  std::string name;
  // The item as a document of its own; or why it could not be decoded (InvalidArgument: nested
  // too deep, too large, a number out of range, not an object).
  absl::StatusOr<rapidjson::Document> object;
};

// What a list page says about itself.
struct ListPageMeta {
  std::string resource_version;  // metadata.resourceVersion
  std::string continue_token;    // metadata.continue
};

// Parses one page of a Kubernetes list ({"metadata":{...},"items":[...]}) item by item, in place:
// each item is parsed as a document of its own, of at most `max_item_bytes` bytes nested at most
// `max_item_depth` deep, and handed to `on_item` (with the same ListPageItem, reused) as soon as it
// is complete. So the limits count per object, never per page, and the page is never held as one
// document. An item that breaks a limit, or is not an object, is read past and handed over with
// its error; the page goes on. The page itself must be JSON, an object whose items are an array
// (or null, or absent): anything else is an InvalidArgument error like parseJson's, returned after
// on_item has seen the items before the fault.
absl::StatusOr<ListPageMeta> parseListPage(std::string_view text, size_t max_item_bytes,
                                           int max_item_depth,
                                           const std::function<void(ListPageItem&)>& on_item);

// The path of a value inside a document, rendered only when an error needs it:
// "spec.containers[0].resources.requests.cpu". A child refers to its parent, so a JsonPath must
// not outlive the one it was made from: build children in argument position and pass them by
// const reference, never store one.
class JsonPath {
 public:
  JsonPath() = default;  // the document root

  JsonPath field(std::string_view name) const { return JsonPath(this, name, kNoIndex); }
  JsonPath index(size_t i) const { return JsonPath(this, {}, i); }

  bool isRoot() const { return parent_ == nullptr; }
  // "a.b[2].c"; map keys that are not plain identifiers render in brackets:
  // "requests[nvidia.com/gpu]".
  std::string toString() const;

 private:
  static constexpr size_t kNoIndex = static_cast<size_t>(-1);
  JsonPath(const JsonPath* parent, std::string_view name, size_t index)
      : parent_(parent), name_(name), index_(index) {}
  void appendTo(std::string* out) const;

  const JsonPath* parent_ = nullptr;
  std::string_view name_;
  size_t index_ = kNoIndex;
};

// InvalidArgument "<path>: expected <what>" ("expected <what>" at the root).
absl::Status typeError(const JsonPath& path, std::string_view expected);
// InvalidArgument "<path>: <message>".
absl::Status fieldError(const JsonPath& path, std::string_view message);

// The member `name` of `object`, or nullptr when `object` is not an object, the member is absent,
// or its value is null (Kubernetes treats null like absent).
const rapidjson::Value* findField(const rapidjson::Value& object, std::string_view name);

// OK when `v` is an object, else a typeError naming `path`.
absl::Status expectObject(const rapidjson::Value& v, const JsonPath& path);

// Typed readers for the member `name` of the object at `path`. An absent or null member leaves
// *out unchanged and returns OK; a member of the wrong type is an InvalidArgument error naming
// "<path>.<name>", and so is a string longer than kMaxJsonStringBytes, a map with more than
// kMaxJsonElements entries and an integer out of the field's range ("expected int32, got
// 4294967296"), which is never truncated. `object` must already be known to be an object.
absl::Status readString(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        std::string* out);
absl::Status readString(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        std::optional<std::string>* out);
absl::Status readBool(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                      bool* out);
// Any JSON number (integers included).
absl::Status readDouble(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        double* out);
absl::Status readInt32(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       int32_t* out);
absl::Status readInt32(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       std::optional<int32_t>* out);
absl::Status readInt64(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       int64_t* out);
absl::Status readInt64(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                       std::optional<int64_t>* out);
// An object whose values are all strings (labels, annotations, nodeSelector).
absl::Status readStringMap(const rapidjson::Value& object, const JsonPath& path,
                           std::string_view name, std::map<std::string, std::string>* out);
// An array of strings (finalizers, selector values).
absl::Status readStringList(const rapidjson::Value& object, const JsonPath& path,
                            std::string_view name, std::vector<std::string>* out);

// InvalidArgument "<path>: <count> <what>, more than the <limit> Muster accepts" when
// count > limit (kMaxJsonElements, kMaxJsonStringBytes).
absl::Status checkSize(const JsonPath& path, size_t count, size_t limit, std::string_view what);

// Calls fn(element, element_path) for each element of the array member `name`; absent or null is
// an empty array; more than kMaxJsonElements elements is an error. Stops at and returns the first
// error fn returns.
template <typename Fn>
absl::Status forEachElement(const rapidjson::Value& object, const JsonPath& path,
                            std::string_view name, Fn&& fn) {
  const rapidjson::Value* array = findField(object, name);
  if (array == nullptr) return absl::OkStatus();
  const JsonPath array_path = path.field(name);
  if (!array->IsArray()) return typeError(array_path, "array");
  if (absl::Status s = checkSize(array_path, array->Size(), kMaxJsonElements, "elements");
      !s.ok()) {
    return s;
  }
  for (rapidjson::SizeType i = 0; i < array->Size(); ++i) {
    absl::Status status = fn((*array)[i], array_path.index(i));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// Compact JSON text of a value, member order preserved.
std::string toJson(const rapidjson::Value& v);

// A compact JSON encoder. Calls must nest correctly (RapidJSON asserts otherwise); the helpers
// below are what codecs use, so they do.
class JsonWriter {
 public:
  JsonWriter() : writer_(buffer_) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);

  JsonWriter& string(std::string_view value);
  JsonWriter& integer(int64_t value);
  JsonWriter& boolean(bool value);
  JsonWriter& null();
  // An already encoded JSON value, written verbatim.
  JsonWriter& raw(std::string_view json);

  // key + value.
  JsonWriter& stringField(std::string_view name, std::string_view value);
  JsonWriter& integerField(std::string_view name, int64_t value);
  JsonWriter& booleanField(std::string_view name, bool value);
  // Writes the field only when `value` is not empty.
  JsonWriter& stringFieldIfSet(std::string_view name, std::string_view value);
  // Writes `value`, or null when it is empty (a merge patch then removes the field).
  JsonWriter& stringOrNullField(std::string_view name, std::string_view value);
  JsonWriter& stringMapField(std::string_view name, const std::map<std::string, std::string>& map);

  // The text written so far, and its length.
  std::string str() const { return std::string(buffer_.GetString(), buffer_.GetSize()); }
  size_t size() const { return buffer_.GetSize(); }

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

// Calls fn(member, member_path) when the member `name` is present; it must be an object.
template <typename Fn>
absl::Status withObject(const rapidjson::Value& object, const JsonPath& path,
                        std::string_view name, Fn&& fn) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  const JsonPath member_path = path.field(name);
  if (absl::Status s = expectObject(*v, member_path); !s.ok()) return s;
  return fn(*v, member_path);
}

}  // namespace muster::proto

// Returns from the calling function when `expr` (an absl::Status) is not OK. For decoders.
#define MUSTER_RETURN_IF_ERROR(expr)   \
  do {                                 \
    if (absl::Status _status = (expr); \
        !_status.ok()) {               \
      return _status;                  \
    }                                  \
  } while (false)
