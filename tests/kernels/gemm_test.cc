// GEMM: matches a double-precision reference for every weight dtype and awkward shapes, and a
// row's result does not depend on how many rows are computed with it.
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/simd/isa.h"

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

// Gemm with `t` (w's weights, in any layout) against the double-precision product, writing over
// and accumulating into y.
void ExpectMatchesDoubleReference(const Weights& w, const Tensor& t, int M, int N, int K, std::mt19937& rng) {
  std::vector<float> x(M * K);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  std::vector<float> y(M * N, 7.f), y_acc(M * N, 1.f);
  Gemm(pool, x.data(), M, t, y.data(), false);
  Gemm(pool, x.data(), M, t, y_acc.data(), true);
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

TEST_P(GemmShapes, MatchesDoubleReference) {
  auto [dt, M, N, K] = GetParam();
  std::mt19937 rng(M * 131 + N * 7 + K);
  Weights w = MakeWeights(dt, N, K, rng);
  ExpectMatchesDoubleReference(w, w.t, M, N, K, rng);
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

// A packed copy of a weight, owning its storage.
struct PackedF32Weight {
  std::vector<unsigned char> bytes;
  Tensor t;
};
PackedF32Weight PackF32(const Tensor& w) {
  PackedF32Weight p;
  p.bytes.resize(PackedWeightBytes(w));
  p.t = PackWeight(w, p.bytes.data());
  return p;
}

class PackedGemmShapes : public ::testing::TestWithParam<std::tuple<DType, int, int, int>> {};

TEST_P(PackedGemmShapes, MatchesDoubleReference) {
  auto [dt, M, N, K] = GetParam();
  std::mt19937 rng(M * 31 + N * 17 + K);
  Weights w = MakeWeights(dt, N, K, rng);
  PackedF32Weight p = PackF32(w.t);
  ASSERT_EQ(p.t.layout, Layout::kPanels);
  ASSERT_EQ(p.t.stored_rows() % kPanelRows, 0);
  ExpectMatchesDoubleReference(w, p.t, M, N, K, rng);
}

// Row counts cover every tile height (1-12) and a remainder after full tiles; column counts
// cover partial panels and several panel groups.
INSTANTIATE_TEST_SUITE_P(
    All, PackedGemmShapes,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                       ::testing::Values(1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 29),
                       ::testing::Values(1, 31, 33, 70, 160), ::testing::Values(1, 16, 17, 100)));

TEST(PackedGemm, RowResultIndependentOfBatchAndThreads) {
  std::mt19937 rng(23);
  Weights w = MakeWeights(DType::kBF16, 300, 256, rng);
  PackedF32Weight p = PackF32(w.t);
  const int M = 37;
  std::vector<float> x(M * 256);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2), one_thread(1);
  std::vector<float> all(M * 300);
  Gemm(pool, x.data(), M, p.t, all.data());
  for (int m = 0; m < M; ++m) {
    std::vector<float> one(300);
    Gemm(one_thread, x.data() + m * 256, 1, p.t, one.data());
    for (int n = 0; n < 300; ++n) ASSERT_EQ(one[n], all[m * 300 + n]) << "row " << m << " col " << n;
  }
}

// More input rows than half of L2 holds (on the targets that widen weights, AVX2 and NEON: in
// row chunks of about a quarter of it), against the double reference.
TEST(PackedGemm, InputsLargerThanL2MatchTheReference) {
  const int K = 1024, N = 70;
  const int M = static_cast<int>(CpuL2Bytes() / (2 * K * 4)) + 70;
  std::mt19937 rng(41);
  Weights w = MakeWeights(DType::kBF16, N, K, rng);
  PackedF32Weight p = PackF32(w.t);
  ExpectMatchesDoubleReference(w, p.t, M, N, K, rng);
}

TEST(PackedGemm, RowSliceOfPanelsIsTheSameRows) {
  std::mt19937 rng(29);
  Weights w = MakeWeights(DType::kBF16, 96, 40, rng);
  PackedF32Weight p = PackF32(w.t);
  const Tensor mid = p.t.RowSlice(32, 64);
  std::vector<float> x(2 * 40);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(1);
  std::vector<float> full(2 * 96), part(2 * 64);
  Gemm(pool, x.data(), 2, p.t, full.data());
  Gemm(pool, x.data(), 2, mid, part.data());
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 64; ++n) ASSERT_EQ(part[m * 64 + n], full[m * 96 + 32 + n]);
}

// GemmMany gives each output exactly what its own Gemm call gives: packed and row-major
// weights of different widths, some accumulating, more outputs than one loop takes at once.
TEST(GemmMany, EachOutputEqualsItsOwnGemm) {
  std::mt19937 rng(31);
  const int M = 13, K = 70, kOutputs = 11;
  std::vector<float> x(M * K);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  std::vector<Weights> ws;
  std::vector<PackedF32Weight> packed;
  ws.reserve(kOutputs);
  packed.reserve(kOutputs);
  std::vector<Tensor> tensors;
  for (int i = 0; i < kOutputs; ++i) {
    ws.push_back(MakeWeights(i % 2 ? DType::kBF16 : DType::kF32, 20 + 17 * i, K, rng));
    packed.push_back(PackF32(ws.back().t));
    tensors.push_back(i % 3 ? packed.back().t : ws.back().t);
  }
  ThreadPool pool(2);
  std::vector<std::vector<float>> many(kOutputs), single(kOutputs);
  std::vector<GemmOutput> outs;
  for (int i = 0; i < kOutputs; ++i) {
    many[i].assign(M * tensors[i].rows, 0.5f);
    single[i] = many[i];
    outs.push_back({&tensors[i], many[i].data(), i % 4 == 1});
  }
  GemmMany(pool, x.data(), M, outs.data(), kOutputs);
  for (int i = 0; i < kOutputs; ++i) {
    Gemm(pool, x.data(), M, tensors[i], single[i].data(), i % 4 == 1);
    for (size_t j = 0; j < single[i].size(); ++j) ASSERT_EQ(many[i][j], single[i][j]) << "output " << i << " " << j;
  }
}

// Tasks over packed weights hold whole panels, and for fewer than four rows at least four of them
// (the tiles of few rows read four panels side by side) where the weight has columns enough for
// several tasks per thread; from four rows the work per task decides alone. Row-major weights keep
// their 16-column steps.
TEST(GemmColumnChunk, FewRowsTakeFourPanelsPerTask) {
  ThreadPool pool(2);
  Tensor w{nullptr, DType::kBF16, 2048, 2048};
  for (Layout layout : {Layout::kPanels, Layout::kPanelsInt8Dot, Layout::kPanelsBf16Dot}) {
    w.layout = layout;
    for (int64_t M : {1, 2, 3}) EXPECT_EQ(GemmColumnChunk(pool, M, w), 4 * kPanelRows) << "rows " << M;
    EXPECT_EQ(GemmColumnChunk(pool, 8, w), kPanelRows);
  }
  w.rows = 256;  // eight tasks of one panel: four per thread
  EXPECT_EQ(GemmColumnChunk(pool, 1, w), kPanelRows);
  w.rows = 2048;
  w.layout = Layout::kRowMajor;
  EXPECT_EQ(GemmColumnChunk(pool, 1, w), 32);
}

}  // namespace
}  // namespace ls::cpu
