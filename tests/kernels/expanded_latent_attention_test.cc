// The CPU ops of MLA's expanded form and the latent attention microkernels: ExpandedLatentAttention
// equals a double-precision causal softmax over per-head keys [k_nope | shared k_rope] and values,
// whether the context comes in one tile or in several (online softmax), and a token's result does
// not depend on which other tokens share its work item (bit for bit); StoreLatentRows writes what
// PagedLatentAttention writes and LoadLatentRows reads it back. (The microkernels' bits on every SIMD
// target: simd_targets_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/latent_attention_core.h"
#include "kernels/dtype.h"
#include "tests/kernels/normal_values.h"

namespace ls {
namespace {

using test::NormalValues;

struct Expanded {
  int32_t H = 12, nope = 24, R = 16, v = 40, rope_stride = 20;
  int32_t context = 745;
  std::vector<float> q, k_nope, k_rope, values;  // q for every position of the context
  float scale = 0.15f;

  explicit Expanded(std::mt19937& rng)
      : q(NormalValues(static_cast<size_t>(context) * H * (nope + R), rng)),
        k_nope(NormalValues(static_cast<size_t>(context) * H * nope, rng)),
        k_rope(NormalValues(static_cast<size_t>(context) * rope_stride, rng)),
        values(NormalValues(static_cast<size_t>(context) * H * v, rng)) {}

  // Tokens start .. start + n − 1 of the context as one chunk, the keys in tiles of `tile`
  // positions: out [n, H, v].
  std::vector<float> Run(Backend& be, int32_t start, int32_t n, int32_t tile) const {
    const int32_t qh = nope + R;
    std::vector<float> out(static_cast<size_t>(n) * H * v, -7.f), state(static_cast<size_t>(n) * H * 2, -7.f);
    ExpandedLatentAttentionParams p;
    p.q = q.data() + static_cast<size_t>(start) * H * qh;
    p.out = out.data();
    p.state = state.data();
    p.num_heads = H;
    p.nope_dim = nope;
    p.rope_dim = R;
    p.v_dim = v;
    p.scale = scale;
    p.seq = AttentionSeq{0, n, start, nullptr, 0};
    p.k_rope_stride = rope_stride;
    const int32_t end = start + n;
    for (int32_t first = 0; first < end; first += tile) {
      p.first_key = first;
      p.num_keys = std::min(tile, end - first);
      p.k_nope = k_nope.data() + static_cast<size_t>(first) * H * nope;
      p.k_rope = k_rope.data() + static_cast<size_t>(first) * rope_stride;
      p.v = values.data() + static_cast<size_t>(first) * H * v;
      p.first_tile = first == 0;
      p.last_tile = first + p.num_keys == end;
      be.ExpandedLatentAttention(p);
    }
    return out;
  }

