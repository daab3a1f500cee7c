// Calibration loop over the model.
#include "engine/calibration.h"

#include <algorithm>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/read_file.h"
#include "engine/sampler.h"
#include "models/kv_cache.h"
#include "nlohmann/json.hpp"

namespace ls {
namespace {

// Runs each sequence alone through the model (positions 0..len-1), every token through every
// layer.
absl::Status RunAll(Model& model, const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<float> logits;
  model.RouteEveryToken(true);
  absl::Status st;
  for (const auto& seq : sequences)
    if (st = model.ForwardSequence(seq, /*all_logits=*/false, &logits); !st.ok()) break;
  model.RouteEveryToken(false);
  return st;
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
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", i, ": token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")"));
  }
  return SplitIntoWindows(sequences, window);
}

// The model's expert-token counters per MoE layer; they end at zero.
std::map<int32_t, std::vector<double>> TakeCounts(Model& model) {
  const auto& c = model.config();
  std::map<int32_t, std::vector<double>> out;
  const int32_t N = c.moe.num_experts;
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    const auto b = model.expert_token_counts().begin() + static_cast<size_t>(l) * N;
    out[l].assign(b, b + N);
  }
  model.ResetExpertTokenCounts();
  return out;
}

// Tokens per expert of every MoE layer over the sequences, each run alone; the counters end at zero.
std::map<int32_t, std::vector<double>> Loads(Model& model, const std::vector<std::vector<int32_t>>& sequences) {
  model.ResetExpertTokenCounts();
  (void)RunAll(model, sequences);
  return TakeCounts(model);
}

// A sequence's next token from its logits row (vocab_size values, which it may overwrite) and the
// sequence so far; negative: none can be chosen.
using NextToken = std::function<int32_t(float* logits, const std::vector<int32_t>& sequence)>;

// Continues `seqs` together, as a batch: one step over every prompt, then one step a token, each
// sequence until it has written `max_tokens` tokens chosen by `next` (the written tokens but the
// last are fed back; the caller leaves them room in the context). Returns the sequences with
// their written tokens.
absl::StatusOr<std::vector<std::vector<int32_t>>> Continue(Model& model, std::vector<std::vector<int32_t>> seqs,
                                                           int32_t max_tokens, DType kv_dtype, const NextToken& next) {
  if (max_tokens == 0) return seqs;
  constexpr int32_t kBlock = 16;
  const ModelConfig& c = model.config();
  const int32_t n = static_cast<int32_t>(seqs.size());
  std::vector<int32_t> left(n, max_tokens);  // tokens still to write
  std::vector<std::vector<int32_t>> tables(n);
  int32_t blocks = 0;
  StepBatch batch;
  for (int32_t i = 0; i < n; ++i) {
    const int64_t len = static_cast<int64_t>(seqs[i].size());
    const int64_t positions = len + max_tokens - 1;
    for (int64_t b = 0; b < (positions + kBlock - 1) / kBlock; ++b) tables[i].push_back(blocks++);
    StepSequence s;
    s.num_tokens = static_cast<int32_t>(len);
    s.state_slot = i;
    s.block_table = tables[i];
    batch.tokens.insert(batch.tokens.end(), seqs[i].begin(), seqs[i].end());
    batch.seqs.push_back(std::move(s));
  }
  KvCache cache(model.backend(), model.kv_layout(), std::max(blocks, 1), kBlock, kv_dtype, n);
  std::vector<int32_t> index(n);  // batch row -> sequence
  for (int32_t i = 0; i < n; ++i) index[i] = i;
  std::vector<float> logits;
  while (!batch.seqs.empty()) {
    if (absl::Status st = model.Forward(batch, cache, &logits); !st.ok()) return st;
    StepBatch step;
    std::vector<int32_t> rows;
    for (size_t r = 0; r < batch.seqs.size(); ++r) {
      const int32_t i = index[r];
      const int32_t token = next(logits.data() + static_cast<int64_t>(r) * c.vocab_size, seqs[i]);
      if (token < 0)
        return absl::InternalError(
            absl::StrCat("the model's logits are not finite for any token at position ", seqs[i].size()));
      seqs[i].push_back(token);
      if (--left[i] == 0) continue;
      StepSequence s;
      s.num_tokens = 1;
      s.start_pos = static_cast<int32_t>(seqs[i].size()) - 1;
      s.state_slot = i;
      s.block_table = tables[i];
      step.tokens.push_back(token);
      step.seqs.push_back(std::move(s));
      rows.push_back(i);
    }
    batch = std::move(step);
    index = std::move(rows);
  }
  return seqs;
}

