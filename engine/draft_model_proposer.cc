// DraftModelProposer implementation: per-sequence entries over a free list of blocks, a catch-up
// pass in bounded steps, then greedy one-token steps.
#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/model.h"

namespace ls {

absl::StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(Model* model, int32_t num_blocks,
                                                                               int32_t block_size, DType dtype,
                                                                               int64_t target_vocab) {
  if (KvCache::BytesPerStateSlot(model->kv_layout()) > 0)
    return absl::InvalidArgumentError(
        absl::StrCat("draft model (", model->config().family,
                     ") has recurrent (linear-attention) layers, whose state a rejected draft token would leave "
                     "changed; use a draft model with attention layers only"));
  if (num_blocks < 1 || block_size < 1)
    return absl::InvalidArgumentError(absl::StrCat("draft model: no room for its KV cache (", num_blocks, " blocks)"));
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(model, num_blocks, block_size, dtype, target_vocab));
}

DraftModelProposer::DraftModelProposer(Model* model, int32_t num_blocks, int32_t block_size, DType dtype,
                                       int64_t target_vocab)
    : model_(model),
      cache_(model->backend(), model->kv_layout(), num_blocks, block_size, dtype),
      block_size_(block_size),
      target_vocab_(target_vocab) {
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void DraftModelProposer::Release(Entry& e) {
  free_.insert(free_.end(), e.blocks.begin(), e.blocks.end());
  e.blocks.clear();
  e.tokens.clear();
}

void DraftModelProposer::Forget(uint64_t seq) {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return;
  Release(it->second);
  entries_.erase(it);
}

absl::Status DraftModelProposer::Warmup(int32_t max_seqs, int32_t max_draft) {
  // Dummy sequences under keys no engine gives (arrival numbers count up from 0).
  const int64_t capacity = static_cast<int64_t>(free_.size()) * block_size_;
  const int64_t tokens = std::min<int64_t>(kMaxStepTokens, capacity - static_cast<int64_t>(max_seqs) * max_draft);
  const int32_t seqs = static_cast<int32_t>(std::clamp<int64_t>(tokens, 1, std::max(max_seqs, 1)));
  if (tokens < seqs || max_draft < 1) return absl::OkStatus();
  std::vector<std::vector<int32_t>> ids(seqs), drafts(seqs);
  std::vector<DraftQuery> queries;
  for (int32_t i = 0; i < seqs; ++i) {
    ids[i].assign(tokens / seqs + (i < tokens % seqs), 0);
    queries.push_back({~uint64_t{0} - i, &ids[i], max_draft, &drafts[i]});
  }
  const absl::Status st = Propose(queries);
  for (const DraftQuery& q : queries) Forget(q.seq);
  return st;
}

bool DraftModelProposer::Reserve(Entry& e, int64_t tokens, const std::unordered_set<uint64_t>& keep) {
  const size_t need = static_cast<size_t>((tokens + block_size_ - 1) / block_size_);
  if (e.blocks.size() >= need) return true;
  if (free_.size() < need - e.blocks.size())
    for (auto it = entries_.begin(); it != entries_.end() && free_.size() < need - e.blocks.size();) {
      if (keep.count(it->first)) {
        ++it;
        continue;
      }
      Release(it->second);
      it = entries_.erase(it);
    }
  if (free_.size() < need - e.blocks.size()) return false;
  while (e.blocks.size() < need) {
    e.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

absl::Status DraftModelProposer::Step(const std::vector<Work>& work, const std::vector<std::vector<int32_t>>& feed,
                                      const std::vector<bool>& want, std::vector<int32_t>* next) {
  StepBatch batch;
  std::vector<size_t> rows;  // work index of each logits row
  for (size_t i = 0; i < work.size(); ++i) {
    if (feed[i].empty()) continue;
    StepSequence ss;
    ss.num_tokens = static_cast<int32_t>(feed[i].size());
    ss.start_pos = static_cast<int32_t>(work[i].entry->tokens.size());
    ss.block_table = work[i].entry->blocks;
    ss.want_logits = want[i];
    if (want[i]) rows.push_back(i);
    batch.tokens.insert(batch.tokens.end(), feed[i].begin(), feed[i].end());
    batch.seqs.push_back(std::move(ss));
  }
  if (batch.seqs.empty()) return absl::OkStatus();
  if (absl::Status st = model_->Forward(batch, cache_, &logits_); !st.ok()) return st;
  for (size_t i = 0; i < work.size(); ++i)
    work[i].entry->tokens.insert(work[i].entry->tokens.end(), feed[i].begin(), feed[i].end());
  const int64_t V = model_->config().vocab_size;
  for (size_t r = 0; r < rows.size(); ++r) {
    const float* row = logits_.data() + static_cast<int64_t>(r) * V;
    const int64_t best = std::max_element(row, row + V) - row;
    (*next)[rows[r]] = best < target_vocab_ ? static_cast<int32_t>(best) : -1;
  }
  return absl::OkStatus();
}

absl::Status DraftModelProposer::Propose(const std::vector<DraftQuery>& queries) {
  std::unordered_set<uint64_t> keep;
  for (const DraftQuery& q : queries) keep.insert(q.seq);
  const int64_t max_len = model_->config().max_position_embeddings;
  std::vector<Work> work;
  for (const DraftQuery& q : queries) {
    q.draft->clear();
    const int64_t len = static_cast<int64_t>(q.tokens->size());
    if (q.max_draft <= 0 || len == 0 || len + q.max_draft - 1 > max_len) continue;
    Entry& e = entries_[q.seq];
    // Keep the cached prefix the sequence still has (a rejected draft token ends it), short of its
    // last token, whose logits give the first draft token.
    size_t common = 0;
    const size_t limit = std::min(e.tokens.size(), q.tokens->size() - 1);
    while (common < limit && e.tokens[common] == (*q.tokens)[common]) ++common;
    e.tokens.resize(common);
    if (!Reserve(e, len + q.max_draft - 1, keep)) {
      Forget(q.seq);
      continue;
    }
    work.push_back({&q, &e});
  }
  std::vector<std::vector<int32_t>> feed(work.size());
  std::vector<bool> want(work.size());
  std::vector<int32_t> next(work.size(), -1);
  auto fail = [&](const absl::Status& st) {
    for (const Work& w : work) {
      w.query->draft->clear();
      Forget(w.query->seq);
    }
    return st;
  };
  // Catch up: every sequence's uncached tokens, at most kMaxStepTokens per step in all.
  for (;;) {
    int64_t budget = kMaxStepTokens;
    bool any = false;
    for (size_t i = 0; i < work.size(); ++i) {
      const std::vector<int32_t>& tokens = *work[i].query->tokens;
      const size_t from = work[i].entry->tokens.size();
      const size_t n = std::min<size_t>(tokens.size() - from, static_cast<size_t>(std::max<int64_t>(budget, 0)));
      feed[i].assign(tokens.begin() + from, tokens.begin() + from + n);
      want[i] = n > 0 && from + n == tokens.size();
      budget -= n;
      any |= n > 0;
    }
    if (!any) break;
    if (absl::Status st = Step(work, feed, want, &next); !st.ok()) return fail(st);
  }
  // Then one token at a time, each sequence until its draft is long enough or leaves the vocabulary.
  for (size_t i = 0; i < work.size(); ++i)
    if (next[i] >= 0) work[i].query->draft->push_back(next[i]);
  for (;;) {
    bool any = false;
    for (size_t i = 0; i < work.size(); ++i) {
      const std::vector<int32_t>& draft = *work[i].query->draft;
      const bool more = next[i] >= 0 && static_cast<int32_t>(draft.size()) < work[i].query->max_draft;
      feed[i].assign(more ? 1 : 0, more ? draft.back() : 0);
      want[i] = more;
      next[i] = -1;
      any |= more;
    }
    if (!any) break;
    if (absl::Status st = Step(work, feed, want, &next); !st.ok()) return fail(st);
    for (size_t i = 0; i < work.size(); ++i)
      if (want[i] && next[i] >= 0) work[i].query->draft->push_back(next[i]);
  }
  return absl::OkStatus();
}

}  // namespace ls
