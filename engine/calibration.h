// Calibration: re-fits a model's frozen router biases on a set of token sequences with the
// Quantile Balancing estimator, layer by layer (docs/quantile-balancing.md): for
// each MoE layer in order, run every sequence through the model with the current biases, collect
// that layer's router scores, run `iters` estimator updates on them, install the new biases.
// Documents longer than the model's context are split into windows first. Also what a calibration
// set says about expert load (to plan an expert placement before traffic), the set read from a
// file, and the model's own samples to stand in for one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/quantile_balancing.h"
#include "engine/sampling_params.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

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
  std::map<int32_t, std::vector<float>> biases;                         // MoE layer -> new biases [N]
  std::map<int32_t, double> max_over_mean_before, max_over_mean_after;  // on the same windows
  int64_t num_windows = 0, num_tokens = 0;                              // what the estimator saw
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

// Per MoE layer, the tokens routed to each expert ([N]) over `sequences` with the model's current
// biases, run as MeasureExpertBalance runs them. Leaves the model's expert counters at zero.
absl::StatusOr<std::map<int32_t, std::vector<double>>> MeasureExpertLoads(
    Model& model, const std::vector<std::vector<int32_t>>& sequences, int32_t window = 0);

// Per MoE layer, the rows each expert computes when every sequence (split into windows of at most
// `window` tokens, as above, and of at most the context less `max_tokens`) is served as a prompt
// the model continues with `max_tokens` greedy tokens (past an end of text too, as a request with
// ignore_eos): every layer routes the prompt and the tokens fed back, except the last, whose FFN
// runs over the rows whose logits are read (each prompt's last token and each fed-back one), as
// serving runs them. So each layer's load is planned from what it computes. `max_tokens` 0:
// MeasureExpertLoads. Runs up to kServedCalibrationBatch sequences of up to
// kServedCalibrationTokens prompt tokens together (a longer one alone), with a KV cache of its own
// holding `kv_cache_dtype` elements (unset: the engine's default, ChooseKvCacheDType), so that it
// writes the tokens an engine would; leaves the counters at zero.
inline constexpr int32_t kCalibrationMaxTokens = 32, kServedCalibrationBatch = 256, kServedCalibrationTokens = 16384;
absl::StatusOr<std::map<int32_t, std::vector<double>>> MeasureServedExpertLoads(
    Model& model, const std::vector<std::vector<int32_t>>& sequences, int32_t max_tokens,
    std::optional<DType> kv_cache_dtype = std::nullopt, int32_t window = 0);

// The model's own text, where no calibration set is at hand: kCalibrationSamples sequences of
// kCalibrationSampleTokens tokens by default, each from a random first token
// (SampleFirstToken), sampled with CalibrationSampling (temperature 1, top-p 0.95; seeded).
inline constexpr int32_t kCalibrationSamples = 16, kCalibrationSampleTokens = 128;
SamplingParams CalibrationSampling();
// A first token of a sampled sequence: uniform over the vocabulary, from `rng`.
inline int32_t SampleFirstToken(std::mt19937_64& rng, int64_t vocab_size) {
  return static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab_size));
}

// `count` sequences of `length` tokens (at most the context) the model writes itself, as above:
// text of the kind the model routes. Runs them batched, with a KV cache of its own.
absl::StatusOr<std::vector<std::vector<int32_t>>> SampleFromModel(Model& model, int32_t count, int32_t length,
                                                                  uint64_t seed);

// A calibration set from a file: text, one document per line (needs `tokenizer`), or a .json file
// {"sequences": [[ids...], ...]}. Errors name the file, and the line or sequence.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReadCalibrationSet(const std::string& path,
                                                                     const tok::Tokenizer* tokenizer);

}  // namespace ls
