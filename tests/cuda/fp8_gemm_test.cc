// FP8 block-scaled dense GEMMs (kernels/cuda/fp8_blocks.h): on the host, the weight scales are laid
// out as cuBLASLt reads them (k blocks contiguous, padded to four, partial edge blocks kept) and
// only e4m3 128 × 128 block-scaled weights in FP8 GEMM shapes qualify; on the device, the GEMM
// equals a double-precision product of the activations rounded per row and 128-column block
// (s = amax / 448, e4m3 round to nearest even) with the weight's values, within float32
// accumulation (1e-3 of the sum of the products' magnitudes: the FP8 tensor cores sum with fewer
// bits than float32 within a block), writing over and accumulating into y, for decode and prefill shapes, and a row's
// result does not depend on the batch. The device part reports SKIPPED without a device (or where
// cuBLASLt has no FP8 block-scaled GEMMs).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/fp8_blocks.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/weight_codes.cuh"
#include "kernels/quantized_weight.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::DeviceArray;

struct Fp8Weight {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // [ceil(N/128), ceil(K/128)] row-major, as checkpoints store them
  Tensor t;
};

Fp8Weight MakeWeight(int64_t N, int64_t K, std::mt19937& rng) {
  Fp8Weight w;
  w.codes.resize(N * K);
  std::normal_distribution<float> nd;
  for (auto& c : w.codes) c = F32ToF8E4M3(nd(rng) * 64.f);
  const int64_t nb = (N + 127) / 128, kb = (K + 127) / 128;
  w.scales.resize(nb * kb);
  for (auto& s : w.scales) s = std::ldexp(1.f + 0.5f * std::uniform_real_distribution<float>()(rng), -10);
  w.t = Tensor{w.codes.data(), DType::kF8E4M3, N, K};
  w.t.quant = QuantScales{w.scales.data(), nullptr, DType::kF32, 128, 128};
  return w;
}

TEST(Fp8Blocks, WeightScalesAreLaidOutAsCublasLtReadsThem) {
  std::mt19937 rng(1);
  const int64_t N = 272, K = 400;  // 3 row blocks (the last of 16 rows), 4 k blocks (the last of 16)
  const Fp8Weight w = MakeWeight(N, K, rng);
  ASSERT_TRUE(cuda::Fp8GemmFormat(w.t));
  EXPECT_EQ(cuda::Fp8WeightScaleStride(K), 4);
  EXPECT_EQ(cuda::Fp8WeightScaleStride(128 * 5), 8);
  const std::vector<float> s = cuda::Fp8WeightScales(w.t);
  ASSERT_EQ(s.size(), size_t{3 * 4});
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(s[n * 4 + k], w.scales[n * 4 + k]) << n << "," << k;
  const Fp8Weight odd = MakeWeight(32, 640, rng);  // 5 k blocks: padded to 8 with zeros
  const std::vector<float> so = cuda::Fp8WeightScales(odd.t);
  ASSERT_EQ(so.size(), size_t{8});
  for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(so[k], k < 5 ? odd.scales[k] : 0.f) << k;
}

TEST(Fp8Blocks, OnlyBlockScaledE4m3InFp8GemmShapesQualify) {
  std::mt19937 rng(2);
  Fp8Weight w = MakeWeight(64, 128, rng);
  EXPECT_TRUE(cuda::Fp8GemmFormat(w.t));
  Tensor t = w.t;
  t.quant.block_cols = 32;  // GLM-style 32-wide blocks: dequantized instead
  EXPECT_FALSE(cuda::Fp8GemmFormat(t));
  t = w.t;
  t.cols = 120;  // K not a multiple of 16
  EXPECT_FALSE(cuda::Fp8GemmFormat(t));
  t = w.t;
  t.dtype = DType::kI8;
  EXPECT_FALSE(cuda::Fp8GemmFormat(t));
}

// y = Σ_k x̂[m, k] · w[n, k] in double, x̂ the activations rounded per row and 128-column block;
// *mag the sums of |x̂ · w| (the scale of float32 accumulation's error).
std::vector<double> Reference(const std::vector<float>& x, int64_t M, const Fp8Weight& w, std::vector<double>* mag) {
  const int64_t N = w.t.rows, K = w.t.cols;
  std::vector<double> xr(M * K);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k0 = 0; k0 < K; k0 += 128) {
      const int64_t k1 = std::min(K, k0 + 128);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[m * K + k]));
      const float inv = amax > 0.f ? 448.f / amax : 0.f, s = amax / 448.f;
      for (int64_t k = k0; k < k1; ++k)
        xr[m * K + k] = static_cast<double>(cuda::E4M3ToF32(F32ToF8E4M3(x[m * K + k] * inv))) * s;
    }
  }
  std::vector<double> y(M * N, 0.0);
  mag->assign(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double p = xr[m * K + k] * WeightValue(w.t, n, k);
        y[m * N + n] += p;
        (*mag)[m * N + n] += std::fabs(p);
      }
  return y;
}

