// Sequence: the scheduler's view of one request — its tokens (prompt then output), how many
// have their KV computed, its block table, priority and arrival order. The engine keeps the
// rest of a request's state (sampling, detokenization, callbacks) beside it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/block_manager.h"

namespace ls {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  uint64_t arrival = 0;   // monotonically increasing admission number (FCFS order)
  int32_t priority = 0;   // lower runs first
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  int32_t num_prompt_tokens = 0;
  int32_t num_computed = 0;     // tokens whose KV is in the cache
  BlockTable table;
  SeqStatus status = SeqStatus::kWaiting;
  int32_t num_preemptions = 0;
  int64_t tokens_computed_by_model = 0;  // KV actually computed (excludes prefix-cache hits)
  int32_t prefix_cached_tokens = 0;      // prompt tokens found in the prefix cache on first admission
  int32_t state_slot = -1;  // its recurrent-state slot while running (models with KDA layers)
  int32_t branch_point = 0;  // where its prompt leaves every cached prefix (state snapshots are taken there)
  // Speculative decoding: tokens proposed to follow `tokens`, set before each schedule while the
  // sequence decodes; not part of `tokens` until verified.
  std::vector<int32_t> draft;
  bool reuse_cached_prefix = true;       // false: every prompt token is computed (prompt logprobs need them)

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace ls
