// CPU paged attention: matches a double-precision softmax reference over a scrambled block table
// for head widths that are whole vectors (with 1, 2 and 4 query heads per pass over the cache),
// widths that end in a partial vector and one wider than the register-held form (288), with a
// float32 and with a BF16 cache (the reference reads the cache as the op left it, and the new K/V
// must be there rounded to nearest even). A prefill chunk, whose tokens the kernel takes in tiles
// that read the cache once for all of them, gives every token the bits it gets alone as a decode
// step. Run under every SIMD target by ctest.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu/attention_core.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

struct Case {
  int32_t H, Hkv, hd, ctx;
};

class PagedAttentionTest : public ::testing::TestWithParam<std::tuple<Case, DType>> {};

TEST_P(PagedAttentionTest, DecodeTokenMatchesDoubleReference) {
  const Case c = std::get<0>(GetParam());
  const bool bf16 = std::get<1>(GetParam()) == DType::kBF16;
  const int32_t block = 4, blocks = (c.ctx + block - 1) / block + 2;
  std::mt19937 rng(c.hd * 7 + c.ctx);
  std::normal_distribution<float> nd;
  const int64_t kvw = int64_t{c.Hkv} * c.hd;
  std::vector<float> kc(int64_t{blocks} * block * kvw), vc(kc.size());
  for (auto& v : kc) v = nd(rng);
  for (auto& v : vc) v = nd(rng);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> q(int64_t{c.H} * c.hd), kn(kvw), vn(kvw), out(q.size(), -99.f);
  for (auto* v : {&q, &kn, &vn})
    for (auto& x : *v) x = nd(rng);
  AttentionSeq s{0, 1, c.ctx - 1, table.data(), blocks};
  AttentionParams p;
  p.q = q.data();
  p.k_new = kn.data();
  p.v_new = vn.data();
  p.out = out.data();
  p.num_heads = c.H;
  p.num_kv_heads = c.Hkv;
  p.head_dim = c.hd;
  p.scale = 1.f / std::sqrt(static_cast<float>(c.hd));
  std::vector<uint16_t> kb(kc.size()), vb(vc.size());  // the BF16 cache
  for (size_t i = 0; i < kc.size(); ++i) kb[i] = F32ToBf16(kc[i]), vb[i] = F32ToBf16(vc[i]);
  p.cache = bf16 ? KvLayer{kb.data(), vb.data(), blocks, block, DType::kBF16} : KvLayer{kc.data(), vc.data(), blocks, block};
  p.seqs = &s;
  p.num_seqs = 1;
  ThreadPool pool(2);
  PagedAttention(pool, p);
  auto slot = [&](int32_t pos, int32_t kvh) {
    return (int64_t{table[pos / block]} * block + pos % block) * kvw + int64_t{kvh} * c.hd;
  };
  if (bf16) {  // the reference reads the cache as the op left it
    for (size_t i = 0; i < kc.size(); ++i) kc[i] = Bf16ToF32(kb[i]), vc[i] = Bf16ToF32(vb[i]);
    for (int32_t j = 0; j < kvw; ++j) {
      ASSERT_EQ(kb[slot(c.ctx - 1, 0) + j], F32ToBf16(kn[j])) << j;
      ASSERT_EQ(vb[slot(c.ctx - 1, 0) + j], F32ToBf16(vn[j])) << j;
    }
  }
  for (int32_t h = 0; h < c.H; ++h) {
    const int32_t kvh = h / (c.H / c.Hkv);
    std::vector<double> sc(c.ctx);
    double mx = -1e300, sum = 0;
    for (int32_t pos = 0; pos < c.ctx; ++pos) {
      double d = 0;
      for (int32_t j = 0; j < c.hd; ++j) d += double{q[h * c.hd + j]} * kc[slot(pos, kvh) + j];
      mx = std::max(mx, sc[pos] = d * p.scale);
    }
    for (auto& v : sc) sum += (v = std::exp(v - mx));
    for (int32_t j = 0; j < c.hd; ++j) {
      double ref = 0;
      for (int32_t pos = 0; pos < c.ctx; ++pos) ref += sc[pos] / sum * vc[slot(pos, kvh) + j];
      ASSERT_NEAR(out[h * c.hd + j], ref, 2e-5 * (1 + std::fabs(ref))) << "head " << h << " dim " << j;
    }
  }
}

