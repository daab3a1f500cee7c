// GenerationDefaults: the sampling defaults a model ships in generation_config.json —
// temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens and eos_token_id — which
// apply where a request leaves a field unset, as vLLM applies them (do_sample and the rest are
// not read, as vLLM does not). Plain data; the front ends apply it at their edge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling_params.h"

namespace ls {

struct GenerationDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<int32_t> max_tokens;   // max_new_tokens: the default length of a chat reply (capped by the context)
  std::vector<int32_t> eos_token_ids;  // every eos id it names; those the model's config lacks stop generation too

  bool empty() const;
  // DIR/generation_config.json, or no defaults when there is none. Errors name the file and key.
  static absl::StatusOr<GenerationDefaults> FromModelDir(const std::string& dir);
  static absl::StatusOr<GenerationDefaults> FromFile(const std::string& path);
  // The defaults as JSON object fields, for the start log.
  std::string Describe() const;
};

// Which sampling fields a request gave (the others take the defaults).
struct SampledFields {
  bool temperature = false, top_p = false, top_k = false, min_p = false, repetition_penalty = false;
};

// Fills the fields the request left unset from `d`, and adds the eos ids `model_eos` lacks to the
// stop token ids (unless the request ignores eos).
void ApplyGenerationDefaults(const GenerationDefaults& d, const SampledFields& given,
                             const std::vector<int32_t>& model_eos, SamplingParams* p);

// The length of a request that leaves max_tokens unset, the same for both front ends: a chat reply
// runs to the end of the context, or to the model's default length (max_new_tokens) where that is
// shorter, as vLLM's chat completions do; any other prompt gets 16, OpenAI's completions default.
int64_t DefaultMaxTokens(const GenerationDefaults& d, bool chat, int64_t prompt_len, int64_t max_model_len);

}  // namespace ls
