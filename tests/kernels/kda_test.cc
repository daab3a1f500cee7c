// Kimi Delta Attention on the CPU: the chunked (WY) form equals the token-by-token recurrence
// within float rounding on long runs of new tokens, including partial chunks and a state carried
// in from an earlier step; a run split over several steps (the state and the short convolution's
// inputs carried in the slot) equals the run in one step; and the recurrence equals a direct
// double-precision evaluation of the gated delta rule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

struct Inputs {
  int32_t H = 2, d = 16;
  std::vector<float> q, k, v, graw, beta, a_log, dt_bias;
};

Inputs Random(int32_t T, std::mt19937& rng) {
  Inputs in;
  std::normal_distribution<float> nd;
  auto fill = [&](std::vector<float>& x, size_t n, float scale) {
    x.resize(n);
    for (auto& e : x) e = nd(rng) * scale;
  };
  const size_t n = static_cast<size_t>(T) * in.H * in.d;
  fill(in.q, n, 1.f);
  fill(in.k, n, 1.f);
  fill(in.v, n, 1.f);
  fill(in.graw, n, 1.f);
  fill(in.beta, static_cast<size_t>(T) * in.H, 1.f);
  fill(in.a_log, in.H, 0.5f);
  fill(in.dt_bias, static_cast<size_t>(in.H) * in.d, 0.5f);
  return in;
}

