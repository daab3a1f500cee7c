// The CUDA backend end to end: on every fixture, the logits of a chunked prefill and 16 decode
// steps agree with the PyTorch goldens and with the CPU backend; on the tiny model, a batch of
// sequences decoding together through the paged KV cache agrees with the CPU backend step by
// step, also with its experts placed on two device workers. BF16 GEMM operands on the GPU bound
// the agreement with the CPU: relative L2 error per row ≤ 3e-2 and the same top token on at
// least 90% of rows. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/test_util.h"

namespace ls {
namespace {

constexpr double kMaxRelativeError = 3e-2;
constexpr double kMinTopAgreement = 0.9;

struct Agreement {
  double worst_relative_error = 0;
  double top_agreement = 0;
};

Agreement Compare(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
  Agreement a;
  const size_t rows = want.size() / vocab;
  size_t same_top = 0;
  for (size_t r = 0; r < rows; ++r) {
    double diff = 0, norm = 0;
    size_t top_got = 0, top_want = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double g = got[r * vocab + v], w = want[r * vocab + v];
      if (!std::isfinite(g)) return {1e30, 0};
      diff += (g - w) * (g - w);
      norm += w * w;
      if (got[r * vocab + v] > got[r * vocab + top_got]) top_got = v;
      if (want[r * vocab + v] > want[r * vocab + top_want]) top_want = v;
    }
    a.worst_relative_error = std::max(a.worst_relative_error, std::sqrt(diff / std::max(norm, 1e-30)));
    same_top += top_got == top_want;
  }
  a.top_agreement = static_cast<double>(same_top) / rows;
  return a;
}

std::unique_ptr<Backend> Gpu() {
  std::string error;
  auto b = CreateCudaBackend(0, &error);
  EXPECT_TRUE(b) << error;
  return b;
}

// One model directory loaded on the CPU backend and on the CUDA backend.
struct BothBackends {
  explicit BothBackends(const std::string& dir) : gpu(Gpu()) {
    if (!gpu) return;
    auto c = StableLatentMoe::Load(dir, &cpu);
    auto g = StableLatentMoe::Load(dir, gpu.get());
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(g.ok()) << g.status();
    if (c.ok() && g.ok()) cpu_model = std::move(*c), gpu_model = std::move(*g);
  }
  bool ok() const { return cpu_model && gpu_model; }

  CpuBackend cpu{2};
  std::unique_ptr<Backend> gpu;
  std::unique_ptr<StableLatentMoe> cpu_model, gpu_model;
};

class CudaFixtureLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaFixtureLogits, MatchGoldensAndCpuBackend) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::FixtureDir(GetParam());
  const testing::Golden g = testing::LoadGolden(dir);
  BothBackends b(dir);
  ASSERT_TRUE(b.ok());
  const std::vector<int> chunks = {5, 11, 16};
  const std::vector<float> want_cpu = testing::RunGolden(*b.cpu_model, g, chunks);
  const std::vector<float> got = testing::RunGolden(*b.gpu_model, g, chunks);
  ASSERT_EQ(got.size(), g.logits.size());
  for (const auto* want : {&g.logits, &want_cpu}) {
    const Agreement a = Compare(got, *want, g.vocab);
    EXPECT_LE(a.worst_relative_error, kMaxRelativeError) << (want == &g.logits ? "vs PyTorch" : "vs CPU backend");
    EXPECT_GE(a.top_agreement, kMinTopAgreement) << (want == &g.logits ? "vs PyTorch" : "vs CPU backend");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFixtureLogits, ::testing::ValuesIn(testing::FixtureNames()),
                         [](const auto& info) { return info.param; });

// Four sequences of different prompt lengths prefill together, then decode 12 steps together.
std::vector<std::vector<float>> RunBatch(StableLatentMoe& model) {
  const ModelConfig& c = model.config();
  constexpr int32_t kBlock = 16, kSeqs = 4, kSteps = 12;
  KvCache cache(model.backend(), c, kSeqs * 4, kBlock);
  std::vector<StepSequence> seqs(kSeqs);
  StepBatch b;
  for (int32_t i = 0; i < kSeqs; ++i) {
    for (int32_t k = 0; k < 4; ++k) seqs[i].block_table.push_back(k * kSeqs + (kSeqs - 1 - i));
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
  for (size_t s = 0; s < want.size(); ++s) {
    const Agreement a = Compare(got[s], want[s], b.cpu_model->config().vocab_size);
    EXPECT_LE(a.worst_relative_error, kMaxRelativeError) << "step " << s;
    EXPECT_GE(a.top_agreement, 0.75) << "step " << s;  // 4 rows per step: at most one may differ
  }
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
  auto model = StableLatentMoe::Load(dir, gpu.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  const auto want = RunBatch(**model);
  for (int32_t D : {1, 2}) {
    const ExpertPlacement p = SpreadExperts(static_cast<int32_t>(c.n_routed_experts), D);
    ASSERT_TRUE(p.Validate().ok());
    std::vector<std::pair<int32_t, ExpertPlacement>> placements;
    for (int32_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) placements.emplace_back(l, p);
    auto placed = (*model)->BuildPlacedExperts(placements);
    ASSERT_TRUE(placed.ok()) << placed.status();
    (*model)->SetPlacedExperts(*placed);
    const auto got = RunBatch(**model);
    for (size_t s = 0; s < want.size(); ++s) {
      const Agreement a = Compare(got[s], want[s], c.vocab_size);
      EXPECT_LE(a.worst_relative_error, 1e-3) << D << " device(s), step " << s;
      EXPECT_EQ(a.top_agreement, 1.0) << D << " device(s), step " << s;
    }
    int64_t rows = 0;
    for (int64_t r : (*model)->device_row_counts()) rows += r;
    EXPECT_GT(rows, 0);
    (*model)->SetPlacedExperts(nullptr);
  }
}

}  // namespace
}  // namespace ls
