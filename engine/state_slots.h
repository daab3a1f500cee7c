// StateSlots: bookkeeping of the recurrent-state slots of models with linear-attention layers
// (KDA) — one slot per running sequence, held from admission until the sequence finishes, is
// cancelled or is preempted (a preempted sequence is recomputed from its first token, so its state
// is rebuilt). Pure bookkeeping like BlockManager: no tensors. Not thread-safe; the engine loop
// owns it.
#pragma once

#include <cstdint>
#include <vector>

namespace ls {

class StateSlots {
 public:
  explicit StateSlots(int32_t num_slots) {
    for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
    total_ = num_slots;
  }
  // A free slot, or -1 when none is left.
  int32_t Acquire() {
    if (free_.empty()) return -1;
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  void Release(int32_t slot) { free_.push_back(slot); }
  int32_t num_slots() const { return total_; }
  int32_t num_used() const { return total_ - static_cast<int32_t>(free_.size()); }

 private:
  int32_t total_ = 0;
  std::vector<int32_t> free_;  // lowest slot at the back
};

}  // namespace ls
