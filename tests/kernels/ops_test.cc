// Elementwise and small ops against their formulas (docs/math.md): SiTU, RMSNorm, RoPE, MoE combine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/vector_math.h"

namespace ls::cpu {
namespace {

TEST(SiTU, IsSigmoidTimesTanh) {
  for (float x : {-20.f, -1.f, 0.f, 0.01f, 1.f, 20.f}) {
    const double ref = 1.0 / (1.0 + std::exp(-double(x))) * std::tanh(double(x));
    EXPECT_NEAR(SiTU(x), ref, 1e-6) << x;
  }
  EXPECT_NEAR(SiTU(1e-3f), 0.5e-3f, 1e-6);  // ≈ x/2 near zero
  EXPECT_NEAR(SiTU(-30.f), 0.f, 1e-6);      // ~0 for large negative x
}

TEST(RmsNorm, MatchesFormula) {
  ThreadPool pool(1);
  std::vector<float> x = {1.f, -2.f, 3.f, 0.5f, 4.f, 0.f, -1.f, 2.f}, w = {1.f, 0.5f, 2.f, -1.f}, out(8);
  RmsNorm(pool, x.data(), 2, Tensor{w.data(), DType::kF32, 1, 4}, 1e-6f, out.data());
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < 4; ++i) ss += x[r * 4 + i] * x[r * 4 + i];
    const double inv = 1.0 / std::sqrt(ss / 4 + 1e-6);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[r * 4 + i], x[r * 4 + i] * inv * w[i], 1e-6);
  }
}

// Rows of model widths (more than one vector, a partial last vector), BF16 weights widened.
TEST(RmsNorm, WideRowsMatchFormula) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (int width : {16, 64, 100, 256}) {
    const int rows = 300;  // enough values for the parallel path at the larger widths
    std::vector<float> x(rows * width), out(rows * width);
    std::vector<uint16_t> w(width);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = F32ToBf16(1.f + 0.1f * nd(rng));
    RmsNorm(pool, x.data(), rows, Tensor{w.data(), DType::kBF16, 1, width}, 1e-6f, out.data());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < width; ++i) ss += double(x[r * width + i]) * x[r * width + i];
      const double inv = 1.0 / std::sqrt(ss / width + 1e-6);
      for (int i = 0; i < width; ++i)
        ASSERT_NEAR(out[r * width + i], x[r * width + i] * inv * Bf16ToF32(w[i]), 1e-5) << width << " " << r;
    }
  }
}

TEST(SigmoidRow, MatchesFormulaEverywhere) {
  for (int n : {1, 15, 16, 17, 64, 100}) {
    std::vector<float> x(n), o(n);
    for (int i = 0; i < n; ++i) x[i] = -100.f + 200.f * i / std::max(1, n - 1) + (i % 3) * 0.37f;
    if (n > 2) x[1] = 0.f, x[2] = 1e-4f;
    SigmoidRow(x.data(), o.data(), n);
    for (int i = 0; i < n; ++i) {
      const double ref = 1.0 / (1.0 + std::exp(-double(x[i])));
      ASSERT_NEAR(o[i], ref, 4e-7 * ref + 1e-30) << "n=" << n << " x=" << x[i];
    }
  }
}

// inv_freq of RoPE with base `theta` over `dims` rotary dims.
std::vector<float> InvFreq(double theta, int dims) {
  std::vector<float> f(dims / 2);
  for (int i = 0; i < dims / 2; ++i) f[i] = static_cast<float>(std::pow(theta, -2.0 * i / dims));
  return f;
}

TEST(Rope, RotatesPairsIAndIPlusHalf) {
  ThreadPool pool(1);
  const int hd = 6;
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, orig = x;
  const int32_t pos = 7;
  const std::vector<float> f = InvFreq(100.0, hd);
  RopeParams p{.num_heads = 1, .head_dim = hd, .rotary_dim = hd, .inv_freq = f.data()};
  Rope(pool, x.data(), 1, &pos, p);
  for (int i = 0; i < 3; ++i) {
    const double a = pos * std::pow(100.0, -2.0 * i / hd);
    EXPECT_NEAR(x[i], orig[i] * std::cos(a) - orig[i + 3] * std::sin(a), 1e-4);
    EXPECT_NEAR(x[i + 3], orig[i + 3] * std::cos(a) + orig[i] * std::sin(a), 1e-4);
  }
}

