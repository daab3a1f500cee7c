// DraftModelProposer: speculative decoding's draft from a smaller model with the target's
// vocabulary. It keeps a KV cache of its own with each sequence's tokens as far as it has computed
// them; per call it first catches every queried sequence up (the tokens the target accepted or
// sampled since, or a whole prompt, in steps of at most kMaxStepTokens), then runs k - 1 batched
// one-token steps, taking the draft model's greedy choice each time. Rejected draft tokens are
// dropped by comparing its tokens with the sequence's: its cache keeps only the common prefix
// (later rows are overwritten). When its blocks run out it drops the sequences not queried in
// that call, then gives up on the drafts that still do not fit.
#pragma once

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

  // Blocks not held by any sequence (for tests).
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // in the draft cache, positions 0..size-1
    std::vector<int32_t> blocks;
  };
  // One sequence being served in this call.
  struct Work {
    const DraftQuery* query;
    Entry* entry;
  };

  DraftModelProposer(Model* model, int32_t num_blocks, int32_t block_size, DType dtype, int64_t target_vocab);
  // Gives `e` blocks for `tokens` positions, dropping sequences outside `keep` when short; false
  // when they still do not fit.
  bool Reserve(Entry& e, int64_t tokens, const std::unordered_set<uint64_t>& keep);
  void Release(Entry& e);
  // One forward step over `work`'s sequences: each feeds `feed[i]` new tokens (its entry's tokens
  // past its cached length, appended to it after the step); `want[i]` asks for its greedy next
  // token in (*next)[i], -1 when that is not a token of the target's vocabulary.
  absl::Status Step(const std::vector<Work>& work, const std::vector<std::vector<int32_t>>& feed,
                    const std::vector<bool>& want, std::vector<int32_t>* next);

  Model* model_;
  KvCache cache_;
  int32_t block_size_;
  int64_t target_vocab_;
  std::vector<int32_t> free_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::vector<float> logits_;
};

}  // namespace ls
