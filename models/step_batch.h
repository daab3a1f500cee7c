// StepBatch: what the model needs for one forward step, as plain arrays: the new tokens of every
// sequence in the batch, where each starts in its sequence, its KV block table, which logits to
// return, and the copies inside the cache to make first (the prefix cache's state snapshots).
// Built by the engine; the model knows nothing else of sequences.
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
  // Greedy decoding: each of its logits rows comes back reduced on the backend to a record of
  // kGreedyRecordFloats floats, {argmax id, that id's log-softmax} (the id as a float: exact, as
  // vocabularies stay below kMaxGreedyVocab), instead of vocab floats. The log-probability only
  // where greedy_logprob (else NaN).
  bool greedy = false;
  bool greedy_logprob = false;
};

inline constexpr int64_t kGreedyRecordFloats = 2;
inline constexpr int64_t kMaxGreedyVocab = int64_t{1} << 24;  // every id below it is exact as a float

// A copy inside the cache, made before the step's forward pass: one recurrent-state slot onto
// another (every recurrent layer's state), or one KV block onto another (every layer's per-token rows).
struct CacheCopy {
  enum Kind : uint8_t { kState = 0, kBlock = 1 };
  Kind kind = kState;
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const CacheCopy&) const = default;
};

struct StepBatch {
  std::vector<int32_t> tokens;  // [T] new tokens of all sequences, concatenated in order
  std::vector<StepSequence> seqs;
  std::vector<CacheCopy> copies;  // made in order, before the forward pass
  // A next-token (MTP) layer's second input: the target's final hidden row for each new token,
  // [T, d] in token order (models/decoder_model.h). Empty for every other model; never sent to
  // other ranks (such a layer runs on one process).
  std::vector<float> prev_hidden;

  // Rows of logits Forward returns: Σ over sequences wanting logits of (all_logits ? num_tokens : 1).
  int64_t num_logit_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += logit_rows(s);
    return n;
  }
  // The floats Forward returns for those rows: vocab per row, a greedy sequence's a record each.
  int64_t num_logit_floats(int64_t vocab) const {
    int64_t n = 0;
    for (const auto& s : seqs) n += logit_rows(s) * logit_row_floats(s, vocab);
    return n;
  }
  static int64_t logit_rows(const StepSequence& s) { return !s.want_logits ? 0 : s.all_logits ? s.num_tokens : 1; }
  // The floats of one of a sequence's logits rows as Forward returns it.
  static int64_t logit_row_floats(const StepSequence& s, int64_t vocab) {
    return s.greedy ? kGreedyRecordFloats : vocab;
  }
};

}  // namespace ls
