// SamplingParams validation.
#include "engine/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ls {

absl::Status SamplingParams::Validate(int64_t vocab_size, int32_t max_logprobs) const {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!(temperature >= 0.f) || !std::isfinite(temperature)) return bad("temperature must be >= 0, got ", temperature);
  if (top_k < -1) return bad("top_k must be -1, 0 (off) or positive, got ", top_k);
  if (!(top_p > 0.f && top_p <= 1.f)) return bad("top_p must be in (0, 1], got ", top_p);
  if (!(min_p >= 0.f && min_p <= 1.f)) return bad("min_p must be in [0, 1], got ", min_p);
  if (!(repetition_penalty > 0.f) || !std::isfinite(repetition_penalty))
    return bad("repetition_penalty must be > 0, got ", repetition_penalty);
  if (!(presence_penalty >= -2.f && presence_penalty <= 2.f))
    return bad("presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (!(frequency_penalty >= -2.f && frequency_penalty <= 2.f))
    return bad("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  if (max_tokens < 1) return bad("max_tokens must be at least 1, got ", max_tokens);
  if (min_tokens < 0 || min_tokens > max_tokens)
    return bad("min_tokens must be in [0, max_tokens = ", max_tokens, "], got ", min_tokens);
  for (const auto& s : stop)
    if (s.empty()) return bad("stop strings must not be empty");
  if (stop.size() > 16) return bad("stop: at most 16 stop strings are allowed, got ", stop.size());
  for (int32_t id : stop_token_ids)
    if (id < 0 || id >= vocab_size) return bad("stop_token_ids: id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
  if (logprobs && (*logprobs < 0 || *logprobs > max_logprobs))
    return bad("logprobs must be in [0, ", max_logprobs, "], got ", *logprobs);
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > max_logprobs))
    return bad("prompt_logprobs must be in [0, ", max_logprobs, "], got ", *prompt_logprobs);
  for (const auto& w : bad_words_ids) {
    if (w.empty()) return bad("bad_words: a word of no tokens");
    for (int32_t id : w)
      if (id < 0 || id >= vocab_size)
        return bad("bad_words: token id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
  }
  for (int32_t id : allowed_token_ids)
    if (id < 0 || id >= vocab_size)
      return bad("allowed_token_ids: id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
  for (auto [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) return bad("logit_bias: token id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
    if (!(bias >= -100.f && bias <= 100.f)) return bad("logit_bias: the bias of token ", id, " must be in [-100, 100], got ", bias);
  }
  return absl::OkStatus();
}

}  // namespace ls
