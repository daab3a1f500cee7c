// Scheduler: iteration-level continuous batching. Each step it takes the running sequences that
// decode first, then running prefills and then waiting sequences (priority, then FCFS) in chunks
// within the token budget, capped by the number of sequences. When KV blocks run out for a
// decode, the newest running sequence is preempted (its blocks freed; it is recomputed later).
// With KV blocks in several pools (one per rank of a group of processes), a sequence is admitted
// into the pool that caches the longest start of its prompt, then the one with the fewest running
// sequences, among those with room for it; keeps that pool while it
// runs, and a decode short of blocks preempts the newest sequence of its own pool.
// A decoding sequence with a draft (speculative decoding) computes its last token and the draft
// in one step when, after every decode has its token, the budget and the free blocks allow; else
// its last token alone.
// For models with recurrent state (given StateSnapshots), a waiting sequence resumes from the
// deepest state snapshot of its prompt, prefill chunks end at the positions where snapshots are
// due (every interval, the prompt's branch point from the cached prefixes, its end), and the plan
// carries the cache copies that take and restore snapshots. Snapshots holding KV blocks give them
// back before a running sequence is preempted or a waiting one stalls for blocks.
// Returns a plan; knows nothing of kernels or models. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine/state_slots.h"
#include "engine/state_snapshots.h"
#include "models/step_batch.h"

namespace ls {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
};

struct ScheduledSeq {
  Sequence* seq;
  int32_t num_tokens;  // tokens to compute this step, starting at seq->num_computed (drafts included)
  bool sample;         // the step reaches the end of the sequence: sample its next token
  int32_t num_draft = 0;  // of num_tokens, the sequence's draft tokens (after its last token)
};

// A cache copy for the cache of one pool, in that cache's own block and slot numbers.
struct PoolCopy {
  int32_t pool = 0;
  CacheCopy copy;
};

struct SchedulerPlan {
  std::vector<ScheduledSeq> items;  // decodes first, then prefill chunks
  std::vector<PoolCopy> copies;     // to make before the step, in order
  std::vector<Sequence*> preempted;
  int32_t num_tokens = 0;
  bool empty() const { return items.empty(); }
};

class Scheduler {
 public:
  // `slots` (null for models without recurrent state) gives every running sequence a state slot;
  // `snapshots` (null: no prefix caching for such models) keeps their states at cached prefixes.
  Scheduler(SchedulerConfig config, BlockManager* blocks, StateSlots* slots = nullptr,
            StateSnapshots* snapshots = nullptr);

  // Queues a sequence (status kWaiting, empty block table).
  void Add(Sequence* seq);
  SchedulerPlan Schedule();
  // After the model ran the plan: advances each sequence's computed count, commits its full
  // blocks to the prefix cache and takes the state snapshots due (their copies ride on the next
  // plan). Sampled tokens are appended by the caller afterwards.
  void OnStepDone(const SchedulerPlan& plan);
  // A draft token verified after the step: its KV, computed in the step, now counts (and full
  // blocks are committed). OnStepDone counted the sequence's last token only.
  void AcceptDraftToken(Sequence* seq);
  // The last `n` computed tokens are to be computed again (a recurrent state taken back to before
  // them); their blocks stay.
  void RecomputeLast(Sequence* seq, int32_t n);
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
  // Takes what the prefix cache holds of a sequence with an empty table; with snapshots, returns
  // the one it resumes from (its copies are due once the sequence has its blocks and slot).
  std::optional<SnapshotHit> AcquireCachedPrefix(Sequence* seq);
  void AddRestoreCopies(const Sequence& seq, const SnapshotHit& hit, SchedulerPlan* plan) const;
  // Tokens from the sequence's computed count to its next snapshot position (no limit without one).
  int32_t ToNextSnapshot(const Sequence& seq) const;
  void TakeSnapshot(Sequence* seq);
  // Grows a table, first taking back blocks held by snapshots of its pool when none are free.
  bool EnsureCapacity(Sequence* seq, int32_t num_tokens);
  // Blocks a sequence of `pool` can get: free, cached and unused, or held by snapshots alone.
  int32_t Available(int32_t pool) const { return blocks_->num_available(pool) + blocks_->num_held_only(pool); }
  int32_t LocalSlot(const Sequence& seq) const { return seq.state_slot - seq.table.pool * slots_->pool_slots(); }
  int32_t LocalBlock(int32_t block) const { return block % blocks_->pool_blocks(); }
  void ScheduleRunning(bool decodes, int32_t* budget, SchedulerPlan* plan);
  // Extends the planned decodes by their drafts, within the budget and the free blocks.
  void AddDrafts(int32_t* budget, SchedulerPlan* plan);
  void AdmitWaiting(int32_t* budget, SchedulerPlan* plan);

  SchedulerConfig config_;
  BlockManager* blocks_;
  StateSlots* slots_;
  StateSnapshots* snapshots_;
  std::vector<PoolCopy> pending_copies_;  // snapshots taken after the last step, made before the next
  std::set<Sequence*, WaitingOrder> waiting_;
  std::vector<Sequence*> running_;  // admission order: newest at the back
  int64_t num_preemptions_ = 0;
};

}  // namespace ls
