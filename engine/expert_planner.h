// Expert placement planner: pure functions that build ExpertPlacement data (docs/serving.md) from
// per-expert loads. With D devices of S slots (S·D >= N),
// extra replicas go to the experts with the highest load per replica, then replicas are packed
// heaviest first onto the least-loaded device that has a free slot and no copy of that expert.
// No devices, no model: tests and benchmarks call these directly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/expert_placement.h"

namespace ls {

// Replicas per expert: one each, then each spare slot to the expert with the highest
// load / replicas (ties: lower expert index), at most one replica per device.
std::vector<int32_t> ReplicaCounts(const std::vector<double>& loads, int32_t num_devices, int32_t slots_per_device);
// The placement for per-expert loads (tokens, any scale).
absl::StatusOr<ExpertPlacement> PlanPlacement(const std::vector<double>& loads, int32_t num_devices,
                                              int32_t slots_per_device);
// The identity-like placement without load information: expert e on device e % D.
absl::StatusOr<ExpertPlacement> UniformPlacement(int32_t num_experts, int32_t num_devices, int32_t slots_per_device);

// Expected tokens per device when each expert's load splits evenly over its replicas.
std::vector<double> ExpectedDeviceLoads(const ExpertPlacement& p, const std::vector<double>& loads);
// Max over mean of a load vector (1.0 = balanced; 0 when empty or all zero).
double MaxOverMean(const std::vector<double>& loads);
// Device max/mean expected from per-layer loads under per-layer placements (the same layers in
// the same order), averaged over the layers; 0 without layers.
double MeanExpectedDeviceMaxOverMean(const std::vector<std::pair<int32_t, std::vector<double>>>& loads,
                                     const std::vector<std::pair<int32_t, ExpertPlacement>>& placements);

// A placement planned from expected loads before any traffic: per layer of `loads` (tokens per
// expert, num_experts each), the planned placement, and the device max/mean expected under those
// loads from it and from the uniform placement. Errors name a layer whose loads have another size.
struct LoadPlan {
  std::vector<std::pair<int32_t, ExpertPlacement>> placements;
  double expected_device_max_over_mean = 0, uniform_device_max_over_mean = 0;
};
absl::StatusOr<LoadPlan> PlanFromLoads(const std::map<int32_t, std::vector<double>>& loads, int32_t num_experts,
                                       int32_t num_devices, int32_t slots_per_device);

// JSON for --expert-placement files: {"num_devices", "slots_per_device", "layers": {"L": [slot_expert...]}}.
std::string PlacementsToJson(const std::vector<std::pair<int32_t, ExpertPlacement>>& layers);
absl::StatusOr<std::vector<std::pair<int32_t, ExpertPlacement>>> PlacementsFromJson(const std::string& text,
                                                                                   int32_t num_experts);

}  // namespace ls
