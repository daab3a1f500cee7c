// StepBatch: what the model needs for one forward step, as plain arrays: the new tokens of every
// sequence in the batch, where each starts in its sequence, its KV block table, and which logits
// to return. Built by the engine; the model knows nothing else of sequences.
#pragma once

#include <cstdint>
#include <vector>

namespace ls {

struct StepSequence {
  int32_t num_tokens = 0;  // new tokens this step
  int32_t start_pos = 0;   // tokens of this sequence already in the KV cache
  std::vector<int32_t> block_table;  // physical KV block per logical block, covering start_pos + num_tokens
  bool all_logits = false;  // logits for every new token (else only the last one)
  bool want_logits = true;  // false: no logits at all (a prefill chunk that does not end the prompt)
  int32_t state_slot = -1;  // the sequence's recurrent-state slot (models with KDA layers)
};

struct StepBatch {
  std::vector<int32_t> tokens;  // [T] new tokens of all sequences, concatenated in order
  std::vector<StepSequence> seqs;

  // Rows of logits Forward returns: Σ over sequences wanting logits of (all_logits ? num_tokens : 1).
  int64_t num_logit_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += !s.want_logits ? 0 : s.all_logits ? s.num_tokens : 1;
    return n;
  }
};

}  // namespace ls