// The chunk's `n` new tokens after `cached` positions, attended as one prefill chunk and as n
// decode steps over copies of the same cache: the same bits in every output and cache element.
TEST_P(PagedAttentionTest, PrefillChunkGivesEveryTokenItsDecodeBits) {
  const Case c = std::get<0>(GetParam());
  const DType dtype = std::get<1>(GetParam());
  const size_t elem = dtype == DType::kBF16 ? 2 : 4;
  for (int32_t window : {0, 29}) {
    const int32_t cached = c.ctx, n = 75, block = 16, blocks = (cached + n + block - 1) / block + 1;
    std::mt19937 rng(c.hd * 5 + c.ctx + window);
    std::normal_distribution<float> nd;
    const int64_t kvw = int64_t{c.Hkv} * c.hd, qw = int64_t{c.H} * c.hd;
    std::vector<unsigned char> kc(blocks * block * kvw * elem), vc(kc.size());
    for (auto* cache : {&kc, &vc}) {
      for (int64_t i = 0; i < blocks * block * kvw; ++i) {
        const float x = nd(rng);
        if (dtype == DType::kBF16) {
          const uint16_t b = F32ToBf16(x);
          std::memcpy(cache->data() + 2 * i, &b, 2);
        } else {
          std::memcpy(cache->data() + 4 * i, &x, 4);
        }
      }
    }
    std::vector<int32_t> table(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<float> q(n * qw), kn(n * kvw), vn(n * kvw);
    for (auto* v : {&q, &kn, &vn})
      for (auto& x : *v) x = nd(rng);
    ThreadPool pool(2);
    auto run = [&](std::vector<unsigned char>& k, std::vector<unsigned char>& v, int32_t first, int32_t count,
                   float* out) {
      AttentionSeq s{0, count, cached + first, table.data(), blocks};
      AttentionParams p;
      p.q = q.data() + first * qw;
      p.k_new = kn.data() + first * kvw;
      p.v_new = vn.data() + first * kvw;
      p.out = out;
      p.num_heads = c.H;
      p.num_kv_heads = c.Hkv;
      p.head_dim = c.hd;
      p.sliding_window = window;
      p.scale = 1.f / std::sqrt(static_cast<float>(c.hd));
      p.cache = KvLayer{k.data(), v.data(), blocks, block, dtype};
      p.seqs = &s;
      p.num_seqs = 1;
      PagedAttention(pool, p);
    };
    std::vector<unsigned char> k1 = kc, v1 = vc, k2 = kc, v2 = vc;
    std::vector<float> chunk(n * qw, -99.f), steps(n * qw, -99.f);
    run(k1, v1, 0, n, chunk.data());
    for (int32_t t = 0; t < n; ++t) run(k2, v2, t, 1, steps.data() + t * qw);
    ASSERT_EQ(k1, k2);
    ASSERT_EQ(v1, v2);
    for (int64_t i = 0; i < n * qw; ++i)
      ASSERT_EQ(std::memcmp(&chunk[i], &steps[i], 4), 0) << "token " << i / qw << " value " << i % qw << ": "
                                                         << chunk[i] << " vs " << steps[i] << ", window " << window;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Combine(::testing::Values(Case{4, 2, 64, 1}, Case{4, 2, 64, 37},
                                                              Case{8, 2, 128, 100}, Case{2, 2, 16, 17},
                                                              Case{6, 3, 48, 33}, Case{4, 1, 256, 20},
                                                              Case{8, 2, 32, 45} /* four heads per pass */,
                                                              Case{4, 1, 16, 9} /* four heads per pass */,
                                                              Case{2, 1, 40, 9} /* a partial last vector */,
                                                              Case{2, 1, 160, 9}, Case{4, 2, 24, 21},
                                                              Case{2, 1, 288, 7} /* wider than 16 vectors */),
                                            ::testing::Values(DType::kF32, DType::kBF16)));

}  // namespace
}  // namespace ls::cpu
