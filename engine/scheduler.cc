// Scheduler implementation: small named steps, as the header describes.
#include "engine/scheduler.h"

#include <algorithm>
#include <limits>

namespace ls {

Scheduler::Scheduler(SchedulerConfig config, BlockManager* blocks, StateSlots* slots, StateSnapshots* snapshots)
    : config_(config), blocks_(blocks), slots_(slots), snapshots_(slots ? snapshots : nullptr) {}

bool Scheduler::EnsureCapacity(Sequence* seq, int32_t num_tokens) {
  while (!blocks_->EnsureCapacity(&seq->table, num_tokens))
    if (!snapshots_ || !snapshots_->EvictBlockHolder(seq->table.pool)) return false;
  return true;
}

std::optional<SnapshotHit> Scheduler::AcquireCachedPrefix(Sequence* seq) {
  seq->branch_point = 0;
  if (!snapshots_) {
    seq->num_computed = blocks_->AcquirePrefix(seq->tokens, &seq->table);
    return std::nullopt;
  }
  const int32_t n = seq->num_tokens(), bs = blocks_->block_size();
  const PrefixScope scope = seq->table.scope();
  const std::vector<uint64_t> cached = blocks_->CachedPrefix(seq->tokens, scope);
  // Where this prompt leaves what is cached: a snapshot there lets the next prompt that shares as
  // much resume there (one within the first block is not worth a slot).
  const int32_t branch =
      std::max(blocks_->CommonPrefix(seq->tokens, scope, cached), snapshots_->CommonPrefix(seq->tokens, scope, cached));
  if (branch >= bs) seq->branch_point = branch;
  // The last token's logits are always computed.
  std::optional<SnapshotHit> hit = snapshots_->Find(seq->tokens, scope, cached, n - 1);
  const int32_t at = hit ? hit->position : 0;
  blocks_->AcquireBlocks(cached, at / bs, &seq->table);
  blocks_->RecordLookup(n, at);
  seq->num_computed = at;  // a partial last block comes with the table's growth, and a copy
  return hit;
}

void Scheduler::AddRestoreCopies(const Sequence& seq, const SnapshotHit& hit, SchedulerPlan* plan) const {
  const int32_t pool = seq.table.pool;
  plan->copies.push_back({pool, {CacheCopy::kState, hit.slot, LocalSlot(seq)}});
  if (hit.block >= 0)
    plan->copies.push_back(
        {pool, {CacheCopy::kBlock, LocalBlock(hit.block), LocalBlock(seq.table.blocks[hit.position / blocks_->block_size()])}});
}

int32_t Scheduler::ToNextSnapshot(const Sequence& seq) const {
  if (!snapshots_ || seq.num_computed >= seq.num_prompt_tokens) return std::numeric_limits<int32_t>::max();
  int32_t next = seq.num_prompt_tokens;
  if (const int32_t iv = snapshots_->interval(); iv > 0) next = std::min(next, (seq.num_computed / iv + 1) * iv);
  if (seq.branch_point > seq.num_computed) next = std::min(next, seq.branch_point);
  return next - seq.num_computed;
}

void Scheduler::TakeSnapshot(Sequence* seq) {
  const int32_t p = seq->num_computed, iv = snapshots_->interval();
  if (p <= 0 || p > seq->num_prompt_tokens) return;
  if (p != seq->num_prompt_tokens && p != seq->branch_point && (iv == 0 || p % iv != 0)) return;
  const int32_t slot = snapshots_->Take(seq->tokens, p, seq->table);
  if (slot >= 0) pending_copies_.push_back({seq->table.pool, {CacheCopy::kState, LocalSlot(*seq), slot}});
}

void Scheduler::ReleaseSlot(Sequence* seq) {
  if (slots_ && seq->state_slot >= 0) slots_->Release(seq->state_slot);
  seq->state_slot = -1;
}

void Scheduler::Add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  waiting_.insert(seq);
}

void Scheduler::Preempt(Sequence* seq, SchedulerPlan* plan) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  blocks_->Free(&seq->table);
  ReleaseSlot(seq);  // recomputed from the first token, its state is rebuilt
  seq->num_computed = 0;
  seq->status = SeqStatus::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  waiting_.insert(seq);
  plan->preempted.push_back(seq);
}