// Partial rotary: only the first rotary_dim dims of each head turn (rotate-half within them), the
// rest pass through; the attention scaling multiplies the rotated part only.
TEST(Rope, PartialRotaryLeavesTheRestAndScales) {
  ThreadPool pool(1);
  const int hd = 8, rot = 4, heads = 2;
  std::vector<float> x(heads * hd);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f + static_cast<float>(i);
  const std::vector<float> orig = x, f = InvFreq(50.0, rot);
  const int32_t pos = 5;
  RopeParams p{.num_heads = heads, .head_dim = hd, .rotary_dim = rot, .inv_freq = f.data(), .attention_scaling = 1.5f};
  Rope(pool, x.data(), 1, &pos, p);
  for (int h = 0; h < heads; ++h) {
    const float* o = orig.data() + h * hd;
    const float* v = x.data() + h * hd;
    for (int i = 0; i < rot / 2; ++i) {
      const double a = pos * f[i], c = 1.5 * std::cos(a), sn = 1.5 * std::sin(a);
      EXPECT_NEAR(v[i], o[i] * c - o[i + rot / 2] * sn, 1e-4);
      EXPECT_NEAR(v[i + rot / 2], o[i + rot / 2] * c + o[i] * sn, 1e-4);
    }
    for (int i = rot; i < hd; ++i) EXPECT_EQ(v[i], o[i]) << "head " << h << " dim " << i;
  }
}

// Interleaved pairs (2i, 2i + 1), DeepSeek's convention.
TEST(Rope, InterleavedRotatesAdjacentPairs) {
  ThreadPool pool(1);
  const int hd = 6;
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, orig = x;
  const int32_t pos = 3;
  const std::vector<float> f = InvFreq(10.0, hd);
  RopeParams p{.num_heads = 1, .head_dim = hd, .rotary_dim = hd, .interleaved = true, .inv_freq = f.data()};
  Rope(pool, x.data(), 1, &pos, p);
  for (int i = 0; i < 3; ++i) {
    const double a = pos * f[i];
    EXPECT_NEAR(x[2 * i], orig[2 * i] * std::cos(a) - orig[2 * i + 1] * std::sin(a), 1e-4);
    EXPECT_NEAR(x[2 * i + 1], orig[2 * i + 1] * std::cos(a) + orig[2 * i] * std::sin(a), 1e-4);
  }
}

TEST(AddBias, AddsTheVectorToEveryRow) {
  ThreadPool pool(2);
  std::vector<float> y = {1, 2, 3, 4, 5, 6};
  const std::vector<uint16_t> bias = {F32ToBf16(0.5f), F32ToBf16(-1.f), F32ToBf16(2.f)};
  AddBias(pool, y.data(), 2, Tensor{bias.data(), DType::kBF16, 1, 3});
  EXPECT_EQ(y, (std::vector<float>{1.5f, 1.f, 5.f, 4.5f, 4.f, 8.f}));
}

TEST(MulSigmoid, ScalesRowsOrElements) {
  ThreadPool pool(1);
  std::vector<float> x = {2, 4, 6, 8};
  const std::vector<float> row_gate = {0.f, 100.f};  // σ = 0.5, ~1
  MulSigmoid(pool, x.data(), 2, 2, row_gate.data(), 1);
  EXPECT_FLOAT_EQ(x[0], 1.f);
  EXPECT_FLOAT_EQ(x[1], 2.f);
  EXPECT_FLOAT_EQ(x[2], 6.f);
  EXPECT_FLOAT_EQ(x[3], 8.f);
  std::vector<float> y = {2, 2};
  const std::vector<float> elem_gate = {0.f, -100.f};
  MulSigmoid(pool, y.data(), 1, 2, elem_gate.data(), 2);
  EXPECT_FLOAT_EQ(y[0], 1.f);
  EXPECT_NEAR(y[1], 0.f, 1e-30);
}

// SiTU experts of width w in and out over T tokens' rows z, each routed to K of the experts
// (gate/up/down, one tensor each), writing out.
MoeParams SiTUExperts(const std::vector<float>& z, int64_t T, int64_t w, const std::vector<int32_t>& ids,
                      const std::vector<float>& weights, int32_t K, const std::vector<Tensor>& gate,
                      const std::vector<Tensor>& up, const std::vector<Tensor>& down, std::vector<float>* out) {
  MoeParams p;
  p.z = z.data();
  p.num_tokens = T;
  p.in_width = p.out_width = w;
  p.topk_ids = ids.data();
  p.topk_weights = weights.data();
  p.top_k = K;
  p.num_experts = static_cast<int32_t>(gate.size());
  p.gate = gate.data();
  p.up = up.data();
  p.down = down.data();
  p.act = Activation::kSiTU;
  p.out = out->data();
  return p;
}

