// Scheduler implementation: small named steps, as the header describes.
#include "engine/scheduler.h"

#include <algorithm>

namespace ls {

Scheduler::Scheduler(SchedulerConfig config, BlockManager* blocks, StateSlots* slots)
    : config_(config), blocks_(blocks), slots_(slots) {}

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
    const int32_t n = std::min(seq->num_uncomputed(), *budget);
    if (n <= 0) continue;
    bool preempted_self = false;
    while (!blocks_->EnsureCapacity(&seq->table, seq->num_computed + n)) {
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
  std::vector<int32_t> running(pools, 0);
  for (const Sequence* r : running_) ++running[r->table.pool];
  const int32_t blocks = (seq.num_computed + n + blocks_->block_size() - 1) / blocks_->block_size();
  int32_t best = -1;
  for (int32_t p = 0; p < pools; ++p) {
    const bool fits = blocks_->num_available(p) >= blocks && (!slots_ || slots_->num_available(p) > 0);
    if (!fits) continue;
    if (best < 0 || running[p] < running[best] ||
        (running[p] == running[best] && blocks_->num_available(p) > blocks_->num_available(best)))
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
    if (seq->table.blocks.empty() && seq->reuse_cached_prefix) {
      seq->num_computed = blocks_->AcquirePrefix(seq->tokens, &seq->table);
      if (seq->num_preemptions == 0) seq->prefix_cached_tokens = seq->num_computed;
    }
    const int32_t n = std::min(seq->num_uncomputed(), *budget);
    if (!blocks_->EnsureCapacity(&seq->table, seq->num_computed + n)) {
      blocks_->Free(&seq->table);
      seq->num_computed = 0;
      break;
    }
    if (slots_ && (seq->state_slot = slots_->Acquire(seq->table.pool)) < 0) {
      blocks_->Free(&seq->table);
      seq->num_computed = 0;
      break;
    }
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
  int32_t budget = config_.max_num_batched_tokens;
  ScheduleRunning(/*decodes=*/true, &budget, &plan);
  ScheduleRunning(/*decodes=*/false, &budget, &plan);
  AdmitWaiting(&budget, &plan);
  return plan;
}

void Scheduler::OnStepDone(const SchedulerPlan& plan) {
  for (const ScheduledSeq& s : plan.items) {
    s.seq->num_computed += s.num_tokens;
    s.seq->tokens_computed_by_model += s.num_tokens;
    blocks_->CommitFullBlocks(s.seq->tokens, s.seq->num_computed, &s.seq->table);
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
