// The CUDA backend end to end: on every fixture (ours and those transformers wrote), the logits of
// a chunked prefill and 16 decode steps agree with the CPU backend under the GPU's rounding (BF16
// weights, GEMM inputs rounded to BF16: tests/bf16_activations_backend.h) up to accumulation
// order (scaled by how far BF16 rounding alone moves that fixture), and pick the PyTorch goldens'
// top token; on the tiny model, a batch of sequences decoding together through the paged KV cache
// agrees with that reference step by step, also with its experts placed on two device workers; on
// the quantized fixtures, the routed experts read as codes give the logits of the same experts
// dequantized to BF16 at load, in less memory. (The plain CPU backend keeps float32 activations;
// on the fixtures with q/k norms, rounding them alone moves a row's logits by up to 41%, so it is
// no reference for the GPU's arithmetic.) Each comparison prints its figures. Reports SKIPPED
// without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/bf16_activations_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// Versus the CPU backend with the GPU's rounding: relative L2 error per row of logits. What is
// left is accumulation order and the BF16 rounding of the experts' GLU outputs, which only the
// GPU does; measured on the H200: 0.0017 (tiny model) to 0.011 (router_ties_sigmoid_f32).
constexpr double kMaxRelativeError = 2e-2;
// Versus the goldens: rows whose top token is PyTorch's.
constexpr double kMinTopAgreement = 0.95;
// Several of the tiny random fixtures amplify any rounding: on the CPU, rounding the same GEMM
// inputs toward zero instead of to nearest moves their logits by 0.5 to 1.2 (relative L2, worst
// row) and changes up to a quarter of the top tokens (glm4_moe, kimi_linear, k3_tiny; measured
// over every fixture), so a GPU differing from the emulation only in accumulation order can land
// as far. Per fixture, the GPU's rows may be twice as far from the emulation as the two roundings
// are from each other (at least kMaxRelativeError), except one row in 20: a near tie in a router or
// softmax that accumulation order alone decides (seen on the H200: qwen3_moe_yarn_f32, one row of
// 48 at 0.167, the others at most 0.005). And the GPU must pick PyTorch's top token as often as
// the emulation does, less one row in 20.
constexpr double kNoiseMultiple = 2.0;
constexpr double kRowsOverShare = 0.05;
constexpr double kTopAgreementSlack = 0.05;

using testing::CompareLogits;
using Agreement = testing::LogitsAgreement;

// The CUDA backend with every dense GEMM in BF16 (FP8 checkpoints' FP8 GEMMs round activations to
// e4m3, which the reference does not: CudaFp8Gemms below checks them).
std::unique_ptr<Backend> Gpu() {
  std::string error;
  auto b = CreateCudaBackend(0, &error);
  EXPECT_TRUE(b) << error;
  if (b) b->set_fp8_gemms(false);
  return b;
}

// One model directory loaded on the CPU backend and on the CUDA backend.
struct BothBackends {
  explicit BothBackends(const std::string& dir) : gpu(Gpu()) {
    if (!gpu) return;
    auto c = LoadModel(dir, &cpu);
    auto g = LoadModel(dir, gpu.get());
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(g.ok()) << g.status();
    if (c.ok() && g.ok()) cpu_model = std::move(*c), gpu_model = std::move(*g);
  }
  bool ok() const { return cpu_model && gpu_model; }

  testing::Bf16ActivationsBackend cpu{2};
  std::unique_ptr<Backend> gpu;
  std::unique_ptr<Model> cpu_model, gpu_model;
};

// Each row's relative L2 error (prefill rows, then decode rows), to tell where a model diverges.
std::vector<double> RowErrors(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
  std::vector<double> out;
  for (size_t r = 0; r < want.size() / static_cast<size_t>(vocab); ++r) {
    const std::vector<float> g(got.begin() + r * vocab, got.begin() + (r + 1) * vocab);
    const std::vector<float> w(want.begin() + r * vocab, want.begin() + (r + 1) * vocab);
    out.push_back(CompareLogits(g, w, vocab).worst_relative_error);
  }
  return out;
}

class CudaFixtureLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaFixtureLogits, MatchGoldensAndCpuBackend) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::FixtureParamDir(GetParam());
  {
    CpuBackend probe(1);
    if (auto m = LoadModel(dir, &probe); !m.ok())
      GTEST_SKIP() << "the loader refuses this fixture (pinned by HfFixtures): " << m.status();
  }
  const testing::Golden g = testing::LoadGolden(dir);
  BothBackends b(dir);
  ASSERT_TRUE(b.ok());
  const std::vector<int> chunks = {5, 11, 16};
  const std::vector<float> want_cpu = testing::RunGolden(*b.cpu_model, g, chunks);
  const std::vector<float> got = testing::RunGolden(*b.gpu_model, g, chunks);
  ASSERT_EQ(got.size(), g.logits.size());
  // The fixture's sensitivity: the emulation rounding toward zero against rounding to nearest.
  testing::Bf16ActivationsBackend toward_zero(2, testing::Bf16Rounding::kTowardZero);
  auto other = LoadModel(dir, &toward_zero);
  ASSERT_TRUE(other.ok()) << other.status();
  const Agreement noise = CompareLogits(testing::RunGolden(**other, g, chunks), want_cpu, g.vocab);
  const Agreement cpu_vs_golden = CompareLogits(want_cpu, g.logits, g.vocab);
  const Agreement vs_cpu = CompareLogits(got, want_cpu, g.vocab), vs_golden = CompareLogits(got, g.logits, g.vocab);
  std::printf(
      "%s: vs CPU with BF16 activations %.5f (top %.3f); vs PyTorch %.5f (top %.3f); rounding noise %.5f "
      "(top %.3f); the emulation vs PyTorch %.5f (top %.3f)\n",
      GetParam().c_str(), vs_cpu.worst_relative_error, vs_cpu.top_agreement, vs_golden.worst_relative_error,
      vs_golden.top_agreement, noise.worst_relative_error, noise.top_agreement, cpu_vs_golden.worst_relative_error,
      cpu_vs_golden.top_agreement);
  const double max_error = std::max(kMaxRelativeError, kNoiseMultiple * noise.worst_relative_error);
  const std::vector<double> rows = RowErrors(got, want_cpu, g.vocab);
  const auto over = std::count_if(rows.begin(), rows.end(), [&](double e) { return e > max_error; });
  EXPECT_LE(static_cast<double>(over), kRowsOverShare * static_cast<double>(rows.size()))
      << over << " of " << rows.size() << " rows differ from the emulation by more than " << max_error;
  if (over > 0) {
    std::printf("  relative error by row:");
    for (double e : rows) std::printf(" %.3f", e);
    std::printf("\n");
  }
  EXPECT_GE(vs_cpu.top_agreement, std::min(kMinTopAgreement, noise.top_agreement - kRowsOverShare));
  EXPECT_GE(vs_golden.top_agreement, std::min(kMinTopAgreement, cpu_vs_golden.top_agreement - kRowsOverShare));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFixtureLogits, ::testing::ValuesIn(testing::FixtureNames()),
                         [](const auto& info) { return info.param; });

std::vector<std::string> HfParams() {
  std::vector<std::string> out;
  for (const std::string& name : testing::HfFixtureNames()) out.push_back("hf/" + name);
  return out;
}
INSTANTIATE_TEST_SUITE_P(Transformers, CudaFixtureLogits, ::testing::ValuesIn(HfParams()),
                         [](const auto& info) { return info.param.substr(3); });

std::vector<std::string> K3Params() {
  std::vector<std::string> out;
  for (const std::string& name : testing::K3FixtureNames()) out.push_back("k3/" + name);
  return out;
}
INSTANTIATE_TEST_SUITE_P(KimiK3, CudaFixtureLogits, ::testing::ValuesIn(K3Params()),
                         [](const auto& info) { return info.param.substr(3); });

