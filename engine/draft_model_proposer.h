// DraftModelProposer: speculative decoding's draft from a smaller model with the target's
// vocabulary. It keeps a KV cache of its own with each sequence's tokens as far as it has computed
// them; per call it first catches every queried sequence up (the tokens the target accepted or
// sampled since, or a whole prompt, in steps of at most kMaxStepTokens), then runs k - 1 batched
// one-token steps, taking the draft model's greedy choice each time. Rejected draft tokens are
// dropped by comparing its tokens with the sequence's: its cache keeps only the common prefix
// (later rows are overwritten). When its blocks run out it drops the sequences not queried in
// that call, then gives up on the drafts that still do not fit.
//
// A checkpoint's multi-token-prediction (MTP) layer drafts the same way, one row per position:
// row p reads the target's final hidden row h_p (handed over by ObserveHidden after each target
// step) and the token t_{p+1}, and predicts t_{p+2}. Its cache's row j is position base + j, and
// its tokens are t_{base+1}, t_{base+2}, ...: the catch-up feeds the rows whose next token the
// sequence has and whose hidden row the target has computed, and each chained step feeds the last
// draft token with the layer's own hidden output. Chained rows are not kept (a later catch-up
// computes them again from the target's rows). A sequence whose first positions the target never
// computed (a prefix-cache hit) starts its rows at the first hidden row there is: RoPE scores
// depend only on the distance between positions, so a later start only shortens the context. For
// the same reason a sequence keeps at most max_pending_rows() hidden rows not yet fed (a long
// prompt's last ones), which bounds the memory they take before its first draft.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/draft_proposer.h"
#include "models/kv_cache.h"

namespace ls {

class DraftModelProposer : public DraftProposer {
 public:
  static constexpr int32_t kMaxStepTokens = 2048;

  // `model` keeps no recurrent state (InvalidArgument otherwise). Its cache holds num_blocks
  // blocks of block_size tokens in `dtype`. Tokens it proposes at or past `target_vocab` end a draft.
  static absl::StatusOr<std::unique_ptr<DraftModelProposer>> Create(Model* model, int32_t num_blocks,
                                                                    int32_t block_size, DType dtype,
                                                                    int64_t target_vocab);

  absl::Status Propose(const std::vector<DraftQuery>& queries) override;
  void Forget(uint64_t seq) override;
  // A catch-up of kMaxStepTokens tokens (or what the cache holds) over up to max_seqs sequences,
  // then their one-token steps.
  absl::Status Warmup(int32_t max_seqs, int32_t max_draft) override;
  bool wants_hidden() const override { return mtp_; }
  void ObserveHidden(uint64_t seq, int32_t start_pos, int32_t num_rows, const float* rows) override;

  // Blocks not held by any sequence (for tests).
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }
  // MTP: the most hidden rows a sequence keeps before they are fed (default kMaxStepTokens).
  int32_t max_pending_rows() const { return max_pending_rows_; }
  void set_max_pending_rows(int32_t rows) { max_pending_rows_ = std::max(rows, 1); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // in the draft cache, rows 0..size-1
    std::vector<int32_t> blocks;
    // MTP: the position of row 0, and the target's hidden rows not yet fed, from hidden_start.
    int32_t base = 0;
    int32_t hidden_start = 0;
    std::vector<float> hidden;
  };
  // One sequence being served in this call.
  struct Work {
    const DraftQuery* query;
    Entry* entry;
    std::vector<float> last;  // MTP: the layer's hidden output of its last fed row [d]
  };

  DraftModelProposer(Model* model, int32_t num_blocks, int32_t block_size, DType dtype, int64_t target_vocab);
  // Gives `e` blocks for `tokens` positions, dropping sequences outside `keep` when short; false
  // when they still do not fit.
  bool Reserve(Entry& e, int64_t tokens, const std::unordered_set<uint64_t>& keep);
  void Release(Entry& e);
  // One forward step over `work`'s sequences: each feeds `feed[i]` new tokens (its entry's tokens
  // past its cached length, appended to it after the step); `want[i]` asks for its greedy next
  // token in (*next)[i], -1 when that is not a token of the target's vocabulary. An MTP layer
  // reads `hidden[i]` ([feed[i].size(), d]) beside the tokens and leaves its last row's hidden
  // output in work[i].last.
  absl::Status Step(std::vector<Work>& work, const std::vector<std::vector<int32_t>>& feed,
                    const std::vector<std::vector<float>>& hidden, const std::vector<bool>& want,
                    std::vector<int32_t>* next);

  Model* model_;
  bool mtp_;  // model_ is a multi-token-prediction layer
  KvCache cache_;
  int32_t block_size_;
  int64_t target_vocab_;
  std::vector<int32_t> free_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::vector<float> logits_;       // a step's greedy records (StepSequence::greedy)
  std::vector<float> step_hidden_;  // MTP: the layer's hidden output of a step [T, d]
  int32_t max_pending_rows_ = kMaxStepTokens;
};

}  // namespace ls
