// CorsPolicy: parsing --allowed_origins and the CORS headers of replies and preflights.
#include "server/cors_policy.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ls::server {
namespace {

// Whether `s` is an origin as a browser writes it: http(s)://host[:port], lower-case scheme and
// host, no path, query or user.
bool IsOrigin(std::string_view s) {
  size_t host = 0;
  if (s.starts_with("http://"))
    host = 7;
  else if (s.starts_with("https://"))
    host = 8;
  else
    return false;
  const std::string_view rest = s.substr(host);
  if (rest.empty()) return false;
  const size_t colon = rest.rfind(':');
  const bool bracketed = rest.front() == '[';  // an IPv6 literal: [::1] or [::1]:8080
  const bool has_port = colon != std::string_view::npos && (!bracketed || colon > rest.find(']'));
  const std::string_view name = has_port ? rest.substr(0, colon) : rest;
  if (name.empty()) return false;
  for (char c : name)
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-' ||
          (bracketed && (c == '[' || c == ']' || c == ':'))))
      return false;
  if (has_port) {
    const std::string_view port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) return false;
  }
  return true;
}

constexpr const char* kExposed = "X-Request-Id, Retry-After";

}  // namespace

absl::StatusOr<CorsPolicy> CorsPolicy::Parse(std::string_view spec) {
  CorsPolicy p;
  for (absl::string_view piece :
       absl::StrSplit(absl::string_view(spec.data(), spec.size()), ',', absl::SkipWhitespace())) {
    const std::string entry(absl::StripAsciiWhitespace(piece));
    if (entry == "*") {
      p.any_ = true;
    } else if (IsOrigin(entry)) {
      p.origins_.push_back(entry);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--allowed_origins: '", entry,
                       "' is not an origin: expected * or http(s)://host[:port] in lower case, without a path"));
    }
  }
  if (p.any_ && !p.origins_.empty())
    return absl::InvalidArgumentError("--allowed_origins: '*' allows every origin; list no others beside it");
  return p;
}

bool CorsPolicy::Allowed(std::string_view origin) const {
  if (origin.empty()) return false;
  return any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

CorsPolicy::Headers CorsPolicy::ReplyHeaders(std::string_view origin) const {
  if (!Allowed(origin)) return {};
  Headers h = {{"Access-Control-Allow-Origin", any_ ? "*" : std::string(origin)},
               {"Access-Control-Expose-Headers", kExposed}};
  if (!any_) h.emplace_back("Vary", "Origin");
  return h;
}

CorsPolicy::Headers CorsPolicy::PreflightHeaders(std::string_view origin, std::string_view request_headers) const {
  Headers h = ReplyHeaders(origin);
  if (h.empty()) return h;
  h.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  if (!request_headers.empty()) h.emplace_back("Access-Control-Allow-Headers", std::string(request_headers));
  h.emplace_back("Access-Control-Max-Age", "600");
  return h;
}

}  // namespace ls::server
