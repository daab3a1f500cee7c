// The --speculative_config flag: a JSON object in vLLM's shape, {"method": "ngram",
// "num_speculative_tokens": k, "prompt_lookup_min": n, "prompt_lookup_max": m}, read into the
// engine's n-gram configuration. Other methods and unknown keys are errors that name them.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "engine/ngram_proposer.h"

namespace ls::server {

// Empty text: speculation off.
absl::StatusOr<NgramConfig> ParseSpeculativeConfig(std::string_view text);

}  // namespace ls::server