// Schedules the running sequences that decode (decodes == true) or are mid-prefill.
void Scheduler::ScheduleRunning(bool decodes, int32_t* budget, SchedulerPlan* plan) {
  for (size_t i = 0; i < running_.size() && *budget > 0; ++i) {
    Sequence* seq = running_[i];
    const bool is_decode = seq->num_uncomputed() == 1 && seq->num_computed >= seq->num_prompt_tokens;
    if (is_decode != decodes) continue;
    const int32_t n = std::min({seq->num_uncomputed(), *budget, ToNextSnapshot(*seq)});
    if (n <= 0) continue;
    bool preempted_self = false;
    while (!EnsureCapacity(seq, seq->num_computed + n)) {
      if (!decodes) return;  // prefills wait for blocks rather than evicting others
      Sequence* victim = NewestRunningIn(seq->table.pool);
      Preempt(victim, plan);
      if (victim == seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // it was the newest: nothing after it remains
    plan->items.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    plan->num_tokens += n;
    *budget -= n;
  }
}

Sequence* Scheduler::NewestRunningIn(int32_t pool) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if ((*it)->table.pool == pool) return *it;
  return nullptr;  // not reached: the caller itself runs in the pool
}

int32_t Scheduler::ChoosePool(const Sequence& seq, int32_t n) const {
  const int32_t pools = blocks_->num_pools();
  if (pools == 1) return 0;
  std::vector<int32_t> running(pools, 0), cached(pools, 0);
  for (const Sequence* r : running_) ++running[r->table.pool];
  // A pool that caches a longer start of the prompt serves more of it (each pool's cache is its own).
  if (seq.reuse_cached_prefix && seq.table.blocks.empty())
    for (int32_t p = 0; p < pools; ++p)
      cached[p] = static_cast<int32_t>(blocks_->CachedPrefix(seq.tokens, {p, seq.table.salt}).size());
  const int32_t blocks = (seq.num_computed + n + blocks_->block_size() - 1) / blocks_->block_size();
  int32_t best = -1;
  for (int32_t p = 0; p < pools; ++p) {
    const bool fits = Available(p) >= blocks && (!slots_ || slots_->num_available(p) > 0);
    if (!fits) continue;
    if (best < 0 || cached[p] > cached[best] ||
        (cached[p] == cached[best] &&
         (running[p] < running[best] || (running[p] == running[best] && Available(p) > Available(best)))))
      best = p;
  }
  return best >= 0 ? best : 0;  // none has room: admission stops at this sequence anyway
}

void Scheduler::AdmitWaiting(int32_t* budget, SchedulerPlan* plan) {
  while (!waiting_.empty() && *budget > 0 && static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = *waiting_.begin();
    // A sequence preempted in this very step waits for the next one.
    if (std::find(plan->preempted.begin(), plan->preempted.end(), seq) != plan->preempted.end()) break;
    if (seq->table.blocks.empty()) seq->table.pool = ChoosePool(*seq, std::min(seq->num_uncomputed(), *budget));
    std::optional<SnapshotHit> hit;
    if (seq->table.blocks.empty() && seq->reuse_cached_prefix) {
      hit = AcquireCachedPrefix(seq);
      if (seq->num_preemptions == 0) seq->prefix_cached_tokens = seq->num_computed;
    }
    const int32_t n = std::min({seq->num_uncomputed(), *budget, ToNextSnapshot(*seq)});
    if (!EnsureCapacity(seq, seq->num_computed + n)) {
      blocks_->Free(&seq->table);
      seq->num_computed = 0;
      break;
    }
    if (slots_ && (seq->state_slot = slots_->Acquire(seq->table.pool)) < 0) {
      blocks_->Free(&seq->table);
      seq->num_computed = 0;
      break;
    }
    if (hit) AddRestoreCopies(*seq, *hit, plan);
    waiting_.erase(waiting_.begin());
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    plan->items.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    plan->num_tokens += n;
    *budget -= n;
  }
}

SchedulerPlan Scheduler::Schedule() {
  SchedulerPlan plan;
  plan.copies = std::move(pending_copies_);  // snapshots taken before any restore reads them
  pending_copies_.clear();
  int32_t budget = config_.max_num_batched_tokens;
  ScheduleRunning(/*decodes=*/true, &budget, &plan);
  AddDrafts(&budget, &plan);
  ScheduleRunning(/*decodes=*/false, &budget, &plan);
  AdmitWaiting(&budget, &plan);
  if (plan.empty()) std::swap(pending_copies_, plan.copies);  // no step runs: they wait for the next
  return plan;
}

void Scheduler::AddDrafts(int32_t* budget, SchedulerPlan* plan) {
  // After every decode has its token (and whatever preemption that took): drafts only use what is
  // left, so they never cost another sequence its place.
  for (ScheduledSeq& item : plan->items) {
    Sequence* seq = item.seq;
    const int32_t d = std::min(static_cast<int32_t>(seq->draft.size()), *budget);
    if (d <= 0 || !blocks_->EnsureCapacity(&seq->table, seq->num_computed + item.num_tokens + d)) continue;
    item.num_tokens += d;
    item.num_draft = d;
    plan->num_tokens += d;
    *budget -= d;
  }
}

void Scheduler::AcceptDraftToken(Sequence* seq) {
  ++seq->num_computed;
  blocks_->CommitFullBlocks(seq->tokens, seq->num_computed, &seq->table);
}

void Scheduler::RecomputeLast(Sequence* seq, int32_t n) { seq->num_computed -= std::min(n, seq->num_computed); }

void Scheduler::OnStepDone(const SchedulerPlan& plan) {
  for (const ScheduledSeq& s : plan.items) {
    s.seq->num_computed += s.num_tokens - s.num_draft;
    s.seq->tokens_computed_by_model += s.num_tokens;
    blocks_->CommitFullBlocks(s.seq->tokens, s.seq->num_computed, &s.seq->table);
    if (snapshots_) TakeSnapshot(s.seq);
  }
}

void Scheduler::Remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  waiting_.erase(seq);
  blocks_->Free(&seq->table);
  ReleaseSlot(seq);
  seq->status = SeqStatus::kFinished;
}

}  // namespace ls
