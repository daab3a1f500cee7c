// StateSlots: bookkeeping of the recurrent-state slots of models with linear-attention layers
// (KDA) — one slot per running sequence, held from admission until the sequence finishes, is
// cancelled or is preempted (a preempted sequence is recomputed from its first token, so its state
// is rebuilt). The slots may split into equal pools, one per rank of a group of processes, like
// the KV blocks: a sequence's slot comes from its blocks' pool. Pure bookkeeping like
// BlockManager: no tensors. Not thread-safe; the engine loop owns it.
#pragma once

#include <cstdint>
#include <vector>

namespace ls {

class StateSlots {
 public:
  // num_slots: in all pools together (a multiple of num_pools); pool p holds slots
  // [p·pool_slots, (p+1)·pool_slots).
  explicit StateSlots(int32_t num_slots, int32_t num_pools = 1) : free_(num_pools < 1 ? 1 : num_pools) {
    total_ = num_slots;
    per_pool_ = num_slots / static_cast<int32_t>(free_.size());
    for (int32_t p = 0; p < static_cast<int32_t>(free_.size()); ++p)
      for (int32_t s = (p + 1) * per_pool_ - 1; s >= p * per_pool_; --s) free_[p].push_back(s);
  }
  // A free slot of `pool`, or -1 when none is left there.
  int32_t Acquire(int32_t pool = 0) {
    if (free_[pool].empty()) return -1;
    const int32_t s = free_[pool].back();
    free_[pool].pop_back();
    return s;
  }
  void Release(int32_t slot) { free_[slot / per_pool_].push_back(slot); }
  int32_t num_slots() const { return total_; }
  int32_t pool_slots() const { return per_pool_; }
  int32_t num_available(int32_t pool) const { return static_cast<int32_t>(free_[pool].size()); }
  int32_t num_used() const {
    int32_t n = total_;
    for (const auto& f : free_) n -= static_cast<int32_t>(f.size());
    return n;
  }

 private:
  int32_t total_ = 0, per_pool_ = 0;
  std::vector<std::vector<int32_t>> free_;  // [pools] lowest slot at the back
};

}  // namespace ls
