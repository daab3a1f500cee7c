// Workload: the requests a benchmark sends — from a JSONL dataset ({"prompt": "..."} or
// {"prompt_ids": [...]} or {"messages": [...]}, optional "max_tokens"), or synthetic prompts of
// random token ids with input/output lengths drawn uniformly around a mean (fixed seed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::bench {

struct BenchRequest {
  std::string prompt;                 // text prompt (may be empty)
  std::vector<int32_t> prompt_ids;    // token-id prompt (used when prompt is empty)
  std::string messages_json;          // chat messages as a JSON array (chat endpoint)
  int32_t max_tokens = 64;
};

struct SyntheticSpec {
  int32_t input_len = 128, output_len = 64;
  double range_ratio = 0.0;  // lengths uniform in [len·(1−r), len·(1+r)]
  int32_t vocab = 4000;      // token ids drawn from [10, vocab)
  uint64_t seed = 0;
};

std::vector<BenchRequest> SyntheticWorkload(const SyntheticSpec& spec, int64_t count);
absl::StatusOr<std::vector<BenchRequest>> LoadJsonl(const std::string& path, int32_t default_max_tokens);

}  // namespace ls::bench
