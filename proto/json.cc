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

// Parser flags: iterative (it never recurses, however deep the text), numbers as their text (read
// by LimitedHandler::RawNumber).
constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag;

// The limit a value broke.
enum class Broken { kNone, kDepth, kNumber, kBytes };

struct HandlerOptions {
  int max_depth = kMaxJsonDepth;
  size_t max_bytes = std::numeric_limits<size_t>::max();  // read from the stream
  // A value that breaks a limit is read to its end without being kept (so what follows it can
  // still be parsed) instead of ending the parse.
  bool read_past = false;
  // Where to note metadata.namespace and metadata.name of the root object as they pass (to name
  // a value that could not be kept); not noted when null.
  std::string* namespace_out = nullptr;
  std::string* name_out = nullptr;
};

// RapidJSON's SAX handler for a Document, refusing to nest deeper than options.max_depth. With
// the iterative parser (kParseIterativeFlag) parsing itself never recurses; the depth bound
// protects what recurses later (encoding, copying, decoders).
//
// Numbers arrive as their text (kParseNumbersAsStringsFlag) and are read here: integers exactly,
// the rest to the nearest double (std::from_chars), so that a number Muster writes back (RapidJSON
// writes the shortest digits that read back to the same double) is read back unchanged. RapidJSON
// 1.1's own reading is only nearly right past 17 digits (a decode-encode of a pod template changed
// a user's number), and its precise path has undefined behaviour (diyfp.h, on "0e40").
//
// Each event either goes into the document or, once a limit is broken, ends the parse (returns
// false) or is read past (options.read_past: returns true and keeps nothing).
class LimitedHandler {
 public:
  LimitedHandler(rapidjson::Document& doc, const rapidjson::MemoryStream& stream,
                 const HandlerOptions& options)
      : doc_(doc), stream_(stream), options_(options) {}
  Broken broken() const { return broken_; }
  size_t brokenAt() const { return broken_at_; }  // the stream's position then

  bool Null() { return keep() ? doc_.Null() : options_.read_past; }
  bool Bool(bool b) { return keep() ? doc_.Bool(b) : options_.read_past; }
  bool Int(int i) { return keep() ? doc_.Int(i) : options_.read_past; }
  bool Uint(unsigned i) { return keep() ? doc_.Uint(i) : options_.read_past; }
  bool Int64(int64_t i) { return keep() ? doc_.Int64(i) : options_.read_past; }
  bool Uint64(uint64_t i) { return keep() ? doc_.Uint64(i) : options_.read_past; }
  bool Double(double d) { return keep() ? doc_.Double(d) : options_.read_past; }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool /*copy*/) {
    if (!keep()) return options_.read_past;
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
      if (decimalMagnitude(text) > 0) return breakLimit(Broken::kNumber);
      d = text[0] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || p != end) {
      return breakLimit(Broken::kNumber);  // not reached: RapidJSON has checked the grammar
    }
    return doc_.Double(d);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    if (capture_ != nullptr && depth_ == 2 && in_metadata_) {
      capture_->assign(s, n);
      capture_ = nullptr;
    }
    return keep() ? doc_.String(s, n, copy) : options_.read_past;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    if (options_.name_out != nullptr) noteKey(std::string_view(s, n));
    return keep() ? doc_.Key(s, n, copy) : options_.read_past;
  }
  bool StartObject() {
    ++depth_;
    if (depth_ == 2) in_metadata_ = metadata_next_;
    if (depth_ > options_.max_depth && broken_ == Broken::kNone) return breakLimit(Broken::kDepth);
    return keep() ? doc_.StartObject() : options_.read_past;
  }
  bool EndObject(rapidjson::SizeType members) {
    if (depth_-- == 2) in_metadata_ = false;
    return keep() ? doc_.EndObject(members) : options_.read_past;
  }
  bool StartArray() {
    ++depth_;
    if (depth_ > options_.max_depth && broken_ == Broken::kNone) return breakLimit(Broken::kDepth);
    return keep() ? doc_.StartArray() : options_.read_past;
  }
  bool EndArray(rapidjson::SizeType elements) {
    --depth_;
    return keep() ? doc_.EndArray(elements) : options_.read_past;
  }

 private:
  // Whether this event goes into the document: not once a limit is broken, the byte limit
  // included.
  bool keep() {
    if (broken_ != Broken::kNone) return false;
    if (stream_.Tell() <= options_.max_bytes) return true;
    breakLimit(Broken::kBytes);
    return false;
  }
  bool breakLimit(Broken limit) {
    broken_ = limit;
    broken_at_ = stream_.Tell();
    return options_.read_past;
  }
  // A member name: of the root object ("metadata"?), or of its metadata ("name", "namespace").
  void noteKey(std::string_view key) {
    if (depth_ == 1) {
      metadata_next_ = key == "metadata";
    } else if (depth_ == 2 && in_metadata_) {
      capture_ = key == "name" ? options_.name_out
                 : key == "namespace" ? options_.namespace_out
                                      : nullptr;
    }
  }

  rapidjson::Document& doc_;
  const rapidjson::MemoryStream& stream_;
  const HandlerOptions& options_;
  int depth_ = 0;
  Broken broken_ = Broken::kNone;
  size_t broken_at_ = 0;
  bool metadata_next_ = false;  // the root's member being read is "metadata"
  bool in_metadata_ = false;    // inside the root's metadata object
  std::string* capture_ = nullptr;  // where the metadata string being read goes
};

