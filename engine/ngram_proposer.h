// NgramProposer: speculative decoding's draft from the sequence itself (prompt lookup): the longest
// n-gram ending the sequence (n from max_n down to min_n) that occurred before is looked up, and
// the tokens that followed its latest earlier occurrence are proposed. No model; pure function.
#pragma once

#include <cstdint>
#include <vector>

namespace ls {

struct NgramConfig {
  int32_t num_speculative_tokens = 0;  // k: tokens proposed per step (0: speculation off)
  int32_t min_n = 1;                   // prompt_lookup_min
  int32_t max_n = 4;                   // prompt_lookup_max
};

// Up to `k` tokens to follow `tokens`; empty when no n-gram of the configured sizes recurs.
std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& tokens, const NgramConfig& config, int32_t k);

}  // namespace ls
