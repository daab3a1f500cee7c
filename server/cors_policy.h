// CorsPolicy: which web pages of other origins may call the HTTP API from a browser
// (--allowed_origins), and the CORS headers that tell the browser so. Off by default: a browser
// then lets no page of another origin read a reply. Credentials are never allowed across origins,
// so the dashboard's session cookie stays with pages of the server's own origin. Immutable, so
// thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::server {

class CorsPolicy {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  CorsPolicy() = default;  // off
  // `spec`: empty (off), "*" (any origin), or a comma-separated list of origins as browsers send
  // them in Origin (scheme://host or scheme://host:port, http or https, no path). Errors name the
  // entry at fault.
  static absl::StatusOr<CorsPolicy> Parse(std::string_view spec);

  bool enabled() const { return any_ || !origins_.empty(); }
  // The headers a reply to a request from `origin` (its Origin header; empty: none) carries:
  // none when the origin may not read it.
  Headers ReplyHeaders(std::string_view origin) const;
  // A preflight (OPTIONS with Access-Control-Request-Method) from `origin`, asking to send
  // `request_headers` (its Access-Control-Request-Headers): the headers of its 204 answer; none
  // when the origin is not allowed (the server answers 403).
  Headers PreflightHeaders(std::string_view origin, std::string_view request_headers) const;

 private:
  bool Allowed(std::string_view origin) const;

  bool any_ = false;
  std::vector<std::string> origins_;
};

}  // namespace ls::server
