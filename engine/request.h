// Request and RequestOutput: what a caller hands the Engine and what streams back, as engine
// structs (wire formats are converted at the edge, in server/).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"

namespace ls {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "cancelled", "error", ""

struct Request {
  std::string id;                  // unique among live requests
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int32_t priority = 0;            // lower runs first; FCFS among equals
  // The prefix-cache scope (a hash of the client's cache_salt; 0: none): requests share cached
  // prefixes only with requests of the same salt (engine/block_manager.h, PrefixScope).
  uint64_t cache_salt = 0;
};
// The cache_salt of a salt text: never 0 (none), the same for the same text in every process.
uint64_t CacheSaltHash(std::string_view salt);

struct TokenLogprob {
  int32_t token_id;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;  // alternatives, most likely first
  int32_t rank = 0;                            // 1 + the tokens more likely than token_id (0: not counted)
};

// One streamed update. Token ids and text are deltas since the previous update.
struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  // With params.prompt_logprobs, in the first output only: one entry per prompt token after the
  // first (the logprob of prompt token i + 1 given tokens 0..i).
  std::vector<TokenLogprob> prompt_logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;                // kError: what failed; kCancelled: the server's reason (empty
                                    // when the client cancelled)
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;    // total so far
  int32_t cached_prompt_tokens = 0; // prompt tokens served from the prefix cache
  double queue_seconds = 0;         // final output only: arrival to first scheduled
  double ttft_seconds = 0;          // final output only: arrival to first token (0 if none)
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

// Called on the engine's loop thread for every update; must return quickly and not block.
using OutputCallback = std::function<void(RequestOutput)>;

}  // namespace ls