TEST(MoeExperts, EqualsPerTokenLoop) {
  ThreadPool pool(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int T = 7, K = 2, N = 5, w = 8, f = 70;
  std::vector<std::vector<float>> g(N, std::vector<float>(f * w)), u = g, dn(N, std::vector<float>(w * f));
  std::vector<Tensor> tg, tu, td;
  for (int e = 0; e < N; ++e) {
    for (auto* v : {&g[e], &u[e], &dn[e]})
      for (auto& a : *v) a = nd(rng) * 0.3f;
    tg.push_back({g[e].data(), DType::kF32, f, w});
    tu.push_back({u[e].data(), DType::kF32, f, w});
    td.push_back({dn[e].data(), DType::kF32, w, f});
  }
  std::vector<float> z(T * w), weights(T * K), out(T * w);
  for (auto& a : z) a = nd(rng);
  for (auto& a : weights) a = nd(rng);
  std::vector<int32_t> ids = {0, 3, 3, 1, 4, 0, 2, 3, 1, 0, 4, 2, 3, 4};
  std::vector<int64_t> counts(N, 0);
  MoeParams p = SiTUExperts(z, T, w, ids, weights, K, tg, tu, td, &out);
  p.tokens_per_expert = counts.data();
  MoeExperts(pool, p);
  EXPECT_EQ(counts, (std::vector<int64_t>{3, 2, 2, 4, 3}));
  for (int t = 0; t < T; ++t) {
    for (int c = 0; c < w; ++c) {
      double ref = 0;
      for (int k = 0; k < K; ++k) {
        const int e = ids[t * K + k];
        for (int j = 0; j < f; ++j) {
          double gs = 0, us = 0;
          for (int i = 0; i < w; ++i) {
            gs += g[e][j * w + i] * z[t * w + i];
            us += u[e][j * w + i] * z[t * w + i];
          }
          const double a = 1.0 / (1.0 + std::exp(-gs)) * std::tanh(gs) * us;
          ref += weights[t * K + k] * a * dn[e][c * f + j];
        }
      }
      ASSERT_NEAR(out[t * w + c], ref, 1e-4) << "t=" << t << " c=" << c;
    }
  }
}

// A busy expert's rows are split over several tasks (and a wide expert's columns too); every
// token's output is still bit for bit what it is when the token runs alone (batch invariance),
// with packed BF16 weights as the model uses them.
TEST(MoeExperts, BusyExpertsGiveEachTokenItsAloneResult) {
  ThreadPool pool(2);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  const int T = 150, K = 2, N = 3, w = 40, f = 200;
  std::vector<std::vector<uint16_t>> raw;
  std::vector<std::vector<unsigned char>> packed;
  std::vector<Tensor> tg, tu, td;
  for (int e = 0; e < N; ++e) {
    for (int which = 0; which < 3; ++which) {
      const int rows = which < 2 ? f : w, cols = which < 2 ? w : f;
      raw.emplace_back(rows * cols);
      for (auto& a : raw.back()) a = F32ToBf16(nd(rng) * 0.3f);
      const Tensor t{raw.back().data(), DType::kBF16, rows, cols};
      packed.emplace_back(PackedWeightBytes(t));
      (which == 0 ? tg : which == 1 ? tu : td).push_back(PackWeight(t, packed.back().data()));
    }
  }
  std::vector<float> z(T * w), weights(T * K), out(T * w);
  for (auto& a : z) a = nd(rng);
  for (auto& a : weights) a = nd(rng);
  std::vector<int32_t> ids(T * K);
  for (int t = 0; t < T; ++t) ids[t * K] = 0, ids[t * K + 1] = 1 + t % 2;  // expert 0 takes every token
  const MoeParams p = SiTUExperts(z, T, w, ids, weights, K, tg, tu, td, &out);
  MoeExperts(pool, p);
  for (int t = 0; t < T; ++t) {
    MoeParams one = p;
    std::vector<float> alone(w);
    one.z = z.data() + t * w;
    one.num_tokens = 1;
    one.topk_ids = ids.data() + t * K;
    one.topk_weights = weights.data() + t * K;
    one.out = alone.data();
    MoeExperts(pool, one);
    for (int c = 0; c < w; ++c) ASSERT_EQ(out[t * w + c], alone[c]) << "t=" << t << " c=" << c;
  }
}

}  // namespace
}  // namespace ls::cpu
