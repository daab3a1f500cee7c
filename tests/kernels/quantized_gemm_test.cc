// The quantized packed GEMM: for every format the CPU backend serves (FP8 blocks, int8 per row,
// int4 with BF16 or F32 scales with and without zero points, MXFP4), awkward shapes (partial panels
// and partial scale blocks) match a double-precision product over the weights' defined values; the
// active SIMD target's kernel equals the portable one bit for bit; a row's result does not depend on the batch;
// and the MoE experts read packed quantized weights like any other.
#include "kernels/cpu/quantized_gemm.h"

#include <gtest/gtest.h>

#include <array>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/quantized_weight.h"

namespace ls::cpu {
namespace {

struct Format {
  const char* name;
  DType codes, scales;
  int32_t block_rows, block_cols;
  bool zero;
};

const Format kFormats[] = {
    {"fp8_block128", DType::kF8E4M3, DType::kF32, 128, 128, false},
    {"fp8_block16x8_bf16", DType::kF8E4M3, DType::kBF16, 16, 8, false},
    {"int8_per_row", DType::kI8, DType::kF32, 1, 1 << 20, false},
    {"int4_g32_bf16", DType::kU4, DType::kBF16, 1, 32, false},
    {"int4_g32_f32", DType::kU4, DType::kF32, 1, 32, false},
    {"int4_g32_bf16_zero", DType::kU4, DType::kBF16, 1, 32, true},
    {"int4_g16_f16_zero", DType::kU4, DType::kF16, 1, 16, true},
    {"mxfp4", DType::kE2M1, DType::kE8M0, 1, 32, false},
    // Scales of 2^-87, 2^-9 and 2^65 mixed: the kernel's two ways of applying a group's
    // power-of-two scales (to the accumulators, or, outside [2^-64, 2^63], to every weight).
    {"mxfp4_wide_scales", DType::kE2M1, DType::kE8M0, 1, 32, false},
};

struct Weight {
  std::vector<uint8_t> codes, scales, zeros;
  Tensor t;  // row-major
};

Weight MakeWeight(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng) {
  Weight w;
  w.codes.resize(DTypeBytes(f.codes, rows * cols));
  for (auto& c : w.codes) {
    c = static_cast<uint8_t>(rng());
    if (f.codes == DType::kF8E4M3 && (c & 0x7f) == 0x7f) c ^= 0x40;  // no NaN codes
  }
  const int32_t bc = static_cast<int32_t>(std::min<int64_t>(f.block_cols, cols));
  const int64_t gr = (rows + f.block_rows - 1) / f.block_rows, gc = (cols + bc - 1) / bc;
  w.scales.resize(DTypeBytes(f.scales, gr * gc));
  std::uniform_real_distribution<float> u(0.005f, 0.05f);
  for (int64_t i = 0; i < gr * gc; ++i) {
    const float s = u(rng);
    switch (f.scales) {
      case DType::kE8M0:
        w.scales[i] = static_cast<uint8_t>(
            (std::string(f.name) == "mxfp4_wide_scales" ? std::array<int, 3>{40, 118, 192}[rng() % 3] : 118) + rng() % 6);
        break;
      case DType::kF32:
        std::memcpy(&w.scales[4 * i], &s, 4);
        break;
      default: {
        const uint16_t h = f.scales == DType::kBF16 ? F32ToBf16(s) : F32ToF16(s);
        std::memcpy(&w.scales[2 * i], &h, 2);
      }
    }
  }
  if (f.zero) {
    w.zeros.resize(gr * gc);
    for (auto& z : w.zeros) z = static_cast<uint8_t>(rng() % 16);
  }
  w.t = Tensor{w.codes.data(),
               f.codes,
               rows,
               cols,
               Layout::kRowMajor,
               QuantScales{w.scales.data(), f.zero ? w.zeros.data() : nullptr, f.scales, f.block_rows, bc}};
  return w;
}

struct PackedQuantizedWeight {
  std::vector<uint8_t> storage;
  Tensor t;
};
PackedQuantizedWeight PackQuantized(const Tensor& w) {
  PackedQuantizedWeight p;
  p.storage.resize(PackedWeightBytes(w) + 64);
  void* dst = p.storage.data() + (64 - reinterpret_cast<uintptr_t>(p.storage.data()) % 64) % 64;
  p.t = PackWeight(w, dst);
  return p;
}

class QuantizedGemm : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(QuantizedGemm, MatchesDoubleReferenceAndPortableKernelBitForBit) {
  const auto [fi, M, N, K] = GetParam();
  const Format& f = kFormats[fi];
  if (DTypeBits(f.codes) == 4 && K % 2 != 0) GTEST_SKIP() << "4-bit rows hold whole bytes";
  std::mt19937 rng(fi * 1000 + M * 131 + N * 7 + K);
  const Weight w = MakeWeight(f, N, K, rng);
  const PackedQuantizedWeight p = PackQuantized(w.t);
  ASSERT_EQ(p.t.layout, Layout::kPanels);
  std::vector<float> x(M * K);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  std::vector<float> y(M * N, 7.f), y_acc(M * N, 1.f), y_scalar(M * N, 0.f);
  Gemm(pool, x.data(), M, p.t, y.data(), false);
  Gemm(pool, x.data(), M, p.t, y_acc.data(), true);
  TargetKernels(SimdTarget::kPortable)->QuantizedGemmRange(x.data(), K, M, p.t, 0, N, y_scalar.data(), N, false);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double v = static_cast<double>(x[m * K + k]) * WeightValue(w.t, n, k);
        ref += v;
        mag += std::fabs(v);
      }
      const double tol = 1e-6 * mag + 1e-30;
      ASSERT_NEAR(y[m * N + n], ref, tol) << f.name << " m=" << m << " n=" << n;
      ASSERT_NEAR(y_acc[m * N + n], ref + 1.0, tol + 1e-6) << f.name << " accumulate, m=" << m << " n=" << n;
      ASSERT_EQ(y[m * N + n], y_scalar[m * N + n]) << f.name << " portable kernel, m=" << m << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, QuantizedGemm,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kFormats))),
                                            ::testing::Values(1, 4, 13), ::testing::Values(5, 33, 70, 130),
                                            ::testing::Values(8, 40, 136)),
                         [](const auto& info) {
                           return std::string(kFormats[std::get<0>(info.param)].name) + "_M" +
                                  std::to_string(std::get<1>(info.param)) + "_N" +
                                  std::to_string(std::get<2>(info.param)) + "_K" +
                                  std::to_string(std::get<3>(info.param));
                         });

