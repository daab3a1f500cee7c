// The shipped models/tiny checkpoint through the C++ engine: per-token cross-entropy on held-out
// text equals the PyTorch reference's within 0.5%, and its frozen Quantile-Balancing biases
// balance the experts better than zero biases.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace ls {
namespace {

using json = nlohmann::json;

std::string TinyDir() { return std::filesystem::path(LS_TEST_DATA_DIR).parent_path().parent_path().string() + "/models/tiny"; }

json Heldout() {
  std::ifstream in(std::string(LS_TEST_DATA_DIR) + "/tiny/heldout.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// Mean next-token cross-entropy of the model over the sequences (each run alone, all logits).
double MeanLoss(Model& model, const std::vector<std::vector<int32_t>>& seqs) {
  const int64_t V = model.config().vocab_size;
  double total = 0;
  int64_t count = 0;
  std::vector<float> logits;
  for (const auto& ids : seqs) {
    EXPECT_TRUE(model.ForwardSequence(ids, /*all_logits=*/true, &logits).ok());
    for (size_t t = 0; t + 1 < ids.size(); ++t) {
      const float* row = logits.data() + t * V;
      double mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max<double>(mx, row[v]);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
      total += mx + std::log(sum) - row[ids[t + 1]];
      ++count;
    }
  }
  return total / count;
}

TEST(TinyModel, HeldoutLossMatchesPyTorchWithinHalfAPercent) {
  CpuBackend backend(2);
  auto model = LoadModel(TinyDir(), &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  json h = Heldout();
  const auto seqs = h["ids"].get<std::vector<std::vector<int32_t>>>();
  const double want = h["loss"].get<double>();
  const double got = MeanLoss(**model, seqs);
  EXPECT_NEAR(got, want, 0.005 * want) << "C++ " << got << " vs PyTorch " << want;
}

TEST(TinyModel, FrozenBiasesBalanceExpertsBetterThanZeroBiases) {
  CpuBackend backend(2);
  auto model = LoadModel(TinyDir(), &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto seqs = Heldout()["ids"].get<std::vector<std::vector<int32_t>>>();
  const ModelConfig& c = (*model)->config();
  auto max_over_mean = [&](Model& m) {
    m.ResetExpertTokenCounts();
    MeanLoss(m, seqs);
    std::vector<double> r;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
      if (!c.is_moe_layer(l)) continue;
      const auto b = m.expert_token_counts().begin() + static_cast<size_t>(l) * c.moe.num_experts;
      int64_t sum = 0, mx = 0;
      for (auto it = b; it != b + c.moe.num_experts; ++it) sum += *it, mx = std::max(mx, *it);
      r.push_back(static_cast<double>(mx) * c.moe.num_experts / sum);
    }
    return r;
  };
  const auto frozen = max_over_mean(**model);
  for (int32_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) {
      ASSERT_TRUE((*model)->SetRouterBias(l, std::vector<float>(c.moe.num_experts, 0.f)).ok());
    }
  const auto zero = max_over_mean(**model);
  double mean_frozen = 0, mean_zero = 0;
  for (size_t i = 0; i < frozen.size(); ++i) mean_frozen += frozen[i], mean_zero += zero[i];
  EXPECT_LT(mean_frozen, mean_zero) << "mean over layers of max/mean expert load";
}

// Online quantization (--quantization) of the tiny model's GEMM weights (routers and gates kept, the
// LM head at 8 bits) changes its held-out loss by at most the bound the README states for each
// scheme, and int4 and w8a8 models with their experts placed over two devices (packed codes copied
// with their scales and code sums) give the unplaced model's logits exactly.
TEST(TinyModel, OnlineQuantizationKeepsHeldoutLossWithinItsBound) {
  const auto seqs = Heldout()["ids"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend(2);
  auto plain = LoadModel(TinyDir(), &backend);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const double base = MeanLoss(**plain, seqs);
  // Measured: int8 +0.01%, fp8 +0.08%, int4 -0.03%, w8a8 +0.00%, w4a8 -0.02% (4.4639 unquantized).
  for (auto [scheme, bound] : {std::pair{QuantScheme::kInt8, 0.001}, std::pair{QuantScheme::kFp8, 0.005},
                               std::pair{QuantScheme::kInt4, 0.01}, std::pair{QuantScheme::kInt8A8, 0.005},
                               std::pair{QuantScheme::kInt4A8, 0.01}}) {
    LoadOptions o;
    o.quantization = scheme;
    auto q = LoadModel(TinyDir(), &backend, o);
    ASSERT_TRUE(q.ok()) << q.status();
    const double loss = MeanLoss(**q, seqs);
    std::printf("--quantization %s: held-out loss %.4f vs %.4f (%+.2f%%)\n", QuantSchemeName(scheme), loss, base,
                100 * (loss - base) / base);
    EXPECT_LE(std::fabs(loss - base), bound * base) << QuantSchemeName(scheme);
    EXPECT_NE(loss, base) << QuantSchemeName(scheme) << ": the weights were not quantized";
  }
}

// --activation_dtype bfloat16: the BF16 GEMM weights' input rows rounded to BF16 (AVX512-BF16 dot
// products) change the held-out loss by at most the bound the README states.
TEST(TinyModel, Bf16ActivationsKeepHeldoutLossWithinItsBound) {
  const auto seqs = Heldout()["ids"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend f32(2), bf16(2, DType::kBF16);
  auto plain = LoadModel(TinyDir(), &f32);
  auto rounded = LoadModel(TinyDir(), &bf16);
  ASSERT_TRUE(plain.ok() && rounded.ok());
  const double base = MeanLoss(**plain, seqs), loss = MeanLoss(**rounded, seqs);
  std::printf("--activation_dtype bfloat16: held-out loss %.4f vs %.4f (%+.3f%%)\n", loss, base,
              100 * (loss - base) / base);
  // Measured: +0.004% (4.4640 vs 4.4639).
  EXPECT_LE(std::fabs(loss - base), 0.001 * base);
  EXPECT_NE(loss, base) << "the activations were not rounded";
}

// --activation_dtype int8: integer GEMM weights take int8 activations. `--quantization int8` and
// `int4` with it are the w8a8 and w4a8 schemes, logit for logit; every GEMM weight they quantize
// is prepared for int8 rows as under those schemes, and a model with float weights has none.
TEST(TinyModel, Int8ActivationsMakeIntegerWeightsTheA8Schemes) {
  const auto seqs = Heldout()["ids"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend f32(2), i8(2, DType::kI8);
  for (auto [scheme, a8] :
       {std::pair{QuantScheme::kInt8, QuantScheme::kInt8A8}, std::pair{QuantScheme::kInt4, QuantScheme::kInt4A8}}) {
    LoadOptions o, o8;
    o.quantization = scheme;
    o8.quantization = a8;
    auto rounded = LoadModel(TinyDir(), &i8, o);
    auto want = LoadModel(TinyDir(), &f32, o8);
    auto plain = LoadModel(TinyDir(), &f32, o);
    ASSERT_TRUE(rounded.ok() && want.ok() && plain.ok());
    EXPECT_GT((*rounded)->int8_activation_weights(), (*rounded)->gemm_weights() / 2) << QuantSchemeName(scheme);
    EXPECT_EQ((*rounded)->int8_activation_weights(), (*want)->int8_activation_weights()) << QuantSchemeName(scheme);
    EXPECT_EQ((*plain)->int8_activation_weights(), 0) << QuantSchemeName(scheme);
    std::vector<float> got, expected, unrounded;
    for (size_t i = 0; i < 3 && i < seqs.size(); ++i) {
      ASSERT_TRUE((*rounded)->ForwardSequence(seqs[i], true, &got).ok());
      ASSERT_TRUE((*want)->ForwardSequence(seqs[i], true, &expected).ok());
      ASSERT_TRUE((*plain)->ForwardSequence(seqs[i], true, &unrounded).ok());
      EXPECT_EQ(got, expected) << QuantSchemeName(scheme) << ", sequence " << i;
      EXPECT_NE(got, unrounded) << QuantSchemeName(scheme) << ": the activations were not rounded";
    }
  }
  auto unquantized = LoadModel(TinyDir(), &i8);
  ASSERT_TRUE(unquantized.ok());
  EXPECT_EQ((*unquantized)->int8_activation_weights(), 0);
}

TEST(TinyModel, PlacedQuantizedExpertsGiveTheUnplacedLogits) {
  for (QuantScheme scheme : {QuantScheme::kInt4, QuantScheme::kInt8A8}) {
    CpuBackend backend(2);
    LoadOptions o;
    o.quantization = scheme;
    auto model = LoadModel(TinyDir(), &backend, o);
    ASSERT_TRUE(model.ok()) << model.status();
    const ModelConfig& c = (*model)->config();
    const std::vector<int32_t> ids = Heldout()["ids"][0].get<std::vector<int32_t>>();
    std::vector<float> want, got;
    ASSERT_TRUE((*model)->ForwardSequence(ids, true, &want).ok());
    // Two devices of N/2 + 1 slots: expert e on device e % 2, experts 0 and 1 replicated on the other.
    ExpertPlacement p;
    p.num_experts = c.moe.num_experts;
    p.num_devices = 2;
    p.slots_per_device = c.moe.num_experts / 2 + 1;
    p.slot_expert.assign(2 * p.slots_per_device, -1);
    for (int32_t e = 0; e < c.moe.num_experts; ++e) p.slot_expert[(e % 2) * p.slots_per_device + e / 2] = e;
    p.slot_expert[p.slots_per_device - 1] = 1;
    p.slot_expert[2 * p.slots_per_device - 1] = 0;
    p.Index();
    ASSERT_TRUE(p.Validate().ok()) << p.Validate();
    std::vector<std::pair<int32_t, ExpertPlacement>> placements;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l)
      if (c.is_moe_layer(l)) placements.emplace_back(l, p);
    auto placed = (*model)->BuildPlacedExperts(placements);
    ASSERT_TRUE(placed.ok()) << placed.status();
    (*model)->SetPlacedExperts(*placed);
    ASSERT_TRUE((*model)->ForwardSequence(ids, true, &got).ok());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << QuantSchemeName(scheme) << " " << i;
  }
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// The step profile times every part of the tiny model's layers (all present: latent MoE with a
// shared expert), and its parts add up to no more than the step itself.
TEST(TinyModel, StepProfileTimesEveryPart) {
  CpuBackend backend(2);
  auto model = LoadModel(TinyDir(), &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int32_t> ids(48);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(3 + i * 37 % 4000);
  StepProfile profile;
  (*model)->SetProfile(&profile);
  std::vector<float> logits;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE((*model)->ForwardSequence(ids, false, &logits).ok());
  const double step = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  (*model)->SetProfile(nullptr);
  double sum = 0;
  for (size_t i = 0; i < profile.seconds.size(); ++i) {
    EXPECT_GT(profile.seconds[i], 0) << kStepPartNames[i];
    sum += profile.seconds[i];
  }
  EXPECT_LE(sum, step);
  // Detached: a further step adds nothing.
  const StepProfile before = profile;
  ASSERT_TRUE((*model)->ForwardSequence(ids, false, &logits).ok());
  EXPECT_EQ(profile.seconds, before.seconds);
}

}  // namespace
}  // namespace ls
