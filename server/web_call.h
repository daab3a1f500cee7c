// WebCall and WebReply: an HTTP request and its answer as the route classes (DashboardRoutes,
// StoredResponseRoutes) see them, independent of the HTTP library; the server fills the one from
// the request it read and writes out the other.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace ls::server {

struct WebCall {
  std::string_view method;         // "GET", "POST", ...
  std::string_view path;           // without the query
  std::string_view query;          // after '?', still percent-encoded
  std::string_view authorization;  // the Authorization header
  std::string_view cookie;         // the Cookie header
  std::string_view body;
  bool tls = false;
};

struct WebReply {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type
  std::optional<ApiError> error;  // set: answer with the API's JSON error instead of the fields above
};

// A reply that is the API's JSON error.
inline WebReply ErrorReply(ApiError e) {
  WebReply r;
  r.error = std::move(e);
  return r;
}
inline WebReply ErrorReply(int status, std::string message, std::string param = "",
                           std::string type = "invalid_request_error") {
  return ErrorReply(ApiError{status, std::move(message), std::move(param), std::move(type)});
}
// The reply to a call without a valid API key.
inline WebReply UnauthorizedReply() {
  return ErrorReply(401, "missing or invalid API key", "", "authentication_error");
}

}  // namespace ls::server