  // The worst head row's relative L2 error of out (tokens start .. start + n − 1) against double.
  double WorstError(const std::vector<float>& out, int32_t start, int32_t n) const {
    const int32_t qh = nope + R;
    double worst = 0;
    for (int32_t i = 0; i < n; ++i)
      for (int32_t h = 0; h < H; ++h) {
        const int32_t pos = start + i;
        const float* qt = q.data() + (static_cast<size_t>(pos) * H + h) * qh;
        std::vector<double> s(pos + 1);
        for (int32_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int32_t a = 0; a < nope; ++a) d += double(qt[a]) * k_nope[(static_cast<size_t>(j) * H + h) * nope + a];
          for (int32_t a = 0; a < R; ++a) d += double(qt[nope + a]) * k_rope[static_cast<size_t>(j) * rope_stride + a];
          s[j] = d * scale;
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        double diff = 0, norm = 0;
        for (int32_t a = 0; a < v; ++a) {
          double want = 0;
          for (int32_t j = 0; j <= pos; ++j) want += s[j] / sum * values[(static_cast<size_t>(j) * H + h) * v + a];
          const double got = out[(static_cast<size_t>(i) * H + h) * v + a];
          diff += (got - want) * (got - want);
          norm += want * want;
        }
        worst = std::max(worst, std::sqrt(diff / norm));
      }
    return worst;
  }
};

TEST(ExpandedLatentAttention, EqualsDoubleInOneTileOrMany) {
  std::mt19937 rng(41);
  const Expanded e(rng);
  CpuBackend be(2);
  for (const auto& [start, n] : {std::pair{700, 45}, std::pair{0, 37}}) {
    const auto one = e.Run(be, start, n, 4096);
    const auto tiles = e.Run(be, start, n, 256);
    EXPECT_LT(e.WorstError(one, start, n), 1e-5) << start;
    EXPECT_LT(e.WorstError(tiles, start, n), 1e-5) << start;
  }
}

TEST(ExpandedLatentAttention, TokenResultDoesNotDependOnItsNeighbours) {
  std::mt19937 rng(42);
  const Expanded e(rng);
  CpuBackend be(2);
  // Tokens 710 .. 744 run in a chunk from 700 and in one from 710: other tokens share their items.
  const auto wide = e.Run(be, 700, 45, 256), narrow = e.Run(be, 710, 35, 256);
  const size_t row = static_cast<size_t>(e.H) * e.v;
  EXPECT_TRUE(std::equal(narrow.begin(), narrow.end(), wide.begin() + 10 * row));
}

TEST(LatentRows, StoreWritesWhatAttentionWritesAndLoadReadsItBack) {
  std::mt19937 rng(43);
  const int32_t H = 3, L = 40, R = 8, W = L + R, block = 16, blocks = 12;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::vector<int32_t> table(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    const std::vector<AttentionSeq> seqs = {{0, 30, 5, table.data(), 6}, {30, 2, 80, table.data() + 6, 6}};
    const int32_t T = 32;
    const std::vector<float> c = NormalValues(static_cast<size_t>(T) * L, rng),
                             k = NormalValues(static_cast<size_t>(T) * R, rng);
    const std::vector<float> ql = NormalValues(static_cast<size_t>(T) * H * L, rng),
                             qr = NormalValues(static_cast<size_t>(T) * H * R, rng);
    const size_t bytes = static_cast<size_t>(blocks) * block * W * DTypeSize(dtype);
    std::vector<unsigned char> stored(bytes, 0), attended(bytes, 0);
    std::vector<float> out(static_cast<size_t>(T) * H * L);
    CpuBackend be(2);
    LatentAttentionParams p;
    p.q_latent = ql.data();
    p.q_rope = qr.data();
    p.q_rope_stride = R;
    p.c_new = c.data();
    p.k_rope_new = k.data();
    p.out = out.data();
    p.num_heads = H;
    p.latent_dim = L;
    p.rope_dim = R;
    p.seqs = seqs.data();
    p.num_seqs = 2;
    p.cache = KvLayer{attended.data(), nullptr, blocks, block, dtype};
    be.PagedLatentAttention(p);
    p.cache = KvLayer{stored.data(), nullptr, blocks, block, dtype};
    be.StoreLatentRows(p);
    EXPECT_EQ(stored, attended) << DTypeName(dtype);
    // The second sequence's rows 80, 81 as the cache holds them.
    std::vector<float> rows(2 * W);
    be.LoadLatentRows(p.cache, W, seqs[1], 80, 2, rows.data());
    for (int32_t i = 0; i < 2; ++i)
      for (int32_t j = 0; j < W; ++j) {
        const float want = j < L ? c[(30 + i) * L + j] : k[(30 + i) * R + j - L];
        EXPECT_EQ(rows[i * W + j], dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(want)) : want);
      }
  }
}

// The vector layer's e^x, over the range the softmax feeds it (its bits on every SIMD target:
// tests/kernels/simd_targets_test.cc).
TEST(LatentExp, IsWithinAFewUlpOfExp) {
  for (float x = -100.f; x <= 1.f; x += 0.013f)
    EXPECT_NEAR(cpu::internal::LatentExp(x), std::exp(x), 4e-7f * std::exp(x) + 1e-38f) << x;
}

}  // namespace
}  // namespace ls
