// DraftProposer: where speculative decoding's draft tokens come from. Before each step the engine
// asks once for every decoding sequence that may speculate; the target model then verifies the
// drafts. A proposer may keep state per sequence (a draft model's KV cache) from one call to the
// next, keyed by the sequence's arrival number, until the engine forgets the sequence.
// Implementations: NgramProposer (engine/ngram_proposer.h), DraftModelProposer
// (engine/draft_model_proposer.h: a draft model, or the checkpoint's own MTP layer, which reads
// the target's final hidden rows that the engine hands over after every step).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace ls {

class Model;

struct SpeculativeConfig {
  int32_t num_speculative_tokens = 0;  // k: tokens proposed per step (0: speculation off)
  int32_t prompt_lookup_min = 1;       // the n-gram lookup's shortest and longest suffix
  int32_t prompt_lookup_max = 4;
  // Set: this model proposes (greedily, from its own KV cache) instead of the n-gram lookup. It must
  // share the target's vocabulary, keep no recurrent state, and outlive the engine. A checkpoint's
  // multi-token-prediction layer (Model::is_next_token_layer) proposes from the target's hidden
  // rows too, on one process only.
  Model* draft_model = nullptr;

  // "ngram", "draft_model" or "mtp", as --speculative_config spells the method.
  const char* method() const;
};

// One sequence's request for a draft.
struct DraftQuery {
  uint64_t seq = 0;                              // the sequence's arrival number (stable while it lives)
  const std::vector<int32_t>* tokens = nullptr;  // its tokens so far, prompt and output
  int32_t max_draft = 0;                         // at most this many tokens
  std::vector<int32_t>* draft = nullptr;         // receives the draft (empty: none this step)
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Fills every query's draft. An error leaves every draft empty (the step runs without them).
  virtual absl::Status Propose(const std::vector<DraftQuery>& queries) = 0;
  // The sequence is gone: whatever the proposer kept for it is released.
  virtual void Forget(uint64_t /*seq*/) {}
  // Runs the largest proposal up to `max_seqs` sequences can ask for, on dummy tokens, so that the
  // proposer's buffers reach their full size before the first request (the engine's warm-up);
  // keeps nothing.
  virtual absl::Status Warmup(int32_t /*max_seqs*/, int32_t /*max_draft*/) { return absl::OkStatus(); }
  // Whether it reads the target's final hidden rows (Model::CaptureHidden). The engine then hands
  // over, after every step, each sequence's rows at positions start_pos .. start_pos + num_rows - 1
  // ([num_rows, d]; rows of rejected draft tokens among them, which the proposer never reads).
  virtual bool wants_hidden() const { return false; }
  virtual void ObserveHidden(uint64_t /*seq*/, int32_t /*start_pos*/, int32_t /*num_rows*/, const float* /*rows*/) {}
};

}  // namespace ls
