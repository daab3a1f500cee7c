// GEMM: matches a double-precision reference for every weight dtype and awkward shapes, and a
// row's result does not depend on how many rows are computed with it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace ls::cpu {
namespace {

struct Weights {
  std::vector<uint16_t> half;
  std::vector<float> f32;
  std::vector<double> exact;  // the values as stored, widened
  Tensor t;
};

Weights MakeWeights(DType dt, int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  Weights w;
  w.exact.resize(n * k);
  if (dt == DType::kF32) {
    w.f32.resize(n * k);
    for (int64_t i = 0; i < n * k; ++i) w.exact[i] = w.f32[i] = nd(rng);
    w.t = Tensor{w.f32.data(), dt, n, k};
  } else {
    w.half.resize(n * k);
    for (int64_t i = 0; i < n * k; ++i) {
      w.half[i] = dt == DType::kBF16 ? F32ToBf16(nd(rng)) : F32ToF16(nd(rng));
      w.exact[i] = dt == DType::kBF16 ? Bf16ToF32(w.half[i]) : F16ToF32(w.half[i]);
    }
    w.t = Tensor{w.half.data(), dt, n, k};
  }
  return w;
}

class GemmShapes : public ::testing::TestWithParam<std::tuple<DType, int, int, int>> {};

TEST_P(GemmShapes, MatchesDoubleReference) {
  auto [dt, M, N, K] = GetParam();
  std::mt19937 rng(M * 131 + N * 7 + K);
  Weights w = MakeWeights(dt, N, K, rng);
  std::vector<float> x(M * K);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  std::vector<float> y(M * N, 1.f), y_acc(M * N, 1.f);
  Gemm(pool, x.data(), M, w.t, y.data(), false);
  Gemm(pool, x.data(), M, w.t, y_acc.data(), true);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += static_cast<double>(x[m * K + k]) * w.exact[n * K + k];
      const double tol = 1e-5 * std::sqrt(static_cast<double>(K)) * 4;
      ASSERT_NEAR(y[m * N + n], ref, tol) << "m=" << m << " n=" << n;
      ASSERT_NEAR(y_acc[m * N + n], ref + 1.0, tol) << "accumulate, m=" << m << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, GemmShapes,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16), ::testing::Values(1, 3, 4, 9),
                       ::testing::Values(1, 5, 33, 70), ::testing::Values(1, 15, 16, 17, 100)));

TEST(Gemm, RowResultIndependentOfBatch) {
  std::mt19937 rng(5);
  Weights w = MakeWeights(DType::kBF16, 67, 300, rng);
  const int M = 13;
  std::vector<float> x(M * 300);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  std::vector<float> all(M * 67);
  Gemm(pool, x.data(), M, w.t, all.data());
  for (int m = 0; m < M; ++m) {
    std::vector<float> one(67);
    Gemm(pool, x.data() + m * 300, 1, w.t, one.data());
    for (int n = 0; n < 67; ++n) ASSERT_EQ(one[n], all[m * 67 + n]) << "row " << m << " col " << n;
  }
}

TEST(Gemm, Avx512AndPortableAgree) {
  if (!internal::CpuHasAvx512()) GTEST_SKIP() << "CPU has no AVX-512";
  std::mt19937 rng(9);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    Weights w = MakeWeights(dt, 21, 77, rng);
    std::vector<float> x(6 * 77);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    std::vector<float> a(6 * 11), b(6 * 11);
    internal::GemmRangeAvx512(x.data(), 77, 6, w.t, 5, 16, a.data(), 11, false);
    internal::GemmRangeScalar(x.data(), 77, 6, w.t, 5, 16, b.data(), 11, false);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << DTypeName(dt) << " " << i;
  }
}

}  // namespace
}  // namespace ls::cpu