// Four sequences of different prompt lengths prefill together, then decode 12 steps together.
std::vector<std::vector<float>> RunBatch(Model& model) {
  const ModelConfig& c = model.config();
  constexpr int32_t kBlock = 16, kSeqs = 4, kSteps = 12;
  KvCache cache(model.backend(), model.kv_layout(), kSeqs * 4, kBlock, DType::kF32, kSeqs);
  std::vector<StepSequence> seqs(kSeqs);
  StepBatch b;
  for (int32_t i = 0; i < kSeqs; ++i) {
    for (int32_t k = 0; k < 4; ++k) seqs[i].block_table.push_back(k * kSeqs + (kSeqs - 1 - i));
    seqs[i].state_slot = i;
    seqs[i].num_tokens = 7 + 5 * i;
    for (int32_t t = 0; t < seqs[i].num_tokens; ++t) b.tokens.push_back(3 + (i * 977 + t * 131) % (c.vocab_size - 3));
  }
  b.seqs = seqs;
  std::vector<std::vector<float>> steps;
  std::vector<float> logits;
  EXPECT_TRUE(model.Forward(b, cache, &logits).ok());
  steps.push_back(logits);
  for (int32_t s = 0; s < kSteps; ++s) {
    StepBatch d;
    for (int32_t i = 0; i < kSeqs; ++i) {
      seqs[i].start_pos += seqs[i].num_tokens;
      seqs[i].num_tokens = 1;
      d.tokens.push_back(3 + (s * 389 + i * 57) % (c.vocab_size - 3));
    }
    d.seqs = seqs;
    EXPECT_TRUE(model.Forward(d, cache, &logits).ok());
    steps.push_back(logits);
  }
  return steps;
}

TEST(CudaTinyModel, BatchedDecodeMatchesCpuBackend) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  BothBackends b(testing::DataDir() + "/../../models/tiny");
  ASSERT_TRUE(b.ok());
  const auto want = RunBatch(*b.cpu_model), got = RunBatch(*b.gpu_model);
  ASSERT_EQ(want.size(), got.size());
  double worst = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    const Agreement a = CompareLogits(got[s], want[s], b.cpu_model->config().vocab_size);
    worst = std::max(worst, a.worst_relative_error);
    EXPECT_LE(a.worst_relative_error, kMaxRelativeError) << "step " << s;
    EXPECT_GE(a.top_agreement, 0.75) << "step " << s;  // 4 rows per step: at most one may differ
  }
  std::printf("tiny model, batched decode: worst step vs CPU with BF16 activations %.5f\n", worst);
}

// A placement of N experts on D device workers: expert e on worker e % D, plus (with D > 1)
// replicas of experts 0-3 on another worker, so that dispatch splits rows over replicas.
ExpertPlacement SpreadExperts(int32_t N, int32_t D) {
  const int32_t S = (N + D - 1) / D + (D > 1 ? 4 : 0);
  ExpertPlacement p;
  p.num_experts = N;
  p.num_devices = D;
  p.slots_per_device = S;
  p.slot_expert.assign(static_cast<size_t>(D) * S, -1);
  for (int32_t e = 0; e < N; ++e) p.slot_expert[(e % D) * S + e / D] = e;
  if (D > 1)
    for (int32_t e = 0; e < 4; ++e) p.slot_expert[((e + 1) % D) * S + (N + D - 1) / D + e] = e;
  p.Index();
  return p;
}

// Expert parallelism on one GPU: one device worker (dispatch and combine as an NCCL all-to-all
// of the GPU's single rank with itself) and two workers (device copies) give the logits of the
// unplaced CUDA model up to rounding (the same kernels on regrouped rows).
TEST(CudaTinyModel, PlacedExpertsOnOneGpuMatchUnplaced) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::DataDir() + "/../../models/tiny";
  auto gpu = Gpu();
  ASSERT_TRUE(gpu);
  auto model = LoadModel(dir, gpu.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  const auto want = RunBatch(**model);
  for (int32_t D : {1, 2}) {
    const ExpertPlacement p = SpreadExperts(c.moe.num_experts, D);
    ASSERT_TRUE(p.Validate().ok());
    std::vector<std::pair<int32_t, ExpertPlacement>> placements;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l)
      if (c.is_moe_layer(l)) placements.emplace_back(l, p);
    auto placed = (*model)->BuildPlacedExperts(placements);
    ASSERT_TRUE(placed.ok()) << placed.status();
    (*model)->SetPlacedExperts(*placed);
    const auto got = RunBatch(**model);
    for (size_t s = 0; s < want.size(); ++s) {
      const Agreement a = CompareLogits(got[s], want[s], c.vocab_size);
      EXPECT_LE(a.worst_relative_error, 1e-3) << D << " device(s), step " << s;
      EXPECT_EQ(a.top_agreement, 1.0) << D << " device(s), step " << s;
    }
    int64_t rows = 0;
    for (int64_t r : (*model)->device_row_counts()) rows += r;
    EXPECT_GT(rows, 0);
    (*model)->SetPlacedExperts(nullptr);
  }
}

