// StepProfile: where a forward step's wall time goes, by part of the layer, for benchmarks.
// Attached to a model with Model::SetProfile; each part is timed around its ops on the
// calling thread, so the figures are exact for backends whose ops return when done (the CPU). For
// a backend that queues work (CUDA), set wait_for: each part then waits for the device at its
// start and end, and measures the device's time for it (at the price of a slower step).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "kernels/backend.h"

namespace ls {

enum class StepPart : uint8_t {
  kEmbedding,
  kAttentionIn,    // input norm, q/k/v projections, q/k norms, RoPE
  kAttention,      // paged attention
  kAttentionOut,   // output projection
  kRouter,         // post-attention norm, router GEMM, top-K
  kLatent,         // latent down and up projections, expert-output norm
  kExperts,        // routed experts (grouped GEMMs, combine)
  kSharedOrDense,  // shared experts, or the dense FFN
  kLmHead,         // final norm and LM head
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<size_t>(StepPart::kCount)> kStepPartNames = {
    "embedding", "attention_in", "attention", "attention_out", "router", "latent", "experts", "shared_or_dense",
    "lm_head"};

struct StepProfile {
  std::array<double, static_cast<size_t>(StepPart::kCount)> seconds{};
  Backend* wait_for = nullptr;  // when set, parts synchronize with this backend
  void Reset() { seconds.fill(0); }
};

// Adds the time from construction to destruction to one part (does nothing without a profile).
class PartTimer {
 public:
  PartTimer(StepProfile* profile, StepPart part) : profile_(profile), part_(part) {
    if (!profile_) return;
    if (profile_->wait_for) profile_->wait_for->Synchronize();
    start_ = std::chrono::steady_clock::now();
  }
  ~PartTimer() {
    if (!profile_) return;
    if (profile_->wait_for) profile_->wait_for->Synchronize();
    profile_->seconds[static_cast<size_t>(part_)] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  PartTimer(const PartTimer&) = delete;
  PartTimer& operator=(const PartTimer&) = delete;

 private:
  StepProfile* profile_;
  StepPart part_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ls
