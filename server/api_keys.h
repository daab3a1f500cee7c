// ApiKeys: the bearer keys accepted by both front ends, loaded from a file (one key per line,
// blank lines and '#' comments ignored). Comparison is constant-time; keys are never logged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::server {

class ApiKeys {
 public:
  ApiKeys() = default;  // no keys: authentication is off
  static absl::StatusOr<ApiKeys> LoadFile(const std::string& path);
  static ApiKeys FromList(std::vector<std::string> keys);

  bool enabled() const { return !keys_.empty(); }
  // True when auth is off, or the header value is "Bearer <a known key>".
  bool Authorize(std::string_view authorization_header) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace ls::server