// Runs the sequence's tokens [first, first + n) as one step (start_pos = first) over `state`.
std::vector<float> RunKda(const Inputs& in, int32_t first, int32_t n, int32_t chunk, std::vector<float>* state,
                       KdaGate gate = KdaGate::kSoftplus) {
  const int64_t width = static_cast<int64_t>(in.H) * in.d;
  std::vector<float> out(static_cast<size_t>(n) * width);
  const AttentionSeq seq{0, n, first, nullptr, 0, 0};
  KdaParams p;
  p.q = in.q.data() + first * width;
  p.k = in.k.data() + first * width;
  p.v = in.v.data() + first * width;
  p.graw = in.graw.data() + first * width;
  p.beta = in.beta.data() + static_cast<int64_t>(first) * in.H;
  p.out = out.data();
  p.num_heads = in.H;
  p.head_dim = in.d;
  p.a_log = Tensor{in.a_log.data(), DType::kF32, 1, in.H};
  p.dt_bias = Tensor{in.dt_bias.data(), DType::kF32, 1, width};
  p.gate = gate;
  p.lower_bound = -5.f;
  p.cache.state = state->data();
  p.cache.state_floats = static_cast<int64_t>(state->size());
  p.seqs = &seq;
  p.num_seqs = 1;
  p.chunk = chunk;
  ThreadPool pool(2);
  KdaAttention(pool, p);
  return out;
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

TEST(Kda, ChunkedFormEqualsTheRecurrence) {
  std::mt19937 rng(51);
  const int32_t T = 150;  // two whole chunks of 64 and a partial one
  const Inputs in = Random(T, rng);
  for (KdaGate gate : {KdaGate::kSoftplus, KdaGate::kBoundedSigmoid}) {
    std::vector<float> s_rec(static_cast<size_t>(in.H) * in.d * in.d), s_chunk(s_rec.size());
    const std::vector<float> rec = RunKda(in, 0, T, /*chunk=*/0, &s_rec, gate);
    const std::vector<float> chunk = RunKda(in, 0, T, /*chunk=*/64, &s_chunk, gate);
    EXPECT_LT(RelativeError(chunk, rec), 1e-5);
    EXPECT_LT(RelativeError(s_chunk, s_rec), 1e-5) << "final state";
    // From a state carried in (start_pos > 0): 100 more tokens, chunked and not.
    const Inputs more = Random(T + 100, rng);
    std::vector<float> a = s_rec, b = s_rec;
    Inputs both = more;
    const std::vector<float> r2 = RunKda(both, T, 100, 0, &a, gate), c2 = RunKda(both, T, 100, 32, &b, gate);
    EXPECT_LT(RelativeError(c2, r2), 1e-5);
  }
}

TEST(Kda, ARunSplitOverStepsEqualsOneStep) {
  std::mt19937 rng(52);
  const int32_t T = 90;
  const Inputs in = Random(T, rng);
  std::vector<float> one(static_cast<size_t>(in.H) * in.d * in.d), split(one.size());
  const std::vector<float> whole = RunKda(in, 0, T, 64, &one);
  std::vector<float> parts;
  for (auto [first, n] : {std::pair{0, 17}, std::pair{17, 70}, std::pair{87, 3}}) {
    const std::vector<float> o = RunKda(in, first, n, 64, &split);
    parts.insert(parts.end(), o.begin(), o.end());
  }
  EXPECT_LT(RelativeError(parts, whole), 1e-5);
  EXPECT_LT(RelativeError(split, one), 1e-5);
}

TEST(Kda, RecurrenceMatchesTheGatedDeltaRuleInDouble) {
  std::mt19937 rng(53);
  const int32_t T = 12;
  const Inputs in = Random(T, rng);
  std::vector<float> state(static_cast<size_t>(in.H) * in.d * in.d);
  const std::vector<float> got = RunKda(in, 0, T, 0, &state);
  const int32_t d = in.d;
  std::vector<double> want(got.size());
  for (int32_t h = 0; h < in.H; ++h) {
    std::vector<double> S(static_cast<size_t>(d) * d, 0.0);
    for (int32_t t = 0; t < T; ++t) {
      const size_t row = (static_cast<size_t>(t) * in.H + h) * d;
      double qn = 0, kn = 0;
      for (int32_t c = 0; c < d; ++c) qn += double(in.q[row + c]) * in.q[row + c], kn += double(in.k[row + c]) * in.k[row + c];
      const double beta = 1.0 / (1.0 + std::exp(-double(in.beta[static_cast<size_t>(t) * in.H + h])));
      std::vector<double> q(d), k(d), g(d), u(d, 0.0);
      for (int32_t c = 0; c < d; ++c) {
        q[c] = in.q[row + c] / std::sqrt(qn + 1e-6) / std::sqrt(double(d));
        k[c] = in.k[row + c] / std::sqrt(kn + 1e-6);
        const double x = in.graw[row + c] + in.dt_bias[static_cast<size_t>(h) * d + c];
        g[c] = -std::exp(double(in.a_log[h])) * (x > 20 ? x : std::log1p(std::exp(x)));
      }
      for (int32_t i = 0; i < d; ++i)
        for (int32_t j = 0; j < d; ++j) {
          S[i * d + j] *= std::exp(g[i]);
          u[j] += k[i] * S[i * d + j];
        }
      for (int32_t i = 0; i < d; ++i)
        for (int32_t j = 0; j < d; ++j) S[i * d + j] += k[i] * beta * (in.v[row + j] - u[j]);
      for (int32_t j = 0; j < d; ++j) {
        double o = 0;
        for (int32_t i = 0; i < d; ++i) o += q[i] * S[i * d + j];
        want[row + j] = o;
      }
    }
  }
  std::vector<float> wantf(want.begin(), want.end());
  EXPECT_LT(RelativeError(got, wantf), 1e-5);
}

// The short convolution over steps: outputs and carried inputs equal one step's.
TEST(ShortConv, StepsCarryTheirInputsInTheSlot) {
  std::mt19937 rng(54);
  std::normal_distribution<float> nd;
  const int32_t T = 20, C = 24, K = 4;
  std::vector<float> in(static_cast<size_t>(T) * C), w(static_cast<size_t>(C) * K);
  for (auto& e : in) e = nd(rng);
  for (auto& e : w) e = nd(rng);
  const Tensor weight{w.data(), DType::kF32, C, K};
  ThreadPool pool(2);
  auto run = [&](int32_t first, int32_t n, std::vector<float>* slot) {
    std::vector<float> out(static_cast<size_t>(n) * C);
    const AttentionSeq seq{0, n, first, nullptr, 0, 0};
    ShortConvParams p;
    p.in = in.data() + static_cast<size_t>(first) * C;
    p.out = out.data();
    p.channels = C;
    p.weight = &weight;
    p.kernel = K;
    p.cache.state = slot->data();
    p.cache.state_floats = static_cast<int64_t>(slot->size());
    p.tail_offset = 0;
    p.seqs = &seq;
    p.num_seqs = 1;
    ShortConv(pool, p);
    return out;
  };
  std::vector<float> slot_one(static_cast<size_t>(K - 1) * C, 7.f), slot_split = slot_one;  // stale values: start_pos 0 ignores them
  const std::vector<float> whole = run(0, T, &slot_one);
  std::vector<float> parts;
  for (auto [first, n] : {std::pair{0, 1}, std::pair{1, 2}, std::pair{3, 17}}) {
    const std::vector<float> o = run(first, n, &slot_split);
    parts.insert(parts.end(), o.begin(), o.end());
  }
  EXPECT_EQ(parts, whole);
  EXPECT_EQ(slot_split, slot_one);
  // Direct: out_t[c] = SiLU(Σ_j w[c, j] · in_{t−3+j}[c]).
  for (int32_t t = 0; t < T; ++t)
    for (int32_t c = 0; c < C; ++c) {
      double acc = 0;
      for (int32_t j = 0; j < K; ++j) {
        const int32_t m = t - (K - 1) + j;
        if (m >= 0) acc += double(w[c * K + j]) * in[static_cast<size_t>(m) * C + c];
      }
      const double want = acc / (1 + std::exp(-acc));
      ASSERT_NEAR(whole[static_cast<size_t>(t) * C + c], want, 1e-5 * (1 + std::fabs(want)));
    }
}

}  // namespace
}  // namespace ls::cpu
