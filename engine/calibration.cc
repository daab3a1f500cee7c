// Calibration loop over the model.
#include "engine/calibration.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ls {
namespace {

// Runs each sequence alone through the model (positions 0..len-1).
absl::Status RunAll(Model& model, const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<float> logits;
  for (const auto& seq : sequences)
    if (auto st = model.ForwardSequence(seq, /*all_logits=*/false, &logits); !st.ok()) return st;
  return absl::OkStatus();
}

// The windows to run, after checking them: non-empty, ids in the vocabulary, within the context.
absl::StatusOr<std::vector<std::vector<int32_t>>> Windows(const Model& model,
                                                          const std::vector<std::vector<int32_t>>& sequences,
                                                          int32_t window) {
  const ModelConfig& c = model.config();
  if (window < 0) return absl::InvalidArgumentError(absl::StrCat("window must not be negative, got ", window));
  const int64_t context = c.max_position_embeddings;
  if (window == 0 || window > context) window = static_cast<int32_t>(context);
  if (sequences.empty()) return absl::InvalidArgumentError("calibration needs at least one sequence");
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i].empty()) return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " is empty"));
    for (int32_t id : sequences[i])
      if (id < 0 || id >= c.vocab_size)
        return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": token id ", id, " is outside the vocabulary [0, ",
                                                       c.vocab_size, ")"));
  }
  return SplitIntoWindows(sequences, window);
}

std::map<int32_t, double> Balance(Model& model, const std::vector<std::vector<int32_t>>& sequences) {
  model.ResetExpertTokenCounts();
  (void)RunAll(model, sequences);
  const auto& c = model.config();
  std::map<int32_t, double> out;
  const int32_t N = c.moe.num_experts;
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    const auto b = model.expert_token_counts().begin() + static_cast<size_t>(l) * N;
    const int64_t mx = *std::max_element(b, b + N);
    int64_t sum = 0;
    for (auto it = b; it != b + N; ++it) sum += *it;
    out[l] = sum > 0 ? static_cast<double>(mx) * N / static_cast<double>(sum) : 0.0;
  }
  return out;
}

}  // namespace

std::vector<std::vector<int32_t>> SplitIntoWindows(const std::vector<std::vector<int32_t>>& sequences, int32_t window) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& s : sequences)
    for (size_t start = 0; start < s.size(); start += window)
      out.emplace_back(s.begin() + start, s.begin() + std::min(s.size(), start + window));
  return out;
}

absl::StatusOr<std::map<int32_t, double>> MeasureExpertBalance(Model& model,
                                                               const std::vector<std::vector<int32_t>>& sequences,
                                                               int32_t window) {
  auto windows = Windows(model, sequences, window);
  if (!windows.ok()) return windows.status();
  return Balance(model, *windows);
}

absl::StatusOr<CalibrationResult> Calibrate(Model& model, const std::vector<std::vector<int32_t>>& input,
                                            const CalibrationOptions& options) {
  const ModelConfig& c = model.config();
  auto windows = Windows(model, input, options.window);
  if (!windows.ok()) return windows.status();
  const std::vector<std::vector<int32_t>>& sequences = *windows;
  if (options.iters < 1) return absl::InvalidArgumentError("iters must be at least 1");
  if (!c.has_moe_layers()) return absl::InvalidArgumentError("the model has no MoE layers to calibrate");
  if (c.moe.n_group > 1)
    return absl::InvalidArgumentError(absl::StrCat("calibration does not model group-limited routing (n_group = ",
                                                   c.moe.n_group, ")"));
  CalibrationResult result;
  result.num_windows = static_cast<int64_t>(sequences.size());
  for (const auto& s : sequences) result.num_tokens += static_cast<int64_t>(s.size());
  result.max_over_mean_before = Balance(model, sequences);
  const int32_t N = c.moe.num_experts, K = c.moe.top_k;
  for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (!c.is_moe_layer(layer)) continue;
    std::vector<std::vector<float>> sink;
    model.CaptureRouterLogits(&sink);
    absl::Status st = RunAll(model, sequences);
    model.CaptureRouterLogits(nullptr);
    if (!st.ok()) return st;
    const std::vector<float>& logits = sink[layer];
    const int64_t T = static_cast<int64_t>(logits.size()) / N;
    std::vector<float> scores(logits.size());
    RouterScores(logits.data(), T, N, c.moe.scoring == ScoringFunc::kSigmoid, scores.data());
    std::vector<float> bias = model.router_bias(layer);
    for (int32_t i = 0; i < options.iters; ++i)
      bias = QuantileBalancingUpdate(scores.data(), T, N, K, bias, options.eta, options.histogram);
    if (auto s = model.SetRouterBias(layer, bias); !s.ok()) return s;
    result.biases[layer] = std::move(bias);
  }
  result.max_over_mean_after = Balance(model, sequences);
  return result;
}

}  // namespace ls
