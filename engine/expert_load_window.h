// ExpertLoadWindow: tokens routed to each (layer, expert) over the last W engine steps — the
// statistics the expert placement planner reads. The steps are kept in a ring allocated once
// (W x layers x experts counts), so recording a step allocates nothing. Pure bookkeeping; not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ls {

class ExpertLoadWindow {
 public:
  ExpertLoadWindow(int32_t num_layers, int32_t num_experts, int32_t window_steps)
      : layers_(num_layers), experts_(num_experts), window_(window_steps),
        ring_(static_cast<size_t>(window_steps) * num_layers * num_experts, 0),
        totals_(static_cast<size_t>(num_layers) * num_experts, 0) {}

  // Adds one step's counts [layers * experts], the difference `now - before` of two running
  // totals; drops the oldest step beyond the window.
  void AddStepDifference(const std::vector<int64_t>& now, const std::vector<int64_t>& before) {
    const size_t n = totals_.size();
    int64_t* slot = ring_.data() + static_cast<size_t>(next_) * n;
    for (size_t i = 0; i < n; ++i) {
      const int64_t c = now[i] - before[i];
      totals_[i] += c - slot[i];  // the slot holds the dropped step's counts (zero until the ring is full)
      slot[i] = c;
    }
    next_ = (next_ + 1) % window_;
    if (steps_ < window_) ++steps_;
  }
  // Tokens per expert of one layer over the window.
  std::vector<double> LayerLoads(int32_t layer) const {
    return std::vector<double>(totals_.begin() + static_cast<size_t>(layer) * experts_,
                               totals_.begin() + static_cast<size_t>(layer + 1) * experts_);
  }
  const std::vector<int64_t>& totals() const { return totals_; }
  int32_t steps() const { return steps_; }
  int32_t num_layers() const { return layers_; }
  int32_t num_experts() const { return experts_; }

 private:
  int32_t layers_, experts_, window_;
  int32_t next_ = 0;   // the ring slot the next step overwrites
  int32_t steps_ = 0;  // steps in the window
  std::vector<int64_t> ring_;  // [window][layers * experts]
  std::vector<int64_t> totals_;
};

}  // namespace ls
