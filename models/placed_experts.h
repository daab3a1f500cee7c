// PlacedExperts: the routed-expert weights as D device workers hold them under an expert
// placement — for every MoE layer, each device's physical slots with copies of their experts'
// weights in that device's own memory (a quantized weight with its scales and zero points). Immutable once built (so a
// new one can be prepared in the background and swapped in at a step boundary); shared by pointer.
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

class PlacedExperts {
 public:
  // Copies each device's experts into its own buffer. `experts` has one entry per layer (null
  // for a layer without routed experts); `placements` covers every MoE layer, all sharing D and S.
  static absl::StatusOr<std::shared_ptr<const PlacedExperts>> Build(
      const std::vector<const ExpertWeights*>& experts, Backend* backend,
      const std::vector<std::pair<int32_t, ExpertPlacement>>& placements);

  int32_t num_devices() const { return num_devices_; }
  int32_t slots_per_device() const { return slots_per_device_; }
  // nullptr for a layer without a placement (dense layers).
  const PlacedLayer* layer(int32_t l) const {
    return l < static_cast<int32_t>(layers_.size()) && layers_[l].placement.num_devices > 0 ? &layers_[l] : nullptr;
  }
  size_t bytes_per_device() const { return bytes_per_device_; }

 private:
  int32_t num_devices_ = 0, slots_per_device_ = 0;
  size_t bytes_per_device_ = 0;
  std::vector<PlacedLayer> layers_;
  std::vector<DeviceBuffer> storage_;  // one per device
};

}  // namespace ls
