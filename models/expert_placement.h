// ExpertPlacement: which expert each physical expert slot of each device holds, for one MoE
// layer — plain data the MoE block dispatches over (docs/serving.md) — and the dispatch rule: a
// replicated expert's routed rows, in token order, each go to the copy whose device has the fewest
// rows of the step so far (the one-copy experts' rows counted first). Built by the planner in
// engine/expert_planner; the model only reads it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace ls {

struct ExpertPlacement {
  int32_t num_experts = 0;
  int32_t num_devices = 0;
  int32_t slots_per_device = 0;
  std::vector<int32_t> slot_expert;            // [D * S] physical slot -> expert, -1 = empty
  std::vector<std::vector<int32_t>> replicas;  // [N] expert -> its physical slots, ascending

  int32_t device_of(int32_t slot) const { return slot / slots_per_device; }
  // Rebuilds `replicas` from `slot_expert`.
  void Index();
  // Every expert placed, no slot out of range, no two copies of an expert on one device.
  absl::Status Validate() const;
};

// For routed pairs with experts ids[i], the physical slot that computes each pair.
std::vector<int32_t> DispatchSlots(const ExpertPlacement& p, const int32_t* ids, int64_t num_pairs);

}  // namespace ls
