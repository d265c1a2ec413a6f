#include "proto/config_reader.h"

#include <yaml-cpp/depthguard.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/json.h"
#include "proto/selector.h"
#include "proto/strings.h"

namespace muster::proto::config {

absl::Status bad(std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(strCat(key, ": ", what));
}

std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return strCat("\"", n.Scalar(), "\"");
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "null";
}

absl::Status readInt(const YAML::Node& n, std::string_view key, int64_t* out) {
  if (!n.IsScalar() || !parseInt64(n.Scalar(), out))
    return bad(key, strCat("must be an integer, got ", describe(n)));
  return absl::OkStatus();
}

absl::Status readDouble(const YAML::Node& n, std::string_view key, double* out) {
  if (!n.IsScalar() || !absl::SimpleAtod(n.Scalar(), out))
    return bad(key, strCat("must be a number, got ", describe(n)));
  return absl::OkStatus();
}

absl::Status readBool(const YAML::Node& n, std::string_view key, bool* out) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") {
      *out = true;
      return absl::OkStatus();
    }
    if (s == "false" || s == "False" || s == "FALSE") {
      *out = false;
      return absl::OkStatus();
    }
  }
  return bad(key, strCat("must be true or false, got ", describe(n)));
}

absl::Status readString(const YAML::Node& n, std::string_view key, std::string* out) {
  if (!n.IsScalar()) return bad(key, strCat("must be a string, got ", describe(n)));
  *out = n.Scalar();
  return absl::OkStatus();
}

absl::Status readStrings(const YAML::Node& n, std::string_view key, std::vector<std::string>* out) {
  if (!n.IsSequence()) return bad(key, strCat("must be a list of strings, got ", describe(n)));
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    if (absl::Status st = readString(n[i], strCat(key, "[", i, "]"), &s); !st.ok()) return st;
    out->push_back(std::move(s));
  }
  return absl::OkStatus();
}

Reader intInto(int64_t* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readInt(n, key, out); };
}
Reader doubleInto(double* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readDouble(n, key, out); };
}
Reader boolInto(bool* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readBool(n, key, out); };
}
Reader stringInto(std::string* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readString(n, key, out); };
}
Reader stringsInto(std::vector<std::string>* out) {
  return [out](const YAML::Node& n, const std::string& key) { return readStrings(n, key, out); };
}
Reader mapInto(Keys keys) {
  return [keys = std::move(keys)](const YAML::Node& n, const std::string& key) {
    return readMap(n, key, keys);
  };
}

absl::Status readMap(const YAML::Node& n, const std::string& prefix, const Keys& keys) {
  std::string where = prefix.empty() ? "config" : prefix;
  if (n.IsNull()) return absl::OkStatus();
  if (!n.IsMap()) return bad(where, strCat("must be a mapping, got ", describe(n)));
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return bad(where, "keys must be strings");
    const std::string& name = it->first.Scalar();
    std::string key = prefix.empty() ? name : strCat(prefix, ".", name);
    bool found = false;
    for (const auto& [known, reader] : keys) {
      if (known != name) continue;
      found = true;
      if (absl::Status s = reader(it->second, key); !s.ok()) return s;
      break;
    }
    if (!found) {
      std::vector<std::string> names;
      for (const auto& k : keys) names.push_back(k.first);
      return bad(key, strCat("unknown key (known keys here: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

std::string yamlErrorMessage(const YAML::Exception& e) {
  if (dynamic_cast<const YAML::DeepRecursion*>(&e) != nullptr) {
    return strCat("nested deeper than ", kMaxYamlDepth, " levels");
  }
  return e.msg;
}

std::string yamlErrorText(const YAML::Exception& e) {
  if (e.mark.is_null()) return yamlErrorMessage(e);  // as yaml-cpp writes it
  return strCat("yaml-cpp: error at line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ",
                yamlErrorMessage(e));
}

absl::Status readDocument(std::string_view yaml, const Keys& keys) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return readMap(root, "", keys);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(strCat("config is not valid YAML: ", yamlErrorText(e)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(strCat("config could not be read: ", e.what()));
  }
}

absl::StatusOr<std::string> readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(strCat("cannot read config file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

bool plainInteger(const std::string& s) {
  size_t i = (s.size() > 1 && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i >= s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

bool plainFloat(const std::string& s) {
  double d = 0;
  if (s.empty() || s == "." || !absl::SimpleAtod(s, &d)) return false;
  return s.find_first_not_of("+-0123456789.eE") == std::string::npos;
}

absl::Status appendJson(const YAML::Node& n, const std::string& key, int depth, JsonWriter* w) {
  if (depth > 64) return bad(key, "is nested too deeply");
  // Checked before every node, so an alias bomb stops after kMaxYamlJsonBytes of work.
  if (w->size() > kMaxYamlJsonBytes) {
    return bad(key, strCat("is more than ", kMaxYamlJsonBytes,
                           " bytes as JSON (aliases are written out in full)"));
  }
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      w->null();
      return absl::OkStatus();
    case YAML::NodeType::Scalar: {
      const std::string& v = n.Scalar();
      if (n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str") {
        w->string(v);
      } else if (v == "true" || v == "True" || v == "TRUE") {
        w->boolean(true);
      } else if (v == "false" || v == "False" || v == "FALSE") {
        w->boolean(false);
      } else if (v == "null" || v == "Null" || v == "NULL" || v == "~" || v.empty()) {
        w->null();
      } else if (plainInteger(v)) {
        int64_t i = 0;
        if (!parseInt64(v, &i)) return bad(key, strCat("integer out of range: ", v));
        w->integer(i);
      } else if (plainFloat(v)) {
        w->raw(v);
      } else {
        w->string(v);
      }
      return absl::OkStatus();
    }
    case YAML::NodeType::Sequence:
      w->beginArray();
      for (size_t i = 0; i < n.size(); ++i)
        if (absl::Status s = appendJson(n[i], strCat(key, "[", i, "]"), depth + 1, w); !s.ok())
          return s;
      w->endArray();
      return absl::OkStatus();
    case YAML::NodeType::Map:
      w->beginObject();
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) return bad(key, "keys must be strings");
        w->key(it->first.Scalar());
        if (absl::Status s = appendJson(it->second, strCat(key, ".", it->first.Scalar()), depth + 1, w);
            !s.ok())
          return s;
      }
      w->endObject();
      return absl::OkStatus();
  }
  return bad(key, "is not a YAML value");
}

}  // namespace

absl::StatusOr<std::string> yamlToJson(const YAML::Node& n, std::string_view key) {
  JsonWriter w;
  if (absl::Status s = appendJson(n, std::string(key), 0, &w); !s.ok()) return s;
  return w.str();
}

absl::Status positive(std::string_view key, int64_t v) {
  if (v <= 0) return bad(key, strCat("must be positive, got ", v));
  return absl::OkStatus();
}

absl::Status nonNegative(std::string_view key, int64_t v) {
  if (v < 0) return bad(key, strCat("must not be negative, got ", v));
  return absl::OkStatus();
}

absl::Status validateAddress(std::string_view key, const std::string& address) {
  size_t colon = address.rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos ||
      !parseInt64(std::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return bad(key, strCat("must be host:port with a port in 0..65535, got \"", address, "\""));
  }
  return absl::OkStatus();
}

}  // namespace muster::proto::config
