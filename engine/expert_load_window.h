// ExpertLoadWindow: tokens routed to each (layer, expert) over the last W engine steps — the
// statistics the expert placement planner reads. Pure bookkeeping; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace ls {

class ExpertLoadWindow {
 public:
  ExpertLoadWindow(int32_t num_layers, int32_t num_experts, int32_t window_steps)
      : layers_(num_layers), experts_(num_experts), window_(window_steps),
        totals_(static_cast<size_t>(num_layers) * num_experts, 0) {}

  // Adds one step's counts [layers * experts]; drops the oldest step beyond the window.
  void AddStep(const std::vector<int64_t>& counts) {
    steps_.push_back(counts);
    for (size_t i = 0; i < totals_.size(); ++i) totals_[i] += counts[i];
    if (static_cast<int32_t>(steps_.size()) > window_) {
      for (size_t i = 0; i < totals_.size(); ++i) totals_[i] -= steps_.front()[i];
      steps_.pop_front();
    }
  }
  // Tokens per expert of one layer over the window.
  std::vector<double> LayerLoads(int32_t layer) const {
    return std::vector<double>(totals_.begin() + static_cast<size_t>(layer) * experts_,
                               totals_.begin() + static_cast<size_t>(layer + 1) * experts_);
  }
  const std::vector<int64_t>& totals() const { return totals_; }
  int32_t steps() const { return static_cast<int32_t>(steps_.size()); }
  int32_t num_layers() const { return layers_; }
  int32_t num_experts() const { return experts_; }

 private:
  int32_t layers_, experts_, window_;
  std::deque<std::vector<int64_t>> steps_;
  std::vector<int64_t> totals_;
};

}  // namespace ls
