// ApiKeys: file loading and constant-time matching.
#include "server/api_keys.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace ls::server {
namespace {

// Compares in time that depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<ApiKeys> ApiKeys::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--api_key_file: cannot open ", path));
  ApiKeys k;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view s = absl::StripAsciiWhitespace(line);
    if (s.empty() || s[0] == '#') continue;
    k.keys_.emplace_back(s);
  }
  if (k.keys_.empty()) return absl::InvalidArgumentError(absl::StrCat("--api_key_file: ", path, " holds no key"));
  return k;
}

ApiKeys ApiKeys::FromList(std::vector<std::string> keys) {
  ApiKeys k;
  k.keys_ = std::move(keys);
  return k;
}

bool ApiKeys::Authorize(std::string_view header) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() < kBearer.size() || header.substr(0, kBearer.size()) != kBearer) return false;
  const std::string_view token = header.substr(kBearer.size());
  bool ok = false;
  for (const auto& k : keys_) ok |= ConstantTimeEquals(token, k);  // no early exit
  return ok;
}

}  // namespace ls::server