TEST(QuantizedGemmBatch, RowResultIndependentOfBatch) {
  std::mt19937 rng(9);
  for (const Format& f : kFormats) {
    const Weight w = MakeWeight(f, 97, 200, rng);
    const PackedQuantizedWeight p = PackQuantized(w.t);
    const int M = 25;
    std::vector<float> x(M * 200);
    std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(rng);
    ThreadPool pool(2);
    std::vector<float> all(M * 97);
    Gemm(pool, x.data(), M, p.t, all.data(), false);
    for (int m = 0; m < M; ++m) {
      std::vector<float> one(97);
      Gemm(pool, x.data() + m * 200, 1, p.t, one.data(), false);
      for (int n = 0; n < 97; ++n) ASSERT_EQ(one[n], all[m * 97 + n]) << f.name << " m=" << m << " n=" << n;
    }
  }
}

TEST(QuantizedGemmBatch, MoeExpertsReadPackedWeights) {
  // Two int4 experts through the backend: each token's output equals its expert's GLU computed
  // with the dense GEMM over the same packed weights.
  std::mt19937 rng(10);
  CpuBackend be(2);
  const int64_t d = 64, f = 32, T = 5;
  const Format& fmt = kFormats[3];
  std::vector<Weight> host;
  std::vector<Tensor> gate, up, down;
  std::vector<std::vector<uint8_t>> storage;
  for (int e = 0; e < 2; ++e) {
    for (auto [rows, cols, list] : {std::tuple{f, d, &gate}, std::tuple{f, d, &up}, std::tuple{d, f, &down}}) {
      host.push_back(MakeWeight(fmt, rows, cols, rng));
      const Tensor& t = host.back().t;
      storage.emplace_back(be.PreparedWeightBytes(t, WeightUse::kMatmul));
      list->push_back(be.PrepareWeight(t, WeightUse::kMatmul, storage.back().data()));
    }
  }
  std::vector<float> z(T * d);
  std::normal_distribution<float> nd;
  for (auto& v : z) v = nd(rng);
  const std::vector<int32_t> ids = {1, 0, 1, 1, 0};
  const std::vector<float> weights(T, 1.f);
  std::vector<float> out(T * d);
  MoeParams p;
  p.z = z.data();
  p.num_tokens = T;
  p.in_width = p.out_width = d;
  p.topk_ids = ids.data();
  p.topk_weights = weights.data();
  p.top_k = 1;
  p.num_experts = 2;
  p.gate = gate.data();
  p.up = up.data();
  p.down = down.data();
  p.act = Activation::kSiLU;
  p.out = out.data();
  be.MoeExperts(p);
  for (int64_t t = 0; t < T; ++t) {
    const int e = ids[t];
    std::vector<float> g(f), u(f), a(f), o(d);
    be.Gemm(z.data() + t * d, 1, gate[e], g.data(), false);
    be.Gemm(z.data() + t * d, 1, up[e], u.data(), false);
    be.GluActivation(g.data(), u.data(), 1, f, Activation::kSiLU, a.data());
    be.Gemm(a.data(), 1, down[e], o.data(), false);
    for (int64_t i = 0; i < d; ++i) ASSERT_EQ(out[t * d + i], o[i]) << "token " << t << " column " << i;
  }
}

}  // namespace
}  // namespace ls::cpu

