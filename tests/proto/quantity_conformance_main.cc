// What Muster's Quantity::parse makes of each input, in the line format of
// tests/proto/quantity_conformance/main.go (k8s.io/apimachinery's answers), for compare.py.
//
//   muster_quantity_conformance < inputs
//
// Reads one input a line, hex-encoded (so that any byte, NUL and newline included, can be an
// input); writes one JSON object a line: {"in": the hex, "ok", "err": "format"|"suffix"|"other: …"
// and when ok: "string" (toString()), "format", "nano" (nanoValue()), "milli" (milliValue()),
// "value" (value())}. Exits 2 on a line that is not hex.

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "proto/quantity.h"

namespace {

using muster::proto::Quantity;

std::optional<std::string> fromHex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// A JSON string literal; every byte outside printable ASCII is \u00XX.
std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out.append(buf);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

std::string decimal(absl::int128 v) {
  const bool negative = v < 0;
  absl::uint128 m = negative ? absl::uint128(-v) : absl::uint128(v);  // |v| <= Int128Max
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  } while (m > 0);
  return negative ? "-" + out : out;
}

std::string_view formatName(Quantity::Format format) {
  switch (format) {
    case Quantity::Format::kDecimalSI: return "DecimalSI";
    case Quantity::Format::kBinarySI: return "BinarySI";
    case Quantity::Format::kDecimalExponent: return "DecimalExponent";
  }
  return "unknown";
}

// Which of apimachinery's errors the message stands for (Muster's messages quote them).
std::string errorKind(const absl::Status& status) {
  const std::string_view message(status.message().data(), status.message().size());
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    if (message.ends_with("quantities must match the regular expression "
                          "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")) {
      return "format";
    }
    if (message.ends_with("unable to parse quantity's suffix")) return "suffix";
  }
  return "other: " + status.ToString();
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string hex;
  std::string out;
  while (std::getline(std::cin, hex)) {
    const std::optional<std::string> input = fromHex(hex);
    if (!input) {
      std::cerr << "muster_quantity_conformance: not a hex line: " << hex << "\n";
      return 2;
    }
    const absl::StatusOr<Quantity> parsed = Quantity::parse(*input);
    out = "{\"in\":" + jsonString(hex);
    if (!parsed.ok()) {
      out += ",\"ok\":false,\"err\":" + jsonString(errorKind(parsed.status()));
    } else {
      out += ",\"ok\":true,\"string\":" + jsonString(parsed->toString());
      out += ",\"format\":" + jsonString(formatName(parsed->format()));
      out += ",\"nano\":" + jsonString(decimal(parsed->nanoValue()));
      out += ",\"milli\":" + std::to_string(parsed->milliValue());
      out += ",\"value\":" + std::to_string(parsed->value());
    }
    out += "}\n";
    std::cout << out;
  }
  return std::cout.good() ? 0 : 1;
}
