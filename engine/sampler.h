// Sampler: turns one sequence's logits into its next token — among the allowed tokens where the
// request names them and never completing a bad word, penalties (repetition on prompt and output, presence and
// frequency on output) after the request's logit bias, then greedy, or temperature, top-k, top-p and min-p followed by
// a draw from the sequence's own random stream (so a seeded request gives the same tokens alone or batched). Logprobs
// are of the model's raw distribution (log-softmax of the logits before logit bias, penalties and temperature), with
// the top-n alternatives. Speculative decoding verifies a proposed (draft) token with the same call: greedy accepts it
// when it is the argmax; sampling draws the token exactly as without a draft (one draw from the sequence's stream) and
// accepts the draft when it is the token drawn — with its probability, and on rejection the token is a draw from the
// rest, the rule for a deterministic draft (as every proposer's is) — so a seeded request gives the same tokens with
// speculation or without, however far each step speculated. A NaN logit is a token that cannot be chosen (its
// log-probability is −∞); a row in which no token can be chosen gives no token (token_id −1), which the engine reports
// as an error rather than make one up.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_params.h"

namespace ls {

struct SampleResult {
  int32_t token_id = -1;  // −1: no token could be chosen (every logit NaN or −∞)
  bool accepted = false;  // the token is the draft passed in
  bool has_logprobs = false;
  TokenLogprob logprob;
};

class Sampler {
 public:
  // `logits` [vocab] is modified in place. `tokens` are the sequence's prompt + output so far.
  // draft >= 0: the proposed token to verify.
  static SampleResult Sample(float* logits, int32_t vocab, const SamplingParams& params,
                             const std::vector<int32_t>& tokens, int32_t num_prompt_tokens, std::mt19937_64* rng,
                             int32_t draft = -1);

  // The same result from a greedy record {argmax id, its log-probability} that the model reduced
  // a row to (StepSequence::greedy), for params that Sample would answer from the argmax alone:
  // greedy, no logit bias or penalties, at most the chosen token's log-probability.
  static SampleResult FromGreedyRecord(const float* record, const SamplingParams& params, int32_t draft = -1);

  // Steps exposed for tests.
  static void ApplyPenalties(float* logits, int32_t vocab, const SamplingParams& p, const std::vector<int32_t>& tokens,
                             int32_t num_prompt_tokens);
  static int32_t Argmax(const float* logits, int32_t vocab);  // ties: lowest id
  // Log-softmax of `logits` [vocab]: `token`'s value and rank and the top_n most likely ids (ties: lowest id).
  static TokenLogprob Logprobs(const float* logits, int32_t vocab, int32_t token, int32_t top_n);
};

}  // namespace ls