namespace ls::cpu {
namespace {

// Weights quantized for int8 activations (w8a8: I8 per row; w4a8: U4 in groups of 32 with BF16
// scales; stored int4 checkpoints under --activation_dtype int8: U4 in groups of 8 with F16 scales,
// and with zero points and float32 scales) run the VNNI kernels: the product equals a
// double-precision one over the activations rounded to int8 per row (s = amax / 127) and the
// weights' values; the VNNI kernel equals the portable one bit for bit; a row's result does not
// depend on the batch.
class Int8ActivationGemm : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(Int8ActivationGemm, MatchesRoundedActivationsReference) {
  const auto [fi, M, N, K] = GetParam();
  const Format formats[] = {{"w8a8", DType::kI8, DType::kF32, 1, 1 << 20, false},
                            {"w4a8", DType::kU4, DType::kBF16, 1, 32, false},
                            {"int4_f16_scales", DType::kU4, DType::kF16, 1, 8, false},
                            {"int4_zero_points", DType::kU4, DType::kF32, 1, 32, true}};
  const Format f = formats[fi];
  std::mt19937 rng(fi * 1000 + M * 131 + N * 7 + K);
  Weight w = MakeWeight(f, N, K, rng);
  w.t.quant.int8_activations = true;
  ASSERT_TRUE(UsesInt8Dot(w.t));
  const PackedQuantizedWeight p = PackQuantized(w.t);
  ASSERT_EQ(p.t.layout, Layout::kPanelsInt8Dot);
  std::vector<float> x(M * K);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  std::vector<float> y(M * N, 7.f), y_acc(M * N, 1.f), y_scalar(M * N, 0.f);
  Gemm(pool, x.data(), M, p.t, y.data(), false);
  Gemm(pool, x.data(), M, p.t, y_acc.data(), true);
  Int8RowsStorage storage;
  const Int8Rows rows =
      internal::QuantizeRows(x.data(), K, M, K, f.codes == DType::kU4 ? p.t.quant.block_cols : 0, &storage);
  TargetKernels(SimdTarget::kPortable)->Int8DotRange(rows, p.t, 0, N, y_scalar.data(), N, false);
  for (int m = 0; m < M; ++m) {
    double amax = 0;
    for (int k = 0; k < K; ++k) amax = std::max(amax, std::fabs(static_cast<double>(x[m * K + k])));
    for (int n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const float q = std::nearbyint(x[m * K + k] * (127.f / static_cast<float>(amax)));
        const double v = q * (amax / 127) * WeightValue(w.t, n, k);
        ref += v;
        mag += std::fabs(v);
      }
      const double tol = 1e-5 * mag + 1e-30;
      ASSERT_NEAR(y[m * N + n], ref, tol) << f.name << " m=" << m << " n=" << n;
      ASSERT_NEAR(y_acc[m * N + n], ref + 1.0, tol + 1e-6) << f.name << " accumulate, m=" << m << " n=" << n;
      ASSERT_EQ(y[m * N + n], y_scalar[m * N + n]) << f.name << " portable kernel, m=" << m << " n=" << n;
    }
  }
  // Batch invariance: each row alone gives the same bits.
  for (int m = 0; m < M; ++m) {
    std::vector<float> one(N);
    Gemm(pool, x.data() + m * K, 1, p.t, one.data(), false);
    for (int n = 0; n < N; ++n) ASSERT_EQ(one[n], y[m * N + n]) << f.name << " m=" << m << " n=" << n;
  }
}

// The int8 row rounding (vectorized; group sizes not a multiple of 16 in a scalar loop) gives, for every row, the codes,
// unsigned codes, scale and group sums of its definition: s = amax / 127 over the finite and
// infinite |x| (NaNs skipped), q = round-to-nearest-even(x · 127 / amax) clamped to ±127 (a NaN,
// or x · 0 for an infinite amax's infinities, to -127), the padding 0 (unsigned 128).
TEST(Int8Rows, RoundingFollowsItsDefinitionForEveryShape) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int64_t K : {1, 7, 16, 31, 64, 100, 1024}) {
    for (int64_t group : {0, 16, 32, 12}) {
      const int64_t M = 4;
      std::vector<float> x(M * (K + 3));
      for (auto& v : x) v = nd(rng) * 3;
      const int64_t ld = K + 3;
      x[1 * ld + K / 2] = std::nanf("");                            // row 1: a NaN among values
      x[2 * ld + 0] = std::numeric_limits<float>::infinity();       // row 2: an infinite row
      for (int64_t k = 0; k < K; ++k) x[3 * ld + k] = 0.5f * (k % 5) - 1.f;  // row 3: exact halves
      Int8RowsStorage st;
      const Int8Rows r = internal::QuantizeRows(x.data(), ld, M, K, group, &st);
      ASSERT_EQ(r.kp, (K + 3) / 4 * 4);
      for (int64_t m = 0; m < M; ++m) {
        float amax = 0.f;
        for (int64_t k = 0; k < K; ++k)
          if (!std::isnan(x[m * ld + k])) amax = std::max(amax, std::fabs(x[m * ld + k]));
        const float inv = amax > 0.f ? 127.f / amax : 0.f;
        ASSERT_EQ(r.scale[m], amax / 127.f) << "K=" << K << " m=" << m;
        std::vector<int32_t> sums(r.groups, 0);
        for (int64_t k = 0; k < r.kp; ++k) {
          int32_t want = 0;
          if (k < K) {
            const float v = x[m * ld + k] * inv;
            want = std::isnan(v) ? -127 : static_cast<int32_t>(std::clamp(std::nearbyint(v), -127.f, 127.f));
            if (group > 0) sums[k / group] += want;
          }
          ASSERT_EQ(r.q[m * r.kp + k], want) << "K=" << K << " group=" << group << " m=" << m << " k=" << k;
          ASSERT_EQ(r.u[m * r.kp + k], want + 128) << "K=" << K << " m=" << m << " k=" << k;
        }
        for (int64_t g = 0; g < r.groups; ++g) ASSERT_EQ(r.sums[m * r.groups + g], sums[g]) << "K=" << K << " g=" << g;
      }
    }
  }
}

