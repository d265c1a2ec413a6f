// Non-2xx answers of the API server as absl::Status: the Status object's reason and message, the
// HTTP code, and payloads so that callers can ask what happened (isNotFound, isConflict, ...).
#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "proto/client/internal.h"
#include "proto/json.h"
#include "proto/strings.h"
#include "rapidjson/document.h"

namespace muster::proto {

namespace http = client_internal::http;

namespace {

constexpr char kHttpStatusUrl[] = "muster.dev/http-status";
// The largest error body read as a Status object (the stream reader keeps 1 MiB of one).
constexpr size_t kMaxStatusBodyBytes = size_t{1} << 20;
constexpr char kReasonUrl[] = "muster.dev/reason";

// client-go's reasons for a status without a Status body (NewGenericServerResponse).
std::string_view defaultReason(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "";
  }
}

absl::StatusCode codeFor(int http_status, std::string_view reason) {
  switch (http_status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;  // resourceVersion too old: relist
    case 412:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_status >= 500) return absl::StatusCode::kUnavailable;
  if (http_status >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

// A short printable excerpt of a non-JSON body.
std::string excerpt(std::string_view body) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(av(body));
  body = std::string_view(stripped.data(), stripped.size());
  std::string out;
  for (char c : body.substr(0, 256)) {
    out.push_back(absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : ' ');
  }
  if (body.size() > 256) out += "...";
  return out;
}

}  // namespace

absl::Status apiError(int http_status, std::string_view body, std::string_view what) {
  std::string message;
  std::string reason;
  int code = http_status;
  // A Status object is small; a larger body (or one nested too deep) is shown as an excerpt.
  absl::StatusOr<rapidjson::Document> parsed = parseJson(body, kMaxStatusBodyBytes);
  if (parsed.ok() && parsed->IsObject()) {
    const rapidjson::Document& doc = *parsed;
    if (auto it = doc.FindMember("message"); it != doc.MemberEnd() && it->value.IsString()) {
      message = it->value.GetString();
    }
    if (auto it = doc.FindMember("reason"); it != doc.MemberEnd() && it->value.IsString()) {
      reason = it->value.GetString();
    }
    // In-stream watch errors arrive with HTTP 200; the Status' own code is what counts then.
    if (auto it = doc.FindMember("code"); it != doc.MemberEnd() && it->value.IsInt() &&
                                          (code < 400 || code == 0)) {
      code = it->value.GetInt();
    }
  } else if (!body.empty()) {
    message = excerpt(body);
  }
  if (reason.empty()) reason = std::string(defaultReason(code));
  if (message.empty()) {
    message = std::string(
        http::obsolete_reason(static_cast<http::status>(code)));
    if (message.empty() || message == "<unknown-status>") message = "request failed";
  }
  std::string text = what.empty() ? message : strCat(what, ": ", message);
  strAppend(&text, " (", code, reason.empty() ? "" : " ", reason, ")");
  absl::Status status(codeFor(code, reason), text);
  status.SetPayload(kHttpStatusUrl, absl::Cord(strCat(code)));
  if (!reason.empty()) status.SetPayload(kReasonUrl, absl::Cord(reason));
  return status;
}

int httpStatusOf(const absl::Status& status) {
  auto payload = status.GetPayload(kHttpStatusUrl);
  if (!payload) return 0;
  int code = 0;
  std::string text(*payload);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), code);
  (void)ptr;
  return ec == std::errc() ? code : 0;
}

std::string reasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonUrl);
  return payload ? std::string(*payload) : std::string();
}

bool isNotFound(const absl::Status& status) {
  return httpStatusOf(status) == 404 || reasonOf(status) == "NotFound";
}
bool isAlreadyExists(const absl::Status& status) { return reasonOf(status) == "AlreadyExists"; }
bool isConflict(const absl::Status& status) {
  return httpStatusOf(status) == 409 && reasonOf(status) != "AlreadyExists";
}
bool isGone(const absl::Status& status) {
  const std::string reason = reasonOf(status);
  return httpStatusOf(status) == 410 || reason == "Expired" || reason == "Gone";
}

}  // namespace muster::proto
