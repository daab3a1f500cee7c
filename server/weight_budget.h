// WeightBudget: the weights each GPU (rank) of a planned rank group would hold, computed from the
// checkpoint's shapes alone (LoadOptions::shapes_only: config.json and the safetensors headers, no
// weight read), so that a host of any size can plan for a model far larger than it —
// `latentserve --model DIR --weight_budget_ranks R [--tensor_parallel_size T] [--expert_slots S]`.
// Per tensor-parallel rank: the non-expert bytes it binds (its parts of the split weights and all
// of the rest) and the routed experts of its S slots per MoE layer.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace ls::server {

// The budget as one JSON object ({"event": "weight_budget", ...}); errors name the flag or the
// checkpoint's problem. `backend` only hosts the model's (never used) buffers. expert_slots 0: just
// enough slots per rank to hold every expert once.
absl::StatusOr<std::string> WeightBudgetJson(const std::string& model_dir, Backend* backend, int32_t ranks,
                                             int32_t tensor_parallel, int32_t expert_slots);

}  // namespace ls::server