// What parsing one value into a document found.
struct Parsed {
  rapidjson::ParseResult result;  // the grammar's verdict (a broken limit read past is no error)
  size_t length = 0;              // bytes read
  Broken broken = Broken::kNone;
  size_t broken_at = 0;
};

// Parses `text` into `doc`: the whole of it, or with kStopWhenDone only the value at its start
// (whatever follows is left alone). `doc` is null unless the parse succeeded within the limits.
template <bool kStopWhenDone>
Parsed parseInto(std::string_view text, rapidjson::Document& doc, const HandlerOptions& options) {
  Parsed out;
  // Document::Populate runs the parser into the document's own value stack and takes the root
  // value from it when the generator succeeds.
  auto generate = [&](rapidjson::Document& d) {
    rapidjson::MemoryStream stream(text.data(), text.size());
    LimitedHandler handler(d, stream, options);
    rapidjson::Reader reader;
    if constexpr (kStopWhenDone) {
      out.result = reader.Parse<kParseFlags | rapidjson::kParseStopWhenDoneFlag>(stream, handler);
    } else {
      // Skips a UTF-8 byte order mark, as the document's first bytes only.
      rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
      out.result = reader.Parse<kParseFlags>(input, handler);
    }
    out.length = stream.Tell();
    out.broken = handler.broken();
    out.broken_at = handler.brokenAt();
    return !out.result.IsError() && out.broken == Broken::kNone;
  };
  doc.Populate(generate);
  return out;
}

absl::Status syntaxError(size_t offset, rapidjson::ParseErrorCode code) {
  return absl::InvalidArgumentError(strCat("invalid JSON at offset ", std::to_string(offset), ": ",
                                           rapidjson::GetParseError_En(code)));
}

// The error for a broken limit; `base` is where the parsed text starts in the whole.
absl::Status limitError(const Parsed& parsed, size_t base, const HandlerOptions& options) {
  const std::string at = strCat("invalid JSON at offset ", std::to_string(base + parsed.broken_at));
  switch (parsed.broken) {
    case Broken::kDepth:
      return absl::InvalidArgumentError(strCat(at, ": nested deeper than ",
                                               std::to_string(options.max_depth), " levels"));
    case Broken::kNumber:
      return absl::InvalidArgumentError(
          strCat(at, ": ", rapidjson::GetParseError_En(rapidjson::kParseErrorNumberTooBig)));
    case Broken::kBytes:
      return absl::InvalidArgumentError(strCat("JSON object of ", std::to_string(parsed.length),
                                               " bytes is larger than the ",
                                               std::to_string(options.max_bytes),
                                               " Muster accepts"));
    case Broken::kNone:
      break;
  }
  return absl::OkStatus();
}

size_t skipSpace(std::string_view text, size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\r' || text[pos] == '\t')) {
    ++pos;
  }
  return pos;
}

// Reads the JSON value at text[*pos] through `handler` and moves *pos past it.
template <class Handler>
absl::Status readValue(std::string_view text, size_t* pos, Handler& handler) {
  rapidjson::MemoryStream stream(text.data() + *pos, text.size() - *pos);
  rapidjson::Reader reader;
  rapidjson::ParseResult result =
      reader.Parse<kParseFlags | rapidjson::kParseStopWhenDoneFlag>(stream, handler);
  if (result.IsError()) return syntaxError(*pos + result.Offset(), result.Code());
  *pos += stream.Tell();
  return absl::OkStatus();
}

// A member name (a string; the caller has seen its opening quote).
struct NameHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, NameHandler> {
  std::string* out;
  explicit NameHandler(std::string* o) : out(o) {}
  bool String(const char* s, rapidjson::SizeType n, bool /*copy*/) {
    out->assign(s, n);
    return true;
  }
};

// Checks the grammar of a value nobody reads, and keeps nothing (the parser does not recurse).
struct SkipHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, SkipHandler> {};

}  // namespace

absl::StatusOr<rapidjson::Document> parseJson(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(strCat("JSON document of ", std::to_string(text.size()),
                                             " bytes is larger than the ",
                                             std::to_string(max_bytes), " Muster accepts"));
  }
  rapidjson::Document doc;
  const HandlerOptions options;
  const Parsed parsed = parseInto<false>(text, doc, options);
  // The parse ended at the broken limit: the parser's offset is where.
  if (parsed.broken == Broken::kDepth) {
    return absl::InvalidArgumentError(strCat("invalid JSON at offset ",
                                             std::to_string(parsed.result.Offset()),
                                             ": nested deeper than ", std::to_string(kMaxJsonDepth),
                                             " levels"));
  }
  if (parsed.broken == Broken::kNumber) {
    return syntaxError(parsed.result.Offset(), rapidjson::kParseErrorNumberTooBig);
  }
  if (parsed.result.IsError()) return syntaxError(parsed.result.Offset(), parsed.result.Code());
  return doc;
}