TEST(Fp8Blocks, GemmEqualsTheProductOfBlockRoundedActivations) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::string error;
  auto gemm = cuda::CublasLtGemm::Create(&error);
  ASSERT_NE(gemm, nullptr) << error;
  if (!gemm->SupportsFp8Blocks()) GTEST_SKIP() << "cuBLASLt has no FP8 block-scaled GEMMs on this device";
  struct Shape {
    int64_t M, N, K;
  };
  std::mt19937 rng(3);
  for (const Shape& s : {Shape{1, 256, 384}, Shape{7, 272, 400}, Shape{130, 512, 1024}}) {
    const Fp8Weight w = MakeWeight(s.N, s.K, rng);
    const std::vector<float> scales = cuda::Fp8WeightScales(w.t);
    DeviceArray<uint8_t> dcodes(w.codes);
    DeviceArray<float> dscales(scales);
    Tensor dw{dcodes.get(), DType::kF8E4M3, s.N, s.K};
    dw.quant = QuantScales{dscales.get(), nullptr, DType::kF32, 128, 128};
    const std::vector<float> x = cuda_test::RandomFloats(s.M * s.K, rng);
    std::vector<double> mag;
    const std::vector<double> want = Reference(x, s.M, w, &mag);
    for (bool accumulate : {false, true}) {
      std::vector<float> y0(s.M * s.N, 1.f);
      DeviceArray<float> dx(x), dy(y0);
      if (!accumulate) dy.Poison();
      gemm->RunFp8(dx.get(), s.M, dw, dy.get(), accumulate, nullptr);
      const std::vector<float> got = dy.Download();
      double worst = 0;
      for (int64_t i = 0; i < s.M * s.N; ++i) {
        const double ref = want[i] + (accumulate ? 1.0 : 0.0);
        worst = std::max(worst, std::fabs(got[i] - ref) / (mag[i] + 1e-30));
      }
      std::printf("FP8 GEMM M %lld N %lld K %lld%s: worst relative error %.2e\n", static_cast<long long>(s.M),
                  static_cast<long long>(s.N), static_cast<long long>(s.K), accumulate ? " accumulate" : "", worst);
      EXPECT_LE(worst, 1e-3) << "M " << s.M << " N " << s.N << " K " << s.K;
    }
    // Batch invariance: the first row alone gives the same bits.
    DeviceArray<float> dx(x), dy_all(std::vector<float>(s.M * s.N)), dy_one(std::vector<float>(s.N));
    gemm->RunFp8(dx.get(), s.M, dw, dy_all.get(), false, nullptr);
    gemm->RunFp8(dx.get(), 1, dw, dy_one.get(), false, nullptr);
    const std::vector<float> all = dy_all.Download(), one = dy_one.Download();
    for (int64_t n = 0; n < s.N; ++n) ASSERT_EQ(one[n], all[n]) << "M " << s.M << " n " << n;
  }
}

TEST(Fp8Blocks, GroupedGemmEqualsTheProductOfBlockRoundedActivations) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(4);
  const int64_t n = 96, k = 320;  // a partial column tile, a partial last k block
  const std::vector<int32_t> counts = {70, 5};
  const int64_t R = 75;
  std::vector<Fp8Weight> w;
  std::vector<std::unique_ptr<DeviceArray<uint8_t>>> codes;
  std::vector<std::unique_ptr<DeviceArray<float>>> scales;
  std::vector<cuda::ExpertWeight> table;
  for (int e = 0; e < 2; ++e) {
    w.push_back(MakeWeight(n, k, rng));
    codes.push_back(std::make_unique<DeviceArray<uint8_t>>(w.back().codes));
    scales.push_back(std::make_unique<DeviceArray<float>>(w.back().scales));
    cuda::ExpertWeight d;
    d.data = codes.back()->get();
    d.scale = scales.back()->get();
    d.scale_dtype = DType::kF32;
    d.block_rows = d.block_cols = 128;
    table.push_back(d);
  }
  DeviceArray<cuda::ExpertWeight> d_table(table);
  const std::vector<uint16_t> a = cuda_test::RandomBf16(R * k, rng, 1.f);
  std::vector<float> a_f32(R * k);
  for (int64_t i = 0; i < R * k; ++i) a_f32[i] = Bf16ToF32(a[i]);
  DeviceArray<uint16_t> d_a(a);
  DeviceArray<uint8_t> d_a8(static_cast<size_t>(R * k));
  DeviceArray<float> d_as(static_cast<size_t>(R * 3));
  cuda::RoundBf16RowsToFp8(d_a.get(), R, k, d_a8.get(), d_as.get(), nullptr);
  const cuda_test::DeviceExpertRows rows(counts);
  DeviceArray<float> d_y(static_cast<size_t>(R * n));
  d_y.Poison();
  cuda::GroupedGemmFp8(d_a8.get(), d_as.get(), cuda::ExpertMatrices{d_table.get(), DType::kF8E4M3}, n, k, rows.rows(),
                       d_y.get(), nullptr);
  const std::vector<float> got = d_y.Download();
  double worst = 0;
  for (int e = 0; e < 2; ++e) {
    const int64_t first = e == 0 ? 0 : 70, count = counts[e];
    const std::vector<float> x(a_f32.begin() + first * k, a_f32.begin() + (first + count) * k);
    std::vector<double> mag;
    const std::vector<double> want = Reference(x, count, w[e], &mag);
    for (int64_t i = 0; i < count * n; ++i)
      worst = std::max(worst, std::fabs(got[first * n + i] - want[i]) / (mag[i] + 1e-30));
  }
  std::printf("FP8 grouped GEMM: worst relative error %.2e\n", worst);
  EXPECT_LE(worst, 1e-3);
}

}  // namespace
}  // namespace ls
