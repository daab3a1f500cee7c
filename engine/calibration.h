// Calibration: re-fits a model's frozen router biases on a set of token sequences with the
// Quantile Balancing estimator, layer by layer (DESIGN.md §4, docs/quantile-balancing.md): for
// each MoE layer in order, run every sequence through the model with the current biases, collect
// that layer's router scores, run `iters` estimator updates on them, install the new biases.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/quantile_balancing.h"
#include "models/model.h"

namespace ls {

struct CalibrationOptions {
  int32_t iters = 10;
  double eta = 1.0;
  HistogramSpec histogram;
};

struct CalibrationResult {
  std::map<int32_t, std::vector<float>> biases;          // MoE layer -> new biases [N]
  std::map<int32_t, double> max_over_mean_before, max_over_mean_after;  // on the same sequences
};

// Updates the model's biases in place and returns them with the balance before and after.
absl::StatusOr<CalibrationResult> Calibrate(Model& model, const std::vector<std::vector<int32_t>>& sequences,
                                            const CalibrationOptions& options);

}  // namespace ls