absl::StatusOr<ListPageMeta> parseListPage(std::string_view text, size_t max_item_bytes,
                                           int max_item_depth,
                                           const std::function<void(ListPageItem&)>& on_item) {
  ListPageMeta meta;
  size_t pos = 0;
  // A UTF-8 byte order mark, skipped as parseJson's stream does (byte by byte).
  for (unsigned char bom : {0xEF, 0xBB, 0xBF}) {
    if (pos < text.size() && static_cast<unsigned char>(text[pos]) == bom) ++pos;
  }
  pos = skipSpace(text, pos);
  if (pos == text.size() || text[pos] != '{') return absl::InvalidArgumentError("expected object");
  pos = skipSpace(text, pos + 1);
  bool empty = pos < text.size() && text[pos] == '}';
  ListPageItem item;  // reused: its strings keep their buffers
  HandlerOptions item_options;
  item_options.max_depth = max_item_depth;
  item_options.max_bytes = max_item_bytes;
  item_options.read_past = true;
  item_options.namespace_out = &item.namespace_;
  item_options.name_out = &item.name;
  std::string name;
  while (!empty) {
    if (pos == text.size() || text[pos] != '"') {
      return syntaxError(pos, rapidjson::kParseErrorObjectMissName);
    }
    NameHandler name_handler(&name);
    MUSTER_RETURN_IF_ERROR(readValue(text, &pos, name_handler));
    pos = skipSpace(text, pos);
    if (pos == text.size() || text[pos] != ':') {
      return syntaxError(pos, rapidjson::kParseErrorObjectMissColon);
    }
    pos = skipSpace(text, pos + 1);
    if (name == "items" && pos < text.size() && text[pos] == '[') {
      pos = skipSpace(text, pos + 1);
      const bool no_items = pos < text.size() && text[pos] == ']';
      for (size_t index = 0; !no_items; ++index) {
        item.index = index;
        item.namespace_.clear();
        item.name.clear();
        rapidjson::Document doc;
        const Parsed parsed = parseInto<true>(text.substr(pos), doc, item_options);
        if (parsed.result.IsError()) {
          return syntaxError(pos + parsed.result.Offset(), parsed.result.Code());
        }
        if (parsed.broken != Broken::kNone) {
          item.object = limitError(parsed, pos, item_options);
        } else if (!doc.IsObject()) {
          item.object = absl::InvalidArgumentError(
              strCat("items[", std::to_string(index), "]: expected object"));
        } else {
          item.object = std::move(doc);
        }
        on_item(item);
        pos = skipSpace(text, pos + parsed.length);
        if (pos < text.size() && text[pos] == ']') break;
        if (pos == text.size() || text[pos] != ',') {
          return syntaxError(pos, rapidjson::kParseErrorArrayMissCommaOrSquareBracket);
        }
        pos = skipSpace(text, pos + 1);
      }
      ++pos;  // past ']'
    } else if (name == "items" && text.substr(pos, 4) != "null") {
      return absl::InvalidArgumentError("items: expected array");
    } else if (name == "metadata") {
      rapidjson::Document doc;
      const HandlerOptions options;
      const Parsed parsed = parseInto<true>(text.substr(pos), doc, options);
      if (parsed.result.IsError()) {
        return syntaxError(pos + parsed.result.Offset(), parsed.result.Code());
      }
      if (parsed.broken != Broken::kNone) return limitError(parsed, pos, options);
      pos += parsed.length;
      if (const rapidjson::Value* rv = findField(doc, "resourceVersion"); rv && rv->IsString()) {
        meta.resource_version.assign(rv->GetString(), rv->GetStringLength());
      }
      if (const rapidjson::Value* cont = findField(doc, "continue"); cont && cont->IsString()) {
        meta.continue_token.assign(cont->GetString(), cont->GetStringLength());
      }
    } else {
      SkipHandler skip;
      MUSTER_RETURN_IF_ERROR(readValue(text, &pos, skip));
    }
    pos = skipSpace(text, pos);
    if (pos < text.size() && text[pos] == '}') break;
    if (pos == text.size() || text[pos] != ',') {
      return syntaxError(pos, rapidjson::kParseErrorObjectMissCommaOrCurlyBracket);
    }
    pos = skipSpace(text, pos + 1);
  }
  pos = skipSpace(text, pos + 1);  // past '}'
  if (pos != text.size()) return syntaxError(pos, rapidjson::kParseErrorDocumentRootNotSingular);
  return meta;
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

absl::Status readDouble(const rapidjson::Value& object, const JsonPath& path, std::string_view name,
                        double* out) {
  const rapidjson::Value* v = findField(object, name);
  if (v == nullptr) return absl::OkStatus();
  if (!v->IsNumber()) return typeError(path.field(name), "number");
  *out = v->GetDouble();
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