// U4 sums at their bounds: every code 15 (or 0) against activations of ±127 in every quad, in groups
// of 32 (one run of DotU4 per group) and of 128 (runs widened into int32 along the group). A target
// that keeps narrow partial sums (16-bit pairs on AVX2) must not overflow or saturate them.
TEST(Int8ActivationGemmBounds, ExtremeCodesAndActivationsSumExactly) {
  const int64_t N = 40, K = 256;
  ThreadPool pool(2);
  for (int32_t group : {32, 128})
    for (uint8_t code : {uint8_t{0xff}, uint8_t{0x00}})
      for (float sign : {1.f, -1.f}) {
        std::mt19937 rng(group + code);
        Weight w = MakeWeight(Format{"w4a8", DType::kU4, DType::kBF16, 1, group, false}, N, K, rng);
        std::fill(w.codes.begin(), w.codes.end(), code);
        w.t.quant.int8_activations = true;
        const PackedQuantizedWeight p = PackQuantized(w.t);
        ASSERT_EQ(p.t.layout, Layout::kPanelsInt8Dot);
        const std::vector<float> x(2 * K, sign);  // every activation code ±127
        std::vector<float> y(2 * N);
        Gemm(pool, x.data(), 2, p.t, y.data(), false);
        for (int m = 0; m < 2; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double ref = 0;
            for (int64_t k = 0; k < K; ++k) ref += sign * WeightValue(w.t, n, k);
            ASSERT_NEAR(y[m * N + n], ref, 1e-5 * std::fabs(ref))
                << "group " << group << " code " << int{code} << " sign " << sign << " n=" << n;
          }
      }
}

INSTANTIATE_TEST_SUITE_P(All, Int8ActivationGemm,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(1, 5, 14),
                                            ::testing::Values(5, 70, 130), ::testing::Values(8, 40, 136)));

}  // namespace
}  // namespace ls::cpu
