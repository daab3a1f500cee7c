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
  if (model->config().vocab_size >= kMaxGreedyVocab)  // its draft tokens come back as greedy records
    return absl::InvalidArgumentError(absl::StrCat("draft model: a vocabulary of ", model->config().vocab_size,
                                                   " tokens is beyond the ", kMaxGreedyVocab, " it may have"));
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(model, num_blocks, block_size, dtype, target_vocab));
}

DraftModelProposer::DraftModelProposer(Model* model, int32_t num_blocks, int32_t block_size, DType dtype,
                                       int64_t target_vocab)
    : model_(model),
      mtp_(model->is_next_token_layer()),
      cache_(model->backend(), model->kv_layout(), num_blocks, block_size, dtype),
      block_size_(block_size),
      target_vocab_(target_vocab) {
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  if (mtp_) model_->CaptureHidden(&step_hidden_);
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

void DraftModelProposer::ObserveHidden(uint64_t seq, int32_t start_pos, int32_t num_rows, const float* rows) {
  if (!mtp_ || num_rows <= 0) return;
  Entry& e = entries_[seq];
  const size_t d = static_cast<size_t>(model_->config().hidden_size);
  const int32_t end = e.hidden_start + static_cast<int32_t>(e.hidden.size() / d);
  // Rows from start_pos on replace what was kept from there (a rejected draft's rows); a gap or an
  // earlier start (a preempted sequence computed again) starts over.
  if (e.hidden.empty() || start_pos < e.hidden_start || start_pos > end) {
    e.hidden.clear();
    e.hidden_start = start_pos;
  }
  e.hidden.resize(static_cast<size_t>(start_pos - e.hidden_start) * d);
  e.hidden.insert(e.hidden.end(), rows, rows + static_cast<size_t>(num_rows) * d);
  if (const size_t kept = e.hidden.size() / d; kept > static_cast<size_t>(max_pending_rows_)) {
    const size_t drop = kept - static_cast<size_t>(max_pending_rows_);
    e.hidden.erase(e.hidden.begin(), e.hidden.begin() + static_cast<int64_t>(drop * d));
    e.hidden_start += static_cast<int32_t>(drop);
  }
}

absl::Status DraftModelProposer::Warmup(int32_t max_seqs, int32_t max_draft) {
  // Dummy sequences under keys no engine gives (arrival numbers count up from 0).
  const int64_t capacity = static_cast<int64_t>(free_.size()) * block_size_;
  const int64_t tokens = std::min<int64_t>(kMaxStepTokens, capacity - static_cast<int64_t>(max_seqs) * max_draft);
  const int32_t seqs = static_cast<int32_t>(std::clamp<int64_t>(tokens, 1, std::max(max_seqs, 1)));
  if (tokens < seqs || max_draft < 1) return absl::OkStatus();
  std::vector<std::vector<int32_t>> ids(seqs), drafts(seqs);
  std::vector<DraftQuery> queries;
  const std::vector<float> zeros(static_cast<size_t>(model_->config().hidden_size) * (tokens / seqs + 1), 0.f);
  for (int32_t i = 0; i < seqs; ++i) {
    ids[i].assign(tokens / seqs + (i < tokens % seqs), 0);
    queries.push_back({~uint64_t{0} - i, &ids[i], max_draft, &drafts[i]});
    // An MTP layer's rows: the target's hidden rows before the last token.
    ObserveHidden(queries.back().seq, 0, static_cast<int32_t>(ids[i].size()) - 1, zeros.data());
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

absl::Status DraftModelProposer::Step(std::vector<Work>& work, const std::vector<std::vector<int32_t>>& feed,
                                      const std::vector<std::vector<float>>& hidden, const std::vector<bool>& want,
                                      std::vector<int32_t>* next) {
  StepBatch batch;
  std::vector<size_t> rows;  // work index of each logits row
  for (size_t i = 0; i < work.size(); ++i) {
    if (feed[i].empty()) continue;
    StepSequence ss;
    ss.num_tokens = static_cast<int32_t>(feed[i].size());
    ss.start_pos = static_cast<int32_t>(work[i].entry->tokens.size());
    ss.block_table = work[i].entry->blocks;
    ss.want_logits = want[i];
    ss.greedy = true;  // a draft token is its row's argmax: the model returns greedy records
    if (want[i]) rows.push_back(i);
    batch.tokens.insert(batch.tokens.end(), feed[i].begin(), feed[i].end());
    if (mtp_) batch.prev_hidden.insert(batch.prev_hidden.end(), hidden[i].begin(), hidden[i].end());
    batch.seqs.push_back(std::move(ss));
  }
  if (batch.seqs.empty()) return absl::OkStatus();
  if (absl::Status st = model_->Forward(batch, cache_, &logits_); !st.ok()) return st;
  const int64_t d = model_->config().hidden_size;
  int64_t row = 0;  // the step's token rows, in batch order
  for (size_t i = 0; i < work.size(); ++i) {
    work[i].entry->tokens.insert(work[i].entry->tokens.end(), feed[i].begin(), feed[i].end());
    row += static_cast<int64_t>(feed[i].size());
    if (mtp_ && !feed[i].empty())
      work[i].last.assign(step_hidden_.begin() + (row - 1) * d, step_hidden_.begin() + row * d);
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t best = static_cast<int64_t>(logits_[r * kGreedyRecordFloats]);
    (*next)[rows[r]] = best < target_vocab_ ? static_cast<int32_t>(best) : -1;
  }
  return absl::OkStatus();
}

absl::Status DraftModelProposer::Propose(const std::vector<DraftQuery>& queries) {
  std::unordered_set<uint64_t> keep;
  for (const DraftQuery& q : queries) keep.insert(q.seq);
  const int64_t max_len = model_->config().max_position_embeddings;
  const size_t d = static_cast<size_t>(model_->config().hidden_size);
  std::vector<Work> work;
  for (const DraftQuery& q : queries) {
    q.draft->clear();
    const int64_t len = static_cast<int64_t>(q.tokens->size());
    if (q.max_draft <= 0 || len == 0 || len + q.max_draft - 1 > max_len) continue;
    if (mtp_ && !entries_.count(q.seq)) continue;  // no hidden row yet
    Entry& e = entries_[q.seq];
    // Keep the cached prefix the sequence still has (a rejected draft token ends it), short of its
    // last token, whose logits give the first draft token. An MTP layer's row j holds token
    // base + j + 1, and it has rows only where the target computed hidden rows.
    int32_t offset = 0;  // the sequence's index of the token in the cache's row 0
    if (mtp_) {
      const int32_t hidden_end = e.hidden_start + static_cast<int32_t>(e.hidden.size() / d);
      if (e.tokens.empty() || e.base + static_cast<int32_t>(e.tokens.size()) < e.hidden_start) {
        if (!e.tokens.empty() || e.base != e.hidden_start) Release(e);
        e.base = e.hidden_start;  // a fresh start, or a gap in the hidden rows
      }
      offset = e.base + 1;
      if (hidden_end < len - 1 || e.base >= len - 1) continue;  // rows through len - 2 needed
    }
    size_t common = 0;
    const size_t limit = std::min(e.tokens.size(), q.tokens->size() - 1 - std::max(offset - 1, 0));
    while (common < limit && e.tokens[common] == (*q.tokens)[common + offset]) ++common;
    e.tokens.resize(common);
    if (mtp_ && e.base + static_cast<int32_t>(common) < e.hidden_start) {
      Release(e);  // its first uncomputed row's hidden row is gone: start again
      e.base = e.hidden_start;
    }
    if (!Reserve(e, len - e.base + q.max_draft - 1, keep)) {
      Forget(q.seq);
      continue;
    }
    work.push_back({&q, &e, {}});
  }
  std::vector<std::vector<int32_t>> feed(work.size());
  std::vector<std::vector<float>> hidden(work.size());
  std::vector<bool> want(work.size());
  std::vector<int32_t> next(work.size(), -1);
  auto fail = [&](const absl::Status& st) {
    for (const Work& w : work) {
      w.query->draft->clear();
      Forget(w.query->seq);
    }
    return st;
  };
  // Catch up: every sequence's uncached tokens, at most kMaxStepTokens per step in all. An MTP
  // layer's position p reads token p + 1 and the target's hidden row p.
  const int32_t shift = mtp_ ? 1 : 0;
  for (;;) {
    int64_t budget = kMaxStepTokens;
    bool any = false;
    for (size_t i = 0; i < work.size(); ++i) {
      const std::vector<int32_t>& tokens = *work[i].query->tokens;
      Entry& e = *work[i].entry;
      const size_t from = static_cast<size_t>(e.base) * shift + e.tokens.size() + shift;
      const size_t n = std::min<size_t>(tokens.size() - from, static_cast<size_t>(std::max<int64_t>(budget, 0)));
      feed[i].assign(tokens.begin() + from, tokens.begin() + from + n);
      if (mtp_) {
        const auto row = e.hidden.begin() + static_cast<int64_t>((from - 1 - e.hidden_start) * d);
        hidden[i].assign(row, row + static_cast<int64_t>(n * d));
      }
      want[i] = n > 0 && from + n == tokens.size();
      budget -= n;
      any |= n > 0;
    }
    if (!any) break;
    if (absl::Status st = Step(work, feed, hidden, want, &next); !st.ok()) return fail(st);
  }
  // The MTP layer's rows from the target are all fed: its hidden rows go, and the chained rows
  // below are not kept.
  std::vector<size_t> caught_up(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    caught_up[i] = work[i].entry->tokens.size();
    if (mtp_) {
      Entry& e = *work[i].entry;
      e.hidden_start = e.base + static_cast<int32_t>(e.tokens.size());
      e.hidden.clear();
    }
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
      if (mtp_) hidden[i] = more ? work[i].last : std::vector<float>();
      want[i] = more;
      next[i] = -1;
      any |= more;
    }
    if (!any) break;
    if (absl::Status st = Step(work, feed, hidden, want, &next); !st.ok()) return fail(st);
    for (size_t i = 0; i < work.size(); ++i)
      if (want[i] && next[i] >= 0) work[i].query->draft->push_back(next[i]);
  }
  if (mtp_)
    for (size_t i = 0; i < work.size(); ++i) work[i].entry->tokens.resize(caught_up[i]);
  return absl::OkStatus();
}

const char* SpeculativeConfig::method() const {
  if (!draft_model) return "ngram";
  return draft_model->is_next_token_layer() ? "mtp" : "draft_model";
}

}  // namespace ls
