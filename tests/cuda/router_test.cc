// The CUDA backend's router equals the CPU backend's: the same experts in the same order (where two
// keys lie within 1e-6 of each other the backends may order them differently, which the test
// accepts), and the same weights (tolerance 1e-5 relative, 1e-7 absolute); exact ties go to the
// lower index on both. Sigmoid and softmax, with and without bias, normalised or not, group-limited
// or not, up to 12000 experts. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::DeviceArray;

struct Case {
  int32_t experts, top_k;
  ScoringFunc scoring;
  bool bias, norm;
  float scale;
  int32_t n_group = 1, topk_group = 1;
};

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

// The router's parameters for a case, on the given (host or device) arrays.
RouterParams Params(const Case& c, int64_t T, const float* logits, const float* bias, int32_t* ids, float* weights) {
  RouterParams p;
  p.logits = logits;
  p.bias = c.bias ? bias : nullptr;
  p.num_tokens = T;
  p.num_experts = c.experts;
  p.top_k = c.top_k;
  p.scoring = c.scoring;
  p.norm_topk_prob = c.norm;
  p.routed_scaling_factor = c.scale;
  p.n_group = c.n_group;
  p.topk_group = c.topk_group;
  p.topk_ids = ids;
  p.topk_weights = weights;
  return p;
}

Result RunCpu(const std::vector<float>& logits, const std::vector<float>& bias, int64_t T, const Case& c) {
  CpuBackend cpu(2);
  Result r{std::vector<int32_t>(T * c.top_k), std::vector<float>(T * c.top_k)};
  cpu.Router(Params(c, T, logits.data(), bias.data(), r.ids.data(), r.weights.data()));
  return r;
}

Result RunCuda(CudaBackend& gpu, const std::vector<float>& logits, const std::vector<float>& bias, int64_t T,
               const Case& c) {
  DeviceArray<float> dlogits(logits), dbias(bias), dweights(T * c.top_k);
  DeviceArray<int32_t> dids(T * c.top_k);
  dids.Poison();
  dweights.Poison();
  gpu.Router(Params(c, T, dlogits.get(), dbias.get(), dids.get(), dweights.get()));
  return Result{dids.Download(), dweights.Download()};
}

// The CPU's selection key of expert e for token t: score + bias.
float Key(const std::vector<float>& logits, const std::vector<float>& bias, int64_t t, int32_t e, const Case& c) {
  const float* l = logits.data() + t * c.experts;
  float s;
  if (c.scoring == ScoringFunc::kSigmoid) {
    s = cpu::Sigmoid(l[e]);
  } else {
    float mx = l[0], sum = 0.f;
    for (int32_t i = 1; i < c.experts; ++i) mx = std::max(mx, l[i]);
    for (int32_t i = 0; i < c.experts; ++i) sum += std::exp(l[i] - mx);
    s = std::exp(l[e] - mx) / sum;
  }
  return s + (c.bias ? bias[e] : 0.f);
}

TEST(CudaRouter, MatchesCpuSelectionAndWeights) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Case cases[] = {
      {896, 16, ScoringFunc::kSigmoid, true, true, 2.5f},
      {37, 5, ScoringFunc::kSoftmax, false, false, 1.f},
      {64, 8, ScoringFunc::kSoftmax, true, true, 1.f},
      {12000, 4, ScoringFunc::kSigmoid, true, false, 0.7f},  // over 48 KiB of shared memory
      {256, 8, ScoringFunc::kSigmoid, true, true, 2.5f, 8, 4},  // DeepSeek-V3's group-limited routing
      {64, 6, ScoringFunc::kSigmoid, true, false, 1.f, 16, 3},
  };
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  std::mt19937 rng(10);
  for (const Case& c : cases) {
    const int64_t T = 45;
    const std::vector<float> logits = cuda_test::RandomFloats(T * c.experts, rng, 2.f);
    const std::vector<float> bias = cuda_test::RandomFloats(c.experts, rng, 0.05f);
    const Result want = RunCpu(logits, bias, T, c), got = RunCuda(*gpu, logits, bias, T, c);
    for (int64_t t = 0; t < T; ++t) {
      bool same = true;
      for (int32_t j = 0; j < c.top_k; ++j) {
        const int64_t i = t * c.top_k + j;
        if (got.ids[i] == want.ids[i]) continue;
        same = false;
        ASSERT_GE(got.ids[i], 0);
        ASSERT_LT(got.ids[i], c.experts);
        EXPECT_NEAR(Key(logits, bias, t, got.ids[i], c), Key(logits, bias, t, want.ids[i], c), 1e-6)
            << "N " << c.experts << " token " << t << " slot " << j << ": not a near tie";
      }
      if (!same) continue;
      for (int32_t j = 0; j < c.top_k; ++j) {
        const int64_t i = t * c.top_k + j;
        EXPECT_NEAR(got.weights[i], want.weights[i], 1e-7 + 1e-5 * std::fabs(want.weights[i]))
            << "N " << c.experts << " token " << t << " slot " << j;
      }
    }
  }
}

TEST(CudaRouter, BreaksExactTiesTowardsTheLowerIndex) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int32_t N = 40;
  const int64_t T = 9;
  std::mt19937 rng(11);
  const float values[] = {0.5f, -0.25f, 1.5f, 0.75f};  // few distinct logits: many exact ties
  std::uniform_int_distribution<int> pick(0, 3);
  std::vector<float> logits(T * N);
  for (auto& l : logits) l = values[pick(rng)];
  const std::vector<float> bias(N, 0.125f);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (ScoringFunc scoring : {ScoringFunc::kSigmoid, ScoringFunc::kSoftmax}) {
    const Case c{N, 7, scoring, true, true, 1.f};
    const Result want = RunCpu(logits, bias, T, c), got = RunCuda(*gpu, logits, bias, T, c);
    EXPECT_EQ(got.ids, want.ids);
    for (size_t i = 0; i < want.weights.size(); ++i)
      EXPECT_NEAR(got.weights[i], want.weights[i], 1e-7 + 1e-5 * std::fabs(want.weights[i])) << i;
  }
}

}  // namespace
}  // namespace ls
