// PlacedExperts: the routed-expert weights as D device workers hold them under an expert
// placement — for every MoE layer, each device's physical slots with copies of their experts'
// weights in that device's own memory (a quantized weight with its scales and zero points). In a
// group of R processes (ranks) the D devices split into R equal runs, rank r holding devices
// [r·D/R, (r+1)·D/R): a process copies only its own devices' experts. Immutable once built (so a
// new one can be prepared in the background, or a slot at a time over several steps by
// PlacedExpertsBuild, and swapped in at a step boundary); shared by pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "models/expert_placement.h"

namespace ls {

// One MoE layer's routed experts as the ops read them.
struct ExpertWeights {
  std::vector<Tensor> gate, up, down;  // [N] of [f, w] / [f, w] / [w, f]
};

struct PlacedLayer {
  ExpertPlacement placement;
  std::vector<Tensor> gate, up, down;  // [D * S] per physical slot (empty tensor for an empty slot)
};

class PlacedExpertsBuild;

class PlacedExperts {
 public:
  int32_t num_devices() const { return num_devices_; }
  int32_t slots_per_device() const { return slots_per_device_; }
  // The ranks the devices split over, this process's rank and its devices.
  int32_t num_ranks() const { return num_ranks_; }
  int32_t rank() const { return rank_; }
  int32_t devices_per_rank() const { return num_devices_ / num_ranks_; }
  // nullptr for a layer without a placement (dense layers). Slots of other ranks' devices hold
  // empty tensors.
  const PlacedLayer* layer(int32_t l) const {
    return l < static_cast<int32_t>(layers_.size()) && layers_[l].placement.num_devices > 0 ? &layers_[l] : nullptr;
  }
  // Memory of this rank's devices: the largest device's, all of them, and the part holding
  // redundant copies (replicas of an expert beyond its first slot, the price of hot-expert
  // replication).
  size_t bytes_per_device() const { return bytes_per_device_; }
  size_t rank_bytes() const { return rank_bytes_; }
  size_t redundant_bytes() const { return redundant_bytes_; }

 private:
  friend class PlacedExpertsBuild;

  int32_t num_devices_ = 0, slots_per_device_ = 0;
  int32_t num_ranks_ = 1, rank_ = 0;
  size_t bytes_per_device_ = 0, rank_bytes_ = 0, redundant_bytes_ = 0;
  std::vector<PlacedLayer> layers_;
  std::vector<DeviceBuffer> storage_;  // one per device of this rank
};

// A PlacedExperts built a slot at a time, so that copying a new placement can be spread over
// several steps (or done at once: Model::BuildPlacedExperts): Start checks the placements and
// allocates every device's buffer, CopyNextSlot copies one placed slot's three weights, and
// Finish hands out the result once every slot is copied.
class PlacedExpertsBuild {
 public:
  // Start: each of this rank's devices gets its own buffer for the experts placed on it, for the
  // devices of rank `rank` of `num_ranks` (D a multiple of num_ranks). `experts` has one entry per
  // layer (null for a layer without routed experts); `placements` covers every MoE layer, all
  // sharing D and S. With `prepare` the experts are host tensors as the checkpoint stores them,
  // and each slot gets the backend's prepared copy (Backend::PrepareWeight); otherwise they are
  // prepared already.
  static absl::StatusOr<std::unique_ptr<PlacedExpertsBuild>> Start(
      const std::vector<const ExpertWeights*>& experts, Backend* backend,
      const std::vector<std::pair<int32_t, ExpertPlacement>>& placements, int32_t rank = 0, int32_t num_ranks = 1,
      bool prepare = false);

  // Copies the next placed slot and returns its bytes (0 once done).
  size_t CopyNextSlot();
  bool done() const { return next_ == order_.size(); }
  size_t slots() const { return order_.size(); }
  size_t slots_copied() const { return next_; }
  // The placement built (done() must hold); the builder is spent.
  std::shared_ptr<const PlacedExperts> Finish();

 private:
  PlacedExpertsBuild() = default;
  // Weight t into this rank's device d: the backend's prepared form, or every part copied.
  Tensor Copy(int32_t d, const Tensor& t);

  std::shared_ptr<PlacedExperts> out_;
  std::vector<const ExpertWeights*> experts_;
  Backend* backend_ = nullptr;
  bool prepare_ = false;
  int32_t first_device_ = 0;                        // this rank's first device
  std::vector<size_t> used_;                        // bytes filled, per device of this rank
  std::vector<std::pair<int32_t, int32_t>> order_;  // (layer, slot) of every placed slot to copy
  size_t next_ = 0;
};

}  // namespace ls
