// BF16-activation GEMM: the packing puts every value where the kernels read it, the kernel follows
// the instruction's summation rule (subnormals flushed; its bits on every SIMD target:
// simd_targets_test.cc), it is the double-precision product of the BF16-rounded rows within
// float32 rounding, a row's
// result does not depend on the rows beside it, and Gemm/GemmMany/HeadGemm reach it through the
// packed layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/gemm.h"

namespace ls::cpu {
namespace {

struct PackedBf16Weight {
  std::vector<uint16_t> src;
  std::vector<unsigned char> buf;
  Tensor t;
};

PackedBf16Weight MakePacked(int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  PackedBf16Weight p;
  p.src.resize(n * k);
  for (auto& v : p.src) v = F32ToBf16(nd(rng));
  const Tensor w{p.src.data(), DType::kBF16, n, k};
  p.buf.resize(Bf16DotPackedBytes(w) + 64);
  p.t = PackBf16DotWeight(w, p.buf.data());
  return p;
}

std::vector<float> RandomRows(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> x(m * k);
  for (auto& v : x) v = nd(rng);
  return x;
}

TEST(Bf16DotGemm, PackingPlacesEachRowsPairTogetherInPanelHalves) {
  std::mt19937 rng(1);
  const int64_t N = 45, K = 7;  // a partial panel and an odd k (padded to 8)
  PackedBf16Weight p = MakePacked(N, K, rng);
  EXPECT_EQ(p.t.layout, Layout::kPanelsBf16Dot);
  EXPECT_EQ(p.t.stored_cols(), 8);
  EXPECT_EQ(p.t.bytes(), size_t{64} * 8 * 2);
  const auto* v = static_cast<const uint16_t*>(p.t.data);
  for (int64_t n = 0; n < 64; ++n) {
    for (int64_t k = 0; k < 8; ++k) {
      const int64_t at = ((n / 32) * 4 + k / 2) * 64 + ((n % 32) / 16) * 32 + (n % 16) * 2 + k % 2;
      const uint16_t want = n < N && k < K ? p.src[n * K + k] : 0;
      ASSERT_EQ(v[at], want) << "row " << n << " k " << k;
    }
  }
}

TEST(Bf16DotGemm, RowsRoundToNearestEvenWithZeroPadding) {
  // 1 + 2^-8 is halfway between two BF16 values and rounds to the even one (1.0); 1 + 3·2^-8 is
  // halfway too and rounds up to the even 1 + 2^-6; the pad after an odd K is zero.
  const float x[3] = {1.f + 1.f / 256, 1.f + 3.f / 256, -2.5f};
  std::vector<uint16_t> st;
  const Bf16Rows r = RoundRowsToBf16(x, 3, 1, 3, &st);
  ASSERT_EQ(r.kp, 4);
  EXPECT_EQ(Bf16ToF32(r.v[0]), 1.f);
  EXPECT_EQ(Bf16ToF32(r.v[1]), 1.f + 4.f / 256);
  EXPECT_EQ(Bf16ToF32(r.v[2]), -2.5f);
  EXPECT_EQ(r.v[3], 0);
}

class Bf16DotShapes : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(Bf16DotShapes, IsNearTheRoundedProductAndAccumulates) {
  const auto [M, N, K] = GetParam();
  std::mt19937 rng(M * 1000 + N * 10 + K);
  PackedBf16Weight w = MakePacked(N, K, rng);
  const std::vector<float> x = RandomRows(M, K, rng);
  std::vector<uint16_t> st;
  const Bf16Rows r = RoundRowsToBf16(x.data(), K, M, K, &st);
  const int64_t n_end = N;
  std::vector<float> scalar(M * N, 3.f), acc(M * N, 1.f);
  Bf16DotGemmRange(r, w.t, 0, n_end, scalar.data(), N, false);
  Bf16DotGemmRange(r, w.t, 0, n_end, acc.data(), N, true);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(Bf16ToF32(r.v[m * r.kp + k])) * Bf16ToF32(w.src[n * K + k]);
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(scalar[m * N + n], ref, 2 * K * 6e-8 * mag + 1e-30) << "m=" << m << " n=" << n;
      ASSERT_EQ(acc[m * N + n], 1.f + scalar[m * N + n]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16DotShapes,
                         ::testing::Values(std::make_tuple(1, 32, 64), std::make_tuple(3, 45, 7),
                                           std::make_tuple(5, 100, 130), std::make_tuple(12, 96, 256),
                                           std::make_tuple(13, 33, 1), std::make_tuple(29, 200, 96),
                                           std::make_tuple(4, 416, 1024)));

TEST(Bf16DotGemm, SubnormalInputsAndSumsAreFlushedAsTheInstructionDoes) {
  // Weights that are BF16 subnormals count as zero; a sum that would be subnormal is zero.
  std::vector<uint16_t> src(32 * 4, 0);
  src[0] = 0x0001;                                // subnormal: read as zero
  src[1] = F32ToBf16(1.f);
  src[4 * 1 + 0] = F32ToBf16(std::ldexp(1.f, -70));  // row 1: a product of 2^-140, subnormal
  src[4 * 1 + 1] = 0;
  std::vector<unsigned char> buf(Bf16DotPackedBytes(Tensor{src.data(), DType::kBF16, 32, 4}));
  const Tensor w = PackBf16DotWeight(Tensor{src.data(), DType::kBF16, 32, 4}, buf.data());
  const float x[4] = {1.f, 2.f, 0.f, 0.f};
  const float x1[4] = {std::ldexp(1.f, -70), 0.f, 0.f, 0.f};
  std::vector<uint16_t> st;
  std::vector<float> y(32), y1(32);
  Bf16DotGemmRange(RoundRowsToBf16(x, 4, 1, 4, &st), w, 0, 32, y.data(), 32, false);
  EXPECT_EQ(y[0], 2.f);  // 1 · subnormal (zero) + 2 · 1
  Bf16DotGemmRange(RoundRowsToBf16(x1, 4, 1, 4, &st), w, 0, 32, y1.data(), 32, false);
  EXPECT_EQ(y1[1], 0.f);
  // A sum that rounds to a subnormal is zero: 2^-63 · 2^-64 = 2^-127 exactly.
  const float x2[4] = {std::ldexp(1.f, -63), 0.f, 0.f, 0.f};
  std::vector<uint16_t> src2(32 * 4, 0);
  src2[0] = F32ToBf16(std::ldexp(1.f, -64));
  std::vector<unsigned char> buf2(buf.size());
  const Tensor w2 = PackBf16DotWeight(Tensor{src2.data(), DType::kBF16, 32, 4}, buf2.data());
  std::vector<float> y2(32, 5.f);
  Bf16DotGemmRange(RoundRowsToBf16(x2, 4, 1, 4, &st), w2, 0, 32, y2.data(), 32, false);
  EXPECT_EQ(y2[0], 0.f);
}

TEST(Bf16DotGemm, ARowsResultDoesNotDependOnTheRowsBesideItOrTheThreads) {
  std::mt19937 rng(7);
  const int64_t N = 300, K = 200, M = 37;
  PackedBf16Weight w = MakePacked(N, K, rng);
  const std::vector<float> x = RandomRows(M, K, rng);
  ThreadPool one(1), two(2);
  std::vector<float> all(M * N);
  Gemm(two, x.data(), M, w.t, all.data());
  for (int64_t m : {0L, 11L, 12L, 36L}) {
    std::vector<float> row(N);
    Gemm(one, x.data() + m * K, 1, w.t, row.data());
    ASSERT_EQ(std::memcmp(row.data(), all.data() + m * N, N * 4), 0) << "row " << m;
  }
}

TEST(Bf16DotGemm, GemmManyAndPreparedRowsGiveGemmsResult) {
  std::mt19937 rng(9);
  const int64_t K = 96, M = 6;
  PackedBf16Weight a = MakePacked(64, K, rng), b = MakePacked(40, K, rng);
  const std::vector<float> x = RandomRows(M, K, rng);
  ThreadPool pool(2);
  std::vector<float> ya(M * 64), yb(M * 40), ma(M * 64), mb(M * 40, 1.f);
  Gemm(pool, x.data(), M, a.t, ya.data());
  Gemm(pool, x.data(), M, b.t, yb.data());
  const GemmOutput outs[2] = {{&a.t, ma.data(), false}, {&b.t, mb.data(), true}};
  GemmMany(pool, x.data(), M, outs, 2);
  for (int64_t i = 0; i < M * 64; ++i) ASSERT_EQ(ma[i], ya[i]);
  for (int64_t i = 0; i < M * 40; ++i) ASSERT_EQ(mb[i], 1.f + yb[i]);
  // Rows prepared once and sliced, as the routed experts use them.
  GemmRowsStorage st;
  const GemmRows rows = PrepareRows(x.data(), K, M, a.t, &st);
  ASSERT_EQ(rows.layout, Layout::kPanelsBf16Dot);
  std::vector<float> part(2 * 64);
  GemmRange(rows.Slice(3, 2), a.t, 0, 64, part.data(), 64, false);
  for (int64_t i = 0; i < 2 * 64; ++i) ASSERT_EQ(part[i], ya[3 * 64 + i]);
}

}  // namespace
}  // namespace ls::cpu