// Quantized fixtures with their routed experts kept as codes (the CUDA backend's default) against
// the same model with them dequantized to BF16 at load (set_packed_experts(false)): the grouped
// GEMMs read the same BF16 either way, so the logits agree to float32 rounding (1e-5 leaves room
// only for run-to-run order in other ops' float atomics), and the experts take less device memory:
// on the MXFP4 fixtures exactly 16 − 4.25 bits a routed weight less (copies 64-byte aligned), and
// so do their copies placed on device workers.
struct QuantizedFixture {
  const char* dir;
  bool mxfp4;  // every routed expert MXFP4 (E2M1 codes, one E8M0 scale per 32)
};
class CudaQuantizedFixture : public ::testing::TestWithParam<QuantizedFixture> {};

TEST_P(CudaQuantizedFixture, ExpertsKeptAsCodesGiveTheLogitsOfLoadTimeBf16InLessMemory) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::FixtureParamDir(GetParam().dir);
  std::string error;
  auto packed_gpu = CreateCudaBackend(0, &error);
  ASSERT_TRUE(packed_gpu) << error;
  auto bf16_gpu = CreateCudaBackend(0, &error);
  ASSERT_TRUE(bf16_gpu) << error;
  bf16_gpu->set_packed_experts(false);
  packed_gpu->set_fp8_gemms(false);
  bf16_gpu->set_fp8_gemms(false);
  auto packed = LoadModel(dir, packed_gpu.get());
  ASSERT_TRUE(packed.ok()) << packed.status();
  auto bf16 = LoadModel(dir, bf16_gpu.get());
  ASSERT_TRUE(bf16.ok()) << bf16.status();

  const size_t packed_bytes = (*packed)->prepared_weight_bytes(), bf16_bytes = (*bf16)->prepared_weight_bytes();
  std::printf("%s: prepared weights %zu bytes with the experts as codes, %zu as BF16\n", GetParam().dir, packed_bytes,
              bf16_bytes);
  EXPECT_LT(packed_bytes, bf16_bytes);
  if (GetParam().mxfp4) {
    const ModelConfig& c = (*packed)->config();
    const size_t f = static_cast<size_t>(c.moe.expert_ffn), w = static_cast<size_t>(c.expert_width());
    size_t saved = 0;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
      if (!c.is_moe_layer(l)) continue;
      for (const auto& [rows, cols] : {std::pair{f, w}, std::pair{f, w}, std::pair{w, f}}) {
        const size_t codes = Align64(Align64(rows * cols / 2) + Align64(rows * ((cols + 31) / 32)));
        saved += static_cast<size_t>(c.moe.num_experts) * (Align64(rows * cols * 2) - codes);
      }
    }
    EXPECT_EQ(bf16_bytes - packed_bytes, saved);
  }

  const testing::Golden g = testing::LoadGolden(dir);
  const std::vector<int> chunks = {5, 11, 16};
  const std::vector<float> want = testing::RunGolden(**bf16, g, chunks), got = testing::RunGolden(**packed, g, chunks);
  ASSERT_EQ(got.size(), want.size());
  const Agreement a = CompareLogits(got, want, g.vocab);
  size_t same = 0;
  for (size_t i = 0; i < got.size(); ++i) same += std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
  std::printf("%s: experts as codes vs as BF16: worst row %.3g, %zu of %zu logits the same bits\n", GetParam().dir,
              a.worst_relative_error, same, got.size());
  EXPECT_LE(a.worst_relative_error, 1e-5);
  EXPECT_EQ(a.top_agreement, 1.0);

  // Placed on two device workers, the experts are copied with their scales and zero points: the
  // logits of the unplaced model up to rounding, in less memory than the BF16 copies.
  const ModelConfig& c = (*packed)->config();
  std::vector<std::pair<int32_t, ExpertPlacement>> placements;
  for (int32_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) placements.emplace_back(l, SpreadExperts(c.moe.num_experts, 2));
  auto placed = (*packed)->BuildPlacedExperts(placements);
  ASSERT_TRUE(placed.ok()) << placed.status();
  auto placed_bf16 = (*bf16)->BuildPlacedExperts(placements);
  ASSERT_TRUE(placed_bf16.ok()) << placed_bf16.status();
  EXPECT_LT((*placed)->rank_bytes(), (*placed_bf16)->rank_bytes());
  (*packed)->SetPlacedExperts(*placed);
  const Agreement p = CompareLogits(testing::RunGolden(**packed, g, chunks), got, g.vocab);
  EXPECT_LE(p.worst_relative_error, 1e-3);
  EXPECT_EQ(p.top_agreement, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Quantized, CudaQuantizedFixture,
                         ::testing::Values(QuantizedFixture{"hf/qwen3_moe_mxfp4", true},
                                           QuantizedFixture{"k3/k3_tiny_mxfp4", true},
                                           QuantizedFixture{"hf/glm4_moe_int4", false},
                                           QuantizedFixture{"hf/qwen3_moe_int4_asym_f32", false},
                                           QuantizedFixture{"hf/qwen3_moe_fp8", false},
                                           QuantizedFixture{"hf/glm4_moe_fp8_block32", false}),
                         [](const auto& info) {
                           const std::string dir = info.param.dir;
                           return dir.substr(dir.find('/') + 1);
                         });