std::map<int32_t, double> Balance(Model& model, const std::vector<std::vector<int32_t>>& sequences) {
  std::map<int32_t, double> out;
  for (const auto& [l, loads] : Loads(model, sequences)) {
    double sum = 0;
    for (double v : loads) sum += v;
    out[l] = sum > 0 ? *std::max_element(loads.begin(), loads.end()) * loads.size() / sum : 0.0;
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

absl::StatusOr<std::map<int32_t, std::vector<double>>> MeasureExpertLoads(
    Model& model, const std::vector<std::vector<int32_t>>& sequences, int32_t window) {
  auto windows = Windows(model, sequences, window);
  if (!windows.ok()) return windows.status();
  return Loads(model, *windows);
}

absl::StatusOr<std::map<int32_t, std::vector<double>>> MeasureServedExpertLoads(
    Model& model, const std::vector<std::vector<int32_t>>& sequences, int32_t max_tokens,
    std::optional<DType> kv_cache_dtype, int32_t window) {
  const int64_t context = model.config().max_position_embeddings;
  if (max_tokens < 0 || max_tokens >= context)
    return absl::InvalidArgumentError(absl::StrCat("tokens to write after each calibration prompt must be within [0, ",
                                                   context, ") (the context), got ", max_tokens));
  if (max_tokens == 0) return MeasureExpertLoads(model, sequences, window);
  if (window < 0) return absl::InvalidArgumentError(absl::StrCat("window must not be negative, got ", window));
  const int32_t room = static_cast<int32_t>(context - max_tokens);  // a request's prompt and its tokens fit
  auto windows = Windows(model, sequences, window == 0 ? room : std::min(window, room));
  if (!windows.ok()) return windows.status();
  auto kv_dtype = ChooseKvCacheDType(kv_cache_dtype, model.dtype(), *model.backend());
  if (!kv_dtype.ok()) return kv_dtype.status();
  model.ResetExpertTokenCounts();
  for (auto next = windows->begin(); next != windows->end();) {
    // Up to kServedCalibrationBatch sequences of up to kServedCalibrationTokens prompt tokens (at
    // least one sequence).
    std::vector<std::vector<int32_t>> group;
    int64_t tokens = 0;
    for (; next != windows->end() && static_cast<int32_t>(group.size()) < kServedCalibrationBatch; ++next) {
      tokens += static_cast<int64_t>(next->size());
      if (!group.empty() && tokens > kServedCalibrationTokens) break;
      group.push_back(*next);
    }
    const int32_t vocab = static_cast<int32_t>(model.config().vocab_size);
    auto served = Continue(model, std::move(group), max_tokens, *kv_dtype, [vocab](float* row, const auto&) {
      return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    });
    if (!served.ok()) {
      model.ResetExpertTokenCounts();
      return served.status();
    }
  }
  return TakeCounts(model);
}

SamplingParams CalibrationSampling() {
  SamplingParams p;
  p.temperature = 1.f;
  p.top_p = 0.95f;
  return p;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> SampleFromModel(Model& model, int32_t count, int32_t length,
                                                                  uint64_t seed) {
  const ModelConfig& c = model.config();
  length = static_cast<int32_t>(std::min<int64_t>(length, c.max_position_embeddings));
  if (count < 1 || length < 1)
    return absl::InvalidArgumentError(absl::StrCat("cannot sample ", count, " sequences of ", length, " tokens"));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> seqs(count);
  for (auto& s : seqs) s.push_back(SampleFirstToken(rng, c.vocab_size));
  const SamplingParams params = CalibrationSampling();
  const int32_t vocab = static_cast<int32_t>(c.vocab_size);
  auto sampled =
      Continue(model, std::move(seqs), length - 1, DType::kF32, [&](float* row, const std::vector<int32_t>& seq) {
        return Sampler::Sample(row, vocab, params, seq, 1, &rng).token_id;
      });
  if (!sampled.ok())
    return absl::Status(sampled.status().code(),
                        absl::StrCat("sampling calibration text: ", sampled.status().message()));
  return sampled;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> ReadCalibrationSet(const std::string& path,
                                                                     const tok::Tokenizer* tokenizer) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<std::vector<int32_t>> seqs;
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("sequences") || !j["sequences"].is_array())
      return absl::InvalidArgumentError(absl::StrCat(path, ": expected {\"sequences\": [[ids...], ...]}"));
    for (const auto& s : j["sequences"]) {
      if (!s.is_array()) return absl::InvalidArgumentError(absl::StrCat(path, ": each sequence must be a list of ids"));
      std::vector<int32_t> ids;
      for (const auto& v : s) {
        if (!v.is_number_integer()) return absl::InvalidArgumentError(absl::StrCat(path, ": ids must be integers"));
        ids.push_back(v.get<int32_t>());
      }
      if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": sequence ", seqs.size(), " is empty"));
      seqs.push_back(std::move(ids));
    }
  } else {
    if (!tokenizer)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a text calibration set needs the model's tokenizer (or give token ids as .json)"));
    size_t line_no = 0;
    for (const absl::string_view line : absl::StrSplit(*text, '\n')) {
      ++line_no;
      if (line.empty()) continue;
      auto ids = tokenizer->Encode(std::string_view(line.data(), line.size()));
      if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", ids.status().message()));
      if (!ids->empty()) seqs.push_back(std::move(*ids));
    }
  }
  if (seqs.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no text to calibrate on (the file is empty or holds only blank lines)"));
  return seqs;
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
    return absl::InvalidArgumentError(
        absl::StrCat("calibration does not model group-limited routing (n_group = ", c.moe.n_group, ")"));
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
