// SamplingParams: how one request turns logits into tokens and when it stops. Plain data,
// validated by Validate() so that every front end rejects the same things with the same words.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ls {

namespace structured {
class CompiledGrammar;
}

struct SamplingParams {
  float temperature = 1.0f;   // 0: greedy
  int32_t top_k = 0;          // 0 or -1: off
  float top_p = 1.0f;         // 1: off
  float min_p = 0.0f;         // 0: off
  float repetition_penalty = 1.0f;  // on prompt and output tokens; 1: off
  float presence_penalty = 0.0f;    // on output tokens
  float frequency_penalty = 0.0f;   // on output tokens
  std::optional<uint64_t> seed;     // same seed, same tokens (alone or batched)
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;           // stop conditions are ignored before this many tokens
  std::vector<std::string> stop;    // stop strings, not included in the output text ...
  bool include_stop_str_in_output = false;  // ... unless this is set (the text ends with the one found)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int32_t> logprobs;  // return the sampled token's logprob and this many alternatives
  // Logprobs of the prompt tokens after the first, each with this many alternatives (delivered
  // with the first output). Every prompt position is then computed: the prefix cache is bypassed.
  std::optional<int32_t> prompt_logprobs;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100]) added to its logit
  std::vector<int32_t> allowed_token_ids;             // non-empty: only these can be chosen (logprobs stay the model's)
  // Banned token sequences (bad_words, tokenized): a sequence's last token is never chosen where
  // the output so far ends with the rest of it (a one-token sequence: never).
  std::vector<std::vector<int32_t>> bad_words_ids;
  bool skip_special_tokens = true;
  // The grammar the output must follow (structured output, structured/), shared by every
  // request with the same constraint; null: free text. The output ends where the grammar does.
  std::shared_ptr<structured::CompiledGrammar> grammar;
  int32_t grammar_state = -1;  // where in it the output starts (after a prefilled reply); −1: its start

  bool greedy() const { return temperature < 1e-5f; }
  // Checks ranges; messages name the field, e.g. "temperature must be >= 0, got -1".
  absl::Status Validate(int64_t vocab_size, int32_t max_logprobs = 20) const;
};

}  // namespace ls