// FP8 checkpoints with 128 × 128 block scales run their dense GEMMs in FP8 (activations rounded to
// e4m3 per 128 values, as DeepSeek-V3 was trained): in less memory than BF16 copies, still picking
// PyTorch's top token on nearly every row. The bound on the logits' relative error is a loose one:
// e4m3 activations move logits far more than accumulation order does.
class CudaFp8Gemms : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaFp8Gemms, KeepTheGoldensChoicesInLessMemory) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::FixtureParamDir(GetParam());
  std::string error;
  auto fp8_gpu = CreateCudaBackend(0, &error);
  ASSERT_TRUE(fp8_gpu) << error;
  if (!fp8_gpu->fp8_gemms()) GTEST_SKIP() << "cuBLASLt has no FP8 block-scaled GEMMs on this device";
  auto bf16_gpu = CreateCudaBackend(0, &error);
  ASSERT_TRUE(bf16_gpu) << error;
  bf16_gpu->set_fp8_gemms(false);
  auto fp8 = LoadModel(dir, fp8_gpu.get());
  auto bf16 = LoadModel(dir, bf16_gpu.get());
  ASSERT_TRUE(fp8.ok() && bf16.ok());
  EXPECT_LT((*fp8)->prepared_weight_bytes(), (*bf16)->prepared_weight_bytes());
  const testing::Golden g = testing::LoadGolden(dir);
  const std::vector<int> chunks = {5, 11, 16};
  const std::vector<float> got = testing::RunGolden(**fp8, g, chunks), bf = testing::RunGolden(**bf16, g, chunks);
  const Agreement vs_golden = CompareLogits(got, g.logits, g.vocab), vs_bf16 = CompareLogits(got, bf, g.vocab);
  std::printf("%s with FP8 GEMMs: vs PyTorch %.4f (top %.3f), vs BF16 GEMMs %.4f (top %.3f)\n", GetParam().c_str(),
              vs_golden.worst_relative_error, vs_golden.top_agreement, vs_bf16.worst_relative_error,
              vs_bf16.top_agreement);
  EXPECT_GE(vs_golden.top_agreement, 0.9);
  EXPECT_LE(vs_golden.worst_relative_error, 0.5);
  EXPECT_GT(vs_bf16.worst_relative_error, 0.0) << "the FP8 GEMMs did not run";
}

INSTANTIATE_TEST_SUITE_P(Fp8Checkpoints, CudaFp8Gemms, ::testing::Values("hf/qwen3_moe_fp8", "hf/deepseek_v3_fp8"),
                         [](const auto& info) { return info.param.substr(info.param.find('/') + 1); });

}  // namespace
}  // namespace ls
