// ParseSpeculativeConfig implementation.
#include "server/speculative_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls::server {

absl::StatusOr<NgramConfig> ParseSpeculativeConfig(std::string_view text) {
  NgramConfig c;
  if (text.empty()) return c;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("--speculative_config must be a JSON object");
  auto integer = [&](const char* key, int32_t* out) -> absl::Status {
    if (!j.contains(key)) return absl::OkStatus();
    if (!j[key].is_number_integer())
      return absl::InvalidArgumentError(absl::StrCat("--speculative_config: '", key, "' must be an integer"));
    *out = j[key].get<int32_t>();
    return absl::OkStatus();
  };
  for (const auto& [key, value] : j.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_min" && key != "prompt_lookup_max")
      return absl::InvalidArgumentError(absl::StrCat("--speculative_config: unknown key '", key,
                                                     "' (method, num_speculative_tokens, prompt_lookup_min, "
                                                     "prompt_lookup_max)"));
  const std::string method = j.contains("method") && j["method"].is_string() ? j["method"].get<std::string>() : "";
  if (method != "ngram")
    return absl::InvalidArgumentError(absl::StrCat("--speculative_config: method '", method,
                                                   "' is not supported; \"ngram\" (prompt lookup) is"));
  if (!j.contains("num_speculative_tokens"))
    return absl::InvalidArgumentError("--speculative_config: num_speculative_tokens is required");
  for (auto [key, out] : {std::pair{"num_speculative_tokens", &c.num_speculative_tokens},
                          std::pair{"prompt_lookup_min", &c.min_n}, std::pair{"prompt_lookup_max", &c.max_n}})
    if (absl::Status st = integer(key, out); !st.ok()) return st;
  if (!j.contains("prompt_lookup_max")) c.max_n = std::max(c.max_n, c.min_n);
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 16 || c.min_n < 1 || c.max_n < c.min_n)
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_config: num_speculative_tokens must be in [1, 16] and 1 <= prompt_lookup_min <= "
                     "prompt_lookup_max, got ",
                     c.num_speculative_tokens, ", ", c.min_n, ", ", c.max_n));
  return c;
}

}  // namespace ls::server
