// Scheduler: iteration-level continuous batching. Each step it takes the running sequences that
// decode first, then running prefills and then waiting sequences (priority, then FCFS) in chunks
// within the token budget, capped by the number of sequences. When KV blocks run out for a
// decode, the newest running sequence is preempted (its blocks freed; it is recomputed later).
// With KV blocks in several pools (one per rank of a group of processes), a sequence is admitted
// into the pool with the fewest running sequences that has room for it, keeps that pool while it
// runs, and a decode short of blocks preempts the newest sequence of its own pool.
// Returns a plan; knows nothing of kernels or models. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine/state_slots.h"

namespace ls {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
};

struct ScheduledSeq {
  Sequence* seq;
  int32_t num_tokens;  // tokens to compute this step, starting at seq->num_computed
  bool sample;         // the step reaches the end of the sequence: sample its next token
};

struct SchedulerPlan {
  std::vector<ScheduledSeq> items;  // decodes first, then prefill chunks
  std::vector<Sequence*> preempted;
  int32_t num_tokens = 0;
  bool empty() const { return items.empty(); }
};

class Scheduler {
 public:
  // `slots` (null for models without recurrent state) gives every running sequence a state slot.
  Scheduler(SchedulerConfig config, BlockManager* blocks, StateSlots* slots = nullptr);

  // Queues a sequence (status kWaiting, empty block table).
  void Add(Sequence* seq);
  SchedulerPlan Schedule();
  // After the model ran the plan: advances each sequence's computed count and commits its full
  // blocks to the prefix cache. Sampled tokens are appended by the caller afterwards.
  void OnStepDone(const SchedulerPlan& plan);
  // Removes a sequence wherever it is and frees its blocks (finish, cancel, error).
  void Remove(Sequence* seq);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }

 private:
  struct WaitingOrder {
    bool operator()(const Sequence* a, const Sequence* b) const {
      return a->priority != b->priority ? a->priority < b->priority : a->arrival < b->arrival;
    }
  };
  void Preempt(Sequence* seq, SchedulerPlan* plan);
  // The pool for a waiting sequence about to be admitted with `n` uncomputed tokens this step.
  int32_t ChoosePool(const Sequence& seq, int32_t n) const;
  // The newest running sequence whose blocks are in `pool`.
  Sequence* NewestRunningIn(int32_t pool) const;
  void ReleaseSlot(Sequence* seq);
  void ScheduleRunning(bool decodes, int32_t* budget, SchedulerPlan* plan);
  void AdmitWaiting(int32_t* budget, SchedulerPlan* plan);

  SchedulerConfig config_;
  BlockManager* blocks_;
  StateSlots* slots_;
  std::set<Sequence*, WaitingOrder> waiting_;
  std::vector<Sequence*> running_;  // admission order: newest at the back
  int64_t num_preemptions_ = 0;
};

}  // namespace ls
