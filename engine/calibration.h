// Calibration: re-fits a model's frozen router biases on a set of token sequences with the
// Quantile Balancing estimator, layer by layer (docs/quantile-balancing.md): for
// each MoE layer in order, run every sequence through the model with the current biases, collect
// that layer's router scores, run `iters` estimator updates on them, install the new biases.
// Documents longer than the model's context are split into windows first.
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
  // Sequences longer than this are split into consecutive windows of at most this many tokens
  // (as evaluation tools split documents); 0: the model's max_position_embeddings.
  int32_t window = 0;
};

struct CalibrationResult {
  std::map<int32_t, std::vector<float>> biases;          // MoE layer -> new biases [N]
  std::map<int32_t, double> max_over_mean_before, max_over_mean_after;  // on the same windows
  int64_t num_windows = 0, num_tokens = 0;                // what the estimator saw
};

// Updates the model's biases in place and returns them with the balance before and after.
absl::StatusOr<CalibrationResult> Calibrate(Model& model, const std::vector<std::vector<int32_t>>& sequences,
                                            const CalibrationOptions& options);

// Each sequence as consecutive windows of at most `window` tokens (the last one shorter).
std::vector<std::vector<int32_t>> SplitIntoWindows(const std::vector<std::vector<int32_t>>& sequences, int32_t window);

// Per MoE layer, the busiest expert's tokens over the mean with the model's current biases, each
// sequence run alone (split into windows as Calibrate splits them).
absl::StatusOr<std::map<int32_t, double>> MeasureExpertBalance(Model& model,
                                                               const std::vector<std::vector<int32_t>>& sequences,
                                                               int32_t window = 0);

}  // namespace ls
